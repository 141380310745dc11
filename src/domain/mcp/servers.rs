//! MCP server configuration (the admin console's MCP tab): instance-wide servers started by a
//! command (stdio) or reached at a streamable-HTTP URL. Their environment variables or headers
//! are stored encrypted as one secret and shown by name only. Running them is the agent's job.

use super::McpServers;
use std::collections::BTreeMap;

use chrono::Utc;
use serde::Serialize;
use uuid::Uuid;

use crate::domain::accounts::Actor;
use crate::domain::audit::{self, Origin};
use crate::domain::authz::Admin;
use crate::domain::validate::valid_name;
use crate::domain::{DomainError, DomainResult};
use crate::model::mcp::McpServerRecord;
use crate::secret::Secret;
use crate::storage::Db;
use crate::storage::repos::mcp_servers as repo;
use crate::vault::Vault;
use crate::vault::store::{NewSecret, ORG_OWNER, SecretKind, StoreError, Use};

/// How Arbor talks to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// A child process speaking over stdin/stdout.
    Stdio,
    /// Streamable HTTP at a URL.
    Http,
}

impl Transport {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        }
    }

    /// Parses the stored or submitted spelling.
    pub fn parse(s: &str) -> Option<Transport> {
        match s {
            "stdio" => Some(Transport::Stdio),
            "http" => Some(Transport::Http),
            _ => None,
        }
    }
}

/// A server as the console shows it: secret names, never values.
#[derive(Debug, Clone, Serialize)]
pub struct ServerView {
    /// Row id.
    pub id: Uuid,
    /// Name; tools appear as `name__tool`.
    pub name: String,
    /// stdio | http.
    pub transport: String,
    /// The command (stdio).
    pub command: String,
    /// Its arguments, one per entry (stdio).
    pub args: Vec<String>,
    /// The arguments one per line, for the form.
    pub args_text: String,
    /// The URL (http).
    pub url: String,
    /// Whether the agent may use it.
    pub enabled: bool,
    /// Names of the stored environment variables (stdio) or headers (http).
    pub secret_names: Vec<String>,
    /// The names, comma-separated, for the form.
    pub secret_names_text: String,
}

fn view(m: McpServerRecord) -> ServerView {
    let args: Vec<String> = serde_json::from_str(&m.args).unwrap_or_default();
    let secret_names: Vec<String> = serde_json::from_str(&m.secret_names).unwrap_or_default();
    ServerView {
        id: m.id,
        name: m.name,
        transport: m.transport,
        command: m.command,
        args_text: args.join("\n"),
        args,
        url: m.url,
        enabled: m.enabled,
        secret_names_text: secret_names.join(", "),
        secret_names,
    }
}

impl McpServers {
    /// The instance-wide servers, by name (admins only).
    pub async fn list(&self, admin: &Admin) -> DomainResult<Vec<ServerView>> {
        let _actor = admin.actor();
        Ok(repo::list_instance(&self.db).await?.into_iter().map(view).collect())
    }

    /// Adds an instance-wide server (admins only).
    pub async fn create(
        &self,
        admin: &Admin,
        origin: &Origin,
        form: &ServerForm,
    ) -> DomainResult<ServerView> {
        let db = &self.db;
        let _actor = admin.actor();
        let checked = check(form)?;
        let name = form.name.trim();
        if name_taken(db, name, None).await? {
            return Err(DomainError::Conflict(format!("There is already an MCP server named \"{name}\".")));
        }
        let (row, names) = self.insert_server(None, form, checked).await?;
        let detail = serde_json::json!({
            "transport": row.transport, "command": row.command, "url": row.url, "secrets": names
        });
        audit::record(db, origin, "mcp.create", &format!("mcp:{name}"), detail).await?;
        Ok(view(row))
    }

    /// Saves a server's settings; blank secrets keep the stored ones (admins only).
    pub async fn update(
        &self,
        admin: &Admin,
        origin: &Origin,
        id: Uuid,
        form: &ServerForm,
    ) -> DomainResult<ServerView> {
        let db = &self.db;
        let _actor = admin.actor();
        let existing = instance_server(db, id).await?;
        let (transport, args, secrets) = check(form)?;
        let name = form.name.trim();
        if name_taken(db, name, Some(id)).await? {
            return Err(DomainError::Conflict(format!("There is already an MCP server named \"{name}\".")));
        }
        let (secret_id, names, changed) = store_secrets(
            db,
            &self.vault,
            ORG_OWNER,
            id,
            existing.secret_id,
            &secrets,
            form.clear_secrets.is_some(),
        )
        .await?;
        let mut row = existing.clone();
        row.name = name.to_string();
        row.transport = transport.as_str().to_string();
        row.command =
            if transport == Transport::Stdio { form.command.trim().to_string() } else { String::new() };
        row.args = serde_json::to_string(&args).unwrap_or_else(|_| "[]".into());
        row.url = if transport == Transport::Http { form.url.trim().to_string() } else { String::new() };
        row.enabled = form.enabled.is_some();
        row.secret_id = secret_id;
        if changed {
            row.secret_names = serde_json::to_string(&names).unwrap_or_else(|_| "[]".into());
        }
        row.updated_at = Utc::now();
        let saved = repo::update(db, row).await?;
        audit::record(
            db,
            origin,
            "mcp.update",
            &format!("mcp:{}", existing.name),
            serde_json::json!({
                "name": saved.name,
                "transport": saved.transport,
                "command": saved.command,
                "url": saved.url,
                "enabled": saved.enabled,
                "secrets_changed": changed,
            }),
        )
        .await?;
        Ok(view(saved))
    }

    /// Deletes a server and its stored secrets (admins only).
    pub async fn delete(&self, admin: &Admin, origin: &Origin, id: Uuid) -> DomainResult<()> {
        let db = &self.db;
        let _actor = admin.actor();
        let existing = instance_server(db, id).await?;
        self.remove(ORG_OWNER, &existing).await?;
        audit::record(db, origin, "mcp.delete", &format!("mcp:{}", existing.name), serde_json::json!({}))
            .await
    }

    /// The actor's own (HTTP) servers.
    pub async fn list_own(&self, actor: &Actor) -> DomainResult<Vec<OwnServer>> {
        Ok(repo::list_owned(&self.db, actor.user_id())
            .await?
            .into_iter()
            .map(|m| OwnServer {
                id: m.id,
                name: m.name,
                url: m.url,
                header_names: serde_json::from_str(&m.secret_names).unwrap_or_default(),
                group_id: m.group_id,
                workspace_id: m.workspace_id,
            })
            .collect())
    }

    /// Adds a server of the actor's own: streamable HTTP only, its URL checked like every URL a
    /// member gives (no private addresses unless `allowed`), here and again on every connect.
    pub async fn create_own(
        &self,
        actor: &Actor,
        origin: &Origin,
        allowed: &crate::netguard::AllowedRanges,
        form: &ServerForm,
    ) -> DomainResult<OwnServer> {
        let db = &self.db;
        let form = ServerForm { transport: "http".into(), enabled: Some("on".into()), ..form.clone() };
        let checked = check(&form)?;
        let url = form.url.trim();
        crate::netguard::check_url(url, allowed).await.map_err(|e| DomainError::Invalid(e.to_string()))?;
        let name = form.name.trim();
        let own = self.list_own(actor).await?;
        if own.len() >= MAX_OWN_SERVERS {
            return Err(DomainError::Invalid(format!("You can keep at most {MAX_OWN_SERVERS} MCP servers.")));
        }
        // Tool names must stay unique: no name of the instance's servers or of your others.
        if own.iter().any(|s| s.name == name) || name_taken(db, name, None).await? {
            return Err(DomainError::Conflict(format!("There is already an MCP server named \"{name}\".")));
        }
        let (row, names) = self.insert_server(Some(actor.user_id()), &form, checked).await?;
        audit::record(
            db,
            origin,
            "mcp.own.create",
            &format!("mcp:{name}"),
            serde_json::json!({ "url": url, "headers": names }),
        )
        .await?;
        Ok(OwnServer {
            id: row.id,
            name: row.name,
            url: row.url,
            header_names: names,
            group_id: None,
            workspace_id: None,
        })
    }

    /// Deletes one of the actor's own servers and its stored headers.
    pub async fn delete_own(&self, actor: &Actor, origin: &Origin, id: Uuid) -> DomainResult<()> {
        let db = &self.db;
        let existing = repo::find_owned(db, actor.user_id(), id).await?.ok_or(DomainError::NotFound)?;
        self.remove(actor.user_id(), &existing).await?;
        audit::record(db, origin, "mcp.own.delete", &format!("mcp:{}", existing.name), serde_json::json!({}))
            .await
    }
}

impl McpServers {
    /// Stores a new server as the checked form describes it, its secrets in `owner`'s vault
    /// (the instance's when none); returns its row and the names of its secrets.
    async fn insert_server(
        &self,
        owner: Option<Uuid>,
        form: &ServerForm,
        (transport, args, secrets): (Transport, Vec<String>, BTreeMap<String, String>),
    ) -> DomainResult<(McpServerRecord, Vec<String>)> {
        let db = &self.db;
        let id = Uuid::now_v7();
        let vault_owner = owner.unwrap_or(ORG_OWNER);
        let (secret_id, names, _) =
            store_secrets(db, &self.vault, vault_owner, id, None, &secrets, false).await?;
        let now = Utc::now();
        let record = McpServerRecord {
            id,
            owner_id: owner,
            name: form.name.trim().to_string(),
            transport: transport.as_str().to_string(),
            command: if transport == Transport::Stdio {
                form.command.trim().to_string()
            } else {
                String::new()
            },
            args: serde_json::to_string(&args).unwrap_or_else(|_| "[]".into()),
            url: if transport == Transport::Http { form.url.trim().to_string() } else { String::new() },
            enabled: form.enabled.is_some(),
            secret_id,
            secret_names: serde_json::to_string(&names).unwrap_or_else(|_| "[]".into()),
            group_id: None,
            workspace_id: None,
            created_at: now,
            updated_at: now,
        };
        Ok((repo::insert(db, record).await?, names))
    }

    /// Deletes a server and its stored secrets (kept in `owner`'s vault).
    async fn remove(&self, owner: Uuid, server: &McpServerRecord) -> DomainResult<()> {
        if let Some(secret) = server.secret_id {
            match Vault::delete_secret(&self.db, owner, secret).await {
                Ok(()) | Err(StoreError::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(repo::delete(&self.db, server.id).await?)
    }
}

/// What the server form sends.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(default)]
pub struct ServerForm {
    /// Name.
    pub name: String,
    /// stdio | http.
    pub transport: String,
    /// Command (stdio).
    pub command: String,
    /// Arguments, one per line (stdio).
    pub args: String,
    /// URL (http).
    pub url: String,
    /// "on" when enabled.
    pub enabled: Option<String>,
    /// `NAME=value` lines: environment (stdio) or headers (http); blank keeps the stored ones.
    pub secrets: String,
    /// "on" to remove the stored ones.
    pub clear_secrets: Option<String>,
}

/// Parses `NAME=value` lines (or `Name: value` for headers) into a map.
fn parse_secrets(text: &str, transport: Transport) -> DomainResult<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (name, value) = match transport {
            Transport::Http => line.split_once(':').or_else(|| line.split_once('=')),
            Transport::Stdio => line.split_once('='),
        }
        .ok_or_else(|| {
            DomainError::Invalid(match transport {
                Transport::Stdio => "Write each variable as NAME=value, one per line.".into(),
                Transport::Http => "Write each header as Name: value, one per line.".into(),
            })
        })?;
        let name = name.trim();
        let valid = !name.is_empty()
            && name.len() <= 128
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(DomainError::Invalid(format!(
                "\"{}\" is not a valid name.",
                name.chars().take(40).collect::<String>()
            )));
        }
        if value.chars().any(|c| c.is_control()) {
            return Err(DomainError::Invalid(format!("The value of {name} has control characters.")));
        }
        out.insert(name.to_string(), value.trim().to_string());
    }
    Ok(out)
}

/// Checks the form; returns the parsed transport, arguments and secrets.
fn check(form: &ServerForm) -> DomainResult<(Transport, Vec<String>, BTreeMap<String, String>)> {
    let name = form.name.trim();
    if !valid_name(name) || !crate::tools::mcp::valid_server_name(name) {
        return Err(DomainError::Invalid(
            "The name may use lower-case letters, digits, - and single _ (at most 32, not at the end), like \"files\"."
                .into(),
        ));
    }
    let transport = Transport::parse(form.transport.trim())
        .ok_or_else(|| DomainError::Invalid("Pick stdio or HTTP.".into()))?;
    let args: Vec<String> =
        form.args.lines().map(str::trim).filter(|a| !a.is_empty()).map(str::to_string).collect();
    match transport {
        Transport::Stdio => {
            let command = form.command.trim();
            if command.is_empty() || command.chars().any(char::is_control) || command.len() > 1024 {
                return Err(DomainError::Invalid("A stdio server needs the command that starts it.".into()));
            }
            if args.len() > 64 || args.iter().any(|a| a.len() > 4096) {
                return Err(DomainError::Invalid("Too many or too long arguments.".into()));
            }
        }
        Transport::Http => {
            crate::domain::validate::check_http_url(form.url.trim(), "URL", "a header")?;
        }
    }
    Ok((transport, args, parse_secrets(&form.secrets, transport)?))
}

async fn name_taken(db: &Db, name: &str, except: Option<Uuid>) -> DomainResult<bool> {
    let found = repo::find_instance_by_name(db, name).await?;
    Ok(found.is_some_and(|f| Some(f.id) != except))
}

/// Stores the secrets of server `id` in `owner`'s vault: replaces them, clears them, or keeps them.
#[allow(clippy::too_many_arguments)]
async fn store_secrets(
    db: &Db,
    vault: &Vault,
    owner: Uuid,
    id: Uuid,
    current: Option<Uuid>,
    secrets: &BTreeMap<String, String>,
    clear: bool,
) -> DomainResult<(Option<Uuid>, Vec<String>, bool)> {
    if clear {
        if let Some(old) = current {
            match Vault::delete_secret(db, owner, old).await {
                Ok(()) | Err(StoreError::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
        return Ok((None, Vec::new(), true));
    }
    if secrets.is_empty() {
        return Ok((current, Vec::new(), false));
    }
    let json = serde_json::to_string(secrets).map_err(|e| DomainError::Invalid(e.to_string()))?;
    let what = NewSecret {
        kind: SecretKind::McpSecret,
        label: "mcp",
        provider: &format!("mcp:{id}"),
        base_url: None,
    };
    let meta = vault.put_secret(db, owner, current, what, &Secret::new(json)).await?;
    Ok((Some(meta.id), secrets.keys().cloned().collect(), true))
}

/// An instance-wide server by id.
async fn instance_server(db: &Db, id: Uuid) -> DomainResult<McpServerRecord> {
    repo::find_instance(db, id).await?.ok_or(DomainError::NotFound)
}

/// A member's own server as their settings list it.
#[derive(Debug, Clone, Serialize)]
pub struct OwnServer {
    /// Row id.
    pub id: Uuid,
    /// Name; tools appear as `name__tool`.
    pub name: String,
    /// The URL.
    pub url: String,
    /// Names of the stored headers.
    pub header_names: Vec<String>,
    /// The group it is shared with, if any.
    pub group_id: Option<Uuid>,
    /// The workspace it is attached to, if any.
    pub workspace_id: Option<Uuid>,
}

/// Most servers of their own one member keeps.
pub const MAX_OWN_SERVERS: usize = 20;

/// The stored environment or headers of a server, decrypted for starting or calling it.
pub async fn secrets_for(
    db: &Db,
    vault: &Vault,
    id: Uuid,
    by: Option<Uuid>,
) -> DomainResult<BTreeMap<String, String>> {
    let row = repo::find(db, id).await?.ok_or(DomainError::NotFound)?;
    let Some(secret) = row.secret_id else { return Ok(BTreeMap::new()) };
    let owner = row.owner_id.unwrap_or(ORG_OWNER);
    let value = vault.reveal(db, owner, secret, Use { by, purpose: "mcp" }).await?;
    serde_json::from_str(value.expose())
        .map_err(|_| DomainError::Storage(crate::storage::StorageError::Corrupt("mcp secrets".into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_name_value_lines() {
        let env = parse_secrets("TOKEN=abc\n\n  DEBUG = 1 ", Transport::Stdio).expect("parses");
        assert_eq!(env.get("TOKEN").map(String::as_str), Some("abc"));
        assert_eq!(env.get("DEBUG").map(String::as_str), Some("1"));
        let headers = parse_secrets("Authorization: Bearer x=y", Transport::Http).expect("parses");
        assert_eq!(headers.get("Authorization").map(String::as_str), Some("Bearer x=y"));
        assert!(parse_secrets("no separator", Transport::Stdio).is_err());
        assert!(parse_secrets("BAD NAME=1", Transport::Stdio).is_err());
        assert!(parse_secrets("A=\u{7}", Transport::Stdio).is_err());
    }

    #[test]
    fn forms_are_checked() {
        let stdio = ServerForm {
            name: "files".into(),
            transport: "stdio".into(),
            command: "npx".into(),
            args: "-y\n@modelcontextprotocol/server-filesystem\n/data".into(),
            ..ServerForm::default()
        };
        let (t, args, _) = check(&stdio).expect("valid");
        assert_eq!((t, args.len()), (Transport::Stdio, 3));
        assert!(check(&ServerForm { name: "a__b".into(), ..stdio.clone() }).is_err(), "double underscore");
        assert!(check(&ServerForm { command: " ".into(), ..stdio.clone() }).is_err());
        let http =
            ServerForm { transport: "http".into(), url: "http://10.0.0.5:3001/mcp".into(), ..stdio.clone() };
        assert!(check(&http).is_ok(), "admins may use private addresses");
        assert!(check(&ServerForm { url: "ftp://x".into(), ..http.clone() }).is_err());
        assert!(check(&ServerForm { url: "https://u:p@x/mcp".into(), ..http.clone() }).is_err());
        assert!(check(&ServerForm { transport: "smoke".into(), ..http }).is_err());
    }
}
