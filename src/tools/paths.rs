//! Confined path resolution for the file and shell tools (SECURITY.md tests 13 and 14).
//!
//! A model-given path starts with an exposed folder's name (longest match; absolute names for host
//! folders an admin allowed), and the rest is resolved *inside* that folder through `cap-std`, which
//! resolves every component with `openat2(RESOLVE_BENEATH)` (or an equivalent manual walk), so
//! neither `..` nor a symbolic link pointing outside — even one swapped in while we work — can
//! reach anything outside. Before anything is touched, the text itself is checked: no `..`, no
//! control or invisible characters, no backslashes, no lookalike dots, bounded lengths.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::Root;

/// The longest path accepted, in bytes (Linux's PATH_MAX).
const MAX_PATH_BYTES: usize = 4096;
/// The longest file or folder name accepted, in bytes (Linux's NAME_MAX).
const MAX_NAME_BYTES: usize = 255;

/// What a model-given path names.
#[derive(Debug)]
pub(crate) enum Resolved<'a> {
    /// The empty path or ".": the list of exposed folders.
    Roots,
    /// Something inside (or equal to) an exposed folder.
    In(Location<'a>),
}

/// A checked path: an exposed folder and a relative path inside it.
#[derive(Debug, Clone)]
pub(crate) struct Location<'a> {
    /// The exposed folder the path starts with.
    pub(crate) root: &'a Root,
    /// The rest, relative to the folder; empty for the folder itself. Has no `..`, `.` or empty parts.
    pub(crate) rel: PathBuf,
    /// The path as the model should write it ("notes/a.md"), for messages.
    pub(crate) display: String,
}

impl Location<'_> {
    /// Whether this names the exposed folder itself.
    pub(crate) fn is_root(&self) -> bool {
        self.rel.as_os_str().is_empty()
    }

    /// Opens the exposed folder; everything else is opened relative to the returned handle.
    pub(crate) fn open_root(&self) -> Result<Dir, String> {
        // The folder's own path is trusted configuration, so ambient authority is right here.
        Dir::open_ambient_dir(&self.root.path, ambient_authority()).map_err(|e| {
            tracing::warn!(root = %self.root.name, error = %e, "an exposed folder cannot be opened");
            format!("The exposed folder {} cannot be opened right now ({}).", self.root.name, e.kind())
        })
    }

    /// A message for an I/O error on this path, worded for the model.
    pub(crate) fn io_error(&self, err: &io::Error) -> String {
        io_message(err, &self.display)
    }
}

/// A model-facing message for an I/O error on `shown`.
pub(crate) fn io_message(err: &io::Error, shown: &str) -> String {
    if is_escape(err) {
        return format!(
            "{shown} leads outside its exposed folder (through a symbolic link), so it cannot be used."
        );
    }
    if err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        return format!("{shown} goes through too many symbolic links.");
    }
    if err.raw_os_error() == Some(rustix::io::Errno::NAMETOOLONG.raw_os_error()) {
        return format!("{shown} is too long a path for this file system.");
    }
    match err.kind() {
        io::ErrorKind::NotFound => {
            format!("{shown} does not exist. Use list_directory to see what is there.")
        }
        io::ErrorKind::PermissionDenied => format!("Permission denied for {shown}."),
        io::ErrorKind::NotADirectory => format!("A part of {shown} is a file, not a folder."),
        io::ErrorKind::IsADirectory => format!("{shown} is a folder, not a file."),
        io::ErrorKind::AlreadyExists => format!("{shown} already exists."),
        io::ErrorKind::StorageFull => format!("There is no space left to write {shown}."),
        io::ErrorKind::ReadOnlyFilesystem => format!("{shown} is on a read-only file system."),
        _ => format!("{shown} could not be used: {err}."),
    }
}

/// Whether cap-std refused because resolution would have left the folder: the kernel's `EXDEV` from
/// `openat2(RESOLVE_BENEATH)`, or cap-std's own escape error (PermissionDenied with no OS code).
pub(crate) fn is_escape(err: &io::Error) -> bool {
    err.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error())
        || (err.kind() == io::ErrorKind::PermissionDenied && err.raw_os_error().is_none())
}

/// Refuses what was opened when it is one of the server's own files: inside a hidden path (the
/// data folder, the configuration, the master key file) by the kernel's own name for the opened
/// file, or the same file by identity. So neither a symbolic nor a hard link inside an exposed
/// (or admin-allowed host) folder reaches them (SECURITY.md 59). A hidden path that holds the
/// exposed folder itself (every workspace folder lives in the data folder) hides nothing: the
/// tools cannot leave that folder, so only hidden paths inside it matter, as in the sandbox.
pub(crate) fn refuse_hidden(opened: impl AsFd, loc: &Location<'_>, hidden: &[PathBuf]) -> Result<(), String> {
    if hidden.is_empty() {
        return Ok(());
    }
    let fd = opened.as_fd();
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok();
    let identity = rustix::fs::fstat(fd).ok().map(|s| (s.st_dev, s.st_ino));
    let root_real = std::fs::canonicalize(&loc.root.path).ok();
    for path in hidden {
        let Ok(hidden_real) = std::fs::canonicalize(path) else { continue };
        if root_real.as_ref().is_some_and(|r| r.starts_with(&hidden_real)) {
            continue;
        }
        let inside = real.as_ref().is_some_and(|r| r.starts_with(&hidden_real));
        let same = identity.is_some()
            && rustix::fs::stat(&hidden_real).ok().map(|s| (s.st_dev, s.st_ino)) == identity;
        if inside || same {
            return Err(format!(
                "{} is one of the server's own files (its data, configuration or key), which no \
                 tool may use.",
                loc.display
            ));
        }
    }
    Ok(())
}

/// Checks a model-given path and finds the exposed folder it starts with; touches nothing.
pub(crate) fn resolve<'a>(roots: &'a [Root], path: &str) -> Result<Resolved<'a>, String> {
    let components = check_text(path)?;
    if components.is_empty() && !path.starts_with('/') {
        return Ok(Resolved::Roots);
    }
    if roots.is_empty() {
        return Err(NO_ROOTS.to_string());
    }
    let absolute = path.starts_with('/');
    let best = roots
        .iter()
        .filter_map(|root| {
            let name = root_components(&root.name);
            let matches = root.name.starts_with('/') == absolute
                && (absolute || !name.is_empty())
                && components.len() >= name.len()
                && components.iter().zip(&name).all(|(a, b)| a == b);
            matches.then_some((root, name.len()))
        })
        .max_by_key(|&(_, len)| len);
    let Some((root, len)) = best else {
        let exposed = exposed_names(roots);
        return Err(if absolute {
            format!(
                "The absolute path {} is not inside an exposed folder; paths start with an exposed \
                 folder's name: {exposed}.",
                shown(path)
            )
        } else {
            format!("{} is not inside an exposed folder; exposed: {exposed}.", shown(path))
        });
    };
    let rel: PathBuf = components[len..].iter().collect();
    let display = if absolute { format!("/{}", components.join("/")) } else { components.join("/") };
    Ok(Resolved::In(Location { root, rel, display }))
}

/// What to say when the session exposes no folder.
pub(crate) const NO_ROOTS: &str =
    "No folder is exposed to this session, so there are no files to work with. Ask the user to expose one.";

/// The exposed folders' names, comma separated, for messages.
pub(crate) fn exposed_names(roots: &[Root]) -> String {
    roots.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", ")
}

fn root_components(name: &str) -> Vec<&str> {
    name.split('/').filter(|c| !c.is_empty() && *c != ".").collect()
}

/// The path for a message: escaped (control characters would garble it) and shortened.
pub(crate) fn shown(path: &str) -> String {
    const MAX_CHARS: usize = 80;
    let escaped: String = path.escape_debug().collect();
    if escaped.chars().count() > MAX_CHARS {
        let head: String = escaped.chars().take(MAX_CHARS).collect();
        format!("\"{head}…\"")
    } else {
        format!("\"{escaped}\"")
    }
}

/// The path's non-empty, non-"." components, or why the text is refused.
fn check_text(path: &str) -> Result<Vec<&str>, String> {
    if path.len() > MAX_PATH_BYTES {
        return Err(format!("The path is {} bytes long; the limit is {MAX_PATH_BYTES}.", path.len()));
    }
    if let Some(c) = path.chars().find(|&c| c.is_control()) {
        return Err(format!(
            "The path {} contains a control character (U+{:04X}); use plain file names.",
            shown(path),
            u32::from(c)
        ));
    }
    if let Some(c) = path.chars().find(|&c| is_invisible(c)) {
        return Err(format!(
            "The path {} contains an invisible formatting character (U+{:04X}); use plain file names.",
            shown(path),
            u32::from(c)
        ));
    }
    if path.contains('\\') {
        return Err(format!(
            "The path {} contains a backslash; separate folders with / (e.g. \"notes/a.md\").",
            shown(path)
        ));
    }
    let mut components = Vec::new();
    for component in path.split('/') {
        if component.is_empty() || component == "." {
            continue;
        }
        if component == ".." {
            return Err(format!(
                "The path {} contains \"..\"; paths cannot go up a folder. Start the path with an \
                 exposed folder's name instead (e.g. \"notes/a.md\").",
                shown(path)
            ));
        }
        if component.len() > MAX_NAME_BYTES {
            return Err(format!(
                "The name {} is {} bytes long; the limit is {MAX_NAME_BYTES} bytes per file or folder name.",
                shown(component),
                component.len()
            ));
        }
        // Only dots (ASCII or lookalike) and joiners: "...", "．．", "\u{2024}\u{2024}" and the
        // like are traversal lookalikes for some consumer along the way, never real names.
        if component.chars().all(|c| is_dot_like(c) || c == '\u{200D}') {
            return Err(format!(
                "The name {} is made only of dots or dot-like characters, which is not allowed.",
                shown(component)
            ));
        }
        components.push(component);
    }
    Ok(components)
}

/// Characters that look like a full stop.
fn is_dot_like(c: char) -> bool {
    matches!(
        c,
        '.' | '\u{00B7}' // middle dot
            | '\u{0701}'
            | '\u{0702}' // Syriac full stops
            | '\u{2024}' // one dot leader
            | '\u{2025}' // two dot leader
            | '\u{2026}' // horizontal ellipsis
            | '\u{2027}' // hyphenation point
            | '\u{2219}' // bullet operator
            | '\u{22C5}' // dot operator
            | '\u{2E31}' // word separator middle dot
            | '\u{3002}' // ideographic full stop
            | '\u{A4F8}'
            | '\u{A60E}'
            | '\u{FE52}' // small full stop
            | '\u{FF0E}' // fullwidth full stop
            | '\u{FF61}' // halfwidth ideographic full stop
            | '\u{10A50}'
            | '\u{1D16D}'
    )
}

/// Zero-width and bidirectional formatting characters: they make a name read as something else.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'
            | '\u{200C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots() -> Vec<Root> {
        vec![
            Root { name: "notes".into(), path: "/tmp/n".into() },
            Root { name: "projects".into(), path: "/tmp/p".into() },
            Root { name: "projects/a".into(), path: "/tmp/pa".into() },
            Root { name: "/srv/data".into(), path: "/srv/data".into() },
        ]
    }

    fn loc(path: &str) -> (String, PathBuf, String) {
        let roots = roots();
        match resolve(&roots, path).unwrap() {
            Resolved::In(l) => (l.root.name.clone(), l.rel, l.display),
            Resolved::Roots => panic!("{path} resolved to the root list"),
        }
    }

    #[test]
    fn roots_are_chosen_by_longest_name() {
        assert_eq!(loc("notes/a.md"), ("notes".into(), "a.md".into(), "notes/a.md".into()));
        assert_eq!(loc("notes"), ("notes".into(), "".into(), "notes".into()));
        assert_eq!(loc("./notes//sub/./a.md"), ("notes".into(), "sub/a.md".into(), "notes/sub/a.md".into()));
        assert_eq!(loc("projects/a/x"), ("projects/a".into(), "x".into(), "projects/a/x".into()));
        assert_eq!(loc("projects/ab/x"), ("projects".into(), "ab/x".into(), "projects/ab/x".into()));
        assert_eq!(loc("/srv/data/x/y"), ("/srv/data".into(), "x/y".into(), "/srv/data/x/y".into()));
        assert_eq!(loc("/srv/data"), ("/srv/data".into(), "".into(), "/srv/data".into()));
        // `%2e%2e` is a literal name: nothing is URL-decoded.
        assert_eq!(loc("notes/%2e%2e/x"), ("notes".into(), "%2e%2e/x".into(), "notes/%2e%2e/x".into()));
        assert_eq!(loc("notes/.hidden"), ("notes".into(), ".hidden".into(), "notes/.hidden".into()));
        assert_eq!(loc("notes/a..b"), ("notes".into(), "a..b".into(), "notes/a..b".into()));
        for empty in ["", ".", "./", ".//."] {
            assert!(matches!(resolve(&roots(), empty).unwrap(), Resolved::Roots), "{empty:?}");
        }
    }

    #[test]
    fn paths_outside_every_root_are_refused() {
        let err = resolve(&roots(), "src/x").unwrap_err();
        assert_eq!(
            err,
            "\"src/x\" is not inside an exposed folder; exposed: notes, projects, projects/a, /srv/data."
        );
        let err = resolve(&roots(), "/etc/passwd").unwrap_err();
        assert!(
            err.starts_with("The absolute path \"/etc/passwd\" is not inside an exposed folder"),
            "{err}"
        );
        // A relative path never selects an absolute root, nor the other way round.
        assert!(resolve(&roots(), "srv/data/x").is_err());
        assert!(resolve(&roots(), "/notes/a").is_err());
        assert!(resolve(&roots(), "/").is_err());
        assert!(resolve(&roots(), "/srv/database").is_err());
        assert_eq!(resolve(&[], "notes/a").unwrap_err(), NO_ROOTS);
    }

    #[test]
    fn hostile_text_is_refused_before_anything_is_touched() {
        let long_name = format!("notes/{}", "a".repeat(256));
        let long_path = format!("notes/{}", "abcdefgh/".repeat(460));
        for (path, expect) in [
            ("../../etc/passwd", "contains \"..\""),
            ("a/../../x", "contains \"..\""),
            ("notes/../../x", "contains \"..\""),
            ("notes/sub/..", "contains \"..\""),
            ("..\\x", "backslash"),
            ("notes\\a", "backslash"),
            ("notes/a\u{0}b", "control character (U+0000)"),
            ("notes/a\nb", "control character (U+000A)"),
            ("notes/a\u{7f}", "control character (U+007F)"),
            ("notes/a\u{202E}gpj.exe", "invisible formatting character (U+202E)"),
            ("notes/\u{200B}", "invisible"),
            (long_name.as_str(), "256 bytes long; the limit is 255"),
            (long_path.as_str(), "the limit is 4096"),
            ("notes/．．/x", "dot-like"),
            ("．．/x", "dot-like"),
            ("notes/\u{2024}\u{2024}/x", "dot-like"),
            ("notes/\u{FE52}\u{FE52}", "dot-like"),
            ("notes/\u{2025}", "dot-like"),
            ("notes/...", "dot-like"),
            ("notes/.\u{200D}.", "dot-like"),
        ] {
            let err = resolve(&roots(), path).unwrap_err();
            assert!(err.contains(expect), "{path:?}: {err}");
            assert!(!err.contains('\0'), "{path:?}: the message carries the raw NUL");
        }
        // A 4 KB name: refused for its length, and the message does not repeat it all.
        let err = resolve(&roots(), &format!("notes/{}", "x".repeat(4000))).unwrap_err();
        assert!(err.len() < 300, "{err}");
    }

    #[test]
    fn io_messages() {
        let escape = io::Error::new(io::ErrorKind::PermissionDenied, "a path led outside of the filesystem");
        assert!(is_escape(&escape));
        assert!(is_escape(&io::Error::from_raw_os_error(rustix::io::Errno::XDEV.raw_os_error())));
        assert!(!is_escape(&io::Error::from_raw_os_error(rustix::io::Errno::ACCESS.raw_os_error())));
        assert!(io_message(&escape, "notes/l").contains("leads outside its exposed folder"));
        let nf = io::Error::from(io::ErrorKind::NotFound);
        assert_eq!(
            io_message(&nf, "notes/x"),
            "notes/x does not exist. Use list_directory to see what is there."
        );
    }
}
