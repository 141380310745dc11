//! Open WebUI's chat export: each chat's `history.messages` read into the shared tree, its
//! markdown content kept as written and its attachments noted.

use serde_json::{Map, Value};

use super::{
    ATTACHMENT_NOTE, Content, IMAGE_NOTE, Limits, RawNode, assemble, check_keys, clean_title, content_of,
    model_name, push_text, quote, reference, references, timestamp,
};
use crate::model::transfer::ArchivedSession;

/// One Open WebUI chat: its `history.messages`, `history.currentId` and metadata.
pub(super) fn open_webui_conversation(
    number: usize,
    item: &Map<String, Value>,
    limits: &Limits,
    total: &mut usize,
) -> Result<ArchivedSession, String> {
    // The export wraps each chat (`{id, title, chat: {...}, created_at, ...}`); older ones were
    // the chat itself.
    let chat = item.get("chat").and_then(Value::as_object).unwrap_or(item);
    let named = |v: &Value| v.as_str().is_some_and(|s| !s.trim().is_empty());
    let title = clean_title(item.get("title").filter(|v| named(v)).or_else(|| chat.get("title")));
    let label = format!("conversation {number} ({})", quote(&title));
    let history = chat
        .get("history")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{label}: it has no message history (\"history\")."))?;
    let messages = history
        .get("messages")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{label}: its history has no messages."))?;
    check_keys(&label, messages, limits)?;
    let mut nodes = Vec::with_capacity(messages.len());
    for (id, message) in messages {
        let message =
            message.as_object().ok_or_else(|| format!("{label}: message {} is not an object.", quote(id)))?;
        nodes.push(RawNode {
            id: id.clone(),
            parent: reference(&label, id, "parentId", message.get("parentId"))?,
            children: references(&label, id, "childrenIds", message.get("childrenIds"), limits)?,
            created_at: timestamp(message.get("timestamp")),
            content: open_webui_message(&label, id, message, limits)?,
        });
    }
    let current = reference(&label, "", "currentId", history.get("currentId"))?;
    let tree = assemble(&label, nodes, current.as_deref(), limits, total)?;
    Ok(ArchivedSession {
        title,
        archived: item.get("archived").and_then(Value::as_bool).unwrap_or(false),
        created_at: timestamp(item.get("created_at")).or_else(|| timestamp(chat.get("timestamp"))),
        active_root: tree.active_root,
        messages: tree.messages,
        ..Default::default()
    })
}

/// One Open WebUI message, or `None` when it shows nothing. Its content is markdown and is kept
/// as written (reasoning included, in the `<details>` block Open WebUI writes it in).
fn open_webui_message(
    label: &str,
    id: &str,
    message: &Map<String, Value>,
    limits: &Limits,
) -> Result<Option<Content>, String> {
    let role = match message.get("role").and_then(Value::as_str) {
        Some("user") => "user",
        Some("assistant") => "assistant",
        Some("system") => "system",
        Some(other) => {
            return Err(format!(
                "{label}: message {} has the role {}, which cannot be imported (expected user, \
                 assistant or system).",
                quote(id),
                quote(other)
            ));
        }
        None => return Err(format!("{label}: message {} names no role.", quote(id))),
    };
    let mut text = Vec::new();
    // Attachments first, as the person added them before writing.
    for file in message.get("files").and_then(Value::as_array).into_iter().flatten() {
        let name = [file.get("name"), file.pointer("/file/filename"), file.pointer("/file/meta/name")]
            .into_iter()
            .find_map(|v| v.and_then(Value::as_str).filter(|s| !s.trim().is_empty()));
        let note = match (file.get("type").and_then(Value::as_str), name) {
            (Some("image"), _) => IMAGE_NOTE.to_string(),
            (_, Some(name)) => format!("[file {} not included in the export]", quote(name)),
            (_, None) => ATTACHMENT_NOTE.to_string(),
        };
        text.push(note);
    }
    match message.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => push_text(&mut text, s),
        // OpenAI-style content parts, which some versions store for images.
        Some(Value::Array(items)) => {
            for item in items {
                match item.get("type").and_then(Value::as_str) {
                    Some("image_url") => text.push(IMAGE_NOTE.to_string()),
                    _ => {
                        if let Some(s) = item.get("text").and_then(Value::as_str) {
                            push_text(&mut text, s);
                        }
                    }
                }
            }
        }
        Some(_) => return Err(format!("{label}: the content of message {} is not text.", quote(id))),
    }
    let model = if role == "assistant" {
        // Open WebUI's model ids name no provider (an Ollama tag, an OpenAI id, a custom model),
        // so the product stands in for it.
        model_name("open-webui", message.get("model"))
    } else {
        None
    };
    content_of(label, id, role, Vec::new(), text, model, limits)
}
