//! The coding CLIs people point at a gateway, run for real against Arbor: Claude Code
//! (`claude -p`), Gemini CLI (`gemini -p`) and Codex CLI (`codex exec`), installed by
//! `scripts/test` from npm at the versions pinned in `tests/clients/package.json`.
//!
//! Each completes a turn with one tool round trip: the scripted upstream behind Arbor asks the
//! client's own file-reading tool for `notes.txt` in the client's working directory, the client
//! runs it locally and sends the result back, and the upstream's final answer quotes what it
//! read. Each client runs against an OpenAI-compatible upstream and against an upstream of its
//! own vendor's wire format, under the model name it hard-codes, aliased by the member.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::gateway::{Api, api_with, token};
use crate::support::mock_upstream::{Provider, RecordedRequest, Reply};

/// Where `scripts/test` installs the clients.
fn clients_bin(name: &str) -> PathBuf {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/node_modules/.bin").join(name);
    assert!(bin.exists(), "{} is missing: run scripts/test (it runs npm ci in tests/clients)", bin.display());
    bin
}

/// The tool call a client's reading tool takes, by tool name: what the upstream asks for.
#[derive(Clone)]
struct Reader {
    tool: &'static str,
    arguments: Value,
}

/// What an upstream request carries, whatever its wire format.
struct Seen {
    tools: Vec<String>,
    /// The text of a tool result in the request's last turn, if it ends with one.
    last_result: Option<String>,
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(text_of).collect::<Vec<_>>().join("\n"),
        Value::Object(o) => o.get("text").map(text_of).unwrap_or_else(|| v.to_string()),
        other => other.to_string(),
    }
}

fn seen(provider: Provider, body: &Value) -> Seen {
    let names = |list: Option<&Value>, pointer: &str| -> Vec<String> {
        list.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.pointer(pointer).and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    match provider {
        Provider::OpenAi => {
            let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
            Seen {
                tools: names(body.get("tools"), "/function/name"),
                last_result: (last["role"] == "tool").then(|| text_of(&last["content"])),
            }
        }
        Provider::Anthropic => {
            let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
            let result = last["content"]
                .as_array()
                .and_then(|blocks| blocks.iter().find(|b| b["type"] == "tool_result"))
                .map(|b| text_of(&b["content"]));
            Seen { tools: names(body.get("tools"), "/name"), last_result: result }
        }
        Provider::Gemini => {
            let last = body["contents"].as_array().and_then(|c| c.last()).cloned().unwrap_or_default();
            let result = last["parts"]
                .as_array()
                .and_then(|parts| parts.iter().find_map(|p| p.get("functionResponse")))
                .map(|r| text_of(&r["response"]));
            let tools = body["tools"]
                .as_array()
                .map(|t| t.iter().flat_map(|t| names(t.get("functionDeclarations"), "/name")).collect())
                .unwrap_or_default();
            Seen { tools, last_result: result }
        }
    }
}

fn sse(events: Vec<String>) -> Reply {
    Reply::Sse { events, chunk_delay_ms: 0 }
}

/// A streamed answer in `provider`'s wire format: text, or one tool call.
fn answer(provider: Provider, text: Option<&str>, call: Option<&Reader>) -> Reply {
    match provider {
        Provider::OpenAi => {
            let chunk = |delta: Value, finish: Value| {
                let c = json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                    "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
                format!("data: {c}\n\n")
            };
            let mut events = vec![chunk(json!({ "role": "assistant", "content": "" }), Value::Null)];
            if let Some(t) = text {
                events.push(chunk(json!({ "content": t }), Value::Null));
                events.push(chunk(json!({}), json!("stop")));
            }
            if let Some(r) = call {
                let tc = json!([{ "index": 0, "id": "call_read_1", "type": "function",
                    "function": { "name": r.tool, "arguments": r.arguments.to_string() } }]);
                events.push(chunk(json!({ "tool_calls": tc }), Value::Null));
                events.push(chunk(json!({}), json!("tool_calls")));
            }
            let usage = json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [], "usage": { "prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59 } });
            events.push(format!("data: {usage}\n\n"));
            events.push("data: [DONE]\n\n".into());
            sse(events)
        }
        Provider::Anthropic => {
            let ev = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
            let mut events = vec![ev(
                "message_start",
                json!({ "type": "message_start", "message": { "id": "msg_1", "type": "message", "role": "assistant",
                    "model": "claude-x", "content": [], "stop_reason": null, "stop_sequence": null,
                    "usage": { "input_tokens": 50, "output_tokens": 1 } } }),
            )];
            let stop = if let Some(r) = call {
                events.push(ev("content_block_start", json!({ "type": "content_block_start", "index": 0,
                    "content_block": { "type": "tool_use", "id": "toolu_read_1", "name": r.tool, "input": {} } })));
                events.push(ev(
                    "content_block_delta",
                    json!({ "type": "content_block_delta", "index": 0,
                    "delta": { "type": "input_json_delta", "partial_json": r.arguments.to_string() } }),
                ));
                "tool_use"
            } else {
                events.push(ev(
                    "content_block_start",
                    json!({ "type": "content_block_start", "index": 0,
                    "content_block": { "type": "text", "text": "" } }),
                ));
                events.push(ev(
                    "content_block_delta",
                    json!({ "type": "content_block_delta", "index": 0,
                    "delta": { "type": "text_delta", "text": text.unwrap_or_default() } }),
                ));
                "end_turn"
            };
            events.push(ev("content_block_stop", json!({ "type": "content_block_stop", "index": 0 })));
            events.push(ev(
                "message_delta",
                json!({ "type": "message_delta",
                "delta": { "stop_reason": stop, "stop_sequence": null }, "usage": { "output_tokens": 9 } }),
            ));
            events.push(ev("message_stop", json!({ "type": "message_stop" })));
            sse(events)
        }
        Provider::Gemini => {
            let part = match call {
                Some(r) => json!({ "functionCall": { "name": r.tool, "args": r.arguments } }),
                None => json!({ "text": text.unwrap_or_default() }),
            };
            let c = json!({ "candidates": [{ "content": { "role": "model", "parts": [part] }, "finishReason": "STOP", "index": 0 }],
                "usageMetadata": { "promptTokenCount": 50, "candidatesTokenCount": 9, "totalTokenCount": 59 },
                "modelVersion": "gemini-x" });
            sse(vec![format!("data: {c}\r\n\r\n")])
        }
    }
}

/// The scripted upstream: a request that ends with the reading tool's result is answered by
/// quoting it; a request that offers the reading tool is answered by calling it; anything else
/// (the clients' side calls: titles, routing, summaries) gets a short text.
fn script(provider: Provider, reader: Reader) -> impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static {
    move |req| {
        let Ok(body) = req.json() else { return Reply::json(400, r#"{"error":"not json"}"#) };
        let seen = seen(provider, &body);
        if let Some(result) = seen.last_result {
            return answer(provider, Some(&format!("The notes say: {result}")), None);
        }
        if seen.tools.iter().any(|t| t == reader.tool) {
            return answer(provider, None, Some(&reader));
        }
        answer(provider, Some("ok"), None)
    }
}

/// A working directory with `notes.txt` holding a fresh secret word, and an empty home.
struct Workdir {
    root: tempfile::TempDir,
    secret: String,
}

impl Workdir {
    fn new() -> Workdir {
        let root = tempfile::tempdir().unwrap();
        let secret = format!("pineapple-{}", uuid::Uuid::new_v4().simple());
        std::fs::create_dir_all(root.path().join("work")).unwrap();
        std::fs::create_dir_all(root.path().join("home")).unwrap();
        std::fs::write(root.path().join("work/notes.txt"), format!("secret-word: {secret}\n")).unwrap();
        Workdir { root, secret }
    }

    fn work(&self) -> PathBuf {
        self.root.path().join("work")
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    fn notes(&self) -> String {
        self.work().join("notes.txt").display().to_string()
    }
}

/// Runs a client to completion (at most two minutes); its stdout and stderr.
async fn run(mut cmd: tokio::process::Command) -> (bool, String, String) {
    cmd.kill_on_drop(true).stdin(std::process::Stdio::null());
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("the client finished within two minutes")
        .expect("the client started");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Arbor with the scripted upstream behind `provider`, a member's token, and `alias` → the
/// upstream's model.
async fn gateway_for(provider: Provider, reader: Reader, aliases: &[&str]) -> (Api, String) {
    let api = api_with(|_| {}).await;
    api.mock.respond_with(provider, script(provider, reader));
    let target = match provider {
        Provider::OpenAi => "openai/gpt-4o-mini",
        Provider::Anthropic => "anthropic/claude-sonnet-4-5",
        Provider::Gemini => "gemini/gemini-2.5-flash",
    };
    for alias in aliases {
        let form = format!("alias={alias}&target={}", crate::support::urlencode(target));
        let res = api.app.post_form("/settings/aliases", &form, Some(&api.s)).await;
        assert_eq!(res.status(), 200, "alias {alias}");
    }
    let t = token(&api, "api", "").await;
    (api, t)
}

/// The tool round trip happened: the upstream saw a request carrying the file's content.
fn assert_round_trip(api: &Api, provider: Provider, secret: &str, stdout: &str, stderr: &str) {
    let carried = api.mock.requests_for(provider).iter().any(|r| r.body_text().contains(secret));
    assert!(carried, "no upstream request carried the tool result\nstdout: {stdout}\nstderr: {stderr}");
    assert!(
        stdout.contains(secret),
        "the final answer does not quote the file\nstdout: {stdout}\nstderr: {stderr}"
    );
    assert!(api.mock.problems().is_empty(), "{:?}", api.mock.problems());
}

async fn claude_code_on(provider: Provider) {
    let dir = Workdir::new();
    let reader = Reader { tool: "Read", arguments: json!({ "file_path": dir.notes() }) };
    let (api, t) = gateway_for(provider, reader, &["claude-sonnet-4-5", "claude-haiku-4-5"]).await;
    let mut cmd = tokio::process::Command::new(clients_bin("claude"));
    cmd.current_dir(dir.work())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.home())
        .env("ANTHROPIC_BASE_URL", api.app.origin())
        .env("ANTHROPIC_API_KEY", &t)
        .env("ANTHROPIC_MODEL", "claude-sonnet-4-5")
        .env("ANTHROPIC_SMALL_FAST_MODEL", "claude-haiku-4-5")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .args(["-p", "What is the secret word in notes.txt?", "--allowedTools", "Read"]);
    let (ok, stdout, stderr) = run(cmd).await;
    assert!(ok, "claude -p failed\nstdout: {stdout}\nstderr: {stderr}");
    assert_round_trip(&api, provider, &dir.secret, &stdout, &stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_completes_a_tool_turn_on_an_openai_upstream() {
    claude_code_on(Provider::OpenAi).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_completes_a_tool_turn_on_an_anthropic_upstream() {
    claude_code_on(Provider::Anthropic).await;
}

async fn gemini_cli_on(provider: Provider) {
    let dir = Workdir::new();
    let reader = Reader { tool: "read_file", arguments: json!({ "file_path": dir.notes() }) };
    let (api, t) = gateway_for(provider, reader, &["gemini-2.5-pro", "gemini-2.5-flash-lite"]).await;
    let settings = dir.home().join(".gemini");
    std::fs::create_dir_all(&settings).unwrap();
    let config = json!({ "security": { "auth": { "selectedType": "gemini-api-key" } },
        "privacy": { "usageStatisticsEnabled": false }, "general": { "disableAutoUpdate": true } });
    std::fs::write(settings.join("settings.json"), config.to_string()).unwrap();
    let mut cmd = tokio::process::Command::new(clients_bin("gemini"));
    cmd.current_dir(dir.work())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.home())
        .env("GOOGLE_GEMINI_BASE_URL", api.app.origin())
        .env("GEMINI_API_KEY", &t)
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .args(["-m", "gemini-2.5-pro", "-p", "What is the secret word in notes.txt?"]);
    let (ok, stdout, stderr) = run(cmd).await;
    assert!(ok, "gemini -p failed\nstdout: {stdout}\nstderr: {stderr}");
    assert_round_trip(&api, provider, &dir.secret, &stdout, &stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_completes_a_tool_turn_on_an_openai_upstream() {
    gemini_cli_on(Provider::OpenAi).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_completes_a_tool_turn_on_a_gemini_upstream() {
    gemini_cli_on(Provider::Gemini).await;
}

async fn codex_on(provider: Provider) {
    let dir = Workdir::new();
    let reader = Reader { tool: "exec_command", arguments: json!({ "cmd": "cat notes.txt" }) };
    let (api, t) = gateway_for(provider, reader, &["gpt-5-codex"]).await;
    let codex_home = dir.home().join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = format!(
        "model = \"gpt-5-codex\"\nmodel_provider = \"arbor\"\n\n[model_providers.arbor]\nname = \"Arbor\"\n\
         base_url = \"{}/v1\"\nenv_key = \"ARBOR_API_KEY\"\nwire_api = \"responses\"\n",
        api.app.origin()
    );
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    let mut cmd = tokio::process::Command::new(clients_bin("codex"));
    cmd.current_dir(dir.work())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.home())
        .env("CODEX_HOME", &codex_home)
        .env("ARBOR_API_KEY", &t)
        // Codex's own sandbox needs helper binaries it refuses to create under /tmp, where the
        // test's home is; what runs is `cat notes.txt` in the test's directory.
        .args(["exec", "--skip-git-repo-check", "--sandbox", "danger-full-access"])
        .arg("What is the secret word in notes.txt?");
    let (ok, stdout, stderr) = run(cmd).await;
    assert!(ok, "codex exec failed\nstdout: {stdout}\nstderr: {stderr}");
    assert_round_trip(&api, provider, &dir.secret, &stdout, &stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_completes_a_tool_turn_on_an_openai_upstream() {
    codex_on(Provider::OpenAi).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_completes_a_tool_turn_on_an_anthropic_upstream() {
    codex_on(Provider::Anthropic).await;
}
