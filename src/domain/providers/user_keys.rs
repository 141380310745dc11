//! A user's own provider keys, kept encrypted in the vault: add, replace, delete, test; shown
//! only as a label and the last four characters. Also the user's default model.

use serde::Serialize;
use uuid::Uuid;

use crate::config::ProviderKind;
use crate::domain::accounts::Actor;
use crate::domain::audit::{self, Origin};
use crate::domain::providers::{Providers, parse_kind};
use crate::domain::validate::valid_name;
use crate::domain::{DomainError, DomainResult};
use crate::secret::Secret;
use crate::storage::Db;
use crate::vault::Vault;
use crate::vault::store::{NewSecret, SecretKind, SecretMeta};

/// Members' own provider keys as a service: the keys in the vault, the models each key's
/// endpoint lists and the member's word on them, the default model. Built once in the app
/// state over the database, the vault and the providers registry.
#[derive(Clone)]
pub struct MemberKeys {
    pub(super) db: Db,
    vault: Vault,
    pub(super) providers: std::sync::Arc<Providers>,
}

impl MemberKeys {
    /// The service over this database, vault and registry.
    pub fn new(db: Db, vault: Vault, providers: std::sync::Arc<Providers>) -> MemberKeys {
        MemberKeys { db, vault, providers }
    }
}

/// The most keys one user may store.
pub const MAX_KEYS: usize = 50;

/// One key as the settings page shows it.
#[derive(Debug, Clone, Serialize)]
pub struct KeyRow {
    /// Row id.
    pub id: Uuid,
    /// Label.
    pub label: String,
    /// Provider name it serves (`openai`, `anthropic`, `gemini` or the endpoint's name).
    pub provider: String,
    /// Base URL of an OpenAI-compatible endpoint.
    pub base_url: Option<String>,
    /// Last four characters.
    pub last4: String,
    /// Last stored or replaced, `YYYY-MM-DD`.
    pub updated: String,
}

pub(super) fn row(m: SecretMeta) -> KeyRow {
    KeyRow {
        id: m.id,
        label: m.label,
        provider: m.provider,
        base_url: m.base_url,
        last4: m.last4,
        updated: m.updated_at.format("%Y-%m-%d").to_string(),
    }
}

impl MemberKeys {
    /// The actor's keys, newest first.
    pub async fn list(&self, actor: &Actor) -> DomainResult<Vec<KeyRow>> {
        Ok(Vault::list_secrets(&self.db, actor.user_id(), SecretKind::ProviderKey)
            .await?
            .into_iter()
            .map(row)
            .collect())
    }

    /// Stores a new key. An OpenAI-compatible endpoint needs a free name and a base URL that
    /// passes the SSRF guard (unless an admin allowed its range).
    pub async fn add(&self, actor: &Actor, origin: &Origin, form: &KeyForm) -> DomainResult<KeyRow> {
        let db = &self.db;
        let providers = &self.providers;
        let kind =
            parse_kind(form.kind.trim()).ok_or_else(|| DomainError::Invalid("Pick the provider.".into()))?;
        check_value(&form.key)?;
        let label = check_label(&form.label)?;
        let existing = self.list(actor).await?;
        if existing.len() >= MAX_KEYS {
            return Err(DomainError::Invalid(format!("You can keep at most {MAX_KEYS} keys.")));
        }
        let (provider, base_url) = match kind {
            ProviderKind::OpenAiCompatible => {
                let name = form.name.trim();
                if !valid_name(name) || parse_kind(name).is_some() {
                    return Err(DomainError::Invalid(
                    "Give the endpoint a short name of lower-case letters, digits, - and _, like \"my-vllm\"."
                        .into(),
                ));
                }
                if providers.is_instance_name(name) {
                    return Err(DomainError::Conflict(format!(
                        "\"{name}\" is the name of a provider of this server; pick another."
                    )));
                }
                let url = form.base_url.trim().trim_end_matches('/');
                crate::netguard::check_url(url, providers.member_ranges())
                    .await
                    .map_err(|e| DomainError::Invalid(e.to_string()))?;
                (name.to_string(), Some(url.to_string()))
            }
            official => (crate::domain::providers::kind_str(official).to_string(), None),
        };
        if existing.iter().any(|k| k.provider == provider) {
            return Err(DomainError::Conflict(format!(
                "You already have a key for \"{provider}\": replace it or delete it first."
            )));
        }
        let label = if label.is_empty() { provider.as_str() } else { label };
        let what = NewSecret {
            kind: SecretKind::ProviderKey,
            label,
            provider: &provider,
            base_url: base_url.as_deref(),
        };
        let meta =
            self.vault.put_secret(db, actor.user_id(), None, what, &Secret::new(form.key.as_str())).await?;
        audit::record(
        db,
        origin,
        "key.add",
        &format!("key:{}", meta.id),
        serde_json::json!({ "provider": meta.provider, "label": meta.label, "last4": meta.last4, "base_url": meta.base_url }),
    )
    .await?;
        providers.refresh();
        Ok(row(meta))
    }

    /// Replaces a key's value and/or label; a blank value keeps the stored key untouched.
    pub async fn replace(
        &self,
        actor: &Actor,
        origin: &Origin,
        id: Uuid,
        change: Change<'_>,
    ) -> DomainResult<KeyRow> {
        let db = &self.db;
        let vault = &self.vault;
        let Change { label, value } = change;
        let current = Vault::secret_meta(db, actor.user_id(), id).await?;
        if current.kind != SecretKind::ProviderKey.as_str() {
            return Err(DomainError::NotFound);
        }
        let label = check_label(label)?;
        let label = if label.is_empty() { current.label.as_str() } else { label };
        let meta = if value.trim().is_empty() {
            Vault::relabel(vault, db, actor.user_id(), id, label).await?
        } else {
            check_value(value)?;
            let what = NewSecret {
                kind: SecretKind::ProviderKey,
                label,
                provider: &current.provider,
                base_url: current.base_url.as_deref(),
            };
            vault.put_secret(db, actor.user_id(), Some(id), what, &Secret::new(value)).await?
        };
        audit::record(
            db,
            origin,
            if value.trim().is_empty() { "key.relabel" } else { "key.replace" },
            &format!("key:{id}"),
            serde_json::json!({ "provider": meta.provider, "label": meta.label, "last4": meta.last4 }),
        )
        .await?;
        self.providers.refresh();
        Ok(row(meta))
    }

    /// Deletes one of the actor's keys.
    pub async fn delete(&self, actor: &Actor, origin: &Origin, id: Uuid) -> DomainResult<()> {
        let db = &self.db;
        let providers = &self.providers;
        let current = Vault::secret_meta(db, actor.user_id(), id).await?;
        if current.kind != SecretKind::ProviderKey.as_str() {
            return Err(DomainError::NotFound);
        }
        Vault::delete_secret(db, actor.user_id(), id).await?;
        // Its overrides went with it (the database's cascade): forget them everywhere.
        providers.key_overrides_changed(id).await?;
        audit::record(
        db,
        origin,
        "key.delete",
        &format!("key:{id}"),
        serde_json::json!({ "provider": current.provider, "label": current.label, "last4": current.last4 }),
    )
    .await?;
        providers.refresh();
        Ok(())
    }

    /// Lists models with one of the actor's keys: the number of models, or the provider's error.
    pub async fn test(&self, actor: &Actor, id: Uuid) -> DomainResult<Result<usize, String>> {
        let providers = &self.providers;
        let meta = Vault::secret_meta(&self.db, actor.user_id(), id).await?;
        if meta.kind != SecretKind::ProviderKey.as_str() {
            return Err(DomainError::NotFound);
        }
        Ok(providers.test_own_key(actor, &meta).await)
    }

    /// The actor's own default model.
    pub async fn default_model(&self, actor: &Actor) -> DomainResult<Option<String>> {
        Ok(crate::storage::repos::users::default_model(&self.db, actor.user_id()).await?)
    }

    /// Sets (or, with a blank value, clears) the actor's default model; it must be one they may use.
    pub async fn set_default_model(&self, actor: &Actor, model: &str) -> DomainResult<()> {
        let db = &self.db;
        let model = model.trim();
        if model.is_empty() {
            crate::storage::repos::users::set_default_model(db, actor.user_id(), None).await?;
            return Ok(());
        }
        if !self.providers.choices(actor).await.iter().any(|c| c.value == model) {
            return Err(DomainError::Invalid("Pick one of the models you can use.".into()));
        }
        crate::storage::repos::users::set_default_model(db, actor.user_id(), Some(model)).await?;
        Ok(())
    }
}

/// What the "add a key" form sends.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(default)]
pub struct KeyForm {
    /// openai | anthropic | gemini | openai_compatible.
    pub kind: String,
    /// For OpenAI-compatible endpoints: the name used in model references.
    pub name: String,
    /// For OpenAI-compatible endpoints: the API base URL.
    pub base_url: String,
    /// Label.
    pub label: String,
    /// The key itself.
    pub key: String,
}

fn check_value(value: &str) -> DomainResult<()> {
    let value = value.trim();
    if value.is_empty() {
        return Err(DomainError::Invalid("Paste the key; it cannot be empty.".into()));
    }
    if value.chars().count() > 4096 || value.chars().any(char::is_control) {
        return Err(DomainError::Invalid("That does not look like an API key.".into()));
    }
    Ok(())
}

fn check_label(label: &str) -> DomainResult<&str> {
    let label = label.trim();
    if label.chars().count() > 80 {
        return Err(DomainError::Invalid("The label is longer than 80 characters.".into()));
    }
    Ok(label)
}

/// A change to a stored key: a new label (blank: keep) and a new value (blank: keep).
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    /// New label.
    pub label: &'a str,
    /// New value.
    pub value: &'a str,
}
