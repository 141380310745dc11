use super::*;
use crate::config::ProviderConfig;
use crate::domain::accounts::Role;

fn cfg(providers: &[(&str, ProviderKind, &str, &[&str])]) -> LlmConfig {
    // main installs the TLS provider before anything builds an HTTP client; tests do it here.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut c: crate::config::Config = toml::from_str(crate::config::DEFAULT_TOML).expect("defaults parse");
    for (name, kind, key, models) in providers {
        c.llm.providers.insert(
            name.to_string(),
            ProviderConfig {
                kind: *kind,
                base_url: if *kind == ProviderKind::OpenAiCompatible {
                    "http://127.0.0.1:9/v1".into()
                } else {
                    String::new()
                },
                api_key: key.to_string(),
                models: models.iter().map(|m| m.to_string()).collect(),
                label: String::new(),
            },
        );
    }
    c.llm
}

fn actor() -> Actor {
    Actor::verified(&crate::domain::accounts::User {
        id: uuid::Uuid::new_v4(),
        email: "m@example.com".into(),
        display_name: "M".into(),
        role: Role::Member,
        status: crate::domain::accounts::UserStatus::Active,
        theme: Default::default(),
    })
}

#[test]
fn references_split_at_the_first_slash() {
    assert_eq!(split_reference("openrouter/anthropic/claude"), Some(("openrouter", "anthropic/claude")));
    assert_eq!(split_reference("openai/gpt-4.1"), Some(("openai", "gpt-4.1")));
    assert_eq!(split_reference("gpt-4.1"), None);
    assert_eq!(split_reference("/x"), None);
    assert_eq!(split_reference("x/"), None);
}

#[tokio::test]
async fn resolve_uses_the_shared_key_and_the_catalog() {
    let p = Providers::from_config(&cfg(&[("openai", ProviderKind::OpenAi, "sk-test", &["gpt-4.1"])]))
        .expect("registry");
    let r = p.resolve(&actor(), "openai/gpt-4.1").await.expect("resolves");
    assert_eq!((r.provider.as_str(), r.model.as_str()), ("openai", "gpt-4.1"));
    assert!(r.info.known);
    assert_eq!(p.entries()[0].base_url, "https://api.openai.com/v1");
}

#[tokio::test]
async fn missing_keys_and_providers_get_clear_messages() {
    let p = Providers::from_config(&cfg(&[
        ("anthropic", ProviderKind::Anthropic, "", &[]),
        ("local", ProviderKind::OpenAiCompatible, "", &["llama3"]),
    ]))
    .expect("registry");
    let msg = |r: DomainResult<ResolvedModel>| match r {
        Err(DomainError::Invalid(m)) => m,
        Err(e) => format!("other error {e}"),
        Ok(_) => "resolved".into(),
    };
    assert!(msg(p.resolve(&actor(), "anthropic/claude-sonnet-4-5").await).contains("no API key"));
    assert!(msg(p.resolve(&actor(), "nope/x").await).contains("no provider \"nope\""));
    assert!(msg(p.resolve(&actor(), "gpt").await).contains("not a model reference"));
    // A local server without a key is fine, and unknown models get conservative defaults.
    let r = p.resolve(&actor(), "local/llama3").await.expect("keyless local server");
    assert!(!r.info.known);
}

#[tokio::test]
async fn choices_skip_providers_without_keys_and_use_configured_models() {
    let p = Providers::from_config(&cfg(&[
        ("anthropic", ProviderKind::Anthropic, "", &[]),
        ("local", ProviderKind::OpenAiCompatible, "", &["llama3", "qwen3"]),
    ]))
    .expect("registry");
    let values: Vec<String> = p.choices(&actor()).await.into_iter().map(|c| c.value).collect();
    assert_eq!(values, ["local/llama3", "local/qwen3"]);
    assert_eq!(p.default_model(&actor()).await.as_deref(), Some("local/llama3"));
}

#[test]
fn model_aliases_match_as_the_table_says() {
    let configured = "gemini-2.5-flash$fast-model";
    let m = |req: &str| {
        let (id, alias) = split_alias(req);
        match_model(id, alias, configured)
    };
    assert_eq!(m("gemini-2.5-flash"), Some("gemini-2.5-flash"));
    assert_eq!(m("fast-model"), Some("gemini-2.5-flash"));
    assert_eq!(m("gemini-2.5-flash$fast-model"), Some("gemini-2.5-flash"));
    assert_eq!(m("gemini-2.5-flash$other"), None);
    assert_eq!(m("other-model"), None);
    assert_eq!(match_model("gpt-4o", None, "gpt-4o"), Some("gpt-4o"));
    assert_eq!(match_model("gpt-4o", Some("x"), "gpt-4o"), None);
    assert_eq!(split_alias("a$"), ("a", None));
}

#[test]
fn non_chat_models_are_filtered() {
    assert!(is_chat_model("gpt-4.1-mini"));
    assert!(!is_chat_model("text-embedding-3-small"));
    assert!(!is_chat_model("whisper-1"));
    assert!(!is_chat_model("gpt-4o-realtime-preview"));
}
