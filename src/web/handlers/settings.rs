//! The user's own settings: provider keys in the vault and the default model.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::DomainResult;
use crate::domain::accounts::api_tokens;
use crate::domain::providers::user_keys::{self, KeyForm};
use crate::state::AppState;
use crate::web::client::origin;
use crate::web::extractors::CurrentUser;
use crate::web::form::{self, Flash};
use crate::web::render::{settings_tab, signed_in};
use crate::web::{WebError, render};

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
    let page = state.pages.keys(&user.0.actor).await?;
    let mut ctx = signed_in(user);
    ctx.insert("keys", &page.keys);
    ctx.insert("models", &page.models);
    ctx.insert("default_model", &page.default_model);
    ctx.insert("groups", &page.groups);
    ctx.insert("flash", &flash);
    ctx.insert("form", &echo);
    ctx.insert("tab", "keys");
    render::section(state, req, "pages/settings.html", "partials/_settings.html", ctx, status, "#settings")
}

/// Shows the outcome of an action: the page with a message, or with the refusal, its status and
/// the add form as it was sent.
async fn outcome<T>(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    result: DomainResult<T>,
    ok: impl FnOnce(T) -> String,
    echo: AddFormEcho,
) -> Result<HttpResponse, WebError> {
    let (flash, status) = form::outcome(result, ok)?;
    let echo = if status == StatusCode::OK { AddFormEcho::default() } else { echo };
    page(state, req, user, flash, echo, status).await
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
    let result = state.keys.add(&user.0.actor, &who, &form).await;
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
    let result = state
        .keys
        .replace(
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
    let result = state.keys.delete(&user.0.actor, &who, id.into_inner()).await;
    outcome(&state, &req, &user, result, |()| "Key deleted.".to_string(), AddFormEcho::default()).await
}

/// `POST /settings/keys/{id}/test`: lists models with the key.
pub async fn test_key(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let tested = state.keys.test(&user.0.actor, id.into_inner()).await?;
    let flash = match tested {
        Ok(n) => Flash::ok(format!("The key works: the provider lists {n} models.")),
        Err(m) => Flash::error(format!("The test failed. {m}")),
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
    let result = state.keys.set_default_model(&user.0.actor, &form.model).await;
    outcome(&state, &req, &user, result, |()| "Default model saved.".to_string(), AddFormEcho::default())
        .await
}

/// The theme form.
#[derive(Deserialize)]
pub struct ThemeForm {
    #[serde(default)]
    theme: String,
}

/// `POST /settings/theme`: the member's colour theme. The whole page changes with it, so a
/// saved choice reloads the settings page; a refused one shows the form's error.
pub async fn set_theme(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    form: web::Form<ThemeForm>,
) -> Result<HttpResponse, WebError> {
    match state.accounts.set_theme(&user.0.actor, &form.theme).await {
        Ok(_) => Ok(crate::web::client::see_other(&req, "/settings")),
        Err(e) => {
            outcome(&state, &req, &user, Err::<(), _>(e), |()| String::new(), AddFormEcho::default()).await
        }
    }
}

// ----- API tokens -------------------------------------------------------------------------------

async fn tokens_page(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    flash: Flash,
    created: Option<(String, String)>,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let mut ctx = signed_in(user);
    ctx.insert("tokens", &state.accounts.tokens.list(&user.0.actor).await?);
    // The new token, shown this once: (name, value).
    ctx.insert("created", &created);
    ctx.insert("base_url", &format!("{}/v1", state.config.public_url()));
    settings_tab(state, req, ctx, "tokens", &flash, status)
}

/// `GET /settings/tokens`.
pub async fn tokens(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
) -> Result<HttpResponse, WebError> {
    tokens_page(&state, &req, &user, Flash::default(), None, StatusCode::OK).await
}

/// The new-token form.
#[derive(Deserialize)]
pub struct TokenForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    scope: String,
    /// Days until it expires; blank: never.
    #[serde(default)]
    expires_days: String,
}

/// `POST /settings/tokens`: creates a token and shows it once.
pub async fn create_token(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    form: web::Form<TokenForm>,
) -> Result<HttpResponse, WebError> {
    let Some(scope) = api_tokens::Scope::parse_member(form.scope.trim()) else {
        let flash = Flash::error("Pick what the token may do.");
        return tokens_page(&state, &req, &user, flash, None, StatusCode::BAD_REQUEST).await;
    };
    let days = match form.expires_days.trim() {
        "" | "never" => None,
        d => match d.parse::<u32>() {
            Ok(d) => Some(d),
            Err(_) => {
                let flash = Flash::error("Pick when the token expires.");
                return tokens_page(&state, &req, &user, flash, None, StatusCode::BAD_REQUEST).await;
            }
        },
    };
    let who = origin(&req, &state, &user.0);
    let created = state.accounts.tokens.create(&user.0.actor, &who, &form.name, scope, days).await;
    // The new token, shown this once: (name, value).
    let shown = created.as_ref().ok().map(|c| (c.row.name.clone(), c.token.expose().to_string()));
    let (flash, status) =
        form::outcome(created, |_| "Token created. Copy it now: it is not shown again.".into())?;
    tokens_page(&state, &req, &user, flash, shown, status).await
}

/// `POST /settings/tokens/{id}/revoke`.
pub async fn revoke_token(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &user.0);
    state.accounts.tokens.revoke(&user.0.actor, &who, id.into_inner()).await?;
    let flash = Flash::ok("Token revoked: it stops working at once.");
    tokens_page(&state, &req, &user, flash, None, StatusCode::OK).await
}

// ----- Model aliases ----------------------------------------------------------------------------

async fn aliases_page(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let page = state.pages.aliases(&user.0.actor).await?;
    let mut ctx = signed_in(user);
    ctx.insert("aliases", &page.aliases);
    ctx.insert("models", &page.models);
    settings_tab(state, req, ctx, "aliases", &flash, status)
}

/// `GET /settings/aliases`.
pub async fn aliases_show(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
) -> Result<HttpResponse, WebError> {
    aliases_page(&state, &req, &user, Flash::default(), StatusCode::OK).await
}

/// The alias form.
#[derive(Deserialize)]
pub struct AliasForm {
    #[serde(default)]
    alias: String,
    #[serde(default)]
    target: String,
}

/// `POST /settings/aliases`: creates or replaces an alias.
pub async fn set_alias(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    form: web::Form<AliasForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &user.0);
    let set = state.aliases.set(&user.0.actor, &who, &form.alias, &form.target).await;
    let (flash, status) = form::outcome(set, |a| format!("\"{}\" now stands for {}.", a.alias, a.target))?;
    aliases_page(&state, &req, &user, flash, status).await
}

/// `POST /settings/aliases/{alias}/delete`.
pub async fn delete_alias(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    alias: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &user.0);
    state.aliases.delete(&user.0.actor, &who, &alias).await?;
    aliases_page(&state, &req, &user, Flash::ok("Alias deleted."), StatusCode::OK).await
}

// ----- MCP servers of one's own ---------------------------------------------------------------

async fn mcp_page(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let page = state.pages.mcp(&user.0.actor).await?;
    let mut ctx = signed_in(user);
    ctx.insert("servers", &page.servers);
    ctx.insert("my_groups", &page.groups);
    ctx.insert("my_workspaces", &page.workspaces);
    ctx.insert("shared_servers", &page.shared);
    settings_tab(state, req, ctx, "mcp", &flash, status)
}

/// `GET /settings/mcp`: the member's own MCP servers.
pub async fn mcp_show(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
) -> Result<HttpResponse, WebError> {
    mcp_page(&state, &req, &user, Flash::default(), StatusCode::OK).await
}

/// `POST /settings/mcp`: adds one (streamable HTTP).
pub async fn mcp_add(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    form: web::Form<crate::domain::mcp::servers::ServerForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &user.0);
    let allowed = crate::netguard::AllowedRanges::parse(&state.config.llm.member_base_url_allow.join(" "))
        .unwrap_or_default();
    let created = state.mcp.create_own(&user.0.actor, &who, &allowed, &form).await;
    let (flash, status) =
        form::outcome(created, |s| format!("Added {}: its tools appear as {}__….", s.name, s.name))?;
    mcp_page(&state, &req, &user, flash, status).await
}

/// `POST /settings/mcp/{id}/delete`.
pub async fn mcp_remove(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &user.0);
    state.mcp.delete_own(&user.0.actor, &who, id.into_inner()).await?;
    let flash = Flash::ok("MCP server removed.");
    mcp_page(&state, &req, &user, flash, StatusCode::OK).await
}

/// The share form of one's own server: a group's id, or blank for nobody.
#[derive(Deserialize)]
pub struct McpShareForm {
    group: String,
}

/// `POST /settings/mcp/{id}/share`.
pub async fn mcp_share(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<Uuid>,
    form: web::Form<McpShareForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &user.0);
    let shared = state.mcp.share_own(&user.0.actor, &who, id.into_inner(), &form.group).await;
    let said = match form.group.trim() {
        "" => "Shared with nobody.",
        _ => "Shared: the group's members' agents get its tools.",
    };
    let (flash, status) = form::outcome(shared, |()| said.into())?;
    mcp_page(&state, &req, &user, flash, status).await
}

/// The workspace form of one's own server: one of one's workspaces' id, or blank for none.
#[derive(Deserialize)]
pub struct McpWorkspaceForm {
    workspace: String,
}

/// `POST /settings/mcp/{id}/workspace`.
pub async fn mcp_workspace(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<Uuid>,
    form: web::Form<McpWorkspaceForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &user.0);
    let attached = state.mcp.attach_to_workspace(&user.0.actor, &who, id.into_inner(), &form.workspace).await;
    let said = match form.workspace.trim() {
        "" => "Attached to no workspace.",
        _ => "Attached: runs in that workspace get its tools, whoever starts them.",
    };
    let (flash, status) = form::outcome(attached, |()| said.into())?;
    mcp_page(&state, &req, &user, flash, status).await
}
