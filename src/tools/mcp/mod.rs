//! The MCP client: tools of Model Context Protocol servers, offered to the agent as `server__tool`.
//!
//! [`McpManager`] starts a server on first use (a child process over stdio, or a streamable HTTP
//! connection), keeps it, restarts it when it died or its configuration changed, and stops every
//! server on shutdown. Only `tools/list` and `tools/call` are used: resources and prompts are never
//! read, and results reach the model as text only (images and other binary content are described,
//! never interpreted).
//!
//! What a server gets is kept to the minimum: a child process starts with an empty environment plus
//! the variables configured for it and `PATH`, `HOME`, `LANG` (so Arbor's master key and settings never
//! reach it); a member's HTTP server passes the SSRF guard on every connect and is pinned to the
//! checked addresses. Header and environment values are secrets: they are redacted from every message
//! and log line this module writes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig, ClientRequest,
    ContentBlock, Implementation, ListToolsRequest, PaginatedRequestParams, ResourceContents, ServerResult,
    Tool,
};
use rmcp::service::{ClientInitializeError, NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::{StreamableHttpClientTransportConfig, StreamableHttpError};
use rmcp::transport::{DynamicTransportError, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use uuid::Uuid;

use crate::netguard::{self, AllowedRanges, GuardError};

mod diagnostics;
use diagnostics::*;

mod exchange;
use exchange::*;

mod instances;
use instances::*;

/// The most text a tool result returns to the model.
pub const MAX_RESULT_BYTES: usize = 256 * 1024;

/// The longest a server name may be, so `server__tool` keeps room for the tool within 64 characters.
pub const MAX_SERVER_NAME_LEN: usize = 32;

/// The longest a qualified tool name may be (the limit the LLM providers share).
const MAX_QUALIFIED_LEN: usize = 64;

/// Tool descriptions beyond this are cut: a server should not be able to fill the model's context.
const MAX_DESCRIPTION_CHARS: usize = 8 * 1024;

/// At most this many `tools/list` pages are read (a server could hand out cursors forever).
const MAX_LIST_PAGES: usize = 50;

/// A child's stderr line is cut here before it is logged.
const MAX_STDERR_LINE: usize = 2000;

/// Values shorter than this are not redacted: replacing "1" or "true" everywhere would garble logs,
/// and such values are not secrets.
const MIN_REDACTED_LEN: usize = 6;

/// How long a stop may take: rmcp closes stdin, waits 3 s, sends SIGTERM, waits 3 s, then kills.
const STOP_TIMEOUT: Duration = Duration::from_secs(8);

/// The only variables a child gets besides its configured ones and HOME.
const CHILD_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
const CHILD_LANG: &str = "C.UTF-8";

/// Headers the MCP transport sets itself; a configured header must not override them.
const RESERVED_HEADERS: [&str; 8] = [
    "accept",
    "content-type",
    "content-length",
    "host",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "transfer-encoding",
];

/// How to reach a server.
#[derive(Clone)]
pub enum McpTransport {
    /// A child process over stdio.
    Stdio {
        /// The program (an absolute path, or a name looked up on the child's PATH).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Decrypted secrets: the only variables the child gets besides `PATH=/usr/local/bin:/usr/bin:/bin`,
        /// `HOME` and `LANG=C.UTF-8` (a configured `PATH`, `HOME` or `LANG` replaces the default).
        env: BTreeMap<String, String>,
        /// Working directory, also the child's HOME; without it both are a private directory per
        /// server under the system temp dir.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint, e.g. `https://mcp.example.com/mcp`.
        url: String,
        /// Headers sent with every request (usually authorization; the values are secrets).
        headers: BTreeMap<String, String>,
        /// `Some` for member-configured servers: the URL passes [`netguard::check_url`] on every connect
        /// and the connection is pinned to the checked addresses. `None` for admin-configured servers,
        /// which may use private addresses.
        guard: Option<AllowedRanges>,
    },
}

impl fmt::Debug for McpTransport {
    /// Names only: environment and header values are secrets, and a URL's path or query may hold a key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpTransport::Stdio { command, args, env, cwd } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", &args.len())
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("cwd", cwd)
                .finish(),
            McpTransport::Http { url, headers, guard } => f
                .debug_struct("Http")
                .field("url", &url_origin(url))
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .field("guard", guard)
                .finish(),
        }
    }
}

/// One server's configuration, identified by a stable key (its database id) and a name.
#[derive(Debug, Clone)]
pub struct McpServerConfig {
    /// The stable identity (the database id): one running instance per key.
    pub key: Uuid,
    /// The prefix of its tools' qualified names; see [`valid_server_name`].
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// A hash of the configuration, computed by the caller: when it changes, the server is restarted.
    pub fingerprint: String,
}

/// A tool a server advertises, as the agent offers it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// The server's name.
    pub server: String,
    /// The server's own tool name (what [`McpManager::call`] takes).
    pub name: String,
    /// `{server}__{name}`, sanitized to `[A-Za-z0-9_-]{1,64}`: the name the model sees.
    pub qualified: String,
    /// The server's description (or title), cut at 8 KiB.
    pub description: String,
    /// The JSON schema of the arguments.
    pub input_schema: Value,
    /// Whether the server says the tool does not modify anything (`readOnlyHint`); a hint only.
    pub read_only: bool,
}

/// A tool call's result, as text for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCallResult {
    /// Text content joined, other content described in one line each, cut at [`MAX_RESULT_BYTES`].
    pub text: String,
    /// The server's `isError`.
    pub is_error: bool,
}

/// Why an MCP operation failed; every message is safe to show to the user (no secret values).
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The configuration cannot be used (name, command, header, URL).
    #[error("The MCP server \"{server}\" is misconfigured: {reason}")]
    Config {
        /// The server's name.
        server: String,
        /// What is wrong.
        reason: String,
    },
    /// The SSRF guard refused the server's URL.
    #[error("The MCP server \"{server}\" cannot be reached: {error}")]
    Blocked {
        /// The server's name.
        server: String,
        /// The guard's reason.
        error: GuardError,
    },
    /// The server could not be started or connected to.
    #[error("The MCP server \"{server}\" could not be started: {reason}")]
    Start {
        /// The server's name.
        server: String,
        /// What went wrong, redacted.
        reason: String,
    },
    /// No answer in time.
    #[error("The MCP server \"{server}\" did not answer within {}.", seconds(.timeout))]
    Timeout {
        /// The server's name.
        server: String,
        /// The limit that was reached.
        timeout: Duration,
    },
    /// The connection was lost after the request had been sent.
    #[error("The MCP server \"{server}\" stopped before answering; it will be restarted on its next use.")]
    Disconnected {
        /// The server's name.
        server: String,
    },
    /// The server does not advertise this tool.
    #[error("The MCP server \"{server}\" has no tool named \"{tool}\".")]
    UnknownTool {
        /// The server's name.
        server: String,
        /// The requested name (cut to 100 characters).
        tool: String,
    },
    /// The arguments are not a JSON object.
    #[error("The arguments of \"{tool}\" must be a JSON object.")]
    InvalidArguments {
        /// The requested tool.
        tool: String,
    },
    /// The server answered with an error.
    #[error("The MCP server \"{server}\" returned an error: {message}")]
    Server {
        /// The server's name.
        server: String,
        /// The server's message, on one line, redacted and cut.
        message: String,
    },
    /// The server answered something Arbor cannot use.
    #[error("The MCP server \"{server}\" sent an unusable answer: {reason}")]
    Protocol {
        /// The server's name.
        server: String,
        /// What was wrong.
        reason: String,
    },
    /// [`McpManager::shutdown`] has run.
    #[error("MCP servers are not available: Arbor is shutting down.")]
    ShutDown,
}

fn seconds(d: &Duration) -> String {
    if d.subsec_millis() == 0 { format!("{} s", d.as_secs()) } else { format!("{:.1} s", d.as_secs_f64()) }
}

/// Whether `name` may name a server: 1 to 32 of `[A-Za-z0-9_-]`, without `__` and not ending in `_`,
/// so `{name}__{tool}` always splits back at the first `__`.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SERVER_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !name.contains("__")
        && !name.ends_with('_')
}

/// `{server}__{tool}` with every character outside `[A-Za-z0-9_-]` replaced by `_`, cut to 64.
pub fn qualified_name(server: &str, tool: &str) -> String {
    let mut qualified: String = format!("{server}__{tool}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    // Only ASCII is left, so any byte index is a character boundary.
    qualified.truncate(MAX_QUALIFIED_LEN);
    qualified
}

/// Starts servers on first use, keeps them, restarts a crashed one on its next use, and stops them all
/// on shutdown.
#[derive(Clone)]
pub struct McpManager {
    inner: Arc<Inner>,
}

struct Inner {
    call_timeout: Duration,
    start_timeout: Duration,
    /// One slot per server key; its async mutex makes concurrent first uses start the server once.
    slots: Mutex<HashMap<Uuid, Arc<Slot>>>,
    /// What `running()` reports, readable without waiting for a slot.
    live: Mutex<HashMap<Uuid, LiveEntry>>,
    stopped: AtomicBool,
    generation: AtomicU64,
}

type Slot = tokio::sync::Mutex<Option<Instance>>;

struct LiveEntry {
    name: String,
    generation: u64,
    peer: Peer<RoleClient>,
}

/// One running connection to a server.
struct Instance {
    key: Uuid,
    generation: u64,
    name: String,
    fingerprint: String,
    http: bool,
    service: RunningService<RoleClient, Handler>,
    /// Set by the server's `notifications/tools/list_changed`.
    tools_changed: Arc<AtomicBool>,
    tools: Option<Arc<Vec<McpTool>>>,
    /// The child's process group (stdio only), killed after the child is stopped to catch grandchildren.
    pgid: Option<u32>,
    redactor: Arc<Redactor>,
}

impl McpManager {
    /// A manager with no server running; `call_timeout` bounds each request, `start_timeout` each start.
    pub fn new(call_timeout: Duration, start_timeout: Duration) -> McpManager {
        McpManager {
            inner: Arc::new(Inner {
                call_timeout,
                start_timeout,
                slots: Mutex::new(HashMap::new()),
                live: Mutex::new(HashMap::new()),
                stopped: AtomicBool::new(false),
                generation: AtomicU64::new(0),
            }),
        }
    }

    /// The server's tools (starting it if needed; cached per running instance; refreshed when the server
    /// sends tools/list_changed or when `refresh` is true).
    pub async fn tools(&self, server: &McpServerConfig, refresh: bool) -> Result<Vec<McpTool>, McpError> {
        validate(server)?;
        let slot = self.inner.slot(server.key);
        let mut state = slot.lock().await;
        let tools = self.inner.tools_locked(&mut state, server, refresh).await?;
        Ok(tools.as_ref().clone())
    }

    /// Calls the server's tool `tool` (its own name, [`McpTool::name`]) and returns the result as text.
    ///
    /// A server found dead is restarted first. If the connection fails before the request could be
    /// sent, the server is restarted and the call retried once; once it may have been sent, the error is
    /// reported instead (a tool may have side effects). Dropping the future cancels the request.
    pub async fn call(
        &self,
        server: &McpServerConfig,
        tool: &str,
        arguments: Value,
    ) -> Result<McpCallResult, McpError> {
        let arguments = match arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            _ => return Err(McpError::InvalidArguments { tool: cut(tool, 100) }),
        };
        validate(server)?;
        let slot = self.inner.slot(server.key);
        let mut retried = false;
        loop {
            let (peer, generation, http, redactor) = {
                let mut state = slot.lock().await;
                let tools = self.inner.tools_locked(&mut state, server, false).await?;
                if !tools.iter().any(|t| t.name == tool) {
                    return Err(McpError::UnknownTool { server: server.name.clone(), tool: cut(tool, 100) });
                }
                let Some(instance) = state.as_ref() else { return Err(McpError::ShutDown) };
                (
                    instance.service.peer().clone(),
                    instance.generation,
                    instance.http,
                    instance.redactor.clone(),
                )
            };
            let mut params = CallToolRequestParams::new(tool.to_string());
            if let Some(arguments) = &arguments {
                params = params.with_arguments(arguments.clone());
            }
            // Dropping call_tool_once's future (the timeout) sends notifications/cancelled.
            let outcome = tokio::time::timeout(self.inner.call_timeout, peer.call_tool_once(params)).await;
            match outcome {
                Err(_) => {
                    tracing::info!(server = %server.name, tool, "MCP tool call timed out");
                    return Err(McpError::Timeout {
                        server: server.name.clone(),
                        timeout: self.inner.call_timeout,
                    });
                }
                Ok(Ok(CallToolResponse::Complete(result))) => {
                    let result = render_result(&result, &redactor);
                    tracing::debug!(server = %server.name, tool, is_error = result.is_error, "MCP tool call finished");
                    return Ok(result);
                }
                Ok(Ok(_)) => {
                    return Err(McpError::Protocol {
                        server: server.name.clone(),
                        reason: "it asked for user input or started a background task, which Arbor does not support"
                            .to_string(),
                    });
                }
                Ok(Err(error)) if !retried && never_sent(&error, http) => {
                    tracing::warn!(
                        server = %server.name,
                        error = %redactor.describe(&error),
                        "MCP server connection failed before the call was sent; restarting it"
                    );
                    retried = true;
                    self.inner.discard(&slot, generation).await;
                }
                Ok(Err(error)) => {
                    return Err(call_error(&server.name, error, self.inner.call_timeout, &redactor));
                }
            }
        }
    }

    /// Stops one server if it is running (e.g. after it was deleted or disabled).
    pub async fn stop(&self, key: Uuid) {
        let slot = self.inner.slots.lock().unwrap_or_else(PoisonError::into_inner).get(&key).cloned();
        if let Some(slot) = slot {
            let instance = slot.lock().await.take();
            if let Some(instance) = instance {
                self.inner.stop_instance(instance).await;
            }
        }
    }

    /// Stops every running server (child processes killed and reaped); later uses fail with
    /// [`McpError::ShutDown`].
    pub async fn shutdown(&self) {
        self.inner.stopped.store(true, Ordering::SeqCst);
        let slots: Vec<Arc<Slot>> =
            self.inner.slots.lock().unwrap_or_else(PoisonError::into_inner).values().cloned().collect();
        let stops = slots.into_iter().map(|slot| async move {
            let instance = slot.lock().await.take();
            if let Some(instance) = instance {
                self.inner.stop_instance(instance).await;
            }
        });
        futures_util::future::join_all(stops).await;
    }

    /// Names of servers currently running (for tests/diagnostics), sorted.
    pub fn running(&self) -> Vec<String> {
        let live = self.inner.live.lock().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<String> =
            live.values().filter(|e| !e.peer.is_transport_closed()).map(|e| e.name.clone()).collect();
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests;
