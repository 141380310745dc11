//! Ambient files: the files the agent read or wrote on the path are carried in the context once,
//! as they are on disk now (read again for every call), beside the latest message of the person;
//! earlier `read_file` results of those files are sent as a short pointer instead. A member pins
//! a file (carried even when the path never touched it) or drops one (no longer carried, until
//! the agent touches it again) in the session's "Files in context" panel.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::RunEngine;
use super::window::{Window, window};
use crate::domain::accounts::Actor;
use crate::domain::sessions::ChatSession;
use crate::domain::sessions::tree::{self, Message, Role};
use crate::domain::{DomainError, DomainResult};
use crate::providers::types::Part;
use crate::storage::repos::{messages as repo, session_files};

/// Most files carried at once (the most recently touched, pinned ones first).
pub const MAX_AMBIENT_FILES: usize = 30;
/// Most bytes of file content carried at once; files past it are named, not shown.
pub const MAX_AMBIENT_BYTES: usize = 256 * 1024;
/// Longest path a member may pin or drop, in characters.
pub const MAX_PATH_CHARS: usize = 1_024;
/// Most files a session keeps a choice about (pinned or dropped).
pub const MAX_FILE_CHOICES: usize = 200;

/// The tools whose calls touch a file (by their `path` argument).
const FILE_TOOLS: [&str; 3] = ["read_file", "write_file", "edit_file"];

/// How the files are introduced to the model.
pub const FILES_HEADING: &str = "[Files in context: the files read or written in this conversation \
(or pinned by the user), as they are on disk now. Earlier read_file results of these files are not \
repeated; this is their current content.]";

/// A file carried in the context, as it is on disk now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmbientFile {
    /// Its path, as the tools name it (`notes/todo.md`).
    pub path: String,
    /// Its content now, or why it cannot be shown.
    pub content: String,
    /// The `read_file` call whose result already shows exactly this content (the file has not
    /// changed since): that result is sent whole and the file is left out of the block.
    pub shown_by: Option<String>,
}

/// A file of the "Files in context" panel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileInContext {
    /// Its path.
    pub path: String,
    /// `tracked` (the path touched it), `pinned` or `dropped`.
    pub state: &'static str,
    /// Whether the next reply carries it.
    pub carried: bool,
}

/// The files the agent read or wrote successfully on the part of `path` the model is sent,
/// each with when it was last touched, least recent first.
pub fn touched_files(path: &[Message], window: &Window) -> Vec<(String, DateTime<Utc>)> {
    let ok_results: HashSet<&str> = path
        .iter()
        .enumerate()
        .filter(|(i, m)| m.role == Role::Tool && window.sends(*i))
        .flat_map(|(_, m)| &m.parts)
        .filter_map(|p| match p {
            Part::ToolResult { call_id, is_error: false, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    let mut last: HashMap<String, DateTime<Utc>> = HashMap::new();
    for (i, m) in path.iter().enumerate() {
        if m.role != Role::Assistant || !window.sends(i) {
            continue;
        }
        for p in &m.parts {
            if let Part::ToolCall { id, name, arguments, .. } = p
                && FILE_TOOLS.contains(&name.as_str())
                && ok_results.contains(id.as_str())
                && let Some(file) = arguments.get("path").and_then(Value::as_str)
            {
                last.insert(file.trim().to_string(), m.created_at);
            }
        }
    }
    let mut out: Vec<_> = last.into_iter().collect();
    out.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    out
}

/// The panel's list and the paths carried, from the touched files and the member's choices
/// (path, state, when chosen). Pinned files come first; a drop holds until the next touch.
pub fn in_context(
    touched: &[(String, DateTime<Utc>)],
    choices: &[(String, String, DateTime<Utc>)],
) -> Vec<FileInContext> {
    let choice: HashMap<&str, (&str, DateTime<Utc>)> =
        choices.iter().map(|(p, s, at)| (p.as_str(), (s.as_str(), *at))).collect();
    let mut out: Vec<FileInContext> = choices
        .iter()
        .filter(|(_, s, _)| s == "pinned")
        .map(|(p, _, _)| FileInContext { path: p.clone(), state: "pinned", carried: true })
        .collect();
    // Most recently touched first, so the cap keeps the newest.
    for (path, at) in touched.iter().rev() {
        match choice.get(path.as_str()) {
            Some(("pinned", _)) => continue,
            Some(("dropped", dropped)) if dropped >= at => {
                out.push(FileInContext { path: path.clone(), state: "dropped", carried: false });
            }
            _ => out.push(FileInContext { path: path.clone(), state: "tracked", carried: true }),
        }
    }
    let mut carried = 0;
    for f in &mut out {
        if f.carried {
            carried += 1;
            f.carried = carried <= MAX_AMBIENT_FILES;
        }
    }
    out
}

/// The `read_file` calls on `path` of carried files, with the file each read: (call id, path).
fn reads<'a>(path: &'a [Message], files: &'a [AmbientFile]) -> impl Iterator<Item = (&'a str, &'a str)> {
    let carried: HashSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    path.iter().filter(|m| m.role == Role::Assistant).flat_map(|m| &m.parts).filter_map(move |p| match p {
        Part::ToolCall { id, name, arguments, .. } if name == "read_file" => {
            let file = arguments.get("path").and_then(Value::as_str)?.trim();
            carried.contains(file).then_some((id.as_str(), file))
        }
        _ => None,
    })
}

/// The `read_file` results on `path` sent as a pointer (a carried file's content is sent once:
/// in its latest result while the file is unchanged, else in the block): by call id.
pub fn pointers<'a>(path: &'a [Message], files: &'a [AmbientFile]) -> HashMap<&'a str, &'a str> {
    let shown: HashSet<&str> = files.iter().filter_map(|f| f.shown_by.as_deref()).collect();
    reads(path, files).filter(|(id, _)| !shown.contains(id)).collect()
}

/// Whether the result of call `id` is the one copy of a carried file (never cut).
pub fn is_shown_copy(files: &[AmbientFile], id: &str) -> bool {
    files.iter().any(|f| f.shown_by.as_deref() == Some(id))
}

/// What an earlier `read_file` result of a carried file is sent as.
pub fn pointer_text(file: &str) -> String {
    format!("[The content of {file} is not repeated here: it is under \"Files in context\", as it is now.]")
}

/// The block of carried files not already shown by their latest result, as one text (none
/// when there is nothing to show).
pub fn block(files: &[AmbientFile]) -> Option<String> {
    let mut out = String::from(FILES_HEADING);
    let mut any = false;
    for f in files.iter().filter(|f| f.shown_by.is_none()) {
        out.push_str(&format!("\n\n=== {} ===\n{}", f.path, f.content));
        any = true;
    }
    any.then_some(out)
}

/// The latest whole-file `read_file` result of `file` on `path`: (call id, content).
fn latest_read<'a>(path: &'a [Message], file: &str) -> Option<(&'a str, &'a str)> {
    let mut latest = None;
    for m in path {
        for p in &m.parts {
            match p {
                Part::ToolCall { id, name, arguments, .. }
                    if name == "read_file"
                        && arguments.get("path").and_then(Value::as_str).map(str::trim) == Some(file)
                        && arguments.get("start_line").is_none()
                        && arguments.get("end_line").is_none() =>
                {
                    latest = Some((id.as_str(), None));
                }
                Part::ToolResult { call_id, content, is_error: false, .. }
                    if latest.is_some_and(|(id, _)| id == call_id) =>
                {
                    latest = latest.map(|(id, _)| (id, Some(content.as_str())));
                }
                _ => {}
            }
        }
    }
    latest.and_then(|(id, content)| Some((id, content?)))
}

/// A path a member names in the panel, checked.
fn checked_path(path: &str) -> DomainResult<&str> {
    let path = path.trim();
    if path.is_empty() || path.chars().count() > MAX_PATH_CHARS || path.chars().any(char::is_control) {
        return Err(DomainError::Invalid(format!(
            "Name a file by its path (at most {MAX_PATH_CHARS} characters), e.g. notes/todo.md."
        )));
    }
    Ok(path)
}

impl RunEngine {
    /// The files a reply on `path` carries, read from disk now (within the caps).
    pub(super) async fn ambient_files(&self, session: &ChatSession, path: &[Message]) -> Vec<AmbientFile> {
        if session.exposed_roots.is_empty() {
            return Vec::new();
        }
        let choices = match session_files::list(&self.db, session.id).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "the session's file choices could not be read");
                Vec::new()
            }
        };
        let window = window(path);
        let listed = in_context(&touched_files(path, &window), &choices);
        if listed.is_empty() {
            return Vec::new();
        }
        let env = self.agent_settings.env(self.roots_of(session).await);
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for f in listed.into_iter().filter(|f| f.carried) {
            let read = crate::tools::run_builtin("read_file", &json!({ "path": f.path }), &env).await;
            let shown_by = latest_read(path, &f.path)
                .filter(|(_, shown)| !read.is_error && *shown == read.content)
                .map(|(id, _)| id.to_string());
            let content = if read.is_error {
                format!("(It cannot be read now: {})", read.content)
            } else if shown_by.is_none() && bytes + read.content.len() > MAX_AMBIENT_BYTES {
                "(Left out: the files in context are at their size limit; read_file shows it.)".to_string()
            } else {
                read.content
            };
            if shown_by.is_none() {
                bytes += content.len();
            }
            out.push(AmbientFile { path: f.path, content, shown_by });
        }
        out
    }

    /// The "Files in context" panel of one of the actor's sessions.
    pub async fn files_in_context(
        &self,
        actor: &Actor,
        session_id: Uuid,
    ) -> DomainResult<Vec<FileInContext>> {
        let (session, _) = self.sessions.view_session(actor, session_id).await?;
        self.files_in_context_in(&session).await
    }

    /// [`Self::files_in_context`] in a session the caller was just given by a check of the
    /// actor's access.
    pub(crate) async fn files_in_context_in(
        &self,
        session: &ChatSession,
    ) -> DomainResult<Vec<FileInContext>> {
        // Without an exposed folder no file can be carried (and the panel is hidden).
        if session.exposed_roots.is_empty() {
            return Ok(Vec::new());
        }
        let all = repo::session_messages(&self.db, session.id).await?;
        let path = tree::active_path(&all, session.active_root_id);
        let choices = session_files::list(&self.db, session.id).await?;
        Ok(in_context(&touched_files(&path, &window(&path)), &choices))
    }

    /// A member pins a file into the session's context, drops one from it, or lets the path
    /// decide again (`track`).
    pub async fn choose_file(
        &self,
        actor: &Actor,
        session_id: Uuid,
        path: &str,
        choice: &str,
    ) -> DomainResult<()> {
        let session = self.sessions.get_session(actor, session_id).await?;
        let path = checked_path(path)?;
        let state = match choice {
            "pin" => Some("pinned"),
            "drop" => Some("dropped"),
            "track" => None,
            _ => return Err(DomainError::Invalid("Choose pin, drop or track.".into())),
        };
        if state.is_some() {
            let choices = session_files::list(&self.db, session.id).await?;
            if choices.len() >= MAX_FILE_CHOICES && !choices.iter().any(|(p, _, _)| p == path) {
                return Err(DomainError::Invalid(format!(
                    "At most {MAX_FILE_CHOICES} files can be pinned or dropped in a session: unpin some first."
                )));
            }
        }
        session_files::set(&self.db, session.id, path, state).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(secs, 0).single().unwrap_or_default()
    }

    #[test]
    fn pins_come_first_drops_hold_until_the_next_touch_and_the_cap_keeps_the_newest() {
        let touched: Vec<(String, DateTime<Utc>)> =
            (0..40).map(|i| (format!("notes/f{i}.md"), at(100 + i))).collect();
        let choices = vec![
            ("notes/pin.md".to_string(), "pinned".to_string(), at(1)),
            ("notes/f39.md".to_string(), "dropped".to_string(), at(500)),
            ("notes/f38.md".to_string(), "dropped".to_string(), at(50)),
        ];
        let listed = in_context(&touched, &choices);
        assert_eq!(listed[0], FileInContext { path: "notes/pin.md".into(), state: "pinned", carried: true });
        assert_eq!(
            (listed[1].path.as_str(), listed[1].state, listed[1].carried),
            ("notes/f39.md", "dropped", false)
        );
        // Dropped before its last touch: tracked again.
        assert_eq!((listed[2].path.as_str(), listed[2].state), ("notes/f38.md", "tracked"));
        let carried: Vec<&str> = listed.iter().filter(|f| f.carried).map(|f| f.path.as_str()).collect();
        assert_eq!(carried.len(), MAX_AMBIENT_FILES);
        assert!(carried.contains(&"notes/f38.md") && !carried.contains(&"notes/f0.md"));
        assert!(checked_path("  ").is_err() && checked_path("a\u{0}b").is_err());
        assert!(checked_path(&"a".repeat(MAX_PATH_CHARS + 1)).is_err());
        assert_eq!(checked_path(" notes/a.md ").ok(), Some("notes/a.md"));
    }
}
