//! ChatGPT's data export (`conversations.json`): each conversation's `mapping` entries read into
//! the shared tree, and each message's many content types turned into text and reasoning parts.

use serde_json::{Map, Value};

use super::{
    ATTACHMENT_NOTE, Content, IMAGE_NOTE, Limits, RawNode, assemble, check_keys, clean_title, content_of,
    fenced, model_name, push_text, quote, reference, references, short, timestamp,
};
use crate::model::transfer::ArchivedSession;

/// Stands where a recording was.
const MEDIA_NOTE: &str = "[audio or video not included in the export]";

/// One ChatGPT conversation: its `mapping` entries, `current_node` and metadata.
pub(super) fn chatgpt_conversation(
    number: usize,
    conv: &Map<String, Value>,
    limits: &Limits,
    total: &mut usize,
) -> Result<ArchivedSession, String> {
    let title = clean_title(conv.get("title"));
    let label = format!("conversation {number} ({})", quote(&title));
    let mapping = conv
        .get("mapping")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{label}: it has no message tree (\"mapping\")."))?;
    check_keys(&label, mapping, limits)?;
    let mut nodes = Vec::with_capacity(mapping.len());
    for (id, entry) in mapping {
        let entry =
            entry.as_object().ok_or_else(|| format!("{label}: entry {} is not an object.", quote(id)))?;
        let message = entry.get("message").filter(|m| !m.is_null());
        let content = match message {
            Some(message) => chatgpt_message(&label, id, message, limits)?,
            None => None,
        };
        nodes.push(RawNode {
            id: id.clone(),
            parent: reference(&label, id, "parent", entry.get("parent"))?,
            children: references(&label, id, "children", entry.get("children"), limits)?,
            created_at: message.and_then(|m| timestamp(m.get("create_time"))),
            content,
        });
    }
    let current = reference(&label, "", "current_node", conv.get("current_node"))?;
    let tree = assemble(&label, nodes, current.as_deref(), limits, total)?;
    Ok(ArchivedSession {
        title,
        archived: conv.get("is_archived").and_then(Value::as_bool).unwrap_or(false),
        created_at: timestamp(conv.get("create_time")),
        active_root: tree.active_root,
        messages: tree.messages,
        ..Default::default()
    })
}

/// One ChatGPT message, or `None` when it shows nothing.
fn chatgpt_message(
    label: &str,
    id: &str,
    message: &Value,
    limits: &Limits,
) -> Result<Option<Content>, String> {
    let metadata = message.get("metadata");
    let hidden =
        metadata.and_then(|m| m.get("is_visually_hidden_from_conversation")).and_then(Value::as_bool);
    if hidden == Some(true) {
        return Ok(None);
    }
    let author = message.get("author");
    let source_role = author
        .and_then(|a| a.get("role"))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{label}: message {} names no author role.", quote(id)))?;
    let role = match source_role {
        "user" => "user",
        // A `tool` message becomes an assistant-side note, not Arbor's `tool` role: a `tool`
        // message must answer a structured call (a `tool_call` part with the same id) for any
        // provider to accept the conversation, and ChatGPT's export records no such calls (the
        // "call" is code or text addressed to the tool). As a note, the output stays readable and
        // the conversation can be continued.
        "assistant" | "tool" => "assistant",
        // `developer` is OpenAI's newer name for the system role.
        "system" | "developer" => "system",
        other => {
            return Err(format!(
                "{label}: message {} has the author role {}, which cannot be imported (expected user, \
                 assistant, system or tool).",
                quote(id),
                quote(other)
            ));
        }
    };
    let Some(content) = message.get("content").filter(|c| !c.is_null()) else {
        return Ok(None);
    };
    let kind = content
        .get("content_type")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{label}: message {} has no content type.", quote(id)))?;
    let mut text = Vec::new();
    let mut thought = Vec::new();
    match kind {
        "text" | "multimodal_text" => push_chatgpt_parts(&mut text, content.get("parts")),
        "code" => {
            let language = content.get("language").and_then(Value::as_str);
            match content.get("text").and_then(Value::as_str) {
                Some(code) => push_text(&mut text, &fenced(code, language)),
                None => {
                    let mut code = Vec::new();
                    push_chatgpt_parts(&mut code, content.get("parts"));
                    push_text(&mut text, &fenced(&code.join("\n"), language));
                }
            }
        }
        "execution_output" => {
            push_text(&mut text, &fenced(content.get("text").and_then(Value::as_str).unwrap_or(""), None))
        }
        // A reasoning model's thinking, and the "Thought for N seconds" line that recaps it.
        "thoughts" => {
            for item in content.get("thoughts").and_then(Value::as_array).into_iter().flatten() {
                let summary = item.get("summary").and_then(Value::as_str).unwrap_or("").trim();
                let body = item.get("content").and_then(Value::as_str).unwrap_or("").trim();
                let both: Vec<&str> = [summary, body].into_iter().filter(|s| !s.is_empty()).collect();
                push_text(&mut thought, &both.join("\n\n"));
            }
        }
        "reasoning_recap" => push_any_text(&mut thought, content),
        "tether_quote" => {
            let field = |name: &str| content.get(name).and_then(Value::as_str).unwrap_or("").trim();
            let quoted: Vec<String> = field("text").lines().map(|l| format!("> {l}")).collect();
            let source: Vec<&str> =
                [field("title"), field("url")].into_iter().filter(|s| !s.is_empty()).collect();
            if !quoted.is_empty() {
                push_text(&mut text, &format!("{}\n\n{}", quoted.join("\n"), source.join(" ")));
            }
        }
        "system_error" => {
            let name = content.get("name").and_then(Value::as_str).unwrap_or("error");
            if let Some(message) = content.get("text").and_then(Value::as_str) {
                push_text(&mut text, &format!("[{}] {message}", short(name)));
            }
        }
        // The person's custom instructions and the model's memory: context ChatGPT never shows
        // as a message of the conversation.
        "user_editable_context" | "model_editable_context" => return Ok(None),
        // Known kinds with no structure worth keeping beyond their text: browsing results and
        // code, computer use, widgets, system notices.
        "tether_browsing_display"
        | "tether_browsing_code"
        | "computer_output"
        | "sonic_webpage"
        | "super_widget"
        | "citable_code_output"
        | "system_message"
        | "system_content"
        | "developer_content"
        | "error" => push_any_text(&mut text, content),
        other => {
            return Err(format!(
                "{label}: message {} has the content type {}, which cannot be imported.",
                quote(id),
                quote(other)
            ));
        }
    }
    // Say who the text was for or came from, where that is a tool: otherwise a bare
    // `search("…")` or `4` reads as if it were meant for the person.
    if !text.is_empty() {
        if source_role == "tool" {
            let name = author.and_then(|a| a.get("name")).and_then(Value::as_str).unwrap_or("a tool");
            text.insert(0, format!("[output of {}]", short(name)));
        } else if let Some(recipient) = message.get("recipient").and_then(Value::as_str)
            && recipient != "all"
            && !recipient.is_empty()
        {
            text.insert(0, format!("[to {}]", short(recipient)));
        }
    }
    let model = if source_role == "assistant" {
        model_name("openai", metadata.and_then(|m| m.get("model_slug")))
    } else {
        None
    };
    content_of(label, id, role, thought, text, model, limits)
}

/// The strings of a ChatGPT `parts` list, with a note for each attachment.
fn push_chatgpt_parts(out: &mut Vec<String>, parts: Option<&Value>) {
    for part in parts.and_then(Value::as_array).into_iter().flatten() {
        match part {
            Value::String(s) => push_text(out, s),
            Value::Object(o) => {
                if let Some(t) = object_part(o) {
                    push_text(out, t);
                }
            }
            // Nulls and numbers carry nothing to show.
            _ => {}
        }
    }
}

/// What a structured part of a ChatGPT message shows: a transcript, or a note for media.
fn object_part(part: &Map<String, Value>) -> Option<&str> {
    let kind = part.get("content_type").and_then(Value::as_str).unwrap_or("");
    let text = part.get("text").and_then(Value::as_str);
    if kind == "audio_transcription" {
        text
    } else if kind.contains("image") {
        Some(IMAGE_NOTE)
    } else if kind.contains("audio") || kind.contains("video") {
        Some(MEDIA_NOTE)
    } else {
        Some(text.unwrap_or(ATTACHMENT_NOTE))
    }
}

/// Any text a content object of a known but loosely structured kind carries.
fn push_any_text(out: &mut Vec<String>, content: &Value) {
    for field in ["text", "result", "summary", "content"] {
        if let Some(s) = content.get(field).and_then(Value::as_str) {
            push_text(out, s);
        }
    }
    push_chatgpt_parts(out, content.get("parts"));
}
