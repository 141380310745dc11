//! The gateway service: which models a `/v1` request may be served by (aliases, fallback
//! chains, `provider/model`, `model$alias`), opening the first one that starts answering, and
//! recording what it cost. Quotas and rate limits apply as in the UI; usage is marked `api`.

use std::time::Instant;

use uuid::Uuid;

use crate::domain::accounts::Actor;
use crate::domain::admin::quotas;
use crate::domain::providers::aliases;
use crate::domain::providers::{Providers, ResolvedModel};
use crate::domain::runs::context;
use crate::domain::sessions::tree::MessageUsage;
use crate::domain::{DomainError, DomainResult};
use crate::providers::client::EventStream;
use crate::providers::types::{ChatRequest, ProviderError, Usage};
use crate::storage::Db;
use crate::storage::repos::messages as repo;
use crate::storage::usage_writer::UsageWriter;

/// Why no model could be opened.
#[derive(Debug)]
pub enum OpenError {
    /// Refused before any provider was asked (quota, unknown model, no access).
    Domain(DomainError),
    /// Every candidate failed; the last provider's error.
    Provider(ProviderError),
}

/// An answer that has started: the model serving it and its events.
pub struct Opened {
    /// The model that answers (its `provider/model` goes in the response).
    pub model: ResolvedModel,
    /// The answer's events (the first content already arrived or is next).
    pub stream: EventStream,
    /// When the call began, for latency.
    pub started: Instant,
}

/// The ordered `provider/model` references a requested model stands for: a user alias is
/// expanded first, a comma-separated list is a fallback chain, and an item without a provider
/// is looked up among every provider the user may call.
pub async fn chain(
    db: &Db,
    providers: &Providers,
    actor: &Actor,
    requested: &str,
) -> DomainResult<Vec<String>> {
    let own = providers.own_keys(actor).await?;
    chain_with(db, providers, actor, requested, &own).await
}

/// [`chain`] with the user's own keys already read (a request reads them once).
pub async fn chain_with(
    db: &Db,
    providers: &Providers,
    actor: &Actor,
    requested: &str,
    own: &[crate::vault::store::SecretMeta],
) -> DomainResult<Vec<String>> {
    let requested = requested.trim();
    let expanded = aliases::lookup(db, actor, requested).await?.unwrap_or_else(|| requested.to_string());
    let mut out: Vec<String> = Vec::new();
    for item in expanded.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let found = if item.contains('/') {
            vec![item.to_string()]
        } else {
            providers.unprefixed_with(actor, item, own).await
        };
        for reference in found {
            if !out.contains(&reference) {
                out.push(reference);
            }
        }
    }
    if out.is_empty() {
        return Err(DomainError::NotFound);
    }
    Ok(out)
}

/// Checks the quota, then tries each reference in turn until one starts answering. A model
/// that cannot be resolved or fails before its first token passes to the next; once one has
/// started, it is the answer (fallback never happens after the first byte).
pub async fn open(
    db: &Db,
    providers: &Providers,
    actor: &Actor,
    chain: &[String],
    request: &ChatRequest,
) -> Result<Opened, OpenError> {
    let own = providers.own_keys(actor).await.map_err(OpenError::Domain)?;
    open_with(db, providers, actor, chain, request, &own).await
}

/// [`open`] with the user's own keys already read.
pub async fn open_with(
    db: &Db,
    providers: &Providers,
    actor: &Actor,
    chain: &[String],
    request: &ChatRequest,
    own: &[crate::vault::store::SecretMeta],
) -> Result<Opened, OpenError> {
    quotas::check(db, actor.user_id()).await.map_err(OpenError::Domain)?;
    let mut last: Option<OpenError> = None;
    for reference in chain {
        let model = match providers.resolve_with(actor, reference, own) {
            Ok(m) => m,
            Err(e) => {
                last = Some(OpenError::Domain(e));
                continue;
            }
        };
        let mut req = request.clone();
        req.model = model.model.clone();
        let started = Instant::now();
        match model.chat.stream(&req).await {
            Ok(stream) => return Ok(Opened { model, stream, started }),
            Err(e) => {
                tracing::info!(model = %reference, status = e.status, "gateway: model failed before answering, trying the next");
                last = Some(OpenError::Provider(e));
            }
        }
    }
    Err(last.unwrap_or(OpenError::Domain(DomainError::NotFound)))
}

/// A finished gateway call, for its usage row.
pub struct Finished<'a> {
    /// The model that answered.
    pub model: &'a ResolvedModel,
    /// What was asked.
    pub request: &'a ChatRequest,
    /// Token counts the provider reported, if any.
    pub reported: Option<Usage>,
    /// Characters of text and tool arguments produced.
    pub produced_chars: usize,
    /// When the call began.
    pub started: Instant,
}

/// Queues one gateway call's usage row (estimated from characters when the provider sent none).
pub fn record(usage_writer: &UsageWriter, providers: &Providers, actor: &Actor, done: Finished<'_>) {
    let Finished { model: opened_model, request, reported, produced_chars, started } = done;
    let (u, estimated) = match reported {
        Some(u) => (u, false),
        None => (
            Usage {
                input_tokens: context::estimate_tokens(context::request_chars(request)),
                output_tokens: context::estimate_tokens(produced_chars),
                cached_input_tokens: 0,
            },
            true,
        ),
    };
    providers.spend_tokens(actor.user_id(), &opened_model.provider, u.input_tokens + u.output_tokens);
    let usage = MessageUsage::priced(&u, &opened_model.info, estimated);
    let row = repo::UsageRow {
        user_id: actor.user_id(),
        session_id: None,
        message_id: None,
        provider: &opened_model.provider,
        model: &opened_model.model,
        usage,
        latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        via: "api",
    };
    usage_writer.write(&row);
}

/// A fresh response id.
pub fn response_id(prefix: &str) -> String {
    format!("{prefix}{}", Uuid::now_v7().simple())
}
