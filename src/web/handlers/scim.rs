//! `/scim/v2`: directory provisioning for identity providers. Each handler checks the SCIM
//! token, reads the body under a cap, calls one service, and answers `application/scim+json`
//! (errors too, in SCIM's own shape).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::Value;

use crate::domain::authz::Admin;
use crate::domain::scim::{self, Page, ScimError, ScimResult};
use crate::state::AppState;
use crate::web::client::origin_of_token;
use crate::web::extractors::bearer_token;

const CONTENT_TYPE: &str = "application/scim+json";

fn answer(status: StatusCode, body: Option<Value>) -> HttpResponse {
    let mut res = HttpResponse::build(status);
    res.insert_header(("content-type", CONTENT_TYPE)).insert_header(("cache-control", "no-store"));
    match body {
        Some(v) => res.body(v.to_string()),
        None => res.finish(),
    }
}

fn failed(e: ScimError) -> HttpResponse {
    answer(StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST), Some(e.body()))
}

fn base(state: &AppState) -> String {
    format!("{}/scim/v2", state.config.public_url())
}

async fn admin(state: &AppState, req: &HttpRequest) -> ScimResult<Admin> {
    state.scim.authenticate(bearer_token(req)).await
}

/// The body, read no further than the cap.
async fn body(mut payload: web::Payload) -> ScimResult<Value> {
    let mut bytes = Vec::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|_| ScimError::bad("invalidSyntax", "The body could not be read."))?;
        if bytes.len() + chunk.len() > scim::MAX_BODY {
            return Err(ScimError {
                status: 413,
                scim_type: None,
                detail: format!("A request body is at most {} bytes.", scim::MAX_BODY),
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    scim::parse_body(&bytes)
}

/// `GET /scim/v2/ServiceProviderConfig`.
pub async fn config(state: web::Data<AppState>, req: HttpRequest) -> HttpResponse {
    match admin(&state, &req).await {
        Ok(_) => answer(StatusCode::OK, Some(scim::service_provider_config(&base(&state)))),
        Err(e) => failed(e),
    }
}

/// `GET /scim/v2/ResourceTypes`.
pub async fn resource_types(state: web::Data<AppState>, req: HttpRequest) -> HttpResponse {
    match admin(&state, &req).await {
        Ok(_) => {
            let all = scim::resource_types(&base(&state));
            let total = all.len() as u64;
            answer(StatusCode::OK, Some(scim::list_response(all, total, Page { start: 1, count: total })))
        }
        Err(e) => failed(e),
    }
}

/// `GET /scim/v2/ResourceTypes/{name}`.
pub async fn resource_type(
    state: web::Data<AppState>,
    req: HttpRequest,
    name: web::Path<String>,
) -> HttpResponse {
    match admin(&state, &req).await {
        Ok(_) => match scim::resource_types(&base(&state)).into_iter().find(|t| t["id"] == name.as_str()) {
            Some(t) => answer(StatusCode::OK, Some(t)),
            None => failed(ScimError::not_found("ResourceType")),
        },
        Err(e) => failed(e),
    }
}

/// `GET /scim/v2/Schemas`.
pub async fn schemas(state: web::Data<AppState>, req: HttpRequest) -> HttpResponse {
    match admin(&state, &req).await {
        Ok(_) => {
            let all = scim::schemas(&base(&state));
            let total = all.len() as u64;
            answer(StatusCode::OK, Some(scim::list_response(all, total, Page { start: 1, count: total })))
        }
        Err(e) => failed(e),
    }
}

/// `GET /scim/v2/Schemas/{id}`.
pub async fn schema(state: web::Data<AppState>, req: HttpRequest, id: web::Path<String>) -> HttpResponse {
    match admin(&state, &req).await {
        Ok(_) => match scim::schemas(&base(&state)).into_iter().find(|s| s["id"] == id.as_str()) {
            Some(s) => answer(StatusCode::OK, Some(s)),
            None => failed(ScimError::not_found("Schema")),
        },
        Err(e) => failed(e),
    }
}

/// A list query: `filter`, `startIndex`, `count`.
#[derive(Deserialize)]
pub struct ListQuery {
    filter: Option<String>,
    #[serde(rename = "startIndex")]
    start_index: Option<String>,
    count: Option<String>,
}

/// Which resource a route serves.
#[derive(Clone, Copy)]
enum Kind {
    Users,
    Groups,
}

async fn list(state: &AppState, req: &HttpRequest, kind: Kind) -> ScimResult<Value> {
    let admin = admin(state, req).await?;
    let query = web::Query::<ListQuery>::from_query(req.query_string())
        .map_err(|_| ScimError::bad("invalidValue", "The query string could not be read."))?;
    let page = Page::parse(query.start_index.as_deref(), query.count.as_deref())?;
    let base = base(state);
    match kind {
        Kind::Users => state.scim.users.list(&admin, &base, query.filter.as_deref(), page).await,
        Kind::Groups => state.scim.groups.list(&admin, &base, query.filter.as_deref(), page).await,
    }
}

async fn create(state: &AppState, req: &HttpRequest, payload: web::Payload, kind: Kind) -> ScimResult<Value> {
    let admin = admin(state, req).await?;
    let body = body(payload).await?;
    let who = origin_of_token(req, state, &admin);
    match kind {
        Kind::Users => state.scim.users.create(&admin, &who, &base(state), &body).await,
        Kind::Groups => state.scim.groups.create(&admin, &who, &base(state), &body).await,
    }
}

async fn get(state: &AppState, req: &HttpRequest, id: &str, kind: Kind) -> ScimResult<Value> {
    let admin = admin(state, req).await?;
    match kind {
        Kind::Users => state.scim.users.get(&admin, &base(state), id).await,
        Kind::Groups => state.scim.groups.get(&admin, &base(state), id).await,
    }
}

async fn change(
    state: &AppState,
    req: &HttpRequest,
    payload: web::Payload,
    id: &str,
    (kind, whole): (Kind, bool),
) -> ScimResult<Value> {
    let admin = admin(state, req).await?;
    let body = body(payload).await?;
    let (who, base) = (origin_of_token(req, state, &admin), base(state));
    match (kind, whole) {
        (Kind::Users, true) => state.scim.users.replace(&admin, &who, &base, id, &body).await,
        (Kind::Users, false) => state.scim.users.modify(&admin, &who, &base, id, &body).await,
        (Kind::Groups, true) => state.scim.groups.replace(&admin, &who, &base, id, &body).await,
        (Kind::Groups, false) => state.scim.groups.modify(&admin, &who, &base, id, &body).await,
    }
}

async fn remove(state: &AppState, req: &HttpRequest, id: &str, kind: Kind) -> ScimResult<()> {
    let admin = admin(state, req).await?;
    let who = origin_of_token(req, state, &admin);
    match kind {
        Kind::Users => state.scim.users.delete(&admin, &who, id).await,
        Kind::Groups => state.scim.groups.delete(&admin, &who, id).await,
    }
}

fn ok(r: ScimResult<Value>, status: StatusCode) -> HttpResponse {
    match r {
        Ok(v) => answer(status, Some(v)),
        Err(e) => failed(e),
    }
}

/// `GET /scim/v2/Users`.
pub async fn list_users(state: web::Data<AppState>, req: HttpRequest) -> HttpResponse {
    ok(list(&state, &req, Kind::Users).await, StatusCode::OK)
}

/// `GET /scim/v2/Groups`.
pub async fn list_groups(state: web::Data<AppState>, req: HttpRequest) -> HttpResponse {
    ok(list(&state, &req, Kind::Groups).await, StatusCode::OK)
}

/// `POST /scim/v2/Users`.
pub async fn create_user(
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    ok(create(&state, &req, payload, Kind::Users).await, StatusCode::CREATED)
}

/// `POST /scim/v2/Groups`.
pub async fn create_group(
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    ok(create(&state, &req, payload, Kind::Groups).await, StatusCode::CREATED)
}

/// `GET /scim/v2/Users/{id}`.
pub async fn get_user(state: web::Data<AppState>, req: HttpRequest, id: web::Path<String>) -> HttpResponse {
    ok(get(&state, &req, &id, Kind::Users).await, StatusCode::OK)
}

/// `GET /scim/v2/Groups/{id}`.
pub async fn get_group(state: web::Data<AppState>, req: HttpRequest, id: web::Path<String>) -> HttpResponse {
    ok(get(&state, &req, &id, Kind::Groups).await, StatusCode::OK)
}

/// `PUT /scim/v2/Users/{id}`.
pub async fn replace_user(
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    ok(change(&state, &req, payload, &id, (Kind::Users, true)).await, StatusCode::OK)
}

/// `PATCH /scim/v2/Users/{id}`.
pub async fn patch_user(
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    ok(change(&state, &req, payload, &id, (Kind::Users, false)).await, StatusCode::OK)
}

/// `PUT /scim/v2/Groups/{id}`.
pub async fn replace_group(
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    ok(change(&state, &req, payload, &id, (Kind::Groups, true)).await, StatusCode::OK)
}

/// `PATCH /scim/v2/Groups/{id}`.
pub async fn patch_group(
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    ok(change(&state, &req, payload, &id, (Kind::Groups, false)).await, StatusCode::OK)
}

/// `DELETE /scim/v2/Users/{id}`.
pub async fn delete_user(
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<String>,
) -> HttpResponse {
    match remove(&state, &req, &id, Kind::Users).await {
        Ok(()) => answer(StatusCode::NO_CONTENT, None),
        Err(e) => failed(e),
    }
}

/// `DELETE /scim/v2/Groups/{id}`.
pub async fn delete_group(
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<String>,
) -> HttpResponse {
    match remove(&state, &req, &id, Kind::Groups).await {
        Ok(()) => answer(StatusCode::NO_CONTENT, None),
        Err(e) => failed(e),
    }
}
