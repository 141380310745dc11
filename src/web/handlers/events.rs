//! The live event stream of a session.

use std::time::Duration;

use actix_web::{Responder, web};
use actix_web_lab::sse::Sse;
use uuid::Uuid;

use crate::domain;
use crate::state::AppState;
use crate::web::extractors::CurrentUser;
use crate::web::{WebError, sse};

/// `GET /s/{session_id}/events`: authorize like the page, snapshot, then subscribe.
pub async fn session_events(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<impl Responder, WebError> {
    let session_id = Uuid::parse_str(&path.into_inner()).map_err(|_| WebError::NotFound)?;
    let session = domain::chat::get_session(&state.db, &user.0.actor, session_id).await?;
    let first = state.runs.subscribe(session.id);
    let stream = sse::session_stream(state.runs.clone(), session.id, first);
    Ok(Sse::from_infallible_stream(stream)
        .with_keep_alive(Duration::from_secs(state.config.events.keepalive_secs))
        .customize()
        .insert_header(("X-Accel-Buffering", "no")))
}
