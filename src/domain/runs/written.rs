//! What a submit wrote, kept for the fragment that answers its post: the question, the answer's
//! placeholder and the session as the submit's transaction left them, so the page is drawn
//! without reading back what the request itself just wrote.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::domain::sessions::ChatSession;
use crate::domain::sessions::access::ShareRole;
use crate::domain::sessions::tree::{Message, MessageKind};
use crate::storage::repos::messages::NewMessage;

/// A new submit's turn as written.
#[derive(Debug, Clone)]
pub struct Written {
    /// The session after the submit's write: its version (`updated_at`), model, active root and
    /// cleared environment note.
    pub session: ChatSession,
    /// The actor's role in it (the submit checked that they may write).
    pub role: ShareRole,
    /// The question, then the answer's placeholder.
    pub messages: Vec<Message>,
}

/// A message as `messages::insert_*` writes `new`, with the child the same write chose below it.
pub(super) fn message(session_id: Uuid, new: &NewMessage<'_>, chosen_child_id: Option<Uuid>) -> Message {
    Message {
        id: new.id,
        session_id,
        parent_id: new.parent_id,
        chosen_child_id,
        role: new.role,
        kind: MessageKind::Text,
        parts: new.parts.to_vec(),
        model: new.model.map(str::to_string),
        status: new.status,
        error: None,
        usage: None,
        tokens: None,
        client_id: new.client_id.map(str::to_string),
        author_id: new.author_id,
        created_at: Utc::now(),
    }
}

/// The session as a turn's transaction leaves it: touched at `version` with the answer's model,
/// its environment note cleared when a note was written, and `first` as its active root when the
/// turn starts the tree.
pub(super) fn session_after(
    before: &ChatSession,
    version: DateTime<Utc>,
    model: &str,
    noted: bool,
    first: Option<Uuid>,
) -> ChatSession {
    let mut session = before.clone();
    session.updated_at = version;
    session.model = Some(model.to_string());
    if noted {
        session.env_note = None;
    }
    if let Some(root) = first {
        session.active_root_id = Some(root);
    }
    session
}
