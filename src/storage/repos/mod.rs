//! Queries, one module per area. Each maps rows to domain types at the boundary.
pub mod agent;
pub mod aliases;
pub mod api_tokens;
pub mod audit;
pub mod auth_sessions;
pub mod chat;
pub mod files;
pub mod invitations;
pub mod login_flows;
pub mod mcp_servers;
pub mod messages;
pub mod providers;
pub mod quotas;
pub mod search;
pub mod setup_tokens;
pub mod usage;
pub mod users;
