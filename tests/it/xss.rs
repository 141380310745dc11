//! SECURITY.md 7: a corpus of XSS payloads (OWASP filter-evasion shapes, mutation XSS, markdown
//! links and images with bad URLs) put through every place text reaches a page: a person's
//! message, a model's answer (the final page and the live SSE fragments), session titles, file
//! names, the labels the branch tree shows, workspace and template names, and what an admin
//! names (provider display names, model ids, key labels, groups, MCP commands). Every page is
//! parsed as a browser tokenizes it, and no event handler, script, framing element or URL other
//! than a relative, http(s) or mailto one may survive anywhere on it; each payload's marker must
//! be on the page, so a payload that never arrived cannot pass.
//!
//! Branches are not named by people: the tree names each branch by its messages' text, so the
//! message surface covers it (`/s/{id}/tree`).

use std::cell::RefCell;
use std::time::Duration;

use arbor::domain::accounts::{Actor, Role};
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use serde_json::json;
use uuid::Uuid;

use crate::agent::{chunk, says};
use crate::runs::{Chat, chat_with, form, streaming_id};
use crate::support::mock_upstream::{Provider, Reply};
use crate::support::sse_client::SseReader;
use crate::support::{TestApp, TestSession, urlencode};

const MODEL: &str = "openai/gpt-4o-mini";

/// The corpus; `{m}` is where each use puts its marker (visible text wherever it can be).
const CORPUS: &[&str] = &[
    "<script>alert(1)</script>{m}",
    "<SCRIPT SRC=//xss.test/x.js></SCRIPT>{m}",
    "<scr<script>ipt>alert(1)</script>{m}",
    "<img src=x onerror=alert(1)>{m}",
    "<IMG SRC=\"jav&#x09;ascript:alert(1)\">{m}",
    "<img src=x onerror=alert&lpar;1&rpar;>{m}",
    "<img srcset=\"javascript:alert(1) 1x\">{m}",
    "<svg onload=alert(1)>{m}",
    "<svg><animate onbegin=alert(1) attributeName=x dur=1s>{m}",
    "<svg><a xlink:href=\"javascript:alert(1)\"><text>{m}</text></a></svg>",
    "<svg><script>alert(1)</script></svg>{m}",
    "<svg><style><img src=x onerror=alert(1)></style></svg>{m}",
    "<iframe src=\"javascript:alert(1)\"></iframe>{m}",
    "<iframe srcdoc=\"<script>alert(1)</script>\"></iframe>{m}",
    "<a href=\"jAvAsCrIpT:alert(1)\">{m}</a>",
    "<a href=javascript:alert(1)>{m}</a>",
    "<a href=\"&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(1)\">{m}</a>",
    "<a href=\"&#x6A;avascript&colon;alert(1)\">{m}</a>",
    "<a href=\"%6A%61vascript:alert(1)\">{m}</a>",
    "<a href=\"java\tscript:alert(1)\">{m}</a>",
    "<a href=\"java\nscript:alert(1)\">{m}</a>",
    "<a href=\" \u{1}javascript:alert(1)\">{m}</a>",
    "<a href=\"data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==\">{m}</a>",
    "<a href=\"vbscript:msgbox(1)\">{m}</a>",
    "<a href=\"#\" onclick=\"alert(1)\">{m}</a>",
    "<a ping=\"javascript:alert(1)\" href=\"/\">{m}</a>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>{m}",
    "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\">{m}",
    "<!--<img src=\"--><img src=x onerror=alert(1)//\">{m}",
    "<![CDATA[<img src=x onerror=alert(1)>]]>{m}",
    "<template><img src=x onerror=alert(1)></template>{m}",
    "<form action=javascript:alert(1)><button>{m}</button></form>",
    "<form><button formaction=javascript:alert(1)>{m}</button></form>",
    "<object data=\"javascript:alert(1)\">{m}</object>",
    "<embed src=\"data:image/svg+xml;base64,PHN2Zz4=\">{m}",
    "<base href=\"javascript:alert(1)//\">{m}",
    "<meta http-equiv=\"refresh\" content=\"0;url=javascript:alert(1)\">{m}",
    "<details open ontoggle=alert(1)>{m}</details>",
    "<body onload=alert(1)>{m}",
    "<input autofocus onfocus=alert(1)>{m}",
    "<video><source onerror=alert(1)></video>{m}",
    "<div style=\"background:url(javascript:alert(1))\">{m}</div>",
    "\"><script>alert(1)</script>{m}",
    "'><img src=x onerror=alert(1)>{m}",
    "</title><script>alert(1)</script>{m}",
    "</textarea><img src=x onerror=alert(1)>{m}",
    "</option></select><img src=x onerror=alert(1)>{m}",
    "[{m}](javascript:alert(1))",
    "[{m}](JaVaScRiPt:alert(1))",
    "[{m}](&#106;avascript:alert(1))",
    "[{m}](javascript:alert%281%29)",
    "[{m}](<javascript:alert(1)>)",
    "[{m}](vbscript:msgbox(1) \"t\")",
    "[{m}](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![{m}](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "![{m}](javascript:alert(1))",
    "<javascript:alert(1)> {m}",
    "[{m}][r]\n\n[r]: javascript:alert(1)",
    "```html\n<script>alert(1)</script>\n```\n\n{m}",
    "`<img src=x onerror=alert(1)>` {m}",
    "$$\\href{javascript:alert(1)}{x}$$ {m}",
];

/// Payload `i` with its marker for `surface`: `xss07title`, letters and digits only so the search
/// index keeps it one word.
fn payload(i: usize, surface: &str) -> (String, String) {
    let marker = format!("xss{i:02}{surface}");
    (marker.clone(), CORPUS[i].replace("{m}", &marker))
}

/// The payloads a one-line name of at most `max` characters can hold (the rest are refused by
/// design: control characters, length), with their index.
fn names(surface: &str, max: usize) -> Vec<(usize, String, String)> {
    let fitting: Vec<_> = (0..CORPUS.len())
        .map(|i| {
            let (m, p) = payload(i, surface);
            (i, m, p)
        })
        .filter(|(_, _, p)| p.chars().count() <= max && !p.chars().any(char::is_control))
        .collect();
    assert!(fitting.len() >= 40, "only {} payloads fit a {surface} of {max} characters", fitting.len());
    fitting
}

/// What a page shows: its text (entities decoded, script and style bodies left out) and the
/// values of its attributes.
#[derive(Debug, Default)]
struct Page {
    text: String,
    attrs: String,
}

impl Page {
    fn shows(&self, what: &str, marker: &str) {
        assert!(self.text.contains(marker), "{what}: the payload's marker {marker} is not on the page");
    }

    fn carries(&self, what: &str, marker: &str) {
        assert!(
            self.text.contains(marker) || self.attrs.contains(marker),
            "{what}: the payload's marker {marker} is not on the page"
        );
    }
}

#[derive(Default)]
struct Scan {
    page: Page,
    problems: Vec<String>,
    /// The raw-text element being read, and its body so far.
    raw: Option<(String, String)>,
}

#[derive(Default)]
struct Checker {
    scan: RefCell<Scan>,
}

/// Attributes that hold a URL (`srcset` and `ping` hold several).
const URL_ATTRIBUTES: [&str; 11] = [
    "href",
    "src",
    "action",
    "formaction",
    "xlink:href",
    "srcset",
    "poster",
    "data",
    "background",
    "ping",
    "cite",
];

/// Elements that may not appear at all.
const FORBIDDEN: [&str; 8] = ["iframe", "object", "embed", "base", "frame", "frameset", "applet", "portal"];

/// Whether a URL (entities already decoded) is relative or http, https or mailto, after ASCII
/// whitespace and control characters are taken out as a browser would.
fn url_allowed(raw: &str) -> bool {
    let url: String = raw.chars().filter(|c| !c.is_ascii_whitespace() && !c.is_ascii_control()).collect();
    let Some(colon) = url.find(':') else { return true };
    let head = &url[..colon];
    if head.contains(['/', '?', '#']) {
        // `./a:b`, `/x?y=z:w`: the colon is past the path's start, no scheme.
        return true;
    }
    matches!(head.to_ascii_lowercase().as_str(), "http" | "https" | "mailto")
}

fn tag_text(tag: &Tag) -> String {
    let attrs: Vec<String> =
        tag.attrs.iter().map(|a| format!(" {}=\"{}\"", &*a.name.local, &*a.value)).collect();
    format!("<{}{}>", &*tag.name, attrs.concat())
}

impl Scan {
    fn start_tag(&mut self, tag: &Tag) {
        let name = &*tag.name;
        let shown = tag_text(tag);
        if FORBIDDEN.contains(&name) {
            self.problems.push(format!("forbidden element {shown}"));
        }
        let attr = |n: &str| tag.attrs.iter().find(|a| &*a.name.local == n).map(|a| a.value.to_string());
        if name == "script" {
            let own = attr("src").is_some_and(|s| s.starts_with("/static/"));
            if !own {
                self.problems.push(format!("a script that is not the app's own: {shown}"));
            }
        }
        if name == "meta" && attr("http-equiv").is_some_and(|v| v.trim().eq_ignore_ascii_case("refresh")) {
            self.problems.push(format!("meta refresh {shown}"));
        }
        for a in &tag.attrs {
            let attr_name = a.name.local.to_ascii_lowercase();
            let value = &*a.value;
            self.page.attrs.push_str(value);
            self.page.attrs.push('\n');
            if attr_name.starts_with("on") {
                self.problems.push(format!("event handler {attr_name} on {shown}"));
            }
            if !(URL_ATTRIBUTES.contains(&attr_name.as_str()) || attr_name.ends_with(":href")) {
                continue;
            }
            let urls: Vec<&str> = match attr_name.as_str() {
                "srcset" => value.split(',').filter_map(|c| c.split_whitespace().next()).collect(),
                "ping" => value.split_ascii_whitespace().collect(),
                _ => vec![value],
            };
            for url in urls {
                if !url_allowed(url) {
                    self.problems.push(format!("{attr_name}={url:?} on {shown}"));
                }
            }
        }
    }
}

impl TokenSink for Checker {
    type Handle = ();

    fn process_token(&self, token: Token, _line_number: u64) -> TokenSinkResult<()> {
        let mut scan = self.scan.borrow_mut();
        match token {
            Token::TagToken(tag) => match tag.kind {
                TagKind::StartTag => {
                    scan.start_tag(&tag);
                    // A tokenizer alone needs the tree builder's word on which elements hold raw
                    // text; these are the ones a browser (scripting on) reads that way.
                    let kind = match &*tag.name {
                        _ if tag.self_closing => None,
                        "script" => Some(RawKind::ScriptData),
                        "style" | "xmp" | "iframe" | "noembed" | "noframes" | "noscript" => {
                            Some(RawKind::Rawtext)
                        }
                        "title" | "textarea" => Some(RawKind::Rcdata),
                        "plaintext" => {
                            scan.problems.push("a plaintext element".into());
                            return TokenSinkResult::Plaintext;
                        }
                        _ => None,
                    };
                    if let Some(kind) = kind {
                        scan.raw = Some((tag.name.to_string(), String::new()));
                        return TokenSinkResult::RawData(kind);
                    }
                }
                TagKind::EndTag => {
                    if let Some((name, body)) = scan.raw.take()
                        && name == "script"
                        && !body.trim().is_empty()
                    {
                        scan.problems.push(format!("a script with a body: {body:?}"));
                    }
                }
            },
            Token::CharacterTokens(text) => {
                let raw = scan.raw.as_ref().map(|(name, _)| name.clone());
                match raw.as_deref() {
                    Some(name) => {
                        if let Some((_, body)) = scan.raw.as_mut() {
                            body.push_str(&text);
                        }
                        // Titles and text areas show their text; scripts and styles do not.
                        if matches!(name, "title" | "textarea") {
                            scan.page.text.push_str(&text);
                        }
                    }
                    None => scan.page.text.push_str(&text),
                }
            }
            Token::NullCharacterToken
            | Token::CommentToken(_)
            | Token::DoctypeToken(_)
            | Token::EOFToken
            | Token::ParseError(_) => {}
        }
        TokenSinkResult::Continue
    }
}

/// Tokenizes `html` as a browser does and lists every survivor: event handlers, scripts other
/// than the app's own external ones, framing elements, meta refreshes, URLs that are neither
/// relative nor http(s)/mailto.
fn scan(html: &str) -> (Page, Vec<String>) {
    let tokenizer = Tokenizer::new(Checker::default(), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    let scan = tokenizer.sink.scan.take();
    (scan.page, scan.problems)
}

/// Checks a page (or fragment) and returns what it shows; `what` names it in the failure.
fn checked(what: &str, html: &str) -> Page {
    let (page, problems) = scan(html);
    assert!(problems.is_empty(), "{what}: XSS survived in the rendered HTML:\n{}", problems.join("\n"));
    page
}

/// GETs a page, expects 200, and checks it.
async fn get_checked(app: &TestApp, cookie: &str, path: &str) -> Page {
    let res = app.get(path, Some(cookie)).await;
    let status = res.status();
    let html = res.text().await.unwrap();
    assert_eq!(status, 200, "{path}: {html}");
    checked(path, &html)
}

/// A 200 answer to a POST, checked.
async fn post_checked(app: &TestApp, s: &TestSession, path: &str, body: &str) -> (Page, String) {
    let res = app.post_form(path, body, Some(s)).await;
    let status = res.status();
    let html = res.text().await.unwrap();
    assert!(status == 200 || status == 303, "{path}: {status} {html}");
    (checked(&format!("POST {path}"), &html), html)
}

/// SECURITY.md 7: the checker itself finds each kind of survivor, and passes the app's own
/// shapes (external scripts under /static/, relative and https links, mailto).
#[test]
fn the_checker_flags_every_kind_of_survivor() {
    let bad = [
        "<img src=x onerror=alert(1)>",
        "<div OnClick=\"x\">",
        "<script>alert(1)</script>",
        "<script src=\"https://evil.test/x.js\"></script>",
        "<script src=\"/static/app.js\">alert(1)</script>",
        "<a href=\"jAvAsCrIpT:alert(1)\">",
        "<a href=\"&#106;avascript&colon;x\">",
        "<a href=\"java&#x09;script:x\">",
        "<a href=\" \u{1}javascript:x\">",
        "<img src=\"data:image/png;base64,AAAA\">",
        "<a href=\"vbscript:x\">",
        "<form action=\"javascript:x\">",
        "<button formaction=\"javascript:x\">",
        "<svg><a xlink:href=\"javascript:x\">",
        "<img srcset=\"/ok.png 1x, javascript:x 2x\">",
        "<a ping=\"/ok javascript:x\">",
        "<iframe src=\"/x\"></iframe>",
        "<object></object>",
        "<embed>",
        "<base href=\"/\">",
        "<frame>",
        "<meta http-equiv=\"Refresh\" content=\"0;url=/\">",
        "<title></title><img src=x onerror=alert(1)>",
    ];
    for html in bad {
        let (_, problems) = scan(html);
        assert!(!problems.is_empty(), "the checker let {html:?} through");
    }
    let good = "<!doctype html><html><head><title>&lt;script&gt; x</title>\
        <script src=\"/static/app.123.js\" defer></script><meta name=\"htmx-config\" content=\"{}\"></head>\
        <body><a href=\"/s/1?at=2#m-2\">a</a><a href=\"https://example.com/\">b</a><a href=\"mailto:a@b.c\">c</a>\
        <a href=\"#top\">d</a><a href=\"./x:y\">e</a><img src=\"/blobs/abc\" alt=\"onerror\">\
        <textarea>&lt;img src=x onerror=alert(1)&gt;</textarea><style>a[onclick] { color: red }</style>\
        <p>&lt;img onerror=alert(1)&gt; xss01user</p></body></html>";
    let (page, problems) = scan(good);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(page.text.contains("<script> x"), "title text is read as text: {}", page.text);
    assert!(page.text.contains("<img src=x onerror=alert(1)>"), "text areas are read as text");
    assert!(page.text.contains("xss01user") && !page.text.contains("color: red"));
}

/// A model that starts its answer, waits at `gate`, then writes `text` in a few pieces (split
/// inside tags and entities alike).
fn gated_answer(text: &str, gate: &str) -> Reply {
    let chars: Vec<char> = text.chars().collect();
    let after: Vec<String> = chars
        .chunks(chars.len().div_ceil(3).max(1))
        .map(|piece| chunk(json!({ "content": piece.iter().collect::<String>() }), None))
        .chain([chunk(json!({}), Some("stop")), "data: [DONE]\n\n".to_string()])
        .collect();
    Reply::Gated {
        before: vec![chunk(json!({"role": "assistant", "content": ""}), None)],
        gate: gate.into(),
        after,
    }
}

/// The token of the share link in a share answer.
fn link_token(html: &str) -> String {
    let at = html.find("/l/").unwrap_or_else(|| panic!("no link in {html}")) + 3;
    html[at..at + 43].to_string()
}

/// SECURITY.md 7: every payload as a person's message and as a model's answer reaches the page
/// only as text: in the send fragment, in each live SSE fragment and the final `done`, on the
/// session page, in the branch tree, in a share link's page, in search results (page and live
/// list), on the home page and in the sidebar.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_in_messages_and_model_answers_never_reach_a_page_as_markup() {
    let mut c: Chat = chat_with(|_| {}).await;
    let (workspace, _) = c.app.create_session(&c.user).await;
    let actor = Actor::for_tests(&c.user);
    let cookie = c.s.cookie.clone();
    let mut markers = Vec::new();
    for i in 0..CORPUS.len() {
        let (user_marker, question) = payload(i, "user");
        let (model_marker, answer) = payload(i, "model");
        c.session = c.app.state.sessions.create_session(&actor, workspace, "Chat").await.unwrap().id;
        let gate = format!("gate-{i}");
        c.mock.enqueue(Provider::OpenAi, gated_answer(&answer, &gate));
        let path = format!("/s/{}/messages", c.session);
        let res = c
            .app
            .post_form(&path, &form(&question, &Uuid::new_v4().simple().to_string(), MODEL), Some(&c.s))
            .await;
        assert_eq!(res.status(), 200, "payload {i}");
        let html = res.text().await.unwrap();
        checked(&format!("send fragment of payload {i}"), &html).shows("send fragment", &user_marker);
        let answer_id = streaming_id(&html);

        // The live stream, connected while the model waits, then every event to `done`.
        let events = c.app.get(&format!("/s/{}/events?m={answer_id}", c.session), Some(&cookie)).await;
        assert_eq!(events.status(), 200);
        let mut reader = SseReader::new(events);
        c.mock.open_gate(&gate);
        let mut streamed = String::new();
        let mut names = Vec::new();
        loop {
            let next = tokio::time::timeout(Duration::from_secs(20), reader.next_event())
                .await
                .expect("the stream stalled");
            let Some((name, data)) = next else { break };
            let page = checked(&format!("SSE {name} event of payload {i}"), &data);
            if name == "done" {
                // A markdown image the sanitizer refuses keeps its marker as `alt`.
                page.carries("SSE done", &model_marker);
                names.push(name);
                break;
            }
            if name == "snapshot" || name == "delta" {
                streamed.push_str(&page.text);
            }
            names.push(name);
        }
        assert_eq!(names.last().map(String::as_str), Some("done"), "payload {i}: {names:?}");
        assert!(streamed.contains(&model_marker), "payload {i}: the streamed text {streamed:?}");
        c.settled(answer_id).await;

        let session_page = format!("/s/{}", c.session);
        let page = get_checked(&c.app, &cookie, &session_page).await;
        page.shows(&session_page, &user_marker);
        page.carries(&session_page, &model_marker);
        get_checked(&c.app, &cookie, &format!("/s/{}/tree", c.session)).await;

        let share = format!("/s/{}/messages/{answer_id}/share", c.session);
        let (_, html) = post_checked(&c.app, &c.s, &share, "expires=7").await;
        let page = get_checked(&c.app, &cookie, &format!("/l/{}", link_token(&html))).await;
        page.shows("share link", &user_marker);
        page.carries("share link", &model_marker);
        markers.push(user_marker);
        markers.push(model_marker);
    }

    c.app.state.search.settle().await;
    for marker in &markers {
        get_checked(&c.app, &cookie, &format!("/search?q={marker}")).await.shows("search page", marker);
        get_checked(&c.app, &cookie, &format!("/search?q={marker}&live=1"))
            .await
            .shows("live search", marker);
    }
    for page in ["/", "/sidebar", &format!("/w/{workspace}"), "/settings/links", "/search?q=xss"] {
        get_checked(&c.app, &cookie, page).await;
    }
}

/// SECURITY.md 7: every payload that fits a one-line name, as a session title (rename), a
/// workspace name and a prompt template name, shows as text on each page that names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_in_titles_workspace_and_template_names_never_reach_a_page_as_markup() {
    let app = TestApp::spawn().await;
    let user = app.create_user("ada@example.com", Role::Member).await;
    let s = app.login_full(&user).await;
    let (workspace, session) = app.create_session(&user).await;
    let max = arbor::domain::sessions::MAX_NAME_CHARS;
    for (i, marker, title) in names("title", max) {
        let path = format!("/s/{session}/rename");
        post_checked(&app, &s, &path, &format!("title={}", urlencode(&title))).await;
        for page in [format!("/s/{session}"), "/".into(), "/sidebar".into(), format!("/w/{workspace}")] {
            get_checked(&app, &s.cookie, &page).await.shows(&format!("{page} (title {i})"), &marker);
        }
    }
    for (i, marker, name) in names("workspace", max) {
        let res = app.post_form("/workspaces", &format!("name={}", urlencode(&name)), Some(&s)).await;
        assert_eq!(res.status(), 303, "workspace {i}: {}", res.text().await.unwrap());
        let location = res.headers()["location"].to_str().unwrap().to_string();
        get_checked(&app, &s.cookie, &location).await.shows(&format!("{location} (workspace {i})"), &marker);
    }
    for (i, marker, name) in names("template", max) {
        let body = format!("name={}&body=Be+brief.", urlencode(&name));
        let (page, _) = post_checked(&app, &s, "/settings/prompts", &body).await;
        page.shows(&format!("saving template {i}"), &marker);
        get_checked(&app, &s.cookie, "/settings/prompts").await.shows("/settings/prompts", &marker);
    }
    for page in ["/", "/sidebar", &format!("/s/{session}"), "/settings", "/search?q=xss"] {
        get_checked(&app, &s.cookie, page).await;
    }
}

/// SECURITY.md 7: every payload as an uploaded file's name (a text file and a picture) shows as
/// text in the upload chip, in the send fragment and on the session page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_in_file_names_never_reach_a_page_as_markup() {
    let c = chat_with(|_| {}).await;
    let cookie = c.s.cookie.clone();
    for i in 0..CORPUS.len() {
        let (marker, name) = payload(i, "file");
        let (image_marker, image_name) = payload(i, "image");
        let mut ids = Vec::new();
        for (marker, name, bytes) in [
            (&marker, name.clone(), format!("notes {i}").into_bytes()),
            (&image_marker, format!("{image_name}.png"), crate::files::png()),
        ] {
            let res = crate::files::upload(&c, &c.s, &name, bytes).await;
            let status = res.status();
            let html = res.text().await.unwrap();
            assert_eq!(status, 200, "upload {i}: {html}");
            checked(&format!("upload chip {i}"), &html).shows("upload chip", marker);
            ids.push(crate::files::chip_ids(&html).0.to_string());
        }
        c.mock.enqueue(Provider::OpenAi, says("Noted."));
        let body = format!(
            "{}&attachments={}",
            form(&format!("file {i}"), &Uuid::new_v4().simple().to_string(), MODEL),
            ids.join("%2C")
        );
        let res = c.app.post_form(&format!("/s/{}/messages", c.session), &body, Some(&c.s)).await;
        assert_eq!(res.status(), 200, "payload {i}");
        let html = res.text().await.unwrap();
        let page = checked(&format!("send fragment with files {i}"), &html);
        page.shows("send fragment", &marker);
        page.carries("send fragment", &image_marker);
        c.settled(streaming_id(&html)).await;
        let path = format!("/s/{}", c.session);
        let page = get_checked(&c.app, &cookie, &path).await;
        page.shows(&path, &marker);
        page.carries(&path, &image_marker);
    }
    get_checked(&c.app, &cookie, &format!("/s/{}/tree", c.session)).await;
    get_checked(&c.app, &cookie, "/").await;
}

/// SECURITY.md 7: every payload that fits, as text an admin sets (a provider's display name
/// and model ids, a shared key's label, a group's name, an MCP server's command), shows as
/// text in the console and on the pages members see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_in_admin_set_names_never_reach_a_page_as_markup() {
    let c = chat_with(|_| {}).await;
    let root = c.app.create_user("root@example.com", Role::Admin).await;
    let admin = c.app.login_full(&root).await;
    let base = c.mock.url(Provider::OpenAi);
    let provider = crate::admin::add_provider(&c.app, &admin, "team", &base, "").await;
    let provider_page = format!("/admin/providers/{provider}");
    for (i, marker, label) in names("label", 80) {
        let (_, model) = payload(i, "model");
        let body = format!(
            "label={}&kind=openai&base_url={}&visibility=everyone&models={}&enabled=on",
            urlencode(&label),
            urlencode(&base),
            urlencode(&model)
        );
        post_checked(&c.app, &admin, &provider_page, &body).await.0.carries("saving the provider", &marker);
        get_checked(&c.app, &admin.cookie, "/admin/providers").await.shows("/admin/providers", &marker);
        get_checked(&c.app, &admin.cookie, &provider_page).await.carries(&provider_page, &marker);
        get_checked(&c.app, &c.s.cookie, &format!("/s/{}", c.session)).await;
        get_checked(&c.app, &c.s.cookie, "/settings").await;
    }
    for (i, marker, label) in names("key", 80) {
        let keys = format!("/admin/providers/{provider}/keys");
        let body = format!("label={}&key=sk-test-key-{i:04}", urlencode(&label));
        post_checked(&c.app, &admin, &keys, &body).await.0.shows("adding a key", &marker);
    }
    get_checked(&c.app, &admin.cookie, &provider_page).await;
    for (i, marker, name) in names("group", arbor::domain::teams::groups::MAX_NAME_CHARS) {
        let body = format!("name={}", urlencode(&name));
        post_checked(&c.app, &admin, "/admin/groups", &body)
            .await
            .0
            .shows(&format!("making group {i}"), &marker);
    }
    get_checked(&c.app, &admin.cookie, "/admin/groups").await;
    for (i, marker, command) in names("command", 1024) {
        let body = format!("name=tool{i:02}&transport=stdio&command={}", urlencode(&command));
        post_checked(&c.app, &admin, "/admin/mcp", &body)
            .await
            .0
            .carries(&format!("MCP server {i}"), &marker);
    }
    for page in [
        "/admin/mcp",
        "/admin/users",
        "/admin/usage",
        "/admin/audit",
        "/admin/quotas",
        "/admin/links",
        "/admin/directory",
        "/settings/prompts",
        "/settings/mcp",
        "/",
    ] {
        get_checked(&c.app, &admin.cookie, page).await;
    }
    for page in ["/", "/settings", "/settings/prompts", "/settings/mcp", &format!("/s/{}", c.session)] {
        get_checked(&c.app, &c.s.cookie, page).await;
    }
}
