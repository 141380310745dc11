//! Boundaries Arbor writes at the end of a path (a summary, a clear): where the context sent to
//! the model starts afresh.

use chrono::Utc;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use super::{NewMessage, choose, insert_kind, to_i64, touch_session};
use crate::model::messages::{MessageKind, MessageUsage};
use crate::storage::entities::message;
use crate::storage::{Db, StorageResult};

/// A boundary (summary, clear) at the end of the active path, chosen, with the usage of the
/// model call that wrote it if any; fails when `expected_leaf` is no longer the path's end
/// (someone added a message meanwhile), so a summary never lands beside what it summarises.
pub async fn insert_boundary(
    db: &Db,
    session_id: Uuid,
    m: &NewMessage<'_>,
    kind: MessageKind,
    usage: Option<MessageUsage>,
) -> StorageResult<bool> {
    let txn = crate::storage::begin_write(db).await?;
    if let Some(parent) = m.parent_id {
        let leaf = message::Entity::find_by_id(parent)
            .filter(message::Column::SessionId.eq(session_id))
            .one(&txn)
            .await?;
        // The end of the path: no children, or it chose itself ("Continue from here").
        let ends_path = leaf.as_ref().is_some_and(|l| l.chosen_child_id == Some(l.id));
        let children = sea_orm::PaginatorTrait::count(
            message::Entity::find().filter(message::Column::ParentId.eq(parent)),
            &txn,
        )
        .await?;
        if leaf.is_none() || (children > 0 && !ends_path) {
            return Ok(false);
        }
    }
    let now = Utc::now();
    insert_kind(&txn, session_id, m, kind, now).await?;
    if let Some(u) = usage {
        message::Entity::update_many()
            .col_expr(message::Column::TokensIn, Expr::value(to_i64(u.input)))
            .col_expr(message::Column::TokensOut, Expr::value(to_i64(u.output)))
            .col_expr(message::Column::TokensCached, Expr::value(to_i64(u.cached)))
            .col_expr(message::Column::CostMicros, Expr::value(u.cost_micros))
            .col_expr(message::Column::UsageEstimated, Expr::value(u.estimated))
            .filter(message::Column::Id.eq(m.id))
            .exec(&txn)
            .await?;
    }
    choose(&txn, session_id, m.parent_id, m.id).await?;
    touch_session(&txn, session_id, None).await?;
    txn.commit().await?;
    Ok(true)
}
