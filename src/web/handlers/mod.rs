//! HTTP handlers, one file per area: extract, authorize, call one service, render.
pub mod account;
pub mod admin;
pub mod agent;
pub mod api;
pub mod assets;
pub mod auth;
pub mod events;
pub mod files;
pub mod health;
pub mod home;
pub mod invitations;
pub mod memory;
pub mod oidc;
pub mod search;
pub mod sessions;
pub mod settings;
pub mod workspaces;
