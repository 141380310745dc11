//! Run events to Server-Sent Events: names come only from this file, text is always escaped.

use actix_web_lab::sse;
use futures_util::Stream;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use crate::events::{RunEvent, RunRegistry, RunSnapshot, Subscription};

/// What a page shows when its reader loses the session: mid-stream (this stream's last event) or
/// at the page's next watch (`pending_watch`), whichever comes first.
pub(crate) const REVOKED_NOTICE: &str = r#"<p class="flash flash-error" role="alert" id="access-revoked">This session is no longer available to you: its workspace is no longer shared with you, or it was deleted. Reload to leave.</p>"#;

pub use super::escape::escape_text;

/// Text wrapped in an element, so a trailing newline survives SSE framing.
fn span(class: &str, text: &str) -> String {
    format!("<span class=\"{class}\">{}</span>", escape_text(text))
}

fn event(name: &'static str, html: String) -> sse::Event {
    sse::Data::new(html).event(name).into()
}

/// One tool call card.
fn tool_card(name: &str, arguments: &str) -> String {
    format!(
        "<div class=\"tool-call\" hx-disable><span class=\"tool-name\">{}</span><pre class=\"tool-args\">{}</pre></div>",
        escape_text(name),
        escape_text(arguments)
    )
}

/// The live part of a streaming answer: thoughts, answer text and tool calls so far. The same
/// markup is the `snapshot` event and the skeleton's first content.
pub fn live_html(thoughts: &str, text: &str, tool_calls: &[(String, String)]) -> String {
    let open = if thoughts.is_empty() { "" } else { " open" };
    let tools: String = tool_calls.iter().map(|(n, a)| tool_card(n, a)).collect();
    format!(
        "<details class=\"thoughts\"{open}><summary>Thinking</summary><div class=\"thought-body\" hx-disable>{}</div></details>\
<div class=\"answer\" hx-disable>{}</div><div class=\"tool-calls\">{tools}</div>",
        span("thought-text", thoughts),
        span("answer-text", text),
    )
}

/// The `snapshot` event: everything the run produced so far.
pub fn snapshot_event(s: &RunSnapshot) -> sse::Event {
    event("snapshot", live_html(&s.thoughts, &s.text, &s.tool_calls))
}

/// The `done` event carrying the final, server-rendered message; always the last event.
pub fn done_event(final_html: String) -> sse::Event {
    event("done", final_html)
}

/// One non-terminal run event as an SSE event (`Done` is rendered by the caller).
pub fn run_event(e: &RunEvent) -> Option<sse::Event> {
    Some(match e {
        RunEvent::Delta(t) => event("delta", span("delta", t)),
        RunEvent::Thought(t) => event("thought", span("thought-delta", t)),
        RunEvent::ToolCall { name, arguments } => event("tool", tool_card(name, arguments)),
        RunEvent::Usage { input, output } => {
            event("usage", format!("<span class=\"usage\">{input} in · {output} out</span>"))
        }
        RunEvent::Error(m) => {
            event("error", format!("<div class=\"flash flash-error\" hx-disable>{}</div>", escape_text(m)))
        }
        RunEvent::Done { .. } | RunEvent::Advance { .. } => return None,
    })
}

/// What the session stream yields: an event ready to send, or the end, which the caller renders
/// from the database (the final message of `message_id`).
pub enum StreamItem {
    /// Send as is.
    Event(sse::Event),
    /// The run is over (or there was none): send `done` with this message rendered; `plain`
    /// when the run said it wrote that one answer and nothing else ([`RunEvent::Done`]).
    Done { message: Option<Uuid>, plain: bool },
}

/// The end of a stream whose run said nothing more of what it wrote.
fn done(message: Option<Uuid>) -> StreamItem {
    StreamItem::Done { message, plain: false }
}

enum Phase {
    Start(Option<Subscription>),
    Live {
        sub: Subscription,
        last_seq: u64,
    },
    /// An error was sent; `done` still follows so every stream ends with it.
    Closing(Option<Uuid>),
    End,
}

/// A session's stream: the snapshot first, then live events in order, `done` last. A receiver
/// that falls behind is resynchronised with a fresh snapshot instead of a patch.
pub fn session_stream(
    registry: RunRegistry,
    session_id: Uuid,
    first: Option<Subscription>,
) -> impl Stream<Item = StreamItem> {
    futures_util::stream::unfold(Phase::Start(first), move |phase| {
        let registry = registry.clone();
        async move {
            match phase {
                Phase::Start(None) => Some((done(None), Phase::End)),
                Phase::Closing(id) => Some((done(id), Phase::End)),
                Phase::Start(Some(sub)) => {
                    let last_seq = sub.snapshot.seq;
                    Some((StreamItem::Event(snapshot_event(&sub.snapshot)), Phase::Live { sub, last_seq }))
                }
                Phase::Live { mut sub, last_seq } => loop {
                    let message_id = sub.snapshot.message_id;
                    match sub.receiver.recv().await {
                        Ok(env) if env.run_id != sub.snapshot.run_id || env.seq <= last_seq => continue,
                        Ok(env) => match &env.event {
                            RunEvent::Done { message_id: done_id, plain } => {
                                let item =
                                    StreamItem::Done { message: done_id.or(message_id), plain: *plain };
                                break Some((item, Phase::End));
                            }
                            // The watched message is finished; the page renders it (and what
                            // follows it) and connects to the next one itself.
                            RunEvent::Advance { .. } => {
                                break Some((done(message_id), Phase::End));
                            }
                            other => {
                                let next = if matches!(other, RunEvent::Error(_)) {
                                    Phase::Closing(message_id)
                                } else {
                                    Phase::Live { last_seq: env.seq, sub }
                                };
                                match run_event(other) {
                                    Some(ev) => break Some((StreamItem::Event(ev), next)),
                                    None => break Some((done(message_id), Phase::End)),
                                }
                            }
                        },
                        Err(RecvError::Lagged(_)) => match registry.subscribe(session_id) {
                            Some(fresh) => {
                                let last_seq = fresh.snapshot.seq;
                                break Some((
                                    StreamItem::Event(snapshot_event(&fresh.snapshot)),
                                    Phase::Live { sub: fresh, last_seq },
                                ));
                            }
                            None => break Some((done(message_id), Phase::End)),
                        },
                        Err(RecvError::Closed) => break Some((done(message_id), Phase::End)),
                    }
                },
                Phase::End => None,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_content_containers_carry_hx_disable() {
        let html = live_html("thinking", "<b hx-get=\"/x\">answer</b>", &[("shell".into(), "{}".into())]);
        for class in ["thought-body", "answer", "tool-call"] {
            let at = html.find(&format!("class=\"{class}\"")).unwrap();
            let tag = &html[html[..at].rfind('<').unwrap()..at + html[at..].find('>').unwrap()];
            assert!(tag.contains("hx-disable"), "{tag}");
        }
        assert!(!html.contains("<b hx-get"), "model text stays escaped");
    }

    #[test]
    fn escape_text_neutralises_markup_and_quotes() {
        assert_eq!(
            escape_text("</div><script>alert('x')</script> & \"q\""),
            "&lt;/div&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(escape_text("plain\ntext"), "plain\ntext");
        assert_eq!(escape_text(""), "");
    }

    /// A watcher that falls more than the channel's capacity behind (a slow connection) gets
    /// one fresh snapshot holding everything so far, then the rest live, then the end: no text
    /// lost or repeated.
    #[tokio::test]
    async fn a_watcher_that_falls_behind_is_caught_up_by_a_fresh_snapshot() {
        use futures_util::StreamExt;
        let registry = RunRegistry::new(16);
        let (session, message) = (Uuid::now_v7(), Uuid::now_v7());
        let run = registry.begin(session, Uuid::now_v7(), Some(message)).unwrap();
        let first = registry.subscribe(session);
        let stream = session_stream(registry.clone(), session, first);
        let mut stream = std::pin::pin!(stream);
        let shown = |item: Option<StreamItem>| match item {
            Some(StreamItem::Event(ev)) => format!("{ev:?}"),
            _ => panic!("an event"),
        };
        assert!(shown(stream.next().await).contains("snapshot"), "the snapshot at subscription");
        for i in 0..40 {
            run.publish(RunEvent::Delta(format!("w{i} ")));
        }
        let caught_up = shown(stream.next().await);
        let all: String = (0..40).map(|i| format!("w{i} ")).collect();
        assert!(caught_up.contains("snapshot") && caught_up.contains(&all), "{caught_up}");
        run.publish(RunEvent::Delta("tail".into()));
        let next = shown(stream.next().await);
        assert!(next.contains("delta") && next.contains("tail") && !next.contains("w39"), "{next}");
        run.finish(RunEvent::Done { message_id: Some(message), plain: true });
        let end = stream.next().await;
        assert!(matches!(end, Some(StreamItem::Done { message: Some(m), plain: true }) if m == message));
        assert!(stream.next().await.is_none());
    }

    #[test]
    fn delta_markup_is_escaped_inside_a_span() {
        let html = span("delta", "<img src=x onerror=alert(1)>\n");
        assert_eq!(html, "<span class=\"delta\">&lt;img src=x onerror=alert(1)&gt;\n</span>");
    }
}
