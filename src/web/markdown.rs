//! Markdown to sanitized HTML for chat messages: the only source of HTML that templates may mark `|
//! safe`.
//!
//! Two layers, so a mistake in one is caught by the other: the markdown pass turns every piece of
//! raw HTML in the input into visible text, and the ammonia pass re-parses whatever HTML was
//! produced and keeps only an explicit allow-list of tags, attributes and URL schemes.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::LazyLock;

use ammonia::{Builder, UrlRelative};
use pulldown_cmark::{Alignment, CodeBlockKind, CowStr, Event, Options, Parser, Tag, TagEnd, html};

/// HTML produced by Arbor's own sanitizer: the only thing templates may mark safe.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct SafeHtml(String);

impl SafeHtml {
    /// The sanitized HTML as a string slice.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The sanitized HTML as an owned string.
    #[must_use]
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for SafeHtml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Markdown to sanitized HTML.
#[must_use]
pub fn render_markdown(text: &str) -> SafeHtml {
    if text.trim().is_empty() {
        return SafeHtml(String::new());
    }
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_MATH;
    let events = defang(Parser::new_ext(text, options));
    // Rendered HTML is usually a little longer than its markdown.
    let mut unsafe_html = String::with_capacity(text.len() + text.len() / 2);
    html::push_html(&mut unsafe_html, events.into_iter());
    SafeHtml(SANITIZER.clean(&unsafe_html).to_string())
}

/// How deep containers and emphasis may nest in the output; deeper ones are flattened into their
/// parent. html5ever's scope checks walk the stack of open elements, so without a cap a message of
/// a million `>` costs quadratic time (hours) to sanitize; real messages never come close to this.
const MAX_NESTING: usize = 32;

/// Rewrites the event stream so that pulldown-cmark itself never emits markup from the input:
/// raw HTML becomes text, task-list checkboxes become text, code-fence info strings are reduced
/// to a safe language name, table alignment uses `align` instead of inline `style`, and nesting
/// is capped at [`MAX_NESTING`].
fn defang(parser: Parser<'_>) -> Vec<Event<'_>> {
    let mut out = Vec::new();
    let mut alignments: Vec<Alignment> = Vec::new();
    let mut in_head = false;
    let mut column = 0usize;
    // Inside an HTML block each source line arrives as its own event; a line break between them
    // keeps the shown source readable without emitting a dangling `<br>` after the last line.
    let mut html_line_open = false;
    // One flag per open tag: whether its start was emitted, so its end is emitted to match.
    let mut open: Vec<bool> = Vec::new();
    let mut depth = 0usize;
    for event in parser {
        let event = match event {
            Event::Start(tag) => {
                let keep = match tag {
                    // Items must follow their list, whatever became of it.
                    Tag::Item => open.last().copied().unwrap_or(true),
                    Tag::BlockQuote(_) | Tag::List(_) | Tag::Emphasis | Tag::Strong | Tag::Strikethrough => {
                        depth < MAX_NESTING
                    }
                    _ => true,
                };
                open.push(keep);
                if !keep {
                    // Flattened list items would otherwise run their words together.
                    if tag == Tag::Item {
                        out.push(Event::SoftBreak);
                    }
                    continue;
                }
                depth += 1;
                Event::Start(tag)
            }
            Event::End(tag) => {
                if !open.pop().unwrap_or(true) {
                    continue;
                }
                depth = depth.saturating_sub(1);
                Event::End(tag)
            }
            other => other,
        };
        match event {
            Event::Start(Tag::HtmlBlock) => {
                html_line_open = false;
                out.push(Event::Start(Tag::Paragraph));
            }
            Event::End(TagEnd::HtmlBlock) => out.push(Event::End(TagEnd::Paragraph)),
            Event::Html(raw) => {
                for piece in raw.split_inclusive('\n') {
                    if html_line_open {
                        out.push(Event::HardBreak);
                    }
                    let line = piece.strip_suffix('\n').unwrap_or(piece);
                    html_line_open = piece.ends_with('\n');
                    if !line.is_empty() {
                        out.push(Event::Text(CowStr::from(line.to_owned())));
                    }
                }
            }
            Event::InlineHtml(raw) => out.push(Event::Text(raw)),
            Event::TaskListMarker(checked) => {
                out.push(Event::Text(CowStr::Borrowed(if checked { "[x] " } else { "[ ] " })));
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let lang = code_language(&info).unwrap_or_default();
                out.push(Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(CowStr::from(lang.to_owned())))));
            }
            Event::Start(Tag::Table(aligns)) => {
                alignments = aligns;
                // The renderer would turn alignments into `style`, which the sanitizer forbids.
                out.push(Event::Start(Tag::Table(Vec::new())));
            }
            Event::Start(Tag::TableHead) => {
                in_head = true;
                column = 0;
                out.push(Event::Start(Tag::TableHead));
            }
            Event::End(TagEnd::TableHead) => {
                in_head = false;
                out.push(Event::End(TagEnd::TableHead));
            }
            Event::Start(Tag::TableRow) => {
                column = 0;
                out.push(Event::Start(Tag::TableRow));
            }
            Event::Start(Tag::TableCell) => {
                let cell = if in_head { "th" } else { "td" };
                let align = match alignments.get(column) {
                    Some(Alignment::Left) => " align=\"left\"",
                    Some(Alignment::Center) => " align=\"center\"",
                    Some(Alignment::Right) => " align=\"right\"",
                    Some(Alignment::None) | None => "",
                };
                // Fixed strings of our own, not input: the one place raw HTML enters the stream.
                out.push(Event::Html(CowStr::from(format!("<{cell}{align}>"))));
            }
            Event::End(TagEnd::TableCell) => {
                column += 1;
                out.push(Event::Html(CowStr::Borrowed(if in_head { "</th>" } else { "</td>" })));
            }
            other => out.push(other),
        }
    }
    out
}

/// The language of a fenced code block, when its info string starts with a plausible name
/// (`rust`, `c++`, `objective-c`; rustdoc's `rust,ignore` counts as `rust`).
fn code_language(info: &str) -> Option<&str> {
    let word = info.split_whitespace().next()?;
    let lang = word.split(',').next()?;
    is_language_name(lang).then_some(lang)
}

/// Whether `name` fits the `language-[A-Za-z0-9_+-]+` class the stylesheet and highlighter expect.
fn is_language_name(name: &str) -> bool {
    // Real language names are short; the cap keeps attribute values from bloating the page.
    !name.is_empty()
        && name.len() <= 32
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'-'))
}

/// Whether an image may load from `src`: only Arbor's own blob endpoint, so a message cannot
/// make the viewer's browser fetch other sites (tracking pixels) or other same-origin URLs
/// (`/logout`, say).
fn is_allowed_image_src(src: &str) -> bool {
    // Plain path characters only: `%2e%2e`, `\` and `..` would let the browser resolve the path
    // out of `/api/blob/` to another endpoint.
    src.strip_prefix("/api/blob/").is_some_and(|rest| {
        !rest.is_empty()
            && !rest.contains("..")
            && rest.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
    })
}

/// Attribute values that survive the tag/attribute allow-list still get their content checked.
fn filter_attribute<'u>(element: &str, attribute: &str, value: &'u str) -> Option<Cow<'u, str>> {
    let keep = match (element, attribute) {
        ("code", "class") => value.strip_prefix("language-").is_some_and(is_language_name),
        // The two classes pulldown-cmark gives TeX, which the page renders with KaTeX.
        ("span", "class") => matches!(value, "math math-inline" | "math math-display"),
        ("img", "src") => is_allowed_image_src(value),
        ("ol", "start") => value.len() <= 9 && value.bytes().all(|b| b.is_ascii_digit()),
        ("th" | "td", "align") => matches!(value, "left" | "center" | "right"),
        _ => true,
    };
    keep.then_some(Cow::Borrowed(value))
}

/// Built once: ammonia's builder is a bundle of hash sets, and every message render needs it.
static SANITIZER: LazyLock<Builder<'static>> = LazyLock::new(|| {
    #[rustfmt::skip]
    let tags: HashSet<&str> = [
        "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre",
        "blockquote", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "a", "img", "span",
    ]
    .into_iter()
    .collect();
    let attrs = |names: &[&'static str]| names.iter().copied().collect::<HashSet<&str>>();
    let tag_attributes: HashMap<&str, HashSet<&str>> = [
        ("a", attrs(&["href", "title"])),
        ("img", attrs(&["src", "alt", "title"])),
        ("code", attrs(&["class"])),
        ("span", attrs(&["class"])),
        ("ol", attrs(&["start"])),
        ("th", attrs(&["align"])),
        ("td", attrs(&["align"])),
    ]
    .into_iter()
    .collect();
    // Dropped together with everything inside them, should one ever get past the markdown pass.
    let clean_content: HashSet<&str> =
        ["script", "style", "iframe", "object", "embed", "svg", "math", "template", "noscript"]
            .into_iter()
            .collect();
    let mut builder = Builder::empty();
    // Every knob is set explicitly: `Builder::empty` only clears the tag list and would otherwise
    // keep ammonia's broader defaults (generic `lang`/`title`, ftp/irc/… schemes).
    builder
        .tags(tags)
        .clean_content_tags(clean_content)
        .generic_attributes(HashSet::new())
        .generic_attribute_prefixes(HashSet::new())
        .tag_attributes(tag_attributes)
        .tag_attribute_values(HashMap::new())
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .url_relative(UrlRelative::PassThrough)
        .link_rel(Some("noopener noreferrer nofollow"))
        .set_tag_attribute_value("a", "target", "_blank")
        .strip_comments(true)
        .id_prefix(None)
        .attribute_filter(filter_attribute);
    builder
});

#[cfg(test)]
mod tests {
    use super::*;

    fn md(text: &str) -> String {
        render_markdown(text).into_string()
    }

    /// The real tags in serialized HTML (escaped text has no `<`), quoted attribute values included.
    fn live_tags(html: &str) -> String {
        let mut tags = String::new();
        let (mut in_tag, mut quote) = (false, None);
        for c in html.chars() {
            match (in_tag, quote, c) {
                (false, _, '<') => in_tag = true,
                (true, None, '"' | '\'') => quote = Some(c),
                (true, Some(q), _) if c == q => quote = None,
                (true, None, '>') => {
                    in_tag = false;
                    tags.push('\n');
                }
                _ => {}
            }
            if in_tag {
                tags.push(c.to_ascii_lowercase());
            }
        }
        tags
    }

    /// None of `bad` may occur inside a real tag of `html` (it may still show as escaped text).
    fn assert_not_live(html: &str, bad: &[&str]) {
        let tags = live_tags(html);
        for b in bad {
            assert!(!tags.contains(&b.to_ascii_lowercase()), "live {b:?} in {html:?}");
        }
    }

    #[test]
    fn empty_input_is_empty_output() {
        assert_eq!(md(""), "");
        assert_eq!(md("  \n\n "), "");
    }

    #[test]
    fn headings_lists_emphasis() {
        let html = md("# Title\n\n## Sub\n\n- one\n- **two**\n\n3. three\n4. *four* ~~gone~~\n");
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("<h2>Sub</h2>"), "{html}");
        assert!(html.contains("<ul>") && html.contains("<li><strong>two</strong></li>"), "{html}");
        assert!(html.contains("<ol start=\"3\">"), "{html}");
        assert!(html.contains("<em>four</em>") && html.contains("<del>gone</del>"), "{html}");
    }

    #[test]
    fn code_fence_keeps_language_class() {
        let html = md("```rust\nfn main() { let x = 1 < 2; }\n```\n");
        assert!(html.contains("<pre><code class=\"language-rust\">"), "{html}");
        assert!(html.contains("1 &lt; 2"), "{html}");
        let html = md("```c++ extra words\nint x;\n```\n");
        assert!(html.contains("class=\"language-c++\""), "{html}");
        let html = md("```rust,ignore\nx\n```\n");
        assert!(html.contains("class=\"language-rust\""), "{html}");
        let html = md("    indented code\n");
        assert!(html.contains("<pre><code>indented code"), "{html}");
    }

    #[test]
    fn malicious_info_string_injects_nothing() {
        for fence in [
            "```\" onmouseover=alert(1)\nx\n```\n",
            "```rust\" onmouseover=alert(1)\nx\n```\n",
            "```x\"><script>alert(1)</script>\nx\n```\n",
        ] {
            let html = md(fence);
            assert_not_live(&html, &["onmouseover", "<script", "class=\"language-\""]);
            assert!(html.contains("<pre><code>x"), "{html}");
        }
    }

    #[test]
    fn tables_render_with_alignment_but_no_style() {
        let html = md("| a | b | c |\n|:--|:-:|--:|\n| 1 | 2 | 3 |\n");
        assert!(html.contains("<table>") && html.contains("<thead>") && html.contains("<tbody>"), "{html}");
        assert!(html.contains("<th align=\"left\">a</th>"), "{html}");
        assert!(html.contains("<td align=\"center\">2</td>"), "{html}");
        assert!(html.contains("<td align=\"right\">3</td>"), "{html}");
        assert_not_live(&html, &["style"]);
    }

    #[test]
    fn task_lists_are_text() {
        let html = md("- [x] done\n- [ ] todo\n");
        assert!(html.contains("[x] done") && html.contains("[ ] todo"), "{html}");
        assert_not_live(&html, &["<input"]);
    }

    #[test]
    fn script_is_shown_as_text() {
        let html = md("<script>alert(1)</script>");
        assert_not_live(&html, &["<script"]);
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
        let html = md("hello <script>alert(1)</script> world");
        assert_not_live(&html, &["<script"]);
        assert!(html.contains("hello") && html.contains("world"), "{html}");
    }

    #[test]
    fn event_handlers_never_live() {
        for input in [
            "<img src=x onerror=alert(1)>",
            "text <img src=x onerror=alert(1)> more",
            "<svg onload=alert(1)>",
            "<svg><animate onbegin=alert(1) attributeName=x dur=1s>",
            "<div onclick=\"alert(1)\">hi</div>",
            "<a href=\"#\" onmouseover=\"alert(1)\">x</a>",
        ] {
            let html = md(input);
            assert_not_live(
                &html,
                &["<img", "<svg", "<div", "<a ", "<animate", "onerror", "onload", "onclick"],
            );
            assert_not_live(&html, &["onmouseover", "onbegin", "alert"]);
            // The handler may appear only as escaped, inert text.
            assert!(html.contains("&lt;"), "{input} -> {html}");
        }
    }

    #[test]
    fn dangerous_link_schemes_are_stripped() {
        let html = md("[x](javascript:alert(1))");
        assert_not_live(&html, &["href=\"javascript", "javascript:alert"]);
        assert!(html.contains(">x</a>"), "{html}");
        for input in [
            "[x](JaVaScRiPt:alert(1))",
            "[x](vbscript:msgbox(1))",
            "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
            "[x](&#106;avascript:alert(1))",
            "<javascript:alert(1)>",
            "![x](javascript:alert(1))",
            "![x](data:image/svg+xml;base64,AAAA)",
        ] {
            let html = md(input);
            assert_not_live(
                &html,
                &["href=\"javascript", "href=\"vbscript", "href=\"data", "src=\"", "src=\"data"],
            );
        }
    }

    #[test]
    fn raw_anchor_with_data_url_is_text() {
        let html = md("<a href=\"data:text/html,<script>alert(1)</script>\">click</a>");
        assert_not_live(&html, &["<a ", "<script", "href="]);
        assert!(html.contains("click"), "{html}");
    }

    #[test]
    fn iframe_style_and_inline_style_are_neutralised() {
        let html = md("<iframe src=\"https://evil.example\"></iframe>\n\nafter");
        assert_not_live(&html, &["<iframe"]);
        assert!(html.contains("after"), "{html}");
        let html = md("<style>body { display: none }</style>\n\nvisible");
        assert_not_live(&html, &["<style"]);
        assert!(html.contains("visible"), "{html}");
        let html = md("<p style=\"position:fixed;top:0\">overlay</p>");
        assert_not_live(&html, &["style=", "<p style"]);
        assert!(html.contains("overlay"), "{html}");
        let html = md("<form action=/x><input name=a></form>");
        assert_not_live(&html, &["<form", "<input"]);
    }

    #[test]
    fn links_get_rel_and_target() {
        let html = md("[Arbor](https://example.com/a?b=1&c=2 \"t\")");
        assert!(html.contains("href=\"https://example.com/a?b=1&amp;c=2\""), "{html}");
        assert!(html.contains("rel=\"noopener noreferrer nofollow\""), "{html}");
        assert!(html.contains("target=\"_blank\""), "{html}");
        assert!(html.contains("title=\"t\""), "{html}");
        let html = md("see <https://example.com>");
        assert!(html.contains("rel=\"noopener noreferrer nofollow\""), "{html}");
        let html = md("[rel](/sessions/1)");
        assert!(html.contains("href=\"/sessions/1\""), "{html}");
    }

    #[test]
    fn images_only_from_blobs() {
        let html = md("![b](/api/blob/abc123 \"Cat\")");
        assert!(html.contains("<img src=\"/api/blob/abc123\" alt=\"b\" title=\"Cat\">"), "{html}");
        for bad in [
            "![cat](https://example.com/cat.png)",
            "![x](http://example.com/x.png)",
            "![x](//evil.example/x.png)",
            "![x](/logout)",
            "![x](/api/blob/../../logout)",
            "![x](/api/blob/%2e%2e/logout)",
            "![x](/api/blob/a\\..\\..\\logout)",
            "![x](/api/blob/)",
            "![x](relative.png)",
        ] {
            let html = md(bad);
            assert_not_live(&html, &["src="]);
        }
    }

    #[test]
    fn tex_becomes_math_spans_for_katex_and_nothing_else() {
        let html = md("Euler: $e^{i\\pi} + 1 = 0$ and\n\n$$\\int_0^1 x\\,dx < 1$$");
        assert!(html.contains("<span class=\"math math-inline\">e^{i\\pi} + 1 = 0</span>"), "{html}");
        assert!(html.contains("<span class=\"math math-display\">\\int_0^1 x\\,dx &lt; 1</span>"), "{html}");
        // Prices are not maths.
        assert!(!md("It costs $5 and $10.").contains("math"));
        // Raw spans with other classes stay text.
        assert_not_live(
            &md("<span class=\"math math-inline\" onclick=\"x()\">a</span>"),
            &["<span", "onclick"],
        );
    }

    #[test]
    fn html_block_is_readable_text() {
        let html = md("<div>\n<b>bold?</b>\n</div>");
        assert_not_live(&html, &["<div", "<b>"]);
        assert_eq!(html, "<p>&lt;div&gt;<br>\n&lt;b&gt;bold?&lt;/b&gt;<br>\n&lt;/div&gt;</p>\n");
    }

    #[test]
    fn comments_are_not_live() {
        let html = md("a <!-- <script>alert(1)</script> --> b");
        assert_not_live(&html, &["<!--", "<script"]);
    }

    #[test]
    fn safe_html_serializes_as_plain_string() {
        let html = render_markdown("*hi*");
        assert_eq!(html.to_string(), html.as_str());
        assert_eq!(serde_json::to_string(&html).unwrap(), "\"<p><em>hi</em></p>\\n\"");
    }

    #[test]
    fn deep_nesting_is_flattened_but_keeps_text() {
        let html = md(&format!("{} deep", ">".repeat(100)));
        assert!(html.contains("deep"), "{html}");
        assert!(html.matches("<blockquote>").count() <= MAX_NESTING, "{html}");
        let html = md(&format!("{}a\n{}b\n", "  ".repeat(50) + "- ", "  ".repeat(51) + "- "));
        assert!(html.contains('a') && html.contains('b'), "{html}");
        let mut list = String::new();
        for i in 0..60 {
            list.push_str(&"  ".repeat(i));
            list.push_str("- item");
            list.push_str(&i.to_string());
            list.push('\n');
        }
        let html = md(&list);
        assert!(html.contains("item0") && html.contains("item58\nitem59"), "{html}");
        assert_eq!(html.matches("<ul>").count(), html.matches("</ul>").count(), "{html}");
    }

    #[test]
    fn huge_and_pathological_input_does_not_panic() {
        const MB: usize = 1 << 20;
        let inputs = [
            "lorem *ipsum* `dolor` [sit](https://a.example) amet\n".repeat(MB / 50),
            // Deep nesting: quadratic in the HTML parser unless capped.
            ">".repeat(MB),
            "> 1. ".repeat(MB / 5),
            "*x ".repeat(MB / 6) + &" x*".repeat(MB / 6),
            "<div>".repeat(MB / 5),
            "[".repeat(MB),
            "| a |\n|---|\n".to_owned() + &"| x |\n".repeat(MB / 6),
        ];
        for input in inputs {
            let html = render_markdown(&input);
            assert!(!html.as_str().is_empty());
        }
    }
}
