//! A session's tree as the member reads and walks it: the conversation along the active path
//! (whole, or a window of it), the overview of every branch, one message and its children, and
//! choosing, continuing from or deleting a branch.

use uuid::Uuid;

use super::{Sessions, access, activity};
use crate::domain::accounts::Actor;
use crate::domain::sessions::access::ShareRole;
use crate::domain::sessions::tree::{Message, MessageUsage, OverviewRow, Siblings, TreeIndex};
use crate::domain::{DomainError, DomainResult};
use crate::events::SessionOf;
use crate::model::sessions::ChatSession;
use crate::storage::repos::messages;

/// A session as its page shows it: the active path and the session's totals.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// The session.
    pub session: ChatSession,
    /// Root first, following the chosen children (see [`Sessions::conversation_window`] for which
    /// messages carry their content).
    pub path: Vec<Message>,
    /// Each path message's place among its siblings, in path order.
    pub siblings: Vec<Siblings>,
    /// How many messages each path message's branch holds (itself and everything below).
    pub branch_sizes: Vec<usize>,
    /// How many messages the session holds on every branch.
    pub message_count: usize,
    /// Tokens and cost of every answer in the session, on every branch.
    pub totals: MessageUsage,
    /// What the actor may do in it (`Owner` in their own workspace).
    pub role: ShareRole,
}

impl Sessions {
    async fn select_through(
        &self,
        actor: &Actor,
        session_id: Uuid,
        message_id: Uuid,
        end_here: bool,
    ) -> DomainResult<()> {
        let db = &self.db;
        let session = self.get_session(actor, session_id).await?;
        let all = messages::session_messages(db, session.id).await?;
        let index = TreeIndex::new(&all);
        index.get(message_id).ok_or(DomainError::NotFound)?;
        let path: Vec<Uuid> = index.path_to(message_id).iter().map(|m| m.id).collect();
        match end_here {
            true => messages::select_path_ending(db, session.id, &path).await?,
            false => messages::select_path(db, session.id, &path).await?,
        }
        let how = if end_here { "continue_from" } else { "select" };
        activity::record(
            db,
            session.id,
            actor,
            "branch",
            serde_json::json!({ "message_id": message_id, "how": how }),
        )
        .await;
        Ok(())
    }

    /// The actor's session with its active path, every path message with its content.
    pub async fn conversation(&self, actor: &Actor, session_id: Uuid) -> DomainResult<Conversation> {
        self.conversation_window(actor, session_id, None, usize::MAX).await
    }

    /// The actor's session with its active path, where only the `window` path messages before
    /// `before` (or the end) carry their content: the tree is walked on the messages' skeletons, so
    /// a long session's page does not load every message's text.
    pub async fn conversation_window(
        &self,
        actor: &Actor,
        session_id: Uuid,
        before: Option<Uuid>,
        window: usize,
    ) -> DomainResult<Conversation> {
        let db = &self.db;
        let (session, role) = self.view_session(actor, session_id).await?;
        let all = messages::session_skeleton_at(db, session.id, session.updated_at).await?;
        let index = TreeIndex::new(&all);
        let path = index.active_path(session.active_root_id);
        let ids: Vec<Uuid> = path.iter().map(|m| m.id).collect();
        let end = match before {
            Some(id) => ids.iter().position(|x| *x == id).ok_or(DomainError::NotFound)?,
            None => ids.len(),
        };
        let start = end.saturating_sub(window);
        let full = messages::messages_by_ids(db, session.id, &ids[start..end]).await?;
        Ok(assemble(session, role, &all, &index, path, full))
    }

    /// The actor's session with its active path, where only `message_id` carries its content
    /// (the session, the skeleton and the message in one statement: a finished message's page),
    /// and that message (`NotFound` when the session has no such message).
    pub async fn conversation_with(
        &self,
        actor: &Actor,
        session_id: Uuid,
        message_id: Uuid,
    ) -> DomainResult<(Conversation, Message)> {
        // The session comes with the skeleton, and is checked as it would be alone: a session
        // the actor may not see and one without that message are both not found.
        let read = messages::session_skeleton_with(&self.db, session_id, message_id).await?;
        let (row, all, message) = match read {
            Some((session, all, message)) => (Some(session), all, Some(message)),
            None => (None, Default::default(), None),
        };
        let (session, role) = access::session_row_as(&self.db, actor, row, ShareRole::Viewer).await?;
        let message = message.ok_or(DomainError::NotFound)?;
        let index = TreeIndex::new(&all);
        let path = index.active_path(session.active_root_id);
        Ok((assemble(session, role, &all, &index, path, vec![message.clone()]), message))
    }

    /// The whole tree of one of the actor's sessions, compactly, with the active path marked.
    pub async fn tree_overview(&self, actor: &Actor, session_id: Uuid) -> DomainResult<Vec<OverviewRow>> {
        let db = &self.db;
        let (session, _) = self.view_session(actor, session_id).await?;
        let all = messages::session_messages(db, session.id).await?;
        let index = TreeIndex::new(&all);
        let ids: Vec<Uuid> = index.active_path(session.active_root_id).iter().map(|m| m.id).collect();
        Ok(index.overview(&ids))
    }

    /// Makes the path through `message_id` active: every message above it chooses the way to it,
    /// and below it the path follows the choices already made.
    pub async fn select_message(
        &self,
        actor: &Actor,
        session_id: Uuid,
        message_id: Uuid,
    ) -> DomainResult<()> {
        self.select_through(actor, session_id, message_id, false).await
    }

    /// "Continue from here": the path through `message_id` becomes active and ends there, so the
    /// next message goes below it as a new branch; what followed it stays, one sibling over.
    pub async fn continue_from(&self, actor: &Actor, session_id: Uuid, message_id: Uuid) -> DomainResult<()> {
        self.select_through(actor, session_id, message_id, true).await
    }

    /// Deletes a message and everything below it. The parent then follows its newest remaining
    /// child. Refused while an answer in the session is being written.
    pub async fn delete_branch(
        &self,
        actor: &Actor,
        session_id: Uuid,
        message_id: Uuid,
        run_active: bool,
    ) -> DomainResult<u64> {
        let db = &self.db;
        let session = self.own_session(actor, session_id).await?;
        if run_active {
            return Err(DomainError::Conflict(
                "Stop the answer being written before deleting messages.".into(),
            ));
        }
        let all = messages::session_messages(db, session.id).await?;
        let index = TreeIndex::new(&all);
        let target = index.get(message_id).ok_or(DomainError::NotFound)?;
        let doomed = index.subtree(message_id);
        let next_choice =
            index.children(target.parent_id).iter().rev().find(|m| m.id != message_id).map(|m| m.id);
        Ok(messages::delete_branch(db, session.id, &doomed, target.parent_id, next_choice).await?)
    }

    /// One message of the actor's session.
    pub async fn message(&self, actor: &Actor, session_id: Uuid, message_id: Uuid) -> DomainResult<Message> {
        let db = &self.db;
        let (session, _) = self.view_session(actor, session_id).await?;
        messages::find_message(db, session.id, message_id).await?.ok_or(DomainError::NotFound)
    }

    /// Whose the session is whose live events the actor may follow (to end the stream when a
    /// share is revoked); `waiting_for`, when given, must be one of its messages. One access
    /// check for both. `live` is whose session it is as the live
    /// run there knows it: a session's owner and workspace never change, so then only the
    /// actor's role is looked up (nothing for the owner) instead of the session's row.
    pub async fn session_waiting_for(
        &self,
        actor: &Actor,
        session_id: Uuid,
        waiting_for: Option<Uuid>,
        live: Option<SessionOf>,
    ) -> DomainResult<SessionOf> {
        let of = match live {
            Some(of) => {
                access::role_as(&self.db, actor, of.owner_id, of.workspace_id, ShareRole::Viewer).await?;
                of
            }
            None => {
                let (session, _) = self.view_session(actor, session_id).await?;
                SessionOf { owner_id: session.owner_id, workspace_id: session.workspace_id }
            }
        };
        if let Some(id) = waiting_for
            && !messages::holds_message(&self.db, session_id, id).await?
        {
            return Err(DomainError::NotFound);
        }
        Ok(of)
    }

    /// A message's replies (its children, oldest first): the branches below it.
    pub async fn children(
        &self,
        actor: &Actor,
        session_id: Uuid,
        message_id: Uuid,
    ) -> DomainResult<Vec<Message>> {
        let db = &self.db;
        let (session, _) = self.view_session(actor, session_id).await?;
        messages::find_message(db, session.id, message_id).await?.ok_or(DomainError::NotFound)?;
        let mut out = Vec::new();
        for id in messages::children_of(db, session.id, message_id).await? {
            out.extend(messages::find_message(db, session.id, id).await?);
        }
        Ok(out)
    }

    /// The messages of a side branch from `message_id` down its chosen children (a sub-agent's
    /// work, say), at most `limit`.
    pub async fn branch_from(
        &self,
        actor: &Actor,
        session_id: Uuid,
        message_id: Uuid,
        limit: usize,
    ) -> DomainResult<Vec<Message>> {
        let db = &self.db;
        let (session, _) = self.view_session(actor, session_id).await?;
        let all = messages::session_messages(db, session.id).await?;
        let mut out = Vec::new();
        let mut next = all.iter().find(|m| m.id == message_id);
        if next.is_none() {
            return Err(DomainError::NotFound);
        }
        while let Some(m) = next {
            if out.len() >= limit {
                break;
            }
            out.push(m.clone());
            next = m.chosen_child_id.filter(|c| *c != m.id).and_then(|c| all.iter().find(|x| x.id == c));
        }
        Ok(out)
    }

    /// The first side branch below each of `parents` (a sub-agent's work below its result): the
    /// oldest child other than the parent's chosen one, by parent. One read for all of them.
    pub async fn side_branches(
        &self,
        actor: &Actor,
        session_id: Uuid,
        parents: &[&Message],
    ) -> DomainResult<std::collections::HashMap<Uuid, Uuid>> {
        let (session, _) = self.view_session(actor, session_id).await?;
        let chosen: std::collections::HashMap<Uuid, Option<Uuid>> =
            parents.iter().map(|m| (m.id, m.chosen_child_id)).collect();
        let ids: Vec<Uuid> = chosen.keys().copied().collect();
        let mut out = std::collections::HashMap::new();
        for (parent, child) in messages::children_of_many(&self.db, session.id, &ids).await? {
            if chosen.get(&parent).copied().flatten() != Some(child) {
                out.entry(parent).or_insert(child);
            }
        }
        Ok(out)
    }

    /// Messages of the actor's session by id, in the order asked; ids not in it are left out.
    pub async fn messages(
        &self,
        actor: &Actor,
        session_id: Uuid,
        ids: &[Uuid],
    ) -> DomainResult<Vec<Message>> {
        let (session, _) = self.view_session(actor, session_id).await?;
        self.messages_in(&session, ids).await
    }

    /// [`Self::messages`] of a session the caller already checked the actor may read.
    pub async fn messages_in(&self, session: &ChatSession, ids: &[Uuid]) -> DomainResult<Vec<Message>> {
        Ok(messages::messages_by_ids(&self.db, session.id, ids).await?)
    }
}

/// The conversation of a session from its skeleton (`all`, walked by `index` into `path_refs`,
/// its active path), the path's messages found in `full` carrying their content.
fn assemble(
    session: ChatSession,
    role: ShareRole,
    all: &[Message],
    index: &TreeIndex<'_>,
    path_refs: Vec<&Message>,
    full: Vec<Message>,
) -> Conversation {
    let siblings = path_refs
        .iter()
        .map(|m| {
            index.siblings(m.id).unwrap_or(Siblings { position: 1, count: 1, previous: None, next: None })
        })
        .collect();
    let sizes = index.branch_sizes();
    let branch_sizes = path_refs.iter().map(|m| sizes.get(&m.id).copied().unwrap_or(1)).collect();
    let mut full: std::collections::HashMap<Uuid, Message> = full.into_iter().map(|m| (m.id, m)).collect();
    let path = path_refs.into_iter().map(|m| full.remove(&m.id).unwrap_or_else(|| m.clone())).collect();
    Conversation {
        session,
        path,
        siblings,
        branch_sizes,
        message_count: all.len(),
        totals: MessageUsage::total(all.iter()),
        role,
    }
}
