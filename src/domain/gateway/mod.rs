//! The gateway service: which models a `/v1` request may be served by (aliases, fallback
//! chains, `provider/model`, `model$alias`), opening the first one that starts answering, and
//! recording what it cost. Quotas and rate limits apply as in the UI; usage is marked `api`.

pub mod stored;

use std::time::Instant;

use uuid::Uuid;

use crate::domain::accounts::Actor;
use crate::domain::admin::quota_holds::{Estimate, QuotaHold};
use crate::domain::admin::quotas::QuotaGate;
use crate::domain::providers::aliases;
use crate::domain::providers::{Providers, ResolvedModel};
use crate::domain::runs::context;
use crate::domain::sessions::tree::MessageUsage;
use crate::domain::{DomainError, DomainResult};
use crate::providers::client::EventStream;
use crate::providers::types::{ChatRequest, Embeddings, ProviderError, Usage};
use crate::storage::Db;
use crate::storage::repos::messages as repo;
use crate::storage::usage_writer::UsageWriter;

/// The gateway as a service, built once in the app state: choosing and opening a model for an
/// API caller (aliases, chains, fallback before the first byte, quota holds), embeddings, token
/// counts, the model list, and the Responses API's stored answers (`stored`).
#[derive(Clone)]
pub struct Gateway {
    providers: std::sync::Arc<Providers>,
    quotas: QuotaGate,
    usage: UsageWriter,
    aliases: aliases::Aliases,
    /// Responses API answers kept for `previous_response_id`.
    pub stored: stored::StoredResponses,
}

impl Gateway {
    /// The service over this database and registry; `quotas` keeps members within their
    /// quotas (and parallel requests from overspending) and `usage` records what embeddings
    /// cost.
    pub fn new(
        db: Db,
        providers: std::sync::Arc<Providers>,
        quotas: QuotaGate,
        usage: UsageWriter,
    ) -> Gateway {
        Gateway {
            stored: stored::StoredResponses { db: db.clone() },
            aliases: aliases::Aliases::new(db),
            providers,
            quotas,
            usage,
        }
    }
}

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
    /// What the call holds of the user's quota until its usage row is stored.
    pub hold: QuotaHold,
}

impl Gateway {
    /// The ordered `provider/model` references a requested model stands for: a user alias is
    /// expanded first, a comma-separated list is a fallback chain, and an item without a provider
    /// is looked up among every provider the user may call.
    pub async fn chain(&self, actor: &Actor, requested: &str) -> DomainResult<Vec<String>> {
        let providers = &self.providers;
        let own = providers.own_keys(actor).await?;
        self.chain_with(actor, requested, &own).await
    }

    /// [`chain`] with the user's own keys already read (a request reads them once).
    pub async fn chain_with(
        &self,
        actor: &Actor,
        requested: &str,
        own: &[crate::vault::store::SecretMeta],
    ) -> DomainResult<Vec<String>> {
        let providers = &self.providers;
        let requested = requested.trim();
        let expanded = self.aliases.lookup(actor, requested).await?.unwrap_or_else(|| requested.to_string());
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

    /// Tries each reference in turn until one starts answering, the quota checked (and the call's
    /// estimate held) at the first model that resolves; `own` are the user's own keys, read once
    /// per request. A model that cannot be resolved or fails before its first token passes to the
    /// next; once one has started, it is the answer (fallback never happens after the first byte).
    pub async fn open_with(
        &self,
        actor: &Actor,
        chain: &[String],
        request: &ChatRequest,
        own: &[crate::vault::store::SecretMeta],
    ) -> Result<Opened, OpenError> {
        let providers = &self.providers;
        let mut last: Option<OpenError> = None;
        let mut hold = None;
        for reference in chain {
            let model = match providers.resolve_with(actor, reference, own).await {
                Ok(m) => m,
                Err(e) => {
                    last = Some(OpenError::Domain(e));
                    continue;
                }
            };
            if hold.is_none() {
                let estimate = || Estimate::of(request, &model.info);
                hold = Some(self.quotas.admit(actor.user_id(), estimate).await.map_err(OpenError::Domain)?);
            }
            let mut req = request.clone();
            req.model = model.model.clone();
            let started = Instant::now();
            match model.chat.stream(&req).await {
                Ok(stream) => {
                    let hold = hold.unwrap_or_else(QuotaHold::none);
                    return Ok(Opened { model, stream, started, hold });
                }
                Err(e) => {
                    tracing::info!(model = %reference, status = e.status, "gateway: model failed before answering, trying the next");
                    last = Some(OpenError::Provider(e));
                }
            }
        }
        Err(last.unwrap_or(OpenError::Domain(DomainError::NotFound)))
    }

    /// Embeddings of `inputs` by the first model of `chain` that has them (quota checked first),
    /// with their usage recorded; the model that answered.
    pub async fn embed(
        &self,
        actor: &Actor,
        chain: &[String],
        inputs: &[String],
    ) -> Result<(ResolvedModel, Embeddings), OpenError> {
        let providers = &self.providers;
        let usage_writer = &self.usage;
        let chars: usize = inputs.iter().map(String::len).sum();
        let estimate = || Estimate { tokens: context::estimate_tokens(chars), micros: 0 };
        let hold = self.quotas.admit(actor.user_id(), estimate).await.map_err(OpenError::Domain)?;
        let own = providers.own_keys(actor).await.map_err(OpenError::Domain)?;
        let mut last: Option<OpenError> = None;
        for reference in chain {
            let model = match providers.resolve_with(actor, reference, &own).await {
                Ok(m) => m,
                Err(e) => {
                    last = Some(OpenError::Domain(e));
                    continue;
                }
            };
            let started = Instant::now();
            match model.chat.embed(&model.model, inputs).await {
                Ok(Some(out)) => {
                    let input_tokens = out.input_tokens.unwrap_or_else(|| context::estimate_tokens(chars));
                    let u = Usage { input_tokens, ..Usage::default() };
                    let estimated = out.input_tokens.is_none();
                    write_usage(usage_writer, providers, actor, (&model, hold), u, estimated, started);
                    return Ok((model, out));
                }
                Ok(None) => {
                    last = Some(OpenError::Domain(DomainError::Invalid(format!(
                        "{reference} does not offer embeddings."
                    ))));
                }
                Err(e) => last = Some(OpenError::Provider(e)),
            }
        }
        Err(last.unwrap_or(OpenError::Domain(DomainError::NotFound)))
    }

    /// Counts `request`'s input tokens with the first model `requested` stands for.
    pub async fn count_tokens(
        &self,
        actor: &Actor,
        requested: &str,
        request: &ChatRequest,
    ) -> DomainResult<Counted> {
        let providers = &self.providers;
        let chain = self.chain(actor, requested).await?;
        let estimate = Counted { tokens: crate::providers::tokens::count_request(request), estimated: true };
        let Some(first) = chain.first() else { return Ok(estimate) };
        let model = providers.resolve(actor, first).await?;
        let mut request = request.clone();
        request.model = model.model.clone();
        match model.chat.count_tokens(&request).await {
            Ok(Some(tokens)) => Ok(Counted { tokens, estimated: false }),
            Ok(None) => Ok(estimate),
            Err(e) => {
                tracing::info!(status = e.status, "count_tokens: the provider could not count");
                Ok(estimate)
            }
        }
    }

    /// The models `actor` may call through the gateway, then their aliases.
    pub async fn listing(&self, actor: &Actor) -> DomainResult<Vec<Listed>> {
        let providers = &self.providers;
        let mut out: Vec<Listed> = Vec::new();
        for (entry, ids) in providers.offered(actor).await {
            for raw in ids {
                let (id, _) = crate::domain::providers::split_alias(&raw);
                let reference = format!("{}/{id}", entry.name);
                let info = providers.info_of(&entry, id);
                let limits = if info.known {
                    (Some(u64::from(info.context_window)), Some(u64::from(info.max_output)))
                } else {
                    (None, None)
                };
                out.push(Listed { id: reference, owner: entry.name.clone(), target: None, limits });
            }
        }
        for a in self.aliases.list(actor).await? {
            out.push(Listed {
                id: a.alias,
                owner: "alias".into(),
                target: Some(a.target),
                limits: (None, None),
            });
        }
        Ok(out)
    }
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
    /// What the call held of the user's quota, given back once its usage row is stored.
    pub hold: QuotaHold,
}

/// Queues one gateway call's usage row (Arbor's own count when the provider sent none).
pub fn record(usage_writer: &UsageWriter, providers: &Providers, actor: &Actor, done: Finished<'_>) {
    let Finished { model: opened_model, request, reported, produced_chars, started, hold } = done;
    let (u, estimated) = match reported {
        Some(u) => (u, false),
        None => (
            Usage {
                input_tokens: crate::providers::tokens::count_request(request),
                // The gateway streams what it relays without keeping it: characters it is.
                output_tokens: context::estimate_tokens(produced_chars),
                ..Usage::default()
            },
            true,
        ),
    };
    write_usage(usage_writer, providers, actor, (opened_model, hold), u, estimated, started);
}

/// Queues one usage row for a gateway call and counts its tokens against the rate limit.
fn write_usage(
    usage_writer: &UsageWriter,
    providers: &Providers,
    actor: &Actor,
    (model, hold): (&ResolvedModel, QuotaHold),
    u: Usage,
    estimated: bool,
    started: Instant,
) {
    providers.spend_tokens(actor.user_id(), &model.provider, u.input_tokens + u.output_tokens);
    let row = repo::UsageRow {
        user_id: actor.user_id(),
        session_id: None,
        message_id: None,
        provider: &model.provider,
        model: &model.model,
        usage: MessageUsage::priced(&u, &model.info, estimated),
        latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        via: "api",
    };
    usage_writer.write_keeping(&row, hold);
}

/// A token count for a request: exact when the serving provider can count, else Arbor's own
/// count (the tokenizer the context gauge uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// The count.
    pub tokens: u64,
    /// Whether it is the estimate.
    pub estimated: bool,
}

/// One model the gateway lists: `provider/model`, or an alias with its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// What a caller sends as `model`.
    pub id: String,
    /// The provider's name, or `alias`.
    pub owner: String,
    /// What an alias stands for.
    pub target: Option<String>,
    /// The context window and output limit, when known.
    pub limits: (Option<u64>, Option<u64>),
}

/// A fresh response id.
pub fn response_id(prefix: &str) -> String {
    format!("{prefix}{}", Uuid::now_v7().simple())
}
