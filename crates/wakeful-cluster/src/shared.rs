//! The link's vocabulary: what it needs of the daemon it runs in
//! ([`Node`]), its errors ([`LinkError`]), the state and counters its tasks
//! share ([`Shared`]), and their retry backoff. The link ([`crate::link`])
//! and its tasks (ship, import, directory, control) all speak it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use wakeful_core::MonitorInfo;
use wakeful_protocol::{ImportResult, ImportedEvent, LinkState, LinkStatus, Reply, Request};
use wakeful_store::StoreReader;

use crate::config::ClusterConfig;

/// A boxed future, for [`Node`]'s methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the link needs of the daemon it runs in.
pub trait Node: Send + Sync + 'static {
    /// Keeps events of other hosts through the daemon's import path (each
    /// once per origin), returning once they are committed.
    fn import(
        &self,
        events: Vec<ImportedEvent>,
    ) -> BoxFuture<'_, Result<ImportResult, NodeImportError>>;
    /// Answers a request another host sent (`start`, `stop`) as the socket
    /// would answer it.
    fn control(&self, request: Request) -> BoxFuture<'_, Reply>;
    /// This host's monitors now (active, and ended within the hour).
    fn monitors(&self) -> Vec<MonitorInfo>;
}

/// Why the daemon kept none of the events the link brought
/// ([`Node::import`]).
#[derive(Debug, thiserror::Error)]
pub enum NodeImportError {
    /// The daemon is stopping.
    #[error("the daemon is stopping")]
    Stopping,
    /// The daemon refused the import; its own error.
    #[error("{0}")]
    Refused(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Why the link could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// NATS is not connected now.
    #[error(
        "the cluster link is down: {reason}. Events wait in the local log and ship once it is up"
    )]
    Down {
        /// Why: the last failed connection attempt, in words that say what
        /// to do, or that NATS at the configured URL is not connected yet.
        reason: String,
    },
    /// No daemon of that host answered.
    #[error("host {host} is unreachable: {detail}")]
    Unreachable {
        /// The host.
        host: String,
        /// What happened.
        detail: String,
    },
    /// NATS answered with an error.
    #[error("NATS: {0}")]
    Nats(String),
    /// The configuration cannot be used (a credentials file that is not
    /// one, a server address that does not parse); the message says what
    /// to fix.
    #[error("{0}")]
    Config(String),
}

/// Counters and state shared by the link's tasks.
pub(crate) struct Shared {
    pub(crate) config: ClusterConfig,
    pub(crate) host: String,
    pub(crate) state: watch::Sender<LinkState>,
    pub(crate) reader: StoreReader,
    pub(crate) shipped_seq: AtomicU64,
    pub(crate) shipped: AtomicU64,
    pub(crate) imported: AtomicU64,
    pub(crate) import_skipped: AtomicU64,
    pub(crate) import_rejected: AtomicU64,
    pub(crate) publish_failures: AtomicU64,
    pub(crate) reordered: AtomicU64,
    pub(crate) connects: AtomicU64,
    pub(crate) disconnects: AtomicU64,
    /// `u64::MAX` until known.
    pub(crate) import_lag: AtomicU64,
    pub(crate) last_error: Mutex<Option<String>>,
    /// Why the link is not up (the last failed connection attempt); `None`
    /// while it is up or before the first attempt failed.
    pub(crate) down_reason: Mutex<Option<String>>,
    /// Set while the server connected to is one the link does not work
    /// with (too old, no JetStream): its connection does not make the link
    /// up.
    pub(crate) server_refused: std::sync::atomic::AtomicBool,
}

impl Shared {
    pub(crate) fn error(&self, what: impl std::fmt::Display) {
        let text = what.to_string();
        tracing::warn!("cluster: {text}");
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(text);
    }

    /// Records why a connection attempt failed: the link is down, and the
    /// log says so whenever the reason changes (not at every retry).
    pub(crate) fn refused(&self, reason: String) {
        let mut slot = self.down_reason.lock().unwrap_or_else(|p| p.into_inner());
        if slot.as_deref() != Some(reason.as_str()) {
            tracing::warn!("cluster link down: {reason}");
            *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason.clone());
            *slot = Some(reason);
        }
        drop(slot);
        self.state.send_if_modified(|s| {
            let was = *s;
            *s = LinkState::Down;
            was != LinkState::Down
        });
    }

    /// The server connected to cannot be used (`reason`): the link stays
    /// down, saying why.
    pub(crate) fn refuse_server(&self, reason: String) {
        self.server_refused.store(true, Ordering::SeqCst);
        self.refused(reason);
    }

    /// The server connected to can be used: the link is up.
    pub(crate) fn accept_server(&self) {
        self.server_refused.store(false, Ordering::SeqCst);
        *self.down_reason.lock().unwrap_or_else(|p| p.into_inner()) = None;
        if !self.up() {
            tracing::info!(
                "cluster link up: host {} connected to {}",
                self.host,
                self.config.url
            );
        }
        self.state.send_replace(LinkState::Up);
    }

    pub(crate) fn down_reason(&self) -> Option<String> {
        self.down_reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn up(&self) -> bool {
        *self.state.borrow() == LinkState::Up
    }

    /// Returns once the link is up (at once when it is).
    pub(crate) async fn wait_up(&self) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| *s == LinkState::Up).await;
    }

    pub(crate) fn waiting_to_ship(&self) -> u64 {
        self.reader
            .count_local_after(self.shipped_seq.load(Ordering::SeqCst))
            .unwrap_or(0)
    }

    pub(crate) fn import_lag(&self) -> Option<u64> {
        let v = self.import_lag.load(Ordering::SeqCst);
        (v != u64::MAX).then_some(v)
    }

    pub(crate) fn status(&self) -> LinkStatus {
        let n = |a: &AtomicU64| a.load(Ordering::SeqCst);
        LinkStatus {
            host: self.host.clone(),
            url: self.config.url.clone(),
            link: *self.state.borrow(),
            waiting_to_ship: self.waiting_to_ship(),
            shipped_seq: n(&self.shipped_seq),
            import_lag: self.import_lag(),
            shipped: n(&self.shipped),
            imported: n(&self.imported),
            import_skipped: n(&self.import_skipped),
            import_rejected: n(&self.import_rejected),
            publish_failures: n(&self.publish_failures),
            reordered: n(&self.reordered),
            connects: n(&self.connects),
            disconnects: n(&self.disconnects),
            last_error: self
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            down_reason: if self.up() { None } else { self.down_reason() },
        }
    }
}

/// Exponential backoff for retries: 100 ms doubling up to 2 s.
pub(crate) struct Backoff(u32);

impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff(0)
    }

    pub(crate) fn reset(&mut self) {
        self.0 = 0;
    }

    pub(crate) async fn wait(&mut self) {
        tokio::time::sleep(reconnect_delay(self.0 as usize)).await;
        self.0 = self.0.saturating_add(1);
    }
}

/// How long to wait before reconnect attempt `n` (and retry `n`): 100 ms
/// doubling, at most 2 s.
pub(crate) fn reconnect_delay(n: usize) -> Duration {
    Duration::from_millis(100u64 << n.min(5)).min(Duration::from_secs(2))
}
