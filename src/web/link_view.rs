//! Share links as their pages show them (the settings list, the admin list, a link's page).

use serde::Serialize;
use uuid::Uuid;

use crate::model::teams::ShareLink;

/// One link, with its times formatted.
#[derive(Debug, Serialize)]
pub struct LinkRow {
    /// Id.
    pub id: Uuid,
    /// The session's title when shared.
    pub title: String,
    /// Messages in the snapshot.
    pub message_count: u32,
    /// Opens without signing in.
    pub public: bool,
    /// When it was made, UTC.
    pub created: String,
    /// When it stops opening, UTC.
    pub expires: Option<String>,
    /// Who made it (an id; the admin list names them).
    pub created_by: String,
}

/// The link for a page.
pub fn row(l: &ShareLink) -> LinkRow {
    let when = |t: &chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d %H:%M").to_string();
    LinkRow {
        id: l.id,
        title: l.title.clone(),
        message_count: l.message_count,
        public: l.public,
        created: when(&l.created_at),
        expires: l.expires_at.as_ref().map(when),
        created_by: l.created_by.to_string(),
    }
}

/// Every link for a page.
pub fn rows(links: &[ShareLink]) -> Vec<LinkRow> {
    links.iter().map(row).collect()
}
