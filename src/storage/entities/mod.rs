//! SeaORM entities: the shape of each table, nothing else. Queries live in `repos`.
pub mod api_token;
pub mod approval_rule;
pub mod attachment;
pub mod audit_entry;
pub mod auth_session;
pub mod blob;
pub mod chat_session;
pub mod group;
pub mod group_member;
pub mod host_root;
pub mod index_state;
pub mod instance;
pub mod invitation;
pub mod login_flow;
pub mod mcp_server;
pub mod member_model_override;
pub mod memory;
pub mod message;
pub mod model_alias;
pub mod model_override;
pub mod prompt_template;
pub mod provider;
pub mod provider_key;
pub mod quota;
pub mod run;
pub mod search_tombstone;
pub mod session_event;
pub mod session_file;
pub mod setup_token;
pub mod share_link;
pub mod share_link_blob;
pub mod stored_response;
pub mod todo;
pub mod tool_call;
pub mod tool_refusal;
pub mod upload;
pub mod usage;
pub mod user;
pub mod vault_key;
pub mod vault_meta;
pub mod vault_secret;
pub mod workspace;
pub mod workspace_share;

/// A stored token count as the domain holds it; a value outside `u32` (never written by Arbor)
/// reads as unset.
pub(crate) fn tokens(v: Option<i64>) -> Option<u32> {
    v.and_then(|n| u32::try_from(n).ok())
}

/// The seven columns an admin's and a member's override rows share, read from row `$m` into a
/// `CapabilityOverride`, or (`set $m, $stated`) written from one into active model `$m`.
macro_rules! stated_columns {
    ($m:expr) => {
        $crate::model::providers::CapabilityOverride {
            tools: $m.tools,
            vision: $m.vision,
            reasoning: $m.reasoning,
            context_window: $crate::storage::entities::tokens($m.context_window),
            max_output: $crate::storage::entities::tokens($m.max_output),
            input_per_mtok: $m.input_per_mtok,
            output_per_mtok: $m.output_per_mtok,
        }
    };
    (set $m:ident, $stated:expr) => {
        let stated = $stated;
        $m.tools = sea_orm::Set(stated.tools);
        $m.vision = sea_orm::Set(stated.vision);
        $m.reasoning = sea_orm::Set(stated.reasoning);
        $m.context_window = sea_orm::Set(stated.context_window.map(i64::from));
        $m.max_output = sea_orm::Set(stated.max_output.map(i64::from));
        $m.input_per_mtok = sea_orm::Set(stated.input_per_mtok);
        $m.output_per_mtok = sea_orm::Set(stated.output_per_mtok);
    };
}
pub(crate) use stated_columns;
