//! Authentication: browser sessions, local passwords, sign-in rate limits; OIDC builds on them.
pub mod oidc;
pub mod passwords;
pub mod ratelimit;
pub mod sessions;
