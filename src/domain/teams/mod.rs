//! Teams: groups of people (made in the console or synced from the identity provider), the
//! second kind of subject access is granted to beside the person.

pub mod changes;
pub mod groups;
pub mod links;
pub mod shares;

pub use crate::model::teams::Group;

/// Teams as a service: groups, shared workspaces and share links, each owning what it needs.
/// Built once in the app state; the functions left free below are the lookups other subsystems
/// share.
#[derive(Clone)]
pub struct Teams {
    /// Groups (admins) and the groups a member is in.
    pub groups: groups::Groups,
    /// Workspaces shared with people and groups.
    pub shares: shares::Shares,
    /// Read-only links to one path of a session.
    pub links: links::ShareLinks,
}

impl Teams {
    /// The teams services over this database; `access` announces revoked access to live streams.
    pub fn new(
        db: crate::storage::Db,
        access: changes::AccessChanges,
        blobs: crate::blobs::BlobStore,
        files: crate::domain::files::FileSettings,
    ) -> Teams {
        let sessions = crate::domain::sessions::Sessions::new(db.clone());
        Teams {
            groups: groups::Groups { db: db.clone(), access: access.clone() },
            shares: shares::Shares { db: db.clone(), access },
            links: links::ShareLinks { db, sessions, blobs, files },
        }
    }
}

/// The person on this instance with this email, for adding to a group or sharing with: a clear
/// refusal when the email is malformed or nobody has it.
pub async fn person(
    db: &crate::storage::Db,
    raw: &str,
) -> crate::domain::DomainResult<crate::domain::accounts::User> {
    use crate::domain::DomainError;
    let email = crate::domain::accounts::normalize_email(raw)
        .map_err(|_| DomainError::Invalid("Give the email of a person on this instance.".into()))?;
    crate::domain::accounts::one_by_email(db, &email)
        .await?
        .ok_or_else(|| DomainError::Invalid(format!("Nobody on this instance has the email {email}.")))
}
