//! What the agent remembers: one text per member (every workspace) and one per workspace of
//! theirs. The agent reads it with `memory_read` and writes it with `memory_write` (a write is
//! decided by the approval rules like a file change); the member reads and edits it in
//! Settings → Memory; system prompt templates see it as `memory.member` and `memory.workspace`.

use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{OfferedTool, tool_digest};
use crate::domain::accounts::Actor;
use crate::domain::agent::Agent;
use crate::domain::sessions::{self, Workspace, prompt::MemoryVars};
use crate::domain::{DomainError, DomainResult};
use crate::providers::types::ToolSpec;
use crate::storage::repos::memories as repo;
use crate::tools::{Risk, ToolOutput};

/// Longest memory, in characters, per scope.
pub const MAX_MEMORY_CHARS: usize = 20_000;

/// Whose memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The member's own, for every workspace.
    Member,
    /// One workspace's.
    Workspace(Uuid),
}

impl Scope {
    fn key(self) -> String {
        match self {
            Scope::Member => "member".into(),
            Scope::Workspace(id) => id.to_string(),
        }
    }
}

/// A workspace and its memory, for the settings page.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceMemory {
    /// The workspace.
    pub workspace: Workspace,
    /// What is remembered there.
    pub content: String,
}

/// Everything the member's agent remembers.
#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    /// Their own memory.
    pub member: String,
    /// Each workspace's.
    pub workspaces: Vec<WorkspaceMemory>,
}

/// Checks that a workspace scope is the actor's.
async fn checked(sessions: &sessions::Sessions, actor: &Actor, scope: Scope) -> DomainResult<Scope> {
    if let Scope::Workspace(id) = scope {
        sessions.view_workspace(actor, id).await?;
    }
    Ok(scope)
}

impl Agent {
    /// The actor's memory in `scope` (empty when nothing was written).
    pub async fn read_memory(&self, actor: &Actor, scope: Scope) -> DomainResult<String> {
        let scope = checked(&self.sessions, actor, scope).await?;
        Ok(repo::get(&self.db, actor.user_id(), &scope.key()).await?.unwrap_or_default())
    }

    /// Replaces the actor's memory in `scope`.
    pub async fn write_memory(&self, actor: &Actor, scope: Scope, content: &str) -> DomainResult<()> {
        let content = content.trim();
        if content.chars().count() > MAX_MEMORY_CHARS {
            return Err(DomainError::Invalid(format!(
                "A memory holds at most {MAX_MEMORY_CHARS} characters; this one has {}.",
                content.chars().count()
            )));
        }
        let scope = checked(&self.sessions, actor, scope).await?;
        repo::put(&self.db, actor.user_id(), &scope.key(), content).await?;
        Ok(())
    }

    /// The member's memory and every workspace's, for Settings → Memory.
    pub async fn memory_overview(&self, actor: &Actor) -> DomainResult<Overview> {
        let stored = repo::all(&self.db, actor.user_id()).await?;
        let find =
            |key: &str| stored.iter().find(|(k, _)| k == key).map(|(_, c)| c.clone()).unwrap_or_default();
        let workspaces = self
            .sessions
            .list_workspaces(actor)
            .await?
            .into_iter()
            .map(|w| WorkspaceMemory { content: find(&w.id.to_string()), workspace: w })
            .collect();
        Ok(Overview { member: find("member"), workspaces })
    }

    /// The memories a system prompt of this workspace sees (empty when unreadable: a prompt still
    /// renders).
    pub async fn memory_prompt_vars(&self, actor: &Actor, workspace_id: Uuid) -> MemoryVars {
        let get = |scope: Scope| async move {
            repo::get(&self.db, actor.user_id(), &scope.key()).await.ok().flatten()
        };
        MemoryVars {
            member: get(Scope::Member).await.unwrap_or_default(),
            workspace: get(Scope::Workspace(workspace_id)).await.unwrap_or_default(),
        }
    }

    /// Runs `memory_read` or `memory_write` for a session in `workspace_id`.
    pub async fn run_memory_tool(
        &self,
        actor: &Actor,
        workspace_id: Uuid,
        name: &str,
        args: &Value,
    ) -> ToolOutput {
        let scope = match args.get("scope").and_then(Value::as_str) {
            Some("member") => Scope::Member,
            Some("workspace") => Scope::Workspace(workspace_id),
            _ => return ToolOutput::error("\"scope\" must be \"member\" or \"workspace\"."),
        };
        let current = match self.read_memory(actor, scope).await {
            Ok(c) => c,
            Err(e) => return ToolOutput::error(format!("The memory could not be read: {e}")),
        };
        if name == "memory_read" {
            return ToolOutput::ok(if current.is_empty() {
                "(nothing remembered yet)".to_string()
            } else {
                current
            });
        }
        let Some(content) = args.get("content").and_then(Value::as_str) else {
            return ToolOutput::error("memory_write needs \"content\".");
        };
        let new = match args.get("mode").and_then(Value::as_str).unwrap_or("append") {
            "replace" => content.to_string(),
            "append" if current.is_empty() => content.to_string(),
            "append" => format!("{current}\n{content}"),
            _ => return ToolOutput::error("\"mode\" must be \"append\" or \"replace\"."),
        };
        match self.write_memory(actor, scope, &new).await {
            Ok(()) => ToolOutput::ok(format!(
                "Remembered ({} characters in this memory now).",
                new.trim().chars().count()
            )),
            Err(DomainError::Invalid(m)) => ToolOutput::error(m),
            Err(e) => ToolOutput::error(format!("The memory could not be written: {e}")),
        }
    }
}

fn scope_property() -> Value {
    json!({
        "type": "string",
        "enum": ["member", "workspace"],
        "description": "member: about the user, for every workspace; workspace: about this workspace's work."
    })
}

/// `memory_read` (never asks) and `memory_write` (decided like a file change).
pub fn tools() -> Vec<OfferedTool> {
    let read = ToolSpec {
        name: "memory_read".into(),
        description: "Read what you remember about the user (scope member) or about this workspace (scope \
workspace). Both are also in your instructions when the user's prompt includes them."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {"scope": scope_property()},
            "required": ["scope"],
            "additionalProperties": false
        })
        .into(),
    };
    let write = ToolSpec {
        name: "memory_write".into(),
        description: "Remember something for later conversations: facts, preferences and decisions worth \
keeping, in short notes. mode append (default) adds a line; replace rewrites the whole memory (read it \
first). At most 20,000 characters per scope."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "scope": scope_property(),
                "content": {"type": "string", "description": "The note to add, or the whole new memory."},
                "mode": {"type": "string", "enum": ["append", "replace"], "description": "Default append."}
            },
            "required": ["scope", "content"],
            "additionalProperties": false
        })
        .into(),
    };
    [(read, Risk::Read), (write, Risk::Write)]
        .into_iter()
        .map(|(spec, risk)| OfferedTool { digest: tool_digest(&spec), spec, risk, mcp: None })
        .collect()
}
