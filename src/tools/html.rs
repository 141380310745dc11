//! HTML to readable text for web_fetch, on html5ever's tokenizer (the copy ammonia already builds).
//!
//! The tokenizer decodes entities and splits tags exactly as a browser does; this sink only decides
//! what becomes text: the content of script, style, head and the like is dropped, block elements
//! break lines, headings and list items get Markdown-like prefixes, links keep their absolute URL.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

/// Elements whose whole content is dropped.
const DROPPED: [&str; 11] = [
    "script", "style", "noscript", "template", "head", "svg", "math", "iframe", "noembed", "noframes",
    "object",
];

/// Elements that end a paragraph: a blank line before and after.
const PARAGRAPHS: [&str; 15] =
    ["p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "table", "ul", "ol", "dl", "figure", "hr"];

/// Elements that start on a new line.
const LINES: [&str; 31] = [
    "div",
    "section",
    "article",
    "header",
    "footer",
    "main",
    "aside",
    "nav",
    "address",
    "details",
    "summary",
    "dialog",
    "fieldset",
    "form",
    "li",
    "dt",
    "dd",
    "tr",
    "caption",
    "thead",
    "tbody",
    "tfoot",
    "figcaption",
    "hgroup",
    "body",
    "html",
    "option",
    "legend",
    "menu",
    "center",
    "search",
];

/// Turns an HTML document into readable plain text.
pub fn html_to_text(html: &str) -> String {
    let tokenizer = Tokenizer::new(Sink::default(), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    let text = tokenizer.sink.state.take().out;
    tidy(&text)
}

#[derive(Default)]
struct Sink {
    state: RefCell<State>,
}

#[derive(Default)]
struct State {
    out: String,
    /// Open dropped elements; their content is skipped while any is open.
    dropped: Vec<String>,
    /// Line breaks owed before the next text: 1 a new line, 2 a blank line.
    breaks: u8,
    /// A space is owed before the next word.
    space: bool,
    /// A prefix ("## ", "- ") owed at the start of the next text.
    prefix: String,
    /// Nested `<pre>`: whitespace is kept.
    pre: u32,
    /// Nested lists, for indentation.
    lists: usize,
    /// Open links: the absolute URL (if any) and where their text starts in `out`.
    links: Vec<(Option<String>, usize)>,
    /// Whether the current table row already has a cell.
    cell_in_row: bool,
}

impl State {
    fn block(&mut self, level: u8) {
        self.breaks = self.breaks.max(level);
        self.space = false;
    }

    /// Writes owed breaks and the prefix before text.
    fn start_text(&mut self) {
        if !self.out.is_empty() && self.breaks > 0 {
            let want = usize::from(self.breaks);
            let have = self.out.chars().rev().take_while(|&c| c == '\n').count();
            for _ in have..want {
                self.out.push('\n');
            }
            self.space = false;
        }
        self.breaks = 0;
        if !self.prefix.is_empty() {
            let prefix = std::mem::take(&mut self.prefix);
            self.out.push_str(&prefix);
            self.space = false;
        }
    }

    fn text(&mut self, text: &str) {
        if self.pre > 0 {
            if text.is_empty() {
                return;
            }
            self.start_text();
            self.out.push_str(text);
            return;
        }
        let starts_with_space = text.starts_with(char::is_whitespace);
        let ends_with_space = text.ends_with(char::is_whitespace);
        let mut words = text.split_whitespace().peekable();
        if words.peek().is_none() {
            if !text.is_empty() {
                self.space = true;
            }
            return;
        }
        if starts_with_space {
            self.space = true;
        }
        let owed_break = self.breaks > 0 && !self.out.is_empty();
        self.start_text();
        for (i, word) in words.enumerate() {
            let at_line_start = self.out.is_empty() || self.out.ends_with('\n') || self.out.ends_with(' ');
            if (i > 0 || (self.space && !owed_break)) && !at_line_start {
                self.out.push(' ');
            }
            self.out.push_str(word);
        }
        self.space = ends_with_space;
    }

    fn start_tag(&mut self, tag: &Tag) {
        let name = &*tag.name;
        if DROPPED.contains(&name) {
            if !tag.self_closing {
                self.dropped.push(name.to_string());
            }
            return;
        }
        if name == "body" {
            // A <head> left open ends where the body starts.
            self.dropped.clear();
        }
        if !self.dropped.is_empty() {
            return;
        }
        match name {
            "br" => {
                if self.pre > 0 {
                    self.out.push('\n');
                } else {
                    self.start_text();
                    self.out.push('\n');
                    self.space = false;
                }
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.block(2);
                let level = name[1..].parse::<usize>().unwrap_or(1);
                self.prefix = format!("{} ", "#".repeat(level));
            }
            "li" => {
                self.block(1);
                self.prefix = format!("{}- ", "  ".repeat(self.lists.saturating_sub(1)));
            }
            "ul" | "ol" | "menu" => {
                self.lists += 1;
                self.block(if self.lists == 1 { 2 } else { 1 });
            }
            "pre" => {
                self.block(2);
                self.pre += 1;
            }
            "tr" => {
                self.block(1);
                self.cell_in_row = false;
            }
            "td" | "th" => {
                if self.cell_in_row {
                    self.start_text();
                    self.out.push_str(" | ");
                    self.space = false;
                }
                self.cell_in_row = true;
            }
            "a" => {
                let href = attr(tag, "href").filter(|h| is_absolute_http(h));
                self.links.push((href, self.out.len()));
            }
            "img" => {
                if let Some(alt) = attr(tag, "alt").map(|a| a.trim().to_string()).filter(|a| !a.is_empty()) {
                    self.text(&format!(" [{alt}] "));
                }
            }
            _ if PARAGRAPHS.contains(&name) => self.block(2),
            _ if LINES.contains(&name) => self.block(1),
            _ => {}
        }
    }

    fn end_tag(&mut self, tag: &Tag) {
        let name = &*tag.name;
        if let Some(open) = self.dropped.iter().rposition(|d| d == name) {
            self.dropped.truncate(open);
            return;
        }
        if !self.dropped.is_empty() {
            return;
        }
        match name {
            "a" => {
                if let Some((Some(href), start)) = self.links.pop() {
                    let label = self.out.get(start..).unwrap_or("").trim();
                    if !label.is_empty() && label != href {
                        self.out.push_str(&format!(" ({href})"));
                    }
                }
            }
            "ul" | "ol" | "menu" => {
                self.lists = self.lists.saturating_sub(1);
                self.block(if self.lists == 0 { 2 } else { 1 });
            }
            "pre" => {
                self.pre = self.pre.saturating_sub(1);
                self.block(2);
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.prefix.clear();
                self.block(2);
            }
            "li" => {
                self.prefix.clear();
                self.block(1);
            }
            "td" | "th" => self.space = true,
            _ if PARAGRAPHS.contains(&name) => self.block(2),
            _ if LINES.contains(&name) => self.block(1),
            _ => {}
        }
    }
}

fn attr(tag: &Tag, name: &str) -> Option<String> {
    tag.attrs.iter().find(|a| &*a.name.local == name).map(|a| a.value.to_string())
}

fn is_absolute_http(href: &str) -> bool {
    let lower = href.trim().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

impl TokenSink for Sink {
    type Handle = ();

    fn process_token(&self, token: Token, _line_number: u64) -> TokenSinkResult<()> {
        let mut state = self.state.borrow_mut();
        match token {
            Token::TagToken(tag) => match tag.kind {
                TagKind::StartTag => {
                    state.start_tag(&tag);
                    // The tokenizer needs the tree builder's word on which elements hold raw text.
                    return match &*tag.name {
                        _ if tag.self_closing => TokenSinkResult::Continue,
                        "script" => TokenSinkResult::RawData(RawKind::ScriptData),
                        "style" | "xmp" | "iframe" | "noembed" | "noframes" | "noscript" => {
                            TokenSinkResult::RawData(RawKind::Rawtext)
                        }
                        "title" | "textarea" => TokenSinkResult::RawData(RawKind::Rcdata),
                        "plaintext" => TokenSinkResult::Plaintext,
                        _ => TokenSinkResult::Continue,
                    };
                }
                TagKind::EndTag => state.end_tag(&tag),
            },
            Token::CharacterTokens(text) => {
                if state.dropped.is_empty() {
                    state.text(&text);
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

/// Trims each line's trailing spaces and keeps at most one blank line in a row.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 || out.is_empty() {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_realistic_page() {
        let page = r#"<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Release notes &ndash; Example</title>
  <style>body { color: red; } .x::before { content: "STYLE-LEAK"; }</style>
  <script>var leak = "SCRIPT-LEAK"; if (a < b && c > d) { document.write("</p>"); }</script>
</head>
<body>
  <nav><ul><li><a href="/">Home</a></li><li><a href="https://example.com/docs">Docs</a></li></ul></nav>
  <main>
    <h1>Version   2.0 &amp; beyond</h1>
    <p>This release brings <b>faster</b> builds,
       <a href="https://example.com/changelog?a=1&amp;b=2">the full changelog</a>, and
       a <a href="relative/page.html">relative link</a>.</p>
    <h2>Highlights</h2>
    <ul>
      <li>Caf&eacute; support &mdash; finally</li>
      <li>Nested:
        <ol><li>first</li><li>second</li></ol>
      </li>
    </ul>
    <p>Line one<br>Line two&nbsp;&lt;tag&gt; &#x27;quoted&#39;</p>
    <pre>fn main() {
    println!("hi");
}</pre>
    <table><tr><th>Name</th><th>Value</th></tr><tr><td>a</td><td>1</td></tr></table>
    <noscript>NOSCRIPT-LEAK</noscript>
    <template><p>TEMPLATE-LEAK</p></template>
    <svg viewBox="0 0 10 10"><text>SVG-LEAK</text><style>svg{}</style></svg>
    <img src="x.png" alt="A diagram">
  </main>
  <script type="module">import("SCRIPT2-LEAK")</script>
  <!-- COMMENT-LEAK -->
  <footer><p>&copy; 2026 Example</p></footer>
</body>
</html>"#;
        let text = html_to_text(page);
        for leak in ["LEAK", "color: red", "Release notes", "<b>", "&amp;"] {
            assert!(!text.contains(leak), "{leak} in:\n{text}");
        }
        let expected = "\
- Home
- Docs (https://example.com/docs)

# Version 2.0 & beyond

This release brings faster builds, the full changelog (https://example.com/changelog?a=1&b=2), and a relative link.

## Highlights

- Café support — finally
- Nested:
  - first
  - second

Line one
Line two <tag> 'quoted'

fn main() {
    println!(\"hi\");
}

Name | Value
a | 1

[A diagram]

© 2026 Example
";
        assert_eq!(text, expected, "got:\n{text}");
    }

    #[test]
    fn whitespace_and_blank_lines_collapse() {
        assert_eq!(html_to_text("<p>a</p>\n\n\n<p>b</p><div></div><div></div><p>c</p>"), "a\n\nb\n\nc\n");
        assert_eq!(html_to_text("  one\n\t two  <span>three</span>four "), "one two threefour\n");
        assert_eq!(html_to_text("<div>x</div><div>y</div>"), "x\ny\n");
        assert_eq!(html_to_text(""), "");
        assert_eq!(html_to_text("<script>only</script>"), "");
    }

    #[test]
    fn links_and_malformed_markup() {
        assert_eq!(
            html_to_text(
                r#"<a href="https://x.test/">https://x.test/</a> <a href="javascript:alert(1)">js</a>"#
            ),
            "https://x.test/ js\n"
        );
        assert_eq!(html_to_text(r#"<a href="HTTP://X.test/a">x</a>"#), "x (HTTP://X.test/a)\n");
        // Unclosed and stray tags do not swallow the text after them.
        assert_eq!(html_to_text("<p>a <b>b <i>c</p><p>d</span></div>e"), "a b c\n\nd\ne\n");
        assert_eq!(html_to_text("<head><title>t</title><body><p>kept</p>"), "kept\n");
        assert_eq!(html_to_text("<script>a</script x>b"), "b\n");
        assert_eq!(html_to_text("<style>p{}</style >after"), "after\n");
        assert_eq!(html_to_text("a<svg/>b"), "ab\n");
        assert_eq!(html_to_text("x &unknown; &#0; &#xD800; y"), "x &unknown; \u{FFFD} \u{FFFD} y\n");
    }
}
