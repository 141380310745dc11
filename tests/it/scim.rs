//! Directory provisioning: the real `scim2-client` library (Python) drives /scim/v2 through the
//! flows Entra ID and Okta use (tests/scim/check.py); deactivating someone ends what they hold
//! open; bad input gets SCIM's own errors; only an admin's SCIM token may provision.

use arbor::domain::accounts::{Actor, Role};
use arbor::domain::audit::Origin;
use serde_json::{Value, json};

use crate::support::TestApp;

/// A SCIM token of a new admin's.
async fn scim_token(app: &TestApp) -> String {
    let admin = app.create_user("idp-admin@example.com", Role::Admin).await;
    let proof = Actor::for_tests(&admin).admin().unwrap();
    let made = app.state.scim.issue_token(&proof, &Origin::cli(), "Entra").await.unwrap();
    made.token.expose().to_string()
}

async fn call(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = app
        .client
        .request(method, app.url(&format!("/scim/v2{path}")))
        .header("Authorization", format!("Bearer {token}"));
    if let Some(b) = body {
        req = req.header("Content-Type", "application/scim+json").body(b.to_string());
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    if status != 204 {
        assert_eq!(res.headers()["content-type"], "application/scim+json", "{path}");
    }
    let text = res.text().await.unwrap();
    (
        status,
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_scim_client_provisions_patches_deactivates_and_deletes_users_and_groups() {
    let python = crate::gateway::sdk_python();
    assert!(python.exists(), "{} is missing: run scripts/test", python.display());
    let app = TestApp::spawn().await;
    let token = scim_token(&app).await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scim/check.py");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .env("ARBOR_SCIM_URL", app.url("/scim/v2"))
        .env("ARBOR_SCIM_TOKEN", &token)
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && stdout.contains("all ok"), "stdout:\n{stdout}\nstderr:\n{stderr}");

    // What the flows left, as Arbor sees it.
    let db = &app.state.db;
    let (ada, _) =
        arbor::storage::repos::users::find_by_email(db, "ada@example.test").await.unwrap().remove(0);
    assert_eq!((ada.display_name.as_str(), ada.status.as_str()), ("Ada King", "disabled"));
    let bob = arbor::storage::repos::users::find_by_email(db, "bob@example.test").await.unwrap();
    assert_eq!(bob[0].0.status.as_str(), "disabled", "deleted by SCIM: disabled, data kept");
    let admin = app.create_user("root@example.com", Role::Admin).await;
    let proof = Actor::for_tests(&admin).admin().unwrap();
    let groups = app.state.teams.groups.list(&proof).await.unwrap();
    let (group, count) =
        groups.iter().find(|(g, _)| g.name == "platform-eng").expect("the pushed, renamed group");
    assert_eq!(*count, 1, "ada was removed; bob stays a member of record");
    assert!(!group.managed_by_idp, "a pushed group is not touched by sign-in claims");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deactivating_someone_ends_their_sessions_tokens_and_runs_at_once() {
    let app = TestApp::spawn().await;
    let token = scim_token(&app).await;
    let (status, made) = call(
        &app,
        reqwest::Method::POST,
        "/Users",
        &token,
        Some(json!({"schemas": [arbor::domain::scim::USER_SCHEMA], "userName": "Kim@Example.com", "displayName": "Kim"})),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let id = made["id"].as_str().unwrap().to_string();
    let kim = arbor::storage::repos::users::find(&app.state.db, id.parse().unwrap()).await.unwrap().unwrap();
    assert_eq!(kim.email, "kim@example.com");
    let browser = app.login_full(&kim).await;
    let api = app
        .state
        .accounts
        .tokens
        .create(
            &Actor::for_tests(&kim),
            &Origin::cli(),
            "cli",
            arbor::domain::accounts::api_tokens::Scope::Api,
            None,
        )
        .await
        .unwrap();
    assert_eq!(app.get("/settings", Some(&browser.cookie)).await.status(), 200);
    // A live run of Kim's (registered as the engine does).
    let run = app.state.runs.begin_owned(kim.id, uuid::Uuid::now_v7(), uuid::Uuid::now_v7(), None).unwrap();
    assert!(!run.is_cancelled());

    let patch = json!({"schemas": [arbor::domain::scim::PATCH_SCHEMA],
        "Operations": [{"op": "Replace", "path": "active", "value": "False"}]});
    let (status, after) =
        call(&app, reqwest::Method::PATCH, &format!("/Users/{id}"), &token, Some(patch)).await;
    assert_eq!((status, after["active"].as_bool()), (200, Some(false)), "{after}");
    assert!(run.is_cancelled(), "their run was stopped");
    assert_eq!(app.get("/settings", Some(&browser.cookie)).await.status(), 401, "their session ended");
    let res = app
        .client
        .get(app.url("/v1/models"))
        .header("Authorization", format!("Bearer {}", api.token.expose()))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401, "their token was revoked");
    run.abandon();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_scim_input_and_wrong_tokens_get_scims_own_errors_and_change_nothing() {
    let app = TestApp::spawn().await;
    let token = scim_token(&app).await;
    use reqwest::Method;
    // No token, a member's API token, and a SCIM token on the gateway.
    let (s, e) = call(&app, Method::GET, "/Users", "", None).await;
    assert_eq!((s, e["schemas"][0].as_str()), (401, Some(arbor::domain::scim::ERROR_SCHEMA)));
    let member = app.create_user("m@example.com", Role::Member).await;
    let member_token = app
        .state
        .accounts
        .tokens
        .create(
            &Actor::for_tests(&member),
            &Origin::cli(),
            "t",
            arbor::domain::accounts::api_tokens::Scope::Full,
            None,
        )
        .await
        .unwrap();
    assert_eq!(call(&app, Method::GET, "/Users", member_token.token.expose(), None).await.0, 403);
    let gw = app
        .client
        .get(app.url("/v1/models"))
        .header("Authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(gw.status(), 403, "a SCIM token is for provisioning only");
    // A member cannot make one for themselves.
    let s = app.login_full(&member).await;
    let res = app.post_form("/settings/tokens", "name=x&scope=scim", Some(&s)).await;
    assert!(res.text().await.unwrap().contains("Pick what the token may do."));

    let user = |name: &str| json!({"schemas": [arbor::domain::scim::USER_SCHEMA], "userName": name});
    for (path, body, status, kind) in [
        ("/Users", user("not an email"), 400, Some("invalidValue")),
        ("/Users", json!({"schemas": []}), 400, Some("invalidValue")),
        ("/Groups", json!({"displayName": ""}), 400, Some("invalidValue")),
        ("/Groups", json!({"displayName": "g", "members": [{"value": "nobody"}]}), 400, Some("invalidValue")),
        (
            "/Groups",
            json!({"displayName": "g", "members": [{"value": uuid::Uuid::now_v7().to_string()}]}),
            400,
            Some("invalidValue"),
        ),
    ] {
        let (s, e) = call(&app, Method::POST, path, &token, Some(body.clone())).await;
        assert_eq!((s, e["scimType"].as_str()), (status, kind), "{body}: {e}");
    }
    let many: Vec<Value> = (0..10_000).map(|_| json!({"value": uuid::Uuid::now_v7().to_string()})).collect();
    let (s, e) =
        call(&app, Method::POST, "/Groups", &token, Some(json!({"displayName": "huge", "members": many})))
            .await;
    assert_eq!((s, e["scimType"].as_str()), (400, Some("tooMany")));
    // Not JSON, not an object, and ten megabytes.
    for (body, status) in [("{", 400), ("[1]", 400)] {
        let res =
            app.client.post(app.url("/scim/v2/Users")).bearer_auth(&token).body(body).send().await.unwrap();
        assert_eq!(res.status().as_u16(), status, "{body}");
    }
    let big = format!("{{\"userName\":\"{}\"}}", "a".repeat(10 * 1024 * 1024));
    let res = app.client.post(app.url("/scim/v2/Users")).bearer_auth(&token).body(big).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 413);
    let (s, e) = call(&app, Method::GET, "/Users?filter=userName%20eq", &token, None).await;
    assert_eq!((s, e["scimType"].as_str()), (400, Some("invalidFilter")));
    let (s, _) = call(&app, Method::GET, "/Users?startIndex=abc", &token, None).await;
    assert_eq!(s, 400);
    for path in
        ["/Users/not-a-uuid", &format!("/Users/{}", uuid::Uuid::now_v7()), "/Groups/x", "/Schemas/nope"]
    {
        assert_eq!(call(&app, Method::GET, path, &token, None).await.0, 404, "{path}");
    }
    // Nothing was made by any of it.
    let (_, list) = call(&app, Method::GET, "/Groups", &token, None).await;
    assert_eq!(list["totalResults"], 0);
    let (_, list) =
        call(&app, Method::GET, "/Users?filter=userName%20eq%20%22m%40example.com%22", &token, None).await;
    assert_eq!(list["totalResults"], 1, "the member is there, found by their email");
    // Duplicate group names conflict; PATCH with unknown paths says so.
    let (s, g) = call(&app, Method::POST, "/Groups", &token, Some(json!({"displayName": "Ops"}))).await;
    assert_eq!(s, 201);
    let (s, e) = call(&app, Method::POST, "/Groups", &token, Some(json!({"displayName": "ops"}))).await;
    assert_eq!((s, e["scimType"].as_str()), (409, Some("uniqueness")));
    let gid = g["id"].as_str().unwrap();
    let bad = json!({"schemas": [arbor::domain::scim::PATCH_SCHEMA], "Operations": [{"op": "replace", "path": "nonsense", "value": 1}]});
    let (s, e) = call(&app, Method::PATCH, &format!("/Groups/{gid}"), &token, Some(bad)).await;
    assert_eq!((s, e["scimType"].as_str()), (400, Some("invalidPath")));
    // The token's own account cannot be deactivated by it.
    let (_, me) =
        call(&app, Method::GET, "/Users?filter=userName%20eq%20%22idp-admin%40example.com%22", &token, None)
            .await;
    let my_id = me["Resources"][0]["id"].as_str().unwrap().to_string();
    let off = json!({"schemas": [arbor::domain::scim::PATCH_SCHEMA], "Operations": [{"op": "replace", "value": {"active": false}}]});
    let (s, e) = call(&app, Method::PATCH, &format!("/Users/{my_id}"), &token, Some(off)).await;
    assert_eq!((s, e["scimType"].as_str()), (400, Some("mutability")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admins_make_and_revoke_scim_tokens_in_the_console_and_bad_names_are_refused() {
    let app = TestApp::spawn().await;
    let admin = app.create_user("root@example.com", Role::Admin).await;
    let s = app.login_full(&admin).await;
    for (body, says) in
        [("name=", "Give the token a name"), (&*format!("name={}", "x".repeat(81)), "at most 80")]
    {
        let res = app.post_form("/admin/directory/tokens", body, Some(&s)).await;
        assert_eq!(res.status(), 400, "{body}");
        assert!(res.text().await.unwrap().contains(says), "{body}");
    }
    let res = app.post_form("/admin/directory/tokens", "name=Entra", Some(&s)).await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    let at = html.find("<code class=\"token-value\">").unwrap() + "<code class=\"token-value\">".len();
    let token = html[at..at + html[at..].find('<').unwrap()].to_string();
    assert_eq!(call(&app, reqwest::Method::GET, "/Users", &token, None).await.0, 200);
    let proof = Actor::for_tests(&admin).admin().unwrap();
    let listed = app.state.scim.tokens(&proof).await.unwrap();
    assert_eq!(listed.len(), 1);
    let res = app.post_form(&format!("/admin/directory/tokens/{}/revoke", listed[0].id), "", Some(&s)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(call(&app, reqwest::Method::GET, "/Users", &token, None).await.0, 401, "revoked at once");
}
