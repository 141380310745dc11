//! SeaORM entities: the shape of each table, nothing else. Queries live in `repos`.
pub mod audit_entry;
pub mod auth_session;
pub mod chat_session;
pub mod invitation;
pub mod login_flow;
pub mod message;
pub mod provider;
pub mod provider_key;
pub mod quota;
pub mod run;
pub mod setup_token;
pub mod usage;
pub mod user;
pub mod vault_key;
pub mod vault_meta;
pub mod vault_secret;
pub mod workspace;
