//! The user's own settings: provider keys in the vault and the default model.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};
use tera::Context;
use uuid::Uuid;

use crate::domain::user_keys::{self, KeyForm};
use crate::domain::{DomainError, DomainResult};
use crate::state::AppState;
use crate::web::client::origin;
use crate::web::extractors::CurrentUser;
use crate::web::{WebError, render};

/// What the page says after an action.
#[derive(Serialize, Default)]
struct Flash {
    ok: Option<String>,
    error: Option<String>,
}

/// The add form as shown again after a refusal: never the key itself.
#[derive(Serialize, Default)]
struct AddFormEcho {
    kind: String,
    name: String,
    base_url: String,
    label: String,
}

async fn page(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    flash: Flash,
    echo: AddFormEcho,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let actor = &user.0.actor;
    let mut ctx = Context::new();
    ctx.insert("user", &user.0.user);
    ctx.insert("csrf_token", &user.0.csrf_secret);
    ctx.insert("keys", &user_keys::list(&state.db, actor).await?);
    ctx.insert("models", &state.engine.providers().choices(actor).await);
    ctx.insert("default_model", &user_keys::default_model(&state.db, actor).await?);
    ctx.insert("flash", &flash);
    ctx.insert("form", &echo);
    render::section(state, req, "pages/settings.html", "partials/_settings.html", ctx, status, "#settings")
}

/// Shows the outcome of an action: the page with a message, or with the refusal and its status.
async fn outcome<T>(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    result: DomainResult<T>,
    ok: impl FnOnce(T) -> String,
    echo: AddFormEcho,
) -> Result<HttpResponse, WebError> {
    match result {
        Ok(v) => {
            page(
                state,
                req,
                user,
                Flash { ok: Some(ok(v)), error: None },
                AddFormEcho::default(),
                StatusCode::OK,
            )
            .await
        }
        Err(DomainError::Invalid(m)) => {
            page(state, req, user, Flash { ok: None, error: Some(m) }, echo, StatusCode::BAD_REQUEST).await
        }
        Err(DomainError::Conflict(m)) => {
            page(state, req, user, Flash { ok: None, error: Some(m) }, echo, StatusCode::CONFLICT).await
        }
        Err(e) => Err(e.into()),
    }
}

/// `GET /settings`.
pub async fn show(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
) -> Result<HttpResponse, WebError> {
    page(&state, &req, &user, Flash::default(), AddFormEcho::default(), StatusCode::OK).await
}

/// `POST /settings/keys`: stores a new key.
pub async fn add_key(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    form: web::Form<KeyForm>,
) -> Result<HttpResponse, WebError> {
    let form = form.into_inner();
    let who = origin(&req, &state, &user.0);
    let result =
        user_keys::add(&state.db, &state.vault, state.engine.providers(), &user.0.actor, &who, &form).await;
    let echo = AddFormEcho { kind: form.kind, name: form.name, base_url: form.base_url, label: form.label };
    outcome(&state, &req, &user, result, |k| format!("Key \"{}\" saved (…{}).", k.label, k.last4), echo).await
}

/// The replace form: a new value and/or label.
#[derive(Deserialize)]
pub struct ReplaceForm {
    #[serde(default)]
    label: String,
    #[serde(default)]
    key: String,
}

/// `POST /settings/keys/{id}`: replaces a key's value or label.
pub async fn replace_key(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<Uuid>,
    form: web::Form<ReplaceForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &user.0);
    let result = user_keys::replace(
        &state.db,
        &state.vault,
        state.engine.providers(),
        &user.0.actor,
        &who,
        id.into_inner(),
        user_keys::Change { label: &form.label, value: &form.key },
    )
    .await;
    outcome(
        &state,
        &req,
        &user,
        result,
        |k| format!("Key \"{}\" updated (…{}).", k.label, k.last4),
        AddFormEcho::default(),
    )
    .await
}

/// `POST /settings/keys/{id}/delete`.
pub async fn delete_key(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &user.0);
    let result =
        user_keys::delete(&state.db, state.engine.providers(), &user.0.actor, &who, id.into_inner()).await;
    outcome(&state, &req, &user, result, |()| "Key deleted.".to_string(), AddFormEcho::default()).await
}

/// `POST /settings/keys/{id}/test`: lists models with the key.
pub async fn test_key(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let tested = user_keys::test(&state.db, state.engine.providers(), &user.0.actor, id.into_inner()).await?;
    let flash = match tested {
        Ok(n) => Flash { ok: Some(format!("The key works: the provider lists {n} models.")), error: None },
        Err(m) => Flash { ok: None, error: Some(format!("The test failed. {m}")) },
    };
    page(&state, &req, &user, flash, AddFormEcho::default(), StatusCode::OK).await
}

/// The default-model form.
#[derive(Deserialize)]
pub struct ModelForm {
    #[serde(default)]
    model: String,
}

/// `POST /settings/model`: sets or clears the user's default model.
pub async fn set_model(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    form: web::Form<ModelForm>,
) -> Result<HttpResponse, WebError> {
    let result =
        user_keys::set_default_model(&state.db, state.engine.providers(), &user.0.actor, &form.model).await;
    outcome(&state, &req, &user, result, |()| "Default model saved.".to_string(), AddFormEcho::default())
        .await
}
