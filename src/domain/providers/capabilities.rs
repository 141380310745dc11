//! What a model can do, and where each fact comes from: an admin's override first, then what
//! the provider's own API said (for models the catalog does not know), then the catalog, then
//! the defaults. A tool refusal the provider answered with turns tools off whatever the rest say.

use std::collections::HashMap;

use serde::Serialize;

use super::Providers;
use crate::domain::DomainResult;
use crate::providers::catalog::ModelInfo;
use crate::storage::Db;
use crate::storage::repos::model_overrides as repo;

/// An admin's word on one model; `None` leaves the fact to the provider or the catalog.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapabilityOverride {
    /// Offer tools.
    pub tools: Option<bool>,
    /// Send images.
    pub vision: Option<bool>,
    /// Send a reasoning effort or thinking budget.
    pub reasoning: Option<bool>,
    /// Tokens it reads at most.
    pub context_window: Option<u32>,
    /// Tokens it writes at most.
    pub max_output: Option<u32>,
    /// USD per million input tokens.
    pub input_per_mtok: Option<f64>,
    /// USD per million output tokens.
    pub output_per_mtok: Option<f64>,
}

/// Where a fact in force came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
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

impl Providers {
    /// Reads the admins' overrides (at start and after each change).
    pub(super) async fn load_overrides(&self, db: &Db) -> DomainResult<()> {
        let rows = repo::all(db).await?;
        let map: HashMap<String, CapabilityOverride> = rows
            .into_iter()
            .map(|r| {
                let tokens = |v: Option<i64>| v.and_then(|n| u32::try_from(n).ok());
                (
                    format!("{}/{}", r.provider, r.model),
                    CapabilityOverride {
                        tools: r.tools,
                        vision: r.vision,
                        reasoning: r.reasoning,
                        context_window: tokens(r.context_window),
                        max_output: tokens(r.max_output),
                        input_per_mtok: r.input_per_mtok,
                        output_per_mtok: r.output_per_mtok,
                    },
                )
            })
            .collect();
        *self.overrides.write().unwrap_or_else(std::sync::PoisonError::into_inner) = map;
        // Refusals remembered before a restart (added to: a reload never forgets one).
        let refused = crate::storage::repos::tool_refusals::all(db).await?;
        lock(&self.refuses_tools).extend(refused);
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

    /// The catalog's facts (`catalog`) for `provider/model` with what the provider said and
    /// what an admin set.
    pub(super) fn learned(&self, provider: &str, model: &str, catalog: ModelInfo) -> ModelInfo {
        self.in_force(provider, model, catalog).0
    }

    /// The facts in force for `provider/model` and where each came from.
    pub(super) fn in_force(
        &self,
        provider: &str,
        model: &str,
        mut info: ModelInfo,
    ) -> (ModelInfo, Vec<Fact>) {
        let reference = format!("{provider}/{model}");
        let base = if info.known { Source::Catalog } else { Source::Default };
        let mut sources = [base; 7];
        let said = lock(&self.capabilities).get(&reference).map(|(_, d)| d.clone());
        if let Some(d) = said {
            // A window the provider stated is not an assumption.
            info.known |= d.context_window.is_some();
            let mut take = |i: usize, set: bool| {
                if set {
                    sources[i] = Source::Provider;
                }
            };
            take(0, d.tools.is_some());
            take(1, d.vision.is_some());
            take(2, d.reasoning.is_some());
            take(3, d.context_window.is_some());
            take(4, d.max_output.is_some());
            take(5, d.prices.is_some());
            take(6, d.prices.is_some());
            info.tools = d.tools.unwrap_or(info.tools);
            info.vision = d.vision.unwrap_or(info.vision);
            info.reasoning = d.reasoning.unwrap_or(info.reasoning);
            info.context_window = d.context_window.unwrap_or(info.context_window);
            info.max_output = d.max_output.unwrap_or(info.max_output);
            if let Some((input, output)) = d.prices {
                info.input_per_mtok = Some(input);
                info.output_per_mtok = Some(output);
            }
        }
        if lock(&self.refuses_tools).contains(&reference) {
            info.tools = false;
            sources[0] = Source::Provider;
        }
        if let Some(o) = self.override_of(&reference) {
            info.known |= o.context_window.is_some();
            let mut set = |i: usize, present: bool| {
                if present {
                    sources[i] = Source::Admin;
                }
            };
            set(0, o.tools.is_some());
            set(1, o.vision.is_some());
            set(2, o.reasoning.is_some());
            set(3, o.context_window.is_some());
            set(4, o.max_output.is_some());
            set(5, o.input_per_mtok.is_some());
            set(6, o.output_per_mtok.is_some());
            info.tools = o.tools.unwrap_or(info.tools);
            info.vision = o.vision.unwrap_or(info.vision);
            info.reasoning = o.reasoning.unwrap_or(info.reasoning);
            info.context_window = o.context_window.unwrap_or(info.context_window);
            info.max_output = o.max_output.unwrap_or(info.max_output);
            info.input_per_mtok = o.input_per_mtok.or(info.input_per_mtok);
            info.output_per_mtok = o.output_per_mtok.or(info.output_per_mtok);
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

    /// Remembers that `reference`'s upstream refused tool definitions: it is not offered tools
    /// again (until the server restarts, or an admin says otherwise).
    pub async fn note_refuses_tools(&self, reference: &str) {
        lock(&self.refuses_tools).insert(reference.to_string());
        if let Some(access) = &self.vault
            && let Err(e) = crate::storage::repos::tool_refusals::remember(&access.db, reference).await
        {
            tracing::warn!(model = %reference, error = %e, "could not remember that the model refuses tools");
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
        let choices = self.choices(actor).await;
        if !self.image_model.is_empty() && choices.iter().any(|c| c.value == self.image_model) {
            return Some(self.image_model.clone());
        }
        choices
            .into_iter()
            .map(|c| c.value)
            .find(|value| self.model_info(value).is_some_and(|info| info.image_output))
    }

    /// The facts in force for a `provider/model` reference, for the console.
    pub fn facts(&self, reference: &str) -> Vec<Fact> {
        let Some((provider, model)) = reference.split_once('/') else { return Vec::new() };
        let family = self.entries().iter().find(|e| e.name == provider).map(|e| e.family());
        let catalog = match family {
            Some(f) => self.catalog().lookup(f, model),
            None => return Vec::new(),
        };
        self.in_force(provider, model, catalog).1
    }
}
