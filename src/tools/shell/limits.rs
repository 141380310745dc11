//! Resource limits on every shell command: memory, processes, file size, CPU time and the size of
//! the sandbox's /tmp, so a fork bomb, a memory hog, a huge write or a spin ends that command only.
//!
//! No cgroup can be assumed (containers rarely delegate one), so the limits are rlimits, set by a
//! short shell prologue before the command runs and inherited by everything it starts (no
//! `unsafe` pre-exec hook: the crate forbids unsafe code). The process count
//! is enforced twice: by RLIMIT_NPROC inside the sandbox (counted per user namespace, so the
//! server's own threads do not count) and by a watchdog that counts the command's process tree,
//! because the kernel never applies RLIMIT_NPROC to root and a server started as root must not be
//! forked to death either.

use std::collections::HashMap;
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
