//! Invitations: admins invite by email; the invited person accepts through the link.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};
use tera::Context;

use crate::domain::DomainError;
use crate::domain::accounts::Role;
use crate::domain::accounts::invitations;
use crate::mail::{Mail, MailError};
use crate::state::AppState;
use crate::web::extractors::{AdminUser, MaybeUser};
use crate::web::{WebError, render};

#[derive(Serialize)]
struct Row {
    email: String,
    role: &'static str,
    state: &'static str,
    expires: String,
}

/// What happened to the invitation just made, for the admin.
#[derive(Serialize, Default)]
struct Outcome {
    email: String,
    link: String,
    sent: bool,
    mail_off: bool,
    mail_error: Option<String>,
}

async fn admin_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    outcome: Option<Outcome>,
    error: Option<&str>,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let rows: Vec<Row> = state
        .accounts
        .invitations
        .list(&admin.1)
        .await?
        .into_iter()
        .map(|i| Row {
            state: if i.accepted_at.is_some() {
                "accepted"
            } else if i.is_open() {
                "open"
            } else {
                "expired"
            },
            role: i.role.as_str(),
            expires: i.expires_at.format("%Y-%m-%d %H:%M UTC").to_string(),
            email: i.email,
        })
        .collect();
    let mut ctx = Context::new();
    ctx.insert("user", &admin.0.user);
    ctx.insert("csrf_token", &admin.0.csrf_secret);
    ctx.insert("invitations", &rows);
    ctx.insert("outcome", &outcome);
    ctx.insert("error", &error);
    ctx.insert("mail_on", &state.mailer.is_on());
    ctx.insert("section", "invitations");
    ctx.insert("flash", &serde_json::json!({}));
    render::page_with_status(
        state,
        req,
        "pages/admin_invitations.html",
        "partials/_invitations.html",
        ctx,
        status,
    )
}

/// `GET /admin/invitations`.
pub async fn list(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
) -> Result<HttpResponse, WebError> {
    admin_page(&state, &req, &admin, None, None, StatusCode::OK).await
}

/// Form of the invitation page.
#[derive(Deserialize)]
pub struct InviteForm {
    email: String,
    role: String,
}

/// `POST /admin/invitations`: stores the invitation, then mails the link; a failed mail is
/// shown (with the link to copy) and logged, never lost silently.
pub async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    form: web::Form<InviteForm>,
) -> Result<HttpResponse, WebError> {
    let Some(role) = Role::parse(&form.role) else {
        return admin_page(&state, &req, &admin, None, Some("Choose a role."), StatusCode::BAD_REQUEST).await;
    };
    let hours = state.config.auth.invitation_valid_hours;
    let new = match state.accounts.invitations.create(&admin.1, &form.email, role, hours).await {
        Ok(n) => n,
        Err(DomainError::Invalid(m)) | Err(DomainError::Conflict(m)) => {
            return admin_page(&state, &req, &admin, None, Some(&m), StatusCode::BAD_REQUEST).await;
        }
        Err(e) => return Err(e.into()),
    };
    let link = format!("{}/invite/{}", state.config.public_url(), new.token);
    let mut outcome =
        Outcome { email: new.invitation.email.clone(), link: link.clone(), ..Default::default() };
    let mut ctx = Context::new();
    ctx.insert("link", &link);
    ctx.insert("inviter", &admin.0.user.display_name);
    ctx.insert("hours", &hours);
    let html = state
        .templates
        .render("mail/invitation.html", &ctx)
        .map_err(|e| WebError::Internal(format!("render invitation mail: {e}")))?;
    let text = format!(
        "{} invited you to Arbor.\n\nCreate your account here (the link works once and expires in {hours} hours):\n{link}\n",
        admin.0.user.display_name
    );
    let mail =
        Mail { to: new.invitation.email.clone(), subject: "You are invited to Arbor".into(), text, html };
    match state.mailer.send(mail).await {
        Ok(()) => {
            tracing::info!(invitation = %new.invitation.id, "invitation mailed");
            outcome.sent = true;
        }
        Err(MailError::Off) => outcome.mail_off = true,
        Err(e) => {
            tracing::error!(invitation = %new.invitation.id, error = %e, "invitation mail failed");
            outcome.mail_error = Some(e.to_string());
        }
    }
    admin_page(&state, &req, &admin, Some(outcome), None, StatusCode::OK).await
}

fn accept_page(
    state: &AppState,
    req: &HttpRequest,
    inv: &invitations::Invitation,
    token: &str,
    error: Option<&str>,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let mut ctx = Context::new();
    ctx.insert("email", &inv.email);
    ctx.insert("token", token);
    ctx.insert("error", &error);
    ctx.insert("local_enabled", &state.config.local_accounts_enabled());
    ctx.insert("oidc_name", &state.oidc.as_ref().map(|o| o.display_name().to_string()));
    ctx.insert("min_password_length", &state.config.auth.min_password_length);
    render::page_with_status(state, req, "pages/invite.html", "partials/_invite.html", ctx, status)
}

fn signed_in_already() -> WebError {
    WebError::Conflict("You are signed in already. Sign out to accept an invitation for someone else.".into())
}

/// `GET /invite/{token}`.
pub async fn show(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: MaybeUser,
    token: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    if user.0.is_some() {
        return Err(WebError::Conflict(
            "You are signed in already. Sign out to accept an invitation for someone else.".into(),
        ));
    }
    let inv = state.accounts.invitations.open(&token).await?;
    accept_page(&state, &req, &inv, &token, None, StatusCode::OK)
}

/// Form of the acceptance page.
#[derive(Deserialize)]
pub struct AcceptForm {
    display_name: String,
    password: String,
}

/// `POST /invite/{token}`: creates the account with the invited role and signs it in.
pub async fn accept(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: MaybeUser,
    token: web::Path<String>,
    form: web::Form<AcceptForm>,
) -> Result<HttpResponse, WebError> {
    if user.0.is_some() {
        return Err(signed_in_already());
    }
    if !state.config.local_accounts_enabled() {
        return Err(WebError::NotFound);
    }
    let min = state.config.auth.min_password_length;
    match state.accounts.invitations.accept_local(&token, &form.display_name, &form.password, min).await {
        Ok(user) => {
            tracing::info!(user = %user.id, "invitation accepted");
            crate::web::sign_in::finish_sign_in(&state, &req, &user, "/").await
        }
        Err(DomainError::Invalid(m)) | Err(DomainError::Conflict(m)) => {
            let inv = state.accounts.invitations.open(&token).await?;
            accept_page(&state, &req, &inv, &token, Some(&m), StatusCode::BAD_REQUEST)
        }
        Err(e) => Err(e.into()),
    }
}
