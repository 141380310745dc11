//! The context renderer: system prompt plus the path through the tree become one provider
//! request.

use crate::config::ProviderKind;
use crate::providers::types::{ChatMessage, ChatRequest, ChatRole, GenParams, Part};

use crate::domain::sessions::tree::{Message, MessageKind, Role};

/// What the model is asked to do when generation resumes from a partial answer and the
/// provider cannot continue a trailing assistant message by itself.
pub const CONTINUE_INSTRUCTION: &str = "Your previous answer was cut off. Continue it exactly where it \
stopped, without repeating anything and without any preamble.";

/// How the last message of the path is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Answer the path's last (user) message.
    Answer,
    /// The last message is a partial assistant answer to be continued.
    Continue,
}

/// Everything the request is built from.
pub struct ContextInput<'a> {
    /// The rendered system prompt, if any.
    pub system: Option<&'a str>,
    /// Root first; ends with the message being answered or continued.
    pub path: &'a [Message],
    /// `provider/model` the request goes to.
    pub model_reference: &'a str,
    /// Its model id.
    pub model_id: &'a str,
    /// Its wire format.
    pub kind: ProviderKind,
    /// Generation settings.
    pub params: GenParams,
    /// Answer or continue.
    pub mode: Mode,
    /// Parts standing for the files attached to messages, by message id (see `files`).
    pub attachments: Option<&'a std::collections::HashMap<uuid::Uuid, Vec<Part>>>,
    /// The files carried in the context, as they are on disk now (see `runs::ambient`).
    pub files: &'a [super::ambient::AmbientFile],
}

/// Thoughts and signatures are provider secrets bound to the model that wrote them; another
/// model would reject them, so they are sent back only to the same model.
fn parts_for(m: &Message, same_model: bool, drop_thoughts: bool) -> Vec<Part> {
    m.parts
        .iter()
        .filter(|p| !(matches!(p, Part::Thought { .. }) && (drop_thoughts || !same_model)))
        .filter(|p| !matches!(p, Part::Text { text } if text.is_empty()))
        .map(|p| match p {
            Part::ToolCall { id, name, arguments, signature: _ } if !same_model => Part::ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
                signature: None,
            },
            other => other.clone(),
        })
        .collect()
}

/// How the summary a context starts with is introduced to the model.
pub const SUMMARY_HEADING: &str = "[Summary of the conversation so far, written when it was compressed; \
the messages it replaces are not shown]";

/// Old tool results longer than this many characters are sent cut (head and tail).
pub const OLD_RESULT_MAX_CHARS: usize = 12_000;
const OLD_RESULT_HEAD: usize = 6_000;
const OLD_RESULT_TAIL: usize = 3_000;

/// How a finished task is introduced to the model, before its summary.
pub const TASK_DONE_HEADING: &str = "[A task was done here; its messages are not shown. expand_task with \
the task id shows them]";

/// How an open task is introduced to the model.
pub const TASK_OPEN_NOTE: &str = "[A task starts here: work on it now. When it is done, call finish_task \
with a summary of what was done, decided and found (the conversation outside the task will see only that \
summary); if you have no tools, the user ends it with /finish.]";

pub use super::window::{Window, finished_task_end, open_tasks, window};

/// A tool result from an earlier turn, cut to its head and tail when long: the model saw it
/// whole when it was new, and `read_tool_result` returns it whole again.
fn cut_old_result(call_id: &str, content: &str) -> Option<String> {
    let total = content.chars().count();
    if total <= OLD_RESULT_MAX_CHARS {
        return None;
    }
    let head_end = content.char_indices().nth(OLD_RESULT_HEAD).map_or(content.len(), |(i, _)| i);
    let tail_start = content.char_indices().nth(total - OLD_RESULT_TAIL).map_or(content.len(), |(i, _)| i);
    let cut = total - OLD_RESULT_HEAD - OLD_RESULT_TAIL;
    Some(format!(
        "{}\n[… {cut} characters of this earlier result are left out here; read_tool_result with call_id \
         {call_id:?} returns it whole …]\n{}",
        &content[..head_end],
        &content[tail_start..]
    ))
}

/// Builds the provider request: the path from its nearest boundary on (see [`window`]).
pub fn render(input: &ContextInput<'_>) -> ChatRequest {
    let mut messages: Vec<ChatMessage> = Vec::new();
    let last = input.path.len().saturating_sub(1);
    let window = window(input.path);
    let task_of_end: std::collections::HashMap<usize, usize> =
        window.tasks.iter().map(|&(s, e)| (e, s)).collect();
    // Tool results before the latest user message belong to earlier turns.
    let latest_question = input.path.iter().rposition(|m| m.role == Role::User);
    let current_turn = latest_question.unwrap_or(0);
    let pointers = super::ambient::pointers(input.path, input.files);
    // The carried files go with the person's latest message (else at the end).
    let mut files_block = super::ambient::block(input.files).map(|text| Part::Text { text });
    // Anthropic continues a trailing assistant message natively ("prefill"), except with
    // extended thinking on, where a prefill is refused.
    let prefill = input.mode == Mode::Continue
        && input.kind == ProviderKind::Anthropic
        && input.params.thinking_budget.is_none();
    for (i, m) in input.path.iter().enumerate().skip(window.start) {
        if !window.sends(i) {
            continue;
        }
        let note = match m.kind {
            MessageKind::Summary => Some(format!("{SUMMARY_HEADING}\n\n{}", m.text())),
            MessageKind::TaskStart => {
                Some(format!("{TASK_OPEN_NOTE}\nTask id: {}\nGoal: {}", m.id, m.text()))
            }
            MessageKind::TaskEnd => {
                let start = task_of_end.get(&i).map(|&s| &input.path[s]);
                let goal = start.map_or(String::new(), Message::text);
                let id = start.map_or(m.id, |s| s.id);
                Some(format!("{TASK_DONE_HEADING}\nTask id: {id}\nGoal: {goal}\nSummary:\n{}", m.text()))
            }
            MessageKind::Clear | MessageKind::ClearFiles => continue,
            MessageKind::Text | MessageKind::ToolCall | MessageKind::ToolResult => None,
        };
        if let Some(text) = note {
            let part = Part::Text { text };
            match messages.last_mut() {
                Some(prev) if prev.role == ChatRole::User => prev.parts.push(part),
                _ => messages.push(ChatMessage { role: ChatRole::User, parts: vec![part] }),
            }
            continue;
        }
        let role = match m.role {
            Role::User => ChatRole::User,
            Role::Assistant => ChatRole::Assistant,
            Role::Tool => ChatRole::Tool,
            // Notes of Arbor's (the exposed folders changed) reach the model as the user's
            // words, marked as Arbor's; they merge into the user message that follows.
            Role::System => {
                let text = m.text();
                if !text.trim().is_empty() {
                    let part = Part::Text { text: format!("[Note from Arbor] {text}") };
                    match messages.last_mut() {
                        Some(prev) if prev.role == ChatRole::User => prev.parts.push(part),
                        _ => messages.push(ChatMessage { role: ChatRole::User, parts: vec![part] }),
                    }
                }
                continue;
            }
        };
        let continuing = input.mode == Mode::Continue && i == last;
        let same_model = m.model.as_deref() == Some(input.model_reference);
        let mut parts = parts_for(m, same_model, continuing);
        for part in &mut parts {
            let Part::ToolResult { call_id, content, .. } = part else { continue };
            if let Some(file) = pointers.get(call_id.as_str()) {
                *content = super::ambient::pointer_text(file);
            } else if i < current_turn
                && !super::ambient::is_shown_copy(input.files, call_id)
                && let Some(cut) = cut_old_result(call_id, content)
            {
                *content = cut;
            }
        }
        if let Some(files) = input.attachments.filter(|_| i >= window.files_from).and_then(|a| a.get(&m.id)) {
            // The files first, then what the person wrote about them.
            parts.splice(0..0, files.iter().cloned());
        }
        if Some(i) == latest_question
            && let Some(block) = files_block.take()
        {
            parts.insert(0, block);
        }
        if continuing && prefill {
            // The API rejects a final assistant message that ends in whitespace.
            if let Some(Part::Text { text }) = parts.last_mut() {
                let trimmed = text.trim_end().len();
                text.truncate(trimmed);
            }
            parts.retain(|p| !matches!(p, Part::Text { text } if text.is_empty()));
        }
        if parts.is_empty() {
            continue;
        }
        // Consecutive messages of one role (e.g. a failed answer was skipped) are merged.
        match messages.last_mut() {
            Some(prev) if prev.role == role => prev.parts.extend(parts),
            _ => messages.push(ChatMessage { role, parts }),
        }
    }
    if let Some(block) = files_block {
        match messages.last_mut() {
            Some(prev) if prev.role == ChatRole::User => prev.parts.insert(0, block),
            _ => messages.push(ChatMessage { role: ChatRole::User, parts: vec![block] }),
        }
    }
    answer_dangling_calls(&mut messages);
    if input.mode == Mode::Continue && !prefill {
        let instruction = Part::Text { text: CONTINUE_INSTRUCTION.to_string() };
        match messages.last_mut() {
            Some(prev) if prev.role == ChatRole::User => prev.parts.push(instruction),
            _ => messages.push(ChatMessage { role: ChatRole::User, parts: vec![instruction] }),
        }
    }
    ChatRequest {
        model: input.model_id.to_string(),
        system: input.system.map(str::trim).filter(|s| !s.is_empty()).map(str::to_string),
        messages,
        tools: Vec::new(),
        params: input.params.clone(),
        passthrough: None,
    }
}

/// What the model reads for a call that has no result (stopped, refused by Stop, or waiting).
pub const UNANSWERED_CALL: &str = "This call has not run.";

/// Every provider refuses a tool call without a result right after it; calls left without
/// one (a run stopped or interrupted before running them) get a result saying so.
fn answer_dangling_calls(messages: &mut Vec<ChatMessage>) {
    let mut i = 0;
    while i < messages.len() {
        if messages[i].role == ChatRole::Assistant {
            let calls: Vec<(String, String)> = messages[i]
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall { id, name, .. } => Some((id.clone(), name.clone())),
                    _ => None,
                })
                .collect();
            if !calls.is_empty() {
                let answered: Vec<String> = match messages.get(i + 1) {
                    Some(next) if next.role == ChatRole::Tool => next
                        .parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::ToolResult { call_id, .. } => Some(call_id.clone()),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                let missing: Vec<Part> = calls
                    .into_iter()
                    .filter(|(id, _)| !answered.contains(id))
                    .map(|(call_id, name)| Part::ToolResult {
                        call_id,
                        name,
                        content: UNANSWERED_CALL.into(),
                        is_error: true,
                    })
                    .collect();
                if !missing.is_empty() {
                    match messages.get_mut(i + 1) {
                        Some(next) if next.role == ChatRole::Tool => next.parts.extend(missing),
                        _ => messages.insert(i + 1, ChatMessage { role: ChatRole::Tool, parts: missing }),
                    }
                }
            }
        }
        i += 1;
    }
}

/// A rough token count (four characters a token), used when a provider reports no usage.
pub fn estimate_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

/// Characters of text a request carries (system prompt and every text-like part).
pub fn request_chars(req: &ChatRequest) -> usize {
    let parts = req.messages.iter().flat_map(|m| m.parts.iter()).map(|p| match p {
        Part::Text { text } | Part::Thought { text, .. } => text.len(),
        Part::ToolCall { arguments, .. } => arguments.to_string().len(),
        Part::ToolResult { content, .. } => content.len(),
        // A page of a PDF is a few hundred tokens; the base64 size is a generous stand-in.
        Part::Document { data_base64, .. } => data_base64.len() / 4,
        Part::Image { .. } => 1000,
    });
    req.system.as_deref().map_or(0, str::len) + parts.sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::sessions::tree::MessageStatus;
    use uuid::Uuid;

    fn m(role: Role, parts: Vec<Part>, model: Option<&str>) -> Message {
        Message {
            id: Uuid::new_v4(),
            session_id: Uuid::nil(),
            parent_id: None,
            chosen_child_id: None,
            role,
            kind: if role == Role::Tool { MessageKind::ToolResult } else { MessageKind::Text },
            parts,
            model: model.map(str::to_string),
            status: MessageStatus::Complete,
            error: None,
            usage: None,
            tokens: None,
            client_id: None,
            author_id: None,
            created_at: chrono::Utc::now(),
        }
    }

    fn text(t: &str) -> Part {
        Part::Text { text: t.into() }
    }

    fn thought(t: &str) -> Part {
        Part::Thought { text: t.into(), signature: Some("sig".into()), redacted: None }
    }

    fn input<'a>(path: &'a [Message], kind: ProviderKind, mode: Mode) -> ContextInput<'a> {
        ContextInput {
            system: Some("  Be brief.  "),
            path,
            model_reference: "p/m",
            model_id: "m",
            kind,
            params: GenParams::default(),
            mode,
            attachments: None,
            files: &[],
        }
    }

    #[test]
    fn answers_carry_the_path_and_thoughts_only_for_the_same_model() {
        let path = vec![
            m(Role::User, vec![text("hi")], None),
            m(Role::Assistant, vec![thought("hmm"), text("hello")], Some("p/m")),
            m(Role::User, vec![text("again")], None),
            m(Role::Assistant, vec![thought("other"), text("yo")], Some("q/x")),
            m(Role::User, vec![text("last")], None),
        ];
        let req = render(&input(&path, ProviderKind::OpenAi, Mode::Answer));
        assert_eq!(req.system.as_deref(), Some("Be brief."));
        assert_eq!(req.model, "m");
        assert_eq!(req.messages.len(), 5);
        assert_eq!(req.messages[1].parts.len(), 2, "same model keeps its thought");
        assert_eq!(req.messages[3].parts, vec![text("yo")], "another model's thought is dropped");
    }

    #[test]
    fn failed_empty_answers_are_skipped_and_same_roles_merged() {
        let path = vec![
            m(Role::User, vec![text("one")], None),
            m(Role::Assistant, vec![], Some("p/m")),
            m(Role::User, vec![text("two")], None),
        ];
        let req = render(&input(&path, ProviderKind::OpenAi, Mode::Answer));
        assert_eq!(req.messages.len(), 1);
        assert_eq!(req.messages[0].parts, vec![text("one"), text("two")]);
    }

    #[test]
    fn continuing_prefills_on_anthropic_and_asks_elsewhere() {
        let path = vec![
            m(Role::User, vec![text("write")], None),
            m(Role::Assistant, vec![thought("t"), text("The answer is \n")], Some("p/m")),
        ];
        let req = render(&input(&path, ProviderKind::Anthropic, Mode::Continue));
        assert_eq!(req.messages.len(), 2);
        assert_eq!(req.messages[1].role, ChatRole::Assistant);
        assert_eq!(req.messages[1].parts, vec![text("The answer is")]);

        let req = render(&input(&path, ProviderKind::Gemini, Mode::Continue));
        assert_eq!(req.messages.len(), 3);
        assert_eq!(req.messages[1].parts, vec![text("The answer is \n")]);
        assert_eq!(req.messages[2].parts, vec![text(CONTINUE_INSTRUCTION)]);
    }

    #[test]
    fn estimates_round_up() {
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(1), 1);
        assert_eq!(estimate_tokens(8), 2);
    }

    fn boundary(kind: MessageKind, text_: &str) -> Message {
        Message { kind, ..m(Role::System, vec![text(text_)], None) }
    }

    #[test]
    fn the_context_starts_at_the_nearest_summary_or_clear_and_files_after_clearblobs() {
        let path = vec![
            m(Role::User, vec![text("old question")], None),
            boundary(MessageKind::Summary, "first summary"),
            m(Role::User, vec![text("middle")], None),
            boundary(MessageKind::ClearFiles, "files dropped"),
            m(Role::User, vec![text("late")], None),
            boundary(MessageKind::Summary, "second summary"),
            m(Role::User, vec![text("now")], None),
        ];
        let starts = |p: &[Message]| {
            let w = window(p);
            (w.start, w.files_from)
        };
        assert_eq!(starts(&path), (5, 5), "the nearest summary wins");
        assert_eq!(starts(&path[..5]), (1, 4), "files before the /clearblobs stay out");
        let req = render(&input(&path, ProviderKind::OpenAi, Mode::Answer));
        let sent = serde_json::to_string(&req.messages).unwrap();
        assert!(sent.contains("second summary") && sent.contains("now"));
        assert!(!sent.contains("first summary") && !sent.contains("old question") && !sent.contains("late"));
        assert!(!sent.contains("files dropped"), "a boundary's own note is not sent");
        assert_eq!(req.messages.len(), 1, "the summary and the question merge into one user turn");

        let cleared = vec![
            m(Role::User, vec![text("before")], None),
            boundary(MessageKind::Clear, "cleared"),
            m(Role::User, vec![text("after")], None),
        ];
        assert_eq!(starts(&cleared), (2, 2));
        let req = render(&input(&cleared, ProviderKind::OpenAi, Mode::Answer));
        assert_eq!(req.messages.len(), 1);
        assert_eq!(req.messages[0].parts, vec![text("after")]);
        assert_eq!(starts(&cleared[..1]), (0, 0));
    }

    fn sent_text(path: &[Message]) -> String {
        serde_json::to_string(&render(&input(path, ProviderKind::OpenAi, Mode::Answer)).messages).unwrap()
    }

    #[test]
    fn a_finished_task_stands_as_its_summary_and_tasks_nest() {
        let path = vec![
            m(Role::User, vec![text("parent question")], None),
            boundary(MessageKind::TaskStart, "port the parser"),
            m(Role::User, vec![text("inside outer")], None),
            boundary(MessageKind::TaskStart, "write the lexer"),
            m(Role::Assistant, vec![text("lexer work")], Some("p/m")),
            // A compression inside a task does not end the walk once the task is done.
            boundary(MessageKind::Summary, "summary inside the inner task"),
            boundary(MessageKind::TaskEnd, "lexer done: 40 tokens"),
            m(Role::Assistant, vec![text("more outer work")], Some("p/m")),
            boundary(MessageKind::TaskEnd, "parser ported, tests green"),
            m(Role::User, vec![text("what next?")], None),
        ];
        let w = window(&path);
        assert_eq!((w.start, w.tasks.clone()), (0, vec![(1, 8)]), "only the outer task shows");
        let sent = sent_text(&path);
        assert!(sent.contains("parent question") && sent.contains("what next?"), "{sent}");
        assert!(sent.contains("parser ported, tests green") && sent.contains("port the parser"));
        assert!(sent.contains(&path[1].id.to_string()), "the task id, for expand_task");
        for hidden in ["inside outer", "lexer work", "summary inside", "lexer done", "more outer work"] {
            assert!(!sent.contains(hidden), "{hidden} is inside the finished task");
        }
        assert_eq!(open_tasks(&path), Vec::<usize>::new());

        // Inside the outer task, after the inner one finished: the parent's context, the outer
        // task's work and the inner task as its summary.
        let inside = &path[..8];
        assert_eq!(open_tasks(inside), vec![1]);
        let sent = sent_text(inside);
        for shown in
            ["parent question", "port the parser", "inside outer", "lexer done: 40 tokens", "more outer"]
        {
            assert!(sent.contains(shown), "{shown} is sent inside the outer task: {sent}");
        }
        assert!(!sent.contains("lexer work") && !sent.contains("summary inside"));
        assert!(sent.contains("finish_task"), "an open task tells the model how it ends");

        // Inside the inner task, before its end: the compression inside it starts the context.
        let deep = &path[..6];
        assert_eq!(open_tasks(deep), vec![1, 3]);
        assert_eq!(window(deep).start, 5);
        // An end without a start (hand-edited data) stands alone rather than hiding everything.
        let orphan = vec![m(Role::User, vec![text("a")], None), boundary(MessageKind::TaskEnd, "lone")];
        assert_eq!(window(&orphan).start, 1);
    }

    #[test]
    fn long_tool_results_of_earlier_turns_are_cut_and_the_current_turns_are_not() {
        let long: String = "a".repeat(7_000) + &"é".repeat(7_000) + &"z".repeat(7_000);
        let call = |id: &str| Part::ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: serde_json::json!({}),
            signature: None,
        };
        let result = |id: &str| Part::ToolResult {
            call_id: id.into(),
            name: "read_file".into(),
            content: long.clone(),
            is_error: false,
        };
        let path = vec![
            m(Role::User, vec![text("read it")], None),
            m(Role::Assistant, vec![call("c1")], Some("p/m")),
            m(Role::Tool, vec![result("c1")], None),
            m(Role::Assistant, vec![text("done")], Some("p/m")),
            m(Role::User, vec![text("read it again")], None),
            m(Role::Assistant, vec![call("c2")], Some("p/m")),
            m(Role::Tool, vec![result("c2")], None),
        ];
        let req = render(&input(&path, ProviderKind::OpenAi, Mode::Answer));
        let contents: Vec<&String> = req
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match p {
                Part::ToolResult { content, .. } => Some(content),
                _ => None,
            })
            .collect();
        assert_eq!(contents.len(), 2);
        let old = contents[0];
        assert!(
            old.starts_with(&"a".repeat(6_000)) && old.ends_with(&"z".repeat(3_000)),
            "head and tail kept"
        );
        assert!(
            old.contains("12000 characters") && old.contains("read_tool_result") && old.contains("\"c1\""),
            "{}",
            &old[5_990..6_200]
        );
        assert!(old.chars().count() < 9_400);
        assert_eq!(contents[1], &long, "the current turn's result goes whole");
        assert_eq!(cut_old_result("c", &"x".repeat(OLD_RESULT_MAX_CHARS)), None, "short results go whole");
    }
}
