//! What a model can do, and where each fact comes from: a member's override for a model they
//! reach with their own key, then an admin's override (never for a member's personal provider),
//! then what the provider's own API said (for models the catalog does not know), then the
//! catalog, then the defaults. A tool refusal the provider answered with turns tools off
//! whatever the provider and the catalog say.
//!
//! What a member's own endpoint says and refuses is kept for that key alone: two members may
//! each name an endpoint "mine" and point it at different servers.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use uuid::Uuid;

use super::{Providers, ResolvedModel};
use crate::domain::DomainResult;
use crate::providers::catalog::ModelInfo;
use crate::providers::discovery::Discovered;
use crate::storage::Db;
use crate::storage::repos::{member_model_overrides as member_repo, model_overrides as repo};

pub use crate::model::providers::CapabilityOverride;

/// Whose word counts for a provider's models besides the provider's and the catalog's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Holder {
    /// An instance provider with its shared keys: the admins'.
    #[default]
    Instance,
    /// An instance provider called with a member's own key (its id): the admins', then the
    /// member's for that key.
    OwnKey(Uuid),
    /// A member's personal provider, made by their key (its id): their own endpoint, or an
    /// official kind no instance provider offers. The member's word alone, and what its server
    /// says is kept for that key only.
    Personal(Uuid),
}

impl Holder {
    /// The member's key whose overrides count, if any.
    pub fn key(self) -> Option<Uuid> {
        match self {
            Holder::Instance => None,
            Holder::OwnKey(key) | Holder::Personal(key) => Some(key),
        }
    }

    /// Under what `reference`'s provider said and refused is kept: the reference, prefixed by
    /// the key for a personal provider.
    pub fn facts_key(self, reference: &str) -> String {
        match self {
            Holder::Personal(key) => format!("{key}:{reference}"),
            _ => reference.to_string(),
        }
    }
}

/// Where a fact in force came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The member set it for their own key.
    Member,
    /// An admin set it.
    Admin,
    /// The provider's API said it (or the provider refused tools).
    Provider,
    /// The curated catalog.
    Catalog,
    /// Nobody said: Arbor's default.
    Default,
}

/// One fact in force, for the console.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fact {
    /// `tools`, `vision`, …
    pub name: &'static str,
    /// As shown.
    pub value: String,
    /// Where it came from.
    pub source: Source,
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Lays an override over `info`, marking the facts it sets as coming from `source`.
fn apply(info: &mut ModelInfo, sources: &mut [Source; 7], o: &CapabilityOverride, source: Source) {
    info.known |= o.context_window.is_some();
    let present = [
        o.tools.is_some(),
        o.vision.is_some(),
        o.reasoning.is_some(),
        o.context_window.is_some(),
        o.max_output.is_some(),
        o.input_per_mtok.is_some(),
        o.output_per_mtok.is_some(),
    ];
    for (slot, set) in sources.iter_mut().zip(present) {
        if set {
            *slot = source;
        }
    }
    info.tools = o.tools.unwrap_or(info.tools);
    info.vision = o.vision.unwrap_or(info.vision);
    info.reasoning = o.reasoning.unwrap_or(info.reasoning);
    info.context_window = o.context_window.unwrap_or(info.context_window);
    info.max_output = o.max_output.unwrap_or(info.max_output);
    info.input_per_mtok = o.input_per_mtok.or(info.input_per_mtok);
    info.output_per_mtok = o.output_per_mtok.or(info.output_per_mtok);
}

impl Providers {
    /// Reads the admins' and the members' overrides (at start and after each change).
    pub(super) async fn load_overrides(&self, db: &Db) -> DomainResult<()> {
        let rows = repo::all(db).await?;
        let map: HashMap<String, CapabilityOverride> =
            rows.into_iter().map(|r| (format!("{}/{}", r.provider, r.model), r.stated)).collect();
        *self.overrides.write().unwrap_or_else(std::sync::PoisonError::into_inner) = map;
        let members = member_repo::all(db).await?;
        let mut map: HashMap<(Uuid, String), CapabilityOverride> = HashMap::new();
        for r in members {
            map.insert((r.secret_id, r.model), r.stated);
        }
        *self.member_overrides.write().unwrap_or_else(std::sync::PoisonError::into_inner) = map;
        // Refusals remembered before a restart (added to: a reload never forgets one).
        let refused = crate::storage::repos::tool_refusals::all(db).await?;
        lock(&self.refuses_tools).extend(refused);
        Ok(())
    }

    /// Reads the overrides of one member's key again (after they changed one, or deleted the
    /// key), here only.
    pub(crate) async fn load_key_overrides(&self, key: Uuid) -> DomainResult<()> {
        let Some(access) = &self.vault else { return Ok(()) };
        let rows = member_repo::of_key(&access.db, key).await?;
        let mut map = self.member_overrides.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.retain(|(k, _), _| *k != key);
        for r in rows {
            map.insert((key, r.model), r.stated);
        }
        Ok(())
    }

    /// Every `provider/model` an admin has a word on.
    pub fn overridden_models(&self) -> Vec<String> {
        self.overrides.read().unwrap_or_else(std::sync::PoisonError::into_inner).keys().cloned().collect()
    }

    /// The admin's override of `reference`, if any.
    pub fn override_of(&self, reference: &str) -> Option<CapabilityOverride> {
        self.overrides.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(reference).cloned()
    }

    /// The override the owner of key `key` set for `model`, if any.
    pub fn member_override_of(&self, key: Uuid, model: &str) -> Option<CapabilityOverride> {
        self.member_overrides
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(key, model.to_string()))
            .cloned()
    }

    /// The catalog's facts (`catalog`) for `provider/model` with what the provider said and
    /// what an admin or the member set.
    pub(super) fn learned(
        &self,
        provider: &str,
        model: &str,
        holder: Holder,
        catalog: ModelInfo,
    ) -> ModelInfo {
        self.in_force(provider, model, holder, catalog).0
    }

    /// The facts in force for `provider/model` and where each came from.
    pub(super) fn in_force(
        &self,
        provider: &str,
        model: &str,
        holder: Holder,
        mut info: ModelInfo,
    ) -> (ModelInfo, Vec<Fact>) {
        let reference = format!("{provider}/{model}");
        let said_under = holder.facts_key(&reference);
        let base = if info.known { Source::Catalog } else { Source::Default };
        let mut sources = [base; 7];
        let said = lock(&self.capabilities).get(&said_under).map(|(_, d)| d.clone());
        if let Some(d) = said {
            // A window the provider stated is not an assumption; its prices come as a pair.
            let (input, output) = d.prices.unzip();
            let stated = CapabilityOverride {
                tools: d.tools,
                vision: d.vision,
                reasoning: d.reasoning,
                context_window: d.context_window,
                max_output: d.max_output,
                input_per_mtok: input,
                output_per_mtok: output,
            };
            apply(&mut info, &mut sources, &stated, Source::Provider);
        }
        if lock(&self.refuses_tools).contains(&said_under) {
            info.tools = false;
            sources[0] = Source::Provider;
        }
        if !matches!(holder, Holder::Personal(_))
            && let Some(o) = self.override_of(&reference)
        {
            apply(&mut info, &mut sources, &o, Source::Admin);
        }
        if let Some(o) = holder.key().and_then(|key| self.member_override_of(key, model)) {
            apply(&mut info, &mut sources, &o, Source::Member);
        }
        info.max_output = info.max_output.min(info.context_window);
        let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
        let price = |p: Option<f64>| p.map_or_else(|| "unknown".to_string(), |p| format!("${p} per million"));
        let facts = vec![
            Fact { name: "tools", value: yes_no(info.tools), source: sources[0] },
            Fact { name: "vision", value: yes_no(info.vision), source: sources[1] },
            Fact { name: "reasoning", value: yes_no(info.reasoning), source: sources[2] },
            Fact { name: "context window", value: info.context_window.to_string(), source: sources[3] },
            Fact { name: "output limit", value: info.max_output.to_string(), source: sources[4] },
            Fact { name: "input price", value: price(info.input_per_mtok), source: sources[5] },
            Fact { name: "output price", value: price(info.output_per_mtok), source: sources[6] },
            // From the catalog alone (an admin cannot turn a chat model into an image model).
            Fact { name: "image output", value: yes_no(info.image_output), source: base },
        ];
        (info, facts)
    }

    /// Asks the provider what a model the catalog does not know can do, unless it was asked
    /// within the cache's lifetime. A provider that cannot say (or takes longer than five
    /// seconds) leaves the defaults; that answer is cached too.
    pub(super) async fn learn_capabilities(&self, model: &ResolvedModel) {
        let under = model.facts_key();
        let fresh = |map: &HashMap<String, (Instant, Discovered)>| {
            map.get(&under).is_some_and(|(at, _)| at.elapsed() < self.ttl)
        };
        if fresh(&lock(&self.capabilities)) {
            return;
        }
        let found = match tokio::time::timeout(Duration::from_secs(5), model.chat.discover(&model.model))
            .await
        {
            Ok(Ok(d)) => d,
            Ok(Err(e)) => {
                tracing::info!(model = %model.reference(), status = e.status, "the provider could not say what the model can do");
                Discovered::default()
            }
            Err(_) => Discovered::default(),
        };
        let mut map = lock(&self.capabilities);
        // Members' endpoints are many: the map never holds more than a bounded number.
        if map.len() > 20_000 {
            map.retain(|_, (at, _)| at.elapsed() < self.ttl);
        }
        map.insert(under, (Instant::now(), found));
    }

    /// Forgets what providers said about models, so the next use asks again.
    pub(super) fn refresh_capabilities(&self) {
        lock(&self.capabilities).clear();
    }

    /// Remembers that the model kept under `facts_key` (see [`ResolvedModel::facts_key`])
    /// refused tool definitions: it is not offered tools again (until an admin asks the
    /// providers again, or a member or admin says otherwise).
    pub async fn note_refuses_tools(&self, facts_key: &str) {
        lock(&self.refuses_tools).insert(facts_key.to_string());
        if let Some(access) = &self.vault
            && let Err(e) = crate::storage::repos::tool_refusals::remember(&access.db, facts_key).await
        {
            tracing::warn!(model = %facts_key, error = %e, "could not remember that the model refuses tools");
        }
    }

    /// Forgets what providers said about their models, tool refusals included (the console's
    /// "ask the providers again"): the next use asks again.
    pub async fn ask_providers_again(&self) -> DomainResult<()> {
        self.refresh();
        lock(&self.refuses_tools).clear();
        if let Some(access) = &self.vault {
            crate::storage::repos::tool_refusals::forget_all(&access.db).await?;
        }
        Ok(())
    }

    /// The image model behind the agent's `generate_image` tool for the actor: `llm.image_model`
    /// when the actor may pick it, else the first model they may pick that makes images.
    pub async fn image_model(&self, actor: &crate::domain::accounts::Actor) -> Option<String> {
        let mut first = None;
        for (entry, ids) in self.offered(actor).await {
            for raw in &ids {
                let (id, _) = super::split_alias(raw);
                let value = format!("{}/{id}", entry.name);
                if !self.image_model.is_empty() && value == self.image_model {
                    return Some(value);
                }
                if first.is_none() && self.info_of(&entry, id).image_output {
                    first = Some(value);
                }
            }
        }
        first
    }

    /// The facts in force for an instance provider's `provider/model` reference, for the
    /// console.
    pub fn facts(&self, reference: &str) -> Vec<Fact> {
        let Some((provider, model)) = reference.split_once('/') else { return Vec::new() };
        match self.entries().iter().find(|e| e.name == provider) {
            Some(entry) => self.facts_of(entry, model),
            None => Vec::new(),
        }
    }

    /// The facts in force for `model` of `entry` (an instance provider, or a member's own), as
    /// the entry's holder sees them.
    pub fn facts_of(&self, entry: &super::ProviderEntry, model: &str) -> Vec<Fact> {
        let catalog = self.catalog().lookup(entry.family(), model);
        self.in_force(&entry.name, model, entry.holder, catalog).1
    }
}
