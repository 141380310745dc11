//! The member's settings pages and a workspace's page: what each shows, in one call.

use uuid::Uuid;

use super::{HomePage, Pages};
use crate::domain::accounts::Actor;
use crate::domain::mcp::servers::OwnServer;
use crate::domain::mcp::sharing::SharedServer;
use crate::domain::providers::ModelChoice;
use crate::domain::providers::aliases::Alias;
use crate::domain::providers::user_keys::KeyRow;
use crate::domain::search::ResultsPage;
use crate::domain::sessions::access::ShareRole;
use crate::domain::sessions::{ChatSession, PromptTemplate, SidebarWorkspace, Workspace, WorkspaceContents};
use crate::domain::teams::Group;
use crate::domain::transfer::ImportJob;
use crate::domain::{DomainError, DomainResult};
use crate::model::teams::Share;

/// `/settings`: the member's own keys, the models they may choose and their default, and their
/// groups (a key can be shared with one).
pub struct KeysPage {
    /// The member's keys (never their values).
    pub keys: Vec<KeyRow>,
    /// Models the member may choose.
    pub models: Vec<ModelChoice>,
    /// The member's default model.
    pub default_model: Option<String>,
    /// The member's groups.
    pub groups: Vec<Group>,
}

/// `/settings/mcp`: the member's own MCP servers and those shared with them.
pub struct McpPage {
    /// The member's own servers.
    pub servers: Vec<OwnServer>,
    /// Servers members of their groups shared with them.
    pub shared: Vec<SharedServer>,
    /// The member's groups (a server can be shared with one).
    pub groups: Vec<Group>,
    /// The member's workspaces (a server can be limited to some).
    pub workspaces: Vec<Workspace>,
}

/// `/settings/prompts`: the member's prompt templates and those shared with them.
pub struct PromptsPage {
    /// The member's own templates.
    pub templates: Vec<PromptTemplate>,
    /// Templates shared with one of their groups.
    pub shared: Vec<PromptTemplate>,
    /// The member's groups (a template can be shared with one).
    pub groups: Vec<Group>,
}

/// `/settings/aliases`: the member's model aliases and the models they can name.
pub struct AliasesPage {
    /// The member's aliases.
    pub aliases: Vec<Alias>,
    /// Models the member may choose.
    pub models: Vec<ModelChoice>,
}

/// `/w/{id}`: a workspace's settings, archived sessions and what deleting it would remove.
pub struct WorkspacePage {
    /// The workspace.
    pub workspace: Workspace,
    /// What the reader may do in it.
    pub role: ShareRole,
    /// What deleting it would remove.
    pub contents: WorkspaceContents,
    /// Its archived sessions (the first page).
    pub archived: Vec<ChatSession>,
    /// Its shares, for its owner.
    pub shares: Option<Vec<Share>>,
    /// The owner's keys, one of which may be attached to it (only the owner's: the keys are
    /// theirs).
    pub owner_keys: Option<Vec<KeyRow>>,
    /// Models the member may choose.
    pub models: Vec<ModelChoice>,
    /// The sidebar.
    pub sidebar: Vec<SidebarWorkspace>,
}

impl Pages {
    /// The keys page.
    pub async fn keys(&self, actor: &Actor) -> DomainResult<KeysPage> {
        Ok(KeysPage {
            keys: self.keys.list(actor).await?,
            models: self.models(actor).await,
            default_model: self.keys.default_model(actor).await?,
            groups: self.teams.groups.mine(actor).await?,
        })
    }

    /// The MCP servers page.
    pub async fn mcp(&self, actor: &Actor) -> DomainResult<McpPage> {
        Ok(McpPage {
            servers: self.mcp.list_own(actor).await?,
            shared: self.mcp.shared_with_me(actor).await?,
            groups: self.teams.groups.mine(actor).await?,
            workspaces: self.sessions.list_workspaces(actor).await?,
        })
    }

    /// The prompt templates page.
    pub async fn prompts(&self, actor: &Actor) -> DomainResult<PromptsPage> {
        Ok(PromptsPage {
            templates: self.sessions.my_templates(actor).await?,
            shared: self.sessions.templates_shared_with_me(actor).await?,
            groups: self.teams.groups.mine(actor).await?,
        })
    }

    /// The aliases page.
    pub async fn aliases(&self, actor: &Actor) -> DomainResult<AliasesPage> {
        Ok(AliasesPage { aliases: self.aliases.list(actor).await?, models: self.models(actor).await })
    }

    /// A workspace's page.
    pub async fn workspace(&self, actor: &Actor, workspace_id: Uuid) -> DomainResult<WorkspacePage> {
        let (workspace, role) = self.sessions.view_workspace(actor, workspace_id).await?;
        let contents = self.sessions.workspace_contents(actor, workspace.id).await?;
        let (archived, _) = self.sessions.workspace_sessions(actor, workspace.id, true, 0).await?;
        let shares = match role {
            ShareRole::Owner => Some(self.teams.shares.list(actor, workspace.id).await?),
            _ => None,
        };
        let owner_keys = match workspace.owner_id == actor.user_id() {
            true => Some(self.keys.list(actor).await?),
            false => None,
        };
        Ok(WorkspacePage {
            role,
            contents,
            archived,
            shares,
            owner_keys,
            models: self.models(actor).await,
            sidebar: self.sidebar(actor, None).await,
            workspace,
        })
    }
}

/// `/settings/transfer`: the member's workspaces (to export one), their imports under way and
/// the largest archive they may import.
pub struct TransferPage {
    /// The member's workspaces.
    pub workspaces: Vec<Workspace>,
    /// Their imports, newest first.
    pub imports: Vec<ImportJob>,
    /// The largest archive an import takes, in bytes.
    pub max_upload: u64,
}

/// `/search`: the home page's composer and sidebar around a page of results.
pub struct SearchPage {
    /// The composer and the sidebar.
    pub home: HomePage,
    /// The member's workspaces, to search in one.
    pub workspaces: Vec<Workspace>,
    /// The results, when something was asked.
    pub found: Option<ResultsPage>,
    /// Why the query could not be run (safe to show).
    pub error: Option<String>,
}

/// What a search asks.
pub struct SearchAsk<'a> {
    /// The query as typed (blank: nothing asked).
    pub text: &'a str,
    /// Only in this workspace.
    pub workspace: Option<Uuid>,
    /// Which page of results, from 1.
    pub page: usize,
    /// Results per page.
    pub per_page: usize,
}

impl Pages {
    /// The transfer page.
    pub async fn transfer(&self, actor: &Actor) -> DomainResult<TransferPage> {
        Ok(TransferPage {
            workspaces: self.sessions.list_workspaces(actor).await?,
            imports: self.transfers.my_imports(actor),
            max_upload: self.transfers.max_upload(),
        })
    }

    /// What a search finds: the results when something was asked, or why the query could not
    /// be run (said where the results go, not as a failure). The sidebar's live list shows this
    /// alone.
    pub async fn search_results(
        &self,
        actor: &Actor,
        ask: &SearchAsk<'_>,
    ) -> DomainResult<(Option<ResultsPage>, Option<String>)> {
        match ask.text.trim() {
            "" => Ok((None, None)),
            text => match self.search.search(actor, text, ask.workspace, ask.page, ask.per_page).await {
                Ok(r) => Ok((Some(r), None)),
                Err(DomainError::Invalid(m)) => Ok((None, Some(m))),
                Err(e) => Err(e),
            },
        }
    }

    /// The search page: the results with the home page's composer and sidebar around them.
    pub async fn search(&self, actor: &Actor, ask: SearchAsk<'_>) -> DomainResult<SearchPage> {
        let (found, error) = self.search_results(actor, &ask).await?;
        Ok(SearchPage {
            home: self.home(actor, None).await?,
            workspaces: self.sessions.list_workspaces(actor).await?,
            found,
            error,
        })
    }
}
