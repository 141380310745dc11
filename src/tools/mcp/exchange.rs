//! Talking to a running server: listing its tools, and turning call results and errors into what
//! the agent sees.

use super::*;

/// Receives the notifications Arbor cares about: only tools/list_changed.
pub(super) struct Handler {
    pub(super) server: String,
    pub(super) tools_changed: Arc<AtomicBool>,
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

pub(super) enum ListError {
    /// The request could not be completed on this connection; a restart may help.
    Connection(ServiceError),
    /// Anything else (timeout, the server's error, a bad answer).
    Failed(McpError),
}

pub(super) async fn list_tools(
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
pub(super) fn offered_tools(server: &str, advertised: Vec<Tool>, redactor: &Redactor) -> Vec<McpTool> {
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
pub(super) fn never_sent(error: &ServiceError, http: bool) -> bool {
    match error {
        // Over stdio a failed write means the request was not delivered. Over HTTP only a failed
        // connection is sure: a POST that failed later may have been processed.
        ServiceError::TransportSend(e) => !http || is_connect_error(e),
        _ => false,
    }
}

pub(super) fn is_connect_error(error: &DynamicTransportError) -> bool {
    matches!(
        error.error.downcast_ref::<StreamableHttpError<reqwest::Error>>(),
        Some(StreamableHttpError::Client(e)) if e.is_connect()
    )
}

pub(super) fn call_error(
    server: &str,
    error: ServiceError,
    timeout: Duration,
    redactor: &Redactor,
) -> McpError {
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
pub(super) fn render_result(result: &CallToolResult, redactor: &Redactor) -> McpCallResult {
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
pub(super) fn label(text: &str) -> String {
    cut(&one_line(text), 200)
}

/// The decoded size of base64 data, without decoding it.
pub(super) fn base64_len(data: &str) -> usize {
    let symbols =
        data.bytes().filter(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')).count();
    symbols * 3 / 4
}

/// Cuts text beyond [`MAX_RESULT_BYTES`] (at a character boundary) and says so.
pub(super) fn cap_text(text: String) -> String {
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
