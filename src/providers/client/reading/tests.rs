use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;

use super::super::WireFormat;
use super::super::upstream::{Body, Broken};
use super::*;

const IDLE: Duration = Duration::from_millis(100);

fn text_chunk(text: &str) -> String {
    format!(
        "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":null}}]}}\n\n"
    )
}

/// A body that gives each chunk after its wait (in milliseconds), then stays silent forever
/// when `then_silent`, else ends.
fn paced(chunks: Vec<(u64, String)>, then_silent: bool) -> Body {
    let body = futures_util::stream::unfold(chunks.into_iter(), |mut chunks| async move {
        let (wait, text) = chunks.next()?;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        Some((Ok::<_, Broken>(Bytes::from(text)), chunks))
    });
    match then_silent {
        true => Box::pin(body.chain(futures_util::stream::pending())),
        false => Box::pin(body),
    }
}

fn reading(body: Body) -> Reading {
    Reading::new(body, Decoder::new(WireFormat::OpenAi), IDLE, Secret::new("sk-reading-key-42"))
}

fn texts(events: &[ProviderEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn reads_more_often_than_the_idle_timeout_keep_the_answer_going_past_it() {
    // Six reads 60 ms apart: 360 ms in all, over three idle timeouts, never 100 ms of silence.
    let mut chunks: Vec<(u64, String)> = (0..6).map(|i| (60, text_chunk(&i.to_string()))).collect();
    chunks.push((60, "data: [DONE]\n\n".to_string()));
    let started = tokio::time::Instant::now();
    let events: Vec<ProviderEvent> = reading(paced(chunks, false)).collect().await;
    assert_eq!(texts(&events), "012345");
    assert!(!events.iter().any(|e| matches!(e, ProviderEvent::Error(_))), "{events:?}");
    assert!(matches!(events.last(), Some(ProviderEvent::Finish(_))), "{events:?}");
    assert!(started.elapsed() >= Duration::from_millis(420));
}

#[tokio::test(start_paused = true)]
async fn silence_after_reads_ends_the_answer_with_one_timeout_at_the_idle_timeout() {
    let chunks = vec![(30, text_chunk("a")), (80, text_chunk("b"))];
    let mut reading = reading(paced(chunks, true));
    let mut events = Vec::new();
    let mut error_at = None;
    let started = tokio::time::Instant::now();
    while let Some(ev) = reading.next().await {
        if matches!(ev, ProviderEvent::Error(_)) {
            error_at = Some(started.elapsed());
        }
        events.push(ev);
    }
    assert_eq!(texts(&events), "ab");
    let Some(ProviderEvent::Error(e)) = events.last() else { panic!("ends with an error: {events:?}") };
    assert_eq!((e.kind.as_str(), e.retryable), ("timeout", true));
    // The last read was at 110 ms: the silence is noticed at 210 ms, not at 100 or 200.
    let at = error_at.unwrap_or_default();
    assert!(at >= Duration::from_millis(210) && at < Duration::from_millis(260), "{at:?}");
    assert_eq!(events.iter().filter(|e| matches!(e, ProviderEvent::Error(_))).count(), 1);
    assert!(reading.next().await.is_none(), "nothing after the timeout");
}

#[tokio::test(start_paused = true)]
async fn a_caller_that_stops_reading_for_longer_than_the_idle_timeout_does_not_make_the_provider_late() {
    // The next chunk comes 10 ms after the reader asks for it (as hyper hands one over only
    // after the poll that wants it); the caller pauses three idle timeouts between events.
    let chunks = vec![(10, text_chunk("a")), (10, text_chunk("b")), (10, "data: [DONE]\n\n".to_string())];
    let mut reading = reading(paced(chunks, false));
    let mut events = Vec::new();
    while let Some(ev) = reading.next().await {
        events.push(ev);
        tokio::time::sleep(IDLE * 3).await;
    }
    assert_eq!(texts(&events), "ab");
    assert!(!events.iter().any(|e| matches!(e, ProviderEvent::Error(_))), "{events:?}");
    assert!(matches!(events.last(), Some(ProviderEvent::Finish(_))), "{events:?}");
}

#[tokio::test(start_paused = true)]
async fn a_silent_provider_times_out_at_the_idle_timeout_from_the_start() {
    let started = tokio::time::Instant::now();
    let events: Vec<ProviderEvent> = reading(paced(Vec::new(), true)).collect().await;
    assert!(matches!(events.as_slice(), [ProviderEvent::Error(e)] if e.kind == "timeout"), "{events:?}");
    assert_eq!(started.elapsed(), IDLE);
}

#[tokio::test(start_paused = true)]
async fn an_error_in_the_stream_ends_it_with_the_key_taken_out() {
    let chunks = vec![
        (0, text_chunk("a")),
        (0, "data: {\"error\":{\"message\":\"bad key sk-reading-key-42\",\"type\":\"invalid_request_error\"}}\n\n".to_string()),
        (0, text_chunk("never")),
    ];
    let events: Vec<ProviderEvent> = reading(paced(chunks, false)).collect().await;
    assert_eq!(texts(&events), "a");
    let Some(ProviderEvent::Error(e)) = events.last() else { panic!("ends with an error: {events:?}") };
    assert!(!e.message.contains("sk-reading-key-42") && e.message.contains("****"), "{}", e.message);
}

#[tokio::test(start_paused = true)]
async fn a_broken_connection_ends_the_answer_with_a_transport_error() {
    let body: Body = Box::pin(futures_util::stream::iter(vec![
        Ok(Bytes::from(text_chunk("a"))),
        Err(Broken { timeout: false }),
        Ok(Bytes::from(text_chunk("never"))),
    ]));
    let events: Vec<ProviderEvent> = reading(body).collect().await;
    assert_eq!(texts(&events), "a");
    assert!(matches!(events.last(), Some(ProviderEvent::Error(_))), "{events:?}");
    assert_eq!(events.len(), 2, "{events:?}");
}
