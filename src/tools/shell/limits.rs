//! Resource limits on every shell command: memory, processes, file size, CPU time and the size of
//! the sandbox's /tmp, so a fork bomb, a memory hog, a huge write or a spin ends that command only.
//!
//! No cgroup can be assumed (containers rarely delegate one), so the limits are rlimits, set by a
//! short shell prologue before the command runs and inherited by everything it starts (no
//! `unsafe` pre-exec hook: the crate forbids unsafe code). The process count is enforced three
//! ways, because the kernel never applies RLIMIT_NPROC to root and a fork bomb fills the pid space
//! in milliseconds: RLIMIT_NPROC inside the sandbox (counted per user namespace, so the server's
//! own threads do not count); a `pids` cgroup per command when the host lets this process create
//! one (cgroup v1's pids hierarchy, e.g. a server run as root); and a watchdog that counts the
//! command's process tree and stops it past the limit.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How often the watchdog counts the command's processes.
const WATCH_INTERVAL: Duration = Duration::from_millis(50);

/// The resources one shell command (with everything it starts) may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessLimits {
    /// Data segment (heap and private writable mappings) of each process, bytes.
    pub memory_bytes: u64,
    /// Processes (and threads) running at once.
    pub processes: u32,
    /// Largest file a process may write, bytes.
    pub file_bytes: u64,
    /// CPU time of each process, seconds.
    pub cpu_secs: u64,
    /// Size of the sandbox's private /tmp, bytes.
    pub tmp_bytes: u64,
}

impl Default for ProcessLimits {
    fn default() -> Self {
        ProcessLimits {
            memory_bytes: 1024 * 1024 * 1024,
            processes: 256,
            file_bytes: 1024 * 1024 * 1024,
            cpu_secs: 60,
            tmp_bytes: 256 * 1024 * 1024,
        }
    }
}

impl ProcessLimits {
    /// The shell prologue that sets the limits (soft and hard, so the command cannot raise them:
    /// the sandbox drops every capability), then runs the command (`$1`) in a fresh shell exactly
    /// as it was given. The process cap is only set in the sandbox, where it counts the sandbox's
    /// own processes; outside, it would count every process of the server's user.
    pub(super) fn prologue(&self, in_sandbox: bool) -> String {
        let data_kib = (self.memory_bytes / 1024).max(1);
        // 512-byte blocks, in dash and in bash started as sh (POSIX mode).
        let file_blocks = (self.file_bytes / 512).max(1);
        let cpu = self.cpu_secs.max(1);
        let n = self.processes;
        let processes = if in_sandbox {
            format!("ulimit -u {n} 2>/dev/null || ulimit -p {n} 2>/dev/null; ")
        } else {
            String::new()
        };
        // The hard CPU limit a second later: SIGXCPU first, then SIGKILL if it is ignored.
        format!(
            "{{ ulimit -d {data_kib} && ulimit -f {file_blocks} && ulimit -S -t {cpu} && ulimit -H -t {} \
             && ulimit -c 0; }} 2>/dev/null || {{ echo 'arbor: the resource limits could not be set' >&2; \
             exit 126; }}; {processes}exec /bin/sh -c \"$1\"",
            cpu + 1
        )
    }

    /// Resolves when the process tree under `root` has more processes than allowed, with the count.
    pub(super) async fn watch_processes(&self, root: u32) -> usize {
        let limit = self.processes as usize;
        if root == 0 {
            // The command is already gone; pid 0 would be the kernel's own tree.
            return std::future::pending().await;
        }
        loop {
            tokio::time::sleep(WATCH_INTERVAL).await;
            let count = tokio::task::spawn_blocking(move || count_tree(root)).await.unwrap_or(0);
            if count > limit {
                return count;
            }
        }
    }
}

/// How many processes (threads included) descend from `root`, itself included, read from /proc.
fn count_tree(root: u32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    let mut children: HashMap<u32, Vec<(u32, usize)>> = HashMap::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Some((ppid, threads)) = parent_and_threads(pid) else { continue };
        children.entry(ppid).or_default().push((pid, threads));
    }
    let mut count = 1;
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        for &(child, threads) in children.get(&pid).map(Vec::as_slice).unwrap_or_default() {
            count += threads.max(1);
            stack.push(child);
        }
    }
    count
}

/// The parent pid and thread count from `/proc/<pid>/stat` (fields 4 and 20, counted after the
/// command name, which may itself contain spaces and parentheses).
fn parent_and_threads(pid: u32) -> Option<(u32, usize)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // fields[0] is the state, [1] the parent, [17] the number of threads.
    let ppid = fields.get(1)?.parse().ok()?;
    let threads = fields.get(17).and_then(|t| t.parse().ok()).unwrap_or(1);
    Some((ppid, threads))
}

/// What a signal that ends a command for a limit means, for the output the model reads.
pub(super) fn signal_note(signal: i32) -> Option<&'static str> {
    match signal {
        24 => Some("the CPU time limit was reached"),
        25 => Some("the file size limit was reached"),
        _ => None,
    }
}

/// Where this host's cgroup v1 `pids` hierarchy is mounted.
const PIDS_HIERARCHY: &str = "/sys/fs/cgroup/pids";

/// The folder under which each command gets its own `pids` cgroup, when this process may create
/// them (found once).
fn pids_parent() -> Option<&'static Path> {
    static PARENT: OnceLock<Option<PathBuf>> = OnceLock::new();
    PARENT
        .get_or_init(|| {
            let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
            let path = own.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                controllers.split(',').any(|c| c == "pids").then(|| path.trim_start_matches('/').to_string())
            })?;
            let parent = Path::new(PIDS_HIERARCHY).join(path).join("arbor-commands");
            match std::fs::create_dir(&parent) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(_) => return None,
            }
            parent.join("pids.max").exists().then_some(parent)
        })
        .as_deref()
}

/// A command's own `pids` cgroup: its process cap, enforced by the kernel at fork, for root too.
/// Dropping it kills what is left in it and removes it.
pub(super) struct PidsCgroup(PathBuf);

impl PidsCgroup {
    /// A fresh cgroup allowing `max` processes, or `None` where the host offers none.
    pub(super) fn create(max: u32) -> Option<PidsCgroup> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let parent = pids_parent()?;
        let dir = parent.join(format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir(&dir).ok()?;
        let cgroup = PidsCgroup(dir);
        std::fs::write(cgroup.0.join("pids.max"), max.to_string()).ok()?;
        Some(cgroup)
    }

    /// `program args`, wrapped so that it joins this cgroup before it execs: everything it starts
    /// is counted from the first fork on.
    pub(super) fn wrap(&self, program: &Path, args: Vec<OsString>) -> (PathBuf, Vec<OsString>) {
        let mut wrapped: Vec<OsString> = vec![
            "-c".into(),
            "echo $$ > \"$0\" || exit 125; exec \"$@\"".into(),
            self.0.join("cgroup.procs").into_os_string(),
            program.as_os_str().to_os_string(),
        ];
        wrapped.extend(args);
        (PathBuf::from("/bin/sh"), wrapped)
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        let dir = std::mem::take(&mut self.0);
        // Killing what is left and waiting for the kernel to let go takes a moment: not on the
        // caller's thread.
        std::thread::spawn(move || {
            for _ in 0..100 {
                if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                    for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                        }
                    }
                }
                if std::fs::remove_dir(&dir).is_ok() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            tracing::warn!(cgroup = %dir.display(), "a shell command's cgroup could not be removed");
        });
    }
}
