//! The agent's built-in tools: files inside the exposed folders, a shell command, and a web fetch.
//!
//! Everything the model sends is untrusted. Paths are resolved beneath an exposed folder with
//! openat-style resolution ([`paths`]), shell commands run with a clean environment (inside
//! bubblewrap when it works here), and fetches go through the SSRF guard ([`crate::netguard`]).
//! Every failure comes back to the model as a [`ToolOutput`] with `is_error` and a message that says
//! what to do differently; nothing here panics on bad input.

mod fs;
pub mod html;
pub mod mcp;
mod paths;
mod shell;
mod web;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::netguard::AllowedRanges;
use crate::providers::types::ToolSpec;

pub use shell::{ProcessLimits, Sandbox};

/// How risky a call is; the approval policy reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Reads files inside the exposed folders.
    Read,
    /// Creates or changes files inside the exposed folders.
    Write,
    /// Runs a command.
    Exec,
    /// Talks to the network.
    Network,
}

impl Risk {
    /// The lowercase name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Read => "read",
            Risk::Write => "write",
            Risk::Exec => "exec",
            Risk::Network => "network",
        }
    }
}

/// A folder the agent may use, addressed by the model as `name` and living at host directory `path`.
///
/// `name` is workspace-relative (`notes`, `projects/a`) or, for a host folder an admin allowed,
/// absolute (`/srv/data`); `path` is an existing absolute directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// How the model addresses the folder.
    pub name: String,
    /// The absolute host directory.
    pub path: PathBuf,
}

/// Where and how tools may act for one run.
#[derive(Debug, Clone)]
pub struct ToolEnv {
    /// The exposed folders; the first is the shell's default working directory.
    pub roots: Vec<Root>,
    /// How much of a file read_file returns at most.
    pub read_max_bytes: usize,
    /// The largest content write_file and edit_file write.
    pub write_max_bytes: usize,
    /// Limits and sandbox for run_shell_command.
    pub shell: ShellLimits,
    /// Limits and allowed ranges for web_fetch.
    pub fetch: FetchLimits,
}

impl Default for ToolEnv {
    fn default() -> Self {
        ToolEnv {
            roots: Vec::new(),
            read_max_bytes: 256 * 1024,
            write_max_bytes: 2 * 1024 * 1024,
            shell: ShellLimits::default(),
            fetch: FetchLimits::default(),
        }
    }
}

/// Limits for run_shell_command.
#[derive(Debug, Clone)]
pub struct ShellLimits {
    /// The longest a command may run; the model may only ask for less.
    pub timeout: Duration,
    /// How much of stdout and of stderr (each) is returned.
    pub max_output_bytes: usize,
    /// Whether commands run inside bubblewrap.
    pub sandbox: Sandbox,
    /// Host paths (data dir, config file, master-key file) that must not be readable from the sandbox.
    pub hidden_paths: Vec<PathBuf>,
    /// Memory, processes, file size, CPU time and /tmp size of each command.
    pub limits: ProcessLimits,
}

impl Default for ShellLimits {
    fn default() -> Self {
        ShellLimits {
            timeout: Duration::from_secs(60),
            max_output_bytes: 64 * 1024,
            sandbox: Sandbox::Unsandboxed,
            hidden_paths: Vec::new(),
            limits: ProcessLimits::default(),
        }
    }
}

/// Limits for web_fetch.
#[derive(Debug, Clone)]
pub struct FetchLimits {
    /// The longest a fetch may take, redirects included.
    pub timeout: Duration,
    /// How many bytes of a body are downloaded at most.
    pub max_bytes: usize,
    /// How many characters of text are returned at most.
    pub max_text_chars: usize,
    /// Address ranges the SSRF guard lets through although they are private.
    pub allowed: AllowedRanges,
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits {
            timeout: Duration::from_secs(20),
            max_bytes: 2 * 1024 * 1024,
            max_text_chars: 100_000,
            allowed: AllowedRanges::none(),
        }
    }
}

/// What a call produced, for the model and for the UI.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// What the model sees.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// A unified diff of a file change, for the UI card.
    pub diff: Option<String>,
}

impl ToolOutput {
    /// A successful result without a diff.
    pub fn ok(content: impl Into<String>) -> ToolOutput {
        ToolOutput { content: content.into(), is_error: false, diff: None }
    }

    /// A failed call, with a message telling the model what went wrong.
    pub fn error(content: impl Into<String>) -> ToolOutput {
        ToolOutput { content: content.into(), is_error: true, diff: None }
    }
}

impl From<Result<ToolOutput, String>> for ToolOutput {
    fn from(result: Result<ToolOutput, String>) -> Self {
        result.unwrap_or_else(ToolOutput::error)
    }
}

/// A built-in tool's description.
#[derive(Debug, Clone)]
pub struct BuiltinTool {
    /// Name, description and argument schema, as sent to the provider.
    pub spec: ToolSpec,
    /// How risky a call is.
    pub risk: Risk,
}

const LIST_DIRECTORY: &str = "list_directory";
const READ_FILE: &str = "read_file";
const WRITE_FILE: &str = "write_file";
const EDIT_FILE: &str = "edit_file";
const RUN_SHELL_COMMAND: &str = "run_shell_command";
const WEB_FETCH: &str = "web_fetch";

const NAMES: [&str; 6] = [LIST_DIRECTORY, READ_FILE, WRITE_FILE, EDIT_FILE, RUN_SHELL_COMMAND, WEB_FETCH];

const PATH_HELP: &str = "Path starting with an exposed folder's name, e.g. \"notes/todo.md\".";

fn schema(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn tool(name: &str, description: &str, parameters: Value, risk: Risk) -> BuiltinTool {
    BuiltinTool {
        spec: ToolSpec {
            name: name.to_string(),
            description: description.to_string(),
            parameters: parameters.into(),
        },
        risk,
    }
}

/// The built-in tools, in a fixed order: list_directory, read_file, write_file, edit_file, run_shell_command, web_fetch.
pub fn builtins() -> Vec<BuiltinTool> {
    vec![
        tool(
            LIST_DIRECTORY,
            "List a folder's entries (folders end with /, files show their size). With no path or \".\", \
             list the exposed folders.",
            schema(
                json!({"path": {"type": "string", "description": "Folder to list; empty lists the exposed folders."}}),
                &[],
            ),
            Risk::Read,
        ),
        tool(
            READ_FILE,
            "Read a UTF-8 text file. Large files are cut; ask for a line range to read further.",
            schema(
                json!({
                    "path": {"type": "string", "description": PATH_HELP},
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)."},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line to return (inclusive)."},
                }),
                &["path"],
            ),
            Risk::Read,
        ),
        tool(
            WRITE_FILE,
            "Create or replace a text file with the given content (missing parent folders are created).",
            schema(
                json!({
                    "path": {"type": "string", "description": PATH_HELP},
                    "content": {"type": "string", "description": "The complete new content of the file."},
                }),
                &["path", "content"],
            ),
            Risk::Write,
        ),
        tool(
            EDIT_FILE,
            "Replace one exact, unique occurrence of old_text in a file with new_text. Include enough \
             surrounding lines in old_text that it matches exactly once.",
            schema(
                json!({
                    "path": {"type": "string", "description": PATH_HELP},
                    "old_text": {"type": "string", "description": "Exact text to replace; must occur exactly once."},
                    "new_text": {"type": "string", "description": "Replacement text (may be empty)."},
                }),
                &["path", "old_text", "new_text"],
            ),
            Risk::Write,
        ),
        tool(
            RUN_SHELL_COMMAND,
            "Run a command with /bin/sh -c in an exposed folder, without network access where sandboxed. \
             Returns the exit code, stdout and stderr.",
            schema(
                json!({
                    "command": {"type": "string", "description": "The shell command line."},
                    "cwd": {"type": "string", "description": "Working folder; defaults to the first exposed folder."},
                    "timeout_secs": {"type": "integer", "minimum": 1, "description": "Stop the command after this many seconds (cannot exceed the server's limit)."},
                }),
                &["command"],
            ),
            Risk::Exec,
        ),
        tool(
            WEB_FETCH,
            "Fetch a public http(s) URL and return it as readable text (HTML is converted).",
            schema(json!({"url": {"type": "string", "description": "The http or https URL."}}), &["url"]),
            Risk::Network,
        ),
    ]
}

/// Whether `name` is one of the built-in tools.
pub fn is_builtin(name: &str) -> bool {
    NAMES.contains(&name)
}

/// Runs one built-in call; every failure (bad arguments, unknown tool, I/O) comes back as an error output.
///
/// Cancelling means dropping the future: a running shell command is then killed.
pub async fn run_builtin(name: &str, arguments: &Value, env: &ToolEnv) -> ToolOutput {
    let output = match name {
        LIST_DIRECTORY | READ_FILE | WRITE_FILE | EDIT_FILE => {
            // cap-std is blocking; keep it off the async workers.
            let (name, arguments, env) = (name.to_string(), arguments.clone(), env.clone());
            tokio::task::spawn_blocking(move || fs::run(&name, &arguments, &env))
                .await
                .unwrap_or_else(|_| ToolOutput::error("The file operation failed unexpectedly; try again."))
        }
        RUN_SHELL_COMMAND => shell::run_shell_command(arguments, env).await,
        WEB_FETCH => web::web_fetch(arguments, env).await,
        _ => ToolOutput::error(format!(
            "There is no built-in tool named \"{name}\"; the tools are: {}.",
            NAMES.join(", ")
        )),
    };
    tracing::debug!(tool = name, is_error = output.is_error, "built-in tool call finished");
    output
}

/// The paths a call would write, as the model gave them: `Some` for write_file and edit_file, else `None`.
pub fn write_paths(name: &str, arguments: &Value) -> Option<Vec<String>> {
    match name {
        WRITE_FILE | EDIT_FILE => {
            Some(arguments.get("path").and_then(Value::as_str).map(str::to_string).into_iter().collect())
        }
        _ => None,
    }
}

/// The arguments as JSON with object keys sorted recursively and no whitespace, to hash a call.
pub fn canonical_arguments(arguments: &Value) -> String {
    let mut out = String::new();
    write_canonical(arguments, &mut out);
    out
}

// Written by hand because serde_json's map keeps insertion order when any crate in the tree turns
// on `preserve_order`.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// A call's arguments, checked against the names a tool accepts; messages are written for the model.
pub(crate) struct Args<'a> {
    tool: &'a str,
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// Refuses anything but an object, and keys the tool does not take.
    pub(crate) fn new(tool: &'a str, value: &'a Value, accepted: &[&str]) -> Result<Args<'a>, String> {
        let map = value.as_object().ok_or_else(|| {
            format!("{tool} takes a JSON object of arguments ({}), not {}.", accepted.join(", "), kind(value))
        })?;
        if let Some(unknown) = map.keys().find(|k| !accepted.contains(&k.as_str())) {
            return Err(format!("{tool} has no argument \"{unknown}\"; it takes: {}.", accepted.join(", ")));
        }
        Ok(Args { tool, map })
    }

    /// A required string.
    pub(crate) fn string(&self, key: &str) -> Result<&'a str, String> {
        self.opt_string(key)?.ok_or_else(|| format!("{} needs the argument \"{key}\" (a string).", self.tool))
    }

    /// An optional string; `null` counts as absent.
    pub(crate) fn opt_string(&self, key: &str) -> Result<Option<&'a str>, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!("The argument \"{key}\" must be a string, not {}.", kind(other))),
        }
    }

    /// An optional whole number of at least 1; `null` counts as absent.
    pub(crate) fn opt_positive(&self, key: &str) -> Result<Option<u64>, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if v >= 1 => Ok(Some(v)),
                _ => Err(format!("The argument \"{key}\" must be a whole number of at least 1, not {n}.")),
            },
            Some(other) => Err(format!(
                "The argument \"{key}\" must be a whole number of at least 1, not {}.",
                kind(other)
            )),
        }
    }
}

/// How a JSON value is named in messages ("a number", "an array").
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_in_order_with_strict_schemas() {
        let tools = builtins();
        let names: Vec<&str> = tools.iter().map(|t| t.spec.name.as_str()).collect();
        assert_eq!(names, NAMES);
        let risks: Vec<Risk> = tools.iter().map(|t| t.risk).collect();
        assert_eq!(risks, [Risk::Read, Risk::Read, Risk::Write, Risk::Write, Risk::Exec, Risk::Network]);
        for t in &tools {
            let p = &t.spec.parameters;
            assert_eq!(p["type"], "object", "{}", t.spec.name);
            assert_eq!(p["additionalProperties"], false, "{}", t.spec.name);
            let props = p["properties"].as_object().unwrap();
            for req in p["required"].as_array().unwrap() {
                assert!(props.contains_key(req.as_str().unwrap()), "{}: {req}", t.spec.name);
            }
            for (key, prop) in props {
                assert!(prop["type"].is_string(), "{}.{key}", t.spec.name);
                assert!(prop["description"].is_string(), "{}.{key}", t.spec.name);
            }
            assert!(is_builtin(&t.spec.name));
        }
        assert!(!is_builtin("rm_rf"));
        assert!(!is_builtin(""));
    }

    #[test]
    fn risk_names() {
        assert_eq!(Risk::Exec.as_str(), "exec");
        assert_eq!(serde_json::to_string(&Risk::Network).unwrap(), "\"network\"");
        for r in [Risk::Read, Risk::Write, Risk::Exec, Risk::Network] {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
    }

    #[test]
    fn canonical_arguments_sort_keys_recursively() {
        let a: Value =
            serde_json::from_str(r#"{"b": 1, "a": {"z": [3, {"y": 1, "x": "é\n"}], "c": null}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a": {"c": null, "z": [3, {"x": "é\n", "y": 1}]}, "b": 1}"#).unwrap();
        assert_eq!(canonical_arguments(&a), canonical_arguments(&b));
        assert_eq!(canonical_arguments(&a), r#"{"a":{"c":null,"z":[3,{"x":"é\n","y":1}]},"b":1}"#);
        // Array order is meaningful and kept.
        assert_ne!(canonical_arguments(&json!([1, 2])), canonical_arguments(&json!([2, 1])));
        assert_ne!(canonical_arguments(&json!({"a": "1"})), canonical_arguments(&json!({"a": 1})));
        assert_eq!(canonical_arguments(&json!("x\"y")), r#""x\"y""#);
        assert_eq!(canonical_arguments(&json!({})), "{}");
    }

    #[test]
    fn write_paths_only_for_writing_tools() {
        let args = json!({"path": "notes/a.md", "content": "x"});
        assert_eq!(write_paths("write_file", &args), Some(vec!["notes/a.md".to_string()]));
        assert_eq!(write_paths("edit_file", &args), Some(vec!["notes/a.md".to_string()]));
        assert_eq!(write_paths("edit_file", &json!({"path": 5})), Some(vec![]));
        assert_eq!(write_paths("read_file", &args), None);
        assert_eq!(write_paths("run_shell_command", &json!({"command": "touch x"})), None);
    }

    #[tokio::test]
    async fn unknown_tool_and_bad_argument_shapes_are_errors() {
        let env = ToolEnv::default();
        let out = run_builtin("delete_everything", &json!({}), &env).await;
        assert!(out.is_error);
        assert!(out.content.contains("no built-in tool named \"delete_everything\""), "{}", out.content);
        assert!(out.content.contains("read_file"), "{}", out.content);

        for name in NAMES {
            let out = run_builtin(name, &json!("just a string"), &env).await;
            assert!(out.is_error, "{name}");
            assert!(out.content.contains("JSON object"), "{name}: {}", out.content);
            let out = run_builtin(name, &json!({"bogus": 1}), &env).await;
            assert!(out.is_error, "{name}");
            assert!(out.content.contains("no argument \"bogus\""), "{name}: {}", out.content);
        }
    }

    #[test]
    fn args_messages() {
        let v = json!({"path": 5, "n": 0, "m": "3", "s": "ok", "z": null});
        let args = Args::new("read_file", &v, &["path", "n", "m", "s", "z"]).unwrap();
        assert_eq!(args.string("path").unwrap_err(), "The argument \"path\" must be a string, not a number.");
        assert_eq!(args.string("z").unwrap_err(), "read_file needs the argument \"z\" (a string).");
        assert_eq!(args.opt_string("z").unwrap(), None);
        assert_eq!(args.string("s").unwrap(), "ok");
        assert!(args.opt_positive("n").unwrap_err().contains("at least 1, not 0"));
        assert!(args.opt_positive("m").unwrap_err().contains("not a string"));
        assert_eq!(args.opt_positive("z").unwrap(), None);
    }
}
