//! Which key a provider call is made with, fetched only when the call is made: a key from
//! configuration, the user's own key from the vault, or the provider's shared keys tried
//! round-robin, where a key the provider rate-limits (429) rests for a cooldown. Also the
//! per-user, per-provider request and token windows behind an admin's rate limits.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use uuid::Uuid;

use crate::config::ProviderKind;
use crate::providers::chat::{AnthropicChat, ChatProvider, GeminiChat, OpenAiChat};
use crate::providers::client::{EventStream, ProviderClient, RetryPolicy};
use crate::providers::discovery::Discovered;
use crate::providers::images::{ImageAnswer, ImageLimits, ImageRequest};
use crate::providers::types::{ChatRequest, Embeddings, ProviderError, ProviderEvent};
use crate::secret::Secret;
use crate::storage::Db;
use crate::vault::Vault;
use crate::vault::store::{ORG_OWNER, Use};

/// The database and the open vault, for calls whose key is stored encrypted.
#[derive(Clone)]
pub struct VaultAccess {
    /// Where secrets and key health live.
    pub db: Db,
    /// The open vault.
    pub vault: Vault,
    /// Stored keys as last read, still sealed.
    pub(super) sealed: Arc<super::sealed_keys::SealedKeys>,
}

/// Where a call's key comes from; turned into a value only when the call is made.
#[derive(Clone, Debug)]
pub enum KeyPlan {
    /// A key from configuration (empty for a keyless local server).
    Plain(Secret),
    /// The acting user's own key in the vault.
    Own {
        /// The key's owner (the acting user).
        owner: Uuid,
        /// The secret's id.
        secret: Uuid,
    },
    /// The provider's shared keys in the vault.
    Shared {
        /// The admin-managed provider.
        provider: Uuid,
        /// Its keys, in the order they were added.
        keys: Vec<Uuid>,
    },
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each critical section is a single read or write: a poisoned map is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Round-robin cursors and rests of shared keys, in memory (also written to `provider_keys`).
#[derive(Default)]
pub struct KeyHealth {
    resting: Mutex<HashMap<Uuid, Instant>>,
    cursor: Mutex<HashMap<Uuid, usize>>,
    /// The other instances, told of every cooldown.
    bus: Option<crate::bus::SharedBus>,
}

impl KeyHealth {
    /// The order to try a provider's keys in: round-robin from the next key, resting keys last
    /// (soonest rested first), so a call still goes out when every key rests.
    pub fn order(&self, provider: Uuid, keys: &[Uuid]) -> Vec<Uuid> {
        if keys.is_empty() {
            return Vec::new();
        }
        let start = {
            let mut cursor = lock(&self.cursor);
            let c = cursor.entry(provider).or_insert(0);
            let start = *c % keys.len();
            *c = c.wrapping_add(1);
            start
        };
        let rotated: Vec<Uuid> = keys[start..].iter().chain(&keys[..start]).copied().collect();
        let now = Instant::now();
        let resting = lock(&self.resting);
        let until = |k: &Uuid| resting.get(k).copied().filter(|t| *t > now);
        let (mut tired, fresh): (Vec<Uuid>, Vec<Uuid>) =
            rotated.into_iter().partition(|k| until(k).is_some());
        tired.sort_by_key(|k| until(k));
        fresh.into_iter().chain(tired).collect()
    }

    /// Key health that tells the other instances of every cooldown.
    pub(super) fn announcing(bus: crate::bus::SharedBus) -> KeyHealth {
        KeyHealth { bus: Some(bus), ..Default::default() }
    }

    /// Rests a key until `until`.
    pub fn rest(&self, key: Uuid, until: Instant) {
        self.rest_here(key, until);
        if let Some(bus) = &self.bus {
            let ms = until.saturating_duration_since(Instant::now()).as_millis() as u64;
            super::notes::announce(bus, &super::notes::Note::KeyRest { key, ms });
        }
    }

    /// Rests a key in this instance only (another instance saw the 429).
    pub(super) fn rest_here(&self, key: Uuid, until: Instant) {
        lock(&self.resting).insert(key, until);
    }

    /// Whether a key is resting now.
    pub fn is_resting(&self, key: Uuid) -> bool {
        lock(&self.resting).get(&key).is_some_and(|t| *t > Instant::now())
    }

    /// Forgets a key's rest (it was replaced or deleted).
    pub fn forget(&self, key: Uuid) {
        lock(&self.resting).remove(&key);
    }
}

/// A provider handle whose key is resolved per call.
pub struct KeyedChat {
    /// Wire format.
    pub kind: ProviderKind,
    /// API base URL.
    pub base_url: String,
    /// Where the key comes from.
    pub plan: KeyPlan,
    /// The shared HTTP client (or one pinned to checked addresses).
    pub client: ProviderClient,
    /// Retries before the first token.
    pub retry: RetryPolicy,
    /// Vault access for stored keys.
    pub vault: Option<VaultAccess>,
    /// Shared keys' health.
    pub health: Arc<KeyHealth>,
    /// How long a rate-limited shared key rests.
    pub cooldown: Duration,
    /// On whose behalf (for the audit row of each decryption).
    pub by: Uuid,
    /// Whether the base URL must pass the SSRF guard at each call (a member chose it).
    pub guard: Option<Arc<crate::netguard::AllowedRanges>>,
}

fn failure(kind: &str, message: &str) -> ProviderError {
    ProviderError {
        status: 0,
        kind: kind.to_string(),
        message: message.to_string(),
        retryable: false,
        retry_after_secs: None,
    }
}

impl KeyedChat {
    fn handle(&self, client: ProviderClient, key: Secret, retry: RetryPolicy) -> Box<dyn ChatProvider> {
        let base = self.base_url.clone();
        match self.kind {
            ProviderKind::OpenAi => Box::new(OpenAiChat::new(client, base, key, retry).official()),
            ProviderKind::OpenAiCompatible => Box::new(OpenAiChat::new(client, base, key, retry)),
            ProviderKind::Anthropic => Box::new(AnthropicChat::new(client, base, key, retry)),
            ProviderKind::Gemini => Box::new(GeminiChat::new(client, base, key, retry)),
        }
    }

    /// The client for this call: the shared one, or one pinned to the addresses the guard
    /// checked just now (so a DNS answer cannot change between check and connect).
    async fn client(&self) -> Result<ProviderClient, ProviderError> {
        let Some(allowed) = &self.guard else {
            return Ok(self.client.clone());
        };
        let target = crate::netguard::check_url(&self.base_url, allowed)
            .await
            .map_err(|e| failure("blocked_address", &e.to_string()))?;
        self.client.pinned(&target).map_err(|e| failure("client", &e))
    }

    /// Runs `op` with the stored key `secret` of `owner`: the key is decrypted for this call, and
    /// the decryption's audit row is written while the call goes out (and, for a stream, while
    /// it streams: the row does not hold back the first token). If the row cannot be written
    /// the call fails (a stream ends with that error), and a stream ends only once it is written.
    async fn with_stored(
        &self,
        (owner, secret): (Uuid, Uuid),
        purpose: &str,
        (client, retry): (ProviderClient, RetryPolicy),
        op: Op<'_>,
    ) -> Result<Out, ProviderError> {
        let access = self.vault.as_ref().ok_or_else(|| failure("vault", "the key vault is not available"))?;
        let unusable = |e: crate::vault::store::StoreError| {
            tracing::error!(secret = %secret, error = %e, "a stored provider key could not be used");
            failure("vault", "the stored key could not be decrypted; replace it in the settings")
        };
        let sealed = access.sealed.of(&access.db, owner, secret).await.map_err(unusable)?;
        let key = access.vault.unseal(&sealed).map_err(unusable)?;
        let handle = self.handle(client, key, retry);
        let (db, by, purpose) = (access.db.clone(), self.by, purpose.to_string());
        let mut audit: Audit = Box::pin(async move {
            Vault::record_unseal(&db, &sealed, Use { by: Some(by), purpose: &purpose }).await.map_err(|e| {
                tracing::error!(secret = %secret, error = %e, "the audit row of a key's use could not be written");
                failure("vault", "the use of the stored key could not be recorded; try again")
            })
        });
        let mut audited = None;
        let call = op.run(handle.as_ref());
        tokio::pin!(call);
        let out = std::future::poll_fn(|cx| {
            if audited.is_none()
                && let Poll::Ready(done) = audit.as_mut().poll(cx)
            {
                audited = Some(done);
            }
            call.as_mut().poll(cx)
        })
        .await;
        match (out, audited) {
            (_, Some(Err(e))) => Err(e),
            (out, Some(Ok(()))) => out,
            (Ok(Out::Stream(stream)), None) => Ok(Out::Stream(audited_stream(stream, audit))),
            (out, None) => audit.await.and(out),
        }
    }

    /// Records a shared key's rest in `provider_keys` for the admin console (best effort).
    fn persist_rest(&self, key: Uuid, rest: Duration) {
        let Some(access) = self.vault.clone() else { return };
        tokio::spawn(async move {
            if let Err(e) = crate::storage::repos::providers::note_key_failure(&access.db, key, rest).await {
                tracing::warn!(key = %key, error = %e, "could not record a shared key's rest");
            }
        });
    }

    /// Runs `op` with the plan's key; with shared keys, moves to the next key when the
    /// provider rate-limits or refuses one (before any token, so nothing is sent twice).
    async fn with_key(&self, purpose: &str, op: Op<'_>) -> Result<Out, ProviderError> {
        let client = self.client().await?;
        match &self.plan {
            KeyPlan::Plain(key) => {
                op.run(self.handle(client, key.clone(), self.retry.clone()).as_ref()).await
            }
            KeyPlan::Own { owner, secret } => {
                self.with_stored((*owner, *secret), purpose, (client, self.retry.clone()), op).await
            }
            KeyPlan::Shared { provider, keys } => {
                let order = self.health.order(*provider, keys);
                let mut last = failure("no_key", "the provider has no shared key");
                for (i, id) in order.iter().enumerate() {
                    let more = i + 1 < order.len();
                    // While other keys remain, a rate limit moves on instead of waiting.
                    let retry = if more {
                        RetryPolicy { max_attempts: 1, ..self.retry.clone() }
                    } else {
                        self.retry.clone()
                    };
                    match self.with_stored((ORG_OWNER, *id), purpose, (client.clone(), retry), op).await {
                        Ok(v) => return Ok(v),
                        // An image call that failed otherwise may have been made (and billed).
                        Err(e)
                            if more
                                && (e.status == 429
                                    || e.status == 401
                                    || e.status == 403
                                    || (e.retryable && !matches!(op, Op::Images(..)))) =>
                        {
                            let rest = match e.status {
                                429 => Some(self.cooldown),
                                401 | 403 => Some(self.cooldown * 10),
                                _ => None,
                            };
                            if let Some(rest) = rest {
                                self.health.rest(*id, Instant::now() + rest);
                                self.persist_rest(*id, rest);
                                tracing::warn!(key = %id, status = e.status, "shared key rests; trying the next one");
                            }
                            last = e;
                        }
                        Err(e) => {
                            if e.status == 429 {
                                self.health.rest(*id, Instant::now() + self.cooldown);
                                self.persist_rest(*id, self.cooldown);
                            }
                            return Err(e);
                        }
                    }
                }
                Err(last)
            }
        }
    }
}

/// The audit row of a key's use, being written.
type Audit = BoxFuture<'static, Result<(), ProviderError>>;

/// `stream`, with `audit` driven on every poll until it is written: the stream ends only after
/// it, and ends with its error if it fails.
fn audited_stream(mut stream: EventStream, audit: Audit) -> EventStream {
    let mut audit = Some(audit);
    let mut ended = false;
    Box::pin(futures_util::stream::poll_fn(move |cx| {
        if let Some(pending) = audit.as_mut()
            && let Poll::Ready(done) = pending.as_mut().poll(cx)
        {
            audit = None;
            if let Err(e) = done {
                ended = true;
                return Poll::Ready(Some(ProviderEvent::Error(e)));
            }
        }
        if !ended {
            match stream.as_mut().poll_next(cx) {
                // A stream is not polled again once it ended.
                Poll::Ready(None) => ended = true,
                other => return other,
            }
        }
        // Still writing: the audit future was polled above and wakes this stream when it is done.
        if audit.is_some() { Poll::Pending } else { Poll::Ready(None) }
    }))
}

/// One call a keyed handle makes.
#[derive(Clone, Copy)]
enum Op<'r> {
    Stream(&'r ChatRequest),
    Models,
    Count(&'r ChatRequest),
    Embed(&'r str, &'r [String]),
    Discover(&'r str),
    Images(&'r ImageRequest, ImageLimits),
}

/// What the call produced.
enum Out {
    Stream(EventStream),
    Models(Vec<String>),
    Count(Option<u64>),
    Embedded(Option<Embeddings>),
    Discovered(Discovered),
    Images(ImageAnswer),
}

impl Op<'_> {
    async fn run(self, p: &dyn ChatProvider) -> Result<Out, ProviderError> {
        Ok(match self {
            Op::Stream(req) => Out::Stream(p.stream(req).await?),
            Op::Models => Out::Models(p.list_models().await?),
            Op::Count(req) => Out::Count(p.count_tokens(req).await?),
            Op::Embed(model, inputs) => Out::Embedded(p.embed(model, inputs).await?),
            Op::Discover(model) => Out::Discovered(p.discover(model).await?),
            Op::Images(req, limits) => Out::Images(p.generate_images(req, limits).await?),
        })
    }
}

fn mismatch() -> ProviderError {
    failure("internal", "unexpected provider answer")
}

impl ChatProvider for KeyedChat {
    fn stream<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<EventStream, ProviderError>> {
        Box::pin(async move {
            match self.with_key("chat", Op::Stream(req)).await? {
                Out::Stream(s) => Ok(s),
                _ => Err(mismatch()),
            }
        })
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        Box::pin(async move {
            match self.with_key("models", Op::Models).await? {
                Out::Models(m) => Ok(m),
                _ => Err(mismatch()),
            }
        })
    }

    fn count_tokens<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<Option<u64>, ProviderError>> {
        Box::pin(async move {
            match self.with_key("count_tokens", Op::Count(req)).await? {
                Out::Count(n) => Ok(n),
                _ => Err(mismatch()),
            }
        })
    }

    fn discover<'a>(&'a self, model: &'a str) -> BoxFuture<'a, Result<Discovered, ProviderError>> {
        Box::pin(async move {
            match self.with_key("discover", Op::Discover(model)).await? {
                Out::Discovered(d) => Ok(d),
                _ => Err(mismatch()),
            }
        })
    }

    fn embed<'a>(
        &'a self,
        model: &'a str,
        inputs: &'a [String],
    ) -> BoxFuture<'a, Result<Option<Embeddings>, ProviderError>> {
        Box::pin(async move {
            match self.with_key("embeddings", Op::Embed(model, inputs)).await? {
                Out::Embedded(e) => Ok(e),
                _ => Err(mismatch()),
            }
        })
    }
    fn generate_images<'a>(
        &'a self,
        req: &'a ImageRequest,
        limits: ImageLimits,
    ) -> BoxFuture<'a, Result<ImageAnswer, ProviderError>> {
        Box::pin(async move {
            match self.with_key("images", Op::Images(req, limits)).await? {
                Out::Images(a) => Ok(a),
                _ => Err(mismatch()),
            }
        })
    }
}

/// One user's recent calls to one provider.
#[derive(Default)]
struct Window {
    requests: VecDeque<Instant>,
    tokens: VecDeque<(Instant, u64)>,
}

impl Window {
    fn trim(&mut self, now: Instant) {
        let minute = Duration::from_secs(60);
        while self.requests.front().is_some_and(|t| now.duration_since(*t) >= minute) {
            self.requests.pop_front();
        }
        while self.tokens.front().is_some_and(|(t, _)| now.duration_since(*t) >= minute) {
            self.tokens.pop_front();
        }
    }
}

/// Requests and tokens per minute, per user and provider: sliding windows in memory for one
/// instance; fixed one-minute windows in Redis when several instances share them (if Redis
/// fails, each instance counts in memory meanwhile).
#[derive(Default)]
pub struct RateLimits {
    windows: Mutex<HashMap<(Uuid, String), Window>>,
    shared: Option<crate::bus::limits::SharedCounters>,
}

impl RateLimits {
    /// Limits every instance shares through `counters`.
    pub fn shared(counters: crate::bus::limits::SharedCounters) -> RateLimits {
        RateLimits { shared: Some(counters), ..Default::default() }
    }

    /// Admits one request when both limits allow it and counts it; otherwise the seconds until
    /// a call leaves the window.
    pub async fn admit(
        &self,
        user: Uuid,
        provider: &str,
        rpm: Option<u64>,
        tpm: Option<u64>,
    ) -> Result<(), u64> {
        if rpm.is_none() && tpm.is_none() {
            return Ok(());
        }
        if let Some(shared) = &self.shared {
            match admit_shared(shared, user, provider, rpm, tpm).await {
                Ok(outcome) => return outcome,
                Err(e) => {
                    tracing::warn!(error = %e, "rate limits are counted in this instance until Redis is back")
                }
            }
        }
        self.admit_here(user, provider, rpm, tpm)
    }

    /// [`Self::admit`], counted in this process only.
    pub fn admit_here(
        &self,
        user: Uuid,
        provider: &str,
        rpm: Option<u64>,
        tpm: Option<u64>,
    ) -> Result<(), u64> {
        if rpm.is_none() && tpm.is_none() {
            return Ok(());
        }
        let now = Instant::now();
        let mut windows = lock(&self.windows);
        let w = windows.entry((user, provider.to_string())).or_default();
        w.trim(now);
        let wait = |t: Instant| 60u64.saturating_sub(now.duration_since(t).as_secs()).max(1);
        if let Some(rpm) = rpm
            && w.requests.len() as u64 >= rpm
        {
            return Err(w.requests.front().map_or(60, |t| wait(*t)));
        }
        if let Some(tpm) = tpm
            && w.tokens.iter().map(|(_, n)| n).sum::<u64>() >= tpm
        {
            return Err(w.tokens.front().map_or(60, |(t, _)| wait(*t)));
        }
        w.requests.push_back(now);
        Ok(())
    }

    /// Counts the tokens a finished call used.
    pub fn spend(&self, user: Uuid, provider: &str, tokens: u64) {
        if let Some(shared) = self.shared.clone() {
            let key = shared.key(&format!("tpm:{user}:{provider}"));
            tokio::spawn(async move {
                if let Err(e) = shared.add(&key, tokens, Duration::from_secs(60)).await {
                    tracing::warn!(error = %e, "tokens spent were not counted in Redis");
                }
            });
        }
        let now = Instant::now();
        let mut windows = lock(&self.windows);
        let w = windows.entry((user, provider.to_string())).or_default();
        w.trim(now);
        w.tokens.push_back((now, tokens));
    }
}

async fn admit_shared(
    shared: &crate::bus::limits::SharedCounters,
    user: Uuid,
    provider: &str,
    rpm: Option<u64>,
    tpm: Option<u64>,
) -> Result<Result<(), u64>, crate::bus::limits::CounterError> {
    let secs = |left: Duration| left.as_secs().max(1);
    if let Some(tpm) = tpm {
        let (spent, left) = shared.total(&shared.key(&format!("tpm:{user}:{provider}"))).await?;
        if spent >= tpm {
            return Ok(Err(secs(left)));
        }
    }
    if let Some(rpm) = rpm {
        let key = shared.key(&format!("rpm:{user}:{provider}"));
        if let Err(left) = shared.hit(&key, rpm, Duration::from_secs(60)).await? {
            return Ok(Err(secs(left)));
        }
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_rotate_round_robin_and_resting_keys_go_last() {
        let health = KeyHealth::default();
        let provider = Uuid::now_v7();
        let keys = [Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7()];
        assert_eq!(health.order(provider, &keys), keys);
        assert_eq!(health.order(provider, &keys), [keys[1], keys[2], keys[0]]);
        health.rest(keys[0], Instant::now() + Duration::from_secs(60));
        assert!(health.is_resting(keys[0]));
        assert_eq!(health.order(provider, &keys), [keys[2], keys[1], keys[0]]);
        health.forget(keys[0]);
        assert!(!health.is_resting(keys[0]));
        assert!(health.order(provider, &[]).is_empty());
    }

    #[test]
    fn rate_limits_count_requests_and_tokens_per_user_and_provider() {
        let limits = RateLimits::default();
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        assert!(limits.admit_here(a, "p", Some(2), None).is_ok());
        assert!(limits.admit_here(a, "p", Some(2), None).is_ok());
        let wait = limits.admit_here(a, "p", Some(2), None).unwrap_err();
        assert!((1..=60).contains(&wait));
        assert!(limits.admit_here(b, "p", Some(2), None).is_ok(), "another user has their own window");
        assert!(limits.admit_here(a, "q", Some(2), None).is_ok(), "another provider too");
        limits.spend(b, "p", 500);
        assert!(limits.admit_here(b, "p", None, Some(500)).is_err());
        assert!(limits.admit_here(b, "p", None, None).is_ok(), "no limits, no counting");
    }

    /// Two text events, then the end; polling it again after the end panics, as many streams do.
    fn two_deltas() -> EventStream {
        let mut left = 2;
        let mut ended = false;
        Box::pin(futures_util::stream::poll_fn(move |_| {
            assert!(!ended, "polled after it ended");
            if left == 0 {
                ended = true;
                return Poll::Ready(None);
            }
            left -= 1;
            Poll::Ready(Some(ProviderEvent::TextDelta(format!("t{left}"))))
        }))
    }

    fn texts(events: &[ProviderEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                ProviderEvent::TextDelta(t) => t.clone(),
                ProviderEvent::Error(e) => format!("error {}", e.kind),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn a_stream_relays_at_once_and_ends_only_when_its_audit_row_is_written() {
        use futures_util::StreamExt;
        let (written, audit_done) = tokio::sync::oneshot::channel::<()>();
        let audit: Audit = Box::pin(async move { audit_done.await.map_err(|_| failure("vault", "gone")) });
        let mut stream = audited_stream(two_deltas(), audit);
        // The events come before the row is written.
        assert_eq!(texts(&[stream.next().await.unwrap(), stream.next().await.unwrap()]), ["t1", "t0"]);
        // The stream has ended, but not before the row is written.
        let end = tokio::time::timeout(Duration::from_millis(50), stream.next()).await;
        assert!(end.is_err(), "the stream ended before its audit row was written");
        written.send(()).unwrap();
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn a_stream_whose_audit_row_fails_ends_with_that_error() {
        use futures_util::StreamExt;
        let audit: Audit = Box::pin(async { Err(failure("vault", "not recorded")) });
        let events: Vec<ProviderEvent> = audited_stream(two_deltas(), audit).collect().await;
        assert_eq!(texts(&events), ["error vault"]);
        // Written after the stream ended: the events are relayed, then the error.
        let (written, audit_done) = tokio::sync::oneshot::channel::<()>();
        let audit: Audit = Box::pin(async move {
            let _ = audit_done.await;
            Err(failure("vault", "not recorded"))
        });
        let mut stream = audited_stream(two_deltas(), audit);
        let first = [stream.next().await.unwrap(), stream.next().await.unwrap()];
        written.send(()).unwrap();
        let rest: Vec<ProviderEvent> = stream.collect().await;
        assert_eq!(texts(&first), ["t1", "t0"]);
        assert_eq!(texts(&rest), ["error vault"]);
    }
}
