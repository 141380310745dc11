use super::*;

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
