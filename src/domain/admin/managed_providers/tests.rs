use super::*;

#[test]
fn names_and_limits_are_checked() {
    assert!(valid_name("openai"));
    assert!(valid_name("team-vllm_2"));
    assert!(!valid_name(""));
    assert!(!valid_name("-x"));
    assert!(!valid_name("Open AI"));
    assert!(!valid_name("a/b"));
    assert!(!valid_name(&"a".repeat(41)));
    assert_eq!(parse_limit("", "x").ok(), Some(None));
    assert_eq!(parse_limit(" 60 ", "x").ok(), Some(Some(60)));
    assert!(parse_limit("0", "x").is_err());
    assert!(parse_limit("-1", "x").is_err());
    assert!(parse_limit("many", "x").is_err());
}

#[test]
fn admin_base_urls_may_be_private_but_must_be_http() {
    assert_eq!(
        check_admin_url(ProviderKind::OpenAiCompatible, "http://127.0.0.1:11434/v1/").ok(),
        Some("http://127.0.0.1:11434/v1".into())
    );
    assert_eq!(check_admin_url(ProviderKind::OpenAi, "").ok(), Some(String::new()));
    assert_eq!(check_admin_url(ProviderKind::OpenAi, "https://api.openai.com/v1").ok(), Some(String::new()));
    assert!(check_admin_url(ProviderKind::OpenAiCompatible, "").is_err());
    assert!(check_admin_url(ProviderKind::OpenAi, "file:///etc/passwd").is_err());
    assert!(check_admin_url(ProviderKind::OpenAi, "https://user:pw@example.com").is_err());
    assert!(check_admin_url(ProviderKind::OpenAi, "not a url").is_err());
}
