//! Server instances: started on first use, restarted after a crash or a configuration change,
//! stopped with their process group; stdio children get a private home and a clean environment.

use super::*;

impl Inner {
    pub(super) fn slot(&self, key: Uuid) -> Arc<Slot> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner).entry(key).or_default().clone()
    }

    /// The tools of the slot's instance (started if needed); a failed listing restarts the server once.
    pub(super) async fn tools_locked(
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
    pub(super) async fn ensure<'a>(
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
    pub(super) async fn discard(&self, slot: &Slot, generation: u64) {
        let mut state = slot.lock().await;
        if state.as_ref().is_some_and(|i| i.generation == generation)
            && let Some(old) = state.take()
        {
            self.stop_instance(old).await;
        }
    }

    pub(super) async fn stop_instance(&self, instance: Instance) {
        {
            let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
            if live.get(&instance.key).is_some_and(|e| e.generation == instance.generation) {
                live.remove(&instance.key);
            }
        }
        stop_service(instance).await;
    }

    pub(super) async fn start(&self, server: &McpServerConfig) -> Result<Instance, McpError> {
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
                let builder = crate::tls::client_builder()
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
pub(super) async fn stop_service(mut instance: Instance) {
    match instance.service.close_with_timeout(STOP_TIMEOUT).await {
        Ok(Some(_)) => tracing::info!(server = %instance.name, "MCP server stopped"),
        Ok(None) => tracing::warn!(server = %instance.name, "MCP server did not stop in time; killing it"),
        Err(_) => tracing::warn!(server = %instance.name, "MCP server task failed while stopping"),
    }
    kill_group(instance.pgid);
}

pub(super) fn kill_group(pgid: Option<u32>) {
    if let Some(pid) = pgid.and_then(|p| i32::try_from(p).ok()).and_then(rustix::process::Pid::from_raw) {
        // ESRCH (nothing left) is the normal case.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// A per-server HOME under the system temp dir, kept across restarts (caches such as npx's live there).
///
/// The temp dir is shared with other users, so an existing directory is used only if it is a real
/// directory of ours that nobody else can enter.
pub(super) fn private_home(key: Uuid) -> std::io::Result<PathBuf> {
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
pub(super) fn validate(server: &McpServerConfig) -> Result<(), McpError> {
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
pub(super) fn header_map(
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

pub(super) fn header_secrets(headers: &BTreeMap<String, String>) -> impl Iterator<Item = &str> {
    // "Bearer <token>": the token may be echoed on its own.
    headers.values().flat_map(|v| std::iter::once(v.as_str()).chain(v.split_whitespace()))
}
