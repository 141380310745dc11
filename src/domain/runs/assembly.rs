//! How the run engine is put together: what it is built over, the parts it is given at start
//! (quota holds, lease, search, blob store, file limits, MCP, agent settings), and the few
//! accessors other subsystems read.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::{Pacing, RunEngine};
use crate::domain::admin::quotas::QuotaGate;
use crate::domain::agent::AgentSettings;
use crate::domain::providers::{Providers, ResolvedModel};
use crate::domain::sessions;
use crate::events::RunRegistry;
use crate::providers::types::ChatRequest;
use crate::storage::Db;

impl RunEngine {
    /// An engine over the given storage, registry and providers.
    pub fn new(db: Db, registry: RunRegistry, providers: Arc<Providers>, pacing: Pacing) -> RunEngine {
        RunEngine {
            sessions: sessions::Sessions::new(db.clone()),
            agent: crate::domain::agent::Agent::new(db.clone()),
            quotas: QuotaGate::new(db.clone(), Default::default()),
            db,
            registry,
            providers,
            pacing,
            data_dir: Arc::new("data".into()),
            infer_titles: true,
            agent_settings: Arc::new(AgentSettings::defaults()),
            mcp: None,
            files: None,
            search: None,
            lease: None,
            tool_sets: Default::default(),
        }
    }

    /// The quota gate shared with the gateway (its holds, through Redis, with the other
    /// instances).
    #[must_use]
    pub fn with_quotas(mut self, quotas: QuotaGate) -> RunEngine {
        self.quotas = quotas;
        self
    }

    /// The quota gate of running calls (the gateway's calls pass the same one).
    pub fn quota_gate(&self) -> &QuotaGate {
        &self.quotas
    }

    /// Admits one model call of `owner`'s against their quota, holding its estimate until the
    /// hold is dropped (after its usage row); the refusal in the person's terms.
    pub(super) async fn hold_quota(
        &self,
        owner: Uuid,
        request: &ChatRequest,
        model: &ResolvedModel,
    ) -> Result<crate::domain::admin::quota_holds::QuotaHold, String> {
        use crate::domain::admin::quota_holds::Estimate;
        self.quotas.admit(owner, || Estimate::of(request, &model.info)).await.map_err(|e| e.to_string())
    }

    /// Other instances share the database: this one holds a lease of `lease` (see `lease.rs`).
    #[must_use]
    pub fn with_lease(mut self, lease: Duration) -> RunEngine {
        self.lease = Some(lease);
        self
    }

    /// Chat search, for the agent's `search_chat`.
    #[must_use]
    pub fn with_search(mut self, search: std::sync::Arc<crate::domain::search::SearchService>) -> RunEngine {
        self.search = Some(search);
        self
    }

    /// Attached files: sent to models, found for `recall`, and generated images stored (held
    /// to the limits and storage quota of uploads). Without them a run has no file tools.
    #[must_use]
    pub fn with_files(mut self, files: crate::domain::files::Files) -> RunEngine {
        self.files = Some(files);
        self
    }

    /// The largest file a member may keep (a generated image's limit too).
    pub(super) fn file_limit(&self) -> u64 {
        match &self.files {
            Some(files) => files.settings().max_file_bytes,
            None => crate::domain::files::FileSettings::default().max_file_bytes,
        }
    }

    /// The MCP servers the agent may use.
    #[must_use]
    pub fn with_mcp(mut self, mcp: crate::domain::mcp::runtime::SharedMcp) -> RunEngine {
        self.mcp = Some(mcp);
        self
    }

    /// Stops every MCP server (at shutdown).
    pub async fn shutdown_mcp(&self) {
        if let Some(mcp) = &self.mcp {
            mcp.shutdown().await;
        }
    }

    /// The MCP runtime, if any.
    pub fn mcp(&self) -> Option<&crate::domain::mcp::runtime::SharedMcp> {
        self.mcp.as_ref()
    }

    /// The agent's settings (tools, limits, sandbox).
    #[must_use]
    pub fn with_agent(mut self, settings: AgentSettings) -> RunEngine {
        self.agent_settings = Arc::new(settings);
        self
    }

    /// Whether first exchanges get a proposed title.
    #[must_use]
    pub fn with_title_inference(mut self, on: bool) -> RunEngine {
        self.infer_titles = on;
        self
    }

    /// Where workspace folders live (instruction files for system prompts are read there).
    #[must_use]
    pub fn with_data_dir(mut self, data_dir: std::path::PathBuf) -> RunEngine {
        self.data_dir = Arc::new(data_dir);
        self
    }

    /// The providers registry.
    pub fn providers(&self) -> &Arc<Providers> {
        &self.providers
    }

    /// Whether an answer is being written in the session now (on this instance).
    pub fn is_running(&self, session_id: Uuid) -> bool {
        self.registry.is_active(session_id)
    }
}
