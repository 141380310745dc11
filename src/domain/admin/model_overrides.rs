//! Admins' word on what a provider's models can do (tools, vision, reasoning, context window,
//! output limit, prices), and the console's view of every fact in force with its source.

use uuid::Uuid;

use super::ProviderView;
use crate::domain::audit::{self, Origin};
use crate::domain::authz::Admin;
pub use crate::domain::providers::overrides::{ModelFacts, OverrideForm, parse};
use crate::domain::providers::{Providers, split_alias};
use crate::domain::{DomainError, DomainResult};
use crate::model::providers::ModelOverride;
use crate::storage::repos::{model_overrides as repo, providers as provider_repo};

impl super::AdminConsole {
    /// Sets (or, with every field empty, clears) an admin's override for one of a provider's models.
    pub async fn set_model_override(
        &self,
        admin: &Admin,
        origin: &Origin,
        provider_id: Uuid,
        form: &OverrideForm,
    ) -> DomainResult<()> {
        let db = &self.db;
        let _actor = admin.actor();
        let provider = provider_repo::find(db, provider_id).await?.ok_or(DomainError::NotFound)?;
        let (model, o) = parse(form)?;
        let row = ModelOverride {
            provider: provider.name.clone(),
            model: model.clone(),
            stated: o.clone(),
            updated_at: chrono::Utc::now(),
        };
        repo::put(db, row).await?;
        audit::record(
            db,
            origin,
            "provider.model_override",
            &format!("model:{}/{model}", provider.name),
            serde_json::json!({
                "tools": o.tools, "vision": o.vision, "reasoning": o.reasoning,
                "context_window": o.context_window, "max_output": o.max_output,
                "input_per_mtok": o.input_per_mtok, "output_per_mtok": o.output_per_mtok,
            }),
        )
        .await?;
        self.providers.reload().await
    }
}

/// The provider's enabled models and every model an admin has a word on, with the facts in force.
pub fn model_facts(providers: &Providers, provider: &ProviderView) -> Vec<ModelFacts> {
    let mut models: Vec<String> = provider.models.iter().map(|m| split_alias(m).0.to_string()).collect();
    for reference in providers.overridden_models() {
        if let Some(model) = reference.strip_prefix(&format!("{}/", provider.name))
            && !models.iter().any(|m| m == model)
        {
            models.push(model.to_string());
        }
    }
    models
        .into_iter()
        .map(|model| {
            let facts = providers.facts(&format!("{}/{model}", provider.name));
            ModelFacts { model, facts }
        })
        .collect()
}
