use super::*;
use crate::future_size::future_size;

#[test]
fn proposed_titles_are_cleaned() {
    assert_eq!(
        clean_title("\n\"Rust lifetimes explained.\"\nmore").as_deref(),
        Some("Rust lifetimes explained")
    );
    assert_eq!(clean_title("Title: **Trip to Lisbon**").as_deref(), Some("Trip to Lisbon"));
    assert_eq!(clean_title("  \n \"\" "), None);
    let long = clean_title(&"word ".repeat(40)).unwrap();
    assert!(long.chars().count() <= 61 && long.ends_with('…'), "{long}");
}

#[test]
fn client_ids_are_checked() {
    assert!(valid_client_id("0b5c-AZ_9"));
    assert!(!valid_client_id(""));
    assert!(!valid_client_id(&"a".repeat(65)));
    assert!(!valid_client_id("a b"));
    assert!(!valid_client_id("<x>"));
}

#[test]
fn the_accumulator_builds_parts_in_order() {
    let mut acc = Accumulator::new(vec![Part::Text { text: "Partial ".into() }]);
    acc.apply(ProviderEvent::TextDelta("answer".into()));
    acc.apply(ProviderEvent::ThoughtDelta("think".into()));
    acc.apply(ProviderEvent::ThoughtDelta("ing".into()));
    acc.apply(ProviderEvent::ThoughtSignature("sig".into()));
    acc.apply(ProviderEvent::ThoughtDelta("more".into()));
    acc.apply(ProviderEvent::TextDelta(".".into()));
    assert_eq!(
        acc.parts,
        vec![
            Part::Text { text: "Partial answer".into() },
            Part::Thought { text: "thinking".into(), signature: Some("sig".into()), redacted: None },
            Part::Thought { text: "more".into(), signature: None, redacted: None },
            Part::Text { text: ".".into() },
        ]
    );
    assert_eq!(acc.produced_chars(), "answerthinkingmore.".len());
}

#[test]
fn provider_errors_read_well() {
    let e = crate::providers::types::ProviderError {
        status: 401,
        kind: "authentication_error".into(),
        message: "invalid x-api-key".into(),
        retryable: false,
        retry_after_secs: None,
    };
    assert_eq!(describe_error(&e), "The provider refused the key (401): invalid x-api-key");
}

#[test]
fn only_a_finished_text_answer_after_no_tool_work_is_plain() {
    use crate::providers::types::{ChatMessage, ChatRole};
    use stream::plain_answer;
    let text = |t: &str| Part::Text { text: t.into() };
    let message = |role, parts| ChatMessage { role, parts };
    let call = Part::ToolCall {
        id: "c1".into(),
        name: "write_todo".into(),
        arguments: serde_json::json!({}),
        signature: None,
    };
    let result = Part::ToolResult {
        call_id: "c1".into(),
        name: "write_todo".into(),
        content: "ok".into(),
        is_error: false,
    };
    let question = vec![
        message(ChatRole::User, vec![text("earlier")]),
        message(ChatRole::Assistant, vec![call.clone()]),
        message(ChatRole::Tool, vec![result.clone()]),
        message(ChatRole::User, vec![text("now")]),
    ];
    let answer = [text("the answer"), Part::Thought { text: "hm".into(), signature: None, redacted: None }];
    // Tool work before the person's last message is an earlier turn's.
    assert!(plain_answer(&question, &answer, &End::Finished));
    // Not finished, or stopped: not plain.
    assert!(!plain_answer(&question, &answer, &End::Stopped));
    assert!(!plain_answer(&question, &answer, &End::Failed("x".into())));
    // An answer that calls a tool, or carries anything but text and thoughts.
    assert!(!plain_answer(&question, &[text("a"), call.clone()], &End::Finished));
    let image = Part::Image { mime: "image/png".into(), data_base64: "AAAA".into() };
    assert!(!plain_answer(&question, &[image], &End::Finished));
    // Tool work since the person's last message (an answer after a call, a continued run).
    let mut after_tools = question.clone();
    after_tools.push(message(ChatRole::Assistant, vec![text("let me look"), call]));
    after_tools.push(message(ChatRole::Tool, vec![result]));
    assert!(!plain_answer(&after_tools, &answer, &End::Finished));
    // A continued answer's own text before it does not count as tool work.
    let mut continued = question;
    continued.push(message(ChatRole::Assistant, vec![text("Partial ")]));
    assert!(plain_answer(&continued, &answer, &End::Finished));
}

/// Each live reply holds its task for as long as it streams, allocated whole at the size of the
/// largest state any of its awaits can be in (16 KB before the rare branches were boxed; see
/// `RunEngine::run_loop`).
#[test]
fn a_live_replys_task_stays_small() {
    let size = future_size(|(engine, job, publisher)| stream::live_reply(engine, job, publisher));
    assert!(size <= 4096, "a live reply's task is {size} bytes");
}

/// A streaming reply's partial-text writer lives as long as the reply too.
#[test]
fn a_replys_partial_text_writer_stays_small() {
    let size = future_size(|(db, message, run, latest)| stream::partial_text_saver(db, message, run, latest));
    assert!(size <= 512, "a partial-text writer is {size} bytes");
}
