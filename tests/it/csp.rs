//! SECURITY.md 61: no page logs a Content-Security-Policy violation in the browser, the
//! session page with maths, code and a picture included, and the maths is still typeset.

use std::time::Duration;

use arbor::domain::accounts::Role;
use arbor::domain::sessions::tree::{MessageStatus, Role as R};
use arbor::providers::types::Part;
use arbor::storage::repos::messages::{self, NewMessage};
use uuid::Uuid;

use crate::support::TestApp;
use crate::support::browser::Browser;

/// Maths that exercises KaTeX's inline styles and SVG (roots, stretchy braces, arrows, colour,
/// cancel, boxes, matrices), with code and a link around it.
const MATH_ANSWER: &str = "Inline $x^2 + \\sqrt{y}$ and a fraction $\\frac{a}{b}$.\n\n\
$$\\sum_{i=1}^{n} i = \\frac{n(n+1)}{2}$$\n\n\
$$\\overbrace{a+b}^{n} \\underbrace{c+d}_{m} \\widehat{abc} \\xrightarrow{f} \\cancel{x} \\boxed{y}$$\n\n\
$$\\colorbox{yellow}{A} \\textcolor{red}{B} \\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix} \\sqrt[3]{\\frac{x}{y}}$$\n\n\
```rust\nfn main() { println!(\"hi\"); }\n```\n\nSee [the book](https://doc.rust-lang.org/book/).";

async fn insert(app: &TestApp, session: Uuid, parent: Option<Uuid>, role: R, text: &str) -> Uuid {
    let id = Uuid::now_v7();
    let parts = [Part::Text { text: text.into() }];
    let message = NewMessage {
        id,
        parent_id: parent,
        role,
        parts: &parts,
        model: (role == R::Assistant).then_some("openai/gpt-4o-mini"),
        status: MessageStatus::Complete,
        client_id: None,
        author_id: None,
    };
    messages::insert_chosen(&app.state.db, session, &message).await.unwrap();
    id
}

/// Every console entry that reports a CSP violation (whatever its origin or level).
async fn violations(browser: &Browser) -> Vec<String> {
    browser
        .console_logs()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.message)
        .filter(|m| {
            let m = m.to_ascii_lowercase();
            m.contains("content security policy") || m.contains("content-security-policy")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_page_logs_a_csp_violation_and_maths_is_typeset() {
    let app = TestApp::spawn().await;
    let admin = app.create_user("admin@example.com", Role::Admin).await;
    let (_, session) = app.create_session(&admin).await;
    let question = insert(&app, session, None, R::User, "Show me some maths").await;
    insert(&app, session, Some(question), R::Assistant, MATH_ANSWER).await;
    app.state.search.settle().await;

    let browser = Browser::start().await.unwrap();
    browser.goto(&app.url("/login")).await.unwrap();
    let cookie = app.login(&admin).await;
    let token = cookie.trim_start_matches("arbor_session=");
    browser
        .execute(&format!("document.cookie = 'arbor_session={token}; path=/'; return true;"), &[])
        .await
        .unwrap();

    // The session page: every formula typeset, none left as TeX or as an error.
    browser.goto(&app.url(&format!("/s/{session}"))).await.unwrap();
    browser.wait_for(".msg-assistant .markdown[data-enhanced]", Duration::from_secs(10)).await.unwrap();
    let typeset = browser.find_all(".msg-assistant .katex").await.unwrap().len();
    assert_eq!(typeset, 5, "two inline formulas and three displayed ones");
    assert!(browser.find_all(".msg-assistant .katex-error").await.unwrap().is_empty());
    browser.wait_for(".msg-assistant pre code.hljs", Duration::from_secs(5)).await.unwrap();
    let found = violations(&browser).await;
    assert!(found.is_empty(), "CSP violations on the session page: {found:#?}");

    // Every other page a person or an admin sees.
    let pages = [
        "/".to_string(),
        "/search?q=maths".into(),
        "/settings".into(),
        "/settings/tokens".into(),
        "/settings/aliases".into(),
        "/settings/approvals".into(),
        "/settings/mcp".into(),
        "/account/sessions".into(),
        "/account/password".into(),
        "/admin/users".into(),
        "/admin/providers".into(),
        "/admin/usage".into(),
        "/admin/audit".into(),
        "/admin/quotas".into(),
        "/admin/invitations".into(),
        "/admin/mcp".into(),
        "/admin/host-folders".into(),
        "/nowhere".into(),
    ];
    for page in pages {
        browser.goto(&app.url(&page)).await.unwrap();
        browser.wait_for("body main, body #main, body", Duration::from_secs(10)).await.unwrap();
        let found = violations(&browser).await;
        assert!(found.is_empty(), "CSP violations on {page}: {found:#?}");
    }
    // The check itself sees a violation when there is one: an inline style attribute.
    browser.execute("document.body.setAttribute('style', 'color: red'); return true;", &[]).await.unwrap();
    let start = std::time::Instant::now();
    while violations(&browser).await.is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "a planted violation was not reported");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    browser.close().await.unwrap();
}

/// SECURITY.md 8: htmx attributes in a model's answer (raw HTML in markdown, every spelling)
/// or a person's message never reach the page as attributes; message containers carry
/// `hx-disable`; the page's htmx refuses cross-origin requests, script tags and eval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn htmx_attributes_in_content_never_reach_the_page() {
    let app = TestApp::spawn().await;
    let user = app.create_user("ada@example.com", Role::Member).await;
    let (_, session) = app.create_session(&user).await;
    let payloads = [
        r#"<a href="/x" hx-get="/admin/users" hx-trigger="load">a</a>"#,
        r#"<button hx-post="/logout" hx-target="body">b</button>"#,
        r#"<div hx-on::click="alert(1)" hx-on:htmx:load="alert(2)">c</div>"#,
        r#"<span data-hx-get="/settings" data-hx-trigger="load">d</span>"#,
        r#"<form hx-vals='{"role":"admin"}' hx-headers='{"X-CSRF-Token":"x"}'>e</form>"#,
        r#"<img src="x" hx-get="/s" HX-GET="/t" Hx-Post="/u">"#,
        r#"<div sse-connect="/s/x/events" hx-ext="sse" sse-swap="message">f</div>"#,
    ];
    let text = payloads.join("\n\n");
    let question = insert(&app, session, None, R::User, &text).await;
    insert(&app, session, Some(question), R::Assistant, &text).await;
    let cookie = app.login(&user).await;
    let page = app.get(&format!("/s/{session}"), Some(&cookie)).await.text().await.unwrap();
    // Each message body runs to its message's action bar (nested markup included).
    let bodies: Vec<&str> = page
        .split("class=\"msg-body")
        .skip(1)
        .map(|rest| &rest[..rest.find("msg-actions").unwrap()])
        .collect();
    assert_eq!(bodies.len(), 2, "the question and the answer");
    for body in bodies {
        let opening = &body[..body.find('>').unwrap()];
        assert!(opening.contains("hx-disable"), "{opening}");
        let inner = body[body.find('>').unwrap()..].to_ascii_lowercase();
        for attribute in [
            "hx-get=",
            "hx-post=",
            "hx-on",
            "data-hx-",
            "hx-vals=",
            "hx-headers=",
            "hx-trigger=",
            "sse-connect=",
            "hx-ext=",
        ] {
            // Escaped text may show the words; an attribute would need a raw `<tag … attr=`.
            let raw_tag_with_it =
                inner.split('<').skip(1).any(|tag| tag.split('>').next().unwrap_or("").contains(attribute));
            assert!(!raw_tag_with_it, "{attribute} survived in {inner}");
        }
    }
    let config = r#"<meta name="htmx-config" content='{"selfRequestsOnly":true,"allowScriptTags":false,"allowEval":false"#;
    assert!(page.contains(config), "the page's htmx configuration");
}
