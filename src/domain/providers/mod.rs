//! The providers registry: which providers exist, which models they offer, who may use them,
//! and which key a user's call is made with.
//!
//! Providers come from configuration and from the admin console (with encrypted shared keys).
//! Key choice per call: the user's own vault key for an official provider (OpenAI, Anthropic,
//! Gemini at their public URLs), else the provider's shared keys, if the provider is enabled,
//! visible to the user and the model is enabled. A member's own OpenAI-compatible endpoint is
//! a personal provider whose base URL passes the SSRF guard at every call.

pub mod aliases;
mod capabilities;
mod instances;
mod managed;
mod notes;
pub mod overrides;
mod own_keys;
pub mod own_models;
mod sealed_keys;
pub use instances::listen as listen_to_instances;
pub mod key_pool;
pub mod user_keys;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use uuid::Uuid;

use crate::config::{LlmConfig, ProviderKind};
use crate::domain::accounts::Actor;
use crate::domain::providers::key_pool::{KeyHealth, KeyPlan, KeyedChat, RateLimits, VaultAccess};
use crate::domain::{DomainError, DomainResult};
use crate::model::providers::{ManagedProvider, ProviderKey};
use crate::netguard::AllowedRanges;
use crate::providers::catalog::{Catalog, Family, ModelInfo};
use crate::providers::chat::ChatProvider;
use crate::providers::client::{ProviderClient, RetryPolicy};
use crate::providers::discovery::Discovered;
use crate::secret::Secret;
use crate::vault::Vault;
use crate::vault::store::SecretMeta;

mod entries;
pub use capabilities::{CapabilityOverride, Fact, Holder, Source};
pub use entries::*;

/// The registry, built once at start and shared.
pub struct Providers {
    configured: Vec<ProviderEntry>,
    managed: RwLock<Arc<Vec<ProviderEntry>>>,
    client: ProviderClient,
    retry: RetryPolicy,
    catalog: Catalog,
    discovered: Mutex<HashMap<String, (Instant, Vec<String>)>>,
    /// `provider/model` references whose upstream refused tool definitions: not offered
    /// tools again until the server restarts.
    refuses_tools: Mutex<std::collections::HashSet<String>>,
    /// The groups of people who asked lately, read again by every request that reads their own
    /// keys (the first step of resolving or listing models), for providers shared with groups.
    member_groups: Mutex<HashMap<Uuid, Vec<Uuid>>>,
    /// Members' own provider keys (without values) as last listed.
    own_keys: own_keys::OwnKeys,
    /// What each provider's API said about models the catalog does not know, by
    /// `provider/model`, refreshed after `ttl`.
    capabilities: Mutex<HashMap<String, (Instant, Discovered)>>,
    /// Admins' word on models, by `provider/model` (loaded with the providers).
    overrides: RwLock<HashMap<String, CapabilityOverride>>,
    /// Members' word on the models of their own keys, by key id and model.
    member_overrides: RwLock<HashMap<(Uuid, String), CapabilityOverride>>,
    ttl: Duration,
    default_model: String,
    image_model: String,
    vault: Option<VaultAccess>,
    health: Arc<KeyHealth>,
    limits: RateLimits,
    cooldown: Duration,
    member_ranges: Arc<AllowedRanges>,
    /// The other instances (none alone).
    bus: Option<crate::bus::SharedBus>,
}

/// The catalog family of a provider kind.
fn family_of(kind: ProviderKind) -> Family {
    match kind {
        ProviderKind::Anthropic => Family::Anthropic,
        ProviderKind::Gemini => Family::Gemini,
        _ => Family::OpenAi,
    }
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
        let configured = cfg
            .providers
            .iter()
            .map(|(name, p)| ProviderEntry {
                id: None,
                name: name.clone(),
                label: if p.label.is_empty() { name.clone() } else { p.label.clone() },
                kind: p.kind,
                base_url: if p.base_url.is_empty() {
                    default_base_url(p.kind).to_string()
                } else {
                    p.base_url.clone()
                },
                shared: SharedKeys::Config(Secret::new(p.api_key.trim())),
                models: p.models.clone(),
                enabled: true,
                visibility: Visibility::Everyone,
                rpm: None,
                tpm: None,
                holder: Holder::Instance,
            })
            .collect();
        let member_ranges = AllowedRanges::parse(&cfg.member_base_url_allow.join(","))
            .map_err(|e| ProvidersError(format!("llm.member_base_url_allow: {e}")))?;
        Ok(Providers {
            configured,
            managed: RwLock::new(Arc::new(Vec::new())),
            client,
            retry: RetryPolicy {
                max_attempts: cfg.max_attempts,
                max_delay: Duration::from_secs(cfg.max_retry_wait_secs),
                ..RetryPolicy::default()
            },
            catalog,
            discovered: Mutex::new(HashMap::new()),
            refuses_tools: Mutex::new(std::collections::HashSet::new()),
            member_groups: Mutex::new(HashMap::new()),
            own_keys: Default::default(),
            capabilities: Mutex::new(HashMap::new()),
            overrides: RwLock::new(HashMap::new()),
            member_overrides: RwLock::new(HashMap::new()),
            ttl: Duration::from_secs(cfg.discovery_ttl_secs),
            default_model: cfg.default_model.clone(),
            image_model: cfg.image_model.trim().to_string(),
            vault: None,
            health: Arc::new(KeyHealth::default()),
            limits: RateLimits::default(),
            cooldown: Duration::from_secs(cfg.key_cooldown_secs),
            member_ranges: Arc::new(member_ranges),
            bus: None,
        })
    }

    /// Gives the registry the database and the vault: admin-managed providers, shared keys
    /// and users' own keys become usable (after [`Providers::reload`]).
    pub fn with_vault(mut self, db: crate::storage::Db, vault: Vault) -> Providers {
        self.vault = Some(VaultAccess { db, vault, sealed: Arc::default() });
        self
    }

    /// Adds the local Ollama as provider `ollama` when it answers and no provider has that name.
    pub async fn detect_local_ollama(&mut self, base: &str) -> bool {
        if self.configured.iter().any(|e| e.name == "ollama") {
            return false;
        }
        let Ok(http) = crate::tls::client_builder().timeout(Duration::from_millis(500)).build() else {
            return false;
        };
        let answered = matches!(
            http.get(format!("{base}/api/version")).send().await,
            Ok(res) if res.status().is_success()
        );
        if answered {
            tracing::info!(base, "a local Ollama answers: offered as provider \"ollama\"");
            self.configured.push(ProviderEntry::open(
                "ollama",
                "Ollama (local)".into(),
                ProviderKind::OpenAiCompatible,
                format!("{base}/v1"),
            ));
        }
        answered
    }

    /// Every instance provider: configured ones first, then admin-managed ones.
    pub fn entries(&self) -> Vec<ProviderEntry> {
        let managed = self.managed.read().unwrap_or_else(|p| p.into_inner()).clone();
        self.configured.iter().cloned().chain(managed.iter().cloned()).collect()
    }

    /// The curated catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The address ranges members may use in their own base URLs.
    pub fn member_ranges(&self) -> &AllowedRanges {
        &self.member_ranges
    }

    /// Whether a name is taken by an instance provider.
    pub fn is_instance_name(&self, name: &str) -> bool {
        self.entries().iter().any(|e| e.name == name)
    }

    /// The actor's own provider keys (none without a vault).
    pub async fn own_keys(&self, actor: &Actor) -> DomainResult<Vec<SecretMeta>> {
        let Some(access) = &self.vault else { return Ok(Vec::new()) };
        if self.entries().iter().any(|e| e.visibility.names_groups()) {
            let groups = crate::storage::repos::groups::group_ids_of(&access.db, actor.user_id()).await?;
            let mut cache = self.member_groups.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if cache.len() > 10_000 {
                cache.clear();
            }
            cache.insert(actor.user_id(), groups);
        }
        Ok(self.own_keys.of(&access.db, actor.user_id()).await?)
    }

    /// Whether the actor may use the entry's shared keys (their groups as last read).
    fn admits(&self, actor: &Actor, entry: &ProviderEntry) -> bool {
        if !entry.visibility.names_groups() {
            return entry.visibility.admits(actor, &[]);
        }
        let cache = self.member_groups.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        entry.visibility.admits(actor, cache.get(&actor.user_id()).map_or(&[][..], Vec::as_slice))
    }

    /// The actor's own key that serves an instance provider: a key for its official kind,
    /// when the provider is that kind at its public URL.
    fn own_key_for<'k>(own: &'k [SecretMeta], entry: &ProviderEntry) -> Option<&'k SecretMeta> {
        if entry.kind == ProviderKind::OpenAiCompatible
            || entry.base_url.trim_end_matches('/') != default_base_url(entry.kind)
        {
            return None;
        }
        own.iter().find(|k| k.base_url.is_none() && k.provider == kind_str(entry.kind))
    }

    /// The personal providers an actor's own keys make: official kinds no instance provider
    /// of that name offers, and their own OpenAI-compatible endpoints.
    fn personal_entries<'k>(
        &self,
        own: &'k [SecretMeta],
        instance: &[ProviderEntry],
    ) -> Vec<(ProviderEntry, &'k SecretMeta)> {
        let mut out: Vec<(ProviderEntry, &'k SecretMeta)> = Vec::new();
        for key in own {
            if instance.iter().any(|e| e.name == key.provider)
                || out.iter().any(|(e, _)| e.name == key.provider)
            {
                continue;
            }
            let Some(entry) = personal_entry(key) else { continue };
            out.push((entry, key));
        }
        out
    }

    /// A handle that fetches the plan's key at each call.
    fn keyed(
        &self,
        actor: &Actor,
        entry: &ProviderEntry,
        plan: KeyPlan,
        guarded: bool,
    ) -> Arc<dyn ChatProvider> {
        Arc::new(KeyedChat {
            kind: entry.kind,
            base_url: entry.base_url.clone(),
            plan,
            client: self.client.clone(),
            retry: self.retry.clone(),
            vault: self.vault.clone(),
            health: self.health.clone(),
            cooldown: self.cooldown,
            by: actor.user_id(),
            guard: guarded.then(|| self.member_ranges.clone()),
        })
    }

    /// How the actor would call `entry`: their own key, else the shared keys if allowed.
    fn plan_for(&self, actor: &Actor, own: &[SecretMeta], entry: &ProviderEntry) -> Option<KeyPlan> {
        if let Some(key) = Self::own_key_for(own, entry) {
            return Some(KeyPlan::Own { owner: actor.user_id(), secret: key.id });
        }
        if !entry.enabled || !self.admits(actor, entry) {
            return None;
        }
        entry.shared_plan()
    }

    /// Resolves `provider/model` for the actor, or says clearly why it cannot be used. Counts
    /// the call against the provider's rate limits.
    pub async fn resolve(&self, actor: &Actor, reference: &str) -> DomainResult<ResolvedModel> {
        self.resolve_in(actor, reference, None).await
    }

    /// [`Providers::resolve`] for a run in a workspace whose owner attached one of their keys
    /// to it: that key serves its provider first, whoever the actor is; the actor's own keys
    /// and the shared keys serve the rest.
    pub async fn resolve_in(
        &self,
        actor: &Actor,
        reference: &str,
        workspace_key: Option<SecretMeta>,
    ) -> DomainResult<ResolvedModel> {
        let mut own = self.own_keys(actor).await?;
        if let Some(key) = workspace_key {
            own.insert(0, key);
        }
        let mut model = self.resolve_with(actor, reference, &own).await?;
        let catalog = self.catalog.lookup(family_of(model.kind), &model.model);
        if !catalog.known {
            self.learn_capabilities(&model).await;
            model.info = self.learned(&model.provider, &model.model, model.holder, catalog);
        }
        Ok(model)
    }

    /// As [`Providers::resolve`], with the actor's own keys already read (a fallback chain
    /// resolves several references for one call).
    pub async fn resolve_with(
        &self,
        actor: &Actor,
        reference: &str,
        own: &[SecretMeta],
    ) -> DomainResult<ResolvedModel> {
        let (name, model) = split_reference(reference).ok_or_else(|| {
            DomainError::Invalid(format!("\"{reference}\" is not a model reference like \"openai/gpt-4.1\"."))
        })?;
        let instance = self.entries();
        let resolved = |entry: &ProviderEntry, model: &str, chat: Arc<dyn ChatProvider>| ResolvedModel {
            provider: entry.name.clone(),
            kind: entry.kind,
            model: model.to_string(),
            info: self.learned(&entry.name, model, entry.holder, self.catalog.lookup(entry.family(), model)),
            chat: crate::providers::metered::Metered::wrap(chat, &entry.name, model),
            holder: entry.holder,
        };
        // An own key or personal endpoint reaches every model: only a `$alias` is dropped.
        let bare = split_alias(model).0;
        if let Some(entry) = instance.iter().find(|e| e.name == name) {
            if let Some(key) = Self::own_key_for(own, entry) {
                let plan = KeyPlan::Own { owner: key.owner_id, secret: key.id };
                let entry = ProviderEntry { holder: Holder::OwnKey(key.id), ..entry.clone() };
                return Ok(resolved(&entry, bare, self.keyed(actor, &entry, plan, false)));
            }
            if !entry.enabled {
                return Err(DomainError::Invalid(format!(
                    "The provider \"{}\" is turned off. Pick another model.",
                    entry.label
                )));
            }
            if !self.admits(actor, entry) {
                return Err(DomainError::Invalid(format!(
                    "The provider \"{}\" is not available to you. Pick another model, or add your own key.",
                    entry.label
                )));
            }
            let (req_id, req_alias) = split_alias(model);
            let model = if entry.models.is_empty() {
                req_id
            } else {
                entry.models.iter().find_map(|m| match_model(req_id, req_alias, m)).ok_or_else(|| {
                    DomainError::Invalid(format!(
                        "The model \"{model}\" is not enabled for \"{}\". Pick another model.",
                        entry.label
                    ))
                })?
            };
            let plan = entry.shared_plan().ok_or_else(|| {
                DomainError::Invalid(format!(
                    "There is no API key for provider \"{}\": add your own key, or ask an admin to share one.",
                    entry.label
                ))
            })?;
            self.limits.admit(actor.user_id(), &entry.name, entry.rpm, entry.tpm).await.map_err(|wait| {
                DomainError::Limited(
                    format!(
                        "You are sending requests to \"{}\" faster than its limit allows. Try again in {wait} s.",
                        entry.label
                    ),
                    wait,
                )
            })?;
            return Ok(resolved(entry, model, self.keyed(actor, entry, plan, false)));
        }
        if let Some((entry, key)) =
            self.personal_entries(own, &instance).into_iter().find(|(e, _)| e.name == name)
        {
            let guarded = entry.kind == ProviderKind::OpenAiCompatible;
            // The key's owner: the actor, or the owner of the workspace it is attached to.
            let plan = KeyPlan::Own { owner: key.owner_id, secret: key.id };
            return Ok(resolved(&entry, bare, self.keyed(actor, &entry, plan, guarded)));
        }
        Err(DomainError::Invalid(format!(
            "There is no provider \"{name}\". Pick another model, or ask an admin to add the provider."
        )))
    }

    /// Counts tokens a finished call used against the provider's per-minute limit.
    pub fn spend_tokens(&self, actor_id: Uuid, provider: &str, tokens: u64) {
        self.limits.spend(actor_id, provider, tokens);
    }

    /// What is in force for `model` of `entry` as offered to someone (its holder counts).
    pub fn info_of(&self, entry: &ProviderEntry, model: &str) -> ModelInfo {
        self.learned(&entry.name, model, entry.holder, self.catalog.lookup(entry.family(), model))
    }

    /// What is in force for a model reference as the actor's calls would see it, their own
    /// keys and the key attached to the workspace counted, without calling anyone: defaults
    /// when unknown, `None` when unparsable.
    pub async fn model_info(
        &self,
        actor: &Actor,
        reference: &str,
        workspace_key: Option<SecretMeta>,
    ) -> Option<ModelInfo> {
        let (name, model) = split_reference(reference)?;
        let mut own = self.own_keys(actor).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "could not read the user's own keys");
            Vec::new()
        });
        own.splice(0..0, workspace_key);
        let instance = self.entries();
        let entry = match instance.iter().find(|e| e.name == name) {
            Some(entry) => match Self::own_key_for(&own, entry) {
                Some(key) => ProviderEntry { holder: Holder::OwnKey(key.id), ..entry.clone() },
                None => entry.clone(),
            },
            None => match self.personal_entries(&own, &instance).into_iter().find(|(e, _)| e.name == name) {
                Some((entry, _)) => entry,
                None => {
                    let family = official_kind(name).map_or(Family::OpenAi, family_of);
                    return Some(self.learned(
                        name,
                        model,
                        Holder::Instance,
                        self.catalog.lookup(family, model),
                    ));
                }
            },
        };
        Some(self.info_of(&entry, model))
    }

    /// Model ids of one provider: enabled/configured, else discovered (cached), else curated.
    async fn models_of(
        &self,
        cache_key: &str,
        entry: &ProviderEntry,
        chat: Option<Arc<dyn ChatProvider>>,
    ) -> Vec<String> {
        if !entry.models.is_empty() {
            return entry.models.clone();
        }
        if let Some(ids) = self.cached(cache_key) {
            return ids;
        }
        if let Some(chat) = chat {
            match chat.list_models().await {
                Ok(ids) => {
                    // Image models the catalog knows are offered too (they answer with images).
                    let keep = |id: &String| {
                        is_chat_model(id) || self.catalog.lookup(entry.family(), id).image_output
                    };
                    let ids: Vec<String> = ids.into_iter().filter(keep).collect();
                    self.store(cache_key, ids.clone());
                    return ids;
                }
                Err(e) => {
                    tracing::warn!(provider = %entry.name, status = e.status, kind = %e.kind, "model discovery failed");
                    // Offer the curated models for a minute rather than asking again on every page.
                    let curated: Vec<String> =
                        self.catalog.entries(entry.family()).into_iter().map(|m| m.id).collect();
                    let retry_in = Duration::from_secs(60).min(self.ttl);
                    let at = Instant::now()
                        .checked_sub(self.ttl.saturating_sub(retry_in))
                        .unwrap_or_else(Instant::now);
                    self.discovered().insert(cache_key.to_string(), (at, curated.clone()));
                    return curated;
                }
            }
        }
        self.catalog.entries(entry.family()).into_iter().map(|m| m.id).collect()
    }

    /// Lists what a provider offers with its shared keys (the admin's "discover models" and
    /// "test connection"); the provider's error, redacted, when it fails.
    pub async fn discover(&self, actor: &Actor, entry: &ProviderEntry) -> Result<Vec<String>, String> {
        let plan =
            entry.shared_plan().ok_or_else(|| "The provider has no key to call it with.".to_string())?;
        let chat = self.keyed(actor, entry, plan, false);
        let ids = chat.list_models().await.map_err(|e| describe_error(&e))?;
        let mut ids: Vec<String> = ids.into_iter().filter(|id| is_chat_model(id)).collect();
        ids.sort();
        Ok(ids)
    }

    /// Lists the models one of the actor's own keys reaches ("test" in the settings).
    pub async fn test_own_key(&self, actor: &Actor, key: &SecretMeta) -> Result<usize, String> {
        let entry =
            personal_entry(key).ok_or_else(|| "This key's provider is not recognised.".to_string())?;
        let guarded = entry.kind == ProviderKind::OpenAiCompatible;
        let chat =
            self.keyed(actor, &entry, KeyPlan::Own { owner: actor.user_id(), secret: key.id }, guarded);
        chat.list_models().await.map(|ids| ids.len()).map_err(|e| describe_error(&e))
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

    /// Forgets every discovered list and what providers said about models, so the next
    /// picker and the next run ask the providers again.
    pub fn refresh(&self) {
        self.discovered().clear();
        self.refresh_capabilities();
    }

    /// Every provider the actor may call with the model entries it offers them (as configured:
    /// `id` or `id$alias`), instance providers in order, then their own.
    pub async fn offered(&self, actor: &Actor) -> Vec<(ProviderEntry, Vec<String>)> {
        let own = match self.own_keys(actor).await {
            Ok(own) => own,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the user's own keys");
                Vec::new()
            }
        };
        self.offered_with(actor, &own).await
    }

    /// [`Self::offered`] with the user's own keys already read.
    pub async fn offered_with(&self, actor: &Actor, own: &[SecretMeta]) -> Vec<(ProviderEntry, Vec<String>)> {
        let own = own.to_vec();
        let instance = self.entries();
        let mut out = Vec::new();
        for entry in &instance {
            let Some(plan) = self.plan_for(actor, &own, entry) else { continue };
            let (cache_key, entry) = match plan {
                // The user's own key reaches every model of the provider.
                KeyPlan::Own { secret, .. } => (
                    format!("own:{}:{}", actor.user_id(), entry.name),
                    ProviderEntry { models: Vec::new(), holder: Holder::OwnKey(secret), ..entry.clone() },
                ),
                _ => (entry.name.clone(), entry.clone()),
            };
            let chat = self.keyed(actor, &entry, plan, false);
            let ids = self.models_of(&cache_key, &entry, Some(chat)).await;
            out.push((entry, ids));
        }
        for (entry, key) in self.personal_entries(&own, &instance) {
            let guarded = entry.kind == ProviderKind::OpenAiCompatible;
            let plan = KeyPlan::Own { owner: key.owner_id, secret: key.id };
            let chat = self.keyed(actor, &entry, plan, guarded);
            let ids =
                self.models_of(&format!("own:{}:{}", actor.user_id(), entry.name), &entry, Some(chat)).await;
            out.push((entry, ids));
        }
        out
    }

    /// The models the actor may pick: instance providers in order, then their own.
    pub async fn choices(&self, actor: &Actor) -> Vec<ModelChoice> {
        let mut out = Vec::new();
        for (entry, ids) in self.offered(actor).await {
            for raw in ids {
                let (id, _) = split_alias(&raw);
                let info = self.info_of(&entry, id);
                out.push(ModelChoice {
                    value: format!("{}/{id}", entry.name),
                    facts: ModelChoice::describe(&info),
                    label: info.label,
                    provider: entry.label.clone(),
                });
            }
        }
        out
    }

    /// Every `provider/model` the actor may call that a reference without a provider names
    /// (`model`, `alias` or `model$alias`, as in [`match_model`]), in provider order.
    pub async fn unprefixed(&self, actor: &Actor, requested: &str) -> Vec<String> {
        let own = self.own_keys(actor).await.unwrap_or_default();
        self.unprefixed_with(actor, requested, &own).await
    }

    /// [`Self::unprefixed`] with the user's own keys already read.
    pub async fn unprefixed_with(&self, actor: &Actor, requested: &str, own: &[SecretMeta]) -> Vec<String> {
        let (req_id, req_alias) = split_alias(requested);
        let mut out = Vec::new();
        for (entry, ids) in self.offered_with(actor, own).await {
            if let Some(id) = ids.iter().find_map(|m| match_model(req_id, req_alias, m)) {
                out.push(format!("{}/{id}", entry.name));
            }
        }
        out
    }

    /// The model used when a session and its workspace pick none: the user's own default,
    /// else the instance default, else the first model the user may pick.
    pub async fn default_model(&self, actor: &Actor) -> Option<String> {
        if let Some(access) = &self.vault
            && let Ok(Some(personal)) =
                crate::storage::repos::users::default_model(&access.db, actor.user_id()).await
        {
            return Some(personal);
        }
        if !self.default_model.is_empty() {
            return Some(self.default_model.clone());
        }
        self.choices(actor).await.into_iter().next().map(|c| c.value)
    }
}

#[cfg(test)]
mod tests;
