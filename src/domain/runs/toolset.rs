//! The tools a run offers: the built-in ones its session and the server allow, made once per
//! combination, and the MCP servers' tools its member and workspace may use.

use std::sync::Arc;

use crate::domain::agent::{self, OfferedTool};
use crate::domain::providers::ResolvedModel;
use crate::domain::runs::{Job, RunEngine};
use crate::domain::sessions::ChatSession;

/// The built-in tool lists, one slot for each combination of folders exposed, a shell that can
/// run, and recall (search and files) being there.
#[derive(Default)]
pub(super) struct ToolSets([std::sync::OnceLock<Arc<Vec<OfferedTool>>>; 8]);

impl RunEngine {
    /// The tools a session's runs offer this model.
    pub(super) fn offered_tools(
        &self,
        session: &ChatSession,
        model: &ResolvedModel,
    ) -> Arc<Vec<OfferedTool>> {
        if !model.info.tools {
            return Arc::default();
        }
        // Folders are resolved (and checked) when a tool runs.
        let has_roots = !session.exposed_roots.is_empty();
        let shell = self.agent_settings.shell_available();
        let recall = self.search.is_some() && self.files.is_some();
        let slot =
            &self.tool_sets.0[usize::from(has_roots) | usize::from(shell) << 1 | usize::from(recall) << 2];
        slot.get_or_init(|| {
            let mut tools = agent::toolbox(has_roots, shell);
            if recall {
                tools.extend(agent::memory_tools());
            }
            tools.extend(agent::memory::tools());
            tools.extend(super::tasks::task_tools());
            Arc::new(tools)
        })
        .clone()
    }

    /// Adds the tools of the MCP servers the user may use (starting them on first use), when
    /// the model takes tools at all.
    pub(super) async fn add_mcp_tools(&self, job: &mut Job) {
        let (Some(mcp), false) = (&self.mcp, job.tools.is_empty()) else { return };
        // The servers attached to the run's workspace come too (whoever started the run).
        let extra = mcp.tools_in(job.owner_id, Some(job.workspace_id)).await;
        if extra.is_empty() {
            return;
        }
        let mut tools: Vec<OfferedTool> = job.tools.as_ref().clone();
        for t in extra {
            // A server's tool never shadows another tool: the first of a name wins.
            if !tools.iter().any(|x| x.spec.name == t.spec.name) {
                tools.push(t);
            }
        }
        job.request.tools = tools.iter().map(|t| t.spec.clone()).collect();
        job.tools = Arc::new(tools);
    }
}
