//! Authorization as types. An [`Actor`] says who is asking; it has no public constructor, so
//! holding one proves the request came through a verified browser session or API token (the
//! only places that build one), or from the operator's command line. An [`Admin`] is a proof
//! obtained from an actor who is an instance admin (`actor.admin()?`); every admin operation
//! takes one, so it cannot be called without the check having happened.

use uuid::Uuid;

use crate::domain::{DomainError, DomainResult};
use crate::model::accounts::{Role, User};

/// The authenticated user on whose behalf a service call runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    user_id: Uuid,
    role: Role,
}

impl Actor {
    /// The actor for a user whose session or token was just verified, or whom the operator
    /// named on the command line. Crate-private: the web layer gets actors from its extractors.
    pub(crate) fn verified(user: &User) -> Actor {
        Actor { user_id: user.id, role: user.role }
    }

    /// An actor for tests that drive services directly (the `test-support` feature only).
    #[cfg(any(test, feature = "test-support"))]
    pub fn for_tests(user: &User) -> Actor {
        Actor::verified(user)
    }

    /// The acting user's id.
    pub fn user_id(&self) -> Uuid {
        self.user_id
    }

    /// The acting user's role at the time of the request.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Whether the actor is an instance admin (for display; admin work needs [`Actor::admin`]).
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// The proof needed for admin operations, or `Forbidden`.
    pub fn admin(&self) -> DomainResult<Admin> {
        if self.is_admin() { Ok(Admin { actor: self.clone() }) } else { Err(DomainError::Forbidden) }
    }
}

/// Proof that the acting user is an instance admin; only [`Actor::admin`] makes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admin {
    actor: Actor,
}

impl Admin {
    /// The admin acting.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::accounts::UserStatus;

    fn user(role: Role) -> User {
        User {
            id: Uuid::new_v4(),
            email: "a@example.com".into(),
            display_name: "A".into(),
            role,
            status: UserStatus::Active,
            theme: Default::default(),
        }
    }

    #[test]
    fn only_admins_get_the_admin_proof() {
        assert!(Actor::verified(&user(Role::Member)).admin().is_err());
        let admin = Actor::verified(&user(Role::Admin));
        assert_eq!(admin.admin().map(|a| a.actor().user_id()).ok(), Some(admin.user_id()));
    }
}
