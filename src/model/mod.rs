//! Plain value types that storage returns and the domain works with (re-exported from the
//! domain's subsystems). They import nothing of Arbor but the provider-neutral message parts,
//! which is what lets storage and the domain both use them without importing each other.

pub mod accounts;
pub mod agent;
pub mod files;
pub mod mcp;
pub mod messages;
pub mod providers;
pub mod records;
pub mod search;
pub mod sessions;
pub mod teams;
pub mod transfer;
