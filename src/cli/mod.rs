//! The command line's longer commands, one file per group (`main.rs` parses and dispatches).

pub(crate) mod backup;
pub(crate) mod maintenance;
pub(crate) mod vault;
