//! Queries, one module per area. Each maps rows to domain types at the boundary.
pub mod agent;
pub mod audit;
pub mod auth_sessions;
pub mod chat;
pub mod files;
pub mod invitations;
pub mod login_flows;
pub mod messages;
pub mod providers;
pub mod setup_tokens;
pub mod usage;
pub mod users;
