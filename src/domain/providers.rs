//! The providers registry: which providers exist, which models they offer, and which key a
//! user's call is made with.
//!
//! Key choice: the user's own key for the provider (the vault, once it exists) and otherwise
//! the provider's shared key. Until the admin console manages providers, the shared providers
//! come from configuration and every active user may use them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::accounts::Actor;
use super::{DomainError, DomainResult};
use crate::config::{LlmConfig, ProviderKind};
use crate::providers::catalog::{Catalog, Family, ModelInfo};
use crate::providers::chat::{AnthropicChat, ChatProvider, GeminiChat, OpenAiChat};
use crate::providers::client::{ProviderClient, RetryPolicy};
use crate::secret::Secret;

/// Where a local Ollama answers when nobody configured one.
pub const LOCAL_OLLAMA: &str = "http://127.0.0.1:11434";

/// One provider Arbor can call.
#[derive(Debug, Clone)]
pub struct ProviderEntry {
    /// Short name, the part before `/` in a model reference.
    pub name: String,
    /// Name shown in the UI.
    pub label: String,
    /// Wire format and defaults.
    pub kind: ProviderKind,
    /// API base URL.
    pub base_url: String,
    /// The shared key (may be empty).
    pub shared_key: Secret,
    /// Configured model ids; empty means discover.
    pub models: Vec<String>,
}

impl ProviderEntry {
    /// The catalog family of its models.
    pub fn family(&self) -> Family {
        match self.kind {
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible => Family::OpenAi,
            ProviderKind::Anthropic => Family::Anthropic,
            ProviderKind::Gemini => Family::Gemini,
        }
    }

    /// Whether calls need a key (the public APIs do; a local server may not).
    fn needs_key(&self) -> bool {
        self.kind != ProviderKind::OpenAiCompatible
    }
}

/// A model reference resolved to a provider handle and what the catalog knows.
#[derive(Clone)]
pub struct ResolvedModel {
    /// Provider name.
    pub provider: String,
    /// Wire format family.
    pub kind: ProviderKind,
    /// The provider's model id.
    pub model: String,
    /// Catalog facts (defaults for unknown models).
    pub info: ModelInfo,
    /// The handle to call.
    pub chat: Arc<dyn ChatProvider>,
}

impl ResolvedModel {
    /// `provider/model`.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }
}

/// One entry of the model picker.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelChoice {
    /// `provider/model`, the value stored on sessions.
    pub value: String,
    /// Model name for people.
    pub label: String,
    /// Provider label, for grouping.
    pub provider: String,
}

/// Splits `provider/model` at the first `/` (model ids may contain more, e.g. OpenRouter's).
pub fn split_reference(reference: &str) -> Option<(&str, &str)> {
    let (provider, model) = reference.trim().split_once('/')?;
    (!provider.is_empty() && !model.is_empty()).then_some((provider, model))
}

/// Ids in a provider's list that are not chat models (embeddings, speech, images, moderation).
fn is_chat_model(id: &str) -> bool {
    const NOT_CHAT: &[&str] = &[
        "embed",
        "tts",
        "whisper",
        "dall-e",
        "moderation",
        "davinci",
        "babbage",
        "transcribe",
        "realtime",
        "image",
        "audio",
        "search-",
        "aqa",
        "imagen",
        "veo",
    ];
    let lower = id.to_ascii_lowercase();
    !NOT_CHAT.iter().any(|word| lower.contains(word))
}

fn default_base_url(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "https://api.openai.com/v1",
        ProviderKind::Anthropic => "https://api.anthropic.com",
        ProviderKind::Gemini => "https://generativelanguage.googleapis.com/v1beta",
        ProviderKind::OpenAiCompatible => "",
    }
}

/// The registry, built once at start and shared.
pub struct Providers {
    entries: Vec<ProviderEntry>,
    client: ProviderClient,
    retry: RetryPolicy,
    catalog: Catalog,
    discovered: Mutex<HashMap<String, (Instant, Vec<String>)>>,
    ttl: Duration,
    default_model: String,
}

/// Why the registry could not be built; names the setting.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProvidersError(pub String);

impl Providers {
    /// Builds the registry from configuration (and the curated catalog plus `models_file`).
    pub fn from_config(cfg: &LlmConfig) -> Result<Providers, ProvidersError> {
        let mut catalog =
            Catalog::builtin().map_err(|e| ProvidersError(format!("config/models.toml: {e}")))?;
        if !cfg.models_file.is_empty() {
            let text = std::fs::read_to_string(&cfg.models_file).map_err(|e| {
                ProvidersError(format!("llm.models_file: cannot read {}: {e}", cfg.models_file))
            })?;
            let extra = Catalog::from_toml(&text)
                .map_err(|e| ProvidersError(format!("llm.models_file {}: {e}", cfg.models_file)))?;
            catalog = catalog.merged_with(extra);
        }
        let client = ProviderClient::new(
            Duration::from_secs(cfg.connect_timeout_secs),
            Duration::from_secs(cfg.idle_timeout_secs),
        )
        .map_err(|e| ProvidersError(format!("HTTP client for providers: {e}")))?;
        let entries = cfg
            .providers
            .iter()
            .map(|(name, p)| ProviderEntry {
                name: name.clone(),
                label: if p.label.is_empty() { name.clone() } else { p.label.clone() },
                kind: p.kind,
                base_url: if p.base_url.is_empty() {
                    default_base_url(p.kind).to_string()
                } else {
                    p.base_url.clone()
                },
                shared_key: Secret::new(p.api_key.trim()),
                models: p.models.clone(),
            })
            .collect();
        Ok(Providers {
            entries,
            client,
            retry: RetryPolicy {
                max_attempts: cfg.max_attempts,
                max_delay: Duration::from_secs(cfg.max_retry_wait_secs),
                ..RetryPolicy::default()
            },
            catalog,
            discovered: Mutex::new(HashMap::new()),
            ttl: Duration::from_secs(cfg.discovery_ttl_secs),
            default_model: cfg.default_model.clone(),
        })
    }

    /// Adds the local Ollama as provider `ollama` when it answers and no provider has that name.
    pub async fn detect_local_ollama(&mut self, base: &str) -> bool {
        if self.entries.iter().any(|e| e.name == "ollama") {
            return false;
        }
        let Ok(http) = reqwest::Client::builder().timeout(Duration::from_millis(500)).build() else {
            return false;
        };
        let answered = matches!(
            http.get(format!("{base}/api/version")).send().await,
            Ok(res) if res.status().is_success()
        );
        if answered {
            tracing::info!(base, "a local Ollama answers: offered as provider \"ollama\"");
            self.entries.push(ProviderEntry {
                name: "ollama".into(),
                label: "Ollama (local)".into(),
                kind: ProviderKind::OpenAiCompatible,
                base_url: format!("{base}/v1"),
                shared_key: Secret::new(""),
                models: Vec::new(),
            });
        }
        answered
    }

    /// Every provider, in configuration order.
    pub fn entries(&self) -> &[ProviderEntry] {
        &self.entries
    }

    /// The curated catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    fn entry(&self, name: &str) -> Option<&ProviderEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// The key a call by `actor` to `entry` is made with.
    fn key_for(&self, _actor: &Actor, entry: &ProviderEntry) -> Option<Secret> {
        // The user's own vault key comes first once the vault exists; today only shared keys.
        (!entry.shared_key.is_empty() || !entry.needs_key()).then(|| entry.shared_key.clone())
    }

    fn handle(&self, entry: &ProviderEntry, key: Secret) -> Arc<dyn ChatProvider> {
        let (client, base, retry) = (self.client.clone(), entry.base_url.clone(), self.retry.clone());
        match entry.kind {
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible => {
                Arc::new(OpenAiChat::new(client, base, key, retry))
            }
            ProviderKind::Anthropic => Arc::new(AnthropicChat::new(client, base, key, retry)),
            ProviderKind::Gemini => Arc::new(GeminiChat::new(client, base, key, retry)),
        }
    }

    /// Resolves `provider/model` for the actor, or says clearly why it cannot be used.
    pub fn resolve(&self, actor: &Actor, reference: &str) -> DomainResult<ResolvedModel> {
        let (name, model) = split_reference(reference).ok_or_else(|| {
            DomainError::Invalid(format!("\"{reference}\" is not a model reference like \"openai/gpt-4.1\"."))
        })?;
        let entry = self.entry(name).ok_or_else(|| {
            DomainError::Invalid(format!(
                "There is no provider \"{name}\". Pick another model, or ask an admin to add the provider."
            ))
        })?;
        let key = self.key_for(actor, entry).ok_or_else(|| {
            DomainError::Invalid(format!(
                "There is no API key for provider \"{}\": add your own key, or ask an admin to share one.",
                entry.label
            ))
        })?;
        Ok(ResolvedModel {
            provider: entry.name.clone(),
            kind: entry.kind,
            model: model.to_string(),
            info: self.catalog.lookup(entry.family(), model),
            chat: self.handle(entry, key),
        })
    }

    /// What the catalog knows about a model reference (defaults when unknown or unparsable).
    pub fn model_info(&self, reference: &str) -> Option<ModelInfo> {
        let (name, model) = split_reference(reference)?;
        let entry = self.entry(name)?;
        Some(self.catalog.lookup(entry.family(), model))
    }

    /// Model ids of one provider: configured, else discovered (cached), else the curated ones.
    async fn models_of(&self, actor: &Actor, entry: &ProviderEntry) -> Vec<String> {
        if !entry.models.is_empty() {
            return entry.models.clone();
        }
        if let Some(ids) = self.cached(&entry.name) {
            return ids;
        }
        if let Some(key) = self.key_for(actor, entry) {
            match self.handle(entry, key).list_models().await {
                Ok(ids) => {
                    let ids: Vec<String> = ids.into_iter().filter(|id| is_chat_model(id)).collect();
                    self.store(&entry.name, ids.clone());
                    return ids;
                }
                Err(e) => {
                    tracing::warn!(provider = %entry.name, status = e.status, kind = %e.kind, "model discovery failed")
                }
            }
        }
        self.catalog.entries(entry.family()).into_iter().map(|m| m.id).collect()
    }

    fn discovered(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Vec<String>)>> {
        // Each critical section is one insert or read: a poisoned map is still consistent.
        self.discovered.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn cached(&self, name: &str) -> Option<Vec<String>> {
        let map = self.discovered();
        map.get(name).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, ids)| ids.clone())
    }

    fn store(&self, name: &str, ids: Vec<String>) {
        self.discovered().insert(name.to_string(), (Instant::now(), ids));
    }

    /// Forgets every discovered list so the next picker asks the providers again.
    pub fn refresh(&self) {
        self.discovered().clear();
    }

    /// The models the actor may pick, grouped by provider in configuration order.
    pub async fn choices(&self, actor: &Actor) -> Vec<ModelChoice> {
        let mut out = Vec::new();
        for entry in &self.entries {
            if self.key_for(actor, entry).is_none() {
                continue;
            }
            for id in self.models_of(actor, entry).await {
                let label = self.catalog.lookup(entry.family(), &id).label;
                out.push(ModelChoice {
                    value: format!("{}/{id}", entry.name),
                    label,
                    provider: entry.label.clone(),
                });
            }
        }
        out
    }

    /// The model used when a session and its workspace pick none.
    pub async fn default_model(&self, actor: &Actor) -> Option<String> {
        if !self.default_model.is_empty() {
            return Some(self.default_model.clone());
        }
        self.choices(actor).await.into_iter().next().map(|c| c.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProviderConfig;
    use crate::domain::accounts::Role;

    fn cfg(providers: &[(&str, ProviderKind, &str, &[&str])]) -> LlmConfig {
        // main installs the TLS provider before anything builds an HTTP client; tests do it here.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut c: crate::config::Config =
            toml::from_str(crate::config::DEFAULT_TOML).expect("defaults parse");
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
        Actor { user_id: uuid::Uuid::new_v4(), role: Role::Member }
    }

    #[test]
    fn references_split_at_the_first_slash() {
        assert_eq!(split_reference("openrouter/anthropic/claude"), Some(("openrouter", "anthropic/claude")));
        assert_eq!(split_reference("openai/gpt-4.1"), Some(("openai", "gpt-4.1")));
        assert_eq!(split_reference("gpt-4.1"), None);
        assert_eq!(split_reference("/x"), None);
        assert_eq!(split_reference("x/"), None);
    }

    #[test]
    fn resolve_uses_the_shared_key_and_the_catalog() {
        let p = Providers::from_config(&cfg(&[("openai", ProviderKind::OpenAi, "sk-test", &["gpt-4.1"])]))
            .expect("registry");
        let r = p.resolve(&actor(), "openai/gpt-4.1").expect("resolves");
        assert_eq!((r.provider.as_str(), r.model.as_str()), ("openai", "gpt-4.1"));
        assert!(r.info.known);
        assert_eq!(p.entries()[0].base_url, "https://api.openai.com/v1");
    }

    #[test]
    fn missing_keys_and_providers_get_clear_messages() {
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
        assert!(msg(p.resolve(&actor(), "anthropic/claude-sonnet-4-5")).contains("no API key"));
        assert!(msg(p.resolve(&actor(), "nope/x")).contains("no provider \"nope\""));
        assert!(msg(p.resolve(&actor(), "gpt")).contains("not a model reference"));
        // A local server without a key is fine, and unknown models get conservative defaults.
        let r = p.resolve(&actor(), "local/llama3").expect("keyless local server");
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
    fn non_chat_models_are_filtered() {
        assert!(is_chat_model("gpt-4.1-mini"));
        assert!(!is_chat_model("text-embedding-3-small"));
        assert!(!is_chat_model("whisper-1"));
        assert!(!is_chat_model("gpt-4o-realtime-preview"));
    }
}
