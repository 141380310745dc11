//! list_directory, read_file, write_file and edit_file, confined to the exposed folders.
//!
//! Every operation starts from a handle on the exposed folder and goes through `cap-std`, so a path
//! is never resolved on the host by itself (see [`super::paths`]). Writes go to a temporary file in
//! the same folder and are renamed over the target, so a reader never sees half a file.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
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
fn open_existing(root: &Dir, loc: &Location<'_>) -> Result<Option<Opened>, String> {
    let mut options = OpenOptions::new();
    // Non-blocking so that a FIFO planted in the folder cannot hang the open.
    let nonblock = i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0);
    options.read(true).custom_flags(nonblock);
    let file = match root.open_with(&loc.rel, &options) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(loc.io_error(&e)),
    };
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
    let opened = open_existing(&root, &loc)?
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

fn read_existing(root: &Dir, loc: &Location<'_>, max: usize) -> Result<Option<Existing>, String> {
    let Some(opened) = open_existing(root, loc)? else { return Ok(None) };
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
fn write_atomic(root: &Dir, loc: &Location<'_>, bytes: &[u8], mode: Option<u32>) -> Result<(), String> {
    let name = loc.rel.file_name().ok_or_else(|| format!("{} does not name a file.", loc.display))?;
    let parent = loc.rel.parent().unwrap_or(Path::new(""));
    let dir = if parent.as_os_str().is_empty() {
        root.try_clone().map_err(|e| loc.io_error(&e))?
    } else {
        root.create_dir_all(parent).map_err(|e| loc.io_error(&e))?;
        root.open_dir(parent).map_err(|e| loc.io_error(&e))?
    };
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
    let existing = read_existing(&root, &loc, env.write_max_bytes)?;
    write_atomic(&root, &loc, content.as_bytes(), existing.as_ref().map(|e| e.mode))?;
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
    let existing = read_existing(&root, &loc, env.write_max_bytes)?
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
    write_atomic(&root, &loc, new.as_bytes(), Some(existing.mode))?;
    let (diff, added, removed) = diff(&loc.display, &old, &new);
    Ok(ToolOutput {
        content: format!("edited {}: +{added} \u{2212}{removed}", loc.display),
        is_error: false,
        diff: Some(diff),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use serde_json::json;

    use super::*;
    use crate::tools::Root;

    struct World {
        _tmp: tempfile::TempDir,
        base: PathBuf,
        env: ToolEnv,
    }

    /// `base/notes` and `base/src` exposed; `base/outside` (with a secret) and `base/sentinel` not.
    fn world() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().to_path_buf();
        for d in ["notes", "src", "outside"] {
            std::fs::create_dir(base.join(d)).unwrap();
        }
        std::fs::write(base.join("outside/secret.txt"), "TOP-SECRET\n").unwrap();
        std::fs::write(base.join("sentinel"), "untouched").unwrap();
        let env = ToolEnv {
            roots: vec![
                Root { name: "notes".into(), path: base.join("notes") },
                Root { name: "src".into(), path: base.join("src") },
            ],
            ..ToolEnv::default()
        };
        World { _tmp: tmp, base, env }
    }

    impl World {
        fn call(&self, tool: &str, args: Value) -> ToolOutput {
            run(tool, &args, &self.env)
        }

        fn ok(&self, tool: &str, args: Value) -> ToolOutput {
            let out = self.call(tool, args.clone());
            assert!(!out.is_error, "{tool} {args}: {}", out.content);
            out
        }

        fn err(&self, tool: &str, args: Value) -> String {
            let out = self.call(tool, args.clone());
            assert!(out.is_error, "{tool} {args} should fail: {}", out.content);
            out.content
        }

        /// Every file under base outside the exposed folders, with its content.
        fn outside_snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
            fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>, skip: &[PathBuf]) {
                for e in std::fs::read_dir(dir).unwrap() {
                    let p = e.unwrap().path();
                    if skip.contains(&p) {
                        continue;
                    }
                    let m = std::fs::symlink_metadata(&p).unwrap();
                    if m.is_dir() {
                        walk(&p, out, skip);
                    } else if m.is_file() {
                        out.insert(p.clone(), std::fs::read(&p).unwrap());
                    } else {
                        out.insert(p.clone(), b"<link>".to_vec());
                    }
                }
            }
            let mut out = BTreeMap::new();
            walk(&self.base, &mut out, &[self.base.join("notes"), self.base.join("src")]);
            // Anything written relative to the process (cwd, /) would show up here too.
            for p in ["/x", "/etc/x"] {
                assert!(!Path::new(p).exists(), "{p} was created");
            }
            out
        }
    }

    #[test]
    fn write_read_list_edit_round_trip() {
        let w = world();
        let out = w.ok("write_file", json!({"path": "notes/sub/a.md", "content": "one\ntwo\nthree\n"}));
        assert_eq!(out.content, "wrote notes/sub/a.md (new file): 3 lines, +3 \u{2212}0");
        let diff = out.diff.unwrap();
        assert!(
            diff.starts_with("--- a/notes/sub/a.md\n+++ b/notes/sub/a.md\n@@ -0,0 +1,3 @@\n+one\n"),
            "{diff}"
        );
        assert_eq!(std::fs::read_to_string(w.base.join("notes/sub/a.md")).unwrap(), "one\ntwo\nthree\n");

        assert_eq!(w.ok("read_file", json!({"path": "notes/sub/a.md"})).content, "one\ntwo\nthree\n");
        assert_eq!(
            w.ok("read_file", json!({"path": "notes/sub/a.md", "start_line": 2})).content,
            "two\nthree\n"
        );
        assert_eq!(
            w.ok("read_file", json!({"path": "notes/sub/a.md", "start_line": 2, "end_line": 2})).content,
            "two\n"
        );
        assert_eq!(w.ok("read_file", json!({"path": "notes/sub/a.md", "end_line": 1})).content, "one\n");
        let out = w.ok("read_file", json!({"path": "notes/sub/a.md", "start_line": 3, "end_line": 9}));
        assert_eq!(out.content, "three\n\n[end of file: notes/sub/a.md has 3 lines.]");
        let err = w.err("read_file", json!({"path": "notes/sub/a.md", "start_line": 5}));
        assert_eq!(err, "start_line 5 is past the end of notes/sub/a.md, which has 3 lines.");
        let err = w.err("read_file", json!({"path": "notes/sub/a.md", "start_line": 3, "end_line": 2}));
        assert_eq!(err, "end_line (2) is before start_line (3).");

        let out =
            w.ok("edit_file", json!({"path": "notes/sub/a.md", "old_text": "two\n", "new_text": "2\n2b\n"}));
        assert_eq!(out.content, "edited notes/sub/a.md: +2 \u{2212}1");
        assert!(out.diff.unwrap().contains("-two\n+2\n+2b\n"));
        assert_eq!(std::fs::read_to_string(w.base.join("notes/sub/a.md")).unwrap(), "one\n2\n2b\nthree\n");

        let out = w.ok("write_file", json!({"path": "notes/sub/a.md", "content": "one\n"}));
        assert_eq!(out.content, "wrote notes/sub/a.md: 1 lines, +0 \u{2212}3");

        std::fs::write(w.base.join("notes/b.txt"), "12345").unwrap();
        let list = w.ok("list_directory", json!({"path": "notes"})).content;
        assert_eq!(list, "notes/ (2 entries):\nb.txt (5 bytes)\nsub/\n");
        let list = w.ok("list_directory", json!({})).content;
        assert_eq!(list, "Exposed folders:\nnotes/\nsrc/\n");
        assert_eq!(w.ok("list_directory", json!({"path": "."})).content, list);
        assert_eq!(w.ok("list_directory", json!({"path": null})).content, list);
        assert_eq!(w.ok("list_directory", json!({"path": "src"})).content, "src/ is empty.");
        // No temporary files are left behind.
        let names: Vec<_> =
            std::fs::read_dir(w.base.join("notes/sub")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["a.md"]);
    }

    #[test]
    fn writing_keeps_the_file_mode() {
        use std::os::unix::fs::PermissionsExt;
        let w = world();
        let p = w.base.join("notes/run.sh");
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o750)).unwrap();
        w.ok("write_file", json!({"path": "notes/run.sh", "content": "#!/bin/sh\necho hi\n"}));
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777, 0o750);
    }

    #[test]
    fn bad_arguments_are_clear_errors() {
        let w = world();
        assert_eq!(w.err("read_file", json!({})), "read_file needs the argument \"path\" (a string).");
        assert_eq!(
            w.err("read_file", json!({"path": 5})),
            "The argument \"path\" must be a string, not a number."
        );
        assert!(w.err("read_file", json!({"path": "notes/a", "start_line": "2"})).contains("whole number"));
        assert!(w.err("read_file", json!({"path": "notes/a", "start_line": 0})).contains("at least 1"));
        assert!(w.err("read_file", json!({"path": "notes/a", "start_line": 1.5})).contains("whole number"));
        assert_eq!(
            w.err("write_file", json!({"path": "notes/a"})),
            "write_file needs the argument \"content\" (a string)."
        );
        assert!(w.err("write_file", json!({"path": "notes/a", "content": ["x"]})).contains("not an array"));
        assert!(w.err("list_directory", json!({"path": true})).contains("not a boolean"));
        assert!(w.err("edit_file", json!({"path": "notes/a", "old_text": "x"})).contains("\"new_text\""));
        assert!(w.err("read_file", json!({"path": ""})).contains("needs a file path"));
        assert!(w.err("read_file", json!({"path": "notes"})).contains("is an exposed folder, not a file"));
        assert!(w.err("write_file", json!({"path": "notes", "content": ""})).contains("not a file"));
        assert!(w.err("read_file", json!({"path": "notes/missing.md"})).contains("does not exist"));
        assert!(w.err("list_directory", json!({"path": "notes/missing"})).contains("does not exist"));
        std::fs::write(w.base.join("notes/f.txt"), "x").unwrap();
        assert_eq!(
            w.err("list_directory", json!({"path": "notes/f.txt"})),
            "notes/f.txt is a file, not a folder; use read_file to read it."
        );
        assert!(w.err("read_file", json!({"path": "notes/f.txt/x"})).contains("is a file, not a folder"));
        std::fs::create_dir(w.base.join("notes/d")).unwrap();
        assert!(w.err("read_file", json!({"path": "notes/d"})).contains("is a folder, not a file"));
        assert!(w.err("write_file", json!({"path": "notes/d", "content": "x"})).contains("is a folder"));
        assert!(
            w.err("write_file", json!({"path": "notes/f.txt/y", "content": "x"}))
                .contains("is a file, not a folder")
        );
        let empty = ToolEnv::default();
        let out = run("list_directory", &json!({}), &empty);
        assert!(out.is_error && out.content.contains("No folder is exposed"), "{}", out.content);
        let out = run("read_file", &json!({"path": "notes/a"}), &empty);
        assert!(out.is_error && out.content.contains("No folder is exposed"), "{}", out.content);
    }

    #[test]
    fn edit_errors() {
        let w = world();
        std::fs::write(w.base.join("notes/a.md"), "x = 1\ny = 1\nx = 1\n").unwrap();
        let err = w.err("edit_file", json!({"path": "notes/a.md", "old_text": "", "new_text": "z"}));
        assert!(err.starts_with("old_text is empty"), "{err}");
        let err = w.err("edit_file", json!({"path": "notes/a.md", "old_text": "x = 1", "new_text": "x = 2"}));
        assert_eq!(
            err,
            "old_text occurs 2 times in notes/a.md; include more surrounding lines so it matches once."
        );
        let err = w.err("edit_file", json!({"path": "notes/a.md", "old_text": "= 1", "new_text": "= 2"}));
        assert!(err.contains("occurs 3 times"), "{err}");
        let err = w.err("edit_file", json!({"path": "notes/a.md", "old_text": "z = 1", "new_text": "x"}));
        assert!(err.starts_with("old_text was not found in notes/a.md."), "{err}");
        let err = w.err("edit_file", json!({"path": "notes/none.md", "old_text": "a", "new_text": "b"}));
        assert_eq!(err, "notes/none.md does not exist; use write_file to create it.");
        // Overlapping occurrences count as several.
        std::fs::write(w.base.join("notes/o.md"), "aaa").unwrap();
        let err = w.err("edit_file", json!({"path": "notes/o.md", "old_text": "aa", "new_text": "b"}));
        assert!(err.contains("occurs 2 times"), "{err}");
        std::fs::write(w.base.join("notes/crlf.md"), "a\r\nb\r\n").unwrap();
        let err = w.err("edit_file", json!({"path": "notes/crlf.md", "old_text": "a\nb", "new_text": "c"}));
        assert!(err.contains("CRLF"), "{err}");
        std::fs::write(w.base.join("notes/bin"), b"\x00\x01").unwrap();
        let err = w.err("edit_file", json!({"path": "notes/bin", "old_text": "a", "new_text": "b"}));
        assert!(err.contains("binary file"), "{err}");
        // Unchanged after all of that.
        assert_eq!(std::fs::read_to_string(w.base.join("notes/a.md")).unwrap(), "x = 1\ny = 1\nx = 1\n");
        let out = w.ok("edit_file", json!({"path": "notes/a.md", "old_text": "y = 1", "new_text": "y = 1"}));
        assert!(out.content.contains("unchanged") && out.diff.is_none());
        let out = w.ok("edit_file", json!({"path": "notes/a.md", "old_text": "y = 1\n", "new_text": ""}));
        assert_eq!(out.content, "edited notes/a.md: +0 \u{2212}1");
        assert_eq!(std::fs::read_to_string(w.base.join("notes/a.md")).unwrap(), "x = 1\nx = 1\n");
    }

    #[test]
    fn read_caps_binary_and_write_cap() {
        let mut w = world();
        w.env.read_max_bytes = 100;
        w.env.write_max_bytes = 50;
        let big: String = (1..=40).map(|i| format!("line {i:02}\n")).collect(); // 8 bytes a line
        std::fs::write(w.base.join("notes/big.txt"), &big).unwrap();
        let out = w.ok("read_file", json!({"path": "notes/big.txt"})).content;
        assert!(out.starts_with("line 01\n"), "{out}");
        assert!(out.contains("line 12\n\n[notes/big.txt is 320 bytes; this is only the first 96 bytes (lines 1-12). Read further with start_line and end_line, e.g. start_line 13.]"), "{out}");
        assert!(!out.contains("line 13\n"));
        let out = w.ok("read_file", json!({"path": "notes/big.txt", "start_line": 30})).content;
        assert_eq!(
            out,
            "line 30\nline 31\nline 32\nline 33\nline 34\nline 35\nline 36\nline 37\nline 38\nline 39\nline 40\n"
        );
        let out = w.ok("read_file", json!({"path": "notes/big.txt", "start_line": 2})).content;
        assert!(out.ends_with("line 13\n\n[stopped before line 14: the read limit is 100 bytes; continue with start_line 14.]"), "{out}");
        // A cut inside a multi-byte character keeps the whole characters.
        std::fs::write(w.base.join("notes/utf8.txt"), "é".repeat(80)).unwrap();
        let out = w.ok("read_file", json!({"path": "notes/utf8.txt"})).content;
        assert!(out.starts_with(&"é".repeat(50)), "{out}");

        std::fs::write(w.base.join("notes/img.png"), b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR").unwrap();
        assert_eq!(
            w.err("read_file", json!({"path": "notes/img.png"})),
            "notes/img.png is a binary file (16 bytes), not shown."
        );
        assert!(
            w.err("read_file", json!({"path": "notes/img.png", "start_line": 1})).contains("binary file")
        );
        std::fs::write(w.base.join("notes/latin1.txt"), b"caf\xe9\n").unwrap();
        assert_eq!(
            w.err("read_file", json!({"path": "notes/latin1.txt"})),
            "notes/latin1.txt is a binary file (5 bytes), not shown."
        );
        std::fs::write(w.base.join("notes/empty.txt"), "").unwrap();
        assert_eq!(
            w.ok("read_file", json!({"path": "notes/empty.txt"})).content,
            "(notes/empty.txt is empty)"
        );

        let err = w.err("write_file", json!({"path": "notes/w.txt", "content": "x".repeat(51)}));
        assert_eq!(
            err,
            "The content is 51 bytes; write_file writes at most 50 bytes. Split it into smaller files."
        );
        assert!(!w.base.join("notes/w.txt").exists());
        std::fs::write(w.base.join("notes/e.txt"), "a".repeat(40)).unwrap();
        let err = w.err("edit_file", json!({"path": "notes/e.txt", "old_text": "a", "new_text": "b"}));
        assert!(err.contains("occurs 40 times"));
        let err = w.err(
            "edit_file",
            json!({"path": "notes/e.txt", "old_text": "a".repeat(40), "new_text": "b".repeat(60)}),
        );
        assert_eq!(err, "After this edit notes/e.txt would be 60 bytes; the limit is 50 bytes.");
        // A file too large to compare is still replaced, without a diff.
        let out = w.ok("write_file", json!({"path": "notes/big.txt", "content": "small\n"}));
        assert!(out.content.contains("replaced a 320-byte file") && out.diff.is_none(), "{}", out.content);
    }

    #[test]
    fn a_fifo_does_not_hang_a_read() {
        let w = world();
        let fifo = w.base.join("notes/pipe");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(w.err("read_file", json!({"path": "notes/pipe"})).contains("not a regular file"));
        assert!(
            w.err("write_file", json!({"path": "notes/pipe", "content": "x"})).contains("not a regular file")
        );
        assert!(w.ok("list_directory", json!({"path": "notes"})).content.contains("pipe (special file)"));
    }

    #[test]
    fn listing_caps_at_a_thousand_entries() {
        let w = world();
        for i in 0..1005 {
            std::fs::write(w.base.join(format!("src/f{i:04}")), "").unwrap();
        }
        let out = w.ok("list_directory", json!({"path": "src"})).content;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "src/ (1005 entries):");
        assert_eq!(lines[1], "f0000 (0 bytes)");
        assert_eq!(lines[1000], "f0999 (0 bytes)");
        assert!(lines[1001].starts_with("[showing the first 1000 of 1005 entries"), "{}", lines[1001]);
        assert_eq!(lines.len(), 1002);
    }

    /// SECURITY.md test 13: hostile paths are refused and nothing outside the folders changes.
    #[test]
    fn traversal_corpus_touches_nothing_outside() {
        let w = world();
        let before = w.outside_snapshot();
        let long = format!("notes/{}", "n".repeat(4096));
        let corpus = [
            "../../etc/passwd",
            "/etc/passwd",
            "a/../../x",
            "%2e%2e/x",
            "..\\x",
            "notes/..\\..\\x",
            "notes/a\u{0}b",
            long.as_str(),
            "．．/x",
            "notes/．．/x",
            "notes/../../x",
            "notes/../outside/secret.txt",
            "notes/../sentinel",
            "../sentinel",
            "/tmp",
        ];
        for path in corpus {
            for (tool, args) in [
                ("read_file", json!({"path": path})),
                ("list_directory", json!({"path": path})),
                ("write_file", json!({"path": path, "content": "pwned"})),
                ("edit_file", json!({"path": path, "old_text": "untouched", "new_text": "pwned"})),
            ] {
                let out = w.call(tool, args);
                assert!(out.is_error, "{tool} {path:?} succeeded: {}", out.content);
                assert!(!out.content.contains("TOP-SECRET"), "{tool} {path:?}");
            }
        }
        assert_eq!(w.outside_snapshot(), before);
        assert_eq!(std::fs::read_to_string(w.base.join("sentinel")).unwrap(), "untouched");
        // `%2e%2e` is a literal name inside the folder, never decoded.
        w.ok("write_file", json!({"path": "notes/%2e%2e/x", "content": "literal"}));
        assert_eq!(std::fs::read_to_string(w.base.join("notes/%2e%2e/x")).unwrap(), "literal");
        assert_eq!(w.outside_snapshot(), before);
    }

    fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) {
        std::os::unix::fs::symlink(target, link).unwrap();
    }

    /// SECURITY.md test 14: links out of the folder are refused for every tool; links inside work.
    #[test]
    fn symlinks_out_of_the_folder_are_refused() {
        let w = world();
        let notes = w.base.join("notes");
        std::fs::create_dir(notes.join("real")).unwrap();
        std::fs::write(notes.join("real/inside.txt"), "inside\n").unwrap();
        symlink(w.base.join("outside/secret.txt"), notes.join("abs_file")); // absolute target
        symlink("../outside/secret.txt", notes.join("rel_file")); // relative, escaping
        symlink(w.base.join("outside"), notes.join("abs_dir"));
        symlink("../outside", notes.join("rel_dir"));
        symlink("/etc", notes.join("etc"));
        symlink("../outside/new.txt", notes.join("dangling_out"));
        symlink("real", notes.join("in_dir"));
        symlink("real/inside.txt", notes.join("in_file"));
        symlink("in_dir/../real/inside.txt", notes.join("in_dotdot"));
        symlink("real/new.txt", notes.join("dangling_in"));
        let before = w.outside_snapshot();

        for path in [
            "notes/abs_file",
            "notes/rel_file",
            "notes/abs_dir/secret.txt",
            "notes/rel_dir/secret.txt",
            "notes/etc/passwd",
            "notes/etc/hostname",
        ] {
            for (tool, args) in [
                ("read_file", json!({"path": path})),
                ("write_file", json!({"path": path, "content": "pwned"})),
                ("edit_file", json!({"path": path, "old_text": "TOP-SECRET", "new_text": "pwned"})),
            ] {
                let err = w.err(tool, args);
                assert!(err.contains("leads outside its exposed folder"), "{tool} {path}: {err}");
                assert!(!err.contains("TOP-SECRET"));
            }
        }
        for path in ["notes/abs_dir", "notes/rel_dir", "notes/etc"] {
            let err = w.err("list_directory", json!({"path": path}));
            assert!(err.contains("leads outside its exposed folder"), "{path}: {err}");
        }
        // Creating through a link to outside (a new file, a new folder) is refused too.
        for path in ["notes/dangling_out", "notes/abs_dir/new.txt", "notes/rel_dir/sub/new.txt"] {
            let err = w.err("write_file", json!({"path": path, "content": "pwned"}));
            assert!(err.contains("leads outside its exposed folder"), "{path}: {err}");
        }
        assert_eq!(w.outside_snapshot(), before);

        // Links that stay inside work.
        assert_eq!(w.ok("read_file", json!({"path": "notes/in_file"})).content, "inside\n");
        assert_eq!(w.ok("read_file", json!({"path": "notes/in_dir/inside.txt"})).content, "inside\n");
        assert_eq!(w.ok("read_file", json!({"path": "notes/in_dotdot"})).content, "inside\n");
        assert_eq!(
            w.ok("list_directory", json!({"path": "notes/in_dir"})).content,
            "notes/in_dir/ (1 entries):\ninside.txt (7 bytes)\n"
        );
        w.ok("edit_file", json!({"path": "notes/in_file", "old_text": "inside", "new_text": "edited"}));
        assert_eq!(std::fs::read_to_string(notes.join("real/inside.txt")).unwrap(), "edited\n");
        assert!(std::fs::symlink_metadata(notes.join("in_file")).unwrap().is_symlink(), "the link is kept");
        w.ok("write_file", json!({"path": "notes/in_dir/w.txt", "content": "via link"}));
        assert_eq!(std::fs::read_to_string(notes.join("real/w.txt")).unwrap(), "via link");
        w.ok("write_file", json!({"path": "notes/dangling_in", "content": "made"}));
        assert_eq!(std::fs::read_to_string(notes.join("real/new.txt")).unwrap(), "made");

        let list = w.ok("list_directory", json!({"path": "notes"})).content;
        assert!(list.contains("abs_file (link to outside the folder; unusable)"), "{list}");
        assert!(list.contains("in_dir/ (link)"), "{list}");
        assert!(list.contains("in_file (7 bytes, link)"), "{list}");
        assert!(
            !list.contains(&w.base.to_string_lossy().to_string()),
            "the listing reveals host paths: {list}"
        );
        assert_eq!(w.outside_snapshot(), before);
    }

    /// SECURITY.md test 14, race harness: a link flipped between an inside file and an outside
    /// secret while reads run never yields the secret.
    #[test]
    fn symlink_swap_race_never_leaks() {
        let w = world();
        let notes = w.base.join("notes");
        std::fs::write(notes.join("inside.txt"), "inside\n").unwrap();
        std::fs::create_dir(notes.join("d_in")).unwrap();
        std::fs::write(notes.join("d_in/secret.txt"), "inside, too\n").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (notes, outside, stop) = (notes.clone(), w.base.join("outside"), stop.clone());
            std::thread::spawn(move || {
                let mut flips = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Each link is replaced atomically by rename, both for the file and the folder.
                    let (file_target, dir_target) = if flips.is_multiple_of(2) {
                        (PathBuf::from("inside.txt"), PathBuf::from("d_in"))
                    } else {
                        (outside.join("secret.txt"), outside.clone())
                    };
                    let _ = std::fs::remove_file(notes.join(".tmp_f"));
                    let _ = std::fs::remove_file(notes.join(".tmp_d"));
                    symlink(&file_target, notes.join(".tmp_f"));
                    symlink(&dir_target, notes.join(".tmp_d"));
                    std::fs::rename(notes.join(".tmp_f"), notes.join("link")).unwrap();
                    std::fs::rename(notes.join(".tmp_d"), notes.join("dlink")).unwrap();
                    flips += 1;
                }
                flips
            })
        };
        let (mut inside_reads, mut refused) = (0, 0);
        for _ in 0..3000 {
            for path in ["notes/link", "notes/dlink/secret.txt"] {
                let out = w.call("read_file", json!({"path": path}));
                assert!(!out.content.contains("TOP-SECRET"), "the outside secret leaked through {path}");
                if out.is_error { refused += 1 } else { inside_reads += 1 }
            }
            let out = w.call("list_directory", json!({"path": "notes/dlink"}));
            assert!(out.is_error || !out.content.contains("(11 bytes)"), "listed the outside folder");
        }
        stop.store(true, Ordering::Relaxed);
        let flips = swapper.join().unwrap();
        assert!(flips > 100, "the swapper barely ran ({flips} flips)");
        // Both states were really observed, so the race was exercised.
        assert!(inside_reads > 0 && refused > 0, "inside {inside_reads}, refused {refused}");
        assert_eq!(std::fs::read_to_string(w.base.join("outside/secret.txt")).unwrap(), "TOP-SECRET\n");
    }

    #[test]
    fn host_roots_are_addressed_by_absolute_name() {
        let mut w = world();
        let host = w.base.join("outside");
        let name = host.to_string_lossy().to_string();
        w.env.roots.push(Root { name: name.clone(), path: host.clone() });
        let out = w.ok("read_file", json!({"path": format!("{name}/secret.txt")}));
        assert_eq!(out.content, "TOP-SECRET\n");
        let out = w.ok("write_file", json!({"path": format!("{name}/n.txt"), "content": "x"}));
        assert!(out.content.starts_with(&format!("wrote {name}/n.txt")), "{}", out.content);
        assert!(w.err("read_file", json!({"path": format!("{name}/../sentinel")})).contains("\"..\""));
        let list = w.ok("list_directory", json!({})).content;
        assert!(list.ends_with(&format!("{name}/\n")), "{list}");
    }

    #[test]
    fn diff_and_counting_helpers() {
        let (d, a, r) = diff("notes/x", "a\nb\n", "a\nc\n");
        assert_eq!((a, r), (1, 1));
        assert_eq!(d, "--- a/notes/x\n+++ b/notes/x\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n");
        assert_eq!(count_occurrences("aaa", "aa"), 2);
        assert_eq!(count_occurrences("ééé", "é"), 3);
        assert_eq!(count_occurrences("abc", "d"), 0);
    }
}
