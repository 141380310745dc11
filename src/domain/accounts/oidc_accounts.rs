//! Accounts from an OpenID Connect provider: identity is (issuer, subject), never the email.

use super::Accounts;
use uuid::Uuid;

use crate::auth::oidc::VerifiedIdentity;
use crate::config::OidcConfig;
use crate::domain::accounts::invitations::Invitation;
use crate::domain::accounts::{Role, User, UserStatus};
use crate::domain::teams::groups;
use crate::domain::{DomainError, DomainResult};
use crate::storage::Db;
use crate::storage::repos::{invitations as invitation_repo, users};

/// Whether the provider's groups make this person an administrator under the configuration;
/// `None` when roles are not mapped from groups.
fn mapped_role(cfg: &OidcConfig, id: &VerifiedIdentity) -> Option<Role> {
    if cfg.admin_groups.is_empty() {
        return None;
    }
    Some(if id.groups.iter().any(|g| cfg.admin_groups.contains(g)) { Role::Admin } else { Role::Member })
}

/// The allow-lists: groups, and email domains (a domain only counts for a verified email).
fn allowed(cfg: &OidcConfig, id: &VerifiedIdentity) -> bool {
    let group_ok = cfg.allowed_groups.is_empty() || id.groups.iter().any(|g| cfg.allowed_groups.contains(g));
    let domain_ok =
        cfg.allowed_email_domains.is_empty()
            || (id.email_verified
                && id.email.as_deref().and_then(|e| e.rsplit_once('@')).is_some_and(|(_, d)| {
                    cfg.allowed_email_domains.iter().any(|a| a.eq_ignore_ascii_case(d))
                }));
    group_ok && domain_ok
}

/// The provider's email claim, split by whether the provider verified it: the verified one
/// becomes the account's email; an unverified one is kept apart, shown as unverified and never
/// used for lookups or links (SECURITY.md 56). A claim that is not a valid address is dropped.
struct Emails {
    verified: Option<String>,
    unverified: Option<String>,
}

fn emails(id: &VerifiedIdentity) -> Emails {
    let claim = id.email.as_deref().and_then(|e| crate::domain::accounts::normalize_email(e).ok());
    if id.email_verified {
        Emails { verified: claim, unverified: None }
    } else {
        Emails { verified: None, unverified: claim }
    }
}

fn display_name(id: &VerifiedIdentity) -> String {
    id.name
        .clone()
        .or_else(|| id.preferred_username.clone())
        .or_else(|| id.email.as_ref().and_then(|e| e.split('@').next().map(str::to_string)))
        .unwrap_or_else(|| "New user".into())
        .chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect()
}

impl Accounts {
    /// Signs in (or provisions) the user for a verified identity. An invitation token, when the
    /// sign-in started from an invitation, admits the person and gives the invited role. The groups
    /// claim then replaces the person's memberships of the groups the provider manages; a claim
    /// that cannot be used, or a failure to record it, is logged and never refuses the sign-in.
    pub async fn sign_in_with_provider(
        &self,
        cfg: &OidcConfig,
        id: &VerifiedIdentity,
        invitation: Option<Uuid>,
    ) -> DomainResult<User> {
        let db = &self.db;
        let invitation = match invitation {
            Some(invitation_id) => Some(self.invitations.open_by_id(invitation_id).await?),
            None => None,
        };
        let (user, role_open) = admit(db, cfg, id, invitation).await?;
        let claim = groups::Claim::from_raw(id.groups_sent.then_some(id.groups.as_slice()));
        if let Err(e) = groups::sync_from_claim(db, user.id, &claim).await {
            tracing::warn!(user_id = %user.id, error = %e, "could not record the identity provider's groups");
        }
        if !role_open {
            return Ok(user);
        }
        match group_role(db, &user).await {
            Ok(role) => Ok(User { role, ..user }),
            Err(e) => {
                tracing::warn!(user_id = %user.id, error = %e, "could not apply the groups' role at first sign-in");
                Ok(user)
            }
        }
    }

    /// Whether a user signs in through the provider (for RP-initiated logout).
    pub async fn uses_provider(&self, user_id: Uuid) -> DomainResult<bool> {
        Ok(users::has_identity(&self.db, user_id).await?)
    }

    /// Keeps a sign-in the browser started under the hash of its flow cookie until it returns.
    pub async fn remember_flow(
        &self,
        cookie_hash: &str,
        flow: &LoginFlow,
        expires_at: chrono::DateTime<chrono::Utc>,
    ) -> DomainResult<()> {
        Ok(crate::storage::repos::login_flows::insert(&self.db, cookie_hash, flow, expires_at).await?)
    }

    /// Takes (and forgets) the pending sign-in of this flow cookie: a replayed callback finds none.
    pub async fn take_flow(&self, cookie_hash: &str) -> DomainResult<Option<LoginFlow>> {
        Ok(crate::storage::repos::login_flows::take(&self.db, cookie_hash).await?)
    }
}

/// At a first sign-in whose role no invitation or configured admin group decided: the role
/// the person's groups give (admin when any of them says so; audited).
async fn group_role(db: &Db, user: &User) -> DomainResult<Role> {
    let role = groups::role_at_first_sign_in(db, user.id).await?;
    if role == user.role {
        return Ok(role);
    }
    set_role(db, user, role, "the role of their groups at first sign-in").await?;
    Ok(role)
}

/// Changes the person's role for the identity provider's reasons, audited with them.
async fn set_role(db: &Db, user: &User, role: Role, by: &str) -> DomainResult<()> {
    users::set_role(db, user.id, role).await?;
    crate::domain::audit::record(
        db,
        &crate::domain::audit::Origin::system(),
        "user.role",
        &format!("user:{}", user.email),
        serde_json::json!({ "user_id": user.id, "from": user.role.as_str(), "to": role.as_str(), "by": by }),
    )
    .await
}

/// Admits the person; the flag is a first sign-in whose role is still the groups' to give
/// (a new account, or a directory-provisioned one linked now, with no invitation and no
/// configured admin groups deciding it).
async fn admit(
    db: &Db,
    cfg: &OidcConfig,
    id: &VerifiedIdentity,
    invitation: Option<Invitation>,
) -> DomainResult<(User, bool)> {
    if invitation.is_none() && !allowed(cfg, id) {
        return Err(DomainError::Invalid(
            "Your account at the identity provider may not use this Arbor.".into(),
        ));
    }
    let emails = emails(id);
    let name = display_name(id);

    if let Some(user) = users::find_by_identity(db, &id.issuer, &id.subject).await? {
        return Ok((known_identity(db, cfg, id, user, &emails, &name).await?, false));
    }
    let role_open = invitation.is_none() && mapped_role(cfg, id).is_none();

    // 2. Linking by email, only when enabled (or the account was provisioned by the directory,
    //    which vouches for its email) and the provider verified the address, and only to the one
    //    account with that email, which has no provider identity yet.
    if let Some(email) = emails.verified.as_deref()
        && let [(user, _)] = users::find_by_email(db, email).await?.as_slice()
        && let scim = crate::storage::repos::directory::made_by_scim(db, user.id).await?
        && (cfg.link_verified_email || scim)
        && !users::has_identity(db, user.id).await?
    {
        let user = user.clone();
        if user.status != UserStatus::Active {
            return Err(DomainError::Forbidden);
        }
        users::set_identity(db, user.id, &id.issuer, &id.subject).await?;
        users::touch_login(db, user.id).await?;
        // A directory-provisioned account's first sign-in; an older account keeps its role.
        return Ok((user, role_open && scim));
    }

    // 3. A new account: the invited role, else the mapped role, else member.
    let role = invitation.as_ref().map(|i| i.role).or_else(|| mapped_role(cfg, id)).unwrap_or(Role::Member);
    match create(db, id, &emails, &name, role, invitation.as_ref().map(|i| i.id)).await {
        Ok(user) => {
            users::touch_login(db, user.id).await?;
            Ok((user, role_open))
        }
        // A concurrent first sign-in of the same person won the unique (issuer, subject) index.
        Err(e) => match users::find_by_identity(db, &id.issuer, &id.subject).await? {
            Some(user) => Ok((known_identity(db, cfg, id, user, &emails, &name).await?, false)),
            None => Err(e),
        },
    }
}

/// Creates the account and binds its identity (and accepts the invitation) in one transaction.
async fn create(
    db: &Db,
    id: &VerifiedIdentity,
    emails: &Emails,
    name: &str,
    role: Role,
    invitation: Option<Uuid>,
) -> DomainResult<User> {
    let txn = crate::storage::Tx::begin(db).await?;
    let email = emails.verified.as_deref().unwrap_or("");
    let user = users::insert(txn.conn(), email, name, role, UserStatus::Active).await?;
    users::set_identity(txn.conn(), user.id, &id.issuer, &id.subject).await?;
    if emails.unverified.is_some() {
        users::set_profile(txn.conn(), user.id, None, emails.unverified.as_deref(), name).await?;
    }
    if let Some(invitation_id) = invitation
        && !invitation_repo::mark_accepted(txn.conn(), invitation_id, user.id).await?
    {
        txn.rollback().await?;
        return Err(DomainError::NotFound);
    }
    txn.commit().await?;
    Ok(user)
}

/// A returning person: refresh display data and the mapped role.
async fn known_identity(
    db: &Db,
    cfg: &OidcConfig,
    id: &VerifiedIdentity,
    user: User,
    emails: &Emails,
    name: &str,
) -> DomainResult<User> {
    if user.status != UserStatus::Active {
        return Err(DomainError::Forbidden);
    }
    // A verified email replaces the account's; an unverified claim never does.
    users::set_profile(db, user.id, emails.verified.as_deref(), emails.unverified.as_deref(), name).await?;
    let user = User { email: emails.verified.clone().unwrap_or(user.email), ..user };
    let role = mapped_role(cfg, id).unwrap_or(user.role);
    if role != user.role {
        set_role(db, &user, role, "the identity provider's groups").await?;
    }
    users::touch_login(db, user.id).await?;
    Ok(User { role, display_name: name.to_string(), ..user })
}

pub use crate::storage::repos::login_flows::LoginFlow;

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> OidcConfig {
        OidcConfig {
            issuer: "https://idp.example".into(),
            client_id: "arbor".into(),
            client_secret: String::new(),
            display_name: "Example".into(),
            scopes: vec![],
            signing_algs: vec!["RS256".into()],
            groups_claim: "groups".into(),
            admin_groups: vec![],
            allowed_groups: vec![],
            allowed_email_domains: vec![],
            link_verified_email: false,
        }
    }

    fn identity(groups: &[&str], email: &str, verified: bool) -> VerifiedIdentity {
        VerifiedIdentity {
            issuer: "https://idp.example".into(),
            subject: "s1".into(),
            email: Some(email.into()),
            email_verified: verified,
            name: None,
            preferred_username: None,
            groups: groups.iter().map(|g| g.to_string()).collect(),
            groups_sent: true,
        }
    }

    #[test]
    fn roles_map_from_groups_only_when_configured() {
        let mut c = cfg();
        assert_eq!(mapped_role(&c, &identity(&["arbor-admins"], "a@x.io", true)), None);
        c.admin_groups = vec!["arbor-admins".into()];
        assert_eq!(mapped_role(&c, &identity(&["arbor-admins"], "a@x.io", true)), Some(Role::Admin));
        assert_eq!(mapped_role(&c, &identity(&["staff"], "a@x.io", true)), Some(Role::Member));
    }

    #[test]
    fn allow_lists_need_a_group_or_a_verified_domain() {
        let mut c = cfg();
        assert!(allowed(&c, &identity(&[], "a@x.io", false)));
        c.allowed_groups = vec!["staff".into()];
        assert!(allowed(&c, &identity(&["staff"], "a@x.io", false)));
        assert!(!allowed(&c, &identity(&["guests"], "a@x.io", true)));
        c.allowed_groups.clear();
        c.allowed_email_domains = vec!["Example.com".into()];
        assert!(allowed(&c, &identity(&[], "a@example.com", true)));
        assert!(!allowed(&c, &identity(&[], "a@example.com", false)), "unverified email proves nothing");
        assert!(!allowed(&c, &identity(&[], "a@evil.com", true)));
    }
}
