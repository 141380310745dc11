//! Prompt templates: each member's library of system prompt templates, checked like a
//! workspace's prompt when saved. A template may be shared with one of its owner's groups:
//! the group's members read it (and copy it into their own prompts), only its owner changes it.

use super::Sessions;
use serde::Serialize;

use super::*;
use crate::domain::audit::{self, Origin};
use crate::storage::repos::groups as group_repo;
use crate::storage::repos::prompt_templates as library_repo;

/// Most templates one member keeps.
pub const MAX_TEMPLATES: u64 = 100;
/// Most templates shared with the reader that their settings list.
pub const SHARED_LISTED: u64 = 200;

/// A template as the library lists it.
#[derive(Debug, Clone, Serialize)]
pub struct PromptTemplate {
    /// Row id.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// The template.
    pub body: String,
    /// The group it is shared with, for its owner's list.
    pub group_id: Option<Uuid>,
    /// Who keeps it (shared templates only).
    pub owner: String,
    /// The group it reached the reader through (shared templates only).
    pub group: String,
}

fn view(r: crate::model::sessions::PromptTemplateRecord) -> PromptTemplate {
    PromptTemplate {
        id: r.id,
        name: r.name,
        body: r.body,
        group_id: r.group_id,
        owner: String::new(),
        group: String::new(),
    }
}

impl Sessions {
    /// The actor's templates.
    pub async fn my_templates(&self, actor: &Actor) -> DomainResult<Vec<PromptTemplate>> {
        let db = &self.db;
        Ok(library_repo::list_owned(db, actor.user_id()).await?.into_iter().map(view).collect())
    }

    /// Colleagues' templates shared with the actor's groups.
    pub async fn templates_shared_with_me(&self, actor: &Actor) -> DomainResult<Vec<PromptTemplate>> {
        let db = &self.db;
        let groups = group_repo::groups_of(db, actor.user_id()).await?;
        let ids: Vec<Uuid> = groups.iter().map(|g| g.id).collect();
        let rows = library_repo::shared_with(db, actor.user_id(), &ids, SHARED_LISTED).await?;
        let owners: Vec<Uuid> = rows.iter().map(|r| r.owner_id).collect();
        let labels = crate::domain::accounts::names(db, &owners).await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let owner = labels.get(&r.owner_id).cloned().unwrap_or_default();
                let group = groups
                    .iter()
                    .find(|g| Some(g.id) == r.group_id)
                    .map(|g| g.name.clone())
                    .unwrap_or_default();
                PromptTemplate { owner, group, ..view(r) }
            })
            .collect())
    }

    /// Saves a new template, checked like a workspace's system prompt.
    pub async fn create_template(
        &self,
        actor: &Actor,
        origin: &Origin,
        name: &str,
        body: &str,
    ) -> DomainResult<PromptTemplate> {
        let db = &self.db;
        let name = clean_name(name, "template")?;
        if body.trim().is_empty() {
            return Err(DomainError::Invalid("Write the template.".into()));
        }
        check_prompt(Some(body)).await?;
        if library_repo::count_owned(db, actor.user_id()).await? >= MAX_TEMPLATES {
            return Err(DomainError::Invalid(format!("You can keep at most {MAX_TEMPLATES} templates.")));
        }
        let row = library_repo::insert(db, actor.user_id(), &name, body).await?;
        audit::record(
            db,
            origin,
            "prompt.create",
            &format!("prompt:{name}"),
            serde_json::json!({ "id": row.id }),
        )
        .await?;
        Ok(view(row))
    }

    /// Deletes one of the actor's templates.
    pub async fn delete_template(&self, actor: &Actor, origin: &Origin, id: Uuid) -> DomainResult<()> {
        let db = &self.db;
        let row = library_repo::find_owned(db, actor.user_id(), id).await?.ok_or(DomainError::NotFound)?;
        library_repo::delete_owned(db, actor.user_id(), id).await?;
        audit::record(
            db,
            origin,
            "prompt.delete",
            &format!("prompt:{}", row.name),
            serde_json::json!({ "id": id }),
        )
        .await
    }

    /// Shares one of the actor's templates with one of their groups (its id), or nobody (blank).
    pub async fn share_template(
        &self,
        actor: &Actor,
        origin: &Origin,
        id: Uuid,
        group: &str,
    ) -> DomainResult<()> {
        let db = &self.db;
        let row = library_repo::find_owned(db, actor.user_id(), id).await?.ok_or(DomainError::NotFound)?;
        let group = crate::domain::teams::groups::one_of_mine(db, actor, group).await?;
        library_repo::set_group(db, actor.user_id(), id, group.as_ref().map(|g| g.id)).await?;
        audit::record(
            db,
            origin,
            "prompt.share",
            &format!("prompt:{}", row.name),
            serde_json::json!({ "id": id, "group": group.map(|g| g.name) }),
        )
        .await
    }
}
