//! The live event stream of a session.

use std::time::Duration;

use actix_web::{Responder, web};
use actix_web_lab::sse::Sse;
use futures_util::StreamExt;
use serde::Deserialize;
use uuid::Uuid;

use crate::state::AppState;
use crate::web::extractors::CurrentUser;
use crate::web::session_page::final_message_html;
use crate::web::sse::{self, StreamItem};
use crate::web::{WebError, sse::done_event};

/// Query of the stream: the message the page is waiting for.
#[derive(Deserialize)]
pub struct EventsQuery {
    m: Option<String>,
}

/// `GET /s/{session_id}/events`: authorize like the page, snapshot, live events, and `done`
/// carrying the final message (the one named by `?m=`, or the run's).
pub async fn session_events(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
    query: web::Query<EventsQuery>,
) -> Result<impl Responder, WebError> {
    let session_id = Uuid::parse_str(&path.into_inner()).map_err(|_| WebError::NotFound)?;
    // Only a message of this session may be named.
    let waiting_for = match &query.m {
        Some(raw) => Some(Uuid::parse_str(raw).map_err(|_| WebError::NotFound)?),
        None => None,
    };
    // The live run is taken first: a message it writes is surely this session's, and then the
    // database need not be asked (a turn's page opens this stream right after its post).
    let live = state.runs.subscribe(session_id);
    let live_message = live.as_ref().and_then(|s| s.snapshot.message_id);
    let to_check = waiting_for.filter(|m| Some(*m) != live_message);
    let known = live.as_ref().and_then(|s| s.session);
    let whose = state.sessions.session_waiting_for(&user.0.actor, session_id, to_check, known).await?;
    // Each open stream holds a connection: one member may hold only so many (SECURITY.md 54).
    let max = state.config.limits.streams_per_member;
    let slot = state.streams.try_take(user.0.actor.user_id(), max).ok_or_else(|| {
        WebError::TooManyRequests(
            format!("You have {max} live pages open, the most allowed: close some tabs and reload."),
            5,
        )
    })?;
    // A page waiting for one message must not be fed another message's run.
    let first = live.filter(|s| waiting_for.is_none() || s.snapshot.message_id == waiting_for);
    let keepalive = Duration::from_secs(state.config.events.keepalive_secs);
    // Someone a workspace is shared with loses the stream the moment the share is revoked; the
    // last event says so in place of the answer.
    let revoked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let lost = {
        let (state, actor, flag) = (state.clone(), user.0.actor.clone(), revoked.clone());
        let (owner, workspace_id) = (whose.owner_id, whose.workspace_id);
        async move {
            if owner == actor.user_id() {
                return std::future::pending().await;
            }
            state.teams.shares.lost(&actor, workspace_id).await;
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    };
    let notice = futures_util::stream::once(async move { revoked.load(std::sync::atomic::Ordering::SeqCst) })
        .filter_map(
            |lost| async move { lost.then(|| done_event(crate::web::sse::REVOKED_NOTICE.to_string())) },
        );
    let stream = sse::session_stream(state.runs.clone(), session_id, first).then(move |item| {
        // The slot lives as long as the stream, and is given back when the browser goes.
        let _slot = &slot;
        event_of(state.clone(), user.clone(), session_id, waiting_for, item)
    });
    let stream = stream.take_until(Box::pin(lost)).chain(notice);
    Ok(Sse::from_infallible_stream(stream)
        .with_keep_alive(keepalive)
        .customize()
        .insert_header(("X-Accel-Buffering", "no")))
}

/// A followed run's item as its SSE event. `done` carries the final message's page, rendered
/// in a box: the stream holds this future's state for as long as the page follows the run, and
/// the render would be nearly all of it (6 KB a page; see the test).
async fn event_of(
    state: web::Data<AppState>,
    user: CurrentUser,
    session_id: Uuid,
    waiting_for: Option<Uuid>,
    item: StreamItem,
) -> actix_web_lab::sse::Event {
    match item {
        StreamItem::Event(e) => e,
        StreamItem::Done { message: run_message, plain } => {
            let html = match waiting_for.or(run_message) {
                Some(id) => {
                    // The run's word that its answer is all it wrote holds for that answer.
                    let plain = plain && run_message == Some(id);
                    Box::pin(final_message_html(&state, &user, session_id, id, plain)).await.unwrap_or_else(
                        |e| {
                            tracing::warn!(error = %e, "final message could not be rendered");
                            String::new()
                        },
                    )
                }
                None => String::new(),
            };
            done_event(html)
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every page following a live run holds this future in its stream.
    #[test]
    fn a_followed_runs_event_in_the_making_stays_small() {
        let size = crate::future_size::future_size(|(state, user, session, waiting_for, item)| {
            super::event_of(state, user, session, waiting_for, item)
        });
        assert!(size <= 1024, "an event in the making is {size} bytes");
    }
}
