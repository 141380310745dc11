//! A member's word on the models of their own endpoint: the "Models" view of a key shows every
//! fact in force and where it came from ("you" for theirs), their override counts for their
//! runs only, and another member with an endpoint of the same name on another server is not
//! touched by it, nor by what the first one's server said. And Ollama's native model list
//! (`/api/tags`) where its OpenAI-compatible one is missing or empty.

use arbor::domain::accounts::{Actor, Role};
use serde_json::json;
use uuid::Uuid;

use crate::agent::{agent, says};
use crate::support::mock_upstream::{MockUpstream, Provider, RecordedRequest, Reply};
use crate::support::{TestApp, TestSession, urlencode};

const MODEL: &str = "mine/llama3.2:latest";

/// An Ollama server: its OpenAI-compatible list, `/api/show` answering `show`, and chat.
fn ollama(mock: &MockUpstream, show: serde_json::Value) {
    let show = show.to_string();
    mock.respond_with(Provider::OpenAi, move |r: &RecordedRequest| {
        match (r.method.as_str(), r.path_only()) {
            ("GET", "/openai/v1/models") => Reply::fixture("openai/models_ollama.json"),
            ("POST", "/openai/api/show") => Reply::json(200, show.clone()),
            ("POST", "/openai/v1/chat/completions") => says("From the endpoint."),
            _ => Reply::json(404, r#"{"error":"not found"}"#),
        }
    });
}

/// Adds the member's endpoint `mine` at `base`; returns the key's id.
async fn add_endpoint(app: &TestApp, s: &TestSession, base: &str) -> Uuid {
    let body = format!(
        "kind=openai_compatible&name=mine&base_url={}&label=Mine&key=sk-own-{}",
        urlencode(base),
        Uuid::new_v4().simple()
    );
    let res = app.post_form("/settings/keys", &body, Some(s)).await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    let at = html.find("/models\">Models</a>").expect("a Models link");
    let start = html[..at].rfind("/settings/keys/").unwrap() + "/settings/keys/".len();
    Uuid::parse_str(&html[start..at]).unwrap()
}

/// The table of facts of a Models page.
fn facts_table(html: &str) -> String {
    html.split("id=\"model-facts\"").nth(1).unwrap().split("</table>").next().unwrap().to_string()
}

fn row_of<'a>(table: &'a str, model: &str) -> &'a str {
    table.split(&format!("<code>{model}</code>")).nth(1).unwrap().split("</tr>").next().unwrap()
}

async fn override_rows(app: &TestApp) -> usize {
    crate::support::digest::tables(&app.state.db).await.get("member_model_overrides").map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_states_what_their_endpoints_model_can_do_and_no_other_member_is_affected() {
    let a = agent("auto-edit", |c| c.llm.member_base_url_allow = vec!["127.0.0.0/8".into()]).await;
    let app = &a.c.app;
    // Ada's Ollama says the model takes tools and images and reads 131,072 tokens.
    ollama(
        &a.c.mock,
        json!({ "capabilities": ["completion", "tools", "vision"],
        "model_info": { "general.architecture": "llama", "llama.context_length": 131072 } }),
    );
    let ada_key = add_endpoint(app, &a.c.s, &a.c.mock.url(Provider::OpenAi)).await;

    // The Models view lists what the endpoint lists; nothing of Ada's yet.
    let res = app.get(&format!("/settings/keys/{ada_key}/models"), Some(&a.c.s.cookie)).await;
    assert_eq!(res.status(), 200);
    let table = facts_table(&res.text().await.unwrap());
    assert!(
        table.contains("<code>llama3.2:latest</code>") && table.contains("<code>qwen3:8b</code>"),
        "{table}"
    );
    assert!(!table.contains("(you)"), "{table}");

    // Ada: no tools, and a 4,096-token window.
    let res = app
        .post_form(
            &format!("/settings/keys/{ada_key}/models"),
            "model=llama3.2%3Alatest&tools=no&context_window=4096",
            Some(&a.c.s),
        )
        .await;
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    assert!(page.contains("Saved what llama3.2:latest can do."), "{page}");
    let table = facts_table(&page);
    let row = row_of(&table, "llama3.2:latest");
    assert!(row.contains("no <span class=\"muted small source-member\">(you)</span>"), "{row}");
    assert!(row.contains("4096 <span class=\"muted small source-member\">(you)</span>"), "{row}");
    assert_eq!(override_rows(app).await, 1);

    // Her run sends no tools upstream, and the gauge uses her window, not the server's.
    a.c.send_ok("Write the plan", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let sent = a.c.mock.requests_for(Provider::OpenAi);
    let chat = sent.iter().rfind(|r| r.path_only() == "/openai/v1/chat/completions").unwrap().json().unwrap();
    assert_eq!(chat["model"], "llama3.2:latest");
    assert!(chat.get("tools").is_none(), "Ada said no tools: {chat}");
    assert!(sent.iter().any(|r| r.path_only() == "/openai/api/show"), "the server was asked");
    let session = app.get(&format!("/s/{}", a.c.session), Some(&a.c.s.cookie)).await.text().await.unwrap();
    assert!(session.contains(" of 4096 tokens"), "the gauge uses Ada's window");
    let ada = Actor::for_tests(&a.c.user);
    let providers = app.state.engine.providers();
    let m = providers.resolve(&ada, MODEL).await.unwrap();
    assert_eq!((m.info.tools, m.info.vision, m.info.context_window), (false, true, 4096));
    let table = facts_table(
        &app.get(&format!("/settings/keys/{ada_key}/models"), Some(&a.c.s.cookie))
            .await
            .text()
            .await
            .unwrap(),
    );
    let row = row_of(&table, "llama3.2:latest");
    assert!(
        row.contains("yes <span class=\"muted small source-provider\">(provider)</span>"),
        "vision: {row}"
    );

    // Bob names his endpoint "mine" too, on another server whose model is small and has no tools.
    let other = crate::support::mock_upstream::start().await.unwrap();
    ollama(
        &other,
        json!({ "capabilities": ["completion"],
        "model_info": { "general.architecture": "llama", "llama.context_length": 2048 } }),
    );
    let bob = app.create_user("bob@example.com", Role::Member).await;
    let bob_s = app.login_full(&bob).await;
    let bob_key = add_endpoint(app, &bob_s, &other.url(Provider::OpenAi)).await;
    let m = providers.resolve(&Actor::for_tests(&bob), MODEL).await.unwrap();
    assert_eq!(
        (m.info.tools, m.info.vision, m.info.context_window),
        (false, false, 2048),
        "his server's word"
    );
    assert!(other.requests().iter().any(|r| r.path_only() == "/openai/api/show"), "his server was asked");
    let table = facts_table(
        &app.get(&format!("/settings/keys/{bob_key}/models"), Some(&bob_s.cookie))
            .await
            .text()
            .await
            .unwrap(),
    );
    assert!(!table.contains("(you)"), "Ada's word is not Bob's: {table}");
    assert!(row_of(&table, "llama3.2:latest").contains("2048 <span class=\"muted small source-provider\">"));
    // Bob's server saying no tools and 2,048 tokens changed nothing for Ada.
    let m = providers.resolve(&ada, MODEL).await.unwrap();
    assert_eq!((m.info.tools, m.info.vision, m.info.context_window), (false, true, 4096));

    // Bob cannot read or change Ada's endpoint's models, nor can an admin.
    let root = app.create_user("root@example.com", Role::Admin).await;
    let root = app.login_full(&root).await;
    for s in [&bob_s, &root] {
        let path = format!("/settings/keys/{ada_key}/models");
        assert_eq!(app.get(&path, Some(&s.cookie)).await.status(), 404);
        assert_eq!(app.post_form(&path, "model=llama3.2%3Alatest&tools=yes", Some(s)).await.status(), 404);
    }
    // Nor does Ada's word reach an admin's provider of a model of that name.
    assert!(
        providers
            .facts("openai/llama3.2:latest")
            .iter()
            .all(|f| f.source != arbor::domain::providers::Source::Member)
    );

    // Clearing every field removes her word; deleting the key removes any left.
    let res = app
        .post_form(&format!("/settings/keys/{ada_key}/models"), "model=llama3.2%3Alatest", Some(&a.c.s))
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(override_rows(app).await, 0);
    let m = providers.resolve(&ada, MODEL).await.unwrap();
    assert_eq!((m.info.tools, m.info.context_window), (true, 131_072), "the server's word again");
    let res = app
        .post_form(
            &format!("/settings/keys/{ada_key}/models"),
            "model=qwen3%3A8b&reasoning=yes",
            Some(&a.c.s),
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(override_rows(app).await, 1);
    assert_eq!(
        app.post_form(&format!("/settings/keys/{ada_key}/delete"), "", Some(&a.c.s)).await.status(),
        200
    );
    assert_eq!(override_rows(app).await, 0);
    assert!(providers.member_override_of(ada_key, "qwen3:8b").is_none());
    assert!(a.c.mock.problems().is_empty() && other.problems().is_empty());
}

/// A run in a workspace whose owner attached her endpoint's key follows her word on its
/// models, whoever starts it; so does the context gauge its session page shows them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_a_key_attached_to_a_shared_workspace_follows_its_owners_word() {
    let a = agent("auto-edit", |c| c.llm.member_base_url_allow = vec!["127.0.0.0/8".into()]).await;
    let (app, db) = (&a.c.app, &a.c.app.state.db);
    ollama(
        &a.c.mock,
        json!({ "capabilities": ["completion", "tools"],
        "model_info": { "general.architecture": "llama", "llama.context_length": 131072 } }),
    );
    let key = add_endpoint(app, &a.c.s, &a.c.mock.url(Provider::OpenAi)).await;
    let path = format!("/settings/keys/{key}/models");
    let res =
        app.post_form(&path, "model=llama3.2%3Alatest&tools=no&context_window=4096", Some(&a.c.s)).await;
    assert_eq!(res.status(), 200);
    let ws = arbor::domain::sessions::Sessions::new(db.clone())
        .get_session(&Actor::for_tests(&a.c.user), a.c.session)
        .await
        .unwrap()
        .workspace_id;
    let eve = app.create_user("eve@example.com", Role::Member).await;
    let eve_s = app.login_full(&eve).await;
    let res = app
        .post_form(&format!("/w/{ws}/shares"), "kind=person&who=eve%40example.com&role=editor", Some(&a.c.s))
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        app.post_form(&format!("/w/{ws}/key"), &format!("key={key}"), Some(&a.c.s)).await.status(),
        200
    );

    let body = crate::runs::form("Hello", &Uuid::new_v4().simple().to_string(), MODEL);
    let res = app.post_form(&format!("/s/{}/messages", a.c.session), &body, Some(&eve_s)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(a.ended().await, "completed");
    let sent = a.c.mock.requests_for(Provider::OpenAi);
    let chat = sent.iter().rfind(|r| r.path_only() == "/openai/v1/chat/completions").unwrap().json().unwrap();
    assert!(chat.get("tools").is_none(), "Ada's word on her key: {chat}");
    let page = app.get(&format!("/s/{}", a.c.session), Some(&eve_s.cookie)).await.text().await.unwrap();
    assert!(page.contains(" of 4096 tokens"), "Eve's gauge uses Ada's window");
    // Eve's own calls elsewhere know nothing of Ada's endpoint.
    let err = app.state.engine.providers().resolve(&Actor::for_tests(&eve), MODEL).await.err().unwrap();
    assert!(err.to_string().contains("There is no provider"), "{err}");
    assert!(a.c.mock.problems().is_empty(), "{:?}", a.c.mock.problems());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_overrides_of_an_own_endpoint_are_refused_and_change_nothing() {
    let a = agent("auto-edit", |c| c.llm.member_base_url_allow = vec!["127.0.0.0/8".into()]).await;
    let app = &a.c.app;
    ollama(&a.c.mock, json!({}));
    let key = add_endpoint(app, &a.c.s, &a.c.mock.url(Provider::OpenAi)).await;
    let path = format!("/settings/keys/{key}/models");
    let long = "m".repeat(300);
    for (body, needle) in [
        ("model=llama3.2%3Alatest&context_window=abc".to_string(), "context window"),
        ("model=llama3.2%3Alatest&context_window=-5".into(), "context window"),
        ("model=llama3.2%3Alatest&context_window=99999999999".into(), "context window"),
        ("model=llama3.2%3Alatest&max_output=1.5".into(), "output limit"),
        ("model=llama3.2%3Alatest&context_window=1000&max_output=2000".into(), "cannot exceed"),
        ("model=llama3.2%3Alatest&tools=perhaps".into(), "tools"),
        ("model=llama3.2%3Alatest&input_price=1e999".into(), "input price"),
        ("model=llama3.2%3Alatest&output_price=-1".into(), "output price"),
        ("model=not-served%3A1b&tools=no".into(), "is not one of the models"),
        (format!("model={long}&tools=no"), "Name the model"),
        ("model=&tools=no".into(), "Name the model"),
        ("model=a%20b&tools=no".into(), "no spaces"),
    ] {
        let res = app.post_form(&path, &body, Some(&a.c.s)).await;
        assert_eq!(res.status(), 400, "{body}");
        let page = res.text().await.unwrap();
        assert!(page.contains(needle), "{body}: {page}");
    }
    // Wrong endpoint ids: not a key, not an id, someone else's.
    let bob = app.create_user("bob@example.com", Role::Member).await;
    let bob_s = app.login_full(&bob).await;
    for (id, s) in
        [(Uuid::now_v7().to_string(), &a.c.s), ("not-a-uuid".to_string(), &a.c.s), (key.to_string(), &bob_s)]
    {
        let path = format!("/settings/keys/{id}/models");
        assert_eq!(app.get(&path, Some(&s.cookie)).await.status(), 404, "{id}");
        assert_eq!(
            app.post_form(&path, "model=llama3.2%3Alatest&tools=no", Some(s)).await.status(),
            404,
            "{id}"
        );
    }
    // A key for an official provider the server offers at another address serves nothing:
    // its Models page says so, and its word is refused.
    let res = app
        .post_form("/settings/keys", "kind=openai&label=Mine&key=sk-own-official-0001", Some(&a.c.s))
        .await;
    assert_eq!(res.status(), 200);
    let official = app
        .state
        .keys
        .list(&Actor::for_tests(&a.c.user))
        .await
        .unwrap()
        .into_iter()
        .find(|k| k.provider == "openai")
        .unwrap()
        .id;
    let path = format!("/settings/keys/{official}/models");
    let page = app.get(&path, Some(&a.c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("takes the name, so this key is not used"), "{page}");
    let res = app.post_form(&path, "model=gpt-4o-mini&tools=no", Some(&a.c.s)).await;
    assert_eq!(res.status(), 400);
    assert_eq!(override_rows(app).await, 0);
    let audit = arbor::storage::repos::audit::list(
        &app.state.db,
        &arbor::storage::repos::audit::Filter {
            action: Some("key.model_override".into()),
            ..Default::default()
        },
        5,
    )
    .await
    .unwrap();
    assert!(audit.is_empty(), "{audit:?}");
}

/// An Ollama whose OpenAI-compatible list is missing (404) or empty is listed from its native
/// `GET /api/tags` (shape from Ollama's API reference, "List models"); embedding models stay
/// out of the picker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ollama_without_an_openai_model_list_is_listed_from_api_tags() {
    let a = agent("auto-edit", |c| c.llm.member_base_url_allow = vec!["127.0.0.0/8".into()]).await;
    let (app, mock) = (&a.c.app, &a.c.mock);
    // The settings page the new key comes back on lists its models for the picker.
    mock.enqueue(Provider::OpenAi, Reply::fixture("openai/models_ollama.json"));
    let key = add_endpoint(app, &a.c.s, &mock.url(Provider::OpenAi)).await;

    // `/v1/models` is not there: "Test" lists the two models `/api/tags` names.
    mock.enqueue(Provider::OpenAi, Reply::json(404, r#"404 page not found"#));
    mock.enqueue(Provider::OpenAi, Reply::fixture("openai/ollama_tags.json"));
    let res = app.post_form(&format!("/settings/keys/{key}/test"), "", Some(&a.c.s)).await;
    let html = res.text().await.unwrap();
    assert!(html.contains("the provider lists 2 models"), "{html}");

    // An empty `/v1/models`: the Models view and the picker show the chat model only.
    mock.enqueue(Provider::OpenAi, Reply::json(200, json!({ "object": "list", "data": [] }).to_string()));
    mock.enqueue(Provider::OpenAi, Reply::fixture("openai/ollama_tags.json"));
    let page =
        app.get(&format!("/settings/keys/{key}/models"), Some(&a.c.s.cookie)).await.text().await.unwrap();
    let table = facts_table(&page);
    assert!(table.contains("<code>gemma3:latest</code>") && !table.contains("nomic-embed-text"), "{table}");
    let choices = app.state.engine.providers().choices(&Actor::for_tests(&a.c.user)).await;
    assert!(choices.iter().any(|c| c.value == "mine/gemma3:latest"), "{choices:?}");
    let paths: Vec<String> = mock.requests_for(Provider::OpenAi).iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/openai/v1/models",
            "/openai/v1/models",
            "/openai/api/tags",
            "/openai/v1/models",
            "/openai/api/tags"
        ]
    );

    // A server that has neither says why: the first answer stands.
    mock.enqueue(Provider::OpenAi, Reply::json(404, r#"{"error":"no such route"}"#));
    mock.enqueue(Provider::OpenAi, Reply::json(404, r#"{"error":"no such route either"}"#));
    let res = app.post_form(&format!("/settings/keys/{key}/test"), "", Some(&a.c.s)).await;
    let html = res.text().await.unwrap();
    assert!(html.contains("no such route") && !html.contains("either"), "{html}");
    assert!(mock.problems().is_empty(), "{:?}", mock.problems());
}

/// The local Ollama detected at start: its models come from `/api/tags` when its `/v1/models`
/// is missing, and get their real capabilities from `/api/show`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detected_ollama_lists_its_models_from_api_tags() {
    let mock = crate::support::mock_upstream::start().await.unwrap();
    mock.enqueue(Provider::OpenAi, Reply::json(200, r#"{"version":"0.12.6"}"#));
    let base = format!("{}/openai", mock.base_url);
    let app = TestApp::spawn_with(|c| {
        crate::runs::use_mock(c, &mock);
        c.llm.detect_local_ollama = true;
        c.llm.local_ollama_url = base.clone();
    })
    .await;
    let user = app.create_user("ada@example.com", Role::Member).await;
    let actor = Actor::for_tests(&user);
    mock.enqueue(Provider::OpenAi, Reply::json(404, "404 page not found"));
    mock.enqueue(Provider::OpenAi, Reply::fixture("openai/ollama_tags.json"));
    let choices = app.state.engine.providers().choices(&actor).await;
    let ollama: Vec<&str> =
        choices.iter().filter(|c| c.value.starts_with("ollama/")).map(|c| c.value.as_str()).collect();
    assert_eq!(ollama, ["ollama/gemma3:latest"]);
    // Resolving asks `/v1/models` (missing) and `/api/show` for what the model can do.
    mock.enqueue(Provider::OpenAi, Reply::json(404, "404 page not found"));
    mock.enqueue(Provider::OpenAi, Reply::fixture("openai/ollama_show.json"));
    let m = app.state.engine.providers().resolve(&actor, "ollama/gemma3:latest").await.unwrap();
    assert_eq!((m.info.tools, m.info.vision, m.info.context_window), (true, true, 131_072));
    let paths: Vec<String> = mock.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/openai/api/version",
            "/openai/v1/models",
            "/openai/api/tags",
            "/openai/v1/models",
            "/openai/api/show"
        ]
    );
    assert!(mock.problems().is_empty(), "{:?}", mock.problems());
}
