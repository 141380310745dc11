//! Queries over `workspaces` and `sessions`, always filtered by owner.

use chrono::Utc;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set};
use uuid::Uuid;

use crate::domain::chat::{ChatSession, Workspace};
use crate::storage::entities::{chat_session, workspace};
use crate::storage::{Db, StorageResult};

fn workspace_to_domain(m: workspace::Model) -> Workspace {
    Workspace {
        id: m.id,
        owner_id: m.owner_id,
        name: m.name,
        system_prompt: m.system_prompt,
        default_model: m.default_model,
    }
}

fn session_to_domain(m: chat_session::Model) -> ChatSession {
    ChatSession {
        id: m.id,
        workspace_id: m.workspace_id,
        owner_id: m.owner_id,
        title: m.title,
        system_prompt: m.system_prompt,
        model: m.model,
        params: m.params,
        active_root_id: m.active_root_id,
    }
}

/// Inserts a workspace with default settings.
pub async fn insert_workspace(db: &Db, owner_id: Uuid, name: &str) -> StorageResult<Workspace> {
    let now = Utc::now();
    let row = workspace::ActiveModel {
        id: Set(Uuid::now_v7()),
        owner_id: Set(owner_id),
        name: Set(name.to_string()),
        system_prompt: Set(None),
        default_model: Set(None),
        approval_mode: Set("suggest".into()),
        infer_titles: Set(true),
        settings: Set(serde_json::json!({})),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?;
    Ok(workspace_to_domain(row))
}

/// The owner's workspace with this id.
pub async fn find_workspace(db: &Db, owner_id: Uuid, id: Uuid) -> StorageResult<Option<Workspace>> {
    Ok(workspace::Entity::find_by_id(id)
        .filter(workspace::Column::OwnerId.eq(owner_id))
        .one(db)
        .await?
        .map(workspace_to_domain))
}

/// Inserts an empty session.
pub async fn insert_session(
    db: &Db,
    owner_id: Uuid,
    workspace_id: Uuid,
    title: &str,
) -> StorageResult<ChatSession> {
    let now = Utc::now();
    let row = chat_session::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        owner_id: Set(owner_id),
        title: Set(title.to_string()),
        title_user_set: Set(false),
        system_prompt: Set(None),
        model: Set(None),
        params: Set(serde_json::json!({})),
        approval_mode: Set(None),
        exposed_roots: Set(serde_json::json!([])),
        active_root_id: Set(None),
        archived: Set(false),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?;
    Ok(session_to_domain(row))
}

/// The owner's session with this id.
pub async fn find_session(db: &Db, owner_id: Uuid, id: Uuid) -> StorageResult<Option<ChatSession>> {
    Ok(chat_session::Entity::find_by_id(id)
        .filter(chat_session::Column::OwnerId.eq(owner_id))
        .one(db)
        .await?
        .map(session_to_domain))
}

/// The owner's workspaces, oldest first.
pub async fn list_workspaces(db: &Db, owner_id: Uuid) -> StorageResult<Vec<Workspace>> {
    Ok(workspace::Entity::find()
        .filter(workspace::Column::OwnerId.eq(owner_id))
        .order_by_asc(workspace::Column::CreatedAt)
        .all(db)
        .await?
        .into_iter()
        .map(workspace_to_domain)
        .collect())
}

/// The owner's sessions, most recently updated first.
pub async fn recent_sessions(db: &Db, owner_id: Uuid, limit: u64) -> StorageResult<Vec<ChatSession>> {
    Ok(chat_session::Entity::find()
        .filter(chat_session::Column::OwnerId.eq(owner_id))
        .filter(chat_session::Column::Archived.eq(false))
        .order_by_desc(chat_session::Column::UpdatedAt)
        .limit(limit)
        .all(db)
        .await?
        .into_iter()
        .map(session_to_domain)
        .collect())
}

/// The owner's session holding a message with this composer client id.
pub async fn session_with_client_id(db: &Db, owner_id: Uuid, client_id: &str) -> StorageResult<Option<Uuid>> {
    use crate::storage::entities::message;
    let Some(m) = message::Entity::find().filter(message::Column::ClientId.eq(client_id)).one(db).await?
    else {
        return Ok(None);
    };
    Ok(find_session(db, owner_id, m.session_id).await?.map(|s| s.id))
}

/// Deletes the owner's session; messages and runs go with it (foreign keys cascade).
pub async fn delete_session(db: &Db, owner_id: Uuid, id: Uuid) -> StorageResult<()> {
    chat_session::Entity::delete_many()
        .filter(chat_session::Column::Id.eq(id))
        .filter(chat_session::Column::OwnerId.eq(owner_id))
        .exec(db)
        .await?;
    Ok(())
}
