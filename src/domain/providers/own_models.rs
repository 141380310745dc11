//! A member's word on what the models of their own keys can do: the settings page's "Models"
//! view of one key (each model its endpoint lists, every fact in force and where it came from)
//! and their override of one model. It counts only for calls made with that key: theirs, and
//! runs in a workspace they attached it to; never another member's, never an admin's provider.

use super::user_keys::MemberKeys;
use serde::Serialize;
use uuid::Uuid;

use super::key_pool::KeyPlan;
use super::notes::{Note, announce};
use super::overrides::{ModelFacts, OverrideForm, parse};
use super::user_keys::{KeyRow, row};
use super::{
    CapabilityOverride, Holder, ProviderEntry, Providers, describe_error, is_chat_model, personal_entry,
};
use crate::config::ProviderKind;
use crate::domain::accounts::Actor;
use crate::domain::audit::{self, Origin};
use crate::domain::{DomainError, DomainResult};
use crate::model::providers::MemberModelOverride;
use crate::storage::Db;
use crate::storage::repos::member_model_overrides as repo;
use crate::vault::Vault;
use crate::vault::store::{SecretKind, SecretMeta};

/// The most models of one key a member may have a word on.
pub const MAX_PER_KEY: u64 = 200;

/// One of the member's keys with its models, as the "Models" view shows them.
#[derive(Debug, Clone, Serialize)]
pub struct KeyModels {
    /// The key.
    pub key: KeyRow,
    /// Each model the endpoint lists, and each the member has a word on, with the facts in force.
    pub models: Vec<ModelFacts>,
    /// Why the endpoint's list could not be read, when it could not.
    pub unlisted: Option<String>,
    /// Why the key serves no provider, when it serves none (then no model is shown).
    pub unused: Option<String>,
}

/// The actor's provider key `id` (404 for anyone else's, and for other secrets).
async fn own_key(db: &Db, actor: &Actor, id: Uuid) -> DomainResult<SecretMeta> {
    let meta = Vault::secret_meta(db, actor.user_id(), id).await?;
    if meta.kind != SecretKind::ProviderKey.as_str() {
        return Err(DomainError::NotFound);
    }
    Ok(meta)
}

impl Providers {
    /// The provider one of the actor's own keys serves, its holder naming the key: the
    /// instance provider of its official kind at the public URL, else the personal provider
    /// the key makes. `Err` says why it serves none.
    fn own_entry(&self, key: &SecretMeta) -> Result<ProviderEntry, String> {
        let instance = self.entries();
        if let Some(entry) = instance.iter().find(|e| e.name == key.provider) {
            return match Self::own_key_for(std::slice::from_ref(key), entry) {
                Some(_) => {
                    Ok(ProviderEntry { models: Vec::new(), holder: Holder::OwnKey(key.id), ..entry.clone() })
                }
                None => Err(format!(
                    "This server's provider \"{}\" takes the name, so this key is not used.",
                    entry.name
                )),
            };
        }
        personal_entry(key).ok_or_else(|| "This key's provider is not recognised.".to_string())
    }

    /// The chat models the key's provider lists: from the cache the model picker fills when
    /// `cached` and fresh, else asked now.
    async fn own_models(
        &self,
        actor: &Actor,
        entry: &ProviderEntry,
        key: &SecretMeta,
        cached: bool,
    ) -> Result<Vec<String>, String> {
        let cache_key = format!("own:{}:{}", actor.user_id(), entry.name);
        if cached && let Some(ids) = self.cached(&cache_key) {
            return Ok(ids);
        }
        let guarded = entry.kind == ProviderKind::OpenAiCompatible;
        let plan = KeyPlan::Own { owner: key.owner_id, secret: key.id };
        let chat = self.keyed(actor, entry, plan, guarded);
        let ids = chat.list_models().await.map_err(|e| describe_error(&e))?;
        let mut ids: Vec<String> = ids.into_iter().filter(|id| is_chat_model(id)).collect();
        ids.sort();
        ids.dedup();
        self.store(&cache_key, ids.clone());
        Ok(ids)
    }

    /// The models the member has a word on for key `key`.
    fn key_overridden(&self, key: Uuid) -> Vec<String> {
        let map = self.member_overrides.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut models: Vec<String> = map.keys().filter(|(k, _)| *k == key).map(|(_, m)| m.clone()).collect();
        models.sort();
        models
    }

    /// The overrides of key `key` changed (or the key went): read them again here and on
    /// every other instance.
    pub(crate) async fn key_overrides_changed(&self, key: Uuid) -> DomainResult<()> {
        self.load_key_overrides(key).await?;
        if let Some(bus) = &self.bus {
            announce(bus, &Note::KeyOverrides { key });
        }
        Ok(())
    }
}

impl MemberKeys {
    /// The actor's key `id` with each model its provider lists (asked now) and each they have a
    /// word on, with every fact in force and where it came from.
    pub async fn view(&self, actor: &Actor, id: Uuid) -> DomainResult<KeyModels> {
        let providers = &self.providers;
        let meta = own_key(&self.db, actor, id).await?;
        let entry = match providers.own_entry(&meta) {
            Ok(entry) => entry,
            Err(why) => {
                return Ok(KeyModels {
                    key: row(meta),
                    models: Vec::new(),
                    unlisted: None,
                    unused: Some(why),
                });
            }
        };
        let (mut models, unlisted) = match providers.own_models(actor, &entry, &meta, false).await {
            Ok(ids) => (ids, None),
            Err(why) => (Vec::new(), Some(why)),
        };
        for model in providers.key_overridden(meta.id) {
            if !models.contains(&model) {
                models.push(model);
            }
        }
        let models = models
            .into_iter()
            .map(|model| ModelFacts { facts: providers.facts_of(&entry, &model), model })
            .collect();
        Ok(KeyModels { key: row(meta), models, unlisted, unused: None })
    }

    /// Sets (or, with every field empty, clears) the actor's override for one model of their key
    /// `id`: a model its provider lists, or one they already have a word on. Returns the model.
    pub async fn set_override(
        &self,
        actor: &Actor,
        origin: &Origin,
        id: Uuid,
        form: &OverrideForm,
    ) -> DomainResult<String> {
        let db = &self.db;
        let providers = &self.providers;
        let meta = own_key(db, actor, id).await?;
        let (model, o) = parse(form)?;
        let known = providers.member_override_of(meta.id, &model).is_some();
        if o != CapabilityOverride::default() && !known {
            let entry = providers.own_entry(&meta).map_err(DomainError::Invalid)?;
            let listed = providers.own_models(actor, &entry, &meta, true).await.map_err(|why| {
                DomainError::Invalid(format!(
                    "The models of \"{}\" could not be listed to check \"{model}\": {why}",
                    meta.provider
                ))
            })?;
            if !listed.contains(&model) {
                return Err(DomainError::Invalid(format!(
                    "\"{model}\" is not one of the models \"{}\" lists.",
                    meta.provider
                )));
            }
            if repo::count_of_key(db, actor.user_id(), meta.id).await? >= MAX_PER_KEY {
                return Err(DomainError::Invalid(format!(
                    "You can state what at most {MAX_PER_KEY} models of one key can do."
                )));
            }
        }
        repo::put(
            db,
            MemberModelOverride {
                secret_id: meta.id,
                model: model.clone(),
                owner_id: actor.user_id(),
                stated: o.clone(),
                updated_at: chrono::Utc::now(),
            },
        )
        .await?;
        audit::record(
            db,
            origin,
            "key.model_override",
            &format!("key:{}", meta.id),
            serde_json::json!({
                "provider": meta.provider, "model": model,
                "tools": o.tools, "vision": o.vision, "reasoning": o.reasoning,
                "context_window": o.context_window, "max_output": o.max_output,
                "input_per_mtok": o.input_per_mtok, "output_per_mtok": o.output_per_mtok,
            }),
        )
        .await?;
        providers.key_overrides_changed(meta.id).await?;
        Ok(model)
    }
}
