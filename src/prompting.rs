//! The system prompt's template engine and the instruction files it may quote.
//!
//! Each render uses a fresh Tera instance with no templates loaded, so a prompt cannot include,
//! extend or import anything (the page templates included). Loops cannot nest and the output is
//! capped.
//!
//! That is not enough: Tera builds intermediate values (`set` concatenations, `join` with a
//! computed separator, big `range`s) without any bound, and a failed allocation aborts a Rust
//! process, with every other member's live runs in it. Tera offers no way to bound them, so a
//! template is rendered in a child process: this same binary, started as `arbor render-prompt`,
//! which first limits its own memory (`RLIMIT_DATA`) and CPU time (`RLIMIT_CPU`), then renders
//! and exits. A template that needs more dies alone, and its author gets a clear error.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Largest rendered system prompt, in bytes.
pub const MAX_OUTPUT_BYTES: usize = 128 * 1024;

/// Largest instruction file quoted into a prompt, in bytes; longer ones are cut.
pub const MAX_INSTRUCTION_BYTES: usize = 16 * 1024;

/// Instruction files looked for at the top of every exposed folder, in this order.
pub const INSTRUCTION_FILES: [&str; 3] = ["AGENTS.md", "ARBOR.md", "GEMINI.md"];

/// What went wrong with a template, for the person who wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, serde::Deserialize)]
#[error("{}", match .line { Some(l) => format!("line {l}: {}", .message), None => .message.clone() })]
pub struct TemplateError {
    /// 1-based line of the problem, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

fn error(line: Option<usize>, message: impl Into<String>) -> TemplateError {
    TemplateError { line, message: message.into() }
}

/// Tags a prompt may not use: they reach other templates or define reusable, recursive parts.
const FORBIDDEN_TAGS: [&str; 7] = ["include", "extends", "import", "component", "macro", "block", "raw"];

/// Checks the template's tags without rendering it: no forbidden tags, no nested loops.
pub fn check_tags(template: &str) -> Result<(), TemplateError> {
    let mut loop_depth = 0usize;
    let mut rest = template;
    let mut offset = 0;
    while let Some(start) = rest.find("{%") {
        let line = template[..offset + start].matches('\n').count() + 1;
        let after = &rest[start + 2..];
        let Some(end) = after.find("%}") else {
            return Err(error(Some(line), "a tag opened with {% is never closed with %}"));
        };
        let body = after[..end].trim_start_matches('-').trim();
        let word = body.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').next().unwrap_or("");
        if FORBIDDEN_TAGS.contains(&word) {
            return Err(error(Some(line), format!("the {word} tag is not available in system prompts")));
        }
        match word {
            "for" => {
                if loop_depth > 0 {
                    return Err(error(Some(line), "loops cannot be nested in system prompts"));
                }
                loop_depth += 1;
            }
            "endfor" => loop_depth = loop_depth.saturating_sub(1),
            _ => {}
        }
        let consumed = start + 2 + end + 2;
        offset += consumed;
        rest = &rest[consumed..];
    }
    Ok(())
}

/// A writer that refuses to grow past a limit.
struct Capped {
    out: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.out.len() + buf.len() > self.limit {
            self.overflowed = true;
            return Err(std::io::Error::other("output limit"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Reads Tera's report ("error: …" then "--> name:LINE:COL") into a line and a message.
fn from_tera(e: &tera::Error) -> TemplateError {
    let report = e.to_string();
    let message = report
        .lines()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .unwrap_or_else(|| report.lines().next().unwrap_or("the template could not be rendered"))
        .trim()
        .to_string();
    let line = report
        .lines()
        .find_map(|l| l.trim().strip_prefix("--> "))
        .and_then(|loc| loc.rsplit(':').nth(1))
        .and_then(|n| n.parse().ok());
    error(line, message)
}

/// Renders a template in this process. Only for the `render-prompt` child, Arbor's own built-in
/// templates and unit tests: a hostile template can exhaust the process that runs this. The
/// server renders members' templates with [`render`].
pub fn render_in_process<V: Serialize>(template: &str, vars: &V) -> Result<String, TemplateError> {
    check_tags(template)?;
    let context = tera::Context::from_serialize(vars).map_err(|e| error(None, e.to_string()))?;
    let tera = tera::Tera::new();
    let mut out = Capped { out: Vec::new(), limit: MAX_OUTPUT_BYTES, overflowed: false };
    match tera.render_str_to(template, &context, false, &mut out) {
        Ok(()) => String::from_utf8(out.out).map_err(|_| error(None, "the output is not valid text")),
        Err(_) if out.overflowed => {
            Err(error(None, format!("the rendered prompt is longer than {} KiB", MAX_OUTPUT_BYTES / 1024)))
        }
        Err(e) => Err(from_tera(&e)),
    }
}

/// Memory the child may use for its data (heap and anonymous mappings), bytes.
const CHILD_DATA_BYTES: u64 = 96 * 1024 * 1024;
/// CPU time the child may use, seconds.
const CHILD_CPU_SECS: u64 = 2;
/// Wall-clock time a render may take, queueing included.
const RENDER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// Largest job (template plus variables) handed to the child, bytes.
const MAX_JOB_BYTES: usize = 1024 * 1024;

/// The binary that renders templates (set once at start; this binary when unset).
static RENDERER: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Renders running at once, at most one per core: a flood of previews cannot fork-bomb the host.
fn renders() -> &'static tokio::sync::Semaphore {
    static RENDERS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    RENDERS.get_or_init(|| {
        tokio::sync::Semaphore::new(std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2))
    })
}

/// Chooses the binary that renders templates (`agent.prompt_renderer`; empty: this binary). The
/// first call wins: it is one per process.
pub fn set_renderer(path: Option<PathBuf>) {
    if let Some(path) = path.or_else(|| std::env::current_exe().ok()) {
        let _ = RENDERER.set(path);
    }
}

fn too_big() -> TemplateError {
    error(None, "the template needs too much memory or time to render; simplify it")
}

/// Renders a system prompt template with these variables (no HTML escaping: it is plain text),
/// in a child process with hard limits (see the module documentation).
pub async fn render<V: Serialize>(template: &str, vars: &V) -> Result<String, TemplateError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    check_tags(template)?;
    let job = serde_json::to_vec(&serde_json::json!({ "template": template, "vars": vars }))
        .map_err(|e| error(None, e.to_string()))?;
    if job.len() > MAX_JOB_BYTES {
        return Err(error(None, "the template is too long"));
    }
    let exe = match RENDERER.get() {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(|e| error(None, format!("cannot render: {e}")))?,
    };
    let work = async move {
        let _permit = renders().acquire().await.map_err(|_| too_big())?;
        let mut child = tokio::process::Command::new(exe)
            .arg("render-prompt")
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                tracing::error!(error = %e, "cannot start the prompt renderer");
                error(None, "the template could not be rendered right now; try again")
            })?;
        if let Some(mut stdin) = child.stdin.take() {
            // A child that dies early closes its end: the exit status says why.
            let _ = stdin.write_all(&job).await;
        }
        let mut out = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            // The child caps its output; one byte of JSON framing more than that is a failure.
            let limit = (MAX_OUTPUT_BYTES * 2 + 4096) as u64;
            let _ = stdout.take(limit).read_to_end(&mut out).await;
        }
        let status = child.wait().await.map_err(|_| too_big())?;
        if !status.success() {
            return Err(too_big());
        }
        serde_json::from_slice::<Result<String, TemplateError>>(&out).map_err(|_| too_big())?
    };
    tokio::time::timeout(RENDER_TIMEOUT, work).await.unwrap_or_else(|_| Err(too_big()))
}

/// `arbor render-prompt`: limits this process, reads one job from stdin, renders it and writes
/// the outcome as JSON to stdout. Runs before any thread is started.
pub fn child_main() -> std::process::ExitCode {
    use rustix::process::{Resource, Rlimit, setrlimit};
    use std::io::Read;
    let limit = |r, n| setrlimit(r, Rlimit { current: Some(n), maximum: Some(n) });
    if limit(Resource::Data, CHILD_DATA_BYTES).is_err()
        || limit(Resource::Cpu, CHILD_CPU_SECS).is_err()
        || limit(Resource::Core, 0).is_err()
        || limit(Resource::Fsize, 0).is_err()
    {
        return std::process::ExitCode::FAILURE;
    }
    let mut job = Vec::new();
    if std::io::stdin().take(MAX_JOB_BYTES as u64 + 1).read_to_end(&mut job).is_err()
        || job.len() > MAX_JOB_BYTES
    {
        return std::process::ExitCode::FAILURE;
    }
    #[derive(serde::Deserialize)]
    struct Job {
        template: String,
        vars: serde_json::Value,
    }
    let Ok(job) = serde_json::from_slice::<Job>(&job) else { return std::process::ExitCode::FAILURE };
    let outcome = render_in_process(&job.template, &job.vars);
    match serde_json::to_writer(std::io::stdout().lock(), &outcome) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(_) => std::process::ExitCode::FAILURE,
    }
}

/// An instruction file found in an exposed folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstructionFile {
    /// Path relative to the workspace folder, e.g. `app/AGENTS.md`.
    pub path: String,
    /// Its text, cut at [`MAX_INSTRUCTION_BYTES`].
    pub content: String,
}

/// The folder of a workspace under the data directory.
pub fn workspace_dir(data_dir: &Path, workspace_id: uuid::Uuid) -> PathBuf {
    data_dir.join("workspaces").join(workspace_id.to_string())
}

/// The instruction files at the top of each exposed folder. A folder that is missing or that
/// resolves (symlinks included) outside the workspace folder is skipped.
pub fn instruction_files(workspace: &Path, roots: &[String]) -> Vec<InstructionFile> {
    let Ok(base) = workspace.canonicalize() else { return Vec::new() };
    let mut found = Vec::new();
    for root in roots {
        let Ok(dir) = base.join(root).canonicalize() else { continue };
        if !dir.starts_with(&base) {
            continue;
        }
        for name in INSTRUCTION_FILES {
            let Ok(file) = dir.join(name).canonicalize() else { continue };
            if !file.starts_with(&base) || !file.is_file() {
                continue;
            }
            let Ok(bytes) = read_prefix(&file, MAX_INSTRUCTION_BYTES) else { continue };
            let rel = file.strip_prefix(&base).unwrap_or(&file).to_string_lossy().into_owned();
            found.push(InstructionFile { path: rel, content: String::from_utf8_lossy(&bytes).into_owned() });
        }
    }
    found
}

fn read_prefix(path: &Path, limit: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::fs::File::open(path)?.take(limit as u64).read_to_end(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_variables_and_loops() {
        let vars = serde_json::json!({ "user": { "name": "Ada" }, "roots": ["a", "b"] });
        let out =
            render_in_process("Hi {{ user.name }}.{% for r in roots %} [{{ r }}]{% endfor %} <b>", &vars)
                .unwrap();
        assert_eq!(out, "Hi Ada. [a] [b] <b>", "plain text, not escaped");
    }

    #[test]
    fn errors_carry_their_line() {
        let vars = serde_json::json!({});
        let e = render_in_process("one\ntwo {{ nope.deeper }}\n", &vars).unwrap_err();
        assert_eq!(e.line, Some(2), "{e:?}");
        let e = render_in_process("fine\n\n{% if %}", &vars).unwrap_err();
        assert_eq!(e.line, Some(3), "{e:?}");
        assert!(!e.message.is_empty());
    }

    #[test]
    fn the_sandbox_refuses_other_templates_nesting_and_floods() {
        let vars = serde_json::json!({ "s": "x" });
        for bad in [
            "{% include \"layouts/base.html\" %}",
            "{% extends \"layouts/base.html\" %}",
            "{%- import \"x\" as y -%}",
            "{% component c() %}{% endcomponent %}",
        ] {
            let e = render_in_process(bad, &vars).unwrap_err();
            assert!(e.message.contains("not available"), "{bad}: {e:?}");
        }
        let e = render_in_process(
            "a\n{% for a in range(end=3) %}{% for b in range(end=3) %}{% endfor %}{% endfor %}",
            &vars,
        )
        .unwrap_err();
        assert_eq!((e.line, e.message.contains("nested")), (Some(2), true));
        // Two loops one after the other are fine.
        assert_eq!(
            render_in_process(
                "{% for a in range(end=2) %}a{% endfor %}{% for b in s %}{{ b }}{% endfor %}",
                &vars
            )
            .unwrap(),
            "aax"
        );
        let e = render_in_process("{% for i in range(end=100000) %}{{ \"0123456789\" }}{% endfor %}", &vars)
            .unwrap_err();
        assert!(e.message.contains("longer than"), "{e:?}");
        assert!(render_in_process("{{ get_env(name=\"HOME\") }}", &vars).is_err(), "no environment access");
    }

    #[test]
    fn instruction_files_stay_inside_the_workspace() {
        let tmp = std::env::temp_dir().join(format!("arbor-prompt-{}", uuid::Uuid::new_v4()));
        let ws = tmp.join("ws");
        std::fs::create_dir_all(ws.join("app")).unwrap();
        std::fs::create_dir_all(tmp.join("outside")).unwrap();
        std::fs::write(ws.join("app/AGENTS.md"), "Use tabs.").unwrap();
        std::fs::write(ws.join("app/GEMINI.md"), "x".repeat(MAX_INSTRUCTION_BYTES + 10)).unwrap();
        std::fs::write(tmp.join("outside/AGENTS.md"), "secret").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(tmp.join("outside"), ws.join("escape")).unwrap();
        let found = instruction_files(&ws, &["app".into(), "escape".into(), "missing".into()]);
        let paths: Vec<&str> = found.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["app/AGENTS.md", "app/GEMINI.md"]);
        assert_eq!(found[0].content, "Use tabs.");
        assert_eq!(found[1].content.len(), MAX_INSTRUCTION_BYTES);
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
