//! list_directory, read_file, write_file and edit_file, confined to the exposed folders.
//!
//! Every operation starts from a handle on the exposed folder and goes through `cap-std`, so a path
//! is never resolved on the host by itself (see [`super::paths`]). Writes go to a temporary file in
//! the same folder and are renamed over the target, so a reader never sees half a file.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::{Dir, File, MetadataExt, OpenOptions, OpenOptionsExt};
use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use super::paths::{self, Location, Resolved};
use super::{Args, EDIT_FILE, LIST_DIRECTORY, READ_FILE, ToolEnv, ToolOutput, WRITE_FILE};

/// How many entries list_directory shows.
const MAX_LIST_ENTRIES: usize = 1000;
/// How many entries list_directory reads before it stops counting.
const MAX_SCANNED_ENTRIES: usize = 100_000;
/// How much of a file is checked for NUL bytes to call it binary.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;
/// How far into a file read_file scans to find a line range.
const MAX_SCAN_BYTES: u64 = 256 * 1024 * 1024;

/// Runs one of the file tools (blocking).
pub(super) fn run(name: &str, arguments: &Value, env: &ToolEnv) -> ToolOutput {
    match name {
        LIST_DIRECTORY => list_directory(arguments, env),
        READ_FILE => read_file(arguments, env),
        WRITE_FILE => write_file(arguments, env),
        EDIT_FILE => edit_file(arguments, env),
        _ => Err(format!("{name} is not a file tool.")),
    }
    .into()
}

/// Resolves a path that must name a file (not the list of folders, not a folder itself).
fn resolve_file<'a>(env: &'a ToolEnv, tool: &str, path: &str) -> Result<Location<'a>, String> {
    match paths::resolve(&env.roots, path)? {
        Resolved::Roots => Err(format!(
            "{tool} needs a file path that starts with an exposed folder's name, e.g. \"{}/a.md\".",
            env.roots.first().map_or("notes", |r| r.name.as_str())
        )),
        Resolved::In(loc) if loc.is_root() => Err(format!(
            "{} is an exposed folder, not a file; use list_directory to see its files.",
            loc.display
        )),
        Resolved::In(loc) => Ok(loc),
    }
}

fn list_directory(arguments: &Value, env: &ToolEnv) -> Result<ToolOutput, String> {
    let args = Args::new(LIST_DIRECTORY, arguments, &["path"])?;
    let path = args.opt_string("path")?.unwrap_or("");
    let loc = match paths::resolve(&env.roots, path)? {
        Resolved::Roots if env.roots.is_empty() => return Err(paths::NO_ROOTS.to_string()),
        Resolved::Roots => {
            let mut text = String::from("Exposed folders:\n");
            for root in &env.roots {
                text.push_str(&root.name);
                text.push_str("/\n");
            }
            return Ok(ToolOutput::ok(text));
        }
        Resolved::In(loc) => loc,
    };
    let root = loc.open_root()?;
    let dir = if loc.is_root() {
        root
    } else {
        root.open_dir(&loc.rel).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotADirectory if root.is_file(&loc.rel) => {
                format!("{} is a file, not a folder; use read_file to read it.", loc.display)
            }
            _ => loc.io_error(&e),
        })?
    };
    paths::refuse_hidden(&dir, &loc, &env.shell.hidden_paths)?;
    let mut names = Vec::new();
    let mut more = false;
    for entry in dir.entries().map_err(|e| loc.io_error(&e))? {
        if names.len() == MAX_SCANNED_ENTRIES {
            more = true;
            break;
        }
        let entry = entry.map_err(|e| loc.io_error(&e))?;
        names.push(entry.file_name());
    }
    if names.is_empty() {
        return Ok(ToolOutput::ok(format!("{}/ is empty.", loc.display)));
    }
    names.sort();
    let total = names.len();
    let mut text = format!("{}/ ({total}{} entries):\n", loc.display, if more { "+" } else { "" });
    for name in names.iter().take(MAX_LIST_ENTRIES) {
        let shown = name.to_string_lossy();
        text.push_str(&describe_entry(&dir, name, &shown));
        text.push('\n');
    }
    if total > MAX_LIST_ENTRIES || more {
        let of = if more { format!("more than {total}") } else { total.to_string() };
        text.push_str(&format!(
            "[showing the first {MAX_LIST_ENTRIES} of {of} entries; list a subfolder or use \
             run_shell_command with find/grep to narrow it down]\n"
        ));
    }
    Ok(ToolOutput::ok(text))
}

/// One listing line: "sub/", "a.md (120 bytes)", or what a link or special file is.
fn describe_entry(dir: &Dir, name: &std::ffi::OsStr, shown: &str) -> String {
    let link = dir.symlink_metadata(name).map(|m| m.is_symlink()).unwrap_or(false);
    // Follows links, but only inside the folder: a link out of it fails here.
    match dir.metadata(name) {
        Ok(m) if m.is_dir() => format!("{shown}/{}", if link { " (link)" } else { "" }),
        Ok(m) if m.is_file() => {
            format!("{shown} ({} bytes{})", m.len(), if link { ", link" } else { "" })
        }
        Ok(_) => format!("{shown} (special file)"),
        Err(e) if link && paths::is_escape(&e) => format!("{shown} (link to outside the folder; unusable)"),
        Err(_) if link => format!("{shown} (broken link)"),
        Err(_) => format!("{shown} (unreadable)"),
    }
}

/// An opened regular file and its size.
struct Opened {
    file: File,
    size: u64,
    mode: u32,
}

/// Opens an existing regular file for reading; `Ok(None)` if nothing is there.
fn open_existing(root: &Dir, loc: &Location<'_>, hidden: &[PathBuf]) -> Result<Option<Opened>, String> {
    let mut options = OpenOptions::new();
    // Non-blocking so that a FIFO planted in the folder cannot hang the open.
    let nonblock = i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0);
    options.read(true).custom_flags(nonblock);
    let file = match root.open_with(&loc.rel, &options) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(loc.io_error(&e)),
    };
    paths::refuse_hidden(&file, loc, hidden)?;
    let meta = file.metadata().map_err(|e| loc.io_error(&e))?;
    if meta.is_dir() {
        return Err(format!("{} is a folder, not a file; use list_directory to see its files.", loc.display));
    }
    if !meta.is_file() {
        return Err(format!("{} is not a regular file (a device, pipe or socket).", loc.display));
    }
    Ok(Some(Opened { file, size: meta.len(), mode: meta.mode() }))
}

fn binary_error(loc: &Location<'_>, size: u64) -> String {
    format!("{} is a binary file ({size} bytes), not shown.", loc.display)
}

fn read_file(arguments: &Value, env: &ToolEnv) -> Result<ToolOutput, String> {
    let args = Args::new(READ_FILE, arguments, &["path", "start_line", "end_line"])?;
    let path = args.string("path")?;
    let start = args.opt_positive("start_line")?;
    let end = args.opt_positive("end_line")?;
    if let (Some(s), Some(e)) = (start, end)
        && e < s
    {
        return Err(format!("end_line ({e}) is before start_line ({s})."));
    }
    let loc = resolve_file(env, READ_FILE, path)?;
    let root = loc.open_root()?;
    let opened = open_existing(&root, &loc, &env.shell.hidden_paths)?
        .ok_or_else(|| format!("{} does not exist. Use list_directory to see what is there.", loc.display))?;
    let max = env.read_max_bytes.max(1);
    if start.is_none() && end.is_none() {
        read_whole(&loc, opened, max)
    } else {
        read_lines(&loc, opened, start.unwrap_or(1), end, max)
    }
}

/// The file up to `max` bytes; a longer one is cut at a line break with a note about line ranges.
fn read_whole(loc: &Location<'_>, opened: Opened, max: usize) -> Result<ToolOutput, String> {
    let mut bytes = Vec::new();
    (&opened.file).take(max as u64 + 1).read_to_end(&mut bytes).map_err(|e| loc.io_error(&e))?;
    let cut = bytes.len() > max;
    bytes.truncate(max);
    let size = opened.size.max(bytes.len() as u64);
    if bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
        return Err(binary_error(loc, size));
    }
    let mut text = match String::from_utf8(bytes) {
        Ok(text) => text,
        // Cut in the middle of a character: keep the whole characters before it.
        Err(e) if cut && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).map_err(|_| binary_error(loc, size))?
        }
        Err(_) => return Err(binary_error(loc, size)),
    };
    if text.is_empty() {
        return Ok(ToolOutput::ok(format!("({} is empty)", loc.display)));
    }
    if cut {
        if let Some(last_break) = text.rfind('\n') {
            text.truncate(last_break + 1);
        }
        let lines = text.lines().count();
        text.push_str(&format!(
            "\n[{} is {size} bytes; this is only the first {} bytes (lines 1-{lines}). Read further with \
             start_line and end_line, e.g. start_line {}.]",
            loc.display,
            text.len(),
            lines + 1
        ));
    }
    Ok(ToolOutput::ok(text))
}

/// Lines `start..=end` (1-based), at most `max` bytes of them.
fn read_lines(
    loc: &Location<'_>,
    opened: Opened,
    start: u64,
    end: Option<u64>,
    max: usize,
) -> Result<ToolOutput, String> {
    let mut reader = BufReader::new((&opened.file).take(MAX_SCAN_BYTES));
    let mut text = String::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    let mut scanned = 0u64;
    let mut stopped_at = None;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(|e| loc.io_error(&e))?;
        if n == 0 {
            if scanned >= MAX_SCAN_BYTES {
                return Err(format!(
                    "{} is too large to read by line number this far in (stopped after {MAX_SCAN_BYTES} \
                     bytes, line {number}); use run_shell_command with sed or grep instead.",
                    loc.display
                ));
            }
            break;
        }
        if scanned < BINARY_SNIFF_BYTES as u64 {
            let sniff = (BINARY_SNIFF_BYTES as u64 - scanned).min(n as u64) as usize;
            if line[..sniff].contains(&0) {
                return Err(binary_error(loc, opened.size));
            }
        }
        scanned += n as u64;
        number += 1;
        if number < start {
            continue;
        }
        if end.is_some_and(|e| number > e) {
            break;
        }
        let line = std::str::from_utf8(&line).map_err(|_| binary_error(loc, opened.size))?;
        if text.len() + line.len() > max {
            stopped_at = Some(number);
            break;
        }
        text.push_str(line);
    }
    if number < start {
        return Err(format!(
            "start_line {start} is past the end of {}, which has {number} lines.",
            loc.display
        ));
    }
    if let Some(next) = stopped_at {
        if text.is_empty() {
            return Err(format!(
                "Line {next} of {} alone is longer than the read limit of {max} bytes; use \
                 run_shell_command (e.g. cut or head -c) to look at it.",
                loc.display
            ));
        }
        text.push_str(&format!(
            "\n[stopped before line {next}: the read limit is {max} bytes; continue with start_line {next}.]"
        ));
    } else if end.is_some_and(|e| e > number) {
        text.push_str(&format!("\n[end of file: {} has {number} lines.]", loc.display));
    }
    Ok(ToolOutput::ok(text))
}

/// The current text of an existing file (for a diff or an edit), or `None` if there is none.
struct Existing {
    text: Option<String>,
    size: u64,
    mode: u32,
}

fn read_existing(
    root: &Dir,
    loc: &Location<'_>,
    max: usize,
    hidden: &[PathBuf],
) -> Result<Option<Existing>, String> {
    let Some(opened) = open_existing(root, loc, hidden)? else { return Ok(None) };
    // Too large to diff or edit: write_file still replaces it, without a diff.
    if opened.size > max as u64 {
        return Ok(Some(Existing { text: None, size: opened.size, mode: opened.mode }));
    }
    let mut bytes = Vec::new();
    (&opened.file).take(max as u64 + 1).read_to_end(&mut bytes).map_err(|e| loc.io_error(&e))?;
    let text = String::from_utf8(bytes).ok().filter(|t| !t.contains('\0'));
    Ok(Some(Existing { text, size: opened.size, mode: opened.mode }))
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to the file: through a temporary file renamed over it, or, when the name is a
/// symbolic link (which must then point inside the folder), into the file the link points to.
fn write_atomic(
    root: &Dir,
    loc: &Location<'_>,
    bytes: &[u8],
    mode: Option<u32>,
    hidden: &[PathBuf],
) -> Result<(), String> {
    let name = loc.rel.file_name().ok_or_else(|| format!("{} does not name a file.", loc.display))?;
    let parent = loc.rel.parent().unwrap_or(Path::new(""));
    let dir = if parent.as_os_str().is_empty() {
        root.try_clone().map_err(|e| loc.io_error(&e))?
    } else {
        root.create_dir_all(parent).map_err(|e| loc.io_error(&e))?;
        root.open_dir(parent).map_err(|e| loc.io_error(&e))?
    };
    paths::refuse_hidden(&dir, loc, hidden)?;
    let write_all = |mut file: File| -> std::io::Result<()> {
        file.write_all(bytes)?;
        file.sync_all()
    };
    if dir.symlink_metadata(name).is_ok_and(|m| m.is_symlink()) {
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        let file = dir.open_with(name, &options).map_err(|e| loc.io_error(&e))?;
        return write_all(file).map_err(|e| loc.io_error(&e));
    }
    let temp = format!(".arbor-tmp-{}-{}", std::process::id(), TEMP_COUNTER.fetch_add(1, Ordering::Relaxed));
    let mut options = OpenOptions::new();
    options.write(true).create_new(true).mode(mode.unwrap_or(0o644) & 0o7777);
    let file = dir.open_with(&temp, &options).map_err(|e| loc.io_error(&e))?;
    let result = write_all(file).and_then(|()| dir.rename(&temp, &dir, name));
    if let Err(e) = result {
        let _ = dir.remove_file(&temp);
        return Err(loc.io_error(&e));
    }
    Ok(())
}

/// A unified diff from `old` to `new` and its added and removed line counts.
fn diff(display: &str, old: &str, new: &str) -> (String, usize, usize) {
    let diff = TextDiff::from_lines(old, new);
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let text = diff.unified_diff().header(&format!("a/{display}"), &format!("b/{display}")).to_string();
    (text, added, removed)
}

fn write_file(arguments: &Value, env: &ToolEnv) -> Result<ToolOutput, String> {
    let args = Args::new(WRITE_FILE, arguments, &["path", "content"])?;
    let path = args.string("path")?;
    let content = args.string("content")?;
    if content.len() > env.write_max_bytes {
        return Err(format!(
            "The content is {} bytes; write_file writes at most {} bytes. Split it into smaller files.",
            content.len(),
            env.write_max_bytes
        ));
    }
    let loc = resolve_file(env, WRITE_FILE, path)?;
    let root = loc.open_root()?;
    let existing = read_existing(&root, &loc, env.write_max_bytes, &env.shell.hidden_paths)?;
    write_atomic(
        &root,
        &loc,
        content.as_bytes(),
        existing.as_ref().map(|e| e.mode),
        &env.shell.hidden_paths,
    )?;
    let lines = content.lines().count();
    match existing {
        Some(Existing { text: None, size, .. }) => Ok(ToolOutput::ok(format!(
            "wrote {}: {lines} lines (replaced a {size}-byte file that was too large or not text to compare)",
            loc.display
        ))),
        existing => {
            let new_file = existing.is_none();
            let old = existing.and_then(|e| e.text).unwrap_or_default();
            let (diff, added, removed) = diff(&loc.display, &old, content);
            Ok(ToolOutput {
                content: format!(
                    "wrote {}{}: {lines} lines, +{added} \u{2212}{removed}",
                    loc.display,
                    if new_file { " (new file)" } else { "" }
                ),
                is_error: false,
                diff: Some(diff),
            })
        }
    }
}

/// Where `needle` starts in `haystack`, overlapping matches included (so "aa" occurs twice in "aaa").
fn count_occurrences(haystack: &str, needle: &str) -> usize {
    let mut count = 0;
    let mut from = 0;
    while let Some(i) = haystack[from..].find(needle) {
        count += 1;
        let at = from + i;
        from = at + haystack[at..].chars().next().map_or(1, char::len_utf8);
    }
    count
}

fn edit_file(arguments: &Value, env: &ToolEnv) -> Result<ToolOutput, String> {
    let args = Args::new(EDIT_FILE, arguments, &["path", "old_text", "new_text"])?;
    let path = args.string("path")?;
    let old_text = args.string("old_text")?;
    let new_text = args.string("new_text")?;
    if old_text.is_empty() {
        return Err("old_text is empty; give the exact text to replace (to create or replace a whole \
                    file, use write_file)."
            .to_string());
    }
    let loc = resolve_file(env, EDIT_FILE, path)?;
    let root = loc.open_root()?;
    let existing = read_existing(&root, &loc, env.write_max_bytes, &env.shell.hidden_paths)?
        .ok_or_else(|| format!("{} does not exist; use write_file to create it.", loc.display))?;
    let Some(old) = existing.text else {
        return Err(if existing.size > env.write_max_bytes as u64 {
            format!(
                "{} is {} bytes, more than edit_file handles ({} bytes); use run_shell_command (e.g. sed).",
                loc.display, existing.size, env.write_max_bytes
            )
        } else {
            format!("{} is a binary file ({} bytes); edit_file only edits text.", loc.display, existing.size)
        });
    };
    match count_occurrences(&old, old_text) {
        0 => {
            let crlf = if old.contains("\r\n") && !old_text.contains('\r') && old_text.contains('\n') {
                " The file uses CRLF (\\r\\n) line breaks; old_text must use them too."
            } else {
                ""
            };
            return Err(format!(
                "old_text was not found in {}. Read the file again and copy the text exactly, including \
                 spaces, indentation and line breaks.{crlf}",
                loc.display
            ));
        }
        1 => {}
        n => {
            return Err(format!(
                "old_text occurs {n} times in {}; include more surrounding lines so it matches once.",
                loc.display
            ));
        }
    }
    if old_text == new_text {
        return Ok(ToolOutput::ok(format!(
            "old_text and new_text are the same; {} is unchanged.",
            loc.display
        )));
    }
    let new = old.replacen(old_text, new_text, 1);
    if new.len() > env.write_max_bytes {
        return Err(format!(
            "After this edit {} would be {} bytes; the limit is {} bytes.",
            loc.display,
            new.len(),
            env.write_max_bytes
        ));
    }
    write_atomic(&root, &loc, new.as_bytes(), Some(existing.mode), &env.shell.hidden_paths)?;
    let (diff, added, removed) = diff(&loc.display, &old, &new);
    Ok(ToolOutput {
        content: format!("edited {}: +{added} \u{2212}{removed}", loc.display),
        is_error: false,
        diff: Some(diff),
    })
}

#[cfg(test)]
mod tests;
