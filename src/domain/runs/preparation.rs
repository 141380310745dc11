//! What a reply needs before it starts: its model (chosen and admitted against quotas and
//! rate limits), its system prompt, and the files its context sends.

use uuid::Uuid;

use super::{RunEngine, context};
use crate::domain::accounts::Actor;
use crate::domain::providers::ResolvedModel;
use crate::domain::sessions::tree::{Message, Role};
use crate::domain::sessions::{self, ChatSession, prompt};
use crate::domain::{DomainError, DomainResult};
use crate::providers::types::Part;

/// What is known of the files attached in a session before its reply starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Files {
    /// Some may be: the context's messages are looked up.
    Look,
    /// None is attached to any message of the session (its submit read so): nothing to look up.
    NoneAttached,
}

/// What a request carries beside the path (see [`RunEngine::supplements`]).
pub(super) struct Supplements {
    /// The parts standing for the files attached to messages, by message id.
    pub(super) attachments: std::collections::HashMap<Uuid, Vec<Part>>,
    /// The files in context.
    pub(super) files: Vec<super::ambient::AmbientFile>,
}

impl RunEngine {
    /// What a request carries beside the path: the files attached to its messages and the
    /// files in context (read from disk now).
    pub(super) async fn supplements(
        &self,
        session: &ChatSession,
        path: &[Message],
        model: &ResolvedModel,
        files: Files,
    ) -> Supplements {
        Supplements {
            attachments: match files {
                Files::Look => self.attachment_parts(path, model).await,
                Files::NoneAttached => Default::default(),
            },
            files: self.ambient_files(session, path).await,
        }
    }

    /// The parts standing for the files attached to the user messages of `path` that its
    /// context sends (none before a summary, a clear or a `/clearblobs`).
    async fn attachment_parts(
        &self,
        path: &[Message],
        model: &ResolvedModel,
    ) -> std::collections::HashMap<Uuid, Vec<Part>> {
        let Some(files) = &self.files else { return Default::default() };
        let files_from = context::window(path).files_from;
        let sent = path.get(files_from..).unwrap_or_default();
        let asked: Vec<Uuid> = sent.iter().filter(|m| m.role == Role::User).map(|m| m.id).collect();
        // The images an image model answered with are named to the model (so that it knows
        // of them, and can give them to `generate_image` to edit).
        let answers: Vec<Uuid> = sent.iter().filter(|m| m.role == Role::Assistant).map(|m| m.id).collect();
        // PDFs go as documents to the three APIs that read them, for models that see images.
        let documents = model.info.vision && model.kind != crate::config::ProviderKind::OpenAiCompatible;
        let (mut parts, made) =
            match files.provider_parts(&asked, &answers, model.info.vision, documents).await {
                Ok(found) => found,
                Err(e) => {
                    tracing::warn!(error = %e, "attachments could not be read for a request");
                    Default::default()
                }
            };
        for (id, views) in made {
            let names: Vec<&str> = views.iter().map(|v| v.name.as_str()).collect();
            let text = format!("[Images made for the user: {}]", names.join(", "));
            parts.entry(id).or_default().push(Part::Text { text });
        }
        parts
    }

    /// The model a session's next reply uses: the given one, the session's, the workspace's, or
    /// the instance default.
    pub(super) async fn pick_model(
        &self,
        actor: &Actor,
        session: &ChatSession,
        asked: Option<&str>,
    ) -> DomainResult<String> {
        if let Some(m) = asked.map(str::trim).filter(|m| !m.is_empty()) {
            return Ok(m.to_string());
        }
        if let Some(m) = session.model.clone() {
            return Ok(m);
        }
        let (workspace, _) = self.sessions.view_workspace(actor, session.workspace_id).await?;
        if let Some(m) = workspace.default_model {
            return Ok(m);
        }
        self.providers.default_model(actor).await.ok_or_else(|| {
            DomainError::Invalid("No model is available yet: ask an admin to configure a provider.".into())
        })
    }

    /// Checks the actor's quota, then resolves the model (counting it against the provider's
    /// rate limits): nothing is written when either says no.
    pub(super) async fn admit(
        &self,
        actor: &Actor,
        session: &ChatSession,
        reference: &str,
    ) -> DomainResult<ResolvedModel> {
        self.quotas.check(actor.user_id()).await?;
        let key = self.workspace_key(actor, session).await?;
        self.providers.resolve_in(actor, reference, key).await
    }

    /// What is in force for `reference` in `session` as the actor's runs there would see it
    /// (their own keys and the key attached to the workspace counted), for the context gauge.
    pub async fn model_info(
        &self,
        actor: &Actor,
        session: &ChatSession,
        reference: &str,
    ) -> Option<crate::providers::catalog::ModelInfo> {
        let key = self.workspace_key(actor, session).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "could not read the workspace's key");
            None
        });
        self.providers.model_info(actor, reference, key).await
    }

    /// The key the workspace's owner attached to the session's workspace, if any: runs in it
    /// use that key for its provider, whoever starts them.
    pub(super) async fn workspace_key(
        &self,
        actor: &Actor,
        session: &ChatSession,
    ) -> DomainResult<Option<crate::vault::store::SecretMeta>> {
        let (workspace, _) = self.sessions.view_workspace(actor, session.workspace_id).await?;
        self.sessions.attached_key(&workspace).await
    }

    /// The session's system prompt, rendered for this moment and model; a template error is
    /// the user's to fix, so it is shown with its line.
    pub async fn system_prompt(
        &self,
        actor: &Actor,
        session: &ChatSession,
        model: &str,
    ) -> DomainResult<Option<String>> {
        let (workspace, _) = self.sessions.view_workspace(actor, session.workspace_id).await?;
        let rendered = match prompt::template_for(&workspace, session) {
            Some(template) => self.render_prompt(actor, &workspace, session, template, model).await,
            // Without a prompt of the user's, the exposed folders' instruction files still count
            // (none without folders). That template is Arbor's own, so it renders here, not in
            // a child process: every turn of most sessions would pay a process start otherwise.
            None if session.exposed_roots.is_empty() => return Ok(None),
            None => self
                .read_vars(String::new(), String::new(), &workspace, session, model)
                .await
                .and_then(|vars| prompt::render_builtin(&vars)),
        };
        let rendered = rendered.map_err(|e| {
            DomainError::Invalid(format!(
                "The system prompt has an error ({e}): fix it in the session settings."
            ))
        })?;
        Ok(Some(rendered).filter(|p| !p.trim().is_empty()))
    }

    /// The system prompt a session's settings form would give, for its preview: the form's
    /// template (else the workspace's) rendered for the form's model (else the member's default)
    /// and folders. A template that cannot be rendered is the inner error, said on the page.
    pub async fn preview_prompt(
        &self,
        actor: &Actor,
        session_id: Uuid,
        form: &sessions::SessionForm,
    ) -> DomainResult<Result<String, crate::prompting::TemplateError>> {
        let session = self.sessions.get_session(actor, session_id).await?;
        let (workspace, _) = self.sessions.view_workspace(actor, session.workspace_id).await?;
        let mut probe = session.clone();
        probe.exposed_roots = sessions::parse_roots(&form.exposed_roots).unwrap_or(session.exposed_roots);
        let template = match form.system_prompt.trim() {
            "" => workspace.system_prompt.clone().unwrap_or_default(),
            t => t.to_string(),
        };
        if template.chars().count() > sessions::MAX_PROMPT_CHARS {
            let message =
                format!("The system prompt is longer than {} characters.", sessions::MAX_PROMPT_CHARS);
            return Ok(Err(crate::prompting::TemplateError { line: None, message }));
        }
        let model = match form.model.trim() {
            "" => self.providers.default_model(actor).await.unwrap_or_default(),
            m => m.to_string(),
        };
        Ok(self.render_prompt(actor, &workspace, &probe, &template, &model).await)
    }

    /// Renders a template as the system prompt of this session would be (the settings'
    /// "Preview"), off the async threads.
    pub async fn render_prompt(
        &self,
        actor: &Actor,
        workspace: &sessions::Workspace,
        session: &ChatSession,
        template: &str,
        model: &str,
    ) -> Result<String, crate::prompting::TemplateError> {
        let user = crate::storage::repos::users::find(&self.db, actor.user_id()).await.ok().flatten();
        let (name, email) = user.map(|u| (u.display_name, u.email)).unwrap_or_default();
        let memory = self.agent.memory_prompt_vars(actor, workspace.id).await;
        let mut vars = self.read_vars(name, email, workspace, session, model).await?;
        vars.memory = memory;
        prompt::render(template, &vars).await
    }

    /// A prompt's variables for this session and model, off the async threads (reading the
    /// instruction files touches the disk).
    async fn read_vars(
        &self,
        name: String,
        email: String,
        workspace: &sessions::Workspace,
        session: &ChatSession,
        model: &str,
    ) -> Result<prompt::PromptVars, crate::prompting::TemplateError> {
        let data_dir = self.data_dir.clone();
        let (workspace, session, model) = (workspace.clone(), session.clone(), model.to_string());
        tokio::task::spawn_blocking(move || {
            prompt::vars(&data_dir, &name, &email, &workspace, &session, &model)
        })
        .await
        .map_err(|e| crate::prompting::TemplateError {
            line: None,
            message: format!("rendering failed: {e}"),
        })
    }
}
