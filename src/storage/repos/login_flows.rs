//! Queries over `login_flows`: pending OIDC sign-ins, each taken at most once.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use uuid::Uuid;

use crate::storage::entities::login_flow;
use crate::storage::{Db, StorageResult};

/// A pending sign-in.
#[derive(Debug, Clone)]
pub struct LoginFlow {
    /// `state` sent to the provider.
    pub state: String,
    /// `nonce` sent to the provider.
    pub nonce: String,
    /// PKCE verifier.
    pub pkce_verifier: String,
    /// Local path to return to.
    pub return_to: String,
    /// The invitation being accepted, when the sign-in started from one.
    pub invitation_id: Option<Uuid>,
    /// Setup token, when started with an open setup link.
    pub setup_token: Option<String>,
}

/// Stores a pending sign-in under the hash of the browser's flow cookie.
pub async fn insert(
    db: &Db,
    id_hash: &str,
    flow: &LoginFlow,
    expires_at: DateTime<Utc>,
) -> StorageResult<()> {
    // Old, unfinished flows are of no use to anyone.
    login_flow::Entity::delete_many().filter(login_flow::Column::ExpiresAt.lt(Utc::now())).exec(db).await?;
    login_flow::ActiveModel {
        id: Set(id_hash.to_string()),
        state: Set(flow.state.clone()),
        nonce: Set(flow.nonce.clone()),
        pkce_verifier: Set(flow.pkce_verifier.clone()),
        return_to: Set(flow.return_to.clone()),
        invitation_id: Set(flow.invitation_id),
        setup_token: Set(flow.setup_token.clone()),
        created_at: Set(Utc::now()),
        expires_at: Set(expires_at),
    }
    .insert(db)
    .await?;
    Ok(())
}

/// Removes and returns the pending sign-in, if it exists and has not expired. Only one caller
/// can take it.
pub async fn take(db: &Db, id_hash: &str) -> StorageResult<Option<LoginFlow>> {
    let Some(row) = login_flow::Entity::find_by_id(id_hash.to_string()).one(db).await? else {
        return Ok(None);
    };
    let deleted =
        login_flow::Entity::delete_many().filter(login_flow::Column::Id.eq(id_hash)).exec(db).await?;
    if deleted.rows_affected != 1 || row.expires_at < Utc::now() {
        return Ok(None);
    }
    Ok(Some(LoginFlow {
        state: row.state,
        nonce: row.nonce,
        pkce_verifier: row.pkce_verifier,
        return_to: row.return_to,
        invitation_id: row.invitation_id,
        setup_token: row.setup_token,
    }))
}
