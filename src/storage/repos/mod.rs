//! Queries, one module per area. Each maps rows to domain types at the boundary.
pub mod auth_sessions;
pub mod chat;
pub mod invitations;
pub mod login_flows;
pub mod messages;
pub mod setup_tokens;
pub mod users;
