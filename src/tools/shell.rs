//! run_shell_command: `/bin/sh -c` in an exposed folder, with a clean environment, a timeout and
//! capped output, inside bubblewrap when it works on this host.
//!
//! In the sandbox there is no network, the system folders are read-only, only the exposed folders
//! are writable, and the server's data dir, config and key files are masked. Without it the command
//! still gets an empty environment (so `ARBOR_MASTER_KEY` and every other server variable are
//! absent) and its own process group, which is killed on timeout, on cancellation and when the
//! command ends (no background process outlives its call).

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use rustix::process::{Pid, Signal};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::task::JoinHandle;

pub use limits::ProcessLimits;

use super::paths::{self, Resolved};
use super::{Args, RUN_SHELL_COMMAND, Root, ToolEnv, ToolOutput};

/// The only variables a command sees, besides HOME.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";
const LANG: &str = "C.UTF-8";
const TERM: &str = "dumb";

/// System folders made visible (read-only) in the sandbox; symbolic links among them are recreated.
const SYSTEM_PATHS: [&str; 7] = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc"];

/// How long to wait for the pipes to drain, or a killed process to be reaped.
const GRACE: Duration = Duration::from_secs(2);

/// Whether shell commands run inside bubblewrap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sandbox {
    /// Commands run inside bubblewrap, with this `bwrap` binary.
    Bubblewrap(PathBuf),
    /// Commands run directly, with a clean environment but the server's file and network access.
    Unsandboxed,
}

static UNSANDBOXED_WARNING: Once = Once::new();

impl Sandbox {
    /// Finds `bwrap` on PATH and checks it can create a sandbox here; otherwise warns once and returns Unsandboxed.
    pub async fn detect() -> Sandbox {
        let result = match find_on_path("bwrap") {
            None => Err("bubblewrap (bwrap) is not installed".to_string()),
            Some(bwrap) => probe(&bwrap).await.map(|()| Sandbox::Bubblewrap(bwrap)),
        };
        result.unwrap_or_else(|why| {
            UNSANDBOXED_WARNING.call_once(|| {
                tracing::warn!(
                    reason = %why,
                    "shell commands run UNSANDBOXED: they can read and write everything this server \
                     can and reach the network; install bubblewrap and allow user namespaces to sandbox them"
                );
            });
            Sandbox::Unsandboxed
        })
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Runs `true` in a sandbox built exactly as for a real command (without folders).
async fn probe(bwrap: &Path) -> Result<(), String> {
    let mut command = Command::new(bwrap);
    command
        .args(bwrap_args(&[], &[], Path::new("/tmp"), Path::new("/tmp"), ProcessLimits::default().tmp_bytes))
        .args(["--", "/bin/sh", "-c", "true"])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(10), command.output())
        .await
        .map_err(|_| format!("{} did not finish a trivial sandbox in 10 s", bwrap.display()))?
        .map_err(|e| format!("{} could not be run: {e}", bwrap.display()))?;
    if output.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        Err(format!(
            "{} cannot create a sandbox here ({}): {}",
            bwrap.display(),
            output.status,
            stderr.trim()
        ))
    }
}

/// What is mounted where, for the folders and the masks; applied parents first.
enum Mount {
    Bind(PathBuf),
    MaskDir(PathBuf),
    MaskFile(PathBuf),
}

impl Mount {
    fn path(&self) -> &Path {
        match self {
            Mount::Bind(p) | Mount::MaskDir(p) | Mount::MaskFile(p) => p,
        }
    }
}

/// The bubblewrap arguments (before `--`) for a command in `cwd` with the given folders and masks.
fn bwrap_args(roots: &[Root], hidden: &[PathBuf], cwd: &Path, home: &Path, tmp_bytes: u64) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut add = |items: &[&OsStr]| args.extend(items.iter().map(|s| s.to_os_string()));
    let s = OsStr::new;
    add(&[s("--unshare-all"), s("--die-with-parent"), s("--new-session"), s("--clearenv")]);
    for (key, value) in [("PATH", s(PATH)), ("HOME", home.as_os_str()), ("LANG", s(LANG)), ("TERM", s(TERM))]
    {
        add(&[s("--setenv"), s(key), value]);
    }
    let mut visible_system = Vec::new();
    for system in SYSTEM_PATHS {
        match std::fs::symlink_metadata(system) {
            // Merged /usr: /bin -> usr/bin and the like are recreated as links.
            Ok(m) if m.is_symlink() => {
                if let Ok(target) = std::fs::read_link(system) {
                    add(&[s("--symlink"), target.as_os_str(), s(system)]);
                }
            }
            Ok(_) => {
                add(&[s("--ro-bind-try"), s(system), s(system)]);
                visible_system.push(PathBuf::from(system));
            }
            Err(_) => {}
        }
    }
    let tmp_size = OsString::from(tmp_bytes.max(4096).to_string());
    add(&[s("--proc"), s("/proc"), s("--dev"), s("/dev"), s("--size"), &tmp_size, s("--tmpfs"), s("/tmp")]);

    let mut mounts: Vec<Mount> = roots.iter().map(|r| Mount::Bind(r.path.clone())).collect();
    mounts.extend(masks(roots, hidden, &visible_system));
    // Parents first, so a folder inside a masked one (or a mask inside a folder) ends up on top;
    // the sort is stable, so a mask of a folder itself comes after the folder.
    mounts.sort_by_key(|m| m.path().components().count());
    for mount in &mounts {
        match mount {
            Mount::Bind(p) => add(&[s("--bind"), p.as_os_str(), p.as_os_str()]),
            Mount::MaskDir(p) => add(&[s("--tmpfs"), p.as_os_str()]),
            Mount::MaskFile(p) => add(&[s("--ro-bind"), s("/dev/null"), p.as_os_str()]),
        }
    }
    // Read-only only now: bubblewrap must still create mount points in a mask for folders inside it.
    for mount in &mounts {
        if let Mount::MaskDir(p) = mount {
            add(&[s("--remount-ro"), p.as_os_str()]);
        }
    }
    add(&[s("--chdir"), cwd.as_os_str()]);
    args
}

/// Masks for the hidden paths the sandbox would otherwise show: those inside a folder or a system
/// tree, by the path given or the real one it resolves to, where the sandbox shows it.
fn masks(roots: &[Root], hidden: &[PathBuf], visible_system: &[PathBuf]) -> Vec<Mount> {
    let mut trees: Vec<(PathBuf, PathBuf)> = visible_system.iter().map(|p| (p.clone(), p.clone())).collect();
    for root in roots {
        trees.push((root.path.clone(), root.path.clone()));
        if let Ok(real) = std::fs::canonicalize(&root.path) {
            trees.push((real, root.path.clone()));
        }
    }
    let mut out: Vec<Mount> = Vec::new();
    for path in hidden {
        let Ok(meta) = std::fs::metadata(path) else { continue };
        let mut candidates = vec![path.clone()];
        candidates.extend(std::fs::canonicalize(path));
        for candidate in &candidates {
            for (host, shown_at) in &trees {
                let Ok(rest) = candidate.strip_prefix(host) else { continue };
                let at = shown_at.join(rest);
                if out.iter().any(|m| m.path() == at) {
                    continue;
                }
                out.push(if meta.is_dir() { Mount::MaskDir(at) } else { Mount::MaskFile(at) });
            }
        }
    }
    out
}

/// The minimal environment of a command.
fn minimal_env(home: &Path) -> [(&'static str, OsString); 4] {
    [
        ("PATH", PATH.into()),
        ("HOME", home.as_os_str().to_os_string()),
        ("LANG", LANG.into()),
        ("TERM", TERM.into()),
    ]
}

/// The working folder on the host and the exposed folder it is in.
fn resolve_cwd<'a>(env: &'a ToolEnv, cwd: Option<&str>) -> Result<(PathBuf, &'a Root), String> {
    let first = env.roots.first().ok_or_else(|| {
        "No folder is exposed to this session, so commands have nowhere to run. Ask the user to expose one."
            .to_string()
    })?;
    let loc = match paths::resolve(&env.roots, cwd.unwrap_or(&first.name))? {
        Resolved::Roots => match paths::resolve(&env.roots, &first.name)? {
            Resolved::In(loc) => loc,
            Resolved::Roots => return Err("The first exposed folder has no usable name.".to_string()),
        },
        Resolved::In(loc) => loc,
    };
    let root_dir = loc.open_root()?;
    let dir = if loc.is_root() {
        root_dir
    } else {
        root_dir.open_dir(&loc.rel).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotADirectory => format!("cwd {} is a file, not a folder.", loc.display),
            _ => loc.io_error(&e),
        })?
    };
    // The kernel's own name for the folder just opened beneath the root, so no link swapped in
    // afterwards can move the command elsewhere; it is then addressed by the folder's configured
    // path, which is where the sandbox shows it.
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd()));
    let real_root = std::fs::canonicalize(&loc.root.path);
    let host = match (opened, real_root) {
        (Ok(opened), Ok(real_root)) => {
            let rest = opened.strip_prefix(&real_root).map_err(|_| {
                format!("cwd {} leads outside its exposed folder, so it cannot be used.", loc.display)
            })?;
            if rest.as_os_str().is_empty() { loc.root.path.clone() } else { loc.root.path.join(rest) }
        }
        // No /proc: the folder was opened beneath the root a moment ago, so its path is inside.
        _ if loc.is_root() => loc.root.path.clone(),
        _ => loc.root.path.join(&loc.rel),
    };
    Ok((host, loc.root))
}

/// Kills the command's whole process group when dropped (timeout, cancellation, or the end of the call).
struct KillGroup(Option<Pid>);

impl Drop for KillGroup {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            // ESRCH (nothing left) is the normal case.
            let _ = rustix::process::kill_process_group(pid, Signal::KILL);
        }
    }
}

/// Aborts the pipe readers when dropped.
struct AbortOnDrop(Vec<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for handle in &self.0 {
            handle.abort();
        }
    }
}

/// The first `cap` bytes of a stream and how many bytes it had in all.
#[derive(Default)]
struct Capture {
    kept: Vec<u8>,
    total: u64,
}

/// Reads a pipe to its end, keeping the first `cap` bytes; keeps draining past the cap so the
/// command never blocks on a full pipe.
async fn drain(mut pipe: impl AsyncRead + Unpin, cap: usize, into: Arc<Mutex<Capture>>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut capture = into.lock().unwrap_or_else(|e| e.into_inner());
                let room = cap.saturating_sub(capture.kept.len());
                capture.kept.extend_from_slice(&buf[..n.min(room)]);
                capture.total += n as u64;
            }
        }
    }
}

fn take(capture: &Arc<Mutex<Capture>>) -> Capture {
    std::mem::take(&mut *capture.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Runs the call; every failure is an error output.
pub(super) async fn run_shell_command(arguments: &Value, env: &ToolEnv) -> ToolOutput {
    run(arguments, env).await.into()
}

async fn run(arguments: &Value, env: &ToolEnv) -> Result<ToolOutput, String> {
    let args = Args::new(RUN_SHELL_COMMAND, arguments, &["command", "cwd", "timeout_secs"])?;
    let command = args.string("command")?;
    let cwd = args.opt_string("cwd")?;
    let requested = args.opt_positive("timeout_secs")?;
    if command.trim().is_empty() {
        return Err("The command is empty.".to_string());
    }
    if command.contains('\0') {
        return Err("The command contains a NUL character, which a shell command cannot carry.".to_string());
    }
    let (cwd, root) = resolve_cwd(env, cwd)?;
    let limit = env.shell.timeout.max(Duration::from_secs(1));
    let timeout = requested.map_or(limit, |secs| Duration::from_secs(secs).min(limit));

    let limits = &env.shell.limits;
    let (program, args): (PathBuf, Vec<OsString>) = match &env.shell.sandbox {
        Sandbox::Bubblewrap(bwrap) => {
            let mut args =
                bwrap_args(&env.roots, &env.shell.hidden_paths, &cwd, &root.path, limits.tmp_bytes);
            args.extend(["--", "/bin/sh", "-c", &limits.prologue(true), "sh", command].map(OsString::from));
            (bwrap.clone(), args)
        }
        Sandbox::Unsandboxed => {
            let args = ["-c", &limits.prologue(false), "sh", command].map(OsString::from).to_vec();
            (PathBuf::from("/bin/sh"), args)
        }
    };
    let cgroup = limits::PidsCgroup::create(limits.processes);
    let (program, args) = match &cgroup {
        Some(cgroup) => cgroup.wrap(&program, args),
        None => (program, args),
    };
    let mut cmd = Command::new(program);
    cmd.args(args).env_clear();
    match &env.shell.sandbox {
        Sandbox::Bubblewrap(_) => cmd.current_dir("/"),
        Sandbox::Unsandboxed => cmd.envs(minimal_env(&root.path)).current_dir(&cwd),
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| format!("The command could not be started: {e}."))?;
    let group = KillGroup(child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw));

    let cap = env.shell.max_output_bytes;
    let (out, err) = (Arc::new(Mutex::new(Capture::default())), Arc::new(Mutex::new(Capture::default())));
    let mut readers = AbortOnDrop(Vec::new());
    if let Some(stdout) = child.stdout.take() {
        readers.0.push(tokio::spawn(drain(stdout, cap, out.clone())));
    }
    if let Some(stderr) = child.stderr.take() {
        readers.0.push(tokio::spawn(drain(stderr, cap, err.clone())));
    }

    let root_pid = child.id().unwrap_or(0);
    let waited = tokio::select! {
        waited = tokio::time::timeout(timeout, child.wait()) => Ok(waited),
        count = env.shell.limits.watch_processes(root_pid) => Err(count),
    };
    // Stops whatever the command left running in the background, and on timeout the command itself.
    drop(group);
    let status = match waited {
        Ok(Ok(Ok(status))) => Some(status),
        Ok(Ok(Err(e))) => return Err(format!("Waiting for the command failed: {e}.")),
        Ok(Err(_)) => {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(GRACE, child.wait()).await;
            None
        }
        Err(count) => {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(GRACE, child.wait()).await;
            return Err(format!(
                "The command started {count} processes, more than the limit of {}, and was stopped \
                 with everything it started.",
                env.shell.limits.processes
            ));
        }
    };
    for reader in &mut readers.0 {
        let _ = tokio::time::timeout(GRACE, reader).await;
    }
    let (stdout, stderr) = (take(&out), take(&err));
    let body = render(status, &stdout, &stderr);
    match status {
        Some(_) => Ok(ToolOutput::ok(body)),
        None => Ok(ToolOutput::error(format!(
            "The command timed out after {} s and was stopped.\n{body}",
            timeout.as_secs()
        ))),
    }
}

/// `exit code N`, then the stdout and stderr sections, each with a note if it was cut.
fn render(status: Option<ExitStatus>, stdout: &Capture, stderr: &Capture) -> String {
    let mut text = match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exit code {code}\n"),
            (None, Some(signal)) => match limits::signal_note(signal) {
                Some(note) => format!("killed by signal {signal} ({note})\n"),
                None => format!("killed by signal {signal}\n"),
            },
            (None, None) => "exit status unknown\n".to_string(),
        },
        None => String::new(),
    };
    if stdout.total == 0 && stderr.total == 0 {
        text.push_str("(no output)\n");
    }
    for (name, capture) in [("stdout", stdout), ("stderr", stderr)] {
        if capture.total == 0 {
            continue;
        }
        text.push_str(&format!("--- {name} ---\n"));
        text.push_str(&String::from_utf8_lossy(&capture.kept));
        if !text.ends_with('\n') {
            text.push('\n');
        }
        if capture.total > capture.kept.len() as u64 {
            text.push_str(&format!(
                "[{name} cut: showing the first {} of {} bytes; redirect to a file and read parts of it, \
                 or filter with grep/head/tail]\n",
                capture.kept.len(),
                capture.total
            ));
        }
    }
    text
}

mod limits;
#[cfg(test)]
mod tests;
