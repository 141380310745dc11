//! The bus between instances: what one instance publishes, every instance receives, in the
//! order it was published. Two implementations behind one trait: in-process (one instance, the
//! default: nothing leaves the process) and Redis pub/sub (several instances on one database).
//!
//! The bus carries opaque bodies under a [`Topic`]; each subsystem encodes its own messages (the
//! run registry its runs, caches their invalidations), so the bus knows none of them.

pub mod limits;
pub mod redis;

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::broadcast;
use uuid::Uuid;

/// What a frame is about; each subscriber reads the topics it knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Topic {
    /// The run registry: live runs' events, Stop, snapshots.
    Runs = 1,
    /// Caches other instances keep: something changed, forget it.
    Caches = 2,
    /// Shares were revoked: streams of people who lost access end.
    Access = 3,
    /// Local only: the connection to the other instances was lost and is back (frames may have
    /// been missed meanwhile).
    Reconnected = 255,
}

impl Topic {
    fn from_byte(b: u8) -> Option<Topic> {
        Some(match b {
            1 => Topic::Runs,
            2 => Topic::Caches,
            3 => Topic::Access,
            _ => return None,
        })
    }
}

/// One published message: who sent it, about what, and its body.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// The sending instance.
    pub from: Uuid,
    /// What it is about.
    pub topic: Topic,
    /// The topic's own encoding.
    pub body: Bytes,
}

impl Frame {
    /// The wire form: topic byte, sender id, body.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(17 + self.body.len());
        out.push(self.topic as u8);
        out.extend_from_slice(self.from.as_bytes());
        out.extend_from_slice(&self.body);
        out
    }

    /// Reads the wire form; `None` for anything else (another program on the channel).
    pub fn decode(raw: &[u8]) -> Option<Frame> {
        let (&topic, rest) = raw.split_first()?;
        let topic = Topic::from_byte(topic)?;
        let from = Uuid::from_slice(rest.get(..16)?).ok()?;
        Some(Frame { from, topic, body: Bytes::copy_from_slice(&rest[16..]) })
    }
}

/// Frames buffered per local subscriber before it lags.
const LOCAL_BUFFER: usize = 4096;

/// The bus as the rest of Arbor sees it.
pub trait Bus: Send + Sync {
    /// This instance's id (frames it receives from itself are its own).
    fn instance(&self) -> Uuid;
    /// Whether other instances may be listening (false: nothing needs publishing).
    fn is_shared(&self) -> bool;
    /// Whether the bus is reachable now.
    fn is_connected(&self) -> bool;
    /// Publishes a frame; never waits (a bus that is down drops it and says so in the log).
    fn publish(&self, topic: Topic, body: Bytes);
    /// Every frame published from now on, by any instance (this one's too), in order.
    fn subscribe(&self) -> broadcast::Receiver<Arc<Frame>>;
}

/// A shared bus handle.
pub type SharedBus = Arc<dyn Bus>;

/// One instance: frames go to this process's subscribers only.
pub struct InProcessBus {
    instance: Uuid,
    local: broadcast::Sender<Arc<Frame>>,
}

impl InProcessBus {
    /// A bus for the instance `instance`.
    pub fn new(instance: Uuid) -> InProcessBus {
        InProcessBus { instance, local: broadcast::channel(LOCAL_BUFFER).0 }
    }
}

impl Bus for InProcessBus {
    fn instance(&self) -> Uuid {
        self.instance
    }

    fn is_shared(&self) -> bool {
        false
    }

    fn is_connected(&self) -> bool {
        true
    }

    fn publish(&self, topic: Topic, body: Bytes) {
        // No subscriber is fine.
        let _ = self.local.send(Arc::new(Frame { from: self.instance, topic, body }));
    }

    fn subscribe(&self) -> broadcast::Receiver<Arc<Frame>> {
        self.local.subscribe()
    }
}

/// What a listener hears: a frame of its topic from another instance, or that it may have
/// missed some (it fell behind, or the bus was away and is back).
pub enum Heard {
    /// A frame from another instance.
    Frame(Arc<Frame>),
    /// Frames may have been missed: whatever was kept from them should be made again.
    Gap,
}

/// Calls `on` with every frame of `topic` other instances publish, and with [`Heard::Gap`] when
/// some may have been missed, for as long as the process runs.
pub fn listen<F, Fut>(bus: &SharedBus, topic: Topic, mut on: F)
where
    F: FnMut(Heard) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let (me, mut frames) = (bus.instance(), bus.subscribe());
    tokio::spawn(async move {
        loop {
            match frames.recv().await {
                Ok(f) if f.topic == Topic::Reconnected => on(Heard::Gap).await,
                Ok(f) if f.topic == topic && f.from != me => on(Heard::Frame(f)).await,
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => on(Heard::Gap).await,
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    });
}

/// Why the bus could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// The URL is not a Redis URL.
    #[error("bus.url is not a usable Redis URL: {0}")]
    Url(String),
    /// Redis did not answer.
    #[error("cannot reach Redis at bus.url ({0}); start it, or leave bus.url empty for a single instance")]
    Unreachable(String),
}

/// The bus the configuration names: Redis when `url` is set, else in-process.
/// `prefix` names the installation's channel.
pub async fn open(url: &str, prefix: &str, instance: Uuid) -> Result<SharedBus, BusError> {
    if url.trim().is_empty() {
        return Ok(Arc::new(InProcessBus::new(instance)));
    }
    Ok(Arc::new(redis::RedisBus::connect(url.trim(), &format!("{prefix}:bus"), instance).await?))
}

#[cfg(test)]
mod tests;
