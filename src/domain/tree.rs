//! The conversation tree: messages linked by `parent_id`, the active path following
//! `chosen_child_id` from the session's active root.

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::providers::types::Part;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person.
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
    /// A system note.
    System,
}

impl Role {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::System => "system",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "system" => Role::System,
            _ => return None,
        })
    }
}

/// Where a message's generation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageStatus {
    /// Finished normally (all user messages).
    Complete,
    /// Being written by a live run.
    Streaming,
    /// The process died while writing it; the text up to the last flush is kept.
    Interrupted,
    /// The user pressed Stop; the partial text is kept.
    Stopped,
    /// The provider failed; `error` says how.
    Error,
}

impl MessageStatus {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageStatus::Complete => "complete",
            MessageStatus::Streaming => "streaming",
            MessageStatus::Interrupted => "interrupted",
            MessageStatus::Stopped => "stopped",
            MessageStatus::Error => "error",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<MessageStatus> {
        Some(match s {
            "complete" => MessageStatus::Complete,
            "streaming" => MessageStatus::Streaming,
            "interrupted" => MessageStatus::Interrupted,
            "stopped" => MessageStatus::Stopped,
            "error" => MessageStatus::Error,
            _ => return None,
        })
    }

    /// Whether generation can be resumed from the partial text.
    pub fn can_continue(self) -> bool {
        matches!(self, MessageStatus::Interrupted | MessageStatus::Stopped | MessageStatus::Error)
    }
}

/// Token counts and cost of one assistant message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MessageUsage {
    /// Prompt tokens.
    pub input: u64,
    /// Generated tokens.
    pub output: u64,
    /// Prompt tokens served from cache.
    pub cached: u64,
    /// Cost in micro-dollars, when the price is known.
    pub cost_micros: Option<i64>,
    /// Whether the counts are Arbor's estimate (the provider sent none).
    pub estimated: bool,
}

/// One node of the tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// Stable id.
    pub id: Uuid,
    /// Its session.
    pub session_id: Uuid,
    /// The message it answers or follows (none for a root).
    pub parent_id: Option<Uuid>,
    /// Which child the active path follows.
    pub chosen_child_id: Option<Uuid>,
    /// Speaker.
    pub role: Role,
    /// Content, in order.
    pub parts: Vec<Part>,
    /// `provider/model` that wrote it (assistant messages).
    pub model: Option<String>,
    /// Generation state.
    pub status: MessageStatus,
    /// What went wrong, safe to show.
    pub error: Option<String>,
    /// Usage, for assistant messages that have any.
    pub usage: Option<MessageUsage>,
    /// The composer's id of the submit that created it.
    pub client_id: Option<String>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

impl Message {
    /// The visible answer text (text parts joined).
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("")
    }

    /// The reasoning text (thought parts joined).
    pub fn thoughts(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Thought { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("")
    }
}

/// The active path: from `root` follow `chosen_child_id` (or the newest child when unset).
pub fn active_path(messages: &[Message], root: Option<Uuid>) -> Vec<Message> {
    let by_id: std::collections::HashMap<Uuid, &Message> = messages.iter().map(|m| (m.id, m)).collect();
    let newest_child = |parent: Option<Uuid>| {
        messages.iter().filter(|m| m.parent_id == parent).max_by_key(|m| (m.created_at, m.id)).map(|m| m.id)
    };
    let mut path = Vec::new();
    let mut next = root.filter(|id| by_id.contains_key(id)).or_else(|| newest_child(None));
    while let Some(id) = next {
        // A cycle can only come from corrupt data; stop rather than loop forever.
        if path.len() > messages.len() {
            break;
        }
        let Some(m) = by_id.get(&id) else { break };
        path.push((*m).clone());
        next = m.chosen_child_id.filter(|c| by_id.contains_key(c)).or_else(|| newest_child(Some(m.id)));
    }
    path
}

/// The path from the root down to `id` (inclusive), following parents.
pub fn path_to(messages: &[Message], id: Uuid) -> Vec<Message> {
    let by_id: std::collections::HashMap<Uuid, &Message> = messages.iter().map(|m| (m.id, m)).collect();
    let mut out = Vec::new();
    let mut next = Some(id);
    while let Some(current) = next {
        if out.len() > messages.len() {
            break;
        }
        let Some(m) = by_id.get(&current) else { break };
        out.push((*m).clone());
        next = m.parent_id;
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: u128, parent: Option<u128>, chosen: Option<u128>, secs: i64) -> Message {
        Message {
            id: Uuid::from_u128(id),
            session_id: Uuid::nil(),
            parent_id: parent.map(Uuid::from_u128),
            chosen_child_id: chosen.map(Uuid::from_u128),
            role: Role::User,
            parts: vec![Part::Text { text: format!("m{id}") }],
            model: None,
            status: MessageStatus::Complete,
            error: None,
            usage: None,
            client_id: None,
            created_at: DateTime::from_timestamp(secs, 0).unwrap_or_default(),
        }
    }

    #[test]
    fn the_active_path_follows_chosen_children() {
        // 1 -> {2, 3}; 1 chose 2; 2 -> 4; 3 -> 5.
        let all = vec![
            msg(1, None, Some(2), 1),
            msg(2, Some(1), Some(4), 2),
            msg(3, Some(1), None, 3),
            msg(4, Some(2), None, 4),
            msg(5, Some(3), None, 5),
        ];
        let ids: Vec<u128> =
            active_path(&all, Some(Uuid::from_u128(1))).iter().map(|m| m.id.as_u128()).collect();
        assert_eq!(ids, [1, 2, 4]);
        // Without a choice the newest child is followed.
        let mut unchosen = all.clone();
        unchosen[0].chosen_child_id = None;
        let ids: Vec<u128> = active_path(&unchosen, None).iter().map(|m| m.id.as_u128()).collect();
        assert_eq!(ids, [1, 3, 5]);
        let ids: Vec<u128> = path_to(&all, Uuid::from_u128(5)).iter().map(|m| m.id.as_u128()).collect();
        assert_eq!(ids, [1, 3, 5]);
    }

    #[test]
    fn corrupt_cycles_do_not_hang() {
        let all = vec![msg(1, Some(2), Some(2), 1), msg(2, Some(1), Some(1), 2)];
        assert!(active_path(&all, Some(Uuid::from_u128(1))).len() <= 3);
        assert!(path_to(&all, Uuid::from_u128(1)).len() <= 3);
    }

    #[test]
    fn statuses_round_trip() {
        for s in ["complete", "streaming", "interrupted", "stopped", "error"] {
            assert_eq!(MessageStatus::parse(s).map(MessageStatus::as_str), Some(s));
        }
        assert!(MessageStatus::Interrupted.can_continue() && !MessageStatus::Complete.can_continue());
    }
}
