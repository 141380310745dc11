use std::time::Instant;

use serde_json::json;

use super::*;

struct World {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    env: ToolEnv,
}

fn world(sandbox: Sandbox) -> World {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().to_path_buf();
    for d in ["ws", "ws/sub", "other", "outside"] {
        std::fs::create_dir(base.join(d)).unwrap();
    }
    std::fs::write(base.join("outside/secret.txt"), "TOP-SECRET").unwrap();
    let mut env = ToolEnv {
        roots: vec![
            Root { name: "ws".into(), path: base.join("ws") },
            Root { name: "other".into(), path: base.join("other") },
        ],
        ..ToolEnv::default()
    };
    env.shell.sandbox = sandbox;
    World { _tmp: tmp, base, env }
}

async fn sh(w: &World, args: Value) -> ToolOutput {
    run_shell_command(&args, &w.env).await
}

async fn bubblewrap() -> Sandbox {
    match Sandbox::detect().await {
        Sandbox::Unsandboxed => panic!(
            "Sandbox::detect() found no working bubblewrap: install it (apt-get install bubblewrap) and \
             make sure `bwrap --unshare-all --ro-bind /usr /usr /usr/bin/true` works; the sandbox tests \
             must not pass without it"
        ),
        sandbox => sandbox,
    }
}

#[tokio::test]
async fn runs_in_the_first_folder_and_reports_exit_codes() {
    let w = world(Sandbox::Unsandboxed);
    let out = sh(&w, json!({"command": "pwd; echo oops >&2; exit 3"})).await;
    assert!(!out.is_error, "a non-zero exit is for the model to read: {}", out.content);
    let ws = w.base.join("ws");
    assert_eq!(out.content, format!("exit code 3\n--- stdout ---\n{}\n--- stderr ---\noops\n", ws.display()));
    let out = sh(&w, json!({"command": "pwd", "cwd": "other"})).await;
    assert_eq!(out.content, format!("exit code 0\n--- stdout ---\n{}\n", w.base.join("other").display()));
    let out = sh(&w, json!({"command": "pwd", "cwd": "ws/sub"})).await;
    assert!(out.content.contains(&format!("{}\n", ws.join("sub").display())), "{}", out.content);
    let out = sh(&w, json!({"command": "true", "cwd": "."})).await;
    assert_eq!(out.content, "exit code 0\n(no output)\n");
    let out = sh(&w, json!({"command": "kill -9 $$"})).await;
    assert_eq!(out.content, "killed by signal 9\n(no output)\n");
}

#[tokio::test]
async fn cwd_is_confined() {
    let w = world(Sandbox::Unsandboxed);
    std::os::unix::fs::symlink(w.base.join("outside"), w.base.join("ws/out")).unwrap();
    std::os::unix::fs::symlink("sub", w.base.join("ws/in")).unwrap();
    std::fs::write(w.base.join("ws/file"), "").unwrap();
    for (cwd, expect) in [
        ("../outside", "contains \"..\""),
        ("ws/../outside", "contains \"..\""),
        ("/tmp", "not inside an exposed folder"),
        ("outside", "not inside an exposed folder"),
        ("ws/out", "leads outside its exposed folder"),
        ("ws/missing", "does not exist"),
        ("ws/file", "is a file, not a folder"),
    ] {
        let out = sh(&w, json!({"command": "cat secret.txt", "cwd": cwd})).await;
        assert!(out.is_error, "{cwd}: {}", out.content);
        assert!(out.content.contains(expect), "{cwd}: {}", out.content);
        assert!(!out.content.contains("TOP-SECRET"));
    }
    // A link inside the folder is followed to where it really is.
    let out = sh(&w, json!({"command": "pwd", "cwd": "ws/in"})).await;
    assert!(out.content.contains(&format!("{}\n", w.base.join("ws/sub").display())), "{}", out.content);
}

#[tokio::test]
async fn bad_arguments_and_no_folders() {
    let w = world(Sandbox::Unsandboxed);
    for (args, expect) in [
        (json!({}), "needs the argument \"command\""),
        (json!({"command": 5}), "must be a string, not a number"),
        (json!({"command": "  "}), "The command is empty."),
        (json!({"command": "true", "timeout_secs": 0}), "at least 1"),
        (json!({"command": "true", "timeout_secs": "5"}), "not a string"),
        (json!({"command": "true", "cwd": 1}), "must be a string"),
        (json!({"command": "a\u{0}b"}), "NUL"),
    ] {
        let out = sh(&w, args.clone()).await;
        assert!(out.is_error && out.content.contains(expect), "{args}: {}", out.content);
    }
    let out = run_shell_command(&json!({"command": "true"}), &ToolEnv::default()).await;
    assert!(out.is_error && out.content.contains("No folder is exposed"), "{}", out.content);
}

#[tokio::test]
async fn the_environment_is_minimal() {
    let w = world(Sandbox::Unsandboxed);
    let out =
        sh(&w, json!({"command": "env | sort; tr '\\0' '\\n' < /proc/self/environ | grep -c ARBOR"})).await;
    let ws = w.base.join("ws");
    assert_eq!(
        out.content,
        format!(
            "exit code 1\n--- stdout ---\nHOME={}\nLANG=C.UTF-8\nPATH=/usr/local/bin:/usr/bin:/bin\nPWD={}\nTERM=dumb\n0\n",
            ws.display(),
            ws.display()
        )
    );
}

#[tokio::test]
async fn output_is_capped_but_drained() {
    let mut w = world(Sandbox::Unsandboxed);
    w.env.shell.max_output_bytes = 1000;
    // 1 MB on stdout (far more than a pipe buffer) and a little on stderr.
    let out = sh(&w, json!({"command": "head -c 1000000 /dev/zero | tr '\\0' a; echo done >&2"})).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.starts_with(&format!("exit code 0\n--- stdout ---\n{}\n", "a".repeat(1000))),
        "{}",
        &out.content[..100]
    );
    assert!(out.content.contains("[stdout cut: showing the first 1000 of 1000000 bytes;"), "{}", out.content);
    assert!(out.content.ends_with("--- stderr ---\ndone\n"), "{}", out.content);
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let w = world(Sandbox::Unsandboxed);
    let started = Instant::now();
    let out =
        sh(&w, json!({"command": "sleep 30 & echo $! > bg.pid; echo started; sleep 30", "timeout_secs": 1}))
            .await;
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(out.is_error, "{}", out.content);
    assert!(out.content.starts_with("The command timed out after 1 s and was stopped.\n"), "{}", out.content);
    assert!(out.content.contains("--- stdout ---\nstarted\n"), "partial output is kept: {}", out.content);
    let pid = std::fs::read_to_string(w.base.join("ws/bg.pid")).unwrap();
    assert_gone(pid.trim()).await;
}

#[tokio::test]
async fn the_model_can_only_lower_the_timeout() {
    let mut w = world(Sandbox::Unsandboxed);
    w.env.shell.timeout = Duration::from_secs(1);
    let started = Instant::now();
    let out = sh(&w, json!({"command": "sleep 30", "timeout_secs": 3600})).await;
    assert!(out.content.starts_with("The command timed out after 1 s"), "{}", out.content);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn background_processes_do_not_outlive_the_call() {
    let w = world(Sandbox::Unsandboxed);
    let started = Instant::now();
    let out = sh(&w, json!({"command": "sleep 30 & echo $! > bg.pid; echo ok"})).await;
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_eq!(out.content, "exit code 0\n--- stdout ---\nok\n");
    let pid = std::fs::read_to_string(w.base.join("ws/bg.pid")).unwrap();
    assert_gone(pid.trim()).await;
}

#[tokio::test]
async fn dropping_the_future_kills_the_command() {
    let w = world(Sandbox::Unsandboxed);
    let call = sh(&w, json!({"command": "echo $$ > sh.pid; sleep 30 & echo $! > bg.pid; wait"}));
    let _ = tokio::time::timeout(Duration::from_millis(700), call).await;
    for file in ["sh.pid", "bg.pid"] {
        let pid = std::fs::read_to_string(w.base.join("ws").join(file)).unwrap();
        assert_gone(pid.trim()).await;
    }
}

/// The process no longer runs (a zombie waiting for a reaper counts as gone).
async fn assert_gone(pid: &str) {
    for _ in 0..50 {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return,
            Ok(stat) if stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')) => {
                return;
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    panic!("process {pid} is still running");
}

#[test]
fn arguments_mask_hidden_paths_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    std::fs::create_dir_all(base.join("data/ws/notes")).unwrap();
    std::fs::create_dir_all(base.join("data/ws/notes/.arbor")).unwrap();
    std::fs::write(base.join("data/ws/notes/.arbor/master.key"), "k").unwrap();
    let roots = vec![Root { name: "notes".into(), path: base.join("data/ws/notes") }];
    let hidden = vec![
        base.join("data"),
        base.join("data/ws/notes/.arbor/master.key"),
        base.join("data/ws/notes/.arbor"),
        base.join("missing"),
        PathBuf::from("/etc/hostname"),
    ];
    let args = bwrap_args(&roots, &hidden, &roots[0].path, &roots[0].path, 1 << 20);
    let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let joined = args.join(" ");
    for flag in
        ["--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--proc /proc", "--dev /dev"]
    {
        assert!(joined.contains(flag), "{flag}: {joined}");
    }
    let notes = roots[0].path.display().to_string();
    let bind = joined.find(&format!("--bind {notes} {notes}")).unwrap();
    let mask_dir = joined.find(&format!("--tmpfs {notes}/.arbor ")).unwrap();
    let mask_key = joined.find(&format!("--ro-bind /dev/null {notes}/.arbor/master.key")).unwrap();
    let read_only = joined.find(&format!("--remount-ro {notes}/.arbor ")).unwrap();
    assert!(bind < mask_dir && mask_dir < mask_key && mask_key < read_only, "{joined}");
    assert!(joined.find("--tmpfs /tmp").unwrap() < bind);
    // The data dir is not visible in the sandbox (only the folder inside it is), so it needs no mask.
    assert!(!joined.contains(&format!("--tmpfs {}/data ", base.display())), "{joined}");
    assert!(joined.contains("--ro-bind /dev/null /etc/hostname"), "{joined}");
    assert!(!joined.contains("missing"));
    assert!(joined.ends_with(&format!("--chdir {notes}")), "{joined}");
}

// ---- with bubblewrap: these fail (not skip) when it does not work here ----

#[tokio::test]
async fn sandbox_detection_finds_bubblewrap() {
    let sandbox = bubblewrap().await;
    assert!(matches!(&sandbox, Sandbox::Bubblewrap(p) if p.ends_with("bwrap")), "{sandbox:?}");
}

#[tokio::test]
async fn sandbox_has_no_network() {
    let w = world(bubblewrap().await);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let command = format!(
        "cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' '; \
         bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo CONNECTED; \
         python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=2)' 2>/dev/null && echo ONLINE; \
         echo end"
    );
    let out = sh(&w, json!({"command": command})).await;
    assert_eq!(out.content, "exit code 0\n--- stdout ---\nlo\nend\n");
    assert_eq!(listener.accept().unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
}

#[tokio::test]
async fn sandbox_hides_server_files_and_allows_writes_only_in_folders() {
    let mut w = world(bubblewrap().await);
    let ws = w.base.join("ws");
    // A data dir next to the folders, and key/config files inside a folder (visible unless masked).
    std::fs::create_dir(w.base.join("data")).unwrap();
    std::fs::write(w.base.join("data/arbor.db"), "DB-SECRET").unwrap();
    std::fs::create_dir(ws.join(".arbor")).unwrap();
    std::fs::write(ws.join(".arbor/config.toml"), "CONFIG-SECRET").unwrap();
    std::fs::write(ws.join("master.key"), "KEY-SECRET").unwrap();
    w.env.shell.hidden_paths = vec![w.base.join("data"), ws.join(".arbor"), ws.join("master.key")];
    let base = w.base.display();
    let command = format!(
        "cat master.key .arbor/config.toml {base}/data/arbor.db {base}/outside/secret.txt 2>/dev/null; \
         ls -A .arbor; \
         echo x > {base}/data/new 2>/dev/null && echo WROTE-DATA; \
         echo x > master.key 2>/dev/null && echo WROTE-KEY; \
         touch /usr/x 2>/dev/null && echo WROTE-USR; \
         touch /etc/x 2>/dev/null && echo WROTE-ETC; \
         echo x > {base}/outside/new 2>/dev/null && echo WROTE-OUTSIDE; \
         echo made > made.txt && echo made > ../other/made.txt && echo WROTE-FOLDERS; \
         env | sort"
    );
    let out = sh(&w, json!({"command": command})).await;
    assert!(!out.is_error, "{}", out.content);
    for secret in ["SECRET", "WROTE-DATA", "WROTE-KEY", "WROTE-USR", "WROTE-ETC", "WROTE-OUTSIDE"] {
        assert!(!out.content.contains(secret), "{secret}: {}", out.content);
    }
    assert!(out.content.contains("WROTE-FOLDERS"), "{}", out.content);
    // Only the minimal environment (bwrap adds nothing but the shell's PWD).
    let env_lines: Vec<&str> = out
        .content
        .lines()
        .skip_while(|l| !l.starts_with("HOME="))
        .take_while(|l| !l.starts_with("---"))
        .collect();
    assert_eq!(
        env_lines,
        [
            format!("HOME={}", ws.display()).as_str(),
            "LANG=C.UTF-8",
            "PATH=/usr/local/bin:/usr/bin:/bin",
            format!("PWD={}", ws.display()).as_str(),
            "TERM=dumb"
        ]
    );
    assert_eq!(std::fs::read_to_string(ws.join("made.txt")).unwrap(), "made\n");
    assert_eq!(std::fs::read_to_string(w.base.join("other/made.txt")).unwrap(), "made\n");
    assert_eq!(std::fs::read_to_string(ws.join("master.key")).unwrap(), "KEY-SECRET");
    assert!(!w.base.join("data/new").exists());
    assert!(!w.base.join("outside/new").exists());
    assert!(!Path::new("/usr/x").exists() && !Path::new("/etc/x").exists());
}

/// A host folder holding the (hidden) data dir, which in turn holds a workspace folder.
#[tokio::test]
async fn sandbox_masks_a_data_dir_between_folders() {
    let mut w = world(bubblewrap().await);
    let host = w.base.join("host");
    let data = host.join("data");
    std::fs::create_dir_all(data.join("ws/notes")).unwrap();
    std::fs::write(data.join("arbor.db"), "DB-SECRET").unwrap();
    std::fs::write(host.join("visible.txt"), "visible").unwrap();
    w.env.roots = vec![
        Root { name: "notes".into(), path: data.join("ws/notes") },
        Root { name: host.to_string_lossy().into_owned(), path: host.clone() },
    ];
    w.env.shell.hidden_paths = vec![data.clone()];
    let (h, d) = (host.display(), data.display());
    let command = format!(
        "cat {h}/visible.txt; echo; ls -A {d}; cat {d}/arbor.db 2>/dev/null; \
         touch {d}/new 2>/dev/null && echo WROTE-DATA; echo note > n.txt && cat n.txt"
    );
    let out = sh(&w, json!({"command": command})).await;
    assert_eq!(out.content, "exit code 0\n--- stdout ---\nvisible\nws\nnote\n");
    assert!(!data.join("new").exists());
    assert_eq!(std::fs::read_to_string(data.join("ws/notes/n.txt")).unwrap(), "note\n");
}

#[tokio::test]
async fn sandbox_timeout_stops_the_command() {
    let w = world(bubblewrap().await);
    let started = Instant::now();
    let out = sh(&w, json!({"command": "sleep 30 & sleep 30", "timeout_secs": 1})).await;
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(out.is_error && out.content.starts_with("The command timed out after 1 s"), "{}", out.content);
    let out = sh(&w, json!({"command": "echo hi; exit 7", "cwd": "ws/sub"})).await;
    assert_eq!(out.content, "exit code 7\n--- stdout ---\nhi\n");
}

/// A sandboxed world with small limits, so each test exceeds one quickly.
async fn limited_world() -> World {
    let mut w = world(bubblewrap().await);
    w.env.shell.limits = ProcessLimits {
        memory_bytes: 64 << 20,
        processes: 32,
        file_bytes: 1 << 20,
        cpu_secs: 1,
        tmp_bytes: 512 << 10,
    };
    w.env.shell.timeout = Duration::from_secs(30);
    w
}

/// The next command runs normally: the limit ended only the command that hit it.
fn pids_cgroups_exist() -> bool {
    std::path::Path::new("/sys/fs/cgroup/pids/arbor-commands").is_dir()
}

async fn still_runs(w: &World) {
    if let Ok(parent) = std::fs::read_dir("/sys/fs/cgroup/pids/arbor-commands") {
        // Where commands get a cgroup, the kernel caps each one at its limit: never above it.
        for dir in parent.flatten().filter(|d| d.path().is_dir()) {
            if let Ok(peak) = std::fs::read_to_string(dir.path().join("pids.peak")) {
                let max = std::fs::read_to_string(dir.path().join("pids.max")).unwrap_or_default();
                if let (Ok(peak), Ok(max)) = (peak.trim().parse::<u64>(), max.trim().parse::<u64>()) {
                    assert!(peak <= max, "{}: {peak} processes, limit {max}", dir.path().display());
                }
            }
        }
    }
    let out = sh(w, json!({"command": "echo alive"})).await;
    assert_eq!(out.content, "exit code 0\n--- stdout ---\nalive\n");
}

#[tokio::test]
async fn a_memory_hog_fails_alone() {
    let w = limited_world().await;
    let out = sh(&w, json!({"command": "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo ${#x}"})).await;
    assert!(!out.content.starts_with("exit code 0"), "{}", out.content);
    assert!(!out.content.contains("200000000"), "the hog got its memory: {}", out.content);
    still_runs(&w).await;
}

#[tokio::test]
async fn a_fork_bomb_is_stopped_with_everything_it_started() {
    let w = limited_world().await;
    let started = Instant::now();
    let out = sh(&w, json!({"command": "f() { f | f & }; f; sleep 3"})).await;
    // Either the kernel refused the forks past the cap (a pids cgroup, or RLIMIT_NPROC for a
    // server that is not root) and the command ended, or the watchdog stopped it.
    let refused = out.content.contains("Cannot fork") || out.content.contains("Resource temporarily");
    let capped = pids_cgroups_exist() || refused;
    assert!(capped || out.content.contains("more than the limit of 32"), "{}", out.content);
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    still_runs(&w).await;
}

#[tokio::test]
async fn a_huge_write_stops_at_the_file_size_limit() {
    let w = limited_world().await;
    let out = sh(&w, json!({"command": "head -c 10000000 /dev/zero > big"})).await;
    assert!(
        out.content.contains("killed by signal 25 (the file size limit was reached)")
            || out.content.starts_with("exit code 153"),
        "{}",
        out.content
    );
    let size = std::fs::metadata(w.base.join("ws/big")).unwrap().len();
    assert!(size <= 1 << 20, "{size} bytes written");
    still_runs(&w).await;
}

#[tokio::test]
async fn a_cpu_spin_stops_at_the_cpu_limit() {
    let w = limited_world().await;
    let started = Instant::now();
    let out = sh(&w, json!({"command": "while :; do :; done"})).await;
    assert!(
        out.content.contains("killed by signal 24 (the CPU time limit was reached)")
            || out.content.contains("killed by signal 9")
            || out.content.starts_with("exit code 152"),
        "{}",
        out.content
    );
    // One CPU second, on a busy machine spread over more wall time; far below the 30 s timeout.
    assert!(started.elapsed() < Duration::from_secs(25), "took {:?}", started.elapsed());
    still_runs(&w).await;
}

#[tokio::test]
async fn the_sandbox_tmp_is_size_capped_and_limits_cannot_be_raised() {
    let w = limited_world().await;
    let out = sh(&w, json!({"command": "head -c 800000 /dev/zero > /tmp/big; echo rc=$?"})).await;
    assert!(out.content.contains("rc=1") && out.content.contains("No space left"), "{}", out.content);
    for raise in ["ulimit -d unlimited", "ulimit -f unlimited", "ulimit -t unlimited"] {
        let out = sh(&w, json!({"command": format!("{raise} && echo raised")})).await;
        assert!(!out.content.contains("raised"), "{raise}: {}", out.content);
    }
    still_runs(&w).await;
}

#[tokio::test]
async fn the_watchdog_counts_a_process_tree() {
    let mut child = tokio::process::Command::new("/bin/sh")
        .args(["-c", "sleep 10 & sleep 10 & sleep 10 & sleep 10 & wait"])
        .kill_on_drop(true)
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let limits = ProcessLimits { processes: 3, ..ProcessLimits::default() };
    let count = tokio::time::timeout(Duration::from_secs(10), limits.watch_processes(pid)).await;
    assert!(matches!(count, Ok(n) if n >= 5), "{count:?}");
    let _ = rustix::process::kill_process_group(Pid::from_raw(pid as i32).unwrap(), Signal::KILL);
    let _ = child.wait().await;
}
