//! The system prompt: a template rendered with who, when, where and which model, plus the
//! instruction files of the exposed folders.

use std::path::Path;

use serde::Serialize;

use crate::domain::sessions::{ChatSession, Workspace};
use crate::prompting::{self, InstructionFile, TemplateError};

/// The variables a system prompt template sees.
#[derive(Debug, Clone, Serialize)]
pub struct PromptVars {
    /// `name`, `email`.
    pub user: UserVars,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// `HH:MM`.
    pub time: String,
    /// The server's UTC offset, e.g. `+01:00`.
    pub timezone: String,
    /// `name`.
    pub workspace: NameVar,
    /// `name`.
    pub session: NameVar,
    /// `provider/model`.
    pub model: String,
    /// Exposed folders, relative to the workspace folder.
    pub roots: Vec<String>,
    /// Instruction files found at the top of the exposed folders.
    pub instructions: Vec<InstructionFile>,
    /// `member`, `workspace`: what the agent remembers (empty when nothing).
    pub memory: MemoryVars,
}

/// The member's and the workspace's memory, as a prompt sees them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MemoryVars {
    /// The member's own memory (every workspace).
    pub member: String,
    /// This workspace's memory.
    pub workspace: String,
}

/// The user, as a prompt names them.
#[derive(Debug, Clone, Serialize)]
pub struct UserVars {
    /// Display name.
    pub name: String,
    /// Email address.
    pub email: String,
}

/// Something with a name.
#[derive(Debug, Clone, Serialize)]
pub struct NameVar {
    /// The name.
    pub name: String,
}

/// Names of the variables, for the settings form's help text.
pub const VARIABLES: &str = "user.name, user.email, date, time, timezone, workspace.name, session.name, model, \
roots, instructions (each with path and content), memory.member, memory.workspace";

/// Gathers the variables for one session at this moment.
pub fn vars(
    data_dir: &Path,
    user_name: &str,
    user_email: &str,
    workspace: &Workspace,
    session: &ChatSession,
    model: &str,
) -> PromptVars {
    let now = chrono::Local::now();
    let folder = prompting::workspace_dir(data_dir, workspace.id);
    PromptVars {
        user: UserVars { name: user_name.into(), email: user_email.into() },
        date: now.format("%Y-%m-%d").to_string(),
        time: now.format("%H:%M").to_string(),
        timezone: now.format("%:z").to_string(),
        workspace: NameVar { name: workspace.name.clone() },
        session: NameVar { name: session.title.clone() },
        model: model.into(),
        roots: session.exposed_roots.clone(),
        instructions: prompting::instruction_files(&folder, &session.exposed_roots),
        memory: MemoryVars::default(),
    }
}

/// The system prompt of a session without one: the instruction files of its exposed folders.
pub const INSTRUCTIONS_ONLY: &str = "{% if roots %}Folders you can use with the file and shell tools \
(paths start with one of them): {{ roots | join(sep=\", \") }}.\n\n{% endif %}\
{% for f in instructions %}Instructions from {{ f.path }}:\n{{ f.content }}\n\n{% endfor %}";

/// The template that applies: the session's, else the workspace's.
pub fn template_for<'a>(workspace: &'a Workspace, session: &'a ChatSession) -> Option<&'a str> {
    session.system_prompt.as_deref().or(workspace.system_prompt.as_deref()).filter(|t| !t.trim().is_empty())
}

/// Renders a template with the variables.
pub async fn render(template: &str, vars: &PromptVars) -> Result<String, TemplateError> {
    prompting::render(template, vars).await
}

/// Renders [`INSTRUCTIONS_ONLY`] with the variables in this process: the template is Arbor's
/// own and everything it loops over is bounded (the folders a session may expose, each
/// instruction file read up to its cap), so it needs no child process.
pub fn render_builtin(vars: &PromptVars) -> Result<String, TemplateError> {
    prompting::render_in_process(INSTRUCTIONS_ONLY, vars)
}

/// Checks a template as it would render with sample values.
pub async fn check(template: &str) -> Result<(), TemplateError> {
    prompting::render(template, &sample_vars()).await.map(|_| ())
}

/// The values a template is checked with when it is saved.
fn sample_vars() -> PromptVars {
    PromptVars {
        user: UserVars { name: "Ada".into(), email: "ada@example.com".into() },
        date: "2026-01-01".into(),
        time: "12:00".into(),
        timezone: "+00:00".into(),
        workspace: NameVar { name: "Workspace".into() },
        session: NameVar { name: "Session".into() },
        model: "provider/model".into(),
        roots: vec!["project".into()],
        instructions: vec![InstructionFile { path: "project/AGENTS.md".into(), content: "…".into() }],
        memory: MemoryVars { member: "Prefers short answers.".into(), workspace: "Uses Rust.".into() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_variable_renders() {
        let t = "{{ user.name }} {{ user.email }} {{ date }} {{ time }} {{ timezone }} {{ workspace.name }} \
                 {{ session.name }} {{ model }} {{ roots | join(sep=\",\") }}\
                 {% for f in instructions %} {{ f.path }}={{ f.content }}{% endfor %} {{ memory.member }} {{ memory.workspace }}";
        // The server renders in a child process; the tests render here.
        prompting::render_in_process(t, &sample_vars()).unwrap();
        let ws = Workspace {
            id: uuid::Uuid::nil(),
            owner_id: uuid::Uuid::nil(),
            name: "Research".into(),
            system_prompt: None,
            default_model: None,
            approval_mode: "suggest".into(),
            infer_titles: true,
            compact_at_percent: None,
            key_secret_id: None,
        };
        let session = ChatSession {
            id: uuid::Uuid::nil(),
            workspace_id: ws.id,
            owner_id: ws.owner_id,
            title: "Plan".into(),
            title_user_set: false,
            system_prompt: Some(t.into()),
            model: None,
            params: serde_json::json!({}),
            approval_mode: None,
            exposed_roots: vec![],
            active_root_id: None,
            archived: false,
            env_note: None,
            updated_at: chrono::Utc::now(),
        };
        let v = vars(Path::new("/nonexistent"), "Ada", "ada@example.com", &ws, &session, "openai/gpt-4o");
        let out = prompting::render_in_process(template_for(&ws, &session).unwrap(), &v).unwrap();
        assert!(out.starts_with("Ada ada@example.com 20"), "{out}");
        assert!(out.contains(" Research Plan openai/gpt-4o"), "{out}");
        assert_eq!(v.date.len(), 10);
        assert!(v.timezone.starts_with('+') || v.timezone.starts_with('-'));
        // The workspace's template applies when the session has none.
        let mut plain = session.clone();
        plain.system_prompt = None;
        assert_eq!(template_for(&ws, &plain), None);
        let ws2 = Workspace { system_prompt: Some("Be brief.".into()), ..ws };
        assert_eq!(template_for(&ws2, &plain), Some("Be brief."));
    }
}
