//! Other products' chat exports (ChatGPT, Open WebUI) read into Arbor's archive sessions, every
//! branch kept: an edited prompt or a regenerated reply is a sibling in their trees, as in ours.
//!
//! Both sources store a conversation as a map of messages that name their parent. The parent is
//! trusted as the truth; the listed children only order siblings (and must exist). Entries that
//! show nothing (ChatGPT's empty root, hidden system prompts, custom instructions, empty messages)
//! are left out and their children hang from the nearest kept ancestor, so no branch is lost.
//!
//! The input is untrusted: nothing here panics on it, recurses over it or loops without a bound,
//! and every count and size is capped (see the constants). Errors are sentences safe to show the
//! person importing, naming the conversation and the message at fault.
//!
//! This module holds the public API and what both formats share (the caps, the tree's assembly
//! and checks, the title, timestamp and text helpers, error wording); `chatgpt` and `open_webui`
//! read each format's own fields.

mod chatgpt;
mod open_webui;

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::model::transfer::{ArchivedMessage, ArchivedSession};
use crate::providers::types::Part;

use chatgpt::chatgpt_conversation;
use open_webui::open_webui_conversation;

/// Most conversations one export may hold.
pub const MAX_CONVERSATIONS: usize = 10_000;
/// Most messages one conversation may hold, counted after hidden entries are left out.
pub const MAX_MESSAGES_PER_CONVERSATION: usize = 20_000;
/// Most entries (hidden ones included) one conversation's map may hold: bounds the work done
/// before we know which entries are kept.
pub const MAX_ENTRIES_PER_CONVERSATION: usize = 2 * MAX_MESSAGES_PER_CONVERSATION;
/// Most messages one export may hold in all.
pub const MAX_MESSAGES_TOTAL: usize = 1_000_000;
/// Most bytes of text (answer and reasoning together) one message may hold.
pub const MAX_MESSAGE_TEXT_BYTES: usize = 1024 * 1024;
/// Longest title kept, in characters; a longer one is cut.
pub const MAX_TITLE_CHARS: usize = 200;
/// Longest message id accepted, in bytes (both products use 36-character UUIDs).
pub const MAX_ID_BYTES: usize = 256;
/// Title given to a conversation that has none.
pub const DEFAULT_TITLE: &str = "Imported chat";
/// Stands where an image was: the files beside an export are not imported.
pub const IMAGE_NOTE: &str = "[image not included in the export]";

/// Stands where any other attachment was.
const ATTACHMENT_NOTE: &str = "[attachment not included in the export]";
/// Longest tool name, recipient or model name copied into a message, in bytes.
const MAX_NAME_BYTES: usize = 200;

/// The caps, as one value so tests can shrink the ones too large to reach cheaply.
#[derive(Debug, Clone, Copy)]
struct Limits {
    conversations: usize,
    messages_per_conversation: usize,
    entries_per_conversation: usize,
    messages_total: usize,
    text_bytes: usize,
}

const LIMITS: Limits = Limits {
    conversations: MAX_CONVERSATIONS,
    messages_per_conversation: MAX_MESSAGES_PER_CONVERSATION,
    entries_per_conversation: MAX_ENTRIES_PER_CONVERSATION,
    messages_total: MAX_MESSAGES_TOTAL,
    text_bytes: MAX_MESSAGE_TEXT_BYTES,
};

/// A chat export format another product writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForeignFormat {
    /// ChatGPT's data export (`conversations.json`): conversations holding a `mapping` tree.
    ChatGpt,
    /// Open WebUI's chat export: chats holding `chat.history.messages`.
    OpenWebUi,
}

/// Recognises the format from the parsed JSON's shape: a list of conversations (or a single
/// one) whose first has a `mapping` object (ChatGPT) or a `chat.history` object (Open WebUI; its
/// older exports put `history` at the top). `None` when neither, or when the list is empty.
pub fn detect(doc: &Value) -> Option<ForeignFormat> {
    let first = match doc {
        Value::Array(items) => items.first()?,
        Value::Object(_) => doc,
        _ => return None,
    };
    let first = first.as_object()?;
    if first.get("mapping").is_some_and(Value::is_object) {
        return Some(ForeignFormat::ChatGpt);
    }
    let chat = first.get("chat").and_then(Value::as_object).unwrap_or(first);
    chat.get("history").is_some_and(Value::is_object).then_some(ForeignFormat::OpenWebUi)
}

/// Reads ChatGPT's `conversations.json` (the list, or one conversation of it) into sessions,
/// every branch kept, in the export's order.
pub fn from_chatgpt(doc: &Value) -> Result<Vec<ArchivedSession>, String> {
    convert(doc, "a ChatGPT export", &LIMITS, chatgpt_conversation)
}

/// Reads Open WebUI's chat export (the list, or one chat) into sessions, every branch kept, in
/// the export's order.
pub fn from_open_webui(doc: &Value) -> Result<Vec<ArchivedSession>, String> {
    convert(doc, "an Open WebUI export", &LIMITS, open_webui_conversation)
}

/// Reads one conversation: its number (from 1), its object, the caps and the running total of
/// messages.
type ConvertOne = fn(usize, &Map<String, Value>, &Limits, &mut usize) -> Result<ArchivedSession, String>;

/// The list (or single object) around the conversations, checked and counted.
fn convert(
    doc: &Value,
    what: &str,
    limits: &Limits,
    one: ConvertOne,
) -> Result<Vec<ArchivedSession>, String> {
    let items = match doc {
        Value::Array(items) => items.as_slice(),
        Value::Object(_) => std::slice::from_ref(doc),
        _ => return Err(format!("This is not {what}: expected a list of conversations.")),
    };
    if items.len() > limits.conversations {
        return Err(format!(
            "The export holds {} conversations, more than the {} one import may hold.",
            items.len(),
            limits.conversations
        ));
    }
    let mut total = 0;
    let mut sessions = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let item = item.as_object().ok_or_else(|| format!("conversation {} is not an object.", i + 1))?;
        sessions.push(one(i + 1, item, limits, &mut total)?);
    }
    Ok(sessions)
}

/// One entry of a source's tree, read but not yet checked against the others.
struct RawNode {
    id: String,
    /// The parent it names (the truth about the tree's shape).
    parent: Option<String>,
    /// The children it lists: only their order is used.
    children: Vec<String>,
    created_at: Option<DateTime<Utc>>,
    /// `None` when the entry shows nothing and is left out.
    content: Option<Content>,
}

/// What a kept entry says.
struct Content {
    role: &'static str,
    /// A JSON array of `Part`s.
    parts: Value,
    model: Option<String>,
}

/// The message's parts (reasoning first, then the answer), checked against the size cap; `None`
/// when there is nothing to show.
fn content_of(
    label: &str,
    id: &str,
    role: &'static str,
    thought: Vec<String>,
    text: Vec<String>,
    model: Option<String>,
    limits: &Limits,
) -> Result<Option<Content>, String> {
    let thought = thought.join("\n\n");
    let text = text.join("\n\n");
    let bytes = thought.len() + text.len();
    if bytes > limits.text_bytes {
        return Err(format!(
            "{label}: message {} holds {bytes} bytes of text, more than the {} one message may hold.",
            quote(id),
            limits.text_bytes
        ));
    }
    let mut parts = Vec::new();
    if !thought.is_empty() {
        parts.push(Part::Thought { text: thought, signature: None, redacted: None });
    }
    if !text.is_empty() {
        parts.push(Part::Text { text });
    }
    if parts.is_empty() {
        return Ok(None);
    }
    let parts = serde_json::to_value(parts)
        .map_err(|e| format!("{label}: message {} could not be stored: {e}", quote(id)))?;
    Ok(Some(Content { role, parts, model }))
}

/// Checks a conversation's map of entries before reading them: its size, its ids, and that no
/// id is claimed twice. Entries are keyed by id, and the key is what parents and children refer
/// to, so an entry whose own `id` differs from its key is refused rather than guessed at.
fn check_keys(label: &str, entries: &Map<String, Value>, limits: &Limits) -> Result<(), String> {
    if entries.len() > limits.entries_per_conversation {
        return Err(format!(
            "{label}: it has {} entries, more than the {} one conversation may hold.",
            entries.len(),
            limits.entries_per_conversation
        ));
    }
    // Claimed id → the key it is stored under. A JSON object's keys are unique once parsed, so
    // a duplicate shows as an entry claiming another's id.
    let mut claimed: HashMap<&str, &str> = HashMap::with_capacity(entries.len());
    for (key, entry) in entries {
        let id = entry.get("id").and_then(Value::as_str).unwrap_or(key);
        if let Some(other) = claimed.insert(id, key) {
            return Err(format!(
                "{label}: the message id {} is used twice (by the entries {} and {}).",
                quote(id),
                quote(other),
                quote(key)
            ));
        }
    }
    for (key, entry) in entries {
        if key.is_empty() || key.len() > MAX_ID_BYTES {
            return Err(format!(
                "{label}: the message id {} is empty or longer than {MAX_ID_BYTES} bytes.",
                quote(key)
            ));
        }
        match entry.get("id") {
            None | Some(Value::Null) => {}
            Some(Value::String(id)) if id == key => {}
            Some(other) => {
                let claimed = other.as_str().map_or_else(|| other.to_string(), str::to_string);
                return Err(format!(
                    "{label}: the entry stored under {} says its id is {}; the two must match.",
                    quote(key),
                    quote(&claimed)
                ));
            }
        }
    }
    Ok(())
}

/// A single reference to another message (`parent`, `current_node`, …): a string or null.
fn reference(label: &str, id: &str, field: &str, value: Option<&Value>) -> Result<Option<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) if id.is_empty() => Err(format!("{label}: its {field:?} is not a message id.")),
        Some(_) => Err(format!("{label}: the {field:?} of message {} is not a message id.", quote(id))),
    }
}

/// A list of references to other messages (`children`, `childrenIds`).
fn references(
    label: &str,
    id: &str,
    field: &str,
    value: Option<&Value>,
    limits: &Limits,
) -> Result<Vec<String>, String> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(format!("{label}: the {field:?} of message {} is not a list.", quote(id))),
    };
    if items.len() > limits.entries_per_conversation {
        return Err(format!(
            "{label}: message {} lists {} children, more than the {} one conversation may hold.",
            quote(id),
            items.len(),
            limits.entries_per_conversation
        ));
    }
    items
        .iter()
        .map(|item| {
            item.as_str().map(str::to_string).ok_or_else(|| {
                format!("{label}: the {field:?} of message {} holds something that is not an id.", quote(id))
            })
        })
        .collect()
}

/// A conversation's kept messages, parents before children, and the first of its active path.
struct Tree {
    messages: Vec<ArchivedMessage>,
    active_root: Option<String>,
}

/// Checks the entries against each other and lays out the kept ones as a tree: every reference
/// resolves, nothing is its own ancestor, hidden entries hand their children to the nearest kept
/// ancestor, and the chosen child at each fork is the one on the path to `current` (the last
/// child elsewhere). Iterative throughout, so a 20,000-deep chain needs no deep stack.
fn assemble(
    label: &str,
    mut nodes: Vec<RawNode>,
    current: Option<&str>,
    limits: &Limits,
    total: &mut usize,
) -> Result<Tree, String> {
    let n = nodes.len();
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(n);
    for (i, node) in nodes.iter().enumerate() {
        if index.insert(node.id.as_str(), i).is_some() {
            return Err(format!("{label}: the message id {} is used twice.", quote(&node.id)));
        }
    }
    // Children as the parents say (the truth), ordered below by the listed children.
    let mut parent_of: Vec<Option<usize>> = vec![None; n];
    let mut kids: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut roots = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        for child in &node.children {
            if !index.contains_key(child.as_str()) {
                return Err(format!(
                    "{label}: message {} lists the child {}, which is not in the export.",
                    quote(&node.id),
                    quote(child)
                ));
            }
        }
        match &node.parent {
            None => roots.push(i),
            Some(parent) => {
                let &p = index.get(parent.as_str()).ok_or_else(|| {
                    format!(
                        "{label}: message {} names the parent {}, which is not in the export.",
                        quote(&node.id),
                        quote(parent)
                    )
                })?;
                parent_of[i] = Some(p);
                kids[p].push(i);
            }
        }
    }
    let current =
        match current {
            None => None,
            Some(id) => Some(*index.get(id).ok_or_else(|| {
                format!("{label}: the current message {} is not in the export.", quote(id))
            })?),
        };
    // Siblings in the order their parent lists them (creation order in both products); any it
    // does not list, and roots, by time then id so the result does not depend on map order.
    let by_time = |a: &usize, b: &usize| {
        (nodes[*a].created_at, &nodes[*a].id).cmp(&(nodes[*b].created_at, &nodes[*b].id))
    };
    for (p, list) in kids.iter_mut().enumerate() {
        if list.len() < 2 {
            continue;
        }
        let mut listed: HashMap<&str, usize> = HashMap::new();
        for (k, child) in nodes[p].children.iter().enumerate() {
            listed.entry(child.as_str()).or_insert(k);
        }
        let rank = |i: &usize| listed.get(nodes[*i].id.as_str()).copied().unwrap_or(usize::MAX);
        list.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| by_time(a, b)));
    }
    roots.sort_by(by_time);

    let kept = nodes.iter().filter(|node| node.content.is_some()).count();
    if kept > limits.messages_per_conversation {
        return Err(format!(
            "{label}: it holds {kept} messages, more than the {} one conversation may hold.",
            limits.messages_per_conversation
        ));
    }
    *total += kept;
    if *total > limits.messages_total {
        return Err(format!(
            "{label}: it brings the export to {} messages, more than the {} one import may hold.",
            *total, limits.messages_total
        ));
    }

    // Depth-first from the roots, parents before children; each stack item carries the output
    // index of its nearest kept ancestor.
    let mut visited = vec![false; n];
    let mut messages: Vec<ArchivedMessage> = Vec::with_capacity(kept);
    let mut source: Vec<usize> = Vec::with_capacity(kept);
    let mut kept_kids: Vec<Vec<usize>> = Vec::with_capacity(kept);
    let mut kept_roots: Vec<usize> = Vec::new();
    let mut stack: Vec<(usize, Option<usize>)> = roots.iter().rev().map(|&r| (r, None)).collect();
    while let Some((i, above)) = stack.pop() {
        visited[i] = true;
        let mut here = above;
        if let Some(content) = nodes[i].content.take() {
            let o = messages.len();
            messages.push(ArchivedMessage {
                id: nodes[i].id.clone(),
                parent: above.map(|a| messages[a].id.clone()),
                role: content.role.to_string(),
                kind: "text".to_string(),
                parts: content.parts,
                model: content.model,
                status: "complete".to_string(),
                created_at: nodes[i].created_at,
                ..Default::default()
            });
            source.push(i);
            kept_kids.push(Vec::new());
            match above {
                Some(a) => kept_kids[a].push(o),
                None => kept_roots.push(o),
            }
            here = Some(o);
        }
        stack.extend(kids[i].iter().rev().map(|&c| (c, here)));
    }
    // Whatever the walk from the roots did not reach hangs from a loop: follow its parents until
    // one repeats, and name that one.
    if let Some(start) = visited.iter().position(|v| !v) {
        let mut seen = HashSet::new();
        let mut at = start;
        while seen.insert(at) {
            match parent_of[at] {
                Some(p) => at = p,
                None => break,
            }
        }
        return Err(format!(
            "{label}: message {} is its own ancestor (its parent links form a loop).",
            quote(&nodes[at].id)
        ));
    }

    // The active path: from the current message up to its root (finite: there are no loops).
    let mut on_path = vec![false; n];
    let mut at = current;
    while let Some(i) = at {
        on_path[i] = true;
        at = parent_of[i];
    }
    let pick = |list: &[usize]| list.iter().copied().find(|&o| on_path[source[o]]).or(list.last().copied());
    for (o, list) in kept_kids.iter().enumerate() {
        if let Some(c) = pick(list) {
            messages[o].chosen_child = Some(messages[c].id.clone());
        }
    }
    let active_root = pick(&kept_roots).map(|r| messages[r].id.clone());
    Ok(Tree { messages, active_root })
}

/// The title trimmed, its whitespace runs and control characters made single spaces, cut to
/// `MAX_TITLE_CHARS`; `DEFAULT_TITLE` when nothing is left.
fn clean_title(value: Option<&Value>) -> String {
    let raw = value.and_then(Value::as_str).unwrap_or("");
    let mut title = String::new();
    let mut count = 0;
    for word in raw.split(|c: char| c.is_whitespace() || c.is_control()).filter(|w| !w.is_empty()) {
        if count > 0 && count < MAX_TITLE_CHARS {
            title.push(' ');
            count += 1;
        }
        for c in word.chars() {
            if count >= MAX_TITLE_CHARS {
                break;
            }
            title.push(c);
            count += 1;
        }
        if count >= MAX_TITLE_CHARS {
            break;
        }
    }
    let title = title.trim_end();
    if title.is_empty() { DEFAULT_TITLE.to_string() } else { title.to_string() }
}

/// Unix seconds (a float in ChatGPT, an integer in Open WebUI; milliseconds, which some older
/// Open WebUI fields hold, are recognised by their size) or an RFC 3339 string.
fn timestamp(value: Option<&Value>) -> Option<DateTime<Utc>> {
    let value = value?;
    if let Some(s) = value.as_str() {
        return DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc));
    }
    let mut secs = value.as_f64().filter(|s| s.is_finite() && *s >= 0.0)?;
    // 1e11 seconds is in the year 5138: anything larger is milliseconds.
    if secs > 1e11 {
        secs /= 1000.0;
    }
    let whole = secs.trunc();
    // `as` saturates, and the range check below refuses what does not fit.
    let nanos = ((secs - whole) * 1e9) as u32;
    DateTime::from_timestamp(whole as i64, nanos.min(999_999_999))
}

/// `provider/model` from a model name, when there is a sensible one.
fn model_name(provider: &str, value: Option<&Value>) -> Option<String> {
    let name = value?.as_str()?.trim();
    let fits = !name.is_empty() && name.len() <= MAX_NAME_BYTES && !name.chars().any(char::is_control);
    fits.then(|| format!("{provider}/{name}"))
}

/// Adds a piece of text unless it is blank.
fn push_text(out: &mut Vec<String>, text: &str) {
    if !text.trim().is_empty() {
        out.push(text.to_string());
    }
}

/// Code as a fenced markdown block, the fence longer than any run of backticks inside.
fn fenced(code: &str, language: Option<&str>) -> String {
    if code.trim().is_empty() {
        return String::new();
    }
    let (mut longest, mut run) = (0, 0);
    for c in code.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    // Only a plain language word goes on the fence line (ChatGPT writes "unknown" when it has none).
    let language = language
        .filter(|l| *l != "unknown" && l.len() <= 32)
        .filter(|l| l.chars().all(|c| c.is_ascii_alphanumeric() || "+-#._".contains(c)))
        .unwrap_or("");
    format!("{fence}{language}\n{}\n{fence}", code.trim_end_matches('\n'))
}

/// A name from the input, as short as it may be when put into a message.
fn short(name: &str) -> String {
    let name: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
    if name.trim().is_empty() { "?".to_string() } else { name }
}

/// A string from the input, quoted and escaped for an error message, and cut when long.
fn quote(s: &str) -> String {
    const MAX: usize = 80;
    match s.char_indices().nth(MAX) {
        None => format!("{s:?}"),
        Some((cut, _)) => format!("{:?}…", &s[..cut]),
    }
}

#[cfg(test)]
mod tests;
