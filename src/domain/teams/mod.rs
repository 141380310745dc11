//! Teams: groups of people (made in the console or synced from the identity provider), the
//! second kind of subject access is granted to beside the person.

pub mod changes;
pub mod groups;
pub mod links;
pub mod shares;

pub use crate::model::teams::Group;

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

/// What these people are called (their name, else their email), by id, in one query: the thread
/// of a shared workspace says who asked, and a dialog who decided. Ids of deleted accounts are
/// left out.
pub async fn names(
    db: &crate::storage::Db,
    ids: &[uuid::Uuid],
) -> crate::domain::DomainResult<std::collections::HashMap<uuid::Uuid, String>> {
    if ids.is_empty() {
        return Ok(Default::default());
    }
    Ok(crate::storage::repos::users::names_of(db, ids).await?)
}
