//! Typed settings: embedded defaults -> config file -> `ARBOR_*` environment -> `*_FILE` -> flags.
//!
//! The defaults are `config/default.toml`, compiled in, so the documented file and the code can
//! never disagree. Every struct denies unknown fields; errors name the key and where it came from.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::providers::{Format, Serialized, Toml};
use figment::value::{Dict, Value};
use figment::{Figment, Provider};
use serde::{Deserialize, Serialize};

mod load;
pub use load::*;

/// The configuration file that documents and defines every default.
pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");

/// Environment variables starting with `ARBOR_` that are not configuration keys.
const NON_CONFIG_VARS: &[&str] =
    &["ARBOR_CONFIG", "ARBOR_TEST_DATABASE_URL", "ARBOR_MASTER_KEY_FILE", "ARBOR_MASTER_KEY"];

/// The keys of one `[llm.providers.<name>]` table, for environment variables.
const PROVIDER_FIELDS: &[&str] = &["kind", "base_url", "api_key", "models", "label"];

/// Short environment names documented for convenience, mapped to their key.
const ENV_ALIASES: &[(&str, &str)] = &[("DATABASE_URL", "database.url")];

/// The whole effective configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Directory for the database, index, blobs and key files.
    pub data_dir: PathBuf,
    /// HTTP listener settings.
    pub server: ServerConfig,
    /// Database connection settings.
    pub database: DatabaseConfig,
    /// Logging settings.
    pub log: LogConfig,
    /// Live event stream settings.
    pub events: EventsConfig,
    /// Browser sessions and local accounts.
    pub auth: AuthConfig,
    /// Outgoing mail.
    pub smtp: SmtpConfig,
    /// Sign-in with an OpenID Connect provider.
    pub oidc: OidcConfig,
    /// LLM providers and streaming.
    pub llm: LlmConfig,
    /// The agent: tools, approvals and their limits.
    pub agent: AgentConfig,
    /// Attached files.
    pub files: FilesConfig,
    /// Chat search.
    pub search: SearchConfig,
    /// What one member may hold at once.
    pub limits: LimitsConfig,
    /// Several instances: the event bus and shared limits.
    pub bus: BusConfig,
    /// Prometheus metrics.
    pub metrics: MetricsConfig,
    /// Share links.
    pub sharing: SharingConfig,
}

/// Share links of sessions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SharingConfig {
    /// Whether members may make links that open without signing in (off: links open only for
    /// people signed in to this instance).
    pub public_links: bool,
}

/// Prometheus metrics at `/metrics`.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Serve them at all.
    pub enabled: bool,
    /// Bearer token a scraper sends on the main address.
    pub token: String,
    /// A separate address serving only `/metrics`, without a token; empty means the main one.
    pub bind: String,
}

impl std::fmt::Debug for MetricsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsConfig")
            .field("enabled", &self.enabled)
            .field("token", &if self.token.is_empty() { "" } else { "****" })
            .field("bind", &self.bind)
            .finish()
    }
}

impl MetricsConfig {
    /// The separate address, when one is set.
    pub fn separate_bind(&self) -> Option<SocketAddr> {
        self.bind.trim().parse().ok()
    }
}

/// What one member may hold at once (SECURITY.md 54).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Answers being written at once.
    pub runs_per_member: usize,
    /// Live event streams at once.
    pub streams_per_member: usize,
    /// Uploads being received at once.
    pub uploads_per_member: usize,
    /// Largest file an import accepts, MiB.
    pub import_max_mb: u64,
    /// Largest document in an import (the JSON an export holds), MiB: it is read whole.
    pub import_document_mb: u64,
}

/// Chat search.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// How often new messages are committed to the index, milliseconds.
    pub commit_interval_ms: u64,
    /// Where the index lives (blank: `index` in the data directory).
    pub index_dir: String,
}

impl SearchConfig {
    /// The index directory for a data directory.
    pub fn dir(&self, data_dir: &std::path::Path) -> PathBuf {
        if self.index_dir.trim().is_empty() {
            data_dir.join("index")
        } else {
            PathBuf::from(self.index_dir.trim())
        }
    }
}

/// Attached files.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FilesConfig {
    /// Largest file accepted, MiB.
    pub max_file_mb: u64,
    /// What one person's files may take in all, MiB.
    pub user_quota_mb: u64,
    /// Whether images are shrunk on upload.
    pub resize_images: bool,
    /// The longest side of a shrunk image, pixels.
    pub max_image_side: u32,
    /// Hours an upload that was never sent is kept.
    pub upload_ttl_hours: u64,
    /// Where attached files are kept (blank: `blobs` in the data directory).
    pub blob_dir: String,
}

impl FilesConfig {
    /// The blob folder for a data directory.
    pub fn blob_dir(&self, data_dir: &std::path::Path) -> PathBuf {
        if self.blob_dir.trim().is_empty() {
            data_dir.join("blobs")
        } else {
            PathBuf::from(self.blob_dir.trim())
        }
    }
}

/// The agent: tools, approvals and their limits.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Most model calls one run may make before it stops.
    pub max_iterations: u32,
    /// The least-asking approval mode anyone may use: `suggest`, `auto-edit` or `full-auto`.
    pub loosest_approval_mode: String,
    /// Longest a shell command may run, seconds.
    pub shell_timeout_secs: u64,
    /// Output kept per stream of a shell command, bytes.
    pub shell_max_output_bytes: usize,
    /// Data segment each process of a shell command may use, MiB.
    pub shell_memory_mb: u64,
    /// Processes a shell command may run at once (itself and everything it starts).
    pub shell_max_processes: u32,
    /// Largest file a shell command may write, MiB.
    pub shell_max_file_mb: u64,
    /// CPU time each process of a shell command may use, seconds.
    pub shell_cpu_secs: u64,
    /// Size of the sandbox's private /tmp, MiB.
    pub shell_tmp_mb: u64,
    /// Whether shell commands may run without bubblewrap when it is missing (never unasked).
    pub allow_unsandboxed_shell: bool,
    /// Longest a web fetch may take, seconds.
    pub fetch_timeout_secs: u64,
    /// Most bytes a web fetch downloads.
    pub fetch_max_bytes: usize,
    /// Address ranges `web_fetch` may reach although they are private (CIDR).
    pub fetch_allow: Vec<String>,
    /// Most bytes `read_file` returns.
    pub read_max_bytes: usize,
    /// Most bytes `write_file` writes.
    pub write_max_bytes: usize,
    /// Longest an MCP tool call may take, seconds.
    pub mcp_call_timeout_secs: u64,
    /// Longest an MCP server may take to start and answer, seconds.
    pub mcp_start_timeout_secs: u64,
    /// The binary that renders system prompt templates in a child process (empty: this one).
    pub prompt_renderer: String,
}

/// LLM providers and streaming.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    /// Connect timeout per provider call, seconds.
    pub connect_timeout_secs: u64,
    /// Longest silence in a stream, seconds.
    pub idle_timeout_secs: u64,
    /// Attempts before the first token.
    pub max_attempts: u32,
    /// Longest wait between attempts, seconds.
    pub max_retry_wait_secs: u64,
    /// `provider/model` used when nothing else picks one.
    pub default_model: String,
    /// `provider/model` of the image model behind the agent's `generate_image` tool (empty:
    /// the first image model the member may use).
    pub image_model: String,
    /// Extra curated model entries.
    pub models_file: String,
    /// Cache lifetime of discovered model lists, seconds.
    pub discovery_ttl_secs: u64,
    /// Offer a local Ollama automatically.
    pub detect_local_ollama: bool,
    /// Where that Ollama is looked for (`http://127.0.0.1:11434`).
    pub local_ollama_url: String,
    /// Delta coalescing window, milliseconds.
    pub coalesce_ms: u64,
    /// Partial-text flush interval, milliseconds.
    pub flush_ms: u64,
    /// Whether the model proposes session titles (workspaces may turn it off too).
    pub infer_titles: bool,
    /// Seconds a shared key rests after a 429.
    pub key_cooldown_secs: u64,
    /// CIDR ranges members may use in their own base URLs despite the SSRF guard.
    pub member_base_url_allow: Vec<String>,
    /// Shared providers by name.
    pub providers: BTreeMap<String, ProviderConfig>,
}

/// Which API a configured provider speaks.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI's own API.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini with an API key.
    Gemini,
    /// Any server with OpenAI's Chat Completions API (Ollama, vLLM, llama.cpp, OpenRouter, Groq).
    #[serde(rename = "openai_compatible")]
    OpenAiCompatible,
}

/// One shared provider.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// Wire format and defaults.
    pub kind: ProviderKind,
    /// API base URL; empty for the provider's public one.
    #[serde(default)]
    pub base_url: String,
    /// The shared key (secret).
    #[serde(default)]
    pub api_key: String,
    /// Offered models; empty to discover them.
    #[serde(default)]
    pub models: Vec<String>,
    /// Name shown in the UI.
    #[serde(default)]
    pub label: String,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key", &if self.api_key.is_empty() { "" } else { "****" })
            .field("models", &self.models)
            .field("label", &self.label)
            .finish()
    }
}

/// HTTP listener settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Listen address.
    pub bind: SocketAddr,
    /// Public base URL; empty means derived from `bind`.
    pub public_url: String,
    /// Worker threads; 0 means one per core.
    pub workers: usize,
    /// Grace period for in-flight requests at shutdown.
    pub shutdown_timeout_secs: u64,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
}

/// Database connection settings.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// Connection URL; empty means SQLite in the data directory.
    pub url: String,
    /// Pool size; 0 lets [`DatabaseConfig::pool_size`] choose.
    pub max_connections: u32,
    /// Seconds to wait for a pooled connection.
    pub connect_timeout_secs: u64,
    /// SQLite lock wait in milliseconds.
    pub sqlite_busy_timeout_ms: u64,
}

impl DatabaseConfig {
    /// The pool size to open: the configured one, or when it is 0, two connections per CPU core
    /// (4 to 16) for SQLite and 16 for PostgreSQL. SQLite runs one writer at a time and every
    /// connection holds its own page cache and prepared statements, so connections beyond what
    /// the cores can use only cost memory (a 2-core soak: about 29 MiB less RSS with 4 than with
    /// 16, at the same throughput).
    pub fn pool_size(&self, sqlite: bool, cores: usize) -> u32 {
        match self.max_connections {
            0 if sqlite => u32::try_from(cores.saturating_mul(2)).unwrap_or(u32::MAX).clamp(4, 16),
            0 => 16,
            configured => configured,
        }
    }
}

impl std::fmt::Debug for DatabaseConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseConfig")
            .field("url", &redact_url(&self.url))
            .field("max_connections", &self.max_connections)
            .field("connect_timeout_secs", &self.connect_timeout_secs)
            .field("sqlite_busy_timeout_ms", &self.sqlite_busy_timeout_ms)
            .finish()
    }
}

/// Logging settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// EnvFilter directive.
    pub level: String,
    /// Output format.
    pub format: LogFormat,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human readable.
    Pretty,
    /// One JSON object per line.
    Json,
}

/// Several instances on one database: the bus between them.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BusConfig {
    /// The Redis URL (empty: one instance, the in-process bus).
    pub url: String,
    /// The installation's channel and key prefix in Redis.
    pub prefix: String,
    /// Seconds an instance's lease lasts without renewal.
    pub lease_secs: u64,
}

impl std::fmt::Debug for BusConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password.
        f.debug_struct("BusConfig")
            .field("url", &if self.url.is_empty() { "" } else { "[set]" })
            .field("prefix", &self.prefix)
            .field("lease_secs", &self.lease_secs)
            .finish()
    }
}

/// Live event stream settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EventsConfig {
    /// Seconds between SSE keep-alive comments.
    pub keepalive_secs: u64,
    /// Per-session broadcast buffer.
    pub channel_capacity: usize,
}

/// Browser sessions and local accounts.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Idle timeout in minutes.
    pub session_idle_minutes: i64,
    /// Absolute lifetime in hours.
    pub session_max_hours: i64,
    /// Whether local accounts are enabled.
    pub local_accounts: Toggle,
    /// Whether self sign-up is allowed.
    pub allow_signup: bool,
    /// Shortest accepted password.
    pub min_password_length: usize,
    /// Sign-in attempts per minute per client address.
    pub login_attempts_per_ip_per_minute: u32,
    /// Sign-in attempts per minute per account.
    pub login_attempts_per_account_per_minute: u32,
    /// Invitation link lifetime in hours.
    pub invitation_valid_hours: i64,
    /// Proxies whose `X-Forwarded-For` is trusted.
    pub trusted_proxies: Vec<std::net::IpAddr>,
}

/// Outgoing mail settings.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SmtpConfig {
    /// Mail server host; empty turns mail off.
    pub host: String,
    /// Mail server port.
    pub port: u16,
    /// Transport security.
    pub security: SmtpSecurity,
    /// Login name.
    pub username: String,
    /// Login password (secret).
    pub password: String,
    /// Sender address.
    pub from: String,
    /// Delivery timeout.
    pub timeout_secs: u64,
}

impl std::fmt::Debug for SmtpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("security", &self.security)
            .field("username", &self.username)
            .field("password", &if self.password.is_empty() { "" } else { "****" })
            .field("from", &self.from)
            .field("timeout_secs", &self.timeout_secs)
            .finish()
    }
}

/// Sign-in with an OpenID Connect provider.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    /// Issuer URL; empty turns OIDC off.
    pub issuer: String,
    /// Client id.
    pub client_id: String,
    /// Client secret (secret).
    pub client_secret: String,
    /// Name on the sign-in button.
    pub display_name: String,
    /// Requested scopes.
    pub scopes: Vec<String>,
    /// Accepted ID token algorithms.
    pub signing_algs: Vec<String>,
    /// Claim holding group names.
    pub groups_claim: String,
    /// Groups whose members are admins.
    pub admin_groups: Vec<String>,
    /// Groups allowed to sign in (empty: all).
    pub allowed_groups: Vec<String>,
    /// Email domains allowed to sign in (empty: all).
    pub allowed_email_domains: Vec<String>,
    /// Link by verified email to an existing account.
    pub link_verified_email: bool,
}

impl std::fmt::Debug for OidcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcConfig")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &if self.client_secret.is_empty() { "" } else { "****" })
            .field("display_name", &self.display_name)
            .field("groups_claim", &self.groups_claim)
            .field("admin_groups", &self.admin_groups)
            .field("allowed_groups", &self.allowed_groups)
            .field("allowed_email_domains", &self.allowed_email_domains)
            .field("link_verified_email", &self.link_verified_email)
            .finish()
    }
}

/// How Arbor talks to the mail server.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SmtpSecurity {
    /// Upgrade a plain connection with STARTTLS (required).
    Starttls,
    /// TLS from the first byte.
    Tls,
    /// No encryption.
    None,
}

/// A feature switch with an automatic default.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Toggle {
    /// Decided by other settings.
    Auto,
    /// Always on.
    On,
    /// Always off.
    Off,
}

#[cfg(test)]
mod tests;
