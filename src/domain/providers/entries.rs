//! Who may use a provider, the providers and models as the registry holds them, model references
//! and their spelling rules, and provider errors in words.

use super::*;

/// Who may use a provider's shared keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visibility {
    /// Every active user.
    Everyone,
    /// Admins only.
    Admins,
    /// Admins, the listed people, and everyone in the listed groups.
    Users(Vec<Uuid>, Vec<Uuid>),
}

/// The `allowed_users` column: a JSON list of people's ids and `g:`-prefixed group ids.
pub fn parse_allowed(raw: &str) -> (Vec<Uuid>, Vec<Uuid>) {
    let items: Vec<String> = serde_json::from_str(raw).unwrap_or_default();
    let mut people = Vec::new();
    let mut groups = Vec::new();
    for item in items {
        match item.strip_prefix("g:") {
            Some(g) => groups.extend(Uuid::parse_str(g).ok()),
            None => people.extend(Uuid::parse_str(&item).ok()),
        }
    }
    (people, groups)
}

/// The `allowed_users` column for these people and groups.
pub fn allowed_json(people: &[Uuid], groups: &[Uuid]) -> String {
    let items: Vec<String> =
        people.iter().map(Uuid::to_string).chain(groups.iter().map(|g| format!("g:{g}"))).collect();
    serde_json::to_string(&items).unwrap_or_else(|_| "[]".into())
}

impl Visibility {
    /// The stored spelling (the user list is stored apart).
    pub fn as_str(&self) -> &'static str {
        match self {
            Visibility::Everyone => "everyone",
            Visibility::Admins => "admins",
            Visibility::Users(..) => "users",
        }
    }

    /// Whether the actor, in these groups, may use it.
    pub fn admits(&self, actor: &Actor, groups: &[Uuid]) -> bool {
        match self {
            Visibility::Everyone => true,
            Visibility::Admins => actor.is_admin(),
            Visibility::Users(ids, allowed_groups) => {
                actor.is_admin()
                    || ids.contains(&actor.user_id())
                    || groups.iter().any(|g| allowed_groups.contains(g))
            }
        }
    }

    /// Whether it lists any group (only then are a caller's groups worth looking up).
    pub fn names_groups(&self) -> bool {
        matches!(self, Visibility::Users(_, groups) if !groups.is_empty())
    }
}

/// A shared key as the registry knows it: never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedKeyRef {
    /// Row id (also the secret's id).
    pub id: Uuid,
    /// Label.
    pub label: String,
    /// Last four characters.
    pub last4: String,
}

/// The shared keys of a provider.
#[derive(Debug, Clone)]
pub enum SharedKeys {
    /// One key from configuration (may be empty).
    Config(Secret),
    /// Encrypted keys in the vault, used round-robin.
    Vault(Vec<SharedKeyRef>),
}

/// One provider Arbor can call.
#[derive(Debug, Clone)]
pub struct ProviderEntry {
    /// Admin-managed providers have an id; configured ones do not.
    pub id: Option<Uuid>,
    /// Short name, the part before `/` in a model reference.
    pub name: String,
    /// Name shown in the UI.
    pub label: String,
    /// Wire format and defaults.
    pub kind: ProviderKind,
    /// API base URL.
    pub base_url: String,
    /// Shared keys.
    pub shared: SharedKeys,
    /// Offered (enabled) model ids; empty means every discovered model.
    pub models: Vec<String>,
    /// Whether it may be used at all.
    pub enabled: bool,
    /// Who may use the shared keys.
    pub visibility: Visibility,
    /// Requests per minute per user, when limited.
    pub rpm: Option<u64>,
    /// Tokens per minute per user, when limited.
    pub tpm: Option<u64>,
    /// Whose word on its models counts (a member's, for their own key or endpoint).
    pub holder: Holder,
}

impl ProviderEntry {
    /// An entry with no shared key, usable by everyone: a local server or a personal endpoint.
    pub(super) fn open(name: &str, label: String, kind: ProviderKind, base_url: String) -> ProviderEntry {
        ProviderEntry {
            id: None,
            name: name.to_string(),
            label,
            kind,
            base_url,
            shared: SharedKeys::Config(Secret::new("")),
            models: Vec::new(),
            enabled: true,
            visibility: Visibility::Everyone,
            rpm: None,
            tpm: None,
            holder: Holder::Instance,
        }
    }

    /// The catalog family of its models.
    pub fn family(&self) -> Family {
        match self.kind {
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible => Family::OpenAi,
            ProviderKind::Anthropic => Family::Anthropic,
            ProviderKind::Gemini => Family::Gemini,
        }
    }

    /// Whether calls need a key (the public APIs do; a local server may not).
    pub(super) fn needs_key(&self) -> bool {
        self.kind != ProviderKind::OpenAiCompatible
    }

    /// How its shared keys would be used, if it has any usable.
    pub(super) fn shared_plan(&self) -> Option<KeyPlan> {
        match &self.shared {
            SharedKeys::Config(key) => {
                (!key.is_empty() || !self.needs_key()).then(|| KeyPlan::Plain(key.clone()))
            }
            SharedKeys::Vault(keys) => match (self.id, keys.is_empty()) {
                (Some(provider), false) => {
                    Some(KeyPlan::Shared { provider, keys: keys.iter().map(|k| k.id).collect() })
                }
                (_, true) if !self.needs_key() => Some(KeyPlan::Plain(Secret::new(""))),
                _ => None,
            },
        }
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
    /// Whose word on the model counts (a member's, for their own key or endpoint).
    pub holder: Holder,
}

impl ResolvedModel {
    /// `provider/model`.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }

    /// Under what the provider's word on the model is kept: the reference, per key for a
    /// member's personal provider (see [`Holder::facts_key`]).
    pub fn facts_key(&self) -> String {
        self.holder.facts_key(&self.reference())
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
    /// What the model can do, in a few words for the picker: "tools · vision · reasoning ·
    /// 128k context · $0.15 / $0.60 per M tokens"; empty when nothing is known.
    pub facts: String,
}

impl ModelChoice {
    /// The picker's words for what a model can do and costs (from the facts in force).
    pub fn describe(info: &crate::providers::catalog::ModelInfo) -> String {
        let mut parts: Vec<String> = Vec::new();
        let words = [
            (info.image_output, "makes images"),
            (info.tools, "tools"),
            (info.vision, "vision"),
            (info.reasoning, "reasoning"),
        ];
        for (on, word) in words {
            if on {
                parts.push(word.to_string());
            }
        }
        // An image model's window says nothing to the person picking it.
        let window = info.known || info.context_window != crate::providers::catalog::DEFAULT_CONTEXT_WINDOW;
        if window && !info.image_output {
            let k = info.context_window / 1000;
            parts.push(if k >= 1000 { format!("{}M context", k / 1000) } else { format!("{k}k context") });
        }
        if let (Some(input), Some(output)) = (info.input_per_mtok, info.output_per_mtok) {
            parts.push(format!("${input} / ${output} per M tokens"));
        }
        parts.join(" · ")
    }
}

/// Splits `provider/model` at the first `/` (model ids may contain more, e.g. OpenRouter's).
pub fn split_reference(reference: &str) -> Option<(&str, &str)> {
    let (provider, model) = reference.trim().split_once('/')?;
    (!provider.is_empty() && !model.is_empty()).then_some((provider, model))
}

/// Splits `model$alias` into the model id and the alias.
pub fn split_alias(model: &str) -> (&str, Option<&str>) {
    match model.split_once('$') {
        Some((id, alias)) if !alias.is_empty() => (id, Some(alias)),
        Some((id, _)) => (id, None),
        None => (model, None),
    }
}

/// Whether a requested `id` (with an optional `$alias`) names a configured model entry
/// (`id` or `id$alias`), and which model id it is. A configured alias may be asked for by the
/// id, by the alias alone or by both; an alias asked for must be the configured one.
pub fn match_model<'c>(req_id: &str, req_alias: Option<&str>, configured: &'c str) -> Option<&'c str> {
    let (id, alias) = split_alias(configured);
    if req_id == id {
        return match req_alias {
            Some(wanted) => (alias == Some(wanted)).then_some(id),
            None => Some(id),
        };
    }
    (req_alias.is_none() && alias == Some(req_id)).then_some(id)
}

/// Ids in a provider's list that are not chat models (embeddings, speech, images, moderation).
pub fn is_chat_model(id: &str) -> bool {
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

/// The public API of an official provider kind.
pub fn default_base_url(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "https://api.openai.com/v1",
        ProviderKind::Anthropic => "https://api.anthropic.com",
        ProviderKind::Gemini => "https://generativelanguage.googleapis.com/v1beta",
        ProviderKind::OpenAiCompatible => "",
    }
}

/// The stored spelling of a provider kind.
pub fn kind_str(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "openai",
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Gemini => "gemini",
        ProviderKind::OpenAiCompatible => "openai_compatible",
    }
}

/// Parses a stored or submitted provider kind.
pub fn parse_kind(s: &str) -> Option<ProviderKind> {
    match s {
        "openai" => Some(ProviderKind::OpenAi),
        "anthropic" => Some(ProviderKind::Anthropic),
        "gemini" => Some(ProviderKind::Gemini),
        "openai_compatible" => Some(ProviderKind::OpenAiCompatible),
        _ => None,
    }
}

/// The official provider kind a user key named `name` is for (`None` for a personal
/// OpenAI-compatible endpoint).
pub(super) fn official_kind(name: &str) -> Option<ProviderKind> {
    parse_kind(name).filter(|k| *k != ProviderKind::OpenAiCompatible)
}

/// The personal provider one of a user's own keys makes: an official kind at its public API,
/// or their own OpenAI-compatible endpoint.
pub(super) fn personal_entry(key: &SecretMeta) -> Option<ProviderEntry> {
    let (kind, base_url) = match (&key.base_url, official_kind(&key.provider)) {
        (None, Some(kind)) => (kind, default_base_url(kind).to_string()),
        (Some(url), None) => (ProviderKind::OpenAiCompatible, url.clone()),
        _ => return None,
    };
    let label = format!("{} (your key)", if key.label.is_empty() { &key.provider } else { &key.label });
    Some(ProviderEntry {
        holder: Holder::Personal(key.id),
        ..ProviderEntry::open(&key.provider, label, kind, base_url)
    })
}

/// Builds a registry entry from an admin-managed row and its keys.
pub(super) fn managed_entry(row: ManagedProvider, keys: &[ProviderKey]) -> Option<ProviderEntry> {
    let kind = parse_kind(&row.kind)?;
    let models: Vec<String> = serde_json::from_str(&row.models).unwrap_or_default();
    let visibility = match row.visibility.as_str() {
        "admins" => Visibility::Admins,
        "users" => {
            let (people, groups) = parse_allowed(&row.allowed_users);
            Visibility::Users(people, groups)
        }
        _ => Visibility::Everyone,
    };
    let shared = keys
        .iter()
        .filter(|k| k.provider_id == row.id)
        .map(|k| SharedKeyRef { id: k.id, label: k.label.clone(), last4: k.last4.clone() })
        .collect();
    Some(ProviderEntry {
        id: Some(row.id),
        label: if row.label.is_empty() { row.name.clone() } else { row.label },
        name: row.name,
        kind,
        base_url: if row.base_url.is_empty() { default_base_url(kind).to_string() } else { row.base_url },
        shared: SharedKeys::Vault(shared),
        models,
        enabled: row.enabled,
        visibility,
        rpm: row.rpm.and_then(|v| u64::try_from(v).ok()),
        tpm: row.tpm.and_then(|v| u64::try_from(v).ok()),
        holder: Holder::Instance,
    })
}

/// A provider error in words a user can act on (already free of secrets).
pub fn describe_error(e: &crate::providers::types::ProviderError) -> String {
    let detail = e.message.trim();
    match e.status {
        0 => format!("The provider could not be used: {detail}."),
        401 | 403 => format!("The provider refused the key ({}): {detail}", e.status),
        429 => format!("The provider is rate limiting ({}): {detail}", e.status),
        s => format!("The provider answered {s} ({}): {detail}", e.kind),
    }
}
