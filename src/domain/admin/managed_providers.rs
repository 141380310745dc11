//! Admin-managed providers and their shared keys, encrypted under the organisation's data key.

use chrono::Utc;
use serde::Serialize;
use uuid::Uuid;

use super::AdminConsole;
use crate::config::ProviderKind;
use crate::domain::audit::{self, Origin};
use crate::domain::authz::Admin;
use crate::domain::providers::{default_base_url, kind_str, parse_kind};
use crate::domain::validate::{check_http_url, valid_name};
use crate::domain::{DomainError, DomainResult};
use crate::model::providers::{ManagedProvider, ProviderKey};
use crate::secret::Secret;
use crate::storage::Db;
use crate::storage::repos::providers as provider_repo;
use crate::storage::repos::providers::ProviderFields;
use crate::vault::Vault;
use crate::vault::store::{NewSecret, ORG_OWNER, SecretKind};

/// A provider as the admin console shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderView {
    /// Row id.
    pub id: Uuid,
    /// Short name (the part before `/`).
    pub name: String,
    /// Display name.
    pub label: String,
    /// Kind's stored spelling.
    pub kind: String,
    /// Base URL as stored (empty: the public API).
    pub base_url: String,
    /// Whether it may be used.
    pub enabled: bool,
    /// Enabled model ids (empty: all discovered).
    pub models: Vec<String>,
    /// everyone | admins | users.
    pub visibility: String,
    /// Users allowed when visibility is "users".
    pub allowed_users: Vec<Uuid>,
    /// Groups whose members are allowed when visibility is "users".
    pub allowed_groups: Vec<Uuid>,
    /// Requests per minute per user.
    pub rpm: Option<i64>,
    /// Tokens per minute per user.
    pub tpm: Option<i64>,
    /// Shared keys.
    pub keys: Vec<KeyView>,
}

/// A shared key as the console shows it: a label and the last four characters.
#[derive(Debug, Clone, Serialize)]
pub struct KeyView {
    /// Row id.
    pub id: Uuid,
    /// Label.
    pub label: String,
    /// Last four characters.
    pub last4: String,
    /// Failures recorded (429s and refusals).
    pub failures: i32,
    /// Resting until, after a 429 (`HH:MM:SS UTC`).
    pub cooldown_until: Option<String>,
}

fn view(row: ManagedProvider, keys: Vec<ProviderKey>) -> ProviderView {
    ProviderView {
        id: row.id,
        name: row.name,
        label: row.label,
        kind: row.kind,
        base_url: row.base_url,
        enabled: row.enabled,
        models: serde_json::from_str(&row.models).unwrap_or_default(),
        visibility: row.visibility,
        allowed_users: crate::domain::providers::parse_allowed(&row.allowed_users).0,
        allowed_groups: crate::domain::providers::parse_allowed(&row.allowed_users).1,
        rpm: row.rpm,
        tpm: row.tpm,
        keys: keys
            .into_iter()
            .map(|k| KeyView {
                id: k.id,
                label: k.label,
                last4: k.last4,
                failures: k.failures,
                cooldown_until: k
                    .cooldown_until
                    .filter(|t| *t > Utc::now())
                    .map(|t| t.format("%H:%M:%S UTC").to_string()),
            })
            .collect(),
    }
}

/// What the provider form sends.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(default)]
pub struct ProviderForm {
    /// Short name: lower-case letters, digits, `-` and `_`.
    pub name: String,
    /// Display name.
    pub label: String,
    /// openai | anthropic | gemini | openai_compatible.
    pub kind: String,
    /// Base URL (blank: the public API; required for openai_compatible).
    pub base_url: String,
    /// "on" when enabled.
    pub enabled: Option<String>,
    /// everyone | admins | users.
    pub visibility: String,
    /// Emails of the users allowed, one per line or comma-separated.
    pub allowed_emails: String,
    /// Names of the groups whose members are allowed, one per line.
    pub allowed_groups: String,
    /// Enabled models, one per line (blank: all discovered).
    pub models: String,
    /// Requests per minute per user (blank: unlimited).
    pub rpm: String,
    /// Tokens per minute per user (blank: unlimited).
    pub tpm: String,
}

fn parse_limit(raw: &str, what: &str) -> DomainResult<Option<i64>> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    match raw.parse::<i64>() {
        Ok(v) if v > 0 => Ok(Some(v)),
        _ => Err(DomainError::Invalid(format!("{what} must be a whole number above 0, or blank."))),
    }
}

/// Checks an admin-set base URL: http(s) with a host (admins may point at private addresses).
fn check_admin_url(kind: ProviderKind, raw: &str) -> DomainResult<String> {
    let raw = raw.trim().trim_end_matches('/');
    if raw.is_empty() {
        if kind == ProviderKind::OpenAiCompatible {
            return Err(DomainError::Invalid("An OpenAI-compatible provider needs a base URL.".into()));
        }
        return Ok(String::new());
    }
    check_http_url(raw, "base URL", "a key")?;
    if raw == default_base_url(kind) { Ok(String::new()) } else { Ok(raw.to_string()) }
}

async fn parse_form(db: &Db, form: &ProviderForm) -> DomainResult<(ProviderKind, ProviderFields)> {
    let kind = parse_kind(form.kind.trim())
        .ok_or_else(|| DomainError::Invalid("Pick the kind of provider.".into()))?;
    let base_url = check_admin_url(kind, &form.base_url)?;
    let visibility = match form.visibility.trim() {
        "" | "everyone" => "everyone",
        "admins" => "admins",
        "users" => "users",
        _ => return Err(DomainError::Invalid("Pick who may use the provider.".into())),
    };
    let mut allowed = Vec::new();
    for email in form.allowed_emails.split([',', '\n', ' ']).map(str::trim).filter(|e| !e.is_empty()) {
        let email = crate::domain::accounts::normalize_email(email)?;
        let user = crate::domain::accounts::one_by_email(db, &email)
            .await?
            .ok_or_else(|| DomainError::Invalid(format!("There is no user {email}.")))?;
        allowed.push(user.id);
    }
    let mut groups = Vec::new();
    for name in form.allowed_groups.lines().map(str::trim).filter(|n| !n.is_empty()).take(1_000) {
        groups.push(crate::domain::teams::groups::named(db, name).await?.id);
    }
    let mut models: Vec<String> =
        form.models.split(['\n', ',']).map(str::trim).filter(|m| !m.is_empty()).map(str::to_string).collect();
    models.dedup();
    if models.iter().any(|m| m.len() > 200 || m.chars().any(char::is_control)) {
        return Err(DomainError::Invalid("A model id is too long or has control characters.".into()));
    }
    let label = form.label.trim();
    if label.chars().count() > 80 {
        return Err(DomainError::Invalid("The display name is longer than 80 characters.".into()));
    }
    Ok((
        kind,
        ProviderFields {
            label: label.to_string(),
            kind: kind_str(kind).to_string(),
            base_url,
            enabled: form.enabled.is_some(),
            models: serde_json::to_string(&models).unwrap_or_else(|_| "[]".into()),
            visibility: visibility.to_string(),
            allowed_users: crate::domain::providers::allowed_json(&allowed, &groups),
            rpm: parse_limit(&form.rpm, "Requests per minute")?,
            tpm: parse_limit(&form.tpm, "Tokens per minute")?,
        },
    ))
}

/// A key being added: its label and value.
#[derive(Debug, Clone, Copy)]
pub struct NewKey<'a> {
    /// Label.
    pub label: &'a str,
    /// The key.
    pub value: &'a Secret,
}

impl AdminConsole {
    /// Every admin-managed provider.
    pub async fn list_providers(&self, admin: &Admin) -> DomainResult<Vec<ProviderView>> {
        let db = &self.db;
        let _actor = admin.actor();
        let keys = provider_repo::all_keys(db).await?;
        Ok(provider_repo::all(db)
            .await?
            .into_iter()
            .map(|row| {
                let own = keys.iter().filter(|k| k.provider_id == row.id).cloned().collect();
                view(row, own)
            })
            .collect())
    }

    /// One admin-managed provider.
    pub async fn get_provider(&self, admin: &Admin, id: Uuid) -> DomainResult<ProviderView> {
        let db = &self.db;
        let _actor = admin.actor();
        let row = provider_repo::find(db, id).await?.ok_or(DomainError::NotFound)?;
        let keys = provider_repo::keys_of(db, id).await?;
        Ok(view(row, keys))
    }

    /// Adds a provider; its name must be free among every provider.
    pub async fn create_provider(
        &self,
        admin: &Admin,
        origin: &Origin,
        form: &ProviderForm,
    ) -> DomainResult<ProviderView> {
        let db = &self.db;
        let _actor = admin.actor();
        let name = form.name.trim();
        if !valid_name(name) {
            return Err(DomainError::Invalid(
                "The name may use lower-case letters, digits, - and _ (at most 40), like \"openai\" or \"team-vllm\"."
                    .into(),
            ));
        }
        if self.providers.is_instance_name(name) || provider_repo::find_by_name(db, name).await?.is_some() {
            return Err(DomainError::Conflict(format!("There is already a provider named \"{name}\".")));
        }
        let (_, fields) = parse_form(db, form).await?;
        let id = Uuid::now_v7();
        let saved = provider_repo::save(db, id, Some(name), fields).await?;
        audit::record(
            db,
            origin,
            "provider.create",
            &format!("provider:{name}"),
            serde_json::json!({ "kind": saved.kind, "base_url": saved.base_url, "visibility": saved.visibility }),
        )
        .await?;
        self.providers.reload().await?;
        self.get_provider(admin, id).await
    }

    /// Saves a provider's settings (its name stays).
    pub async fn update_provider(
        &self,
        admin: &Admin,
        origin: &Origin,
        id: Uuid,
        form: &ProviderForm,
    ) -> DomainResult<ProviderView> {
        let db = &self.db;
        let _actor = admin.actor();
        let existing = provider_repo::find(db, id).await?.ok_or(DomainError::NotFound)?;
        let (_, fields) = parse_form(db, form).await?;
        let saved = provider_repo::save(db, id, None, fields).await?;
        audit::record(
            db,
            origin,
            "provider.update",
            &format!("provider:{}", existing.name),
            serde_json::json!({
                "kind": saved.kind,
                "base_url": saved.base_url,
                "enabled": saved.enabled,
                "visibility": saved.visibility,
                "models": serde_json::from_str::<serde_json::Value>(&saved.models).unwrap_or_default(),
                "rpm": saved.rpm,
                "tpm": saved.tpm,
            }),
        )
        .await?;
        self.providers.reload().await?;
        self.get_provider(admin, id).await
    }

    /// Deletes a provider with its shared keys.
    pub async fn delete_provider(&self, admin: &Admin, origin: &Origin, id: Uuid) -> DomainResult<()> {
        let db = &self.db;
        let _actor = admin.actor();
        let existing = provider_repo::find(db, id).await?.ok_or(DomainError::NotFound)?;
        for key in provider_repo::keys_of(db, id).await? {
            // A key row without its ciphertext is harmless; a ciphertext without its row is not kept.
            match Vault::delete_secret(db, ORG_OWNER, key.id).await {
                Ok(()) | Err(crate::vault::store::StoreError::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
        provider_repo::delete(db, id).await?;
        audit::record(
            db,
            origin,
            "provider.delete",
            &format!("provider:{}", existing.name),
            serde_json::json!({}),
        )
        .await?;
        self.providers.reload().await?;
        Ok(())
    }

    /// Adds a shared key (encrypted under the organisation's data key).
    pub async fn add_key(
        &self,
        admin: &Admin,
        origin: &Origin,
        provider_id: Uuid,
        key: NewKey<'_>,
    ) -> DomainResult<KeyView> {
        let db = &self.db;
        let _actor = admin.actor();
        let NewKey { label, value } = key;
        let p = provider_repo::find(db, provider_id).await?.ok_or(DomainError::NotFound)?;
        let label = label.trim();
        if label.chars().count() > 80 {
            return Err(DomainError::Invalid("The label is longer than 80 characters.".into()));
        }
        if value.expose().trim().chars().count() > 4096
            || value.expose().chars().any(|c| c.is_control() && c != '\n')
        {
            return Err(DomainError::Invalid("That does not look like an API key.".into()));
        }
        let what = NewSecret {
            kind: SecretKind::SharedProviderKey,
            label,
            provider: &provider_id.to_string(),
            base_url: None,
        };
        let meta = self.vault.put_secret(db, ORG_OWNER, None, what, value).await?;
        let row = match provider_repo::insert_key(db, meta.id, provider_id, label, &meta.last4).await {
            Ok(row) => row,
            Err(e) => {
                // Keep the two tables in step: no ciphertext without its key row.
                let _ = Vault::delete_secret(db, ORG_OWNER, meta.id).await;
                return Err(e.into());
            }
        };
        audit::record(
            db,
            origin,
            "provider.key_add",
            &format!("provider:{}", p.name),
            serde_json::json!({ "key_id": meta.id, "label": label, "last4": meta.last4 }),
        )
        .await?;
        self.providers.reload().await?;
        Ok(KeyView { id: row.id, label: row.label, last4: row.last4, failures: 0, cooldown_until: None })
    }

    /// Deletes a shared key.
    pub async fn delete_key(
        &self,
        admin: &Admin,
        origin: &Origin,
        provider_id: Uuid,
        key_id: Uuid,
    ) -> DomainResult<()> {
        let db = &self.db;
        let _actor = admin.actor();
        let p = provider_repo::find(db, provider_id).await?.ok_or(DomainError::NotFound)?;
        if provider_repo::delete_key(db, provider_id, key_id).await? == 0 {
            return Err(DomainError::NotFound);
        }
        match Vault::delete_secret(db, ORG_OWNER, key_id).await {
            Ok(()) | Err(crate::vault::store::StoreError::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
        audit::record(
            db,
            origin,
            "provider.key_delete",
            &format!("provider:{}", p.name),
            serde_json::json!({ "key_id": key_id }),
        )
        .await?;
        self.providers.reload().await?;
        Ok(())
    }

    /// Calls the provider's model list with its shared keys ("test connection" and "discover").
    pub async fn discover_models(
        &self,
        admin: &Admin,
        origin: &Origin,
        id: Uuid,
    ) -> DomainResult<Result<Vec<String>, String>> {
        let db = &self.db;
        let actor = admin.actor();
        let row = provider_repo::find(db, id).await?.ok_or(DomainError::NotFound)?;
        let entry =
            self.providers.entries().into_iter().find(|e| e.id == Some(id)).ok_or(DomainError::NotFound)?;
        let outcome = self.providers.discover(actor, &entry).await;
        audit::record(
            db,
            origin,
            "provider.test",
            &format!("provider:{}", row.name),
            serde_json::json!({ "ok": outcome.is_ok(), "models": outcome.as_ref().map(Vec::len).unwrap_or(0) }),
        )
        .await?;
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests;
