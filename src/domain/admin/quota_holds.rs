//! Quota holds: what calls still running are expected to spend counts against a member's token
//! and dollar quotas with what they spent already, so parallel requests cannot overspend them
//! together (SECURITY.md 54). A call is admitted while spent plus held stays under every limit;
//! it then holds its own estimate (the request's tokens plus the output it may write, priced by
//! the model's prices) until its usage row is stored. With several instances the holds are kept
//! in Redis, with a per-member lock around each check-and-hold; while Redis is away, in this
//! instance.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use uuid::Uuid;

use crate::bus::limits::{CounterError, SharedCounters};
use crate::domain::DomainResult;
use crate::domain::fresh::FreshCopies;
use crate::providers::catalog::ModelInfo;
use crate::providers::types::ChatRequest;
use crate::storage::repos::quotas::{self as repo, Limits};
use crate::storage::{Db, StorageResult};

/// Output tokens held for a call that does not say how many it may write.
const DEFAULT_OUTPUT: u32 = 4096;
/// How long a hold may stay in Redis if its instance dies before giving it back.
const SHARED_HOLD: Duration = Duration::from_secs(3600);
/// How long a check waits for another instance's check of the same member.
const LOCK_WAIT: Duration = Duration::from_secs(10);
/// How long the copy of the quota table is used when this process has not written the table:
/// how long an admin's change made on another instance takes to apply here.
const TABLE_AGE: Duration = Duration::from_secs(2);

/// What one call is expected to spend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Estimate {
    /// Tokens in and out.
    pub tokens: u64,
    /// Micro-dollars, by the model's prices (0 when it has none).
    pub micros: u64,
}

impl Estimate {
    /// A request to a model: its tokens as Arbor counts them, plus the output it asks for (or
    /// [`DEFAULT_OUTPUT`]), never more than the model writes.
    pub fn of(request: &ChatRequest, info: &ModelInfo) -> Estimate {
        let input = crate::providers::tokens::count_request(request);
        let most = if info.max_output > 0 { info.max_output } else { u32::MAX };
        let output = u64::from(request.params.max_output_tokens.unwrap_or(DEFAULT_OUTPUT).min(most));
        let micros = info.cost_micros(input, output, 0).unwrap_or(0);
        Estimate { tokens: input.saturating_add(output), micros: u64::try_from(micros).unwrap_or(0) }
    }
}

/// The quota table's rows: scope and limits.
type QuotaRows = Arc<Vec<(String, Limits)>>;

/// The holds of every member. Cheap to clone; clones share them.
#[derive(Clone)]
pub struct QuotaHolds {
    /// Held while a check reads what is held and adds to it, so two checks never both pass on
    /// the same room.
    order: Arc<tokio::sync::Mutex<()>>,
    local: Arc<Mutex<HashMap<Uuid, Estimate>>>,
    shared: Option<SharedCounters>,
    /// The quota table as last read (every call reads it before asking a provider).
    table: Arc<FreshCopies<(), QuotaRows>>,
}

impl Default for QuotaHolds {
    fn default() -> Self {
        QuotaHolds {
            order: Arc::default(),
            local: Arc::default(),
            shared: None,
            table: Arc::new(FreshCopies::new(TABLE_AGE, 1)),
        }
    }
}

impl std::fmt::Debug for QuotaHolds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuotaHolds").field("shared", &self.shared.is_some()).finish_non_exhaustive()
    }
}

/// One call's hold; given back when dropped (after its usage row is stored).
#[derive(Debug)]
pub struct QuotaHold {
    holds: Option<QuotaHolds>,
    member: Uuid,
    held: Estimate,
    shared: bool,
}

impl QuotaHold {
    /// A hold of nothing, for a member without limits.
    pub fn none() -> QuotaHold {
        QuotaHold { holds: None, member: Uuid::nil(), held: Estimate::default(), shared: false }
    }
}

impl QuotaHolds {
    /// The quota table's rows: the copy in memory while this process has not written the table
    /// since; past [`TABLE_AGE`] it is read again beside the call (`FreshCopies::get_or_refresh`).
    pub async fn table(&self, db: &Db) -> StorageResult<QuotaRows> {
        let generation = repo::generation();
        // The pool is cloned only when the table is read, not on every call.
        let read = || {
            let db = db.clone();
            async move { Ok(Arc::new(repo::all(&db).await?)) }
        };
        self.table.get_or_refresh((), generation, read).await
    }

    /// Holds every instance shares through `counters`.
    pub fn shared(counters: SharedCounters) -> QuotaHolds {
        QuotaHolds { shared: Some(counters), ..Default::default() }
    }

    /// Adds `estimate` to the member's holds if `fits`, given what is held for their other
    /// calls, says yes; else its refusal.
    pub async fn hold<F>(&self, member: Uuid, estimate: Estimate, fits: F) -> DomainResult<QuotaHold>
    where
        F: AsyncFnOnce(Estimate) -> DomainResult<()>,
    {
        let _order = self.order.lock().await;
        if let Some(counters) = &self.shared {
            match self.hold_shared(counters, member, estimate, fits).await {
                Ok(outcome) => return outcome,
                Err((e, fits)) => {
                    tracing::warn!(error = %e, "quota holds are kept in this instance until Redis is back");
                    return self.hold_local(member, estimate, fits).await;
                }
            }
        }
        self.hold_local(member, estimate, fits).await
    }

    async fn hold_local<F>(&self, member: Uuid, estimate: Estimate, fits: F) -> DomainResult<QuotaHold>
    where
        F: AsyncFnOnce(Estimate) -> DomainResult<()>,
    {
        let held =
            self.local.lock().unwrap_or_else(|p| p.into_inner()).get(&member).copied().unwrap_or_default();
        fits(held).await?;
        self.add_local(member, estimate);
        Ok(QuotaHold { holds: Some(self.clone()), member, held: estimate, shared: false })
    }

    /// The check and hold in Redis; the error says Redis failed before the check ran (so the
    /// hold can be taken here instead).
    async fn hold_shared<F>(
        &self,
        counters: &SharedCounters,
        member: Uuid,
        estimate: Estimate,
        fits: F,
    ) -> Result<DomainResult<QuotaHold>, (CounterError, F)>
    where
        F: AsyncFnOnce(Estimate) -> DomainResult<()>,
    {
        let (tokens_key, micros_key) = keys(counters, member);
        let lock_key = counters.key(&format!("quota-hold-lock:{member}"));
        let lock = match counters.lock(&lock_key, LOCK_WAIT, LOCK_WAIT).await {
            Ok(lock) => lock,
            Err(e) => return Err((e, fits)),
        };
        let held = async {
            let (tokens, _) = counters.total(&tokens_key).await?;
            let (micros, _) = counters.total(&micros_key).await?;
            Ok::<_, CounterError>(Estimate { tokens, micros })
        }
        .await;
        let held = match held {
            Ok(held) => held,
            Err(e) => {
                counters.unlock(lock).await;
                return Err((e, fits));
            }
        };
        let outcome = match fits(held).await {
            Ok(()) => {
                let added = async {
                    counters.add(&tokens_key, estimate.tokens, SHARED_HOLD).await?;
                    counters.add(&micros_key, estimate.micros, SHARED_HOLD).await
                }
                .await;
                let shared = match added {
                    Ok(_) => true,
                    Err(e) => {
                        tracing::warn!(error = %e, "a quota hold is kept in this instance: Redis failed");
                        self.add_local(member, estimate);
                        false
                    }
                };
                Ok(QuotaHold { holds: Some(self.clone()), member, held: estimate, shared })
            }
            Err(refused) => Err(refused),
        };
        counters.unlock(lock).await;
        Ok(outcome)
    }

    fn add_local(&self, member: Uuid, estimate: Estimate) {
        let mut local = self.local.lock().unwrap_or_else(|p| p.into_inner());
        let entry = local.entry(member).or_default();
        entry.tokens = entry.tokens.saturating_add(estimate.tokens);
        entry.micros = entry.micros.saturating_add(estimate.micros);
    }
}

fn keys(counters: &SharedCounters, member: Uuid) -> (String, String) {
    (
        counters.key(&format!("quota-held-tokens:{member}")),
        counters.key(&format!("quota-held-micros:{member}")),
    )
}

impl Drop for QuotaHold {
    fn drop(&mut self) {
        let Some(holds) = self.holds.take() else { return };
        let (member, held) = (self.member, self.held);
        if self.shared {
            if let Some(counters) = holds.shared.clone()
                && let Ok(runtime) = tokio::runtime::Handle::try_current()
            {
                runtime.spawn(async move {
                    let (tokens_key, micros_key) = keys(&counters, member);
                    let given = async {
                        counters.sub(&tokens_key, held.tokens).await?;
                        counters.sub(&micros_key, held.micros).await
                    };
                    if let Err(e) = given.await {
                        tracing::warn!(error = %e, "a quota hold was not given back in Redis; it expires within the hour");
                    }
                });
            }
            return;
        }
        let mut local = holds.local.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = local.get_mut(&member) {
            entry.tokens = entry.tokens.saturating_sub(held.tokens);
            entry.micros = entry.micros.saturating_sub(held.micros);
            if *entry == Estimate::default() {
                local.remove(&member);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::DomainError;
    use crate::providers::types::{ChatMessage, ChatRole, GenParams, Part};

    fn model(max_output: u32, prices: Option<(f64, f64)>) -> ModelInfo {
        ModelInfo {
            id: "m".into(),
            label: "m".into(),
            context_window: 128_000,
            max_output,
            input_per_mtok: prices.map(|p| p.0),
            output_per_mtok: prices.map(|p| p.1),
            cached_per_mtok: None,
            tools: true,
            vision: false,
            reasoning: false,
            image_output: false,
            image_input_per_mtok: None,
            known: true,
        }
    }

    fn request(max_output_tokens: Option<u32>) -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            system: None,
            messages: vec![ChatMessage {
                role: ChatRole::User,
                parts: vec![Part::Text { text: "hello".into() }],
            }],
            tools: Vec::new(),
            params: GenParams { max_output_tokens, ..GenParams::default() },
            passthrough: None,
        }
    }

    #[test]
    fn an_estimate_is_the_request_plus_the_output_it_may_write_priced() {
        let input = crate::providers::tokens::count_request(&request(None));
        assert_eq!(
            Estimate::of(&request(None), &model(0, None)),
            Estimate { tokens: input + 4096, micros: 0 }
        );
        assert_eq!(
            Estimate::of(&request(None), &model(1000, None)).tokens,
            input + 1000,
            "never past the model"
        );
        assert_eq!(Estimate::of(&request(Some(20_000)), &model(32_000, None)).tokens, input + 20_000);
        // $1 and $2 per million tokens in and out.
        let priced = Estimate::of(&request(Some(1_000_000)), &model(2_000_000, Some((1.0, 2.0))));
        assert_eq!(priced.micros, input + 2_000_000);
    }

    #[tokio::test]
    async fn a_hold_counts_until_it_is_dropped_and_only_for_its_member() {
        let holds = QuotaHolds::default();
        let (ada, bob) = (Uuid::new_v4(), Uuid::new_v4());
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        let hold = |who: Uuid, tokens: u64| {
            let seen = seen.clone();
            let holds = holds.clone();
            async move {
                holds
                    .hold(who, Estimate { tokens, micros: tokens * 2 }, async move |held: Estimate| {
                        seen.lock().unwrap().push(held);
                        if held.tokens >= 100 { Err(DomainError::Limited("full".into(), 1)) } else { Ok(()) }
                    })
                    .await
            }
        };
        let first = hold(ada, 60).await.unwrap();
        let second = hold(ada, 60).await.unwrap();
        assert!(hold(ada, 1).await.is_err(), "120 held");
        assert!(hold(bob, 1).await.is_ok(), "another member holds nothing");
        drop(first);
        let third = hold(ada, 1).await.unwrap();
        drop((second, third));
        assert!(holds.local.lock().unwrap().get(&ada).is_none(), "all given back");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen[..3],
            [
                Estimate::default(),
                Estimate { tokens: 60, micros: 120 },
                Estimate { tokens: 120, micros: 240 }
            ]
        );
        assert_eq!(seen[4], Estimate { tokens: 60, micros: 120 });
        assert!(QuotaHold::none().holds.is_none());
    }
}
