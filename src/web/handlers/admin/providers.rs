//! Providers and their shared keys: add, edit, test, delete.

use super::*;

async fn providers_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    flash: Flash,
    form: &ProviderForm,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let mut ctx = base_context(admin, "providers", &flash);
    ctx.insert("providers", &state.admin.list_providers(&admin.1).await?);
    let configured: Vec<(String, String)> = state
        .engine
        .providers()
        .entries()
        .into_iter()
        .filter(|e| e.id.is_none())
        .map(|e| (e.name, e.base_url))
        .collect();
    ctx.insert("configured", &configured);
    ctx.insert("f", &FormEcho::from(form));
    console_page(state, req, "providers", ctx, status)
}

/// A provider form as shown again after a refusal.
#[derive(Serialize)]
struct FormEcho {
    name: String,
    label: String,
    kind: String,
    base_url: String,
    enabled: bool,
    visibility: String,
    allowed_emails: String,
    allowed_groups: String,
    models: String,
    rpm: String,
    tpm: String,
}

impl From<&ProviderForm> for FormEcho {
    fn from(f: &ProviderForm) -> Self {
        FormEcho {
            name: f.name.clone(),
            label: f.label.clone(),
            kind: f.kind.clone(),
            base_url: f.base_url.clone(),
            enabled: f.enabled.is_some() || f.kind.is_empty(),
            visibility: f.visibility.clone(),
            allowed_emails: f.allowed_emails.clone(),
            allowed_groups: f.allowed_groups.clone(),
            models: f.models.clone(),
            rpm: f.rpm.clone(),
            tpm: f.tpm.clone(),
        }
    }
}

/// `GET /admin/providers`.
pub async fn providers(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
) -> Result<HttpResponse, WebError> {
    providers_page(&state, &req, &admin, Flash::default(), &ProviderForm::default(), StatusCode::OK).await
}

/// `POST /admin/providers`: adds a provider, then opens it.
pub async fn create_provider(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    form: web::Form<ProviderForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    match state.admin.create_provider(&admin.1, &who, &form).await {
        Ok(p) => Ok(see_other(&req, &format!("/admin/providers/{}", p.id))),
        Err(e) => {
            let (flash, status) = refusal(e)?;
            providers_page(&state, &req, &admin, flash, &form, status).await
        }
    }
}

async fn provider_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    id: Uuid,
    flash: Flash,
    models_override: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let page = state.pages.admin_provider(&admin.1, id).await?;
    let p = page.provider;
    let mut ctx = base_context(admin, "providers", &flash);
    let limit = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    let echo = FormEcho {
        name: p.name.clone(),
        label: p.label.clone(),
        kind: p.kind.clone(),
        base_url: p.base_url.clone(),
        enabled: p.enabled,
        visibility: p.visibility.clone(),
        allowed_emails: page.allowed_emails.join("\n"),
        allowed_groups: page.allowed_groups.join("\n"),
        models: models_override.unwrap_or_else(|| p.models.join("\n")),
        rpm: limit(p.rpm),
        tpm: limit(p.tpm),
    };
    ctx.insert("f", &echo);
    ctx.insert("model_facts", &page.model_facts);
    ctx.insert("provider", &p);
    console_page(state, req, "provider", ctx, status)
}

/// `GET /admin/providers/{id}`.
pub async fn provider(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    provider_page(&state, &req, &admin, id.into_inner(), Flash::default(), None, StatusCode::OK).await
}

/// `POST /admin/providers/{id}`: saves its settings.
pub async fn update_provider(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
    form: web::Form<ProviderForm>,
) -> Result<HttpResponse, WebError> {
    let id = id.into_inner();
    let who = origin(&req, &state, &admin.0);
    let (flash, status) =
        outcome(state.admin.update_provider(&admin.1, &who, id, &form).await, |_| "Saved.".into())?;
    provider_page(&state, &req, &admin, id, flash, None, status).await
}

/// `POST /admin/providers/{id}/models`: an admin's word on what one model can do.
pub async fn set_model_override(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
    form: web::Form<admin::model_overrides::OverrideForm>,
) -> Result<HttpResponse, WebError> {
    let id = id.into_inner();
    let who = origin(&req, &state, &admin.0);
    let (flash, status) = outcome(state.admin.set_model_override(&admin.1, &who, id, &form).await, |()| {
        format!("Saved what {} can do.", form.model.trim())
    })?;
    provider_page(&state, &req, &admin, id, flash, None, status).await
}

/// `POST /admin/providers/{id}/delete`.
pub async fn delete_provider(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    state.admin.delete_provider(&admin.1, &who, id.into_inner()).await?;
    Ok(see_other(&req, "/admin/providers"))
}

/// The add-key form.
#[derive(Deserialize)]
pub struct KeyForm {
    #[serde(default)]
    label: String,
    #[serde(default)]
    key: String,
}

/// `POST /admin/providers/{id}/keys`: adds a shared key.
pub async fn add_key(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
    form: web::Form<KeyForm>,
) -> Result<HttpResponse, WebError> {
    let id = id.into_inner();
    let who = origin(&req, &state, &admin.0);
    let form = form.into_inner();
    let value = Secret::new(form.key);
    let result =
        state.admin.add_key(&admin.1, &who, id, admin::NewKey { label: &form.label, value: &value }).await;
    let (flash, status) = outcome(result, |k| format!("Key \"{}\" (…{}) added.", k.label, k.last4))?;
    provider_page(&state, &req, &admin, id, flash, None, status).await
}

/// `POST /admin/providers/{id}/keys/{key_id}/delete`.
pub async fn delete_key(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    path: web::Path<(Uuid, Uuid)>,
) -> Result<HttpResponse, WebError> {
    let (id, key) = path.into_inner();
    let who = origin(&req, &state, &admin.0);
    state.admin.delete_key(&admin.1, &who, id, key).await?;
    provider_page(&state, &req, &admin, id, Flash::ok("Key deleted."), None, StatusCode::OK).await
}

/// `POST /admin/providers/{id}/test`: lists the provider's models with its shared keys and
/// offers them in the enabled-models box.
pub async fn test_provider(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let id = id.into_inner();
    let who = origin(&req, &state, &admin.0);
    match state.admin.discover_models(&admin.1, &who, id).await? {
        Ok(models) => {
            let flash = Flash::ok(format!(
                "The connection works: {} chat models found. They are in the box below; remove the ones to \
                 keep off, then save.",
                models.len()
            ));
            provider_page(&state, &req, &admin, id, flash, Some(models.join("\n")), StatusCode::OK).await
        }
        Err(m) => {
            provider_page(
                &state,
                &req,
                &admin,
                id,
                Flash::error(format!("The test failed. {m}")),
                None,
                StatusCode::OK,
            )
            .await
        }
    }
}
