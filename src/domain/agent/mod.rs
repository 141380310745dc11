//! The agent's rules: which tools a run offers, which calls run unasked, what an "always"
//! rule covers, and the session's folders and todo list the tools work on.
//!
//! The loop that runs the calls between model calls lives with the run engine (`runs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::config::AgentConfig;
use crate::domain::{DomainError, DomainResult};
use crate::model::agent::ToolCall;
use crate::netguard::AllowedRanges;
use crate::providers::types::ToolSpec;
use crate::storage::Db;
use crate::storage::repos::agent as repo;
use crate::tools::{self, FetchLimits, ProcessLimits, Risk, Root, Sandbox, ShellLimits, ToolEnv, ToolOutput};

mod images;
pub mod memory;
mod todos;
pub use images::*;
pub use todos::*;

mod host_roots;
pub use host_roots::*;
mod service;
pub use service::Agent;

/// How much a session's agent may do without asking, from most asking to least.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ApprovalMode {
    /// Only reading runs unasked.
    Suggest,
    /// Reading and writing inside the exposed folders run unasked.
    AutoEdit,
    /// Everything runs unasked; shell commands only inside the sandbox.
    FullAuto,
}

impl ApprovalMode {
    /// Every mode, most asking first.
    pub const ALL: [ApprovalMode; 3] =
        [ApprovalMode::Suggest, ApprovalMode::AutoEdit, ApprovalMode::FullAuto];

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<ApprovalMode> {
        Some(match s.trim() {
            "suggest" => ApprovalMode::Suggest,
            "auto-edit" => ApprovalMode::AutoEdit,
            "full-auto" => ApprovalMode::FullAuto,
            _ => return None,
        })
    }

    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Suggest => "suggest",
            ApprovalMode::AutoEdit => "auto-edit",
            ApprovalMode::FullAuto => "full-auto",
        }
    }

    /// What it means, for forms.
    pub fn label(self) -> &'static str {
        match self {
            ApprovalMode::Suggest => "Suggest: ask before anything but reading files",
            ApprovalMode::AutoEdit => {
                "Auto-edit: read and write files unasked, ask before commands and the web"
            }
            ApprovalMode::FullAuto => "Full auto: everything unasked (commands only in the sandbox)",
        }
    }
}

/// The mode that applies: the session's, else the workspace's, never looser than `loosest`.
pub fn effective_mode(session: Option<&str>, workspace: &str, loosest: ApprovalMode) -> ApprovalMode {
    let chosen = session
        .and_then(ApprovalMode::parse)
        .or_else(|| ApprovalMode::parse(workspace))
        .unwrap_or(ApprovalMode::Suggest);
    chosen.min(loosest)
}

/// What a person decided about a proposed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Yes,
    /// Refuse it and end the run.
    No,
    /// Refuse it, tell the model, go on.
    NoContinue,
    /// Run it and store a rule so that such calls run unasked.
    Always,
    /// Ask the model why first.
    Explain,
}

impl Decision {
    /// Parses a form value.
    pub fn parse(s: &str) -> Option<Decision> {
        Some(match s {
            "yes" => Decision::Yes,
            "no" => Decision::No,
            "no_continue" => Decision::NoContinue,
            "always" => Decision::Always,
            "explain" => Decision::Explain,
            _ => return None,
        })
    }

    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Yes => "yes",
            Decision::No => "no",
            Decision::NoContinue => "no_continue",
            Decision::Always => "always",
            Decision::Explain => "explain",
        }
    }
}

/// Where an "always" rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleScope {
    /// This session only.
    Session,
    /// Every session of the workspace.
    Workspace,
}

impl RuleScope {
    /// Parses a form value (blank: session).
    pub fn parse(s: &str) -> Option<RuleScope> {
        match s {
            "" | "session" => Some(RuleScope::Session),
            "workspace" => Some(RuleScope::Workspace),
            _ => None,
        }
    }

    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleScope::Session => "session",
            RuleScope::Workspace => "workspace",
        }
    }
}

/// Whether a call of this risk waits for a person under `mode`. Shell commands run unasked only
/// in full-auto and only inside the sandbox; no text allowlist ever lets one through.
pub fn needs_confirmation(risk: Risk, mode: ApprovalMode, sandboxed: bool) -> bool {
    match risk {
        Risk::Read => false,
        Risk::Write => mode < ApprovalMode::AutoEdit,
        Risk::Exec => !(mode == ApprovalMode::FullAuto && sandboxed),
        Risk::Network => mode < ApprovalMode::FullAuto,
    }
}

/// Hex SHA-256 of the parts, each followed by a zero byte.
fn digest(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// What an approval is bound to: the tool and its exact (canonical) arguments.
pub fn call_hash(tool: &str, canonical_args: &str) -> String {
    digest(&[tool, canonical_args])
}

/// What the model is told when an approved call is not the call that was approved.
pub const CALL_NOT_COVERED: &str = "This call is not the one that was approved (its tool, the \
     tool's description or schema, or its arguments differ); it was not run.";

/// Whether the approval recorded on `row` covers the call about to run: it is bound to the tool's
/// fingerprint as the dialog showed it and to the exact canonical arguments it was given for.
pub fn approval_covers(row: &ToolCall, name: &str, arguments: &Value, offered: Option<&OfferedTool>) -> bool {
    row.tool_name == name
        && row.args_hash == call_hash(name, &tools::canonical_arguments(arguments))
        && offered.is_some_and(|tool| tool.digest == row.tool_digest)
}

/// A fingerprint of a tool as offered: a changed description or schema makes a new one, and
/// "always" rules stored under the old one no longer apply.
pub fn tool_digest(spec: &ToolSpec) -> String {
    digest(&[&spec.name, &spec.description, &tools::canonical_arguments(&spec.parameters)])
}

/// The longest tool description a dialog shows (a server's text is its own to size).
const DIALOG_DESCRIPTION_BYTES: usize = 2_000;

/// A tool's description as the confirmation dialog shows it: capped, on a character boundary.
pub fn dialog_description(description: &str) -> &str {
    &description[..description.floor_char_boundary(DIALOG_DESCRIPTION_BYTES)]
}

/// What an "always" rule is matched against: the path for file tools, the URL for
/// `web_fetch`, the canonical arguments otherwise.
pub fn rule_subject(tool: &str, args: &Value) -> String {
    let field = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
    match tool {
        "read_file" | "write_file" | "edit_file" | "list_directory" => field("path"),
        "web_fetch" => field("url"),
        _ => None,
    }
    .unwrap_or_else(|| tools::canonical_arguments(args))
}

/// Escapes a subject so that it matches only itself as a pattern.
fn literal(subject: &str) -> String {
    let mut out = String::with_capacity(subject.len());
    for c in subject.chars() {
        if matches!(c, '*' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The pattern an "always" decision stores: file tools any path, `web_fetch` anything on the
/// same origin, everything else (commands above all) only these exact arguments.
pub fn default_pattern(tool: &str, args: &Value) -> String {
    match tool {
        "read_file" | "write_file" | "edit_file" | "list_directory" | "write_todo" | GENERATE_IMAGE => {
            "*".into()
        }
        "web_fetch" => {
            let url = rule_subject(tool, args);
            match reqwest::Url::parse(&url) {
                // The origin, port included: "always" for one port is not a grant for another.
                Ok(u) if u.host_str().is_some() => {
                    format!("{}*", literal(&format!("{}/", u.origin().ascii_serialization())))
                }
                _ => literal(&url),
            }
        }
        _ => literal(&rule_subject(tool, args)),
    }
}

/// Matches a pattern where `*` stands for any run of characters and `\` makes the next
/// character literal.
pub fn pattern_matches(pattern: &str, subject: &str) -> bool {
    // Tokens: Some(c) a literal character, None a star.
    let mut tokens: Vec<Option<char>> = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => tokens.push(Some(chars.next().unwrap_or('\\'))),
            '*' => tokens.push(None),
            c => tokens.push(Some(c)),
        }
    }
    let text: Vec<char> = subject.chars().collect();
    // Classic wildcard matching with one backtrack point.
    let (mut t, mut p) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match tokens.get(p) {
            Some(Some(c)) if *c == text[t] => {
                t += 1;
                p += 1;
            }
            Some(None) => {
                star = Some((p, t));
                p += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    tokens[p..].iter().all(Option::is_none)
}

/// A tool offered to the model, with what the approval policy needs.
#[derive(Debug, Clone)]
pub struct OfferedTool {
    /// Name, description and schema as sent.
    pub spec: ToolSpec,
    /// How risky its calls are.
    pub risk: Risk,
    /// Fingerprint of the spec (see [`tool_digest`]).
    pub digest: String,
    /// For an MCP tool: its server's id and the server's own name for it.
    pub mcp: Option<(Uuid, String)>,
}

/// The `search_chat` tool: the user's own past messages.
pub fn search_chat_spec() -> ToolSpec {
    ToolSpec {
        name: "search_chat".into(),
        description: "Search the user's own past conversations (all sessions). Words are all required; \
\"quoted phrases\" match exactly; -word excludes; filters: role:user|assistant|tool, after:YYYY-MM-DD, \
before:YYYY-MM-DD, has:attachment. Returns matching snippets with their session and date."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "How many hits (default 10)."}
            },
            "required": ["query"],
            "additionalProperties": false
        }).into(),
    }
}

/// The `recall` tool: a file the user can see, by its hash.
pub fn recall_spec() -> ToolSpec {
    ToolSpec {
        name: "recall".into(),
        description: "Read a file attached in the user's conversations, by its 64-character hash (as in \
/blobs/<hash> links). Text files come back as text; other files are described."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {"hash": {"type": "string", "description": "The file's SHA-512/256 hash, 64 hex characters."}},
            "required": ["hash"],
            "additionalProperties": false
        }).into(),
    }
}

/// The `read_tool_result` tool: an earlier tool result of this session whole, in slices (the
/// context sends long old results cut; see `runs::context`).
pub fn read_tool_result_spec() -> ToolSpec {
    ToolSpec {
        name: "read_tool_result".into(),
        description: "Read the whole result of an earlier tool call in this conversation, by its call id \
(long earlier results are shown cut in your context). Returns up to 40,000 characters from `offset`."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "call_id": {"type": "string", "description": "The id of the tool call whose result to read."},
                "offset": {"type": "integer", "minimum": 0, "description": "Characters to skip (default 0)."}
            },
            "required": ["call_id"],
            "additionalProperties": false
        })
        .into(),
    }
}

/// The three, as offered tools (reading only).
pub fn memory_tools() -> Vec<OfferedTool> {
    [search_chat_spec(), recall_spec(), read_tool_result_spec()]
        .into_iter()
        .map(|spec| OfferedTool { digest: tool_digest(&spec), spec, risk: Risk::Read, mcp: None })
        .collect()
}

/// The `subagent` tool: a nested run with its own instructions and some of the tools.
pub fn subagent_spec() -> ToolSpec {
    ToolSpec {
        name: "subagent".into(),
        description: "Hand a self-contained task to a sub-agent: it works on its own (with its own \
instructions and the tools you list, by default all of yours) and its final answer comes back as \
this call's result. Use it for focused research or edits whose details you do not need to see."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "What the sub-agent should do and answer."},
                "system_prompt": {"type": "string", "description": "Its instructions (optional)."},
                "tools": {"type": "array", "items": {"type": "string"}, "description": "Names of the tools it may use (optional; default all of yours)."}
            },
            "required": ["task"],
            "additionalProperties": false
        }).into(),
    }
}

/// The tools a run offers: the file and shell tools only when folders are exposed (and the
/// shell only when it can run), the web and the todo list always.
pub fn toolbox(has_roots: bool, shell_available: bool) -> Vec<OfferedTool> {
    let mut out: Vec<OfferedTool> = tools::builtins()
        .into_iter()
        .filter(|t| match t.risk {
            Risk::Network => true,
            Risk::Exec => has_roots && shell_available,
            Risk::Read | Risk::Write => has_roots,
        })
        .map(|t| OfferedTool { digest: tool_digest(&t.spec), spec: t.spec, risk: t.risk, mcp: None })
        .collect();
    let todo = write_todo_spec();
    out.push(OfferedTool { digest: tool_digest(&todo), spec: todo, risk: Risk::Read, mcp: None });
    let sub = subagent_spec();
    // Its calls are judged by the tools it would get (see `subagent`).
    out.push(OfferedTool { digest: tool_digest(&sub), spec: sub, risk: Risk::Exec, mcp: None });
    out
}

/// The agent's settings, resolved once at start-up.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// Most model calls per run.
    pub max_iterations: u32,
    /// The least-asking mode allowed.
    pub loosest: ApprovalMode,
    /// Shell time limit.
    pub shell_timeout: Duration,
    /// Shell output kept per stream.
    pub shell_max_output: usize,
    /// bubblewrap, or none.
    pub sandbox: Sandbox,
    /// Whether the shell may run without the sandbox (always asking).
    pub allow_unsandboxed_shell: bool,
    /// web_fetch limits.
    pub fetch_timeout: Duration,
    /// web_fetch download cap.
    pub fetch_max_bytes: usize,
    /// Private ranges web_fetch may reach.
    pub fetch_allowed: AllowedRanges,
    /// read_file cap.
    pub read_max_bytes: usize,
    /// write_file cap.
    pub write_max_bytes: usize,
    /// Paths no tool process may read (data dir, config file, key file).
    pub hidden_paths: Vec<PathBuf>,
    /// Resource limits of each shell command.
    pub shell_limits: ProcessLimits,
}

/// One mebibyte, for the limits configured in MiB.
const MIB: u64 = 1024 * 1024;

impl AgentSettings {
    /// Settings from the configuration and the detected sandbox.
    pub fn new(config: &AgentConfig, sandbox: Sandbox, hidden_paths: Vec<PathBuf>) -> AgentSettings {
        AgentSettings {
            max_iterations: config.max_iterations.max(1),
            loosest: ApprovalMode::parse(&config.loosest_approval_mode).unwrap_or(ApprovalMode::Suggest),
            shell_timeout: Duration::from_secs(config.shell_timeout_secs.max(1)),
            shell_max_output: config.shell_max_output_bytes.max(1024),
            sandbox,
            allow_unsandboxed_shell: config.allow_unsandboxed_shell,
            fetch_timeout: Duration::from_secs(config.fetch_timeout_secs.max(1)),
            fetch_max_bytes: config.fetch_max_bytes.max(1024),
            fetch_allowed: AllowedRanges::parse(&config.fetch_allow.join(" ")).unwrap_or_default(),
            read_max_bytes: config.read_max_bytes.max(1024),
            write_max_bytes: config.write_max_bytes.max(1024),
            hidden_paths,
            shell_limits: ProcessLimits {
                memory_bytes: config.shell_memory_mb.max(16).saturating_mul(MIB),
                processes: config.shell_max_processes.max(4),
                file_bytes: config.shell_max_file_mb.max(1).saturating_mul(MIB),
                cpu_secs: config.shell_cpu_secs.max(1),
                tmp_bytes: config.shell_tmp_mb.max(1).saturating_mul(MIB),
            },
        }
    }

    /// Conservative settings (no sandbox, so no shell) for engines built without a configuration.
    pub fn defaults() -> AgentSettings {
        AgentSettings {
            max_iterations: 50,
            loosest: ApprovalMode::FullAuto,
            shell_timeout: Duration::from_secs(60),
            shell_max_output: 64 * 1024,
            sandbox: Sandbox::Unsandboxed,
            allow_unsandboxed_shell: false,
            fetch_timeout: Duration::from_secs(20),
            fetch_max_bytes: 2 * 1024 * 1024,
            fetch_allowed: AllowedRanges::none(),
            read_max_bytes: 256 * 1024,
            write_max_bytes: 2 * 1024 * 1024,
            hidden_paths: Vec::new(),
            shell_limits: ProcessLimits::default(),
        }
    }

    /// Whether shell commands run inside the sandbox.
    pub fn sandboxed(&self) -> bool {
        matches!(self.sandbox, Sandbox::Bubblewrap(_))
    }

    /// Whether the shell tool is offered at all.
    pub fn shell_available(&self) -> bool {
        self.sandboxed() || self.allow_unsandboxed_shell
    }

    /// The tool environment for a session's folders.
    pub fn env(&self, roots: Vec<Root>) -> ToolEnv {
        ToolEnv {
            roots,
            read_max_bytes: self.read_max_bytes,
            write_max_bytes: self.write_max_bytes,
            shell: ShellLimits {
                timeout: self.shell_timeout,
                max_output_bytes: self.shell_max_output,
                sandbox: self.sandbox.clone(),
                hidden_paths: self.hidden_paths.clone(),
                limits: self.shell_limits.clone(),
            },
            fetch: FetchLimits {
                timeout: self.fetch_timeout,
                max_bytes: self.fetch_max_bytes,
                max_text_chars: 100_000,
                allowed: self.fetch_allowed.clone(),
            },
        }
    }
}

/// The session's exposed folders as tool roots. Workspace folders are created when missing;
/// one that resolves outside the workspace folder (a symlink made by a command, say) is left
/// out. An absolute folder counts only while it lies inside a host folder an admin allowed
/// for the workspace (`allowed`, resolved paths), checked again on every use.
pub fn session_roots(workspace_dir: &Path, exposed: &[String], allowed: &[String]) -> Vec<Root> {
    if exposed.is_empty() {
        return Vec::new();
    }
    let mut roots = Vec::new();
    for name in exposed.iter().filter(|n| n.starts_with('/')) {
        match std::fs::canonicalize(name) {
            Ok(real) if real.is_dir() && allowed.iter().any(|a| real.starts_with(a)) => {
                roots.push(Root { name: name.clone(), path: real })
            }
            _ => tracing::warn!(root = %name, "a host folder is not (or no longer) allowed; left out"),
        }
    }
    let exposed: Vec<&String> = exposed.iter().filter(|n| !n.starts_with('/')).collect();
    if exposed.is_empty() {
        return roots;
    }
    if let Err(e) = std::fs::create_dir_all(workspace_dir) {
        tracing::warn!(error = %e, "could not create a workspace folder");
        return Vec::new();
    }
    let Ok(base) = workspace_dir.canonicalize() else { return roots };
    for name in exposed {
        let path = base.join(name);
        if let Err(e) = std::fs::create_dir_all(&path) {
            tracing::warn!(error = %e, root = %name, "could not create an exposed folder");
            continue;
        }
        match path.canonicalize() {
            Ok(real) if real.starts_with(&base) => roots.push(Root { name: name.clone(), path: real }),
            _ => tracing::warn!(root = %name, "an exposed folder resolves outside its workspace; left out"),
        }
    }
    roots
}

/// An "always" rule as the settings page lists it.
#[derive(Debug, Clone, Serialize)]
pub struct RuleView {
    /// Id.
    pub id: Uuid,
    /// session or workspace.
    pub scope: String,
    /// The session or workspace it applies to.
    pub scope_id: Uuid,
    /// Tool name.
    pub tool: String,
    /// What it matches.
    pub pattern: String,
    /// When it was made, for display.
    pub created: String,
}

impl Agent {
    /// The actor's "always" rules.
    pub async fn list_rules(&self, user_id: Uuid) -> DomainResult<Vec<RuleView>> {
        Ok(repo::list_rules(&self.db, user_id)
            .await?
            .into_iter()
            .map(|r| RuleView {
                id: r.id,
                scope: r.scope,
                scope_id: r.scope_id,
                tool: r.tool_name,
                pattern: r.pattern,
                created: r.created_at.format("%Y-%m-%d %H:%M UTC").to_string(),
            })
            .collect())
    }

    /// Revokes one of the actor's rules.
    pub async fn revoke_rule(&self, user_id: Uuid, id: Uuid) -> DomainResult<()> {
        if repo::delete_rule(&self.db, user_id, id).await? { Ok(()) } else { Err(DomainError::NotFound) }
    }

    /// Whether one of the user's rules lets this call run unasked: same tool, same fingerprint
    /// of the tool, pattern matching.
    pub async fn rule_allows(
        &self,
        user_id: Uuid,
        session_id: Uuid,
        workspace_id: Uuid,
        tool: &OfferedTool,
        args: &Value,
    ) -> DomainResult<bool> {
        let rules = repo::rules_for(&self.db, user_id, session_id, workspace_id, &tool.spec.name).await?;
        let subject = rule_subject(&tool.spec.name, args);
        Ok(rules.iter().any(|r| r.tool_digest == tool.digest && pattern_matches(&r.pattern, &subject)))
    }
}

#[cfg(test)]
mod tests;
