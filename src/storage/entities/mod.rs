//! SeaORM entities: the shape of each table, nothing else. Queries live in `repos`.
pub mod auth_session;
pub mod chat_session;
pub mod message;
pub mod run;
pub mod user;
pub mod workspace;
