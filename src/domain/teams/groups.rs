//! Groups: admins make, rename and delete them and manage who is in them; the identity
//! provider's groups claim replaces a person's memberships of the groups it manages at every
//! sign-in. Every count that comes from outside is capped before it decides any work.

use uuid::Uuid;

use crate::domain::accounts::{Role, User};
use crate::domain::agent::ApprovalMode;
use crate::domain::audit::{self, Origin};
use crate::domain::authz::{Actor, Admin};
use crate::domain::teams::changes::AccessChanges;
use crate::domain::{DomainError, DomainResult};
use crate::model::teams::Group;
use crate::storage::repos::groups as repo;
use crate::storage::{Db, Tx};

/// At most this many groups on an instance (the console lists them all).
pub const MAX_GROUPS: u64 = 10_000;
/// At most this many members shown on a group's page.
pub const MEMBERS_SHOWN: u64 = 1_000;
/// A groups claim with more entries than this is ignored (logged), never fatal.
pub const MAX_CLAIM_GROUPS: usize = 1_000;
/// A groups claim larger than this (bytes of names) is ignored (logged), never fatal.
pub const MAX_CLAIM_BYTES: usize = 64 * 1024;
/// Longest group name.
pub const MAX_NAME_CHARS: usize = 100;

/// Groups as the console and a member's own pages see them.
#[derive(Clone)]
pub struct Groups {
    pub(super) db: Db,
    pub(super) access: AccessChanges,
}

/// A well-formed group name: trimmed, 1 to 100 characters, no control characters.
pub fn check_name(raw: &str) -> DomainResult<String> {
    let name = raw.trim();
    if name.is_empty() {
        return Err(DomainError::Invalid("Give the group a name.".into()));
    }
    if name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(DomainError::Invalid(format!(
            "A group name is at most {MAX_NAME_CHARS} characters, without control characters."
        )));
    }
    Ok(name.to_string())
}

impl Groups {
    /// Every group with its number of members, by name.
    pub async fn list(&self, _admin: &Admin) -> DomainResult<Vec<(Group, u64)>> {
        Ok(repo::list(&self.db, MAX_GROUPS).await?)
    }

    /// The group with this name (ignoring case), if there is one.
    pub async fn by_name(&self, _admin: &Admin, raw: &str) -> DomainResult<Option<Group>> {
        Ok(repo::find_by_name(&self.db, &check_name(raw)?).await?)
    }

    /// Every group's name, by id (for pages that name the groups something is granted to).
    pub async fn names_by_id(&self, _admin: &Admin) -> DomainResult<std::collections::HashMap<Uuid, String>> {
        Ok(repo::names(&self.db, MAX_GROUPS).await?)
    }

    /// One group and its members.
    pub async fn detail(&self, _admin: &Admin, id: Uuid) -> DomainResult<(Group, Vec<User>)> {
        let db = &self.db;
        let group = repo::find(db, id).await?.ok_or(DomainError::NotFound)?;
        let members = repo::members(db, id, MEMBERS_SHOWN).await?;
        Ok((group, members))
    }

    /// Makes a group by hand (never managed by the identity provider).
    pub async fn create(&self, _admin: &Admin, origin: &Origin, raw_name: &str) -> DomainResult<Group> {
        let db = &self.db;
        let name = check_name(raw_name)?;
        if repo::count(db).await? >= MAX_GROUPS {
            return Err(DomainError::Invalid(format!("An instance holds at most {MAX_GROUPS} groups.")));
        }
        let group = repo::insert(db, &name, false)
            .await?
            .ok_or_else(|| DomainError::Conflict(format!("There is already a group called {name}.")))?;
        audit::record(
            db,
            origin,
            "group.create",
            &format!("group:{name}"),
            serde_json::json!({ "group_id": group.id }),
        )
        .await?;
        Ok(group)
    }

    /// Renames a group.
    pub async fn rename(
        &self,
        _admin: &Admin,
        origin: &Origin,
        id: Uuid,
        raw_name: &str,
    ) -> DomainResult<Group> {
        let db = &self.db;
        let name = check_name(raw_name)?;
        let before = repo::find(db, id).await?.ok_or(DomainError::NotFound)?;
        if !repo::rename(db, id, &name).await? {
            return Err(DomainError::Conflict(format!("There is already a group called {name}.")));
        }
        audit::record(
            db,
            origin,
            "group.rename",
            &format!("group:{name}"),
            serde_json::json!({ "group_id": id, "from": before.name, "to": name }),
        )
        .await?;
        Ok(Group { name, ..before })
    }

    /// Sets what the group grants its members (audited).
    pub async fn set_grants(
        &self,
        _admin: &Admin,
        origin: &Origin,
        id: Uuid,
        grants: &Grants,
    ) -> DomainResult<Group> {
        let db = &self.db;
        let role = Role::parse(grants.default_role.trim())
            .ok_or_else(|| DomainError::Invalid("The role at first sign-in is member or admin.".into()))?;
        let loosest = match grants.loosest_approval_mode.trim() {
            "" => None,
            mode => Some(
                ApprovalMode::parse(mode)
                    .ok_or_else(|| {
                        DomainError::Invalid(
                            "The approval mode is the instance's, suggest, auto-edit or full-auto.".into(),
                        )
                    })?
                    .as_str(),
            ),
        };
        let before = repo::find(db, id).await?.ok_or(DomainError::NotFound)?;
        if !repo::set_grants(db, id, role, loosest).await? {
            return Err(DomainError::NotFound);
        }
        let detail = serde_json::json!({
            "group_id": id, "default_role": role.as_str(), "loosest_approval_mode": loosest
        });
        audit::record(db, origin, "group.grants", &format!("group:{}", before.name), detail).await?;
        Ok(Group { default_role: role, loosest_approval_mode: loosest.map(str::to_string), ..before })
    }

    /// Deletes a group; what was granted to it (shares, visibility, quotas) goes with it.
    pub async fn delete(&self, _admin: &Admin, origin: &Origin, id: Uuid) -> DomainResult<Group> {
        let db = &self.db;
        let group = repo::find(db, id).await?.ok_or(DomainError::NotFound)?;
        let tx = Tx::begin(db).await?;
        repo::delete(tx.conn(), id).await?;
        crate::storage::repos::mcp_servers::unshare_group(tx.conn(), id).await?;
        crate::storage::repos::prompt_templates::unshare_group(tx.conn(), id).await?;
        crate::storage::repos::quotas::remove_in(tx.conn(), &crate::domain::admin::quotas::group_scope(id))
            .await?;
        audit::record(
            tx.conn(),
            origin,
            "group.delete",
            &format!("group:{}", group.name),
            serde_json::json!({ "group_id": id }),
        )
        .await?;
        tx.commit().await?;
        // Its members lose what was shared with it: their open streams are checked again.
        self.access.announce(Uuid::nil());
        Ok(group)
    }

    /// Adds the person with this email to the group.
    pub async fn add_member(
        &self,
        _admin: &Admin,
        origin: &Origin,
        id: Uuid,
        email: &str,
    ) -> DomainResult<User> {
        let db = &self.db;
        let group = repo::find(db, id).await?.ok_or(DomainError::NotFound)?;
        let user = super::person(db, email).await?;
        if repo::add_member(db, id, user.id).await? {
            audit::record(
                db,
                origin,
                "group.member.add",
                &format!("group:{}", group.name),
                serde_json::json!({ "group_id": id, "user_id": user.id, "email": user.email }),
            )
            .await?;
        }
        Ok(user)
    }

    /// Takes a person out of the group.
    pub async fn remove_member(
        &self,
        _admin: &Admin,
        origin: &Origin,
        id: Uuid,
        user_id: Uuid,
    ) -> DomainResult<()> {
        let db = &self.db;
        let group = repo::find(db, id).await?.ok_or(DomainError::NotFound)?;
        if !repo::remove_member(db, id, user_id).await? {
            return Err(DomainError::NotFound);
        }
        audit::record(
            db,
            origin,
            "group.member.remove",
            &format!("group:{}", group.name),
            serde_json::json!({ "group_id": id, "user_id": user_id }),
        )
        .await?;
        self.access.announce(Uuid::nil());
        Ok(())
    }

    /// The groups the acting person is in.
    pub async fn mine(&self, actor: &Actor) -> DomainResult<Vec<Group>> {
        Ok(repo::groups_of(&self.db, actor.user_id()).await?)
    }
}

/// The group with this name (ignoring case), for a form that names one: a clear refusal when
/// there is none.
pub async fn named(db: &Db, raw: &str) -> DomainResult<Group> {
    let name = check_name(raw)?;
    repo::find_by_name(db, &name)
        .await?
        .ok_or_else(|| DomainError::Invalid(format!("There is no group called {name}.")))
}

/// One of the actor's groups, named by its id as a form sends it; `None` for blank (nobody).
/// What members share (their MCP servers, their prompt templates) goes only to their groups.
pub async fn one_of_mine(db: &Db, actor: &Actor, raw: &str) -> DomainResult<Option<Group>> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    let mine = repo::groups_of(db, actor.user_id()).await?;
    let chosen = Uuid::parse_str(raw).ok().and_then(|id| mine.into_iter().find(|g| g.id == id));
    chosen.map(Some).ok_or_else(|| DomainError::Invalid("Share it with one of your groups.".into()))
}

/// What a group grants beyond access, as the console's form sends it: the role at first
/// sign-in (`member` or `admin`) and the least-asking approval mode (blank: the instance's).
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// `member` or `admin`.
    pub default_role: String,
    /// Blank, `suggest`, `auto-edit` or `full-auto`.
    pub loosest_approval_mode: String,
}

/// The least-asking approval mode the person's groups allow: the loosest any of them sets,
/// `None` when none sets one (the instance's setting holds).
pub async fn loosest_approval_mode(db: &Db, user_id: Uuid) -> DomainResult<Option<ApprovalMode>> {
    Ok(repo::groups_of(db, user_id)
        .await?
        .iter()
        .filter_map(|g| g.loosest_approval_mode.as_deref().and_then(ApprovalMode::parse))
        .max())
}

/// The role the person's groups give at first sign-in: admin when any of them says so.
pub async fn role_at_first_sign_in(db: &Db, user_id: Uuid) -> DomainResult<Role> {
    let groups = repo::groups_of(db, user_id).await?;
    Ok(groups.iter().map(|g| g.default_role).find(|r| *r == Role::Admin).unwrap_or(Role::Member))
}

/// What a sign-in's groups claim says, once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The provider sent no such claim, or not a list of names: memberships stay as they are.
    Absent,
    /// Too many entries or too many bytes: ignored, memberships stay as they are.
    TooLarge,
    /// The names, trimmed, deduplicated ignoring case, malformed ones left out.
    Names(Vec<String>),
}

impl Claim {
    /// Checks raw claim entries against the caps; `None` is a claim the provider did not send.
    pub fn from_raw(raw: Option<&[String]>) -> Claim {
        let Some(raw) = raw else { return Claim::Absent };
        if raw.len() > MAX_CLAIM_GROUPS || raw.iter().map(String::len).sum::<usize>() > MAX_CLAIM_BYTES {
            return Claim::TooLarge;
        }
        let mut names: Vec<String> = Vec::new();
        for entry in raw {
            let Ok(name) = check_name(entry) else { continue };
            let key = crate::model::teams::name_key(&name);
            if !names.iter().any(|n| crate::model::teams::name_key(n) == key) {
                names.push(name);
            }
        }
        Claim::Names(names)
    }
}

/// Replaces the person's memberships of the groups the identity provider manages with the
/// claim's (making managed groups it names that do not exist yet); groups made by hand are
/// left alone, even when the claim names one. One transaction: a failure changes nothing.
pub async fn sync_from_claim(db: &Db, user_id: Uuid, claim: &Claim) -> DomainResult<()> {
    let names = match claim {
        Claim::Absent => return Ok(()),
        Claim::TooLarge => {
            tracing::warn!(%user_id, "the identity provider's groups claim is over {MAX_CLAIM_GROUPS} entries or {MAX_CLAIM_BYTES} bytes; memberships left as they were");
            return Ok(());
        }
        Claim::Names(names) => names,
    };
    let tx = Tx::begin(db).await?;
    let mut existing = repo::find_by_names(tx.conn(), names).await?;
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| {
            let key = crate::model::teams::name_key(n);
            !existing.iter().any(|g| crate::model::teams::name_key(&g.name) == key)
        })
        .collect();
    let room = MAX_GROUPS.saturating_sub(repo::count(tx.conn()).await?) as usize;
    if missing.len() > room {
        tracing::warn!(%user_id, "the instance holds {MAX_GROUPS} groups; groups of the claim beyond that are not made");
    }
    for name in missing.into_iter().take(room) {
        if let Some(group) = repo::insert(tx.conn(), name, true).await? {
            existing.push(group);
        }
    }
    let managed: Vec<Uuid> = existing.iter().filter(|g| g.managed_by_idp).map(|g| g.id).collect();
    repo::leave_managed_except(tx.conn(), user_id, &managed).await?;
    for id in &managed {
        repo::add_member(tx.conn(), *id, user_id).await?;
    }
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_trimmed_and_bounded() {
        assert_eq!(check_name("  Engineering ").ok().as_deref(), Some("Engineering"));
        assert!(check_name("   ").is_err());
        assert!(check_name(&"x".repeat(101)).is_err());
        assert!(check_name("a\u{0}b").is_err());
    }

    #[test]
    fn claims_over_the_caps_are_ignored_and_duplicates_fold() {
        assert_eq!(Claim::from_raw(None), Claim::Absent);
        let many: Vec<String> = (0..=MAX_CLAIM_GROUPS).map(|i| format!("g{i}")).collect();
        assert_eq!(Claim::from_raw(Some(&many)), Claim::TooLarge);
        let wide = vec!["x".repeat(100); 700];
        assert_eq!(Claim::from_raw(Some(&wide)), Claim::TooLarge);
        let raw = vec!["Eng".to_string(), "eng ".into(), "".into(), "Ops".into()];
        assert_eq!(Claim::from_raw(Some(&raw)), Claim::Names(vec!["Eng".into(), "Ops".into()]));
    }
}
