//! Run events to Server-Sent Events: names come only from this file, text is always escaped.

use actix_web_lab::sse;
use futures_util::Stream;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use crate::events::{RunEvent, RunRegistry, RunSnapshot, Subscription};

/// Escapes text for insertion into HTML: the one function every streamed text goes through.
pub fn escape_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Text wrapped in an element, so a trailing newline survives SSE framing.
fn span(class: &str, text: &str) -> String {
    format!("<span class=\"{class}\">{}</span>", escape_text(text))
}

fn event(name: &'static str, html: String) -> sse::Event {
    sse::Data::new(html).event(name).into()
}

/// The `snapshot` event: everything the run produced so far.
pub fn snapshot_event(s: &RunSnapshot) -> sse::Event {
    let mut html = String::new();
    if !s.thoughts.is_empty() {
        html.push_str(&span("thought-text", &s.thoughts));
    }
    html.push_str(&span("answer-text", &s.text));
    event("snapshot", format!("<div class=\"snapshot\" data-seq=\"{}\">{html}</div>", s.seq))
}

/// The `done` event; it is always the last one on a stream.
pub fn done_event(message_id: Option<Uuid>) -> sse::Event {
    let attr = message_id.map(|id| format!(" data-message-id=\"{id}\"")).unwrap_or_default();
    event("done", format!("<span class=\"done\"{attr}></span>"))
}

/// One run event as an SSE event.
pub fn run_event(e: &RunEvent) -> sse::Event {
    match e {
        RunEvent::Delta(t) => event("delta", span("delta", t)),
        RunEvent::Thought(t) => event("thought", span("thought-delta", t)),
        RunEvent::Usage { input, output } => {
            event("usage", format!("<span class=\"usage\">{input} in · {output} out</span>"))
        }
        RunEvent::Done { message_id } => done_event(*message_id),
        RunEvent::Error(m) => {
            event("error", format!("<div class=\"flash flash-error\">{}</div>", escape_text(m)))
        }
    }
}

enum Phase {
    Start(Option<Subscription>),
    Live {
        sub: Subscription,
        last_seq: u64,
    },
    /// An error was sent; `done` still follows so every stream ends with it.
    Closing,
    End,
}

/// A session's stream: the snapshot first, then live events in order, `done` last. A receiver
/// that falls behind is resynchronised with a fresh snapshot instead of a patch.
pub fn session_stream(
    registry: RunRegistry,
    session_id: Uuid,
    first: Option<Subscription>,
) -> impl Stream<Item = sse::Event> {
    futures_util::stream::unfold(Phase::Start(first), move |phase| {
        let registry = registry.clone();
        async move {
            match phase {
                Phase::Start(None) | Phase::Closing => Some((done_event(None), Phase::End)),
                Phase::Start(Some(sub)) => {
                    let last_seq = sub.snapshot.seq;
                    Some((snapshot_event(&sub.snapshot), Phase::Live { sub, last_seq }))
                }
                Phase::Live { mut sub, last_seq } => loop {
                    match sub.receiver.recv().await {
                        Ok(env) if env.run_id != sub.snapshot.run_id || env.seq <= last_seq => continue,
                        Ok(env) => {
                            let next = match &env.event {
                                RunEvent::Done { .. } => Phase::End,
                                RunEvent::Error(_) => Phase::Closing,
                                _ => Phase::Live { last_seq: env.seq, sub },
                            };
                            break Some((run_event(&env.event), next));
                        }
                        Err(RecvError::Lagged(_)) => match registry.subscribe(session_id) {
                            Some(fresh) => {
                                let last_seq = fresh.snapshot.seq;
                                break Some((
                                    snapshot_event(&fresh.snapshot),
                                    Phase::Live { sub: fresh, last_seq },
                                ));
                            }
                            None => break Some((done_event(None), Phase::End)),
                        },
                        Err(RecvError::Closed) => break Some((done_event(None), Phase::End)),
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
    fn escape_text_neutralises_markup_and_quotes() {
        assert_eq!(
            escape_text("</div><script>alert('x')</script> & \"q\""),
            "&lt;/div&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(escape_text("plain\ntext"), "plain\ntext");
        assert_eq!(escape_text(""), "");
    }

    #[test]
    fn delta_markup_is_escaped_inside_a_span() {
        let html = span("delta", "<img src=x onerror=alert(1)>\n");
        assert_eq!(html, "<span class=\"delta\">&lt;img src=x onerror=alert(1)&gt;\n</span>");
    }
}
