//! Keeps `ARBOR_MASTER_KEY` out of the running server's environment (SECURITY.md 59).
//!
//! A variable stays readable in `/proc/<pid>/environ` for the life of the process, and removing
//! it with `set_var`/`remove_var` is `unsafe` (other threads may read the environment). So the
//! server hands the key over instead: before any thread starts, a `serve` that finds the variable
//! writes the key into a pipe and re-executes itself without the variable, with the pipe as its
//! standard input. The new image reads the key from there and keeps it in memory only. Its
//! environment (what `/proc` shows and what every child inherits) never held the key.

use std::io::{Read as _, Write as _};
use std::os::unix::process::CommandExt as _;
use std::sync::OnceLock;

/// The variable an operator may set (the documented fallback to a key file).
pub const KEY_VAR: &str = "ARBOR_MASTER_KEY";
/// Set by the handover itself: "the key arrives on standard input". Not for operators.
pub const ON_STDIN_VAR: &str = "ARBOR_MASTER_KEY_ON_STDIN";
/// A key in any accepted encoding fits easily; more is refused before it is read into memory.
const MAX_KEY_BYTES: u64 = 4096;

static HANDED_OVER: OnceLock<String> = OnceLock::new();

/// Runs first in `serve`, while the process has one thread. Returns when there is nothing to hand
/// over or the key was received; otherwise replaces the process image. `Err` is for the operator.
pub fn hand_over_or_receive() -> Result<(), String> {
    if std::env::var_os(ON_STDIN_VAR).is_some() {
        return receive();
    }
    match std::env::var(KEY_VAR) {
        Ok(key) if !key.is_empty() => Err(re_exec_without(&key)),
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok(()),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{KEY_VAR} is not valid UTF-8")),
    }
}

/// The process environment as configuration sees it: the real variables, plus the handed-over
/// key under its usual name (so the vault reads it exactly as before).
pub fn process_env() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> =
        std::env::vars().filter(|(name, _)| name != ON_STDIN_VAR && name != KEY_VAR).collect();
    if let Some(key) = HANDED_OVER.get() {
        env.push((KEY_VAR.to_owned(), key.clone()));
    } else if let Ok(key) = std::env::var(KEY_VAR) {
        // Commands other than `serve` are short-lived and start no untrusted children.
        env.push((KEY_VAR.to_owned(), key));
    }
    env
}

/// Replaces this process with a fresh copy of itself whose environment lacks the key; returns
/// only on failure, with the reason.
fn re_exec_without(key: &str) -> String {
    if key.len() as u64 > MAX_KEY_BYTES {
        return format!(
            "{KEY_VAR} is longer than {MAX_KEY_BYTES} bytes; a master key is 32 bytes in hex or base64"
        );
    }
    let (reader, mut writer) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => return format!("cannot hand over {KEY_VAR}: {e}"),
    };
    // The key is far below the pipe's buffer, so this cannot block.
    if let Err(e) = writer.write_all(key.as_bytes()) {
        return format!("cannot hand over {KEY_VAR}: {e}");
    }
    drop(writer);
    // `/proc/self/exe` still names this binary after a package upgrade replaced the file.
    let exe = std::path::Path::new("/proc/self/exe");
    let exe = if exe.exists() { exe.to_path_buf() } else { std::env::current_exe().unwrap_or_default() };
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| "arbor".into());
    let error = std::process::Command::new(exe)
        .arg0(arg0)
        .args(args)
        .env_remove(KEY_VAR)
        .env(ON_STDIN_VAR, "1")
        .stdin(reader)
        .exec();
    format!("cannot restart without {KEY_VAR} in the environment: {error}; use ARBOR_MASTER_KEY_FILE instead")
}

/// Reads the key the previous image wrote; standard input is left at end of file.
fn receive() -> Result<(), String> {
    use std::io::IsTerminal as _;
    if std::io::stdin().is_terminal() {
        return Err(format!(
            "{ON_STDIN_VAR} is set by arbor itself when it restarts without {KEY_VAR}; unset it"
        ));
    }
    let mut raw = String::new();
    std::io::stdin()
        .take(MAX_KEY_BYTES + 1)
        .read_to_string(&mut raw)
        .map_err(|e| format!("cannot read the handed-over master key: {e}"))?;
    if raw.len() as u64 > MAX_KEY_BYTES || raw.is_empty() {
        return Err(format!(
            "{ON_STDIN_VAR} is set by arbor itself when it restarts without {KEY_VAR}; unset it"
        ));
    }
    let _ = HANDED_OVER.set(raw);
    Ok(())
}
