//! Share links: one path of a session (the branch on screen, down to a chosen message) kept as a
//! read-only snapshot and opened by an unguessable token. Only the token's SHA-256 is stored and
//! a link is found by that hash, so no comparison ever runs over the secret itself. A link opens
//! for people signed in to this instance, or for anyone when it is public and the instance allows
//! public links; a revoked, expired or unknown link is the same 404.

use std::collections::HashMap;

use chrono::{Duration, Utc};
use uuid::Uuid;

use crate::domain::audit::{self, Origin};
use crate::domain::authz::{Actor, Admin};
use crate::domain::files::{self, FileView, Served};
use crate::domain::sessions::{self, tree::Message};
use crate::domain::{DomainError, DomainResult};
use crate::model::messages::{MessageKind, MessageStatus, Role};
use crate::model::teams::{ShareLink, SnapshotMessage};
use crate::storage::Db;
use crate::storage::repos::share_links::{self as repo, NewLink};

/// At most this many links a person keeps.
pub const MAX_LINKS_PER_PERSON: u64 = 1_000;
/// At most this many messages in one snapshot.
pub const MAX_SNAPSHOT_MESSAGES: usize = 2_000;
/// At most this many links listed on a page.
pub const LINKS_LISTED: u64 = 500;
/// The lifetimes a link may be given, in days (none: until revoked).
pub const EXPIRY_DAYS: [u32; 4] = [1, 7, 30, 365];

/// Share links: made by members, opened by anyone the link allows, revoked by either.
#[derive(Clone)]
pub struct ShareLinks {
    pub(super) db: Db,
    pub(super) sessions: sessions::Sessions,
    pub(super) blobs: crate::blobs::BlobStore,
    pub(super) files: files::FileSettings,
}

/// A link just made, with the token its URL carries (shown once, never stored).
#[derive(Debug, Clone)]
pub struct Created {
    /// The link.
    pub link: ShareLink,
    /// The secret part of its URL.
    pub token: String,
}

/// What a link's page shows.
#[derive(Debug, Clone)]
pub struct Opened {
    /// The link.
    pub link: ShareLink,
    /// The messages as they were, root first (ids are the snapshot's own).
    pub messages: Vec<Message>,
    /// Their files, by message id.
    pub files: HashMap<Uuid, Vec<FileView>>,
}

/// How a person asks for a link.
#[derive(Debug, Clone, Default)]
pub struct LinkForm {
    /// Days until it stops opening; none for never.
    pub expires_in_days: Option<u32>,
    /// Open without signing in.
    pub public: bool,
}

/// Parses the form's lifetime: blank for none, else one of [`EXPIRY_DAYS`].
pub fn parse_expiry(raw: &str) -> DomainResult<Option<u32>> {
    match raw.trim() {
        "" | "never" => Ok(None),
        n => match n.parse::<u32>() {
            Ok(d) if EXPIRY_DAYS.contains(&d) => Ok(Some(d)),
            _ => Err(DomainError::Invalid(
                "Pick how long the link works: 1, 7, 30 or 365 days, or until revoked.".into(),
            )),
        },
    }
}

impl ShareLinks {
    /// Shares the active path of a session down to `message_id` as a snapshot link. Needs the
    /// right to edit the session; public links only where the instance allows them.
    pub async fn create(
        &self,
        actor: &Actor,
        origin: &Origin,
        (session_id, message_id): (Uuid, Uuid),
        form: &LinkForm,
        public_allowed: bool,
    ) -> DomainResult<Created> {
        let db = &self.db;
        if form.public && !public_allowed {
            return Err(DomainError::Invalid(
                "Public links are off on this instance: links open for people signed in here.".into(),
            ));
        }
        let sessions = &self.sessions;
        sessions.get_session(actor, session_id).await?;
        if repo::count_by(db, actor.user_id()).await? >= MAX_LINKS_PER_PERSON {
            return Err(DomainError::Invalid(format!(
                "You have {MAX_LINKS_PER_PERSON} links: revoke some under Settings → Links first."
            )));
        }
        let conv = sessions.conversation(actor, session_id).await?;
        let end = conv
            .path
            .iter()
            .position(|m| m.id == message_id)
            .ok_or_else(|| DomainError::Invalid("Share a message on the branch shown.".into()))?;
        let path = &conv.path[..=end];
        if path.len() > MAX_SNAPSHOT_MESSAGES {
            return Err(DomainError::Invalid(format!(
                "A link holds at most {MAX_SNAPSHOT_MESSAGES} messages: share from a later point."
            )));
        }
        if path.iter().any(|m| m.status == MessageStatus::Streaming) {
            return Err(DomainError::Conflict("Wait for the answer to finish, then share it.".into()));
        }
        let ids: Vec<Uuid> = path.iter().map(|m| m.id).collect();
        let mut files = files::attachments_for_snapshot(db, &ids).await?;
        let snapshot: Vec<SnapshotMessage> = path
            .iter()
            .map(|m| SnapshotMessage {
                role: m.role.as_str().to_string(),
                kind: m.kind.as_str().to_string(),
                parts: serde_json::to_value(&m.parts).unwrap_or_default(),
                model: m.model.clone(),
                created_at: m.created_at,
                files: files.remove(&m.id).unwrap_or_default(),
            })
            .collect();
        let token = crate::auth::sessions::random_token();
        let link = repo::insert(
            db,
            &NewLink {
                token_hash: &crate::auth::sessions::hash_token(&token),
                session_id,
                created_by: actor.user_id(),
                title: &conv.session.title,
                snapshot: &snapshot,
                public: form.public,
                expires_at: form.expires_in_days.map(|d| Utc::now() + Duration::days(i64::from(d))),
            },
        )
        .await?;
        audit::record(
            db,
            origin,
            "link.create",
            &format!("session:{session_id}"),
            serde_json::json!({ "link_id": link.id, "messages": link.message_count, "public": link.public }),
        )
        .await?;
        Ok(Created { link, token })
    }

    /// Opens a link for its page.
    pub async fn open(
        &self,
        token: &str,
        viewer: Option<&Actor>,
        public_allowed: bool,
    ) -> DomainResult<Opened> {
        let (link, snapshot) = find(&self.db, token, viewer.is_some(), public_allowed).await?;
        let mut files = HashMap::new();
        let messages = snapshot
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                // Stable ids of the snapshot's own, so the page's anchors stay put.
                let id = Uuid::from_u64_pair(link.id.as_u64_pair().0, i as u64);
                let views: Vec<FileView> = m.files.iter().map(|f| files::snapshot_view(id, f)).collect();
                if !views.is_empty() {
                    files.insert(id, views);
                }
                snapshot_message(id, link.session_id, m)
            })
            .collect();
        Ok(Opened { link, messages, files })
    }

    /// A file the link shows (by its hash or its thumbnail's); any other hash is "not found".
    pub async fn file(
        &self,
        token: &str,
        viewer: Option<&Actor>,
        public_allowed: bool,
        hash: &str,
    ) -> DomainResult<Served> {
        let store = &self.blobs;
        let (_, snapshot) = find(&self.db, token, viewer.is_some(), public_allowed).await?;
        let shown = snapshot
            .iter()
            .flat_map(|m| &m.files)
            .find(|f| f.hash == hash || f.thumb.as_deref() == Some(hash))
            .ok_or(DomainError::NotFound)?;
        files::serve_shown(store, hash, &shown.name).await
    }

    /// "Continue in my workspace": the link's messages become a new session in the viewer's first
    /// workspace, with its files, which count against the viewer's storage quota (refused, with
    /// nothing made, when they would not fit); returns the session's id.
    pub async fn continue_in_workspace(&self, actor: &Actor, token: &str) -> DomainResult<Uuid> {
        let db = &self.db;
        let settings = &self.files;
        let (link, snapshot) = find(db, token, true, true).await?;
        let bytes: u64 =
            snapshot.iter().flat_map(|m| &m.files).map(|f| u64::try_from(f.size).unwrap_or(0)).sum();
        let reservation =
            settings.reservations.reserve(db, actor.user_id(), bytes, settings.user_quota_bytes).await?;
        let sessions = &self.sessions;
        let workspace = sessions.default_workspace(actor).await?;
        let session = sessions.create_session(actor, workspace.id, &link.title).await?;
        crate::storage::repos::messages::insert_copied_path(db, session.id, actor.user_id(), &snapshot)
            .await?;
        reservation.release().await;
        Ok(session.id)
    }

    /// The actor's links, newest first.
    pub async fn mine(&self, actor: &Actor) -> DomainResult<Vec<ShareLink>> {
        Ok(repo::list(&self.db, Some(actor.user_id()), LINKS_LISTED).await?)
    }

    /// Revokes one of the actor's links: it is a 404 from now on.
    pub async fn revoke_mine(&self, actor: &Actor, origin: &Origin, id: Uuid) -> DomainResult<()> {
        let db = &self.db;
        if !repo::delete(db, id, Some(actor.user_id())).await? {
            return Err(DomainError::NotFound);
        }
        audit::record(db, origin, "link.revoke", &format!("link:{id}"), serde_json::json!({ "link_id": id }))
            .await
    }

    /// Every link on the instance, newest first, with the names of the people who made them
    /// (admins; a deleted account has none).
    pub async fn all(&self, _admin: &Admin) -> DomainResult<(Vec<ShareLink>, HashMap<Uuid, String>)> {
        let links = repo::list(&self.db, None, LINKS_LISTED).await?;
        let mut creators: Vec<Uuid> = links.iter().map(|l| l.created_by).collect();
        creators.sort_unstable();
        creators.dedup();
        let names = crate::domain::accounts::names(&self.db, &creators).await?;
        Ok((links, names))
    }

    /// Revokes anyone's link (admins).
    pub async fn revoke_any(&self, _admin: &Admin, origin: &Origin, id: Uuid) -> DomainResult<()> {
        let db = &self.db;
        if !repo::delete(db, id, None).await? {
            return Err(DomainError::NotFound);
        }
        audit::record(
            db,
            origin,
            "link.revoke",
            &format!("link:{id}"),
            serde_json::json!({ "link_id": id, "by": "admin" }),
        )
        .await
    }
}

/// A token's link, if it opens for this viewer: `NotFound` when unknown, revoked or expired,
/// `Forbidden` when only people signed in may open it and the viewer is not. `public_allowed`
/// is the instance's setting now: turning public links off makes existing public links open
/// for signed-in people only (and the link says it is not public).
async fn find(
    db: &Db,
    token: &str,
    signed_in: bool,
    public_allowed: bool,
) -> DomainResult<(ShareLink, Vec<SnapshotMessage>)> {
    // Tokens are 43 URL-safe base64 characters; anything else is not one, and costs no query.
    if token.len() != 43 || !token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(DomainError::NotFound);
    }
    let (link, snapshot) = repo::find_by_token_hash(db, &crate::auth::sessions::hash_token(token))
        .await?
        .ok_or(DomainError::NotFound)?;
    if link.expires_at.is_some_and(|t| t <= Utc::now()) {
        return Err(DomainError::NotFound);
    }
    let link = ShareLink { public: link.public && public_allowed, ..link };
    if !signed_in && !link.public {
        return Err(DomainError::Forbidden);
    }
    Ok((link, snapshot))
}

fn snapshot_message(id: Uuid, session_id: Uuid, m: SnapshotMessage) -> Message {
    Message {
        id,
        session_id,
        parent_id: None,
        chosen_child_id: None,
        role: Role::parse(&m.role).unwrap_or(Role::System),
        kind: MessageKind::parse(&m.kind).unwrap_or(MessageKind::Text),
        parts: serde_json::from_value(m.parts).unwrap_or_default(),
        model: m.model,
        status: MessageStatus::Complete,
        error: None,
        usage: None,
        tokens: None,
        client_id: None,
        author_id: None,
        created_at: m.created_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_are_one_of_the_offered_ones() {
        assert_eq!(parse_expiry("").ok(), Some(None));
        assert_eq!(parse_expiry("7").ok(), Some(Some(7)));
        for bad in ["0", "2", "-1", "99999999999", "x"] {
            assert!(parse_expiry(bad).is_err(), "{bad}");
        }
    }
}
