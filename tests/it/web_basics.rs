//! Pages, fragments, static files, headers, health probes and error pages.

use arbor::domain::accounts::Role;

use crate::support::TestApp;

const HEADERS_ON_EVERY_RESPONSE: &[&str] = &[
    "content-security-policy",
    "x-content-type-options",
    "referrer-policy",
    "x-frame-options",
    "x-request-id",
];

fn assert_security_headers(res: &reqwest::Response) {
    for h in HEADERS_ON_EVERY_RESPONSE {
        assert!(res.headers().contains_key(*h), "{} lacks {h}", res.url());
    }
    let csp = res.headers()["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("frame-ancestors 'none'")
            && csp.contains("object-src 'none'")
            && csp.contains("base-uri 'none'")
    );
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
    assert_eq!(res.headers()["x-content-type-options"], "nosniff");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness() {
    let app = TestApp::spawn().await;
    let res = app.get("/healthz", None).await;
    assert_eq!(res.status(), 200);
    assert_security_headers(&res);
    assert_eq!(res.text().await.unwrap(), "ok");
    let res = app.get("/readyz", None).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), "ready");
}

/// The templates are compiled at the first page, not at start: a server that only answers
/// probes and the API never holds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_templates_are_compiled_at_the_first_page_not_at_start() {
    let app = TestApp::spawn().await;
    assert_eq!(app.get("/healthz", None).await.status(), 200);
    assert!(!app.state.templates.compiled(), "compiled before any page was asked for");
    let res = app.get("/login", None).await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("<html"), "the sign-in page was rendered");
    assert!(app.state.templates.compiled());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_fails_when_a_migration_is_pending() {
    let app = TestApp::spawn().await;
    arbor::storage::migrate_down(&app.state.db, 1).await.unwrap();
    let res = app.get("/readyz", None).await;
    assert_eq!(res.status(), 503);
    arbor::storage::migrate_up(&app.state.db).await.unwrap();
    assert_eq!(app.get("/readyz", None).await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn home_page_and_its_fragment_come_from_the_same_partial() {
    let app = TestApp::spawn().await;
    let page = app.get("/", None).await;
    assert_eq!(page.status(), 200);
    assert_security_headers(&page);
    assert_eq!(page.headers()["vary"], "HX-Request");
    let html = page.text().await.unwrap();
    assert!(html.starts_with("<!doctype html>"));
    assert!(html.contains(r#""selfRequestsOnly":true"#) && html.contains(r#""allowScriptTags":false"#));
    assert!(html.contains(r#""allowEval":false"#) && html.contains(r#""historyCacheSize":0"#));
    assert!(html.contains("/static/vendor/htmx.min.js?v="));
    assert!(!html.contains("<script>"), "no inline script");
    assert!(html.contains(r#"id="home""#));

    let frag = app.client.get(app.url("/")).header("HX-Request", "true").send().await.unwrap();
    assert_eq!(frag.status(), 200);
    assert_eq!(frag.headers()["vary"], "HX-Request");
    let frag = frag.text().await.unwrap();
    assert!(!frag.contains("<html"));
    assert!(frag.trim_start().starts_with(r#"<section class="stack" id="home">"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_text_is_escaped_in_pages() {
    let app = TestApp::spawn().await;
    let user = app.create_user("<b>mallory</b>@example.com", Role::Member).await;
    let cookie = app.login(&user).await;
    let html = app.get("/", Some(&cookie)).await.text().await.unwrap();
    assert!(
        html.contains("&lt;b&gt;mallory&lt;&#x2f;b&gt;") || html.contains("&lt;b&gt;mallory&lt;/b&gt;"),
        "{html}"
    );
    assert!(!html.contains("<b>mallory"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn friendly_404_page_and_fragment() {
    let app = TestApp::spawn().await;
    let res = app.get("/no/such/page", None).await;
    assert_eq!(res.status(), 404);
    assert_security_headers(&res);
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let html = res.text().await.unwrap();
    assert!(html.contains("<!doctype html>") && html.contains("We could not find that page."));

    let res = app.client.get(app.url("/no/such/page")).header("HX-Request", "true").send().await.unwrap();
    assert_eq!(res.status(), 404);
    let html = res.text().await.unwrap();
    assert!(!html.contains("<html") && html.contains("error-page"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_method_is_405_with_a_page() {
    let app = TestApp::spawn().await;
    let res = app.client.post(app.url("/healthz")).header("Origin", app.origin()).send().await.unwrap();
    assert_eq!(res.status(), 405);
    assert!(res.text().await.unwrap().contains("That action is not available here."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_files_have_types_etags_and_no_traversal() {
    let app = TestApp::spawn().await;
    let res = app.get("/static/app.css?v=1", None).await;
    assert_eq!(res.status(), 200);
    assert_security_headers(&res);
    assert_eq!(res.headers()["content-type"], "text/css; charset=utf-8");
    assert!(res.headers()["cache-control"].to_str().unwrap().contains("immutable"));
    let etag = res.headers()["etag"].to_str().unwrap().to_string();
    let res = app.client.get(app.url("/static/app.css")).header("If-None-Match", &etag).send().await.unwrap();
    assert_eq!(res.status(), 304);

    let js = app.get("/static/vendor/htmx.min.js", None).await;
    assert_eq!(js.headers()["content-type"], "text/javascript; charset=utf-8");
    assert!(js.text().await.unwrap().contains("2.0.11"));

    for bad in [
        "/static/../Cargo.toml",
        "/static/%2e%2e/Cargo.toml",
        "/static/nope.css",
        "/static/",
        "/static/vendor",
    ] {
        assert_eq!(app.get(bad, None).await.status(), 404, "{bad}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_are_unique_uuids() {
    let app = TestApp::spawn().await;
    let a = app.get("/healthz", None).await.headers()["x-request-id"].to_str().unwrap().to_string();
    let b = app.get("/healthz", None).await.headers()["x-request-id"].to_str().unwrap().to_string();
    assert_ne!(a, b);
    assert!(uuid::Uuid::parse_str(&a).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_garbage_requests_do_not_crash() {
    let app = TestApp::spawn().await;
    let big = vec![b'x'; 4 * 1024 * 1024];
    let res = app.client.post(app.url("/")).body(big).send().await;
    // Either the server answers 405/413 or closes the connection; it must keep serving.
    if let Ok(r) = res {
        assert!(r.status().is_client_error());
    }
    let res = app.get("/s/%00%ff/events", None).await;
    assert!(res.status().is_client_error());
    assert_eq!(app.get("/healthz", None).await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_malformed_forms_are_refused_cleanly() {
    let app = TestApp::spawn_with(|c| c.auth.allow_signup = true).await;
    let post = |body: Vec<u8>, content_type: &'static str| {
        app.client
            .post(app.url("/login"))
            .header("Origin", app.origin())
            .header("Content-Type", content_type)
            .body(body)
            .send()
    };
    let huge = format!("email=a%40b.io&password={}", "x".repeat(2 * 1024 * 1024)).into_bytes();
    assert_eq!(post(huge, "application/x-www-form-urlencoded").await.unwrap().status(), 413);
    let garbage = vec![0xff, 0xfe, b'=', 0x00, 0x80];
    assert_eq!(post(garbage, "application/x-www-form-urlencoded").await.unwrap().status(), 400);
    assert_eq!(post(b"{\"email\":1}".to_vec(), "application/json").await.unwrap().status(), 415);
    assert_eq!(post(Vec::new(), "application/x-www-form-urlencoded").await.unwrap().status(), 400);
    assert_eq!(app.get("/healthz", None).await.status(), 200, "still serving");
}
