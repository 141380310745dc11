//! The session page and what its composer and buttons post: send, stop, continue, retry.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use tera::Context;
use uuid::Uuid;

use crate::domain::runs::Started;
use crate::domain::runs::compaction::ContextCommand;
use crate::domain::sessions::tree::MessageKind;
use crate::domain::{DomainError, pages, sessions};
use crate::state::AppState;
use crate::web::client::see_other;
use crate::web::extractors::{AdminUser, CurrentUser};
use crate::web::render::{parse_id, render_to_string, signed_in};
use crate::web::session_page::*;
use crate::web::session_view;
use crate::web::{WebError, form, render};

/// `GET /s/{session_id}`: the conversation's active path, the composer and any live answer.
pub async fn show(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    // A message to show (a search hit, after `open` made its branch the active one). A GET
    // never changes anything: a message off the active path is simply not focused.
    let focus = match web::Query::<ShowQuery>::from_query(req.query_string()).ok().and_then(|q| q.at.clone())
    {
        Some(raw) => Some(parse_id(&raw)?),
        None => None,
    };
    let ctx = session_context_at(&state, &user, session_id, true, focus).await?;
    render::page(&state, &req, "pages/session.html", "partials/_session.html", ctx)
}

/// Query of the session page: `at` names a message to show (a search hit).
#[derive(Deserialize)]
pub struct ShowQuery {
    at: Option<String>,
}

/// Query of the "earlier messages" loader.
#[derive(Deserialize)]
pub struct OlderQuery {
    before: String,
}

/// `GET /s/{session_id}/older?before={message_id}`: the window of the active path before a message.
pub async fn older(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
    query: web::Query<OlderQuery>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    let before = parse_id(&query.before)?;
    let conv = state
        .sessions
        .conversation_window(&user.0.actor, session_id, Some(before), pages::THREAD_WINDOW)
        .await?;
    let window = pages::window_of(&conv, Some(before))?;
    let messages = session_view::thread_window(&conv, window.clone()).await?;
    let mut ctx = signed_in(&user);
    ctx.insert("session", &conv.session);
    ctx.insert("messages", &messages);
    ctx.insert("older_before", &pages::older_before(&conv, &window));
    ctx.insert("client_id", &new_client_id());
    let html = render_to_string(&state, "partials/_older.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// The composer's fields.
#[derive(Deserialize)]
pub struct ComposerForm {
    #[serde(default)]
    message: String,
    #[serde(default)]
    client_id: String,
    /// Uploaded files to attach: their ids, comma-separated.
    #[serde(default)]
    attachments: String,
    #[serde(default)]
    model: Option<String>,
    /// Where a new session starts (home composer only).
    #[serde(default)]
    workspace_id: Option<String>,
}

/// `POST /sessions`: a new session in the user's default workspace, started by its first
/// message; the browser goes to it.
pub async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    form: web::Form<ComposerForm>,
) -> Result<HttpResponse, WebError> {
    let workspace = match form.workspace_id.as_deref().filter(|w| !w.is_empty()) {
        Some(raw) => Some(parse_id(raw)?),
        None => None,
    };
    let started = state
        .engine
        .start_session(&user.0.actor, workspace, &form.message, &form.client_id, form.model.as_deref())
        .await;
    match started {
        Ok(id) => Ok(see_other(&req, &format!("/s/{id}"))),
        Err(e) => domain_to_composer(&state, e),
    }
}

/// Renders the given messages (and a fresh composer, out of band) as the answer to a post.
async fn turn_fragment(
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    started: &Started,
    with_composer: bool,
) -> Result<HttpResponse, WebError> {
    let turn = state.pages.turn(&user.0.actor, session_id, started, with_composer).await?;
    let mut shown = session_view::message_views(turn.messages).await?;
    files_into(&mut shown, &turn.files);
    let mut ctx = signed_in(user);
    access_into(&mut ctx, state, user, &turn.session, turn.role, &turn.selected_model);
    if with_composer {
        composer_into(&mut ctx, &turn.models);
    }
    ctx.insert("turn", &shown);
    ctx.insert("with_composer", &with_composer);
    let html = render_to_string(state, "partials/_turn.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// `POST /s/{session_id}/messages`: appends the message and starts the answer; returns both
/// (the answer as a live skeleton). The same client id twice yields one message and one run.
pub async fn send(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
    form: web::Form<ComposerForm>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    let actor = &user.0.actor;
    if let Some(ContextCommand::Task(goal)) = ContextCommand::parse(&form.message) {
        let model = form.model.as_deref();
        return match state.engine.start_task(actor, session_id, goal, &form.client_id, model).await {
            Ok(_) => session_with_notice(&state, &user, session_id, TASK_NOTICE).await,
            Err(e) => domain_to_composer(&state, e),
        };
    }
    if let Some(command) = ContextCommand::parse(&form.message) {
        return match state.engine.context_command(actor, session_id, command).await {
            Ok(boundary) => {
                session_with_notice(&state, &user, session_id, boundary_notice(boundary.kind)).await
            }
            Err(e) => domain_to_composer(&state, e),
        };
    }
    if let Some((expose, folder)) = root_command(&form.message) {
        return match state.sessions.change_root(actor, session_id, folder, expose).await {
            Ok((_, notice)) => session_with_notice(&state, &user, session_id, &notice).await,
            Err(e) => domain_to_composer(&state, e),
        };
    }
    let model = form.model.as_deref();
    let uploads = match crate::domain::files::parse_upload_ids(&form.attachments) {
        Ok(u) => u,
        Err(e) => return domain_to_composer(&state, e),
    };
    match state
        .engine
        .submit_with_files(actor, session_id, &form.message, &form.client_id, model, &uploads)
        .await
    {
        Ok(started) => turn_fragment(&state, &user, session_id, &started, true).await,
        Err(e) => domain_to_composer(&state, e),
    }
}

/// The whole session (swapped in for the composer's target) with a notice above the composer.
async fn session_with_notice(
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    notice: &str,
) -> Result<HttpResponse, WebError> {
    let mut ctx = session_context(state, user, session_id, false).await?;
    ctx.insert("composer_notice", notice);
    let html = render_to_string(state, "partials/_session.html", &ctx)?;
    let mut res = render::html_response(StatusCode::OK, html);
    render::retarget(&mut res, "#session", "outerHTML");
    Ok(res)
}

/// What the composer says once `/task` started a task.
const TASK_NOTICE: &str = "A task started: the model works on it now and ends it with a summary \
(or send /finish). After it, the conversation sees only the summary.";

/// What the composer says after a context command.
fn boundary_notice(kind: MessageKind) -> &'static str {
    match kind {
        MessageKind::Summary => {
            "The conversation so far was compressed into a summary: the next reply starts from it. \
             Open the summary to see what it replaced; choose the branch before it to undo."
        }
        MessageKind::Clear => "The context was cleared: the next reply sees nothing before this point.",
        MessageKind::TaskEnd => {
            "The task is finished: from here on the model sees its summary in place of its messages."
        }
        _ => "Files attached so far are no longer sent to the model.",
    }
}

/// `/expose folder` or `/unexpose folder` typed in the composer: (expose?, folder).
fn root_command(message: &str) -> Option<(bool, &str)> {
    let m = message.trim();
    for (word, expose) in [("/expose", true), ("/unexpose", false)] {
        if let Some(rest) = m.strip_prefix(word)
            && (rest.is_empty() || rest.starts_with(char::is_whitespace))
        {
            return Some((expose, rest.trim()));
        }
    }
    None
}

/// `POST /s/{session_id}/stop`: stops the live answer, keeping what was written.
pub async fn stop(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    state.engine.stop(&user.0.actor, session_id).await?;
    // The stream reports the end; nothing to swap here.
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /s/{session_id}/messages/{message_id}/continue`: resumes a cut-off answer.
pub async fn resume(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    let started = state.engine.resume(&user.0.actor, session_id, message_id).await?;
    turn_fragment(&state, &user, session_id, &started, false).await
}

/// `POST /s/{session_id}/messages/{message_id}/retry`: a new answer next to this one.
pub async fn retry(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    state.engine.retry(&user.0.actor, session_id, message_id).await?;
    session_fragment(&state, &user, session_id).await
}

/// `POST /admin/models/refresh`: forgets the discovered model lists, what providers said about
/// their models and the tool refusals they answered.
pub async fn refresh_models(state: web::Data<AppState>, _admin: AdminUser) -> Result<HttpResponse, WebError> {
    state.engine.providers().ask_providers_again().await?;
    Ok(HttpResponse::Ok().content_type("text/html; charset=utf-8").body(
        "<p class=\"flash\">Model lists and what providers say about their models (tool refusals included) will be fetched again.</p>",
    ))
}

/// The edit form of a user message.
#[derive(Deserialize)]
pub struct EditForm {
    message: String,
    #[serde(default)]
    client_id: String,
    #[serde(default)]
    model: Option<String>,
}

/// `POST /s/{session_id}/messages/{message_id}/edit`: the edited text becomes a new sibling of
/// the message, is answered, and the session shows the new branch (the old one stays).
pub async fn edit(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
    form: web::Form<EditForm>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    let actor = &user.0.actor;
    let model = form.model.as_deref();
    match state.engine.edit(actor, session_id, message_id, &form.message, &form.client_id, model).await {
        Ok(_) => session_fragment(&state, &user, session_id).await,
        Err(e) => domain_to_composer(&state, e),
    }
}

/// `POST /s/{session_id}/messages/{message_id}/select`: makes the path through this message the
/// active one ("‹ 2 / 3 ›" and the tree overview).
pub async fn select(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    state.sessions.select_message(&user.0.actor, session_id, message_id).await?;
    session_fragment(&state, &user, session_id).await
}

/// `POST /s/{session_id}/messages/{message_id}/rewind`: "Continue from here": the path ends at
/// this message, and the next one sent starts a new branch below it.
pub async fn rewind(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    state.sessions.continue_from(&user.0.actor, session_id, message_id).await?;
    session_fragment(&state, &user, session_id).await
}

/// `POST /s/{session_id}/messages/{message_id}/open`: a search hit was chosen: its branch
/// becomes the active path, and the browser goes to the page focused on it.
pub async fn open_message(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    state.sessions.select_message(&user.0.actor, session_id, message_id).await?;
    Ok(see_other(&req, &format!("/s/{session_id}?at={message_id}#m-{message_id}")))
}

/// `POST /s/{session_id}/messages/{message_id}/delete`: deletes the message and its branch.
pub async fn delete_message(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    match state.deletions.branch(&user.0.actor, session_id, message_id).await {
        Ok(_) => session_fragment(&state, &user, session_id).await,
        Err(e) => domain_to_composer(&state, e),
    }
}

/// `POST /s/{session_id}/settings`: model, generation settings, system prompt, exposed folders.
pub async fn save_settings(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
    form: web::Form<sessions::SessionForm>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    match state.sessions.update_session(&user.0.actor, session_id, &form).await {
        Ok(_) => session_fragment(&state, &user, session_id).await,
        Err(DomainError::Invalid(m)) => form::refused(&state, StatusCode::BAD_REQUEST, &m, "#settings-error"),
        Err(e) => Err(e.into()),
    }
}

/// `POST /s/{session_id}/prompt-preview`: the posted template rendered as this session's system
/// prompt would be; a template error is shown with its line.
pub async fn prompt_preview(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
    form: web::Form<sessions::SessionForm>,
) -> Result<HttpResponse, WebError> {
    let preview = state.engine.preview_prompt(&user.0.actor, parse_id(&path)?, &form).await?;
    let mut ctx = Context::new();
    match preview {
        Ok(text) => ctx.insert("preview", &text),
        Err(e) => {
            ctx.insert("error", &e.message);
            ctx.insert("error_line", &e.line);
        }
    }
    let html = render_to_string(&state, "partials/_prompt_preview.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// `GET /s/{session_id}/tree`: the tree overview, loaded when it is opened (a long session's
/// drawing would otherwise weigh on every page).
pub async fn tree(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    let overview = state.sessions.tree_overview(&user.0.actor, session_id).await?;
    let mut ctx = signed_in(&user);
    ctx.insert("overview", &overview);
    ctx.insert("session_id", &session_id);
    let html = render_to_string(&state, "partials/_tree.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// Most messages a side branch shows inline.
const SIDE_BRANCH_LIMIT: usize = 200;

/// `GET /s/{session_id}/messages/{message_id}/branch`: a side branch (a sub-agent's work) from
/// this message down, for its card.
pub async fn branch(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    let actor = &user.0.actor;
    let messages = state.sessions.branch_from(actor, session_id, message_id, SIDE_BRANCH_LIMIT).await?;
    let (session, _) = state.sessions.view_session(actor, session_id).await?;
    let views = session_view::message_views(messages).await?;
    let mut ctx = signed_in(&user);
    ctx.insert("session", &session);
    ctx.insert("messages", &views);
    ctx.insert("client_id", "");
    let html = render_to_string(&state, "partials/_side_branch.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

#[cfg(test)]
mod tests {
    use super::root_command;

    #[test]
    fn only_whole_commands_change_folders() {
        assert_eq!(root_command("/expose notes"), Some((true, "notes")));
        assert_eq!(root_command("  /unexpose   src/app  "), Some((false, "src/app")));
        assert_eq!(root_command("/expose"), Some((true, "")));
        assert_eq!(root_command("/exposure is a word"), None);
        assert_eq!(root_command("please /expose notes"), None);
    }
}
