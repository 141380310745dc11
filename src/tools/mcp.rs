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

impl Inner {
    fn slot(&self, key: Uuid) -> Arc<Slot> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner).entry(key).or_default().clone()
    }

    /// The tools of the slot's instance (started if needed); a failed listing restarts the server once.
    async fn tools_locked(
        &self,
        state: &mut Option<Instance>,
        server: &McpServerConfig,
        refresh: bool,
    ) -> Result<Arc<Vec<McpTool>>, McpError> {
        let mut retried = false;
        loop {
            let instance = self.ensure(state, server).await?;
            if !refresh
                && !instance.tools_changed.load(Ordering::SeqCst)
                && let Some(tools) = &instance.tools
            {
                return Ok(tools.clone());
            }
            // Cleared before listing, so a change announced during the listing is not lost.
            instance.tools_changed.store(false, Ordering::SeqCst);
            match list_tools(instance.service.peer(), &server.name, self.call_timeout, &instance.redactor)
                .await
            {
                Ok(tools) => {
                    let tools = Arc::new(tools);
                    instance.tools = Some(tools.clone());
                    return Ok(tools);
                }
                // Listing has no side effects, so any connection failure may be retried once.
                Err(ListError::Connection(error)) if !retried => {
                    tracing::warn!(
                        server = %server.name,
                        error = %instance.redactor.describe(&error),
                        "listing MCP tools failed; restarting the server"
                    );
                    retried = true;
                    if let Some(old) = state.take() {
                        self.stop_instance(old).await;
                    }
                }
                Err(error) => {
                    instance.tools_changed.store(true, Ordering::SeqCst);
                    return Err(match error {
                        ListError::Connection(error) => {
                            call_error(&server.name, error, self.call_timeout, &instance.redactor)
                        }
                        ListError::Failed(error) => error,
                    });
                }
            }
        }
    }

    /// The running instance for `server`: started if there is none, restarted if it died or its
    /// fingerprint changed.
    async fn ensure<'a>(
        &self,
        state: &'a mut Option<Instance>,
        server: &McpServerConfig,
    ) -> Result<&'a mut Instance, McpError> {
        let restart = state.as_ref().and_then(|instance| {
            if instance.fingerprint != server.fingerprint {
                Some("its configuration changed")
            } else if instance.service.peer().is_transport_closed() {
                Some("it stopped")
            } else {
                None
            }
        });
        if let Some(reason) = restart {
            tracing::info!(server = %server.name, "restarting the MCP server: {reason}");
            if let Some(old) = state.take() {
                self.stop_instance(old).await;
            }
        }
        if let Some(instance) = state {
            return Ok(instance);
        }
        // Checked under the slot's lock: shutdown takes every slot's lock after setting the flag, so no
        // server starts behind its back.
        if self.stopped.load(Ordering::SeqCst) {
            return Err(McpError::ShutDown);
        }
        let instance = self.start(server).await?;
        self.live.lock().unwrap_or_else(PoisonError::into_inner).insert(
            server.key,
            LiveEntry {
                name: instance.name.clone(),
                generation: instance.generation,
                peer: instance.service.peer().clone(),
            },
        );
        Ok(state.insert(instance))
    }

    /// Stops the slot's instance if it is still the one of `generation` (another caller may already
    /// have restarted it).
    async fn discard(&self, slot: &Slot, generation: u64) {
        let mut state = slot.lock().await;
        if state.as_ref().is_some_and(|i| i.generation == generation)
            && let Some(old) = state.take()
        {
            self.stop_instance(old).await;
        }
    }

    async fn stop_instance(&self, instance: Instance) {
        {
            let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
            if live.get(&instance.key).is_some_and(|e| e.generation == instance.generation) {
                live.remove(&instance.key);
            }
        }
        stop_service(instance).await;
    }

    async fn start(&self, server: &McpServerConfig) -> Result<Instance, McpError> {
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let tools_changed = Arc::new(AtomicBool::new(false));
        let handler = Handler { server: server.name.clone(), tools_changed: tools_changed.clone() };
        let start_error = |reason: String| McpError::Start { server: server.name.clone(), reason };
        let timed_out =
            || start_error(format!("it did not finish starting within {}.", seconds(&self.start_timeout)));
        match &server.transport {
            McpTransport::Stdio { command, args, env, cwd } => {
                let redactor = Arc::new(Redactor::new(env.values().map(String::as_str), None));
                let home = match cwd {
                    Some(dir) => dir.clone(),
                    None => private_home(server.key).map_err(|e| {
                        start_error(format!("its home directory could not be created ({}).", e.kind()))
                    })?,
                };
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args)
                    .env_clear()
                    .env("PATH", CHILD_PATH)
                    .env("HOME", &home)
                    .env("LANG", CHILD_LANG)
                    .envs(env)
                    .current_dir(&home)
                    // Its own process group: stopping it reaches the processes it starts, and a Ctrl-C
                    // meant for Arbor does not.
                    .process_group(0)
                    .kill_on_drop(true);
                let (process, stderr) =
                    TokioChildProcess::builder(cmd).stderr(Stdio::piped()).spawn().map_err(|e| {
                        start_error(format!(
                            "\"{}\" could not be run ({}).",
                            cut(command, 200),
                            redactor.redact(&e.to_string())
                        ))
                    })?;
                let pgid = process.id();
                if let Some(stderr) = stderr {
                    tokio::spawn(log_stderr(server.name.clone(), stderr, redactor.clone()));
                }
                let service = match tokio::time::timeout(self.start_timeout, handler.serve(process)).await {
                    Ok(Ok(service)) => service,
                    failed => {
                        // The transport was dropped, which kills the child; its group may hold more.
                        kill_group(pgid);
                        return Err(match failed {
                            Ok(Err(error)) if exited(&error) => start_error(
                                "the program exited before completing the MCP handshake (its stderr is logged \
                                 at debug level)."
                                    .to_string(),
                            ),
                            Ok(Err(error)) => start_error(redactor.describe(&error)),
                            _ => timed_out(),
                        });
                    }
                };
                tracing::info!(server = %server.name, pid = pgid, "MCP server started");
                Ok(Instance {
                    key: server.key,
                    generation,
                    name: server.name.clone(),
                    fingerprint: server.fingerprint.clone(),
                    http: false,
                    service,
                    tools_changed,
                    tools: None,
                    pgid,
                    redactor,
                })
            }
            McpTransport::Http { url, headers, guard } => {
                let redactor = Arc::new(Redactor::new(header_secrets(headers), Some(url)));
                let default_headers = header_map(&server.name, headers)?;
                let builder = reqwest::Client::builder()
                    .default_headers(default_headers)
                    .connect_timeout(self.start_timeout)
                    .redirect(reqwest::redirect::Policy::none());
                let (client, uri) = match guard {
                    Some(allowed) => {
                        // On every connect: a URL edited in the database after approval is refused here.
                        let target = netguard::check_url(url, allowed)
                            .await
                            .map_err(|error| McpError::Blocked { server: server.name.clone(), error })?;
                        let client = netguard::pinned_client(&target, builder)
                            .map_err(|_| start_error("the HTTP client could not be set up.".to_string()))?;
                        (client, target.url.to_string())
                    }
                    None => {
                        let parsed = reqwest::Url::parse(url.trim()).map_err(|_| McpError::Config {
                            server: server.name.clone(),
                            reason: "the URL is not valid.".to_string(),
                        })?;
                        if !matches!(parsed.scheme(), "http" | "https") {
                            return Err(McpError::Config {
                                server: server.name.clone(),
                                reason: "only http and https URLs are allowed.".to_string(),
                            });
                        }
                        let client = builder
                            .build()
                            .map_err(|_| start_error("the HTTP client could not be set up.".to_string()))?;
                        (client, parsed.to_string())
                    }
                };
                let transport = StreamableHttpClientTransport::with_client(
                    client,
                    StreamableHttpClientTransportConfig::with_uri(uri),
                );
                let service = match tokio::time::timeout(self.start_timeout, handler.serve(transport)).await {
                    Ok(Ok(service)) => service,
                    Ok(Err(error)) => return Err(start_error(redactor.describe(&error))),
                    Err(_) => return Err(timed_out()),
                };
                tracing::info!(server = %server.name, url = %url_origin(url), "MCP server connected");
                Ok(Instance {
                    key: server.key,
                    generation,
                    name: server.name.clone(),
                    fingerprint: server.fingerprint.clone(),
                    http: true,
                    service,
                    tools_changed,
                    tools: None,
                    pgid: None,
                    redactor,
                })
            }
        }
    }
}

/// Closes the connection (rmcp: close stdin, wait, SIGTERM, wait, kill; the child is reaped), then
/// kills what is left of the child's process group.
async fn stop_service(mut instance: Instance) {
    match instance.service.close_with_timeout(STOP_TIMEOUT).await {
        Ok(Some(_)) => tracing::info!(server = %instance.name, "MCP server stopped"),
        Ok(None) => tracing::warn!(server = %instance.name, "MCP server did not stop in time; killing it"),
        Err(_) => tracing::warn!(server = %instance.name, "MCP server task failed while stopping"),
    }
    kill_group(instance.pgid);
}

fn kill_group(pgid: Option<u32>) {
    if let Some(pid) = pgid.and_then(|p| i32::try_from(p).ok()).and_then(rustix::process::Pid::from_raw) {
        // ESRCH (nothing left) is the normal case.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// A per-server HOME under the system temp dir, kept across restarts (caches such as npx's live there).
///
/// The temp dir is shared with other users, so an existing directory is used only if it is a real
/// directory of ours that nobody else can enter.
fn private_home(key: Uuid) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let dir = std::env::temp_dir().join(format!("arbor-mcp-{key}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta = std::fs::symlink_metadata(&dir)?;
            if !meta.is_dir() || meta.uid() != rustix::process::geteuid().as_raw() || meta.mode() & 0o077 != 0
            {
                return Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
            }
        }
        other => other?,
    }
    Ok(dir)
}

/// Checks the parts of a configuration that would otherwise fail late or confusingly.
fn validate(server: &McpServerConfig) -> Result<(), McpError> {
    let config = |reason: String| McpError::Config { server: cut(&server.name, 100), reason };
    if !valid_server_name(&server.name) {
        return Err(config(format!(
            "the name must be 1 to {MAX_SERVER_NAME_LEN} letters, digits, '-' or '_', without \"__\" and \
             not ending in '_'."
        )));
    }
    match &server.transport {
        McpTransport::Stdio { command, args, env, cwd } => {
            if command.trim().is_empty() {
                return Err(config("the command is empty.".to_string()));
            }
            if command.contains('\0') || args.iter().any(|a| a.contains('\0')) {
                return Err(config("the command or an argument contains a NUL character.".to_string()));
            }
            for (name, value) in env {
                if name.is_empty() || name.contains(['=', '\0']) {
                    return Err(config(format!("\"{}\" is not a valid variable name.", cut(name, 100))));
                }
                if value.contains('\0') {
                    return Err(config(format!("the value of {} contains a NUL character.", cut(name, 100))));
                }
            }
            if cwd.as_ref().is_some_and(|dir| !dir.is_absolute()) {
                return Err(config("the working directory must be an absolute path.".to_string()));
            }
        }
        McpTransport::Http { .. } => {}
    }
    Ok(())
}

/// The configured headers as sensitive header values (kept out of reqwest's Debug output).
fn header_map(
    server: &str,
    headers: &BTreeMap<String, String>,
) -> Result<reqwest::header::HeaderMap, McpError> {
    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
    let config = |reason: String| McpError::Config { server: server.to_string(), reason };
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let shown = cut(name, 100);
        let header = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| config(format!("\"{shown}\" is not a valid header name.")))?;
        if RESERVED_HEADERS.contains(&header.as_str()) {
            return Err(config(format!("the header \"{shown}\" is set by the MCP transport itself.")));
        }
        // The value is never quoted: it is a secret.
        let mut value = HeaderValue::from_str(value.trim())
            .map_err(|_| config(format!("the value of the header \"{shown}\" is not valid.")))?;
        value.set_sensitive(true);
        map.insert(header, value);
    }
    Ok(map)
}

fn header_secrets(headers: &BTreeMap<String, String>) -> impl Iterator<Item = &str> {
    // "Bearer <token>": the token may be echoed on its own.
    headers.values().flat_map(|v| std::iter::once(v.as_str()).chain(v.split_whitespace()))
}

/// `scheme://host[:port]`, without path or query (which may hold a key).
fn url_origin(url: &str) -> String {
    match reqwest::Url::parse(url.trim()) {
        Ok(parsed) => match parsed.host_str() {
            Some(host) => match parsed.port() {
                Some(port) => format!("{}://{host}:{port}", parsed.scheme()),
                None => format!("{}://{host}", parsed.scheme()),
            },
            None => format!("{}:", parsed.scheme()),
        },
        Err(_) => "(invalid URL)".to_string(),
    }
}

/// Replaces secret values (and a URL's path and query) in text that came from errors or the server.
struct Redactor {
    /// (text, replacement), longest first so a secret containing another is replaced whole.
    pairs: Vec<(String, String)>,
}

impl Redactor {
    fn new<'a>(secrets: impl Iterator<Item = &'a str>, url: Option<&str>) -> Redactor {
        let mut pairs: Vec<(String, String)> = Vec::new();
        if let Some(url) = url {
            let origin = url_origin(url);
            pairs.push((url.trim().to_string(), origin.clone()));
            if let Ok(parsed) = reqwest::Url::parse(url.trim()) {
                pairs.push((parsed.to_string(), origin));
                if let Some(query) = parsed.query().filter(|q| q.len() >= MIN_REDACTED_LEN) {
                    pairs.push((query.to_string(), "[redacted]".to_string()));
                }
            }
        }
        for secret in secrets.map(str::trim).filter(|s| s.len() >= MIN_REDACTED_LEN) {
            pairs.push((secret.to_string(), "[redacted]".to_string()));
        }
        pairs.sort_by_key(|(text, _)| (std::cmp::Reverse(text.len()), text.clone()));
        pairs.dedup_by(|a, b| a.0 == b.0);
        Redactor { pairs }
    }

    fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (secret, replacement) in &self.pairs {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), replacement);
            }
        }
        text
    }

    /// An error as one redacted line for messages and logs, with rmcp's wrappers (which name Rust
    /// types) peeled off and reqwest's errors described without their URL.
    fn describe(&self, error: &(dyn std::error::Error + 'static)) -> String {
        cut(&one_line(&self.redact(&explain(error))), 500)
    }
}

fn explain(error: &(dyn std::error::Error + 'static)) -> String {
    if let Some(error) = error.downcast_ref::<ClientInitializeError>() {
        match error {
            ClientInitializeError::TransportError { error, .. } => return explain(error.error.as_ref()),
            ClientInitializeError::ConnectionClosed(_) => {
                return "the connection closed during the MCP handshake.".to_string();
            }
            ClientInitializeError::JsonRpcError(data) => {
                return format!("it refused the MCP handshake: {}", data.message);
            }
            _ => {}
        }
    }
    if let Some(ServiceError::TransportSend(error)) = error.downcast_ref::<ServiceError>() {
        return explain(error.error.as_ref());
    }
    if let Some(error) = error.downcast_ref::<DynamicTransportError>() {
        return explain(error.error.as_ref());
    }
    if let Some(error) = error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        match error {
            StreamableHttpError::Client(error) => return explain_reqwest(error),
            StreamableHttpError::AuthRequired(_) => {
                return "the server requires authorization (HTTP 401); check the configured headers."
                    .to_string();
            }
            StreamableHttpError::InsufficientScope(_) => {
                return "the server refused access (HTTP 403); check the configured headers.".to_string();
            }
            _ => {}
        }
    }
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

/// Whether a child's handshake failed because it went away (which of the two depends on timing).
fn exited(error: &ClientInitializeError) -> bool {
    match error {
        ClientInitializeError::ConnectionClosed(_) => true,
        ClientInitializeError::TransportError { error, .. } => error
            .error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe),
        _ => false,
    }
}

/// A reqwest error by kind and innermost cause: its own text carries the URL.
fn explain_reqwest(error: &reqwest::Error) -> String {
    let what = if error.is_connect() {
        "could not connect".to_string()
    } else if error.is_timeout() {
        "the request timed out".to_string()
    } else if let Some(status) = error.status() {
        format!("HTTP {status}")
    } else {
        "the HTTP request failed".to_string()
    };
    let mut innermost = None;
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        innermost = Some(cause.to_string());
        source = cause.source();
    }
    match innermost {
        Some(cause) => format!("{what}: {cause}"),
        None => what,
    }
}

/// Control characters (newlines included) become spaces, so a message stays one line.
fn one_line(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>().trim().to_string()
}

/// At most `max` characters, with "…" when cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// Logs a child's stderr at debug, line by line (lines cut, secrets redacted); never inherited.
async fn log_stderr(server: String, mut stderr: tokio::process::ChildStderr, redactor: Arc<Redactor>) {
    let emit = |line: &[u8], cut_off: bool| {
        let text = one_line(&redactor.redact(&String::from_utf8_lossy(line)));
        if !text.is_empty() {
            let ellipsis = if cut_off { "…" } else { "" };
            tracing::debug!(server = %server, "MCP server stderr: {text}{ellipsis}");
        }
    };
    let mut buf = [0u8; 4096];
    let mut line: Vec<u8> = Vec::new();
    let mut cut_off = false;
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                for &byte in &buf[..n] {
                    if byte == b'\n' {
                        emit(&line, cut_off);
                        line.clear();
                        cut_off = false;
                    } else if line.len() < MAX_STDERR_LINE {
                        line.push(byte);
                    } else {
                        cut_off = true;
                    }
                }
            }
        }
    }
    emit(&line, cut_off);
}

/// Receives the notifications Arbor cares about: only tools/list_changed.
struct Handler {
    server: String,
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "MCP server announced a changed tool list");
        self.tools_changed.store(true, Ordering::SeqCst);
    }

    fn get_info(&self) -> ClientConfig {
        // No capabilities: no roots, sampling or elicitation for servers to ask for.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("arbor", env!("CARGO_PKG_VERSION")),
        )
    }
}

enum ListError {
    /// The request could not be completed on this connection; a restart may help.
    Connection(ServiceError),
    /// Anything else (timeout, the server's error, a bad answer).
    Failed(McpError),
}

async fn list_tools(
    peer: &Peer<RoleClient>,
    server: &str,
    timeout: Duration,
    redactor: &Redactor,
) -> Result<Vec<McpTool>, ListError> {
    let mut advertised: Vec<Tool> = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_LIST_PAGES {
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(
            PaginatedRequestParams::default().with_cursor(cursor.take()),
        ));
        let answer = match tokio::time::timeout(timeout, peer.send_request(request)).await {
            Err(_) => {
                return Err(ListError::Failed(McpError::Timeout { server: server.to_string(), timeout }));
            }
            Ok(Err(error @ (ServiceError::TransportSend(_) | ServiceError::TransportClosed))) => {
                return Err(ListError::Connection(error));
            }
            Ok(Err(ServiceError::McpError(error))) => {
                return Err(ListError::Failed(McpError::Server {
                    server: server.to_string(),
                    message: cut(&one_line(&error.message), 300),
                }));
            }
            Ok(Err(error)) => {
                return Err(ListError::Failed(McpError::Protocol {
                    server: server.to_string(),
                    reason: cut(&one_line(&error.to_string()), 300),
                }));
            }
            Ok(Ok(answer)) => answer,
        };
        let ServerResult::ListToolsResult(page) = answer else {
            return Err(ListError::Failed(McpError::Protocol {
                server: server.to_string(),
                reason: "tools/list was not answered with a tool list.".to_string(),
            }));
        };
        advertised.extend(page.tools);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(offered_tools(server, advertised, redactor)),
        }
    }
    tracing::warn!(
        server,
        "MCP server kept paginating its tool list; using the first {MAX_LIST_PAGES} pages"
    );
    Ok(offered_tools(server, advertised, redactor))
}

/// The advertised tools as offered to the agent: qualified, and the first of any that sanitize to the
/// same qualified name kept.
fn offered_tools(server: &str, advertised: Vec<Tool>, redactor: &Redactor) -> Vec<McpTool> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut tools = Vec::with_capacity(advertised.len());
    for tool in advertised {
        if tool.name.is_empty() {
            tracing::warn!(server, "MCP server advertises a tool without a name; skipped");
            continue;
        }
        let qualified = qualified_name(server, &tool.name);
        if !seen.insert(qualified.clone()) {
            tracing::warn!(
                server,
                tool = %cut(&tool.name, 100),
                qualified,
                "MCP tool name collides with another of the same server after sanitizing; skipped"
            );
            continue;
        }
        let description = tool
            .description
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .or(tool.title.as_deref())
            .or(tool.annotations.as_ref().and_then(|a| a.title.as_deref()))
            .unwrap_or_default();
        tools.push(McpTool {
            server: server.to_string(),
            name: tool.name.to_string(),
            qualified,
            description: cut(&redactor.redact(description), MAX_DESCRIPTION_CHARS),
            input_schema: Value::Object(tool.input_schema.as_ref().clone()),
            read_only: tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true),
        });
    }
    tools
}

/// Whether a failed call certainly never reached the server, so retrying it cannot run it twice.
fn never_sent(error: &ServiceError, http: bool) -> bool {
    match error {
        // Over stdio a failed write means the request was not delivered. Over HTTP only a failed
        // connection is sure: a POST that failed later may have been processed.
        ServiceError::TransportSend(e) => !http || is_connect_error(e),
        _ => false,
    }
}

fn is_connect_error(error: &DynamicTransportError) -> bool {
    matches!(
        error.error.downcast_ref::<StreamableHttpError<reqwest::Error>>(),
        Some(StreamableHttpError::Client(e)) if e.is_connect()
    )
}

fn call_error(server: &str, error: ServiceError, timeout: Duration, redactor: &Redactor) -> McpError {
    let server = server.to_string();
    match error {
        ServiceError::Timeout { .. } => McpError::Timeout { server, timeout },
        ServiceError::McpError(error) => {
            McpError::Server { server, message: cut(&one_line(&redactor.redact(&error.message)), 300) }
        }
        ServiceError::TransportClosed | ServiceError::TransportSend(_) | ServiceError::Cancelled { .. } => {
            McpError::Disconnected { server }
        }
        other => McpError::Protocol { server, reason: redactor.describe(&other) },
    }
}

/// The result as text for the model: text joined, other content described, never interpreted.
fn render_result(result: &CallToolResult, redactor: &Redactor) -> McpCallResult {
    let mut parts: Vec<String> = Vec::new();
    let mut has_text = false;
    for block in &result.content {
        match block {
            ContentBlock::Text(text) => {
                has_text = true;
                parts.push(text.text.clone());
            }
            ContentBlock::Image(image) => {
                parts.push(format!("[image {}, {} bytes]", label(&image.mime_type), base64_len(&image.data)));
            }
            ContentBlock::Audio(audio) => {
                parts.push(format!("[audio {}, {} bytes]", label(&audio.mime_type), base64_len(&audio.data)));
            }
            ContentBlock::Resource(embedded) => parts.push(match &embedded.resource {
                ResourceContents::TextResourceContents { uri, mime_type, text, .. } => format!(
                    "[resource {} {}, {} bytes]",
                    label(uri),
                    label(mime_type.as_deref().unwrap_or("text/plain")),
                    text.len()
                ),
                ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => format!(
                    "[resource {} {}, {} bytes]",
                    label(uri),
                    label(mime_type.as_deref().unwrap_or("application/octet-stream")),
                    base64_len(blob)
                ),
                _ => "[resource of an unsupported type]".to_string(),
            }),
            ContentBlock::ResourceLink(link) => parts.push(format!(
                "[resource link {} {}{}]",
                label(&link.uri),
                label(&link.name),
                link.mime_type.as_deref().map(|m| format!(" ({})", label(m))).unwrap_or_default()
            )),
            _ => parts.push("[content of an unsupported type]".to_string()),
        }
    }
    if !has_text && let Some(structured) = &result.structured_content {
        let json = serde_json::to_string_pretty(structured).unwrap_or_else(|_| structured.to_string());
        parts.insert(0, json);
    }
    let text =
        if parts.is_empty() { "(The tool returned no content.)".to_string() } else { parts.join("\n") };
    // A server may echo its own credentials (an "env" tool, an error quoting a header): they must not
    // reach the model, the chat or the database.
    McpCallResult { text: cap_text(redactor.redact(&text)), is_error: result.is_error == Some(true) }
}

/// A server-supplied name, URI or MIME type on one line and short.
fn label(text: &str) -> String {
    cut(&one_line(text), 200)
}

/// The decoded size of base64 data, without decoding it.
fn base64_len(data: &str) -> usize {
    let symbols =
        data.bytes().filter(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')).count();
    symbols * 3 / 4
}

/// Cuts text beyond [`MAX_RESULT_BYTES`] (at a character boundary) and says so.
fn cap_text(text: String) -> String {
    if text.len() <= MAX_RESULT_BYTES {
        return text;
    }
    let mut end = MAX_RESULT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[Output truncated: the tool returned {} bytes; the first {end} are shown.]",
        &text[..end],
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rmcp::model::{AudioContent, EmbeddedResource, ImageContent, TextContent, ToolAnnotations};
    use serde_json::json;

    use super::*;

    // ---- helpers ----

    /// A test-services binary; a missing one fails the test instead of skipping it.
    fn bin(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services/node_modules/.bin").join(name);
        assert!(path.exists(), "{} is missing: run npm ci --prefix tests/services", path.display());
        path.to_string_lossy().into_owned()
    }

    fn manager() -> McpManager {
        // main installs the provider; reqwest panics without one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        McpManager::new(Duration::from_secs(20), Duration::from_secs(30))
    }

    fn config(name: &str, transport: McpTransport) -> McpServerConfig {
        McpServerConfig {
            key: Uuid::new_v4(),
            name: name.to_string(),
            transport,
            fingerprint: "1".to_string(),
        }
    }

    /// A stdio transport working in the system temp dir (so tests leave no private homes behind).
    fn stdio(command: &str, args: &[&str], env: &[(&str, &str)]) -> McpTransport {
        McpTransport::Stdio {
            command: command.to_string(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            cwd: Some(std::env::temp_dir()),
        }
    }

    fn everything(name: &str) -> McpServerConfig {
        config(name, stdio(&bin("mcp-server-everything"), &["stdio"], &[]))
    }

    /// server-everything behind a shell that appends its pid to `pids` (then execs, so the pid stays
    /// the server's) and copies the environment it was given to `env_file`.
    fn wrapped(name: &str, dir: &Path, env: &[(&str, &str)]) -> McpServerConfig {
        let script = format!(
            "echo $$ >> '{}'; tr '\\0' '\\n' < /proc/$$/environ > '{}'; exec '{}' stdio",
            dir.join("pids").display(),
            dir.join("env").display(),
            bin("mcp-server-everything")
        );
        config(name, stdio("/bin/sh", &["-c", &script], env))
    }

    fn pids(dir: &Path) -> Vec<i32> {
        std::fs::read_to_string(dir.join("pids"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    }

    /// Whether a process exists (a zombie counts: it has not been reaped).
    fn alive(pid: i32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
    }

    async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
        for _ in 0..200 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("timed out waiting until {what}");
    }

    // ---- pure parts ----

    #[test]
    fn server_names() {
        for ok in ["everything", "a", "my-server_2", "A-b-C", &"x".repeat(32)] {
            assert!(valid_server_name(ok), "{ok}");
        }
        for bad in ["", "a__b", "a_", "a b", "a.b", "é", "a/b", &"x".repeat(33)] {
            assert!(!valid_server_name(bad), "{bad}");
        }
    }

    #[test]
    fn qualified_names_are_sanitized_and_cut() {
        assert_eq!(qualified_name("everything", "echo"), "everything__echo");
        assert_eq!(qualified_name("everything", "get-sum"), "everything__get-sum");
        assert_eq!(qualified_name("s", "a.b/c d:é"), "s__a_b_c_d__");
        let long = qualified_name("server", &"t".repeat(100));
        assert_eq!(long.len(), 64);
        assert!(long.starts_with("server__ttt"));
    }

    fn tool(name: &str, read_only: Option<bool>) -> Tool {
        let mut tool = Tool::new(name.to_string(), format!("does {name}"), Arc::new(serde_json::Map::new()));
        if let Some(hint) = read_only {
            let mut annotations = ToolAnnotations::default();
            annotations.read_only_hint = Some(hint);
            tool.annotations = Some(annotations);
        }
        tool
    }

    #[test]
    fn colliding_tools_keep_the_first() {
        let tools = offered_tools(
            "srv",
            vec![tool("a.b", Some(true)), tool("a_b", None), tool("", None), tool("c", Some(false))],
            &no_secrets(),
        );
        let names: Vec<(&str, &str, bool)> =
            tools.iter().map(|t| (t.name.as_str(), t.qualified.as_str(), t.read_only)).collect();
        assert_eq!(names, [("a.b", "srv__a_b", true), ("c", "srv__c", false)]);
        assert_eq!(tools[0].description, "does a.b");
        assert_eq!(tools[0].input_schema, json!({}));
        assert_eq!(tools[0].server, "srv");
    }

    fn no_secrets() -> Redactor {
        Redactor::new(std::iter::empty(), None)
    }

    fn render_with_no_secrets(result: &CallToolResult) -> McpCallResult {
        render_result(result, &no_secrets())
    }

    fn result(
        content: Vec<ContentBlock>,
        structured: Option<Value>,
        is_error: Option<bool>,
    ) -> CallToolResult {
        let mut result = CallToolResult::success(content);
        result.structured_content = structured;
        result.is_error = is_error;
        result
    }

    #[test]
    fn results_are_text_and_one_line_descriptions() {
        let out = render_with_no_secrets(&result(
            vec![
                ContentBlock::Text(TextContent::new("first")),
                ContentBlock::Image(ImageContent::new("AAAA", "image/png")),
                ContentBlock::Audio(AudioContent::new("AAAAAAAA", "audio/wav")),
                ContentBlock::Resource(EmbeddedResource::new(ResourceContents::text(
                    "hello",
                    "file:///a\nb",
                ))),
                ContentBlock::Text(TextContent::new("last")),
            ],
            Some(json!({"ignored": true})),
            None,
        ));
        assert_eq!(
            out.text,
            "first\n[image image/png, 3 bytes]\n[audio audio/wav, 6 bytes]\n\
             [resource file:///a b text/plain, 5 bytes]\nlast"
        );
        assert!(!out.is_error);

        let out = render_with_no_secrets(&result(vec![], Some(json!({"a": 1})), Some(true)));
        assert_eq!(out.text, "{\n  \"a\": 1\n}");
        assert!(out.is_error);
        assert_eq!(
            render_with_no_secrets(&result(vec![], None, None)).text,
            "(The tool returned no content.)"
        );
    }

    #[test]
    fn long_results_are_cut_with_a_note() {
        let text = "é".repeat(MAX_RESULT_BYTES); // twice the limit in bytes
        let out =
            render_with_no_secrets(&result(vec![ContentBlock::Text(TextContent::new(text))], None, None));
        let (kept, note) = out.text.split_once('\n').unwrap();
        assert_eq!(kept.len(), MAX_RESULT_BYTES);
        assert!(note.contains(&format!("returned {} bytes", 2 * MAX_RESULT_BYTES)), "{note}");
    }

    #[test]
    fn secrets_are_redacted_from_text_and_debug() {
        let url = "https://mcp.example.com/v1/mcp?key=supersecretkey";
        let headers: BTreeMap<String, String> =
            [("Authorization".to_string(), "Bearer tok-1234567".to_string())].into();
        let r = Redactor::new(header_secrets(&headers), Some(url));
        let text =
            r.redact(&format!("error sending request for url ({url}): got Bearer tok-1234567 / tok-1234567"));
        assert_eq!(
            text,
            "error sending request for url (https://mcp.example.com): got [redacted] / [redacted]"
        );

        let transport = McpTransport::Http { url: url.to_string(), headers, guard: None };
        let debug = format!("{transport:?}");
        assert!(
            !debug.contains("tok-1234567") && !debug.contains("supersecretkey") && !debug.contains("/v1")
        );
        assert!(debug.contains("Authorization") && debug.contains("https://mcp.example.com"), "{debug}");
        let transport = stdio("srv", &[], &[("API_TOKEN", "hunter2hunter2")]);
        let debug = format!("{transport:?}");
        assert!(!debug.contains("hunter2") && debug.contains("API_TOKEN"), "{debug}");
    }

    #[tokio::test]
    async fn bad_configurations_are_refused_before_starting() {
        let m = manager();
        let err = m.tools(&config("a__b", stdio("true", &[], &[])), false).await.unwrap_err();
        assert!(matches!(err, McpError::Config { .. }), "{err}");
        let err = m.tools(&config("ok", stdio(" ", &[], &[])), false).await.unwrap_err();
        assert!(err.to_string().contains("command is empty"), "{err}");
        let err = m.tools(&config("ok", stdio("true", &[], &[("A=B", "x")])), false).await.unwrap_err();
        assert!(err.to_string().contains("not a valid variable name"), "{err}");
        let headers = [("Mcp-Session-Id".to_string(), "secret-session".to_string())].into();
        let http = McpTransport::Http { url: "http://10.0.0.1/mcp".to_string(), headers, guard: None };
        let err = m.tools(&config("ok", http), false).await.unwrap_err();
        assert!(err.to_string().contains("set by the MCP transport"), "{err}");
        assert!(!err.to_string().contains("secret-session"));
        let err = m.tools(&config("ok", stdio("/nonexistent/server", &[], &[])), false).await.unwrap_err();
        assert!(matches!(err, McpError::Start { .. }), "{err}");
        assert!(err.to_string().contains("could not be run"), "{err}");
        let err = m.tools(&config("quits", stdio("/bin/true", &[], &[])), false).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "The MCP server \"quits\" could not be started: the program exited before completing the MCP \
             handshake (its stderr is logged at debug level)."
        );
        assert!(m.running().is_empty());
    }

    // ---- against real servers ----

    #[tokio::test]
    async fn everything_over_stdio() {
        let m = manager();
        let server = everything("everything");
        let tools = m.tools(&server, false).await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.qualified.as_str()).collect();
        for expected in ["everything__echo", "everything__get-sum", "everything__get-tiny-image"] {
            assert!(names.contains(&expected), "{expected} not in {names:?}");
        }
        let echo = tools.iter().find(|t| t.name == "echo").unwrap();
        assert!(echo.read_only);
        assert_eq!(echo.description, "Echoes back the input string");
        assert_eq!(echo.input_schema["properties"]["message"]["type"], "string");
        // Cached: the same list without asking again; a refresh gives the same tools.
        assert_eq!(m.tools(&server, false).await.unwrap(), tools);
        assert_eq!(m.tools(&server, true).await.unwrap(), tools);

        let out = m.call(&server, "echo", json!({"message": "hello there"})).await.unwrap();
        assert_eq!(out, McpCallResult { text: "Echo: hello there".to_string(), is_error: false });
        let out = m.call(&server, "get-sum", json!({"a": 2, "b": 40})).await.unwrap();
        assert!(out.text.contains("42"), "{}", out.text);
        assert!(!out.is_error);

        let out = m.call(&server, "get-tiny-image", json!({})).await.unwrap();
        assert!(!out.is_error);
        let image_line = out.text.lines().find(|l| l.starts_with("[image ")).unwrap();
        assert!(
            image_line.starts_with("[image image/png, ") && image_line.ends_with(" bytes]"),
            "{image_line}"
        );
        assert!(!out.text.contains("iVBOR"), "image data must not be passed on: {}", out.text);

        let out = m.call(&server, "get-structured-content", json!({"location": "Chicago"})).await.unwrap();
        assert!(out.text.contains("36"), "{}", out.text);

        // Bad arguments: the server's error result, not a panic.
        let out = m.call(&server, "get-sum", json!({"a": "two"})).await;
        match out {
            Ok(out) => assert!(out.is_error, "{}", out.text),
            Err(err) => assert!(matches!(err, McpError::Server { .. }), "{err}"),
        }
        let err = m.call(&server, "echo", json!("not an object")).await.unwrap_err();
        assert!(matches!(err, McpError::InvalidArguments { .. }), "{err}");
        let err = m.call(&server, "no-such-tool", json!({})).await.unwrap_err();
        assert_eq!(err.to_string(), "The MCP server \"everything\" has no tool named \"no-such-tool\".");

        assert_eq!(m.running(), ["everything"]);
        m.shutdown().await;
        assert!(m.running().is_empty());
    }

    #[tokio::test]
    async fn filesystem_server_writes_and_reads() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let m = manager();
        let server = config("files", stdio(&bin("mcp-server-filesystem"), &[root.to_str().unwrap()], &[]));
        let tools = m.tools(&server, false).await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert!(names.contains(&"write_file") && names.contains(&"read_text_file"), "{names:?}");
        assert!(!tools.iter().find(|t| t.name == "write_file").unwrap().read_only);

        let path = root.join("note.txt");
        let path = path.to_str().unwrap();
        let out = m
            .call(&server, "write_file", json!({"path": path, "content": "line one\nline two"}))
            .await
            .unwrap();
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(std::fs::read_to_string(root.join("note.txt")).unwrap(), "line one\nline two");
        let out = m.call(&server, "read_text_file", json!({"path": path})).await.unwrap();
        assert_eq!(out.text, "line one\nline two");
        // Outside its directory: the server refuses, as an error result.
        let out = m.call(&server, "read_text_file", json!({"path": "/etc/hostname"})).await;
        assert!(out.map(|o| o.is_error).unwrap_or(true));
        m.shutdown().await;
    }

    #[tokio::test]
    async fn child_environment_is_clean() {
        // This process has cargo's variables; none may reach the child.
        assert!(std::env::vars().any(|(k, _)| k.starts_with("CARGO")));
        let dir = tempfile::tempdir().unwrap();
        let m = manager();
        let mut server =
            wrapped("env-check", dir.path(), &[("ALLOWED", "1"), ("API_TOKEN", "hunter2hunter2")]);
        if let McpTransport::Stdio { cwd, .. } = &mut server.transport {
            *cwd = None; // the default: a private home
        }
        // The server's own get-env tool shows the environment too; the secret comes back redacted.
        let out = m.call(&server, "get-env", json!({})).await.unwrap();
        assert!(out.text.contains("\"API_TOKEN\": \"[redacted]\""), "{}", out.text);
        assert!(!out.text.contains("hunter2"), "{}", out.text);
        let env = std::fs::read_to_string(dir.path().join("env")).unwrap();
        let mut names: Vec<&str> = env.lines().map(|l| l.split_once('=').unwrap().0).collect();
        names.sort();
        assert_eq!(names, ["ALLOWED", "API_TOKEN", "HOME", "LANG", "PATH"], "{env}");
        assert!(env.lines().any(|l| l == "ALLOWED=1"));
        assert!(env.lines().any(|l| l == "PATH=/usr/local/bin:/usr/bin:/bin"));
        assert!(env.lines().any(|l| l == "LANG=C.UTF-8"));
        let home = env.lines().find_map(|l| l.strip_prefix("HOME=")).unwrap();
        assert_eq!(Path::new(home), std::env::temp_dir().join(format!("arbor-mcp-{}", server.key)));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(home).unwrap().permissions().mode() & 0o777, 0o700);
        m.shutdown().await;
        std::fs::remove_dir_all(home).unwrap();
    }

    #[tokio::test]
    async fn a_killed_server_is_restarted_on_its_next_use() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager();
        let server = wrapped("crashy", dir.path(), &[]);
        m.call(&server, "echo", json!({"message": "one"})).await.unwrap();
        let first = pids(dir.path());
        assert_eq!(first.len(), 1);
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(first[0]).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
        eventually("the dead server is no longer running", || m.running().is_empty()).await;

        let out = m.call(&server, "echo", json!({"message": "two"})).await.unwrap();
        assert_eq!(out.text, "Echo: two");
        let now = pids(dir.path());
        assert_eq!(now.len(), 2, "restarted once");
        assert_ne!(now[0], now[1]);
        assert_eq!(m.running(), ["crashy"]);
        eventually("the killed child is reaped", || !alive(first[0])).await;
        m.shutdown().await;
    }

    #[tokio::test]
    async fn a_changed_fingerprint_restarts_and_shutdown_reaps() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager();
        let mut server = wrapped("changing", dir.path(), &[]);
        m.tools(&server, false).await.unwrap();
        m.tools(&server, false).await.unwrap();
        assert_eq!(pids(dir.path()).len(), 1);

        server.fingerprint = "2".to_string();
        m.call(&server, "echo", json!({"message": "x"})).await.unwrap();
        let started = pids(dir.path());
        assert_eq!(started.len(), 2);
        assert!(!alive(started[0]), "the old instance was stopped and reaped");
        assert!(alive(started[1]));
        assert_eq!(m.running(), ["changing"]);

        m.shutdown().await;
        assert!(!alive(started[1]), "shutdown kills and reaps the child");
        assert!(m.running().is_empty());
        let err = m.tools(&server, false).await.unwrap_err();
        assert!(matches!(err, McpError::ShutDown), "{err}");
        assert_eq!(pids(dir.path()).len(), 2, "nothing starts after shutdown");
    }

    #[tokio::test]
    async fn concurrent_first_uses_start_the_server_once() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager();
        let server = wrapped("busy", dir.path(), &[]);
        let lists = futures_util::future::join_all((0..5).map(|_| m.tools(&server, false))).await;
        for tools in lists {
            assert!(tools.unwrap().iter().any(|t| t.qualified == "busy__echo"));
        }
        assert_eq!(pids(dir.path()).len(), 1);
        assert_eq!(m.running(), ["busy"]);
        m.shutdown().await;
    }

    #[tokio::test]
    async fn a_slow_call_times_out_and_the_server_stays_usable() {
        let m = McpManager::new(Duration::from_secs(1), Duration::from_secs(30));
        let server = everything("slow");
        let started = std::time::Instant::now();
        let err = m
            .call(&server, "trigger-long-running-operation", json!({"duration": 10, "steps": 2}))
            .await
            .unwrap_err();
        assert!(matches!(err, McpError::Timeout { .. }), "{err}");
        assert_eq!(err.to_string(), "The MCP server \"slow\" did not answer within 1 s.");
        assert!(started.elapsed() < Duration::from_secs(8));
        let out = m.call(&server, "echo", json!({"message": "still here"})).await.unwrap();
        assert_eq!(out.text, "Echo: still here");
        assert_eq!(m.running(), ["slow"]);
        m.shutdown().await;
    }

    /// server-everything in streamable HTTP mode on a free loopback port, killed when dropped.
    async fn http_everything() -> (tokio::process::Child, u16) {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = tokio::process::Command::new(bin("mcp-server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return (child, port);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("server-everything did not listen on port {port}");
    }

    fn http(url: String, headers: &[(&str, &str)], guard: Option<AllowedRanges>) -> McpTransport {
        let headers = headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        McpTransport::Http { url, headers, guard }
    }

    #[tokio::test]
    async fn everything_over_streamable_http() {
        let (_child, port) = http_everything().await;
        let url = format!("http://127.0.0.1:{port}/mcp");
        let m = manager();
        let server = config("remote", http(url.clone(), &[("X-Api-Key", "secret-value-123")], None));
        let tools = m.tools(&server, false).await.unwrap();
        assert!(tools.iter().any(|t| t.qualified == "remote__echo"));
        let out = m.call(&server, "echo", json!({"message": "over http"})).await.unwrap();
        assert_eq!(out.text, "Echo: over http");
        assert_eq!(m.running(), ["remote"]);

        // A member's server: the guard refuses loopback before any connection.
        let guarded = config("member", http(url, &[], Some(AllowedRanges::none())));
        let err = m.tools(&guarded, false).await.unwrap_err();
        assert!(matches!(err, McpError::Blocked { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            "The MCP server \"member\" cannot be reached: This address is not allowed: 127.0.0.1 is a loopback address."
        );
        let err = m.call(&guarded, "echo", json!({"message": "x"})).await.unwrap_err();
        assert!(matches!(err, McpError::Blocked { .. }), "{err}");
        // An allowed range lets it through.
        let allowed = AllowedRanges::parse("127.0.0.0/8").unwrap();
        let url = format!("http://127.0.0.1:{port}/mcp");
        let member = config("member", http(url, &[], Some(allowed)));
        assert!(m.tools(&member, false).await.unwrap().iter().any(|t| t.name == "echo"));
        m.shutdown().await;
    }

    #[tokio::test]
    async fn configured_headers_are_sent_and_never_shown() {
        // A bare listener records the first request and answers 500.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let recorder = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = stream.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
            }
            use tokio::io::AsyncWriteExt;
            let _ =
                stream.write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n").await;
            String::from_utf8_lossy(&request).to_lowercase()
        });
        let m = manager();
        let url = format!("http://127.0.0.1:{port}/mcp?token=query-secret-42");
        let server = config("hdr", http(url, &[("Authorization", "Bearer header-secret-42")], None));
        let err = m.tools(&server, false).await.unwrap_err();
        let request = recorder.await.unwrap();
        assert!(request.contains("authorization: bearer header-secret-42"), "{request}");
        let message = err.to_string();
        assert!(matches!(err, McpError::Start { .. }), "{message}");
        assert!(!message.contains("header-secret-42") && !message.contains("query-secret-42"), "{message}");
        assert!(message.ends_with("could not be started: HTTP 500"), "{message}");
        assert!(m.running().is_empty());

        // Nothing listens on the discard port: the reason names the failure, not the URL's secret.
        let url = "http://127.0.0.1:9/mcp?token=query-secret-42".to_string();
        let err = m.tools(&config("refused", http(url, &[], None)), false).await.unwrap_err();
        let message = err.to_string();
        assert!(message.contains("could not connect") && message.contains("refused"), "{message}");
        assert!(!message.contains("query-secret-42"), "{message}");
    }
}
