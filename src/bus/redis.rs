//! The Redis bus: one PUBLISH connection fed by a queue (so frames leave in the order they were
//! published) and one SUBSCRIBE connection; both reconnect on their own. While Redis is away
//! the instance goes on serving its own runs; frames published meanwhile are dropped (counted
//! in the log), and when the subscriber is back it announces [`Topic::Reconnected`] locally so
//! the subscribers resynchronise.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::{broadcast, mpsc};
use uuid::Uuid;

use super::{Bus, BusError, Frame, LOCAL_BUFFER, Topic};

/// Frames queued for publishing before new ones are dropped (Redis is slow or away).
const QUEUE: usize = 65_536;
/// Frames sent in one pipeline at most.
const BATCH: usize = 256;
/// How long connecting may take at start.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Several instances, one Redis.
pub struct RedisBus {
    instance: Uuid,
    queue: mpsc::Sender<Frame>,
    local: broadcast::Sender<Arc<Frame>>,
    connected: Arc<AtomicBool>,
    dropped: Arc<AtomicU64>,
}

impl RedisBus {
    /// Connects both ways; an error when Redis cannot be reached now.
    /// Every instance of one installation publishes to and subscribes to `channel`.
    pub async fn connect(url: &str, channel: &str, instance: Uuid) -> Result<RedisBus, BusError> {
        let channel: Arc<str> = Arc::from(channel);
        let client = ::redis::Client::open(url).map_err(|e| BusError::Url(e.to_string()))?;
        let unreachable = |e: String| BusError::Unreachable(e);
        let publisher = tokio::time::timeout(CONNECT_TIMEOUT, client.get_multiplexed_async_connection())
            .await
            .map_err(|_| unreachable("timed out".into()))?
            .map_err(|e| unreachable(e.to_string()))?;
        let subscriber = tokio::time::timeout(CONNECT_TIMEOUT, subscribe(&client, &channel))
            .await
            .map_err(|_| unreachable("timed out".into()))?
            .map_err(|e| unreachable(e.to_string()))?;
        let (queue, rx) = mpsc::channel(QUEUE);
        let local = broadcast::channel(LOCAL_BUFFER).0;
        let connected = Arc::new(AtomicBool::new(true));
        // The subscriber finds Redis back first (it is always waiting on it): it wakes the
        // publisher, which would otherwise wait out its backoff and drop the frames of that time.
        let back = Arc::new(tokio::sync::Notify::new());
        tokio::spawn(publish_loop(
            client.clone(),
            channel.clone(),
            publisher,
            rx,
            (connected.clone(), back.clone()),
        ));
        tokio::spawn(subscribe_loop(client, channel, subscriber, local.clone(), (connected.clone(), back)));
        Ok(RedisBus { instance, queue, local, connected, dropped: Arc::new(AtomicU64::new(0)) })
    }
}

async fn subscribe(client: &::redis::Client, channel: &str) -> ::redis::RedisResult<::redis::aio::PubSub> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    Ok(pubsub)
}

/// Waits a little longer after each failed attempt, at most two seconds.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis((100u64 << attempt.min(5)).min(2000))
}

async fn publish_loop(
    client: ::redis::Client,
    channel: Arc<str>,
    mut conn: ::redis::aio::MultiplexedConnection,
    mut rx: mpsc::Receiver<Frame>,
    (connected, back): (Arc<AtomicBool>, Arc<tokio::sync::Notify>),
) {
    let mut batch = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        let mut pipe = ::redis::pipe();
        for frame in batch.drain(..) {
            pipe.cmd("PUBLISH").arg(&*channel).arg(frame.encode()).ignore();
        }
        if let Err(e) = pipe.query_async::<()>(&mut conn).await {
            tracing::warn!(error = %e, "the bus lost Redis: frames are dropped until it is back");
            connected.store(false, Ordering::SeqCst);
            let mut attempt = 0;
            conn = loop {
                tokio::select! {
                    _ = tokio::time::sleep(backoff(attempt)) => {}
                    _ = back.notified() => {}
                }
                attempt += 1;
                // Frames published while away are stale by now: subscribers resynchronise.
                while rx.try_recv().is_ok() {}
                if let Ok(c) = client.get_multiplexed_async_connection().await {
                    break c;
                }
            };
            connected.store(true, Ordering::SeqCst);
            tracing::info!("the bus reaches Redis again (publishing)");
            // The batch that found the connection broken goes out now: often Redis was back
            // already and only this connection had not noticed (a mirror ignores what it has).
            if let Err(e) = pipe.query_async::<()>(&mut conn).await {
                tracing::warn!(error = %e, "frames published while Redis came back were dropped");
            }
        }
    }
}

async fn subscribe_loop(
    client: ::redis::Client,
    channel: Arc<str>,
    mut pubsub: ::redis::aio::PubSub,
    local: broadcast::Sender<Arc<Frame>>,
    (connected, back): (Arc<AtomicBool>, Arc<tokio::sync::Notify>),
) {
    loop {
        {
            let mut messages = pubsub.on_message();
            while let Some(msg) = messages.next().await {
                if let Some(frame) = Frame::decode(msg.get_payload_bytes()) {
                    let _ = local.send(Arc::new(frame));
                }
            }
        }
        tracing::warn!("the bus lost Redis (subscription); this instance serves its own runs meanwhile");
        connected.store(false, Ordering::SeqCst);
        let mut attempt = 0;
        pubsub = loop {
            tokio::time::sleep(backoff(attempt)).await;
            attempt += 1;
            if let Ok(p) = subscribe(&client, &channel).await {
                break p;
            }
        };
        connected.store(true, Ordering::SeqCst);
        back.notify_one();
        tracing::info!("the bus reaches Redis again: resynchronising live runs");
        let _ =
            local.send(Arc::new(Frame { from: Uuid::nil(), topic: Topic::Reconnected, body: Bytes::new() }));
    }
}

impl Bus for RedisBus {
    fn instance(&self) -> Uuid {
        self.instance
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn is_connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    fn publish(&self, topic: Topic, body: Bytes) {
        if self.queue.try_send(Frame { from: self.instance, topic, body }).is_err() {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed);
            if n.is_power_of_two() {
                tracing::warn!(dropped = n + 1, "the bus queue is full: frames are dropped");
            }
        }
    }

    fn subscribe(&self) -> broadcast::Receiver<Arc<Frame>> {
        self.local.subscribe()
    }
}
