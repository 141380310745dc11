//! Directory provisioning: SCIM 2.0 (RFC 7643 resources, RFC 7644 protocol) for Users and
//! Groups, so an identity provider (Entra ID, Okta…) creates, updates, deactivates and deletes
//! accounts and groups. A caller proves itself with an API token of scope `scim` belonging to an
//! admin. Deactivating or deleting a person ends their browser sessions, revokes their tokens
//! and stops their runs at once; their data stays until an admin deletes the account.
//!
//! Errors are SCIM's own ([`ScimError`], RFC 7644 §3.12), not the domain's: the web layer sends
//! them as they are.

pub mod filter;
pub mod groups;
pub mod patch;
pub mod users;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::domain::accounts::api_tokens::{self, Refusal, Scope};
use crate::domain::authz::Admin;
use crate::domain::{DomainError, DomainResult};
use crate::storage::Db;

/// The SCIM directory as a service, built once in the app state: its tokens (admins make and
/// revoke them in the console), authenticating a request with one, and the people and groups it
/// provisions.
#[derive(Clone)]
pub struct Directory {
    tokens: api_tokens::ApiTokens,
    /// People.
    pub users: users::ScimUsers,
    /// Groups.
    pub groups: groups::ScimGroups,
}

impl Directory {
    /// The service over this database; deactivating someone stops their `runs` and ends their
    /// streams through `access`.
    pub fn new(
        db: Db,
        runs: crate::events::RunRegistry,
        access: crate::domain::teams::changes::AccessChanges,
    ) -> Directory {
        let fx = users::Effects { runs, access };
        Directory {
            users: users::ScimUsers { db: db.clone(), fx: fx.clone() },
            groups: groups::ScimGroups { db: db.clone(), fx },
            tokens: api_tokens::ApiTokens::new(db),
        }
    }
}

/// The core User schema.
pub const USER_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
/// The core Group schema.
pub const GROUP_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:Group";
/// A list response.
pub const LIST_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
/// A PATCH request.
pub const PATCH_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
/// An error.
pub const ERROR_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:Error";

/// Most resources one list page holds (a larger `count` is cut to this).
pub const MAX_PAGE: u64 = 200;
/// Largest request body, in bytes.
pub const MAX_BODY: usize = 1024 * 1024;
/// Most operations in one PATCH, and most members one request names.
pub const MAX_OPERATIONS: usize = 1_000;

/// A SCIM error response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScimError {
    /// HTTP status.
    pub status: u16,
    /// RFC 7644 `scimType`, when one applies.
    pub scim_type: Option<&'static str>,
    /// What went wrong, for people.
    pub detail: String,
}

impl ScimError {
    /// A 400 with a `scimType`.
    pub fn bad(scim_type: &'static str, detail: impl Into<String>) -> ScimError {
        ScimError { status: 400, scim_type: Some(scim_type), detail: detail.into() }
    }

    /// A 404.
    pub fn not_found(what: &str) -> ScimError {
        ScimError { status: 404, scim_type: None, detail: format!("{what} not found.") }
    }

    /// A 409 `uniqueness`.
    pub fn taken(detail: impl Into<String>) -> ScimError {
        ScimError { status: 409, scim_type: Some("uniqueness"), detail: detail.into() }
    }

    /// The response body.
    pub fn body(&self) -> Value {
        let mut body =
            json!({ "schemas": [ERROR_SCHEMA], "status": self.status.to_string(), "detail": self.detail });
        if let Some(t) = self.scim_type {
            body["scimType"] = json!(t);
        }
        body
    }
}

impl From<DomainError> for ScimError {
    fn from(e: DomainError) -> ScimError {
        match e {
            DomainError::NotFound => ScimError::not_found("Resource"),
            DomainError::Invalid(m) => ScimError::bad("invalidValue", m),
            DomainError::Conflict(m) => ScimError::taken(m),
            DomainError::Forbidden => ScimError { status: 403, scim_type: None, detail: "Forbidden.".into() },
            other => {
                tracing::error!(error = %other, "SCIM request failed");
                ScimError { status: 500, scim_type: None, detail: "Something went wrong on our side.".into() }
            }
        }
    }
}

impl From<crate::storage::StorageError> for ScimError {
    fn from(e: crate::storage::StorageError) -> ScimError {
        DomainError::from(e).into()
    }
}

/// What a SCIM call returns.
pub type ScimResult<T> = Result<T, ScimError>;

impl Directory {
    /// Checks a SCIM caller's bearer token: scope `scim`, its owner an active admin.
    pub async fn authenticate(&self, bearer: Option<&str>) -> ScimResult<Admin> {
        let unauthorized = |detail: &str| ScimError { status: 401, scim_type: None, detail: detail.into() };
        let token =
            bearer.ok_or_else(|| unauthorized("Send a SCIM token as Authorization: Bearer <token>."))?;
        match self.tokens.authenticate(token).await? {
            Ok(caller) if caller.scope == Scope::Scim => caller.actor.admin().map_err(|_| ScimError {
                status: 403,
                scim_type: None,
                detail: "The token's owner is no longer an admin.".into(),
            }),
            Ok(_) => Err(ScimError {
                status: 403,
                scim_type: None,
                detail: "Only a token of scope scim may provision.".into(),
            }),
            Err(Refusal::Disabled) => Err(ScimError {
                status: 403,
                scim_type: None,
                detail: "The token's owner is disabled.".into(),
            }),
            Err(Refusal::Invalid) => {
                Err(unauthorized("The token is not valid (unknown, revoked or expired)."))
            }
        }
    }

    /// The admin's SCIM tokens, for the console.
    pub async fn tokens(&self, admin: &Admin) -> DomainResult<Vec<api_tokens::TokenRow>> {
        Ok(self
            .tokens
            .list(admin.actor())
            .await?
            .into_iter()
            .filter(|t| t.scope == Scope::Scim.as_str())
            .collect())
    }

    /// Makes a SCIM token for the admin (shown once). It works while they are an active admin.
    pub async fn issue_token(
        &self,
        admin: &Admin,
        origin: &crate::domain::audit::Origin,
        name: &str,
    ) -> DomainResult<api_tokens::Created> {
        self.tokens.create(admin.actor(), origin, name, Scope::Scim, None).await
    }

    /// Revokes one of the admin's SCIM tokens.
    pub async fn revoke_token(
        &self,
        admin: &Admin,
        origin: &crate::domain::audit::Origin,
        id: uuid::Uuid,
    ) -> DomainResult<()> {
        self.tokens.revoke(admin.actor(), origin, id).await
    }
}

/// A list request's paging: `startIndex` (1-based) and `count`, capped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// 1-based index of the first resource.
    pub start: u64,
    /// Most resources to return.
    pub count: u64,
}

impl Page {
    /// From the query's raw values; anything unreadable is a 400 (RFC 7644 §3.4.2.4 says to
    /// treat values below 1 as 1 and negative counts as 0).
    pub fn parse(start: Option<&str>, count: Option<&str>) -> ScimResult<Page> {
        let num = |raw: Option<&str>, name: &str, default: i64| -> ScimResult<i64> {
            match raw.map(str::trim).filter(|s| !s.is_empty()) {
                None => Ok(default),
                Some(s) => s
                    .parse::<i64>()
                    .map_err(|_| ScimError::bad("invalidValue", format!("{name} must be a number."))),
            }
        };
        let start = num(start, "startIndex", 1)?.max(1) as u64;
        let count = (num(count, "count", MAX_PAGE as i64)?.max(0) as u64).min(MAX_PAGE);
        Ok(Page { start, count })
    }
}

/// A list response around already-rendered resources.
pub fn list_response(resources: Vec<Value>, total: u64, page: Page) -> Value {
    json!({
        "schemas": [LIST_SCHEMA],
        "totalResults": total,
        "startIndex": page.start,
        "itemsPerPage": resources.len(),
        "Resources": resources,
    })
}

/// Parses a request body: JSON, an object, under the size cap (checked by the caller too).
pub fn parse_body(bytes: &[u8]) -> ScimResult<Value> {
    if bytes.len() > MAX_BODY {
        return Err(ScimError {
            status: 413,
            scim_type: None,
            detail: format!("A request body is at most {MAX_BODY} bytes."),
        });
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(ScimError::bad("invalidSyntax", "The body must be a JSON object.")),
        Err(e) => Err(ScimError::bad("invalidSyntax", format!("The body is not JSON: {e}."))),
    }
}

/// `/ServiceProviderConfig`: what this server supports.
pub fn service_provider_config(base: &str) -> Value {
    json!({
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"],
        "documentationUri": "https://github.com/arbor/arbor#directory-provisioning-scim-20",
        "patch": { "supported": true },
        "bulk": { "supported": false, "maxOperations": 0, "maxPayloadSize": 0 },
        "filter": { "supported": true, "maxResults": MAX_PAGE },
        "changePassword": { "supported": false },
        "sort": { "supported": false },
        "etag": { "supported": false },
        "authenticationSchemes": [{
            "type": "oauthbearertoken",
            "name": "Bearer token",
            "description": "An Arbor API token of scope scim, made under Admin → Directory.",
            "primary": true
        }],
        "meta": { "resourceType": "ServiceProviderConfig", "location": format!("{base}/ServiceProviderConfig") }
    })
}

/// `/ResourceTypes`: Users and Groups.
pub fn resource_types(base: &str) -> Vec<Value> {
    [("User", "/Users", USER_SCHEMA), ("Group", "/Groups", GROUP_SCHEMA)]
        .into_iter()
        .map(|(name, endpoint, schema)| {
            json!({
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"],
                "id": name,
                "name": name,
                "endpoint": endpoint,
                "schema": schema,
                "meta": { "resourceType": "ResourceType", "location": format!("{base}/ResourceTypes/{name}") }
            })
        })
        .collect()
}

/// `/Schemas`: the attributes of the User and Group schemas this server keeps.
pub fn schemas(base: &str) -> Vec<Value> {
    let attr = |name: &str, kind: &str, required: bool, uniqueness: &str| {
        json!({
            "name": name, "type": kind, "multiValued": false, "required": required,
            "caseExact": false, "mutability": "readWrite", "returned": "default", "uniqueness": uniqueness
        })
    };
    let sub = |name: &str, kind: &str| {
        json!({
            "name": name, "type": kind, "multiValued": false, "required": false, "caseExact": false,
            "mutability": "readWrite", "returned": "default", "uniqueness": "none"
        })
    };
    let name = json!({
        "name": "name", "type": "complex", "multiValued": false, "required": false,
        "mutability": "readWrite", "returned": "default", "uniqueness": "none",
        "subAttributes": [sub("formatted", "string"), sub("familyName", "string"), sub("givenName", "string")]
    });
    let emails = json!({
        "name": "emails", "type": "complex", "multiValued": true, "required": false,
        "mutability": "readWrite", "returned": "default", "uniqueness": "none",
        "subAttributes": [sub("value", "string"), sub("type", "string"), sub("primary", "boolean")]
    });
    let members = json!({
        "name": "members", "type": "complex", "multiValued": true, "required": false,
        "mutability": "readWrite", "returned": "default", "uniqueness": "none",
        "subAttributes": [
            { "name": "value", "type": "string", "multiValued": false, "required": false, "caseExact": false,
              "mutability": "immutable", "returned": "default", "uniqueness": "none" },
            { "name": "$ref", "type": "reference", "referenceTypes": ["User", "Group"], "multiValued": false,
              "required": false, "caseExact": false, "mutability": "immutable", "returned": "default", "uniqueness": "none" },
            { "name": "display", "type": "string", "multiValued": false, "required": false, "caseExact": false,
              "mutability": "readOnly", "returned": "default", "uniqueness": "none" }
        ]
    });
    let schema = |id: &str, name_: &str, attributes: Vec<Value>| {
        json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Schema"],
            "id": id, "name": name_, "description": format!("{name_} account"),
            "attributes": attributes,
            "meta": { "resourceType": "Schema", "location": format!("{base}/Schemas/{id}") }
        })
    };
    vec![
        schema(
            USER_SCHEMA,
            "User",
            vec![
                attr("userName", "string", true, "server"),
                name,
                attr("displayName", "string", false, "none"),
                attr("active", "boolean", false, "none"),
                emails,
            ],
        ),
        schema(GROUP_SCHEMA, "Group", vec![attr("displayName", "string", true, "none"), members]),
    ]
}

/// Renders a domain result for callers who only need the SCIM error.
pub fn domain<T>(r: DomainResult<T>) -> ScimResult<T> {
    r.map_err(ScimError::from)
}

/// Records a provisioning change in the audit log (in the caller's transaction when it has one).
pub(crate) async fn audited<C: crate::storage::Conn>(
    db: &C,
    origin: &crate::domain::audit::Origin,
    action: &str,
    target: &str,
    details: Value,
) -> ScimResult<()> {
    domain(crate::domain::audit::record(db, origin, action, target, details).await)
}

/// What every resource carries besides its own attributes: its id, `meta` and the provider's
/// `externalId` when it has one.
pub(crate) struct Common<'a> {
    /// `User` or `Group`.
    pub kind: &'a str,
    /// The resource's id.
    pub id: Uuid,
    /// When it was made.
    pub created: chrono::DateTime<chrono::Utc>,
    /// When it last changed.
    pub modified: chrono::DateTime<chrono::Utc>,
    /// The identity provider's id for it.
    pub external_id: Option<&'a str>,
}

/// A resource as SCIM shows it: `attributes` (an object) with the id, `meta` and `externalId`
/// added; its location is under `base`.
pub(crate) fn resource(mut attributes: Value, common: Common<'_>, base: &str) -> Value {
    attributes["id"] = json!(common.id.to_string());
    attributes["meta"] = json!({
        "resourceType": common.kind,
        "created": common.created.to_rfc3339(),
        "lastModified": common.modified.to_rfc3339(),
        "location": format!("{base}/{}s/{}", common.kind, common.id),
    });
    if let Some(x) = common.external_id {
        attributes["externalId"] = json!(x);
    }
    attributes
}
