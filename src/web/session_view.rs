//! What the chat templates receive: messages, totals and the context gauge, ready to print.

use std::ops::Range;

use serde::Serialize;
use uuid::Uuid;

use crate::domain::sessions::Conversation;
use crate::domain::sessions::tree::{Message, MessageStatus, MessageUsage, Role, Siblings};
use crate::providers::catalog::ModelInfo;
use crate::providers::tokens;
use crate::providers::types::Part;
use crate::web::error::WebError;
use crate::web::markdown::{SafeHtml, render_markdown};

/// A tool call as shown on a message.
#[derive(Debug, Serialize)]
pub struct ToolCallView {
    /// Tool name.
    pub name: String,
    /// Arguments, pretty-printed JSON.
    pub arguments: String,
}

/// Lines of a tool's output shown before "Show all".
pub const RESULT_PREVIEW_LINES: usize = 20;

/// One line of a unified diff, classed for colouring.
#[derive(Debug, Serialize)]
pub struct DiffLine {
    /// add, del, hunk, meta or ctx.
    pub kind: &'static str,
    /// The line (escaped by the template).
    pub text: String,
}

/// A tool's result as its card shows it.
#[derive(Debug, Serialize)]
pub struct ToolResultView {
    /// Tool name.
    pub name: String,
    /// The first lines of the output.
    pub preview: String,
    /// The whole output, when the preview is shorter.
    pub full: Option<String>,
    /// How many lines the whole output has.
    pub lines: usize,
    /// Whether the tool failed (or the call was refused).
    pub is_error: bool,
    /// The file change, when there was one.
    pub diff: Vec<DiffLine>,
    /// How the call was allowed or refused, in words.
    pub decision: Option<String>,
    /// The first message of a sub-agent's side branch.
    pub side_branch: Option<Uuid>,
}

/// A unified diff split into classed lines.
pub fn diff_lines(diff: &str) -> Vec<DiffLine> {
    diff.lines()
        .map(|l| {
            let kind = if l.starts_with("+++") || l.starts_with("---") {
                "meta"
            } else if l.starts_with("@@") {
                "hunk"
            } else if l.starts_with('+') {
                "add"
            } else if l.starts_with('-') {
                "del"
            } else {
                "ctx"
            };
            DiffLine { kind, text: l.to_string() }
        })
        .collect()
}

/// How a decision reads on a card: who decided is named (in a shared workspace it may be a
/// teammate); a decision recorded without a person reads as the reader's own.
pub fn decision_words(decision: Option<&str>, decided_by: Option<&str>) -> Option<String> {
    let who = decided_by.unwrap_or("you");
    Some(match decision? {
        "auto" => "ran without asking (approval mode)".to_string(),
        "rule" => "ran without asking (an \"always\" rule)".to_string(),
        "yes" => format!("approved by {who}"),
        "always" => format!("approved by {who}, always"),
        "no" => format!("refused by {who}; the run stopped"),
        "no_continue" => format!("refused by {who}; the agent went on"),
        _ => return None,
    })
}

fn tool_result_view(parts: &[Part]) -> Option<ToolResultView> {
    parts.iter().find_map(|p| match p {
        Part::ToolResult { name, content, is_error, .. } => {
            let lines = content.lines().count();
            let preview: String = content.lines().take(RESULT_PREVIEW_LINES).collect::<Vec<_>>().join("\n");
            let preview = if preview.chars().count() > 4000 {
                let cut: String = preview.chars().take(4000).collect();
                format!("{cut}…")
            } else {
                preview
            };
            let full = (preview.len() < content.len()).then(|| content.clone());
            Some(ToolResultView {
                name: name.clone(),
                preview,
                full,
                lines,
                is_error: *is_error,
                diff: Vec::new(),
                decision: None,
                side_branch: None,
            })
        }
        _ => None,
    })
}

/// Adds what the recorded calls know (diff, decision) to tool result cards.
pub fn attach_calls(
    views: &mut [MessageView],
    calls: &std::collections::HashMap<Uuid, crate::domain::runs::decisions::CallState>,
) {
    for v in views.iter_mut() {
        let (Some(result), Some(call)) = (v.tool_result.as_mut(), calls.get(&v.id)) else { continue };
        result.diff = call.diff.as_deref().map(diff_lines).unwrap_or_default();
        result.decision = decision_words(call.decision.as_deref(), call.decided_by.as_deref());
    }
}

/// Usage as shown under a message or in the session header.
#[derive(Debug, Serialize)]
pub struct UsageView {
    /// Prompt tokens.
    pub input: u64,
    /// Generated tokens.
    pub output: u64,
    /// Cached prompt tokens.
    pub cached: u64,
    /// Whether the numbers are estimates.
    pub estimated: bool,
    /// Cost, formatted in dollars, when known.
    pub cost: Option<String>,
}

/// One message, ready for `partials/_message.html`.
#[derive(Debug, Serialize)]
pub struct MessageView {
    /// Id.
    pub id: Uuid,
    /// `user` or `assistant`.
    pub role: &'static str,
    /// `text`, `tool_result`, or a boundary: `summary`, `clear`, `clear_files`.
    pub kind: &'static str,
    /// Stored status name.
    pub status: &'static str,
    /// User text (escaped by the template).
    pub text: String,
    /// Assistant answer rendered by the sanitizer.
    pub html: Option<SafeHtml>,
    /// Reasoning text (escaped by the template).
    pub thoughts: String,
    /// Tool calls.
    pub tool_calls: Vec<ToolCallView>,
    /// A tool message's result.
    pub tool_result: Option<ToolResultView>,
    /// Attached files.
    pub files: Vec<crate::domain::files::FileView>,
    /// What went wrong.
    pub error: Option<String>,
    /// `provider/model`.
    pub model: Option<String>,
    /// Tokens and cost.
    pub usage: Option<UsageView>,
    /// Still being written: the page shows the live skeleton.
    pub streaming: bool,
    /// Offer "Continue".
    pub can_continue: bool,
    /// Offer "Retry".
    pub can_retry: bool,
    /// Its place among its siblings, when it has any.
    pub siblings: Option<Siblings>,
    /// How many messages deleting it removes (itself and everything below).
    pub branch_size: usize,
    /// Who wrote it, when it was someone other than the reader (shared workspaces).
    pub author: Option<String>,
    /// Its author's id.
    #[serde(skip)]
    pub author_id: Option<Uuid>,
}

/// Dollars from micro-dollars: four decimals under a cent, two above.
pub fn format_cost(micros: i64) -> String {
    let dollars = micros as f64 / 1_000_000.0;
    if micros != 0 && micros.abs() < 10_000 { format!("${dollars:.4}") } else { format!("${dollars:.2}") }
}

/// Usage for display.
pub fn usage_view(u: &MessageUsage) -> UsageView {
    UsageView {
        input: u.input,
        output: u.output,
        cached: u.cached,
        estimated: u.estimated,
        cost: u.cost_micros.map(format_cost),
    }
}

/// A message for display.
pub fn message_view(m: &Message) -> MessageView {
    let tool_calls = m
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolCall { name, arguments, .. } => Some(ToolCallView {
                name: name.clone(),
                arguments: serde_json::to_string_pretty(arguments).unwrap_or_else(|_| arguments.to_string()),
            }),
            _ => None,
        })
        .collect();
    let assistant = m.role == Role::Assistant;
    // A summary (of the context or of a task) is the model's markdown too.
    let markdown = assistant
        || matches!(
            m.kind,
            crate::domain::sessions::tree::MessageKind::Summary
                | crate::domain::sessions::tree::MessageKind::TaskEnd
        );
    let text = m.text();
    MessageView {
        id: m.id,
        role: m.role.as_str(),
        kind: m.kind.as_str(),
        status: m.status.as_str(),
        html: markdown.then(|| render_markdown(&text)),
        text: if markdown { String::new() } else { text },
        thoughts: m.thoughts(),
        tool_calls,
        tool_result: if m.role == Role::Tool { tool_result_view(&m.parts) } else { None },
        files: Vec::new(),
        error: m.error.clone(),
        model: m.model.clone(),
        usage: m.usage.as_ref().map(usage_view),
        streaming: m.status == MessageStatus::Streaming,
        can_continue: assistant && m.status.can_continue() && !m.text().trim().is_empty(),
        author: None,
        author_id: m.author_id,
        can_retry: assistant && m.status != MessageStatus::Streaming,
        siblings: None,
        branch_size: 1,
    }
}

/// Above this much text, markdown is rendered on the blocking pool so that one huge answer
/// cannot stall the executor threads serving every other request.
const INLINE_RENDER_CHARS: usize = 32 * 1024;

/// Views of the given messages; large ones are rendered off the async executor.
pub async fn message_views(messages: Vec<Message>) -> Result<Vec<MessageView>, WebError> {
    let size: usize = messages
        .iter()
        .flat_map(|m| &m.parts)
        .map(|p| if let Part::Text { text } = p { text.len() } else { 0 })
        .sum();
    if size <= INLINE_RENDER_CHARS {
        return Ok(messages.iter().map(message_view).collect());
    }
    actix_web::web::block(move || messages.iter().map(message_view).collect())
        .await
        .map_err(|e| WebError::Internal(format!("markdown rendering failed: {e}")))
}

/// Views of the part of the active path a page shows (`domain::pages::window_of`), with
/// their sibling positions.
pub async fn thread_window(conv: &Conversation, window: Range<usize>) -> Result<Vec<MessageView>, WebError> {
    let path = conv.path.get(window.clone()).ok_or(WebError::NotFound)?;
    let mut views = message_views(path.to_vec()).await?;
    for (offset, view) in views.iter_mut().enumerate() {
        let i = window.start + offset;
        view.siblings = conv.siblings.get(i).copied().filter(|s| s.count > 1);
        view.branch_size = conv.branch_sizes.get(i).copied().unwrap_or(1);
    }
    Ok(views)
}

/// One message of the conversation with its sibling position (when it is on the active path).
pub async fn single_view(conv: &Conversation, message: Message) -> Result<MessageView, WebError> {
    let index = conv.path.iter().position(|m| m.id == message.id);
    let mut views = message_views(vec![message]).await?;
    let mut view = views.pop().ok_or_else(|| WebError::Internal("no view".into()))?;
    if let Some(i) = index {
        view.siblings = conv.siblings.get(i).copied().filter(|s| s.count > 1);
        view.branch_size = conv.branch_sizes.get(i).copied().unwrap_or(1);
    }
    Ok(view)
}

/// How full the model's context window is after the latest answer.
#[derive(Debug, Serialize)]
pub struct GaugeView {
    /// Tokens used by the latest exchange.
    pub used: u64,
    /// The model's window.
    pub window: u32,
    /// Whole percent, capped at 100.
    pub percent: u64,
    /// Whether the window size is a conservative default (unknown model).
    pub assumed: bool,
    /// Whether `used` is Arbor's estimate (the provider reported no usage).
    pub estimated: bool,
}

/// The gauge for a conversation under a model.
pub fn gauge(conv: &Conversation, info: Option<&ModelInfo>) -> Option<GaugeView> {
    let info = info?;
    let latest = conv.path.iter().rev().find_map(|m| m.usage.filter(|_| m.role == Role::Assistant));
    // The latest answer's usage covers the whole context it was given. Without one (a
    // provider that reports none, or no answer yet), the path's messages are summed: each
    // keeps its size in tokens, and one not counted yet (still streaming, or older than
    // counts) is counted now from its content when the page has it.
    let (used, estimated) = match latest.filter(|u| u.input + u.output > 0) {
        Some(u) => (u.input + u.output, u.estimated),
        None => {
            let sizes = conv.path.iter().map(|m| m.tokens.unwrap_or_else(|| tokens::count_parts(&m.parts)));
            (sizes.fold(0, u64::saturating_add), true)
        }
    };
    let window = u64::from(info.context_window.max(1));
    // A non-empty session never reads 0 %: anything used rounds up to 1.
    let percent = match used {
        0 => 0,
        n => n.saturating_mul(100).div_ceil(window).clamp(1, 100),
    };
    Some(GaugeView { used, window: info.context_window, percent, assumed: !info.known, estimated })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_are_readable() {
        assert_eq!(format_cost(0), "$0.00");
        assert_eq!(format_cost(1_234), "$0.0012");
        assert_eq!(format_cost(2_500_000), "$2.50");
    }
}
