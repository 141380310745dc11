//! The one check every import passes (Arbor's archives and other products' exports alike):
//! counts within caps, every name and setting valid, each session a tree (unique ids, parents
//! that exist, no cycles), roles, kinds, statuses and parts that Arbor knows; then every id is
//! replaced by a fresh one, parents ordered before children. A problem is an error naming where
//! it is, and nothing is written.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use crate::blobs::valid_hash;
use crate::domain::sessions::{APPROVAL_MODES, MAX_NAME_CHARS, MAX_PROMPT_CHARS};
use crate::model::messages::{MessageKind, MessageStatus, Role};
use crate::model::transfer::{ARCHIVE_FORMAT, Archive, ArchivedMessage, ArchivedSession};
use crate::providers::types::Part;

/// Workspaces one import may make.
pub const MAX_WORKSPACES: usize = 1_000;
/// Sessions one import may make.
pub const MAX_SESSIONS: usize = 10_000;
/// Messages one session may hold.
pub const MAX_MESSAGES_PER_SESSION: usize = 20_000;
/// Messages one import may make.
pub const MAX_MESSAGES: usize = 1_000_000;
/// Files one message may carry.
pub const MAX_FILES_PER_MESSAGE: usize = 100;
/// Tool calls one message may make.
pub const MAX_CALLS_PER_MESSAGE: usize = 256;
/// Prompt templates one import may bring.
pub const MAX_TEMPLATES: usize = 100;
/// Longest text of a short field (ids, models, tool names), in characters.
const MAX_SHORT: usize = 200;

/// Where a problem is, for the message.
fn at(w: usize, s: Option<(usize, &str)>) -> String {
    match s {
        Some((i, title)) => format!("workspace {}, session {} ({title:?})", w + 1, i + 1),
        None => format!("workspace {}", w + 1),
    }
}

/// A name shown in lists: trimmed, control characters removed, cut to the longest accepted;
/// `fallback` when nothing is left.
pub fn clean_title(raw: &str, fallback: &str) -> String {
    let cleaned: String = raw.chars().filter(|c| !c.is_control()).collect();
    let cleaned: String = cleaned.trim().chars().take(MAX_NAME_CHARS).collect();
    if cleaned.trim().is_empty() { fallback.to_string() } else { cleaned.trim().to_string() }
}

fn check_mode(mode: &mut Option<String>, place: &str) -> Result<(), String> {
    if let Some(m) = mode.as_deref().map(str::trim) {
        if m.is_empty() {
            *mode = None;
        } else if !APPROVAL_MODES.contains(&m) {
            return Err(format!(
                "{place}: the approval mode {m:?} is not one of {}.",
                APPROVAL_MODES.join(", ")
            ));
        }
    }
    Ok(())
}

fn check_prompt(prompt: &Option<String>, place: &str) -> Result<(), String> {
    if prompt.as_ref().is_some_and(|p| p.chars().count() > MAX_PROMPT_CHARS) {
        return Err(format!("{place}: the system prompt is longer than {MAX_PROMPT_CHARS} characters."));
    }
    Ok(())
}

fn check_short(value: Option<&str>, what: &str, place: &str) -> Result<(), String> {
    if value.is_some_and(|v| v.chars().count() > MAX_SHORT || v.chars().any(char::is_control)) {
        return Err(format!(
            "{place}: the {what} is longer than {MAX_SHORT} characters or holds control characters."
        ));
    }
    Ok(())
}

/// Checks the document and gives everything fresh ids. `files` are the hashes whose bytes the
/// import holds; a file named but not held is an error (an archive cannot reach a file it does
/// not carry).
pub fn check_and_renumber(archive: &mut Archive, files: &HashSet<String>) -> Result<(), String> {
    if archive.format != ARCHIVE_FORMAT {
        return Err(format!(
            "The export is format {}; this version of Arbor reads format {ARCHIVE_FORMAT}.",
            archive.format
        ));
    }
    if archive.workspaces.len() > MAX_WORKSPACES {
        return Err(format!(
            "The export holds {} workspaces; at most {MAX_WORKSPACES} are imported at once.",
            archive.workspaces.len()
        ));
    }
    let sessions: usize = archive.workspaces.iter().map(|w| w.sessions.len()).sum();
    if sessions > MAX_SESSIONS {
        return Err(format!(
            "The export holds {sessions} sessions; at most {MAX_SESSIONS} are imported at once."
        ));
    }
    let messages: usize = archive.workspaces.iter().flat_map(|w| &w.sessions).map(|s| s.messages.len()).sum();
    if messages > MAX_MESSAGES {
        return Err(format!(
            "The export holds {messages} messages; at most {MAX_MESSAGES} are imported at once."
        ));
    }
    if archive.prompt_templates.len() > MAX_TEMPLATES {
        return Err(format!(
            "The export holds {} prompt templates; at most {MAX_TEMPLATES} are kept.",
            archive.prompt_templates.len()
        ));
    }
    for (i, t) in archive.prompt_templates.iter_mut().enumerate() {
        t.name = clean_title(&t.name, "Imported template");
        if t.body.chars().count() > MAX_PROMPT_CHARS {
            return Err(format!(
                "Prompt template {} ({:?}) is longer than {MAX_PROMPT_CHARS} characters.",
                i + 1,
                t.name
            ));
        }
    }
    for (wi, w) in archive.workspaces.iter_mut().enumerate() {
        let place = at(wi, None);
        w.name = clean_title(&w.name, "Imported");
        check_mode(&mut w.approval_mode, &place)?;
        check_prompt(&w.system_prompt, &place)?;
        check_short(w.default_model.as_deref(), "default model", &place)?;
        if w.compact_at_percent.is_some_and(|p| p > 100) {
            return Err(format!("{place}: the compression threshold is more than 100 percent."));
        }
        for (si, s) in w.sessions.iter_mut().enumerate() {
            s.title = clean_title(&s.title, "Imported chat");
            let place = at(wi, Some((si, &s.title)));
            check_session(s, files, &place)?;
        }
    }
    Ok(())
}

fn check_session(s: &mut ArchivedSession, files: &HashSet<String>, place: &str) -> Result<(), String> {
    check_mode(&mut s.approval_mode, place)?;
    check_prompt(&s.system_prompt, place)?;
    check_short(s.model.as_deref(), "model", place)?;
    if s.params.as_ref().is_some_and(|p| !p.is_object() && !p.is_null()) {
        return Err(format!("{place}: the generation settings are not an object."));
    }
    if s.messages.len() > MAX_MESSAGES_PER_SESSION {
        return Err(format!(
            "{place}: {} messages; a session holds at most {MAX_MESSAGES_PER_SESSION}.",
            s.messages.len()
        ));
    }
    let mut index: HashMap<String, usize> = HashMap::with_capacity(s.messages.len());
    for (i, m) in s.messages.iter().enumerate() {
        if m.id.is_empty() || m.id.chars().count() > MAX_SHORT {
            return Err(format!("{place}: message {} has an empty or overlong id.", i + 1));
        }
        if index.insert(m.id.clone(), i).is_some() {
            return Err(format!("{place}: two messages have the id {:?}.", m.id));
        }
    }
    for m in s.messages.iter_mut() {
        check_message(m, files, place)?;
    }
    let order = parents_first(&s.messages, &index, place)?;
    // Children as the tree holds them, for chosen children and the active root.
    let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut roots = Vec::new();
    for m in &s.messages {
        match &m.parent {
            Some(p) => children.entry(p.as_str()).or_default().push(&m.id),
            None => roots.push(m.id.clone()),
        }
    }
    let mut chosen: Vec<Option<String>> = Vec::with_capacity(s.messages.len());
    for m in &s.messages {
        let kids = children.get(m.id.as_str());
        chosen.push(match (&m.chosen_child, kids) {
            (Some(c), Some(kids)) if kids.contains(&c.as_str()) => Some(c.clone()),
            (Some(c), _) => {
                return Err(format!(
                    "{place}: message {:?} names {c:?} as its chosen reply, which is not its child.",
                    m.id
                ));
            }
            // The path goes on through the newest child when none was chosen.
            (None, Some(kids)) => kids.last().map(|k| k.to_string()),
            (None, None) => None,
        });
    }
    match &s.active_root {
        Some(r) if !roots.contains(r) => {
            return Err(format!("{place}: the active path starts at {r:?}, which is not a first message."));
        }
        None => s.active_root = roots.first().cloned(),
        _ => {}
    }
    for (m, c) in s.messages.iter_mut().zip(chosen) {
        m.chosen_child = c;
    }
    // Fresh ids, parents first.
    let fresh: HashMap<String, String> =
        s.messages.iter().map(|m| (m.id.clone(), Uuid::now_v7().to_string())).collect();
    let renumber = |id: &mut Option<String>| {
        if let Some(old) = id.as_ref() {
            *id = fresh.get(old).cloned();
        }
    };
    renumber(&mut s.active_root);
    let mut taken: Vec<Option<ArchivedMessage>> =
        std::mem::take(&mut s.messages).into_iter().map(Some).collect();
    for i in order {
        let Some(mut m) = taken.get_mut(i).and_then(Option::take) else { continue };
        m.id = fresh.get(&m.id).cloned().unwrap_or_default();
        renumber(&mut m.parent);
        renumber(&mut m.chosen_child);
        for c in &mut m.tool_calls {
            renumber(&mut c.result_message);
        }
        s.messages.push(m);
    }
    Ok(())
}

fn check_message(m: &mut ArchivedMessage, files: &HashSet<String>, place: &str) -> Result<(), String> {
    let here = format!("{place}, message {:?}", m.id);
    let role = Role::parse(&m.role)
        .ok_or_else(|| format!("{here}: the role {:?} is not one Arbor knows.", m.role))?;
    MessageKind::parse(&m.kind)
        .ok_or_else(|| format!("{here}: the kind {:?} is not one Arbor knows.", m.kind))?;
    let status = MessageStatus::parse(&m.status)
        .ok_or_else(|| format!("{here}: the status {:?} is not one Arbor knows.", m.status))?;
    if status == MessageStatus::Streaming {
        m.status = MessageStatus::Interrupted.as_str().into();
    }
    if m.parts.is_null() {
        m.parts = serde_json::json!([]);
    }
    let parts: Vec<Part> = serde_json::from_value(m.parts.clone())
        .map_err(|e| format!("{here}: its content is not in a form Arbor knows ({e})."))?;
    if role == Role::User && parts.iter().any(|p| matches!(p, Part::ToolCall { .. })) {
        return Err(format!("{here}: a person's message holds a tool call."));
    }
    check_short(m.model.as_deref(), "model", &here)?;
    if m.usage.is_some_and(|u| u.input < 0 || u.output < 0 || u.cached < 0) {
        return Err(format!("{here}: its token counts are negative."));
    }
    if m.files.len() > MAX_FILES_PER_MESSAGE {
        return Err(format!("{here}: more than {MAX_FILES_PER_MESSAGE} files."));
    }
    for f in &mut m.files {
        if !valid_hash(&f.hash) || f.thumb.as_deref().is_some_and(|t| !valid_hash(t)) {
            return Err(format!("{here}: the file {:?} is not named by a valid hash.", f.name));
        }
        if !files.contains(&f.hash) || f.thumb.as_ref().is_some_and(|t| !files.contains(t)) {
            return Err(format!("{here}: the file {:?} is not in the archive.", f.name));
        }
        f.name = clean_title(&f.name, "file");
        if f.size < 0 {
            return Err(format!("{here}: the file {:?} has a negative size.", f.name));
        }
    }
    if m.tool_calls.len() > MAX_CALLS_PER_MESSAGE {
        return Err(format!("{here}: more than {MAX_CALLS_PER_MESSAGE} tool calls."));
    }
    let mut call_ids = HashSet::new();
    for c in &mut m.tool_calls {
        for (value, what, max) in [
            (&c.call_id, "tool call id", 128),
            (&c.tool, "tool name", 128),
            (&c.risk, "tool risk", 16),
            (&c.status, "tool call status", 16),
        ] {
            if value.is_empty() || value.chars().count() > max {
                return Err(format!("{here}: a {what} is empty or longer than {max} characters."));
            }
        }
        if c.decision.as_ref().is_some_and(|d| d.chars().count() > 16) {
            return Err(format!("{here}: a tool call's decision is longer than 16 characters."));
        }
        if !call_ids.insert(c.call_id.clone()) {
            return Err(format!("{here}: two tool calls have the id {:?}.", c.call_id));
        }
        // Nothing imported waits for a decision or looks like it is running.
        if matches!(c.status.as_str(), "proposed" | "approved" | "running") {
            c.status = "cancelled".into();
        }
    }
    Ok(())
}

/// Gives each file the size and type its bytes show (an archive's claims are not trusted: the
/// size counts against the member's storage, the type decides how it is served); returns the
/// bytes the import adds to the member's storage, every attachment counted as an upload is.
pub fn settle_files(archive: &mut Archive, files: &HashMap<String, (u64, &'static str)>) -> u64 {
    let mut total: u64 = 0;
    for w in &mut archive.workspaces {
        for s in &mut w.sessions {
            for f in s.messages.iter_mut().flat_map(|m| m.files.iter_mut()) {
                if let Some((size, mime)) = files.get(&f.hash) {
                    f.size = i64::try_from(*size).unwrap_or(i64::MAX);
                    f.mime = (*mime).to_string();
                    total = total.saturating_add(*size);
                }
            }
        }
    }
    total
}

/// The messages' indexes with every parent before its children; an error names a missing parent
/// or a cycle. Iterative, so a long chain cannot exhaust the stack.
fn parents_first(
    messages: &[ArchivedMessage],
    index: &HashMap<String, usize>,
    place: &str,
) -> Result<Vec<usize>, String> {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); messages.len()];
    let mut roots = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        match &m.parent {
            None => {
                roots.push(i);
            }
            Some(p) => {
                let Some(&pi) = index.get(p) else {
                    return Err(format!(
                        "{place}: message {:?} names the parent {p:?}, which is not in the export.",
                        m.id
                    ));
                };
                children[pi].push(i);
            }
        }
    }
    let mut order = Vec::with_capacity(messages.len());
    let mut stack: Vec<usize> = roots.into_iter().rev().collect();
    while let Some(i) = stack.pop() {
        order.push(i);
        stack.extend(children[i].iter().rev());
    }
    if order.len() < messages.len() {
        // Whatever no root reaches sits on a cycle or hangs below one.
        let reached: HashSet<usize> = order.iter().copied().collect();
        let stuck = (0..messages.len()).find(|i| !reached.contains(i)).unwrap_or(0);
        let id = messages.get(stuck).map(|m| m.id.as_str()).unwrap_or_default();
        return Err(format!("{place}: message {id:?} is its own ancestor (the parents form a cycle)."));
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::transfer::{ArchivedToolCall, ArchivedWorkspace};

    fn message(id: &str, parent: Option<&str>, role: &str) -> ArchivedMessage {
        ArchivedMessage {
            id: id.into(),
            parent: parent.map(str::to_string),
            role: role.into(),
            kind: "text".into(),
            status: "complete".into(),
            parts: serde_json::json!([{"type": "text", "text": id}]),
            ..ArchivedMessage::default()
        }
    }

    fn archive(messages: Vec<ArchivedMessage>) -> Archive {
        Archive {
            format: ARCHIVE_FORMAT,
            workspaces: vec![ArchivedWorkspace {
                name: "W".into(),
                sessions: vec![ArchivedSession { title: "T".into(), messages, ..ArchivedSession::default() }],
                ..ArchivedWorkspace::default()
            }],
            ..Archive::default()
        }
    }

    #[test]
    fn children_listed_before_parents_are_reordered_and_renumbered_consistently() {
        let mut answer = message("b", Some("a"), "assistant");
        answer.status = "streaming".into();
        answer.tool_calls = vec![ArchivedToolCall {
            call_id: "c1".into(),
            tool: "write_file".into(),
            arguments: "{}".into(),
            risk: "write".into(),
            status: "proposed".into(),
            result_message: Some("c".into()),
            ..ArchivedToolCall::default()
        }];
        let mut a = archive(vec![message("c", Some("b"), "tool"), answer, message("a", None, "user")]);
        check_and_renumber(&mut a, &HashSet::new()).unwrap();
        let m = &a.workspaces[0].sessions[0].messages;
        assert_eq!(m.iter().map(|m| m.role.as_str()).collect::<Vec<_>>(), ["user", "assistant", "tool"]);
        assert!(m.iter().all(|m| Uuid::parse_str(&m.id).is_ok()), "fresh ids");
        assert_eq!(m[1].parent.as_ref(), Some(&m[0].id));
        assert_eq!(m[2].parent.as_ref(), Some(&m[1].id));
        assert_eq!(m[0].chosen_child.as_ref(), Some(&m[1].id), "the path goes on through the only child");
        assert_eq!(a.workspaces[0].sessions[0].active_root.as_ref(), Some(&m[0].id));
        assert_eq!(m[1].status, "interrupted", "nothing imported is live");
        assert_eq!(m[1].tool_calls[0].status, "cancelled", "nothing imported waits for a decision");
        assert_eq!(m[1].tool_calls[0].result_message.as_ref(), Some(&m[2].id));
    }

    #[test]
    fn a_chain_as_deep_as_a_session_may_hold_is_checked_without_recursion() {
        let mut messages = vec![message("0", None, "user")];
        for i in 1..MAX_MESSAGES_PER_SESSION {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            messages.push(message(&i.to_string(), Some(&(i - 1).to_string()), role));
        }
        messages.reverse();
        let mut a = archive(messages);
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                check_and_renumber(&mut a, &HashSet::new()).unwrap();
                assert_eq!(a.workspaces[0].sessions[0].messages[0].parent, None);
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn claimed_file_sizes_give_way_to_the_bytes() {
        let mut first = message("a", None, "user");
        let file = crate::model::transfer::ArchivedFile {
            hash: "a".repeat(64),
            name: "f.png".into(),
            size: 0,
            mime: "image/png".into(),
            ..Default::default()
        };
        first.files = vec![file.clone(), file];
        let mut a = archive(vec![first]);
        let files = HashMap::from([("a".repeat(64), (1000u64, "text/plain"))]);
        assert_eq!(settle_files(&mut a, &files), 2000, "each attachment counts, as uploads do");
        let f = &a.workspaces[0].sessions[0].messages[0].files[0];
        assert_eq!((f.size, f.mime.as_str()), (1000, "text/plain"));
    }
}
