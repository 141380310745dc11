//! MCP servers: their configuration (admins' and members' own) and running them for the agent.

pub mod runtime;
pub mod servers;
pub mod sharing;
