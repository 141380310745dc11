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
    McpServerConfig { key: Uuid::new_v4(), name: name.to_string(), transport, fingerprint: "1".to_string() }
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

fn result(content: Vec<ContentBlock>, structured: Option<Value>, is_error: Option<bool>) -> CallToolResult {
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
            ContentBlock::Resource(EmbeddedResource::new(ResourceContents::text("hello", "file:///a\nb"))),
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
    assert_eq!(render_with_no_secrets(&result(vec![], None, None)).text, "(The tool returned no content.)");
}

#[test]
fn long_results_are_cut_with_a_note() {
    let text = "é".repeat(MAX_RESULT_BYTES); // twice the limit in bytes
    let out = render_with_no_secrets(&result(vec![ContentBlock::Text(TextContent::new(text))], None, None));
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
    assert_eq!(text, "error sending request for url (https://mcp.example.com): got [redacted] / [redacted]");

    let transport = McpTransport::Http { url: url.to_string(), headers, guard: None };
    let debug = format!("{transport:?}");
    assert!(!debug.contains("tok-1234567") && !debug.contains("supersecretkey") && !debug.contains("/v1"));
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
    assert!(image_line.starts_with("[image image/png, ") && image_line.ends_with(" bytes]"), "{image_line}");
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
    let out =
        m.call(&server, "write_file", json!({"path": path, "content": "line one\nline two"})).await.unwrap();
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
    let mut server = wrapped("env-check", dir.path(), &[("ALLOWED", "1"), ("API_TOKEN", "hunter2hunter2")]);
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
        let _ = stream.write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n").await;
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

/// A stdio MCP server (Python, standard library) with one tool, `flood`, that answers a call
/// with one line of `mib` MiB before its real answer, and echoes otherwise.
const FLOODING_SERVER: &str = r#"
import json, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, ident = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": {"protocolVersion": msg["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "flood", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [{"name": "flood",
              "inputSchema": {"type": "object", "properties": {"mib": {"type": "integer"}}}}]}})
    elif method == "tools/call":
        mib = msg["params"]["arguments"].get("mib", 0)
        if mib:
            chunk = "x" * (1 << 20)
            sys.stdout.write('{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"type": "text", "text": "' % json.dumps(ident))
            for _ in range(mib):
                sys.stdout.write(chunk)
            sys.stdout.write('"}]}}\n'); sys.stdout.flush()
        else:
            send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "small"}]}})
"#;

/// SECURITY.md 52: a server's message is bounded before it is held (rmcp drops a line over
/// 16 MiB unread); the call fails with a clear error and the server stays usable.
#[tokio::test]
async fn an_oversized_result_is_dropped_unread_and_the_server_stays_usable() {
    let m = McpManager::new(Duration::from_secs(3), Duration::from_secs(30));
    let server = config("flood", stdio("python3", &["-c", FLOODING_SERVER], &[]));
    let tools = m.tools(&server, false).await.unwrap();
    assert_eq!(tools.len(), 1);
    let err = m.call(&server, "flood", json!({"mib": 40})).await.unwrap_err();
    assert!(matches!(err, McpError::Timeout { .. }), "{err}");
    let out = m.call(&server, "flood", json!({})).await.unwrap();
    assert_eq!(out.text, "small");
    // Under the bound, a large result is read and cut to what a model is shown.
    let out = m.call(&server, "flood", json!({"mib": 1})).await.unwrap();
    assert!(
        out.text.len() < MAX_RESULT_BYTES + 200 && out.text.contains("[Output truncated"),
        "{}",
        out.text.len()
    );
    m.shutdown().await;
}
