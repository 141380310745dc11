//! SCIM Groups: `displayName` is the group's name (unique ignoring case), `members` its people
//! (by their SCIM ids; ids of nobody are refused, not stored). A group pushed by the identity
//! provider is marked as made by SCIM; the console shows it so.

use serde_json::{Value, json};
use uuid::Uuid;

use super::patch::{self, OpKind};
use super::users::Effects;

/// Groups as SCIM resources, for the directory's token.
#[derive(Clone)]
pub struct ScimGroups {
    pub(super) db: Db,
    pub(super) fx: Effects,
}
use super::{
    Common, GROUP_SCHEMA, MAX_OPERATIONS, Page, ScimError, ScimResult, audited, filter, list_response,
    resource,
};
use crate::domain::audit::Origin;
use crate::domain::authz::Admin;
use crate::domain::teams::groups::check_name;
use crate::model::teams::DirectoryGroup;
use crate::storage::repos::{directory as repo, groups as groups_repo};
use crate::storage::{Db, Tx};

/// Most members a group's resource lists.
const MEMBERS_LISTED: u64 = 10_000;

async fn render(db: &Db, g: &DirectoryGroup, base: &str) -> ScimResult<Value> {
    let members: Vec<Value> = repo::members(db, g.id, MEMBERS_LISTED)
        .await?
        .into_iter()
        .map(|(id, email)| json!({ "value": id.to_string(), "display": email }))
        .collect();
    let attributes = json!({ "schemas": [GROUP_SCHEMA], "displayName": g.name, "members": members });
    let common = Common {
        kind: "Group",
        id: g.id,
        created: g.created_at,
        modified: g.created_at,
        external_id: g.external_id.as_deref(),
    };
    Ok(resource(attributes, common, base))
}

/// The people a `members` value names: `[{"value": id}, …]`, every id someone SCIM sees.
async fn member_ids(db: &Db, value: &Value) -> ScimResult<Vec<Uuid>> {
    let list = match value {
        Value::Array(a) => a.as_slice(),
        Value::Object(_) => std::slice::from_ref(value),
        _ => return Err(ScimError::bad("invalidValue", "members is a list of {\"value\": id}.")),
    };
    if list.len() > MAX_OPERATIONS {
        return Err(ScimError::bad("tooMany", format!("At most {MAX_OPERATIONS} members a request.")));
    }
    let mut ids = Vec::with_capacity(list.len());
    for m in list {
        let raw = m
            .get("value")
            .and_then(Value::as_str)
            .ok_or_else(|| ScimError::bad("invalidValue", "Each member has a value (a User id)."))?;
        ids.push(
            Uuid::parse_str(raw)
                .map_err(|_| ScimError::bad("invalidValue", format!("{raw:?} is not a User id here.")))?,
        );
    }
    ids.sort_unstable();
    ids.dedup();
    let known = repo::existing_users(db, &ids).await?;
    if let Some(missing) = ids.iter().find(|id| !known.contains(id)) {
        return Err(ScimError::bad("invalidValue", format!("No User has the id {missing}.")));
    }
    Ok(ids)
}

async fn found(db: &Db, id: &str) -> ScimResult<DirectoryGroup> {
    let id = Uuid::parse_str(id).map_err(|_| ScimError::not_found("Group"))?;
    repo::find_group(db, id).await?.ok_or_else(|| ScimError::not_found("Group"))
}

fn name(value: &Value) -> ScimResult<String> {
    check_name(&patch::string(value, "displayName")?)
        .map_err(|e| ScimError::bad("invalidValue", e.to_string()))
}

impl ScimGroups {
    /// `GET /Groups/{id}`.
    pub async fn get(&self, _admin: &Admin, base: &str, id: &str) -> ScimResult<Value> {
        let db = &self.db;
        render(db, &found(db, id).await?, base).await
    }

    /// `GET /Groups`.
    pub async fn list(
        &self,
        _admin: &Admin,
        base: &str,
        raw_filter: Option<&str>,
        page: Page,
    ) -> ScimResult<Value> {
        let db = &self.db;
        let f = filter::parse(raw_filter, "Group")?;
        let (rows, total) = repo::list_groups(db, &f, page.start - 1, page.count).await?;
        let mut out = Vec::with_capacity(rows.len());
        for g in &rows {
            out.push(render(db, g, base).await?);
        }
        Ok(list_response(out, total, page))
    }

    /// `POST /Groups`: the group and its members in one transaction.
    pub async fn create(
        &self,
        _admin: &Admin,
        origin: &Origin,
        base: &str,
        body: &Value,
    ) -> ScimResult<Value> {
        let db = &self.db;
        let group_name = name(body.get("displayName").unwrap_or(&Value::Null))?;
        let external =
            body.get("externalId").and_then(Value::as_str).map(|s| s.chars().take(255).collect::<String>());
        let members = match body.get("members") {
            Some(v) if !v.is_null() => member_ids(db, v).await?,
            _ => Vec::new(),
        };
        if groups_repo::count(db).await? >= crate::domain::teams::groups::MAX_GROUPS {
            return Err(ScimError::bad("invalidValue", "The instance holds as many groups as it may."));
        }
        let tx = Tx::begin(db).await?;
        let Some(made) = repo::insert_group(tx.conn(), &group_name, external.as_deref()).await? else {
            return Err(ScimError::taken(format!("There is already a group called {group_name}.")));
        };
        for id in &members {
            groups_repo::add_member(tx.conn(), made.id, *id).await?;
        }
        audited(
            tx.conn(),
            origin,
            "scim.group.create",
            &format!("group:{group_name}"),
            json!({ "group_id": made.id, "members": members.len() }),
        )
        .await?;
        tx.commit().await?;
        render(db, &made, base).await
    }

    /// `PUT /Groups/{id}`: name, external id and (when sent) the whole member list.
    pub async fn replace(
        &self,
        _admin: &Admin,
        origin: &Origin,
        base: &str,
        id: &str,
        body: &Value,
    ) -> ScimResult<Value> {
        let db = &self.db;
        let mut group = found(db, id).await?;
        group.name = name(body.get("displayName").unwrap_or(&Value::Null))?;
        group.external_id =
            body.get("externalId").and_then(Value::as_str).map(|s| s.chars().take(255).collect());
        let members = match body.get("members") {
            Some(v) if !v.is_null() => Some(member_ids(db, v).await?),
            _ => None,
        };
        let change = Change { group, members, add: Vec::new(), remove: Vec::new() };
        self.save(origin, base, change).await
    }

    /// `PATCH /Groups/{id}`: rename, external id, members added, removed or replaced.
    pub async fn modify(
        &self,
        _admin: &Admin,
        origin: &Origin,
        base: &str,
        id: &str,
        body: &Value,
    ) -> ScimResult<Value> {
        let db = &self.db;
        let ops = patch::parse(body)?;
        let group = found(db, id).await?;
        let mut c = Change { group, members: None, add: Vec::new(), remove: Vec::new() };
        for op in &ops {
            match (op.kind, op.path.as_deref(), op.value.as_ref()) {
                (OpKind::Remove, Some("members"), None) => c.members = Some(Vec::new()),
                (OpKind::Remove, Some("members"), Some(v)) => c.remove.extend(member_ids(db, v).await?),
                (OpKind::Remove, Some(p), _) if p.starts_with("members[") => {
                    let raw = patch::member_filter(p).ok_or_else(|| {
                        ScimError::bad("invalidFilter", format!("{p:?} is not members[value eq \"id\"]."))
                    })?;
                    let uuid = Uuid::parse_str(&raw)
                        .map_err(|_| ScimError::bad("noTarget", format!("No member has the id {raw:?}.")))?;
                    c.remove.push(uuid);
                }
                (OpKind::Remove, Some("externalid"), _) => c.group.external_id = None,
                (OpKind::Remove, Some(p), _) => {
                    return Err(ScimError::bad(
                        "invalidPath",
                        format!("{p:?} cannot be removed from a Group."),
                    ));
                }
                (OpKind::Add, Some("members"), Some(v)) => c.add.extend(member_ids(db, v).await?),
                (OpKind::Replace, Some("members"), Some(v)) => c.members = Some(member_ids(db, v).await?),
                (_, Some("displayname"), Some(v)) => c.group.name = name(v)?,
                (_, Some("externalid"), Some(v)) => {
                    c.group.external_id = Some(patch::string(v, "externalId")?)
                }
                (_, None, Some(Value::Object(attrs))) => {
                    for (k, v) in attrs {
                        match k.to_lowercase().as_str() {
                            "displayname" => c.group.name = name(v)?,
                            "externalid" => c.group.external_id = Some(patch::string(v, "externalId")?),
                            "members" if op.kind == OpKind::Add => c.add.extend(member_ids(db, v).await?),
                            "members" => c.members = Some(member_ids(db, v).await?),
                            "id" | "schemas" | "meta" => {}
                            other => {
                                return Err(ScimError::bad(
                                    "invalidPath",
                                    format!("{other:?} is not an attribute of a Group here."),
                                ));
                            }
                        }
                    }
                }
                (_, Some(p), _) => {
                    return Err(ScimError::bad(
                        "invalidPath",
                        format!("{p:?} is not an attribute of a Group here."),
                    ));
                }
                _ => {
                    return Err(ScimError::bad(
                        "invalidValue",
                        "A path-less operation's value is an object of attributes.",
                    ));
                }
            }
        }
        self.save(origin, base, c).await
    }

    /// `DELETE /Groups/{id}`: the group goes, and with it what was shared with it.
    pub async fn delete(&self, _admin: &Admin, origin: &Origin, id: &str) -> ScimResult<()> {
        let db = &self.db;
        let g = found(db, id).await?;
        let tx = Tx::begin(db).await?;
        groups_repo::delete(tx.conn(), g.id).await?;
        audited(
            tx.conn(),
            origin,
            "scim.group.delete",
            &format!("group:{}", g.name),
            json!({ "group_id": g.id }),
        )
        .await?;
        tx.commit().await?;
        self.fx.access.announce(Uuid::nil());
        Ok(())
    }
}

/// What a PUT or PATCH makes of a group: its name, external id, and members when they change.
struct Change {
    group: DirectoryGroup,
    members: Option<Vec<Uuid>>,
    add: Vec<Uuid>,
    remove: Vec<Uuid>,
}

impl ScimGroups {
    /// Saves what a PUT or PATCH made of a group and shows it as it now is.
    async fn save(&self, origin: &Origin, base: &str, c: Change) -> ScimResult<Value> {
        let db = &self.db;
        let tx = Tx::begin(db).await?;
        if !repo::update_group(tx.conn(), &c.group).await? {
            return Err(ScimError::taken(format!("There is already a group called {}.", c.group.name)));
        }
        if let Some(all) = &c.members {
            repo::clear_members(tx.conn(), c.group.id).await?;
            for id in all {
                groups_repo::add_member(tx.conn(), c.group.id, *id).await?;
            }
        }
        for id in &c.add {
            groups_repo::add_member(tx.conn(), c.group.id, *id).await?;
        }
        for id in &c.remove {
            groups_repo::remove_member(tx.conn(), c.group.id, *id).await?;
        }
        audited(
            tx.conn(),
            origin,
            "scim.group.update",
            &format!("group:{}", c.group.name),
            json!({ "group_id": c.group.id }),
        )
        .await?;
        tx.commit().await?;
        // Someone may have left a group something was shared with.
        self.fx.access.announce(Uuid::nil());
        render(db, &found(db, &c.group.id.to_string()).await?, base).await
    }
}
