//! Arbor's integration tests: one binary, every test on its own fresh database.
//! Runs on SQLite; with `ARBOR_TEST_DATABASE_URL` set, on a fresh PostgreSQL database per test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod a11y;
mod accounts;
mod admin;
mod agent;
mod ambient;
mod authz;
mod backup;
mod canary;
mod capabilities;
mod cli;
mod clients;
mod cluster;
mod context;
mod crash;
mod csp;
mod deploy;
mod e2e;
mod e2e_context;
mod e2e_team;
mod e2e_thread;
mod events;
mod files;
mod gateway;
mod gateway_surfaces;
mod groups;
mod images;
mod injection;
mod invitations;
mod limits;
mod links;
mod malformed;
mod mcp_trust;
mod metrics;
mod migrations;
mod oidc;
mod oidc_real;
mod own_models;
mod providers;
mod recovery;
mod runs;
mod scim;
mod search;
mod sessions_api;
mod settings;
mod shares;
mod tasks;
mod transfer;
mod tree;
mod vault;
mod web_basics;
mod xss;
