//! The admin console over HTTP: shared provider keys used by members, round-robin on 429,
//! visibility and enabled models, quotas, users (status, role, deletion), usage and the
//! append-only audit log.

use arbor::domain::accounts::Role;
use arbor::domain::sessions::tree::MessageStatus;
use sea_orm::ConnectionTrait;
use uuid::Uuid;

use crate::runs::{Chat, chat_with, form, streaming_id};
use crate::support::mock_upstream::{Provider, Reply};
use crate::support::{TestApp, TestSession};

/// Percent-encodes a form value.
pub(crate) use crate::support::urlencode as enc;

/// The id in `/admin/providers/{id}` of a redirect.
fn provider_id_from(res: &reqwest::Response) -> Uuid {
    let location = res
        .headers()
        .get("location")
        .or_else(|| res.headers().get("hx-redirect"))
        .and_then(|v| v.to_str().ok())
        .expect("a redirect")
        .to_string();
    Uuid::parse_str(location.trim_start_matches("/admin/providers/")).expect("provider id")
}

/// Adds an OpenAI-kind provider named `name` at the mock, with `models`, through the console.
pub(crate) async fn add_provider(
    app: &TestApp,
    admin: &TestSession,
    name: &str,
    base_url: &str,
    extra: &str,
) -> Uuid {
    let body = format!(
        "name={name}&label=Team&kind=openai&base_url={}&visibility=everyone&models=gpt-4o-mini&enabled=on{extra}",
        enc(base_url)
    );
    let res = app.post_form("/admin/providers", &body, Some(admin)).await;
    assert_eq!(res.status(), 303, "{}", res.text().await.unwrap());
    provider_id_from(&res)
}

pub(crate) async fn add_shared_key(
    app: &TestApp,
    admin: &TestSession,
    provider: Uuid,
    label: &str,
    key: &str,
) {
    let res = app
        .post_form(
            &format!("/admin/providers/{provider}/keys"),
            &format!("label={label}&key={}", enc(key)),
            Some(admin),
        )
        .await;
    let status = res.status();
    let html = res.text().await.unwrap();
    assert_eq!(status, 200, "{html}");
    assert!(!html.contains(key), "the key came back in the page");
    assert!(html.contains(&format!("…{}", &key[key.len() - 4..])), "last four shown: {html}");
}

struct Console {
    chat: Chat,
    admin: TestSession,
}

async fn console() -> Console {
    let chat = chat_with(|_| {}).await;
    let admin_user = chat.app.create_user("root@example.com", Role::Admin).await;
    let admin = chat.app.login_full(&admin_user).await;
    Console { chat, admin }
}

async fn send(chat: &Chat, text: &str, model: &str) -> reqwest::Response {
    chat.app
        .post_form(
            &format!("/s/{}/messages", chat.session),
            &form(text, &Uuid::new_v4().simple().to_string(), model),
            Some(&chat.s),
        )
        .await
}

#[tokio::test]
async fn a_member_uses_a_shared_key_and_the_usage_page_and_audit_log_show_it() {
    let Console { chat, admin } = console().await;
    let base = chat.mock.url(Provider::OpenAi);
    let provider = add_provider(&chat.app, &admin, "team", &base, "").await;
    add_shared_key(&chat.app, &admin, provider, "first", "sk-team-key-AAAA1111").await;

    // The member's picker offers the model; the answer is made with the shared key.
    let page =
        chat.app.get(&format!("/s/{}", chat.session), Some(&chat.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("value=\"team/gpt-4o-mini\""), "picker lacks the shared model");
    chat.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = send(&chat, "Hello", "team/gpt-4o-mini").await;
    assert_eq!(res.status(), 200);
    let answer = chat.settled(streaming_id(&res.text().await.unwrap())).await;
    assert_eq!(answer.status, MessageStatus::Complete, "{answer:?}");
    let sent = chat.mock.requests_for(Provider::OpenAi);
    assert_eq!(sent.last().unwrap().header("authorization"), Some("Bearer sk-team-key-AAAA1111"));

    // The usage page and its CSV count the request for that person, model and group.
    let db = &chat.app.state.db;
    let root = arbor::storage::repos::users::find_by_email(db, "root@example.com").await.unwrap();
    let proof = arbor::domain::accounts::Actor::for_tests(&root[0].0).admin().unwrap();
    let origin = arbor::domain::audit::Origin::cli();
    let research = chat.app.state.teams.groups.create(&proof, &origin, "research").await.unwrap();
    chat.app.state.teams.groups.add_member(&proof, &origin, research.id, "ada@example.com").await.unwrap();
    let usage = chat.app.get("/admin/usage?days=7", Some(&admin.cookie)).await;
    assert_eq!(usage.status(), 200);
    let html = usage.text().await.unwrap();
    assert!(html.contains("team/gpt-4o-mini"), "{html}");
    assert!(html.contains("ada@example.com"));
    assert!(html.contains("<svg"), "charts are rendered on the server");
    let per_group = &html[html.find("id=\"usage-groups\"").unwrap()..];
    assert!(per_group[..per_group.find("</table>").unwrap()].contains("<td>research</td>"), "{html}");
    let csv = chat.app.get("/admin/usage.csv?days=7", Some(&admin.cookie)).await;
    assert_eq!(csv.headers()["content-type"], "text/csv; charset=utf-8");
    assert!(csv.headers()["content-disposition"].to_str().unwrap().starts_with("attachment;"));
    let csv = csv.text().await.unwrap();
    assert!(csv.starts_with("day,user,groups,model,via,requests,tokens_in,tokens_out,cost_usd\r\n"));
    assert!(csv.contains("\"ada@example.com\",\"research\",\"team/gpt-4o-mini\",\"ui\",1,"), "{csv}");
    // A member may not read either.
    assert_eq!(chat.app.get("/admin/usage", Some(&chat.s.cookie)).await.status(), 403);

    // The audit log holds the provider's creation, the key's addition (never its value) and
    // the decryption for the call, with who and from where.
    let audit = chat.app.get("/admin/audit", Some(&admin.cookie)).await.text().await.unwrap();
    for action in ["provider.create", "provider.key_add", "vault.decrypt"] {
        assert!(audit.contains(action), "audit lacks {action}");
    }
    assert!(!audit.contains("sk-team-key-AAAA1111"));
    let only_keys =
        chat.app.get("/admin/audit?action=provider.key", Some(&admin.cookie)).await.text().await.unwrap();
    assert!(only_keys.contains("provider.key_add") && !only_keys.contains("provider.create"));
}

#[tokio::test]
async fn a_rate_limited_shared_key_rests_and_the_next_key_answers() {
    let Console { chat, admin } = console().await;
    let provider = add_provider(&chat.app, &admin, "team", &chat.mock.url(Provider::OpenAi), "").await;
    add_shared_key(&chat.app, &admin, provider, "one", "sk-shared-ONE-1111").await;
    add_shared_key(&chat.app, &admin, provider, "two", "sk-shared-TWO-2222").await;
    let limited = chat.mock.fixture_text("openai/error_429.json").unwrap();
    chat.mock.enqueue(
        Provider::OpenAi,
        Reply::Json { status: 429, headers: vec![("retry-after".into(), "30".into())], body: limited },
    );
    chat.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = send(&chat, "Hello", "team/gpt-4o-mini").await;
    assert_eq!(res.status(), 200);
    let answer = chat.settled(streaming_id(&res.text().await.unwrap())).await;
    assert_eq!(answer.status, MessageStatus::Complete, "{answer:?}");
    let keys: Vec<String> = chat
        .mock
        .requests_for(Provider::OpenAi)
        .iter()
        .filter_map(|r| r.header("authorization").map(str::to_string))
        .collect();
    assert_eq!(
        keys,
        ["Bearer sk-shared-ONE-1111", "Bearer sk-shared-TWO-2222"],
        "no waiting on the limited key"
    );

    // While the first key rests, the round-robin skips it on every call.
    for text in ["Again", "Third"] {
        chat.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
        let res = send(&chat, text, "team/gpt-4o-mini").await;
        chat.settled(streaming_id(&res.text().await.unwrap())).await;
        let last = chat
            .mock
            .requests_for(Provider::OpenAi)
            .last()
            .unwrap()
            .header("authorization")
            .map(str::to_string);
        assert_eq!(last.as_deref(), Some("Bearer sk-shared-TWO-2222"), "{text}");
    }

    // The console shows the rest (written in the background).
    let mut shown = false;
    for _ in 0..50 {
        let page = chat
            .app
            .get(&format!("/admin/providers/{provider}"), Some(&admin.cookie))
            .await
            .text()
            .await
            .unwrap();
        if page.contains("UTC</td>") {
            shown = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(shown, "the resting key is not shown as resting");
}

#[tokio::test]
async fn visibility_and_enabled_models_limit_who_uses_what() {
    let Console { chat, admin } = console().await;
    let base = chat.mock.url(Provider::OpenAi);
    let provider = add_provider(&chat.app, &admin, "private", &base, "").await;
    add_shared_key(&chat.app, &admin, provider, "k", "sk-private-9999").await;
    let body = format!(
        "label=Private&kind=openai&base_url={}&visibility=admins&models=gpt-4o-mini&enabled=on",
        enc(&base)
    );
    let res = chat.app.post_form(&format!("/admin/providers/{provider}"), &body, Some(&admin)).await;
    assert_eq!(res.status(), 200);

    let res = send(&chat, "Hello", "private/gpt-4o-mini").await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("not available to you"));
    let page =
        chat.app.get(&format!("/s/{}", chat.session), Some(&chat.s.cookie)).await.text().await.unwrap();
    assert!(!page.contains("private/gpt-4o-mini"), "the picker offers a hidden provider");

    // Listed users may; a model that is not enabled may not be used by anyone.
    let body = format!(
        "label=Private&kind=openai&base_url={}&visibility=users&allowed_emails=ada%40example.com&models=gpt-4o-mini&enabled=on",
        enc(&base)
    );
    assert_eq!(
        chat.app.post_form(&format!("/admin/providers/{provider}"), &body, Some(&admin)).await.status(),
        200
    );
    let res = send(&chat, "Hello", "private/gpt-4.1").await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("not enabled"));
    chat.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = send(&chat, "Hello", "private/gpt-4o-mini").await;
    assert_eq!(res.status(), 200);
    chat.settled(streaming_id(&res.text().await.unwrap())).await;

    // Turned off: nobody.
    let body = format!("label=Private&kind=openai&base_url={}&visibility=everyone&models=", enc(&base));
    assert_eq!(
        chat.app.post_form(&format!("/admin/providers/{provider}"), &body, Some(&admin)).await.status(),
        200
    );
    let res = send(&chat, "Hello", "private/gpt-4o-mini").await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("turned off"));

    // Bad input is refused with the reason, and nothing changes.
    for (body, needle) in [
        ("name=Bad%20Name&kind=openai", "lower-case letters"),
        ("name=openai&kind=openai", "already a provider"),
        ("name=x1&kind=nope", "kind of provider"),
        ("name=x2&kind=openai_compatible", "needs a base URL"),
        ("name=x3&kind=openai&base_url=file%3A%2F%2F%2Fetc", "http:// or https://"),
        ("name=x4&kind=openai&rpm=-3", "whole number"),
        (
            "name=x5&kind=openai&visibility=users&allowed_emails=ghost%40example.com",
            "no user ghost@example.com",
        ),
    ] {
        let res = chat.app.post_form("/admin/providers", body, Some(&admin)).await;
        assert!(res.status() == 400 || res.status() == 409, "{body}: {}", res.status());
        assert!(res.text().await.unwrap().contains(needle), "{body}");
    }
    // An empty shared key is refused and stores nothing.
    let res =
        chat.app.post_form(&format!("/admin/providers/{provider}/keys"), "label=x&key=", Some(&admin)).await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("cannot be empty"));
    // Out-of-range periods and malformed cursors are refused, not served.
    for path in ["/admin/usage?days=0", "/admin/usage.csv?days=9999", "/admin/audit?before=not-a-uuid"] {
        assert_eq!(chat.app.get(path, Some(&admin.cookie)).await.status(), 400, "{path}");
    }
    let listed = chat
        .app
        .state
        .admin
        .list_providers(
            &arbor::domain::accounts::Actor::for_tests(&arbor::domain::accounts::User {
                id: Uuid::nil(),
                email: "root@example.com".into(),
                display_name: "root".into(),
                role: Role::Admin,
                status: arbor::domain::accounts::UserStatus::Active,
                theme: Default::default(),
            })
            .admin()
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
}

#[tokio::test]
async fn rate_limits_and_quotas_refuse_before_anything_is_written() {
    let Console { chat, admin } = console().await;
    let provider = add_provider(&chat.app, &admin, "team", &chat.mock.url(Provider::OpenAi), "&rpm=1").await;
    add_shared_key(&chat.app, &admin, provider, "k", "sk-rate-limit-7777").await;
    chat.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = send(&chat, "One", "team/gpt-4o-mini").await;
    assert_eq!(res.status(), 200);
    chat.settled(streaming_id(&res.text().await.unwrap())).await;
    let before = chat.messages().await.len();
    let res = send(&chat, "Two", "team/gpt-4o-mini").await;
    assert_eq!(res.status(), 429);
    assert!(res.headers().get("retry-after").is_some());
    assert!(res.text().await.unwrap().contains("faster than its limit"));
    assert_eq!(chat.messages().await.len(), before, "a refused message was stored");

    // A daily token quota that the first exchange used up: refused with the reason.
    let res = chat.app.post_form("/admin/quotas", "tokens_day=5", Some(&admin)).await;
    assert_eq!(res.status(), 200);
    let res = send(&chat, "Three", "openai/gpt-4o-mini").await;
    assert_eq!(res.status(), 429);
    let text = res.text().await.unwrap();
    assert!(text.contains("daily allowance of 5 tokens"), "{text}");
    assert_eq!(chat.messages().await.len(), before);
    assert_eq!(chat.mock.requests_for(Provider::OpenAi).len(), 1, "a refused call reached the provider");

    // A per-user quota overrides the default; "use the default" removes it again.
    let res =
        chat.app.post_form("/admin/quotas", "email=ada%40example.com&tokens_day=1000000", Some(&admin)).await;
    assert_eq!(res.status(), 200);
    chat.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = send(&chat, "Four", "openai/gpt-4o-mini").await;
    assert_eq!(res.status(), 200);
    chat.settled(streaming_id(&res.text().await.unwrap())).await;
    let res = chat.app.post_form("/admin/quotas", "email=ada%40example.com&inherit=on", Some(&admin)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(send(&chat, "Five", "openai/gpt-4o-mini").await.status(), 429);

    for body in ["tokens_day=-1", "dollars_month=abc", "email=ghost%40example.com&tokens_day=1"] {
        assert_eq!(chat.app.post_form("/admin/quotas", body, Some(&admin)).await.status(), 400, "{body}");
    }
    let page = chat.app.get("/admin/quotas", Some(&admin.cookie)).await.text().await.unwrap();
    assert!(page.contains("value=\"5\""), "the default is shown");
}

#[tokio::test]
async fn admins_disable_promote_and_delete_users_and_members_cannot_raise_themselves() {
    let Console { chat, admin } = console().await;
    let app = &chat.app;
    let ada = chat.user.clone();

    // A member posting extra fields to their own forms stays a member.
    let res = app.post_form("/settings/model", "model=&role=admin&status=active", Some(&chat.s)).await;
    assert_eq!(res.status(), 200);
    let res = app.post_form(&format!("/admin/users/{}/role", ada.id), "role=admin", Some(&chat.s)).await;
    assert_eq!(res.status(), 403);
    let stored = arbor::storage::repos::users::find(&app.state.db, ada.id).await.unwrap().unwrap();
    assert_eq!(stored.role, Role::Member);

    // Search finds by email or name.
    let page = app.get("/admin/users?q=ada", Some(&admin.cookie)).await.text().await.unwrap();
    assert!(page.contains("ada@example.com") && !page.contains("root@example.com</td>"));

    // Disable: her session ends at once; enable again.
    let res = app.post_form(&format!("/admin/users/{}/status", ada.id), "active=0", Some(&admin)).await;
    assert_eq!(res.status(), 200);
    assert_ne!(app.get("/settings", Some(&chat.s.cookie)).await.status(), 200);
    assert_eq!(
        app.post_form(&format!("/admin/users/{}/status", ada.id), "active=1", Some(&admin)).await.status(),
        200
    );
    assert_eq!(
        app.post_form(&format!("/admin/users/{}/status", ada.id), "active=maybe", Some(&admin))
            .await
            .status(),
        400
    );

    // Promote and demote; the last admin stays.
    let root = arbor::storage::repos::users::find_by_email(&app.state.db, "root@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap()
        .0;
    assert_eq!(
        app.post_form(&format!("/admin/users/{}/role", root.id), "role=member", Some(&admin)).await.status(),
        400
    );
    assert_eq!(
        app.post_form(&format!("/admin/users/{}/role", ada.id), "role=admin", Some(&admin)).await.status(),
        200
    );
    assert_eq!(
        app.post_form(&format!("/admin/users/{}/role", ada.id), "role=member", Some(&admin)).await.status(),
        200
    );
    assert_eq!(
        app.post_form(&format!("/admin/users/{}/role", ada.id), "role=owner", Some(&admin)).await.status(),
        400
    );
    assert_eq!(
        app.post_form(&format!("/admin/users/{}/status", root.id), "active=0", Some(&admin)).await.status(),
        400
    );

    // Deleting says what goes, then takes her workspaces, sessions and keys, keeping usage totals.
    let confirm =
        app.get(&format!("/admin/users/{}/delete", ada.id), Some(&admin.cookie)).await.text().await.unwrap();
    assert!(confirm.contains("1 workspace") && confirm.contains("1 session"), "{confirm}");
    let res = app.post_form(&format!("/admin/users/{}/delete", ada.id), "", Some(&admin)).await;
    assert_eq!(res.status(), 200);
    assert!(arbor::storage::repos::users::find(&app.state.db, ada.id).await.unwrap().is_none());
    let left = app
        .state
        .db
        .query_one_raw(sea_orm::Statement::from_string(
            app.state.db.get_database_backend(),
            "SELECT COUNT(*) AS n FROM sessions".to_string(),
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get::<i64>("", "n")
        .unwrap();
    assert_eq!(left, 0);
    assert_eq!(app.get(&format!("/admin/users/{}/delete", ada.id), Some(&admin.cookie)).await.status(), 404);
    assert_eq!(
        app.post_form(&format!("/admin/users/{}/delete", root.id), "", Some(&admin)).await.status(),
        400
    );
    let audit = app.get("/admin/audit?action=user.", Some(&admin.cookie)).await.text().await.unwrap();
    for action in ["user.disable", "user.enable", "user.role", "user.delete"] {
        assert!(audit.contains(action), "audit lacks {action}");
    }
}

#[tokio::test]
async fn the_audit_log_refuses_updates_and_deletes() {
    let app = TestApp::spawn().await;
    let origin = arbor::domain::audit::Origin::cli();
    arbor::domain::audit::record(&app.state.db, &origin, "test.row", "t", serde_json::json!({}))
        .await
        .unwrap();
    let backend = app.state.db.get_database_backend();
    for sql in ["UPDATE audit_log SET actor = 'someone else'", "DELETE FROM audit_log"] {
        let err = app.state.db.execute_raw(sea_orm::Statement::from_string(backend, sql.to_string())).await;
        assert!(err.is_err(), "{sql} was allowed");
        assert!(err.unwrap_err().to_string().contains("append-only"));
    }
    let rows = arbor::storage::repos::audit::list(&app.state.db, &Default::default(), 10).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].actor, "cli");
}

#[tokio::test]
async fn admins_configure_mcp_servers_with_encrypted_environments() {
    let app = TestApp::spawn().await;
    let root = app.create_user("root@example.com", Role::Admin).await;
    let admin = app.login_full(&root).await;
    let body = "name=everything&transport=stdio&command=npx&args=-y%0A%40modelcontextprotocol%2Fserver-everything\
                &enabled=on&secrets=API_TOKEN%3Dsk-mcp-secret-9876%0ADEBUG%3D1";
    let res = app.post_form("/admin/mcp", body, Some(&admin)).await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(html.contains("MCP server added"), "{html}");
    assert!(html.contains("API_TOKEN, DEBUG"), "names are shown");
    assert!(!html.contains("sk-mcp-secret-9876"), "values are not");
    let res = app
        .post_form("/admin/mcp", "name=remote&transport=http&url=https%3A%2F%2Fmcp.example.com%2Fmcp&secrets=Authorization%3A+Bearer+abc", Some(&admin))
        .await;
    assert_eq!(res.status(), 200);

    let actor = arbor::domain::accounts::Actor::for_tests(&root);
    let servers = app.state.mcp.list(&actor.admin().unwrap()).await.unwrap();
    assert_eq!(servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["everything", "remote"]);
    let everything = &servers[0];
    assert_eq!(everything.args, ["-y", "@modelcontextprotocol/server-everything"]);
    let env = arbor::domain::mcp::servers::secrets_for(&app.state.db, &app.state.vault, everything.id, None)
        .await
        .unwrap();
    assert_eq!(env.get("API_TOKEN").map(String::as_str), Some("sk-mcp-secret-9876"));

    // Saving with a blank secrets box keeps them; "remove" clears them.
    let path = format!("/admin/mcp/{}", everything.id);
    let res = app.post_form(&path, "name=everything&transport=stdio&command=npx&args=-y", Some(&admin)).await;
    assert_eq!(res.status(), 200);
    let env = arbor::domain::mcp::servers::secrets_for(&app.state.db, &app.state.vault, everything.id, None)
        .await
        .unwrap();
    assert_eq!(env.len(), 2);
    let res = app
        .post_form(&path, "name=everything&transport=stdio&command=npx&clear_secrets=on", Some(&admin))
        .await;
    assert_eq!(res.status(), 200);
    assert!(
        arbor::domain::mcp::servers::secrets_for(&app.state.db, &app.state.vault, everything.id, None)
            .await
            .unwrap()
            .is_empty()
    );

    // Bad input: clear refusals, nothing added.
    for (body, needle) in [
        ("name=everything&transport=stdio&command=npx", "already an MCP server"),
        ("name=a__b&transport=stdio&command=npx", "single _"),
        ("name=x&transport=stdio&command=", "needs the command"),
        ("name=x&transport=http&url=file%3A%2F%2F%2Fetc", "http:// or https://"),
        ("name=x&transport=carrier-pigeon", "stdio or HTTP"),
        ("name=x&transport=stdio&command=npx&secrets=NOSEPARATOR", "NAME=value"),
    ] {
        let res = app.post_form("/admin/mcp", body, Some(&admin)).await;
        assert!(res.status() == 400 || res.status() == 409, "{body}");
        assert!(res.text().await.unwrap().contains(needle), "{body}");
    }
    assert_eq!(app.state.mcp.list(&actor.admin().unwrap()).await.unwrap().len(), 2);
    let res = app.post_form(&format!("/admin/mcp/{}/delete", servers[1].id), "", Some(&admin)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(app.state.mcp.list(&actor.admin().unwrap()).await.unwrap().len(), 1);
    let audit = app.get("/admin/audit?action=mcp.", Some(&admin.cookie)).await.text().await.unwrap();
    for action in ["mcp.create", "mcp.update", "mcp.delete"] {
        assert!(audit.contains(action), "audit lacks {action}");
    }
    assert!(!audit.contains("sk-mcp-secret-9876"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_shared_with_a_group_is_for_its_members_only() {
    use arbor::domain::audit::Origin;
    let Console { chat, admin } = console().await;
    let db = &chat.app.state.db;
    let base = chat.mock.url(Provider::OpenAi);
    let provider = add_provider(&chat.app, &admin, "team", &base, "").await;
    add_shared_key(&chat.app, &admin, provider, "k", "sk-team-1234").await;
    let root = arbor::storage::repos::users::find_by_email(db, "root@example.com").await.unwrap();
    let proof = arbor::domain::accounts::Actor::for_tests(&root[0].0).admin().unwrap();
    let eng = chat.app.state.teams.groups.create(&proof, &Origin::cli(), "eng").await.unwrap();
    let body = format!(
        "label=Team&kind=openai&base_url={}&visibility=users&allowed_groups=ENG&models=gpt-4o-mini&enabled=on",
        crate::support::urlencode(&base)
    );
    let res = chat.app.post_form(&format!("/admin/providers/{provider}"), &body, Some(&admin)).await;
    assert_eq!(res.status(), 200);
    let page = chat
        .app
        .get(&format!("/admin/providers/{provider}"), Some(&admin.cookie))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains(">eng</textarea>"), "the console shows the group: {page}");

    // Not in the group: not available.
    let res = send(&chat, "Hello", "team/gpt-4o-mini").await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("not available to you"));
    // In it: available, and offered in the picker.
    chat.app.state.teams.groups.add_member(&proof, &Origin::cli(), eng.id, &chat.user.email).await.unwrap();
    let page =
        chat.app.get(&format!("/s/{}", chat.session), Some(&chat.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("team/gpt-4o-mini"), "the picker offers it");
    chat.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = send(&chat, "Hello", "team/gpt-4o-mini").await;
    assert_eq!(res.status(), 200);
    chat.settled(streaming_id(&res.text().await.unwrap())).await;
    // Taken out: not any more.
    chat.app.state.teams.groups.remove_member(&proof, &Origin::cli(), eng.id, chat.user.id).await.unwrap();
    let res = send(&chat, "Hello again", "team/gpt-4o-mini").await;
    assert_eq!(res.status(), 400);
    // An unknown group in the form is refused.
    let body = format!(
        "label=Team&kind=openai&base_url={}&visibility=users&allowed_groups=nope",
        crate::support::urlencode(&base)
    );
    let res = chat.app.post_form(&format!("/admin/providers/{provider}"), &body, Some(&admin)).await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("There is no group called nope."));
}

/// Adds the console's items numbered `from..to`: a person with a quota of their own, a
/// provider, an MCP server and an invitation each (every one writes an audit row too).
async fn add_console_items(c: &Chat, admin: &TestSession, from: usize, to: usize) -> Vec<Uuid> {
    let mut providers = Vec::new();
    for i in from..to {
        let person = c.app.create_user(&format!("p{i}@example.com"), Role::Member).await;
        let body = format!("email={}&tokens_day=1000", enc(&person.email));
        assert_eq!(c.app.post_form("/admin/quotas", &body, Some(admin)).await.status(), 200);
        providers
            .push(add_provider(&c.app, admin, &format!("team{i}"), &c.mock.url(Provider::OpenAi), "").await);
        let body =
            format!("name=mcp{i}&transport=http&url={}", enc(&format!("https://mcp{i}.example.com/mcp")));
        assert_eq!(c.app.post_form("/admin/mcp", &body, Some(admin)).await.status(), 200);
        let body = format!("email=inv{i}%40example.com&role=member");
        assert_eq!(c.app.post_form("/admin/invitations", &body, Some(admin)).await.status(), 200);
    }
    providers
}

/// The console's lists run as many queries for many people, providers, quotas, MCP servers,
/// invitations and audit rows as for few (the architecture issue's rule; the team pages have
/// their own test in `shares.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_pages_run_as_many_queries_for_many_items_as_for_few() {
    let c = chat_with(|_| {}).await;
    let root = c.app.create_user("root@example.com", Role::Admin).await;
    let admin = c.app.login_full(&root).await;
    let provider = add_console_items(&c, &admin, 0, 1).await[0];
    let pages = [
        "/admin/users".to_string(),
        "/admin/providers".to_string(),
        format!("/admin/providers/{provider}"),
        "/admin/quotas".to_string(),
        "/admin/usage".to_string(),
        "/admin/audit".to_string(),
        "/admin/mcp".to_string(),
        "/admin/invitations".to_string(),
        "/admin/directory".to_string(),
    ];
    let mut few = Vec::new();
    for path in &pages {
        few.push(crate::support::queries_of(&c.app, &admin.cookie, path).await);
    }
    add_console_items(&c, &admin, 1, 16).await;
    for (path, few) in pages.iter().zip(few) {
        let many = crate::support::queries_of(&c.app, &admin.cookie, path).await;
        assert_eq!(many, few, "{path}: {few} queries for few items, {many} for many");
        assert!(few > 0, "{path}: the counter counts");
    }
}
