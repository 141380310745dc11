//! A member's own provider keys: stored encrypted, shown as label and last four, used for their
//! own calls, replaceable, deletable and testable; endpoints they choose pass the SSRF guard.

use std::net::TcpListener;

use arbor::domain::accounts::Role;
use arbor::domain::sessions::tree::MessageStatus;
use sea_orm::{ConnectionTrait, EntityTrait, Statement};
use uuid::Uuid;

use crate::admin::enc;
use crate::runs::{chat_with, form, streaming_id};
use crate::support::TestApp;
use crate::support::mock_upstream::{Provider, Reply};

async fn secret_count(app: &TestApp) -> i64 {
    let db = &app.state.db;
    let row = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT COUNT(*) AS n FROM vault_secrets",
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get::<i64>("", "n").unwrap()
}

/// The id of the key whose row holds `last4`, from the settings page.
fn key_id(html: &str, last4: &str) -> Uuid {
    let at = html.rfind(&format!("…{last4}</code>")).unwrap_or_else(|| panic!("no key …{last4} in {html}"));
    let start = html[..at].rfind("id=\"key-").unwrap() + "id=\"key-".len();
    Uuid::parse_str(&html[start..start + 36]).unwrap()
}

#[tokio::test]
async fn a_member_stores_tests_uses_replaces_and_deletes_their_own_endpoint_key() {
    let chat = chat_with(|c| c.llm.member_base_url_allow = vec!["127.0.0.0/8".into()]).await;
    let app = &chat.app;
    let base = chat.mock.url(Provider::OpenAi);
    let body =
        format!("kind=openai_compatible&name=mine&base_url={}&label=Mine&key=sk-own-key-ABCD", enc(&base));
    let res = app.post_form("/settings/keys", &body, Some(&chat.s)).await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(!html.contains("sk-own-key-ABCD"), "the key came back");
    let id = key_id(&html, "ABCD");

    // The same name twice, a name of the server's providers, or a bad name: refused.
    for (body, status) in [
        (format!("kind=openai_compatible&name=mine&base_url={}&key=sk-x-1", enc(&base)), 409),
        (format!("kind=openai_compatible&name=openai&base_url={}&key=sk-x-1", enc(&base)), 400),
        (format!("kind=openai_compatible&name=Bad%20Name&base_url={}&key=sk-x-1", enc(&base)), 400),
        ("kind=openai&key=".to_string(), 400),
        ("kind=sorcery&key=sk-x-1".to_string(), 400),
    ] {
        let res = app.post_form("/settings/keys", &body, Some(&chat.s)).await;
        assert_eq!(res.status(), status, "{body}");
        assert!(res.headers().get("hx-retarget").is_none(), "only htmx requests are retargeted");
    }

    // "Test" lists the models with the key.
    chat.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/models.json"));
    let res = app.post_form(&format!("/settings/keys/{id}/test"), "", Some(&chat.s)).await;
    let html = res.text().await.unwrap();
    assert!(html.contains("The key works"), "{html}");
    let sent = chat.mock.requests_for(Provider::OpenAi);
    assert_eq!(sent.last().unwrap().header("authorization"), Some("Bearer sk-own-key-ABCD"));

    // Their sessions can use it.
    chat.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = app
        .post_form(
            &format!("/s/{}/messages", chat.session),
            &form("Hi", &Uuid::new_v4().simple().to_string(), "mine/gpt-4o-mini"),
            Some(&chat.s),
        )
        .await;
    assert_eq!(res.status(), 200);
    let answer = chat.settled(streaming_id(&res.text().await.unwrap())).await;
    assert_eq!(answer.status, MessageStatus::Complete, "{answer:?}");
    assert_eq!(
        chat.mock.requests_for(Provider::OpenAi).last().unwrap().header("authorization"),
        Some("Bearer sk-own-key-ABCD")
    );

    // Renaming with a blank key keeps the stored value; a new value replaces it.
    let before = arbor::storage::entities::vault_secret::Entity::find_by_id(id)
        .one(&app.state.db)
        .await
        .unwrap()
        .unwrap();
    let res = app.post_form(&format!("/settings/keys/{id}"), "label=Renamed&key=", Some(&chat.s)).await;
    assert_eq!(res.status(), 200);
    let after = arbor::storage::entities::vault_secret::Entity::find_by_id(id)
        .one(&app.state.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((after.ciphertext, after.label.as_str()), (before.ciphertext, "Renamed"));
    let res =
        app.post_form(&format!("/settings/keys/{id}"), "label=&key=sk-own-key-WXYZ", Some(&chat.s)).await;
    assert!(res.text().await.unwrap().contains("…WXYZ"));

    // Another member cannot see, test, replace or delete it.
    let other = app.create_user("eve@example.com", Role::Member).await;
    let eve = app.login_full(&other).await;
    assert!(!app.get("/settings", Some(&eve.cookie)).await.text().await.unwrap().contains("WXYZ"));
    for path in [
        format!("/settings/keys/{id}/test"),
        format!("/settings/keys/{id}"),
        format!("/settings/keys/{id}/delete"),
    ] {
        assert_eq!(app.post_form(&path, "key=sk-evil-0000", Some(&eve)).await.status(), 404, "{path}");
    }

    // Deleting removes the ciphertext too; the audit log recorded each change without a value.
    let res = app.post_form(&format!("/settings/keys/{id}/delete"), "", Some(&chat.s)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(secret_count(app).await, 0);
    let rows = arbor::storage::repos::audit::list(
        &app.state.db,
        &arbor::storage::repos::audit::Filter { action: Some("key.".into()), ..Default::default() },
        20,
    )
    .await
    .unwrap();
    let actions: Vec<&str> = rows.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions, ["key.delete", "key.replace", "key.relabel", "key.add"]);
    assert!(rows.iter().all(|r| !r.details.contains("sk-own-key")));
}

#[tokio::test]
async fn a_member_endpoint_on_a_private_address_is_refused_before_any_connection() {
    let app = TestApp::spawn().await;
    let user = app.create_user("ada@example.com", Role::Member).await;
    let s = app.login_full(&user).await;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    for url in [
        format!("http://127.0.0.1:{port}/v1"),
        format!("http://localhost:{port}/v1"),
        format!("http://2130706433:{port}/v1"),
        format!("http://[::ffff:127.0.0.1]:{port}/v1"),
        "http://169.254.169.254/latest".to_string(),
        "http://10.0.0.8/v1".to_string(),
        "file:///etc/passwd".to_string(),
    ] {
        let body = format!("kind=openai_compatible&name=inside&base_url={}&key=sk-x-12345", enc(&url));
        let res = app.post_form("/settings/keys", &body, Some(&s)).await;
        assert_eq!(res.status(), 400, "{url}");
        let text = res.text().await.unwrap();
        assert!(text.contains("allowed"), "{url}: {text}");
    }
    assert_eq!(secret_count(&app).await, 0, "nothing was stored");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a connection was made"
    );
}

#[tokio::test]
async fn the_default_model_is_one_the_member_may_use() {
    let chat = chat_with(|_| {}).await;
    let app = &chat.app;
    let res = app.post_form("/settings/model", "model=gemini%2Fgemini-2.5-flash", Some(&chat.s)).await;
    assert_eq!(res.status(), 200);
    let html = app.get("/settings", Some(&chat.s.cookie)).await.text().await.unwrap();
    assert!(html.contains("value=\"gemini/gemini-2.5-flash\" selected"), "{html}");
    let actor = arbor::domain::accounts::Actor::for_tests(&chat.user);
    assert_eq!(
        app.state.engine.providers().default_model(&actor).await.as_deref(),
        Some("gemini/gemini-2.5-flash")
    );
    let res = app.post_form("/settings/model", "model=nowhere%2Fmodel", Some(&chat.s)).await;
    assert_eq!(res.status(), 400);
    let res = app.post_form("/settings/model", "model=", Some(&chat.s)).await;
    assert_eq!(res.status(), 200);
    // Cleared: the first model of the first provider again.
    assert_eq!(
        app.state.engine.providers().default_model(&actor).await.as_deref(),
        Some("anthropic/claude-sonnet-4-5")
    );
}

#[tokio::test]
async fn the_theme_is_the_members_own_and_only_system_light_or_dark() {
    let chat = chat_with(|_| {}).await;
    let app = &chat.app;
    let html = app.get("/settings", Some(&chat.s.cookie)).await.text().await.unwrap();
    assert!(
        html.contains("data-theme=\"system\"") && html.contains("media=\"(prefers-color-scheme: dark)\"")
    );
    let res = app.post_form("/settings/theme", "theme=dark", Some(&chat.s)).await;
    assert_eq!(res.status(), 303);
    let html = app.get("/", Some(&chat.s.cookie)).await.text().await.unwrap();
    assert!(html.contains("<html lang=\"en\" data-theme=\"dark\">"), "{html}");
    assert!(html.contains("content=\"dark\"") && !html.contains("(prefers-color-scheme: dark)"));
    // Bad input: refused with the form's message, nothing changed.
    for bad in ["theme=purple", "theme=", "other=1", "theme=DARK"] {
        let res = app.post_form("/settings/theme", bad, Some(&chat.s)).await;
        assert_eq!(res.status(), 400, "{bad}");
        assert!(res.text().await.unwrap().contains("Choose the system setting, light or dark."), "{bad}");
    }
    let res = app.post_form("/settings/theme", "theme=dark%00", Some(&chat.s)).await;
    assert_eq!(res.status(), 400, "a NUL is refused before the handler");
    let html = app.get("/settings", Some(&chat.s.cookie)).await.text().await.unwrap();
    assert!(html.contains("<option value=\"dark\" selected>Dark</option>"), "{html}");
    // Another member still follows their device.
    let other = app.create_user("bob@example.com", arbor::domain::accounts::Role::Member).await;
    let cookie = app.login(&other).await;
    let html = app.get("/", Some(&cookie)).await.text().await.unwrap();
    assert!(html.contains("data-theme=\"system\""));
}

#[tokio::test]
async fn the_model_picker_groups_by_provider_and_says_what_each_model_can_do() {
    let chat = chat_with(|_| {}).await;
    let html = chat.app.get("/", Some(&chat.s.cookie)).await.text().await.unwrap();
    let picker = &html[html.find("id=\"composer-model\"").unwrap()..];
    let picker = &picker[..picker.find("</select>").unwrap()];
    assert_eq!(picker.matches("<optgroup label=").count(), 3, "one group per provider: {picker}");
    assert_eq!(picker.matches("<optgroup").count(), picker.matches("</optgroup>").count());
    assert!(
        picker.contains(">GPT-4o mini — tools · vision · 128k context · $0.15 / $0.6 per M tokens</option>"),
        "{picker}"
    );
    assert!(picker.contains("Gemini 2.5 Flash — tools · vision · reasoning · 1M context"), "{picker}");
    // The workspace's default model is named as such.
    let actor = arbor::domain::accounts::Actor::for_tests(&chat.user);
    let ws = chat.app.state.sessions.default_workspace(&actor).await.unwrap();
    let res = chat
        .app
        .post_form(
            &format!("/w/{}", ws.id),
            "name=Personal&system_prompt=&default_model=openai%2Fgpt-4o-mini&approval_mode=suggest",
            Some(&chat.s),
        )
        .await;
    assert!(res.status().is_success() || res.status().is_redirection(), "{}", res.status());
    let html = chat.app.get("/", Some(&chat.s.cookie)).await.text().await.unwrap();
    assert!(html.contains(">GPT-4o mini (workspace default) — tools"), "{html}");
}
