//! Every route fed malformed, oversized, wrongly typed and Unicode-edge input, table-driven over
//! the authorization walk's rows: a clear 4xx (or success), never a 500 and never a panic.

use actix_web::http::Method;
use arbor::domain::accounts::api_tokens::Scope;

use crate::authz::{Case, World, cases, world};
use crate::support::urlencode;
use crate::support::{TestApp, TestSession};

/// Values that break naive parsing: huge, control and bidi characters, NUL, numbers out of
/// range or of the wrong type, JSON where text is expected, combining marks and emoji.
fn hostile_values() -> Vec<String> {
    vec![
        String::new(),
        "x".repeat(64 * 1024),
        "\u{202e}evil\u{0000}\u{0007}".into(),
        "-1".into(),
        "1e309".into(),
        "18446744073709551616".into(),
        "NaN".into(),
        "[]".into(),
        "{\"a\":".into(),
        "e\u{301}\u{301}\u{301}\u{1F600}\u{FE0F}\u{200D}".into(),
        "../../etc/passwd".into(),
        "00000000-0000-0000-0000-000000000000".into(),
    ]
}

/// The form's field names from the row's body (`a=1&b=2`), plus one the route does not know.
fn field_names(body: &str) -> Vec<String> {
    let mut names: Vec<String> = body
        .split('&')
        .filter_map(|kv| kv.split('=').next())
        .filter(|k| !k.is_empty())
        .map(String::from)
        .collect();
    names.push("unexpected".into());
    names
}

/// How deep the nested-JSON body goes.
const NESTED: usize = 100_000;

/// Raw bodies that are not well-formed forms (or JSON) at all.
fn broken_bodies(limit: usize) -> Vec<(Vec<u8>, &'static str)> {
    let form = "application/x-www-form-urlencoded";
    vec![
        (Vec::new(), form),
        (b"%%%=%zz&&=&a".to_vec(), form),
        (vec![0xff, 0xfe, b'=', 0xc3, 0x28], form),
        (b"{\"json\": \"where a form belongs\"}".to_vec(), "application/json"),
        (b"a=1".to_vec(), "text/plain"),
        (vec![b'a'; limit + 1], form),
        ("[".repeat(NESTED).into_bytes(), "application/json"),
    ]
}

/// The caller a row is exercised as: the first one it lets through.
fn caller_for<'a>(case: &Case, owner: &'a TestSession, admin: &'a TestSession) -> Option<&'a TestSession> {
    if case.expect.owner < 400 || case.expect.owner == 409 {
        Some(owner)
    } else if case.expect.admin < 400 {
        Some(admin)
    } else {
        None
    }
}

async fn send(
    app: &TestApp,
    method: &Method,
    path: &str,
    body: Vec<u8>,
    content_type: &str,
    session: Option<&TestSession>,
    bearer: Option<&str>,
) -> u16 {
    let mut req = app
        .client
        .request(method.as_str().parse().unwrap(), app.url(path))
        .header("Origin", app.origin())
        .header("Content-Type", content_type)
        .body(body);
    if let Some(s) = session {
        req = req.header("Cookie", &s.cookie).header("X-CSRF-Token", &s.csrf);
    }
    if let Some(token) = bearer {
        req = req.header("Authorization", format!("Bearer {token}"));
    }
    req.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_malformed_input_without_a_server_error() {
    let app = TestApp::spawn().await;
    let World { owner, admin, ids, .. } = world(&app).await;
    // Tokens that get past authentication, so bodies reach the handlers: the owner's full token
    // for `/v1` (model and sessions API), the admin's directory token for `/scim`.
    let tokens = &app.state.accounts.tokens;
    let issue = |email: String, scope| async move {
        tokens.issue_for_operator(&email, "malformed", scope, None).await.unwrap().token
    };
    let token = issue(owner.email.clone(), Scope::Full).await;
    let scim = issue(admin.email.clone(), Scope::Scim).await;
    let limit = app.state.config.server.max_body_bytes;
    let mut failures = Vec::new();
    let mut refused_wrongly = Vec::new();
    let mut tried = 0;
    for case in cases() {
        let path = (case.path)(&ids);
        // A fresh browser session per row: a row may sign its caller out.
        let (owner_s, admin_s) = (app.login_full(&owner).await, app.login_full(&admin).await);
        let session = caller_for(&case, &owner_s, &admin_s);
        let bearer = if arbor::web::handlers::api::is_api_path(&path) {
            Some(token.expose())
        } else if path.starts_with("/scim/") {
            Some(scim.expose())
        } else {
            None
        };
        let mut record = |status: u16, what: String| {
            tried += 1;
            if status >= 500 {
                failures.push(format!("{status} {} {path}: {what}", case.method));
            }
        };
        if case.method == Method::GET {
            for value in hostile_values() {
                // URLs stay under what HTTP clients send (8 KiB is the common bound).
                let value: String = value.chars().take(2000).collect();
                let sep = if path.contains('?') { '&' } else { '?' };
                for key in ["q", "page", "at", "m", "before", "days", "next", "w"] {
                    let with_query = format!("{path}{sep}{key}={}", urlencode(&value));
                    let status =
                        send(&app, &case.method, &with_query, Vec::new(), "text/plain", session, bearer)
                            .await;
                    record(status, format!("{key}={:.40}", value));
                }
            }
            continue;
        }
        for (body, content_type) in broken_bodies(limit) {
            let len = body.len();
            let status = send(&app, &case.method, &path, body, content_type, session, bearer).await;
            // SECURITY.md 50: a body past the limit is a 413 on every route, whoever calls;
            // deeply nested JSON is a 400 on every route that reads JSON.
            if len > limit && status != 413 {
                refused_wrongly.push(format!("{status} {} {path}: {len} bytes", case.method));
            }
            if len == NESTED && bearer.is_some() && !matches!(status, 400 | 404 | 413) {
                refused_wrongly.push(format!("{status} {} {path}: nested JSON", case.method));
            }
            record(status, format!("{len} bytes of {content_type}"));
        }
        if bearer.is_some() {
            for body in [
                "null",
                "[]",
                "{\"model\": 5, \"messages\": \"x\"}",
                "{\"model\": \"openai/gpt-4o-mini\", \"messages\": [{\"role\": 7}], \"max_tokens\": -1}",
                "{\"model\": \"x\", \"messages\": [], \"stream\": \"yes\", \"temperature\": 1e309}",
            ] {
                let status =
                    send(&app, &case.method, &path, body.into(), "application/json", session, bearer).await;
                record(status, body.to_string());
            }
            continue;
        }
        for field in field_names(case.body) {
            for value in hostile_values() {
                // The row's own body with one field replaced.
                let mut pairs: Vec<(String, String)> = case
                    .body
                    .split('&')
                    .filter(|kv| !kv.is_empty())
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                        (k.to_string(), v.to_string())
                    })
                    .filter(|(k, _)| *k != field)
                    .collect();
                pairs.push((field.clone(), urlencode(&value)));
                let body = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
                let status = send(
                    &app,
                    &case.method,
                    &path,
                    body.into_bytes(),
                    "application/x-www-form-urlencoded",
                    session,
                    bearer,
                )
                .await;
                record(status, format!("{field}={:.40}", value));
            }
        }
    }
    assert!(tried > 2000, "the walk sent {tried} requests");
    assert!(failures.is_empty(), "server errors:\n{}", failures.join("\n"));
    assert!(refused_wrongly.is_empty(), "not refused as they should be:\n{}", refused_wrongly.join("\n"));
    // And the server is still well.
    assert_eq!(app.get("/healthz", None).await.status(), 200);
}
