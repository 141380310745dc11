//! The session's todo list that the agent keeps with write_todo.

use super::*;

/// Longest todo list `write_todo` keeps.
pub const MAX_TODOS: usize = 50;
/// Longest todo item, in characters.
pub const MAX_TODO_CHARS: usize = 500;

/// The `write_todo` tool: the session's todo list, replaced whole on every call.
pub fn write_todo_spec() -> ToolSpec {
    ToolSpec {
        name: "write_todo".into(),
        description: "Replace this session's todo list (shown to the user beside the chat). Send the whole \
list each time, with each item's status."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "The whole list, in order.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "text": {"type": "string", "description": "What to do."},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "done"]}
                        },
                        "required": ["text", "status"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["todos"],
            "additionalProperties": false
        })
        .into(),
    }
}

/// One item of a todo list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TodoItem {
    /// What to do.
    pub text: String,
    /// pending, in_progress or done.
    pub status: String,
}

impl Agent {
    /// A session's todo list (the caller checked the session is the actor's).
    pub async fn todos(&self, session_id: Uuid) -> DomainResult<Vec<TodoItem>> {
        Ok(repo::todos(&self.db, session_id)
            .await?
            .into_iter()
            .map(|t| TodoItem { text: t.text, status: t.status })
            .collect())
    }

    /// Runs `write_todo`: checks the list, replaces the session's, and answers with it as text.
    pub async fn write_todo(&self, session_id: Uuid, args: &Value) -> ToolOutput {
        let fail = |m: String| ToolOutput { content: m, is_error: true, diff: None };
        let Some(items) = args.get("todos").and_then(Value::as_array) else {
            return fail("write_todo needs \"todos\": an array of {\"text\", \"status\"} objects.".into());
        };
        if items.len() > MAX_TODOS {
            return fail(format!(
                "A todo list holds at most {MAX_TODOS} items; this one has {}.",
                items.len()
            ));
        }
        let mut list: Vec<(String, String)> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let text = item.get("text").and_then(Value::as_str).map(str::trim).unwrap_or_default();
            let status = item.get("status").and_then(Value::as_str).unwrap_or_default();
            if text.is_empty() {
                return fail(format!("Item {} has no \"text\".", i + 1));
            }
            if text.chars().count() > MAX_TODO_CHARS {
                return fail(format!("Item {} is longer than {MAX_TODO_CHARS} characters.", i + 1));
            }
            if !["pending", "in_progress", "done"].contains(&status) {
                return fail(format!("Item {} needs a \"status\" of pending, in_progress or done.", i + 1));
            }
            let text: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
            list.push((text, status.to_string()));
        }
        if let Err(e) = repo::replace_todos(&self.db, session_id, &list).await {
            tracing::warn!(error = %e, "could not save a todo list");
            return fail("The todo list could not be saved; try again.".into());
        }
        let mut content = format!("Todo list saved ({} items):", list.len());
        for (text, status) in &list {
            let mark = match status.as_str() {
                "done" => "[x]",
                "in_progress" => "[~]",
                _ => "[ ]",
            };
            content.push_str(&format!("\n{mark} {text}"));
        }
        ToolOutput { content, is_error: false, diff: None }
    }
}
