//! Arbor's schema migrations: append-only, one change per file, each reversible.
pub use sea_orm_migration::prelude::*;

mod m20261123_000001_base_tables;
mod m20261123_000002_sign_in;
mod m20261123_000003_streaming;
mod m20261123_000004_vault;
mod m20261123_000005_admin;
mod m20261123_000006_mcp_servers;
mod m20261123_000007_gateway;
mod m20261123_000008_agent;
mod m20261123_000009_host_roots;
mod m20261123_000010_blobs_search;
mod m20261126_000011_unverified_email;
mod m20261126_000012_stored_responses;
mod m20261126_000013_model_overrides;
mod m20261126_000014_user_theme;
mod m20261126_000015_tool_refusals;
mod m20261126_000016_workspace_compaction;
mod m20261126_000017_memories;
mod m20261126_000018_session_files;
mod m20261126_000019_groups;
mod m20261126_000020_workspace_shares;
mod m20261126_000021_share_links;
mod m20261126_000022_scim;
mod m20261126_000023_group_settings;
mod m20261126_000024_mcp_server_groups;
mod m20261126_000025_workspace_key;
mod m20261126_000026_prompt_templates;
mod m20261126_000027_mcp_server_workspace;
mod m20261126_000028_session_events;
mod m20261127_000029_instances;
mod m20261127_000030_search_tombstones;
mod m20261127_000031_message_tokens;
mod m20261127_000032_member_model_overrides;
mod m20261127_000033_tool_call_description;
mod m20261207_000034_attachments_session_index;

/// The ordered list of every schema change.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261123_000001_base_tables::Migration),
            Box::new(m20261123_000002_sign_in::Migration),
            Box::new(m20261123_000003_streaming::Migration),
            Box::new(m20261123_000004_vault::Migration),
            Box::new(m20261123_000005_admin::Migration),
            Box::new(m20261123_000006_mcp_servers::Migration),
            Box::new(m20261123_000007_gateway::Migration),
            Box::new(m20261123_000008_agent::Migration),
            Box::new(m20261123_000009_host_roots::Migration),
            Box::new(m20261123_000010_blobs_search::Migration),
            Box::new(m20261126_000011_unverified_email::Migration),
            Box::new(m20261126_000012_stored_responses::Migration),
            Box::new(m20261126_000013_model_overrides::Migration),
            Box::new(m20261126_000014_user_theme::Migration),
            Box::new(m20261126_000015_tool_refusals::Migration),
            Box::new(m20261126_000016_workspace_compaction::Migration),
            Box::new(m20261126_000017_memories::Migration),
            Box::new(m20261126_000018_session_files::Migration),
            Box::new(m20261126_000019_groups::Migration),
            Box::new(m20261126_000020_workspace_shares::Migration),
            Box::new(m20261126_000021_share_links::Migration),
            Box::new(m20261126_000022_scim::Migration),
            Box::new(m20261126_000023_group_settings::Migration),
            Box::new(m20261126_000024_mcp_server_groups::Migration),
            Box::new(m20261126_000025_workspace_key::Migration),
            Box::new(m20261126_000026_prompt_templates::Migration),
            Box::new(m20261126_000027_mcp_server_workspace::Migration),
            Box::new(m20261126_000028_session_events::Migration),
            Box::new(m20261127_000029_instances::Migration),
            Box::new(m20261127_000030_search_tombstones::Migration),
            Box::new(m20261127_000031_message_tokens::Migration),
            Box::new(m20261127_000032_member_model_overrides::Migration),
            Box::new(m20261127_000033_tool_call_description::Migration),
            Box::new(m20261207_000034_attachments_session_index::Migration),
        ]
    }
}
pub use sea_orm_migration::MigrationStatus;
