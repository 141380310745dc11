//! Queries over `tool_calls`, `approval_rules` and `todos`, and the steps of an agent run that
//! change the tree (a tool result or the next answer opened, a run paused or resumed).
//!
//! Callers pass a session they already checked belongs to the actor.

use chrono::Utc;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set};
use uuid::Uuid;

use super::messages::{NewMessage, choose, insert_message, parts_json, to_i64};
use crate::model::agent::ApprovalRule;
use crate::model::agent::HostRoot;
use crate::model::agent::Run;
use crate::model::agent::TodoRecord;
use crate::model::agent::ToolCall;
use crate::model::messages::{MessageStatus, MessageUsage};
use crate::model::sessions::Workspace;
use crate::providers::types::Part;
use crate::storage::entities::{approval_rule, host_root, message, run, todo, tool_call, workspace};
use crate::storage::repos::workspaces::workspace_to_domain;
use crate::storage::{Db, StorageResult};

/// A tool call to record.
pub struct NewToolCall<'a> {
    /// The run that proposed it.
    pub run_id: Uuid,
    /// Its session.
    pub session_id: Uuid,
    /// The session's owner.
    pub owner_id: Uuid,
    /// The assistant message holding the call.
    pub message_id: Uuid,
    /// The provider's call id.
    pub call_id: &'a str,
    /// Its place among the message's calls.
    pub position: i32,
    /// Tool name.
    pub tool_name: &'a str,
    /// Canonical JSON of the arguments.
    pub arguments: &'a str,
    /// SHA-256 of tool name and canonical arguments.
    pub args_hash: &'a str,
    /// SHA-256 of the tool's description and schema as offered.
    pub tool_digest: &'a str,
    /// The tool's description as offered, for the dialog.
    pub tool_description: Option<&'a str>,
    /// read, write, exec or network.
    pub risk: &'a str,
}

/// Records a proposed call, or returns the one already recorded for this message and call id.
pub async fn ensure_call(db: &Db, c: &NewToolCall<'_>) -> StorageResult<ToolCall> {
    if let Some(existing) = tool_call::Entity::find()
        .filter(tool_call::Column::MessageId.eq(c.message_id))
        .filter(tool_call::Column::CallId.eq(c.call_id))
        .one(db)
        .await?
    {
        return Ok(existing.into());
    }
    let now = Utc::now();
    Ok(tool_call::ActiveModel {
        id: Set(Uuid::now_v7()),
        run_id: Set(c.run_id),
        session_id: Set(c.session_id),
        owner_id: Set(c.owner_id),
        message_id: Set(c.message_id),
        call_id: Set(c.call_id.to_string()),
        position: Set(c.position),
        tool_name: Set(c.tool_name.to_string()),
        arguments: Set(c.arguments.to_string()),
        args_hash: Set(c.args_hash.to_string()),
        tool_digest: Set(c.tool_digest.to_string()),
        tool_description: Set(c.tool_description.map(str::to_string)),
        risk: Set(c.risk.to_string()),
        status: Set("proposed".into()),
        decision: Set(None),
        decided_by: Set(None),
        decided_at: Set(None),
        explanation: Set(None),
        diff: Set(None),
        result_message_id: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?
    .into())
}

/// A session's call by id (the owner checked by the caller through the session).
pub async fn find_call(db: &Db, session_id: Uuid, id: Uuid) -> StorageResult<Option<ToolCall>> {
    Ok(tool_call::Entity::find_by_id(id)
        .filter(tool_call::Column::SessionId.eq(session_id))
        .one(db)
        .await?
        .map(Into::into))
}

/// The calls of one assistant message, in order.
pub async fn calls_of_message(db: &Db, message_id: Uuid) -> StorageResult<Vec<ToolCall>> {
    Ok(tool_call::Entity::find()
        .filter(tool_call::Column::MessageId.eq(message_id))
        .order_by_asc(tool_call::Column::Position)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// The session's call whose result is this message, if any.
pub async fn call_by_result(db: &Db, session_id: Uuid, result_id: Uuid) -> StorageResult<Option<ToolCall>> {
    Ok(tool_call::Entity::find()
        .filter(tool_call::Column::SessionId.eq(session_id))
        .filter(tool_call::Column::ResultMessageId.eq(result_id))
        .one(db)
        .await?
        .map(Into::into))
}

/// Every call recorded in a session (for showing statuses on cards).
pub async fn calls_of_session(db: &Db, session_id: Uuid) -> StorageResult<Vec<ToolCall>> {
    Ok(tool_call::Entity::find()
        .filter(tool_call::Column::SessionId.eq(session_id))
        .order_by_asc(tool_call::Column::CreatedAt)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// The call of the session waiting for a decision, if any.
pub async fn pending_call(db: &Db, session_id: Uuid) -> StorageResult<Option<ToolCall>> {
    let Some(run) = run::Entity::find()
        .filter(run::Column::SessionId.eq(session_id))
        .filter(run::Column::Status.eq("awaiting_confirmation"))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    proposed_call_of(db, run.id).await
}

/// The first call of this run still waiting for a decision.
pub async fn proposed_call_of(db: &Db, run_id: Uuid) -> StorageResult<Option<ToolCall>> {
    Ok(tool_call::Entity::find()
        .filter(tool_call::Column::RunId.eq(run_id))
        .filter(tool_call::Column::Status.eq("proposed"))
        .order_by_asc(tool_call::Column::CreatedAt)
        .one(db)
        .await?
        .map(Into::into))
}

/// A run row of the session.
pub async fn find_run(db: &Db, session_id: Uuid, run_id: Uuid) -> StorageResult<Option<Run>> {
    Ok(run::Entity::find_by_id(run_id)
        .filter(run::Column::SessionId.eq(session_id))
        .one(db)
        .await?
        .map(Into::into))
}

/// Sets a call's status (and, when given, its decision without a person: `auto` or `rule`).
pub async fn set_call_status(db: &Db, id: Uuid, status: &str, decision: Option<&str>) -> StorageResult<()> {
    let now = Utc::now();
    let mut update = tool_call::Entity::update_many()
        .col_expr(tool_call::Column::Status, Expr::value(status))
        .col_expr(tool_call::Column::UpdatedAt, Expr::value(now));
    if let Some(d) = decision {
        update = update
            .col_expr(tool_call::Column::Decision, Expr::value(d))
            .col_expr(tool_call::Column::DecidedAt, Expr::value(Some(now)));
    }
    update.filter(tool_call::Column::Id.eq(id)).exec(db).await?;
    Ok(())
}

/// Records how a call ended (executed or failed) and the diff of the file it changed.
pub async fn set_call_outcome(db: &Db, id: Uuid, status: &str, diff: Option<&str>) -> StorageResult<()> {
    tool_call::Entity::update_many()
        .col_expr(tool_call::Column::Status, Expr::value(status))
        .col_expr(tool_call::Column::Diff, Expr::value(diff.map(str::to_string)))
        .col_expr(tool_call::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(tool_call::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}

/// Stores the model's explanation of a proposed call.
pub async fn set_explanation(db: &Db, id: Uuid, text: &str) -> StorageResult<()> {
    tool_call::Entity::update_many()
        .col_expr(tool_call::Column::Explanation, Expr::value(text))
        .col_expr(tool_call::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(tool_call::Column::Id.eq(id))
        .filter(tool_call::Column::Status.eq("proposed"))
        .exec(db)
        .await?;
    Ok(())
}

/// In one transaction: a new message under `m.parent_id`, chosen on the active path, becomes
/// what the run writes; a tool result also names its call.
pub async fn open_message(
    db: &Db,
    session_id: Uuid,
    run_id: Uuid,
    m: &NewMessage<'_>,
    answers_call: Option<Uuid>,
) -> StorageResult<()> {
    let txn = crate::storage::begin_write(db).await?;
    insert_message(&txn, session_id, m, Utc::now()).await?;
    choose(&txn, session_id, m.parent_id, m.id).await?;
    run::Entity::update_many()
        .col_expr(run::Column::AssistantMessageId, Expr::value(m.id))
        .col_expr(run::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(run::Column::Id.eq(run_id))
        .exec(&txn)
        .await?;
    if let Some(call) = answers_call {
        tool_call::Entity::update_many()
            .col_expr(tool_call::Column::ResultMessageId, Expr::value(m.id))
            .filter(tool_call::Column::Id.eq(call))
            .exec(&txn)
            .await?;
    }
    txn.commit().await?;
    Ok(())
}

/// A message's final content and status; the run goes on.
pub async fn close_message(
    db: &Db,
    message_id: Uuid,
    parts: &[Part],
    status: MessageStatus,
    error: Option<&str>,
    usage: Option<MessageUsage>,
) -> StorageResult<()> {
    let mut update = message::Entity::update_many()
        .col_expr(message::Column::Parts, Expr::value(parts_json(parts)))
        .col_expr(message::Column::Status, Expr::value(status.as_str()))
        .col_expr(message::Column::Error, Expr::value(error.map(str::to_string)))
        .col_expr(message::Column::UpdatedAt, Expr::value(Utc::now()))
        .col_expr(
            message::Column::TokenCount,
            Expr::value(to_i64(super::messages::answer_tokens(parts, usage))),
        );
    if parts.iter().any(|p| matches!(p, Part::ToolCall { .. })) {
        update = update.col_expr(
            message::Column::Kind,
            Expr::value(crate::model::messages::MessageKind::ToolCall.as_str()),
        );
    }
    let update = super::messages::with_usage(update, usage);
    let txn = crate::storage::begin_write(db).await?;
    update.filter(message::Column::Id.eq(message_id)).exec(&txn).await?;
    super::messages::touch_session_of(&txn, message_id).await?;
    txn.commit().await?;
    Ok(())
}

/// Ends a run.
pub async fn end_run(db: &Db, run_id: Uuid, status: &str, error: Option<&str>) -> StorageResult<()> {
    let now = Utc::now();
    run::Entity::update_many()
        .col_expr(run::Column::Status, Expr::value(status))
        .col_expr(run::Column::Error, Expr::value(error.map(str::to_string)))
        .col_expr(run::Column::UpdatedAt, Expr::value(now))
        .col_expr(run::Column::FinishedAt, Expr::value(Some(now)))
        .filter(run::Column::Id.eq(run_id))
        .exec(db)
        .await?;
    Ok(())
}

/// Pauses a running run until a person decides.
pub async fn await_confirmation(db: &Db, run_id: Uuid) -> StorageResult<()> {
    run::Entity::update_many()
        .col_expr(run::Column::Status, Expr::value("awaiting_confirmation"))
        .col_expr(run::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(run::Column::Id.eq(run_id))
        .filter(run::Column::Status.eq("running"))
        .exec(db)
        .await?;
    Ok(())
}

/// Counts one more model call of a run (the agent loop reads the count where it decides).
pub async fn bump_iterations(db: &Db, run_id: Uuid) -> StorageResult<()> {
    run::Entity::update_many()
        .col_expr(run::Column::Iterations, Expr::col(run::Column::Iterations).add(Expr::value(1)))
        .filter(run::Column::Id.eq(run_id))
        .exec(db)
        .await?;
    Ok(())
}

/// What a person decided, to record in one step.
pub struct DecisionRecord<'a> {
    /// The call decided on.
    pub call_id: Uuid,
    /// Its run.
    pub run_id: Uuid,
    /// approved or denied.
    pub status: &'a str,
    /// yes, no, no_continue or always.
    pub decision: &'a str,
    /// Who decided.
    pub decided_by: Uuid,
    /// The tool result message the resumed run writes first.
    pub result: &'a NewMessage<'a>,
}

/// In one transaction: the call moves from `proposed` to the decision (only if nobody decided
/// it first), the run from `awaiting_confirmation` to `running`, and the call's result message
/// is opened. False, with nothing changed, when the call was no longer waiting.
pub async fn record_decision(db: &Db, session_id: Uuid, d: &DecisionRecord<'_>) -> StorageResult<bool> {
    let txn = crate::storage::begin_write(db).await?;
    let now = Utc::now();
    let won = tool_call::Entity::update_many()
        .col_expr(tool_call::Column::Status, Expr::value(d.status))
        .col_expr(tool_call::Column::Decision, Expr::value(d.decision))
        .col_expr(tool_call::Column::DecidedBy, Expr::value(d.decided_by))
        .col_expr(tool_call::Column::DecidedAt, Expr::value(Some(now)))
        .col_expr(tool_call::Column::ResultMessageId, Expr::value(d.result.id))
        .col_expr(tool_call::Column::UpdatedAt, Expr::value(now))
        .filter(tool_call::Column::Id.eq(d.call_id))
        .filter(tool_call::Column::Status.eq("proposed"))
        .exec(&txn)
        .await?
        .rows_affected
        == 1;
    if !won {
        txn.rollback().await?;
        return Ok(false);
    }
    // The message first: the run points at it.
    insert_message(&txn, session_id, d.result, now).await?;
    choose(&txn, session_id, d.result.parent_id, d.result.id).await?;
    let resumed = run::Entity::update_many()
        .col_expr(run::Column::Status, Expr::value("running"))
        // The deciding instance goes on with the run, whichever began it.
        .col_expr(run::Column::InstanceId, Expr::value(Some(crate::storage::instance_id())))
        .col_expr(run::Column::AssistantMessageId, Expr::value(d.result.id))
        .col_expr(run::Column::UpdatedAt, Expr::value(now))
        .filter(run::Column::Id.eq(d.run_id))
        .filter(run::Column::Status.eq("awaiting_confirmation"))
        .exec(&txn)
        .await?
        .rows_affected
        == 1;
    if !resumed {
        txn.rollback().await?;
        return Ok(false);
    }
    txn.commit().await?;
    Ok(true)
}

/// Puts an ended run (stopped, interrupted or failed) back to waiting on one of its calls, as
/// if the call had just been proposed, so that it can be decided again ("Run it" or "Skip").
/// A result the call had (a stopped or interrupted one) stays in the tree; the decision's new
/// result becomes its sibling. False when the run is no longer in such a state.
pub async fn reopen_call(db: &Db, run_id: Uuid, call_id: Uuid) -> StorageResult<bool> {
    let txn = crate::storage::begin_write(db).await?;
    let now = Utc::now();
    let reopened = run::Entity::update_many()
        .col_expr(run::Column::Status, Expr::value("awaiting_confirmation"))
        .col_expr(run::Column::Error, Expr::value(Option::<String>::None))
        .col_expr(run::Column::FinishedAt, Expr::value(Option::<chrono::DateTime<Utc>>::None))
        .col_expr(run::Column::UpdatedAt, Expr::value(now))
        .filter(run::Column::Id.eq(run_id))
        .filter(run::Column::Status.is_in(["cancelled", "interrupted", "failed"]))
        .exec(&txn)
        .await?
        .rows_affected
        == 1;
    if !reopened {
        txn.rollback().await?;
        return Ok(false);
    }
    tool_call::Entity::update_many()
        .col_expr(tool_call::Column::Status, Expr::value("proposed"))
        .col_expr(tool_call::Column::Decision, Expr::value(Option::<String>::None))
        .col_expr(tool_call::Column::DecidedBy, Expr::value(Option::<Uuid>::None))
        .col_expr(tool_call::Column::DecidedAt, Expr::value(Option::<chrono::DateTime<Utc>>::None))
        .col_expr(tool_call::Column::ResultMessageId, Expr::value(Option::<Uuid>::None))
        .col_expr(tool_call::Column::UpdatedAt, Expr::value(now))
        .filter(tool_call::Column::Id.eq(call_id))
        .filter(tool_call::Column::RunId.eq(run_id))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(true)
}

/// Ends a paused run without running its call (Stop while a decision was awaited). False when
/// it was not paused.
pub async fn cancel_paused(db: &Db, run_id: Uuid, decided_by: Uuid) -> StorageResult<bool> {
    let txn = crate::storage::begin_write(db).await?;
    let now = Utc::now();
    let ended = run::Entity::update_many()
        .col_expr(run::Column::Status, Expr::value("cancelled"))
        .col_expr(run::Column::UpdatedAt, Expr::value(now))
        .col_expr(run::Column::FinishedAt, Expr::value(Some(now)))
        .filter(run::Column::Id.eq(run_id))
        .filter(run::Column::Status.eq("awaiting_confirmation"))
        .exec(&txn)
        .await?
        .rows_affected
        == 1;
    if ended {
        tool_call::Entity::update_many()
            .col_expr(tool_call::Column::Status, Expr::value("denied"))
            .col_expr(tool_call::Column::Decision, Expr::value("no"))
            .col_expr(tool_call::Column::DecidedBy, Expr::value(decided_by))
            .col_expr(tool_call::Column::DecidedAt, Expr::value(Some(now)))
            .col_expr(tool_call::Column::UpdatedAt, Expr::value(now))
            .filter(tool_call::Column::RunId.eq(run_id))
            .filter(tool_call::Column::Status.eq("proposed"))
            .exec(&txn)
            .await?;
    }
    txn.commit().await?;
    Ok(ended)
}

/// The paused run of a session, if any.
pub async fn paused_run(db: &Db, session_id: Uuid) -> StorageResult<Option<Run>> {
    Ok(run::Entity::find()
        .filter(run::Column::SessionId.eq(session_id))
        .filter(run::Column::Status.eq("awaiting_confirmation"))
        .one(db)
        .await?
        .map(Into::into))
}

/// The session's latest run, if it has any.
pub async fn latest_run(db: &Db, session_id: Uuid) -> StorageResult<Option<Run>> {
    Ok(run::Entity::find()
        .filter(run::Column::SessionId.eq(session_id))
        .order_by_desc(run::Column::CreatedAt)
        .order_by_desc(run::Column::Id)
        .one(db)
        .await?
        .map(Into::into))
}

/// Stores an "always" rule.
pub async fn insert_rule(
    db: &Db,
    user_id: Uuid,
    scope: &str,
    scope_id: Uuid,
    tool_name: &str,
    pattern: &str,
    tool_digest: &str,
) -> StorageResult<ApprovalRule> {
    Ok(approval_rule::ActiveModel {
        id: Set(Uuid::now_v7()),
        user_id: Set(user_id),
        scope: Set(scope.to_string()),
        scope_id: Set(scope_id),
        tool_name: Set(tool_name.to_string()),
        pattern: Set(pattern.to_string()),
        tool_digest: Set(tool_digest.to_string()),
        created_at: Set(Utc::now()),
    }
    .insert(db)
    .await?
    .into())
}

/// The user's rules for a tool that apply in this session or its workspace.
pub async fn rules_for(
    db: &Db,
    user_id: Uuid,
    session_id: Uuid,
    workspace_id: Uuid,
    tool_name: &str,
) -> StorageResult<Vec<ApprovalRule>> {
    Ok(approval_rule::Entity::find()
        .filter(approval_rule::Column::UserId.eq(user_id))
        .filter(approval_rule::Column::ToolName.eq(tool_name))
        .filter(approval_rule::Column::ScopeId.is_in([session_id, workspace_id]))
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// Every rule of a user, newest first.
pub async fn list_rules(db: &Db, user_id: Uuid) -> StorageResult<Vec<ApprovalRule>> {
    Ok(approval_rule::Entity::find()
        .filter(approval_rule::Column::UserId.eq(user_id))
        .order_by_desc(approval_rule::Column::CreatedAt)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// Deletes one of the user's rules; false when there was none.
pub async fn delete_rule(db: &Db, user_id: Uuid, id: Uuid) -> StorageResult<bool> {
    Ok(approval_rule::Entity::delete_many()
        .filter(approval_rule::Column::Id.eq(id))
        .filter(approval_rule::Column::UserId.eq(user_id))
        .exec(db)
        .await?
        .rows_affected
        == 1)
}

/// Replaces a session's todo list in one transaction.
pub async fn replace_todos(db: &Db, session_id: Uuid, items: &[(String, String)]) -> StorageResult<()> {
    let txn = crate::storage::begin_write(db).await?;
    todo::Entity::delete_many().filter(todo::Column::SessionId.eq(session_id)).exec(&txn).await?;
    let now = Utc::now();
    for (i, (text, status)) in items.iter().enumerate() {
        todo::ActiveModel {
            id: Set(Uuid::now_v7()),
            session_id: Set(session_id),
            position: Set(i32::try_from(i).unwrap_or(i32::MAX)),
            text: Set(text.clone()),
            status: Set(status.clone()),
            updated_at: Set(now),
        }
        .insert(&txn)
        .await?;
    }
    txn.commit().await?;
    Ok(())
}

/// A session's todo list in order.
pub async fn todos(db: &Db, session_id: Uuid) -> StorageResult<Vec<TodoRecord>> {
    Ok(todo::Entity::find()
        .filter(todo::Column::SessionId.eq(session_id))
        .order_by_asc(todo::Column::Position)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// The host folders allowed for a workspace.
pub async fn host_roots_of(db: &Db, workspace_id: Uuid) -> StorageResult<Vec<String>> {
    Ok(host_root::Entity::find()
        .filter(host_root::Column::WorkspaceId.eq(workspace_id))
        .order_by_asc(host_root::Column::Path)
        .all(db)
        .await?
        .into_iter()
        .map(|r| r.path)
        .collect())
}

/// Every allowed host folder (for the console).
pub async fn all_host_roots(db: &Db) -> StorageResult<Vec<HostRoot>> {
    Ok(host_root::Entity::find()
        .order_by_asc(host_root::Column::Path)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// A workspace by id, whoever owns it (for the console).
pub async fn any_workspace(db: &Db, id: Uuid) -> StorageResult<Option<Workspace>> {
    Ok(workspace::Entity::find_by_id(id).one(db).await?.map(workspace_to_domain))
}

/// Every workspace with its owner's id, by name (for the console's picker).
pub async fn all_workspaces(db: &Db) -> StorageResult<Vec<Workspace>> {
    Ok(workspace::Entity::find()
        .order_by_asc(workspace::Column::Name)
        .all(db)
        .await?
        .into_iter()
        .map(workspace_to_domain)
        .collect())
}

/// Allows a host folder for a workspace.
pub async fn insert_host_root(db: &Db, workspace_id: Uuid, path: &str, by: Uuid) -> StorageResult<HostRoot> {
    Ok(host_root::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        path: Set(path.to_string()),
        created_by: Set(Some(by)),
        created_at: Set(Utc::now()),
    }
    .insert(db)
    .await?
    .into())
}

/// Removes an allowed host folder; the removed row, if there was one.
pub async fn delete_host_root(db: &Db, id: Uuid) -> StorageResult<Option<HostRoot>> {
    let Some(row) = host_root::Entity::find_by_id(id).one(db).await? else { return Ok(None) };
    host_root::Entity::delete_by_id(id).exec(db).await?;
    Ok(Some(row.into()))
}
