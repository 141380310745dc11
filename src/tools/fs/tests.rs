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
    assert_eq!(w.ok("read_file", json!({"path": "notes/sub/a.md", "start_line": 2})).content, "two\nthree\n");
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
    assert!(
        out.ends_with(
            "line 13\n\n[stopped before line 14: the read limit is 100 bytes; continue with start_line 14.]"
        ),
        "{out}"
    );
    // A cut inside a multi-byte character keeps the whole characters.
    std::fs::write(w.base.join("notes/utf8.txt"), "é".repeat(80)).unwrap();
    let out = w.ok("read_file", json!({"path": "notes/utf8.txt"})).content;
    assert!(out.starts_with(&"é".repeat(50)), "{out}");

    std::fs::write(w.base.join("notes/img.png"), b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR").unwrap();
    assert_eq!(
        w.err("read_file", json!({"path": "notes/img.png"})),
        "notes/img.png is a binary file (16 bytes), not shown."
    );
    assert!(w.err("read_file", json!({"path": "notes/img.png", "start_line": 1})).contains("binary file"));
    std::fs::write(w.base.join("notes/latin1.txt"), b"caf\xe9\n").unwrap();
    assert_eq!(
        w.err("read_file", json!({"path": "notes/latin1.txt"})),
        "notes/latin1.txt is a binary file (5 bytes), not shown."
    );
    std::fs::write(w.base.join("notes/empty.txt"), "").unwrap();
    assert_eq!(w.ok("read_file", json!({"path": "notes/empty.txt"})).content, "(notes/empty.txt is empty)");

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
    assert!(!list.contains(&w.base.to_string_lossy().to_string()), "the listing reveals host paths: {list}");
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
    let flipped = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let swapper = {
        let (notes, outside, stop) = (notes.clone(), w.base.join("outside"), stop.clone());
        let flipped = flipped.clone();
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
                flipped.store(flips, Ordering::Relaxed);
            }
            flips
        })
    };
    let (mut inside_reads, mut refused) = (0, 0);
    // At least 3000 rounds, and on a busy machine more, until the swapper has really run and
    // both states were seen (bounded, so a broken swapper still fails the test below).
    let mut rounds = 0;
    while rounds < 3000
        || (rounds < 200_000 && (flipped.load(Ordering::Relaxed) <= 100 || inside_reads == 0 || refused == 0))
    {
        rounds += 1;
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

#[test]
fn the_servers_own_files_are_refused_even_inside_a_folder() {
    // An admin-allowed host folder that holds the configuration file, the data folder and a hard
    // link to the master key file kept elsewhere.
    let mut w = world();
    let notes = w.base.join("notes");
    std::fs::write(notes.join("arbor.toml"), "[server]\n").unwrap();
    std::fs::create_dir(notes.join("data")).unwrap();
    std::fs::write(notes.join("data/arbor.db"), "db").unwrap();
    std::fs::write(w.base.join("outside/master.key"), "KEY").unwrap();
    std::fs::hard_link(w.base.join("outside/master.key"), notes.join("key-link")).unwrap();
    std::os::unix::fs::symlink("arbor.toml", notes.join("conf-link")).unwrap();
    std::fs::write(notes.join("fine.txt"), "fine\n").unwrap();
    w.env.shell.hidden_paths =
        vec![notes.join("arbor.toml"), notes.join("data"), w.base.join("outside/master.key")];

    for path in ["notes/arbor.toml", "notes/key-link", "notes/conf-link", "notes/data/arbor.db"] {
        let message = w.err("read_file", json!({"path": path}));
        assert!(message.contains("one of the server's own files"), "{path}: {message}");
        let message = w.err("write_file", json!({"path": path, "content": "x"}));
        assert!(message.contains("one of the server's own files"), "{path}: {message}");
        let message = w.err("edit_file", json!({"path": path, "old_text": "d", "new_text": "x"}));
        assert!(message.contains("one of the server's own files"), "{path}: {message}");
    }
    let message = w.err("write_file", json!({"path": "notes/data/new.txt", "content": "x"}));
    assert!(message.contains("one of the server's own files"), "{message}");
    let message = w.err("list_directory", json!({"path": "notes/data"}));
    assert!(message.contains("one of the server's own files"), "{message}");
    // Nothing changed, and the rest of the folder works as before.
    assert_eq!(std::fs::read_to_string(notes.join("arbor.toml")).unwrap(), "[server]\n");
    assert_eq!(std::fs::read_to_string(w.base.join("outside/master.key")).unwrap(), "KEY");
    assert!(!notes.join("data/new.txt").exists());
    assert_eq!(std::fs::read_to_string(notes.join("data/arbor.db")).unwrap(), "db");
    assert!(w.ok("read_file", json!({"path": "notes/fine.txt"})).content.contains("fine"));
    w.ok("write_file", json!({"path": "notes/new.txt", "content": "new"}));
    assert!(w.ok("list_directory", json!({"path": "notes"})).content.contains("fine.txt"));
    // A hidden folder that holds the exposed folder itself (the data folder holds every
    // workspace's folder) hides nothing inside it; the hidden paths inside it stay refused.
    w.env.shell.hidden_paths.push(w.base.clone());
    assert!(w.ok("read_file", json!({"path": "notes/fine.txt"})).content.contains("fine"));
    w.ok("write_file", json!({"path": "notes/newer.txt", "content": "new"}));
    assert!(w.ok("list_directory", json!({"path": "notes"})).content.contains("newer.txt"));
    let message = w.err("read_file", json!({"path": "notes/key-link"}));
    assert!(message.contains("one of the server's own files"), "{message}");
}
