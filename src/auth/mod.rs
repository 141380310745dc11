//! Authentication: browser sessions now; OIDC, local accounts and API tokens build on it.
pub mod sessions;
