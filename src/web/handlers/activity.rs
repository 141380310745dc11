//! A session's activity log: the "Activity" panel of the session page and its JSON Lines
//! download (the sessions API serves the same at `/v1/sessions/{id}/activity`).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};

use crate::domain::sessions::activity::{self, ACTIVITY_EXPORTED, ACTIVITY_SHOWN};
use crate::state::AppState;
use crate::web::WebError;
use crate::web::extractors::CurrentUser;
use crate::web::render::{self, parse_id, render_to_string};

/// `GET /s/{session_id}/activity`: the newest events, for the session page's panel.
pub async fn panel(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    // One more than shown says whether there are older ones.
    let mut entries = state.sessions.activity(&user.0.actor, session_id, ACTIVITY_SHOWN + 1).await?;
    let truncated = entries.len() as u64 > ACTIVITY_SHOWN;
    if truncated {
        entries.remove(0);
    }
    let mut ctx = tera::Context::new();
    ctx.insert("entries", &entries);
    ctx.insert("truncated", &truncated);
    ctx.insert("session_id", &session_id);
    let html = render_to_string(&state, "partials/_activity.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// `GET /s/{session_id}/activity.jsonl`: the whole log (up to its cap) as a download.
pub async fn download(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    let entries = state.sessions.activity(&user.0.actor, session_id, ACTIVITY_EXPORTED).await?;
    Ok(render::json_lines(
        activity::json_lines(&entries),
        Some(&format!("arbor-activity-{session_id}.jsonl")),
    ))
}
