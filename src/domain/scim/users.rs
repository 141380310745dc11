//! SCIM Users: a person's `userName` is their email (so it must be one), `displayName` (or
//! `name.formatted`) their name, `active` whether they may sign in, `externalId` the provider's
//! id. People made here are members who sign in through the identity provider.

use serde_json::{Value, json};
use uuid::Uuid;

use super::patch::{self, OpKind};
use super::{Common, Page, ScimError, ScimResult, USER_SCHEMA, audited, filter, list_response, resource};
use crate::domain::audit::Origin;
use crate::domain::authz::Admin;
use crate::domain::teams::shares::AccessChanges;
use crate::events::RunRegistry;
use crate::model::teams::DirectoryUser;
use crate::storage::Db;
use crate::storage::repos::{api_tokens, auth_sessions, directory as repo};

/// Longest display name and external id kept.
const MAX_TEXT: usize = 255;

/// What deactivating someone must reach beyond the database: their live runs and streams.
#[derive(Clone)]
pub struct Effects {
    /// Live runs (a deactivated person's are stopped).
    pub runs: RunRegistry,
    /// Open streams (a deactivated person's end).
    pub access: AccessChanges,
}

/// People as SCIM resources, for the directory's token.
#[derive(Clone)]
pub struct ScimUsers {
    pub(super) db: Db,
    pub(super) fx: Effects,
}

/// A person as a SCIM resource.
pub fn render(u: &DirectoryUser, base: &str) -> Value {
    let attributes = json!({
        "schemas": [USER_SCHEMA],
        "userName": u.email,
        "name": { "formatted": u.display_name },
        "displayName": u.display_name,
        "active": u.active,
        "emails": [{ "value": u.email, "type": "work", "primary": true }],
    });
    let common = Common {
        kind: "User",
        id: u.id,
        created: u.created_at,
        modified: u.updated_at,
        external_id: u.external_id.as_deref(),
    };
    resource(attributes, common, base)
}

fn text(raw: &str, what: &str) -> ScimResult<String> {
    let t = raw.trim();
    if t.chars().count() > MAX_TEXT || t.chars().any(char::is_control) {
        return Err(ScimError::bad(
            "invalidValue",
            format!("{what} is at most {MAX_TEXT} characters, without control characters."),
        ));
    }
    Ok(t.to_string())
}

fn email(raw: &str) -> ScimResult<String> {
    crate::domain::accounts::normalize_email(raw)
        .map_err(|_| ScimError::bad("invalidValue", "userName must be the person's email address."))
}

/// The email from `emails` (the primary one, else the first).
fn email_of(emails: &Value) -> Option<String> {
    let list = emails.as_array()?;
    let pick = list
        .iter()
        .find(|e| e.get("primary").and_then(Value::as_bool) == Some(true))
        .or_else(|| list.first())?;
    pick.get("value").and_then(Value::as_str).map(str::to_string)
}

/// The name from `displayName`, else `name.formatted`, else given and family names.
fn name_of(body: &Value) -> Option<String> {
    if let Some(n) = body.get("displayName").and_then(Value::as_str).filter(|s| !s.trim().is_empty()) {
        return Some(n.to_string());
    }
    let name = body.get("name")?;
    if let Some(f) = name.get("formatted").and_then(Value::as_str).filter(|s| !s.trim().is_empty()) {
        return Some(f.to_string());
    }
    let part = |k: &str| name.get(k).and_then(Value::as_str).unwrap_or("").trim().to_string();
    let joined = format!("{} {}", part("givenName"), part("familyName")).trim().to_string();
    (!joined.is_empty()).then_some(joined)
}

/// A whole User resource (create and replace) onto `u`.
fn read_resource(body: &Value, u: &mut DirectoryUser) -> ScimResult<()> {
    let user_name = body
        .get("userName")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| body.get("emails").and_then(email_of))
        .ok_or_else(|| ScimError::bad("invalidValue", "A User needs a userName (their email)."))?;
    u.email = email(&user_name)?;
    let name = name_of(body).unwrap_or_else(|| u.email.split('@').next().unwrap_or_default().to_string());
    u.display_name = text(&name, "displayName")?;
    u.external_id = match body.get("externalId") {
        Some(Value::String(x)) => Some(text(x, "externalId")?),
        _ => None,
    };
    u.active = match body.get("active") {
        None | Some(Value::Null) => true,
        Some(v) => patch::boolean(v)?,
    };
    Ok(())
}

/// One attribute set by path (PATCH add/replace, or a key of a path-less value).
fn set(u: &mut DirectoryUser, path: &str, value: &Value) -> ScimResult<()> {
    match path {
        "active" => u.active = patch::boolean(value)?,
        "username" => u.email = email(&patch::string(value, "userName")?)?,
        "displayname" | "name.formatted" => {
            u.display_name = text(&patch::string(value, "displayName")?, "displayName")?
        }
        "externalid" => u.external_id = Some(text(&patch::string(value, "externalId")?, "externalId")?),
        "emails" => {
            let e = email_of(value).map(Ok).unwrap_or_else(|| patch::string(value, "emails"))?;
            u.email = email(&e)?;
        }
        p if p.starts_with("emails[") && p.ends_with("].value") => {
            u.email = email(&patch::string(value, "emails")?)?
        }
        // Attributes of the schema Arbor does not keep: accepted, not stored.
        "name.givenname" | "name.familyname" | "name" | "title" | "preferredlanguage" | "locale"
        | "timezone" => {}
        p if p.starts_with("urn:") => {}
        other => {
            return Err(ScimError::bad(
                "invalidPath",
                format!("{other:?} is not an attribute of a User here."),
            ));
        }
    }
    Ok(())
}

fn apply(u: &mut DirectoryUser, ops: &[patch::Op]) -> ScimResult<()> {
    for op in ops {
        match (op.kind, op.path.as_deref(), op.value.as_ref()) {
            (OpKind::Remove, Some("externalid"), _) => u.external_id = None,
            (OpKind::Remove, Some(p), _) => {
                return Err(ScimError::bad("noTarget", format!("{p:?} cannot be removed from a User.")));
            }
            (_, Some(p), Some(v)) => set(u, p, v)?,
            (_, None, Some(Value::Object(attrs))) => {
                for (k, v) in attrs {
                    if k.eq_ignore_ascii_case("name") {
                        if let Some(f) = v.get("formatted") {
                            set(u, "name.formatted", f)?;
                        }
                        continue;
                    }
                    set(u, &k.to_lowercase(), v)?;
                }
            }
            _ => {
                return Err(ScimError::bad(
                    "invalidValue",
                    "A path-less operation's value is an object of attributes.",
                ));
            }
        }
    }
    Ok(())
}

async fn found(db: &Db, id: &str) -> ScimResult<DirectoryUser> {
    let id = Uuid::parse_str(id).map_err(|_| ScimError::not_found("User"))?;
    repo::find_user(db, id).await?.ok_or_else(|| ScimError::not_found("User"))
}

impl ScimUsers {
    /// `GET /Users/{id}`.
    pub async fn get(&self, _admin: &Admin, base: &str, id: &str) -> ScimResult<Value> {
        Ok(render(&found(&self.db, id).await?, base))
    }

    /// `GET /Users`.
    pub async fn list(
        &self,
        _admin: &Admin,
        base: &str,
        raw_filter: Option<&str>,
        page: Page,
    ) -> ScimResult<Value> {
        let f = filter::parse(raw_filter, "User")?;
        let (rows, total) = repo::list_users(&self.db, &f, page.start - 1, page.count).await?;
        Ok(list_response(rows.iter().map(|u| render(u, base)).collect(), total, page))
    }

    /// `POST /Users`.
    pub async fn create(
        &self,
        _admin: &Admin,
        origin: &Origin,
        base: &str,
        body: &Value,
    ) -> ScimResult<Value> {
        let db = &self.db;
        let now = chrono::Utc::now();
        let mut u = DirectoryUser {
            id: Uuid::nil(),
            email: String::new(),
            display_name: String::new(),
            external_id: None,
            active: true,
            created_at: now,
            updated_at: now,
        };
        read_resource(body, &mut u)?;
        if repo::email_taken(db, &u.email, None).await? {
            return Err(ScimError::taken(format!("A person with the userName {} exists.", u.email)));
        }
        let made =
            repo::insert_user(db, &u.email, &u.display_name, u.external_id.as_deref(), u.active).await?;
        audited(
            db,
            origin,
            "scim.user.create",
            &format!("user:{}", made.email),
            json!({ "user_id": made.id }),
        )
        .await?;
        Ok(render(&made, base))
    }

    /// `PUT /Users/{id}`.
    pub async fn replace(
        &self,
        admin: &Admin,
        origin: &Origin,
        base: &str,
        id: &str,
        body: &Value,
    ) -> ScimResult<Value> {
        self.change(admin, origin, base, id, |u| read_resource(body, u)).await
    }

    /// `PATCH /Users/{id}`.
    pub async fn modify(
        &self,
        admin: &Admin,
        origin: &Origin,
        base: &str,
        id: &str,
        body: &Value,
    ) -> ScimResult<Value> {
        let ops = patch::parse(body)?;
        self.change(admin, origin, base, id, |u| apply(u, &ops)).await
    }

    /// A person changed by `edit`, saved, and shown as they now are.
    async fn change(
        &self,
        admin: &Admin,
        origin: &Origin,
        base: &str,
        id: &str,
        edit: impl FnOnce(&mut DirectoryUser) -> ScimResult<()>,
    ) -> ScimResult<Value> {
        let db = &self.db;
        let before = found(db, id).await?;
        let mut after = before.clone();
        edit(&mut after)?;
        save(db, &self.fx, admin, origin, &before, &after).await?;
        Ok(render(&found(db, id).await?, base))
    }

    /// `DELETE /Users/{id}`: the account is disabled and kept (an admin deletes it for good); SCIM
    /// no longer sees it.
    pub async fn delete(&self, admin: &Admin, origin: &Origin, id: &str) -> ScimResult<()> {
        let db = &self.db;
        let u = found(db, id).await?;
        not_self(admin, u.id)?;
        if !repo::mark_deleted(db, u.id).await? {
            return Err(ScimError::not_found("User"));
        }
        deactivated(db, &self.fx, u.id).await?;
        audited(db, origin, "scim.user.delete", &format!("user:{}", u.email), json!({ "user_id": u.id }))
            .await
    }
}

/// The token's own account stays usable: provisioning cannot lock itself out.
fn not_self(admin: &Admin, id: Uuid) -> ScimResult<()> {
    if admin.actor().user_id() == id {
        return Err(ScimError::bad(
            "mutability",
            "The account whose token provisions cannot be deactivated or deleted by it.",
        ));
    }
    Ok(())
}

async fn save(
    db: &Db,
    fx: &Effects,
    admin: &Admin,
    origin: &Origin,
    before: &DirectoryUser,
    after: &DirectoryUser,
) -> ScimResult<()> {
    if before.active && !after.active {
        not_self(admin, after.id)?;
    }
    if after.email != before.email && repo::email_taken(db, &after.email, Some(after.id)).await? {
        return Err(ScimError::taken(format!("A person with the userName {} exists.", after.email)));
    }
    repo::update_user(db, after).await?;
    if before.active && !after.active {
        deactivated(db, fx, after.id).await?;
    }
    audited(
        db,
        origin,
        "scim.user.update",
        &format!("user:{}", after.email),
        json!({ "user_id": after.id, "active": after.active }),
    )
    .await
}

/// Ends everything a deactivated person holds open: browser sessions, tokens, runs, streams.
async fn deactivated(db: &Db, fx: &Effects, id: Uuid) -> ScimResult<()> {
    auth_sessions::delete_for_user(db, id).await?;
    api_tokens::revoke_all(db, id, chrono::Utc::now()).await?;
    fx.runs.cancel_owned(id);
    fx.access.announce(Uuid::nil());
    Ok(())
}
