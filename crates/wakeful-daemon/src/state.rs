//! What every connection of the daemon shares ([`State`]): the registry,
//! the store's reader, the wake routes, the consumers' slots, the socket's
//! health, and the cluster link once it runs. The socket server
//! ([`crate::server`]) and the cluster link's side of the daemon
//! (`crate::cluster`) both use it; it uses neither.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use wakeful_engine::MonitorRegistry;
use wakeful_protocol::{ErrorKind, Paths};
use wakeful_store::StoreReader;

/// Why a request failed: the kind (the client's exit code) and what to say.
pub(crate) type Failure = (ErrorKind, String);

/// What every connection shares.
pub struct State {
    pub(crate) wakes: crate::wake::Wakes,
    pub(crate) registry: MonitorRegistry,
    pub(crate) reader: StoreReader,
    pub(crate) paths: Paths,
    pub(crate) shutdown: watch::Sender<bool>,
    pub(crate) consumers: std::sync::Mutex<HashMap<(String, String), Arc<ConsumerSlot>>>,
    pub(crate) followers: std::sync::atomic::AtomicUsize,
    /// Notified when a streaming connection ends.
    pub(crate) followers_left: tokio::sync::Notify,
    pub(crate) health: Health,
    pub(crate) limits: Limits,
    /// Event streams pushing to an agent woken by them, per session.
    pub(crate) pushers: std::sync::Mutex<HashMap<String, usize>>,
    /// The cluster link, when `[cluster]` is configured (set once, after
    /// the state exists: the link answers remote control through it).
    pub(crate) cluster: std::sync::OnceLock<wakeful_cluster::Link>,
    /// The store's share of the disk.
    pub(crate) storage: Arc<crate::storage::Storage>,
    /// Background tasks (`task_create`).
    pub(crate) tasks: crate::task_book::Tasks,
    /// Webhook subscriptions of MCP Events (`event_subscribe`).
    pub(crate) subscriptions: crate::webhook_book::Subscriptions,
    /// The new program of an upgrade that was asked for (`upgrade`): the
    /// socket server stops accepting, and the daemon hands over.
    pub(crate) upgrade_to: watch::Sender<Option<std::path::PathBuf>>,
    /// Set while the daemon hands over: streams end with `resume`.
    pub(crate) upgrading: watch::Sender<bool>,
    /// Waits being served now, and a notice when one ends.
    pub(crate) waits: std::sync::atomic::AtomicUsize,
    pub(crate) waits_left: tokio::sync::Notify,
    /// Upgrades this process went through, and the version before the
    /// last one.
    pub(crate) upgrades: (u32, Option<String>),
}

/// Counts a streaming connection while it lives.
pub(crate) struct Following<'a>(
    &'a std::sync::atomic::AtomicUsize,
    Option<&'a tokio::sync::Notify>,
);

impl<'a> Following<'a> {
    /// A `wait` being served: counted for an upgrade, which waits for it
    /// to end.
    pub(crate) fn wait(state: &'a State) -> Self {
        state
            .waits
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Following(&state.waits, Some(&state.waits_left))
    }

    pub(crate) fn new(n: &'a std::sync::atomic::AtomicUsize) -> Self {
        n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Following(n, None)
    }

    /// A streaming connection of `state`: counted, and the daemon's
    /// shutdown waits for it to have sent what it had.
    pub(crate) fn stream(state: &'a State) -> Self {
        state
            .followers
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Following(&state.followers, Some(&state.followers_left))
    }
}

impl Drop for Following<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(n) = self.1 {
            n.notify_waiters();
        }
    }
}

/// One consumer of one session: its batches are handed out one at a time,
/// and the newest exclusive waiter is the only one that may wait.
pub(crate) struct ConsumerSlot {
    pub(crate) handing_out: tokio::sync::Mutex<()>,
    pub(crate) exclusive: watch::Sender<u64>,
    pub(crate) waiters: std::sync::atomic::AtomicUsize,
    /// Waiters that do not stand by (`fallback`): while there is one, the
    /// waiters that stand by take no batch.
    pub(crate) first: watch::Sender<usize>,
    /// Waiters that stand by.
    pub(crate) fallbacks: std::sync::atomic::AtomicUsize,
}

/// Counts a waiter that does not stand by in [`ConsumerSlot::first`] while
/// it lives.
pub(crate) struct FirstWaiter<'a>(&'a watch::Sender<usize>);

impl<'a> FirstWaiter<'a> {
    pub(crate) fn new(first: &'a watch::Sender<usize>) -> Self {
        first.send_modify(|n| *n += 1);
        FirstWaiter(first)
    }
}

impl Drop for FirstWaiter<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl State {
    pub(crate) fn consumer(&self, session: &str, consumer: &str) -> Arc<ConsumerSlot> {
        let mut map = self.consumers.lock().unwrap_or_else(|p| p.into_inner());
        map.entry((session.to_string(), consumer.to_string()))
            .or_insert_with(|| {
                Arc::new(ConsumerSlot {
                    handing_out: tokio::sync::Mutex::new(()),
                    exclusive: watch::channel(0).0,
                    waiters: std::sync::atomic::AtomicUsize::new(0),
                    first: watch::channel(0).0,
                    fallbacks: std::sync::atomic::AtomicUsize::new(0),
                })
            })
            .clone()
    }
}

/// Counts an event stream that pushes to an agent (see
/// [`wakeful_protocol::ReadEvents`]'s `wakes_agent`) while it lives.
pub(crate) struct Pushing<'a> {
    state: &'a State,
    session: String,
}

impl<'a> Pushing<'a> {
    pub(crate) fn new(state: &'a State, session: &str) -> Self {
        let mut map = state.pushers.lock().unwrap_or_else(|p| p.into_inner());
        *map.entry(session.to_string()).or_insert(0) += 1;
        Pushing {
            state,
            session: session.to_string(),
        }
    }
}

impl Drop for Pushing<'_> {
    fn drop(&mut self) {
        let mut map = self.state.pushers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.session) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.session);
            }
        }
    }
}

impl State {
    /// Whether, and through what, `session`'s events would wake its agent
    /// now.
    pub fn wake_report(&self, session: &str) -> wakeful_protocol::WakeReport {
        let waiters: Vec<(wakeful_protocol::Consumer, usize)> = {
            let map = self.consumers.lock().unwrap_or_else(|p| p.into_inner());
            map.iter()
                .filter(|((s, _), _)| s == session)
                .map(|((_, c), slot)| {
                    (
                        wakeful_protocol::Consumer::from_name(c),
                        slot.waiters.load(std::sync::atomic::Ordering::SeqCst),
                    )
                })
                .collect()
        };
        let channel_pushers = {
            let map = self.pushers.lock().unwrap_or_else(|p| p.into_inner());
            map.get(session).copied().unwrap_or(0)
        };
        let route = self.wakes.show(session);
        crate::liveness::assess(
            session,
            &crate::liveness::Attached {
                waiters,
                channel_pushers,
                route: route.as_ref(),
            },
        )
    }
}

impl State {
    /// After the hub closed: waits (up to `limit`) until every streaming
    /// connection has sent its last events.
    pub async fn drain_followers(&self, limit: Duration) {
        until_none(&self.followers, &self.followers_left, limit).await;
    }

    /// Consumers of `session` (all for `None`): the store's cursors, and
    /// consumers with waiters attached that never acknowledged anything.
    pub(crate) fn consumers(
        &self,
        session: Option<&str>,
    ) -> Result<Vec<wakeful_protocol::ConsumerInfo>, wakeful_store::StoreError> {
        let slots: Vec<((String, String), (usize, usize))> = {
            let map = self.consumers.lock().unwrap_or_else(|p| p.into_inner());
            map.iter()
                .filter(|((s, _), _)| session.is_none_or(|want| s == want))
                .map(|(k, slot)| {
                    let n = slot.waiters.load(std::sync::atomic::Ordering::SeqCst);
                    let f = slot.fallbacks.load(std::sync::atomic::Ordering::SeqCst);
                    (k.clone(), (n, f.min(n)))
                })
                .collect()
        };
        let mut out: Vec<wakeful_protocol::ConsumerInfo> = self
            .reader
            .consumers(session)?
            .into_iter()
            .map(
                |(session, consumer, acked_seq, unacked)| wakeful_protocol::ConsumerInfo {
                    session,
                    consumer,
                    acked_seq,
                    unacked,
                    waiters: 0,
                    fallback_waiters: 0,
                },
            )
            .collect();
        for ((s, c), (waiters, fallback_waiters)) in slots {
            match out.iter_mut().find(|i| i.session == s && i.consumer == c) {
                Some(info) => {
                    info.waiters = waiters;
                    info.fallback_waiters = fallback_waiters;
                }
                None if waiters > 0 => {
                    let unacked = self.reader.count_after(&s, 0)?;
                    out.push(wakeful_protocol::ConsumerInfo {
                        session: s,
                        consumer: c,
                        acked_seq: 0,
                        unacked,
                        waiters,
                        fallback_waiters,
                    });
                }
                None => {}
            }
        }
        out.sort_by(|a, b| (&a.session, &a.consumer).cmp(&(&b.session, &b.consumer)));
        Ok(out)
    }

    /// Set once the daemon is asked to stop.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// The monitor registry.
    pub(crate) fn registry(&self) -> &MonitorRegistry {
        &self.registry
    }

    /// The store's reader.
    pub(crate) fn reader(&self) -> &StoreReader {
        &self.reader
    }

    /// The daemon's shared state.
    pub fn new(
        registry: MonitorRegistry,
        reader: StoreReader,
        paths: Paths,
        wakes: crate::wake::Wakes,
        limits: Limits,
        storage: Arc<crate::storage::Storage>,
    ) -> Self {
        State {
            storage,
            wakes,
            registry,
            reader,
            paths,
            shutdown: watch::channel(false).0,
            consumers: std::sync::Mutex::new(HashMap::new()),
            followers: std::sync::atomic::AtomicUsize::new(0),
            followers_left: tokio::sync::Notify::new(),
            health: Health::default(),
            limits,
            pushers: std::sync::Mutex::new(HashMap::new()),
            cluster: std::sync::OnceLock::new(),
            tasks: Default::default(),
            subscriptions: Default::default(),
            upgrade_to: watch::channel(None).0,
            upgrading: watch::channel(false).0,
            waits: std::sync::atomic::AtomicUsize::new(0),
            waits_left: tokio::sync::Notify::new(),
            upgrades: (0, None),
        }
    }

    /// Whether the daemon is handing over to a new program.
    pub(crate) fn is_upgrading(&self) -> bool {
        *self.upgrading.borrow()
    }

    /// Waits (up to `limit`) until no `wait` is served: each ends with
    /// `resume` once the daemon is upgrading and its batch, if it holds
    /// one, was acknowledged.
    pub async fn drain_waits(&self, limit: Duration) {
        until_none(&self.waits, &self.waits_left, limit).await;
    }

    /// Waits (up to `limit`) until no client connection is open: while
    /// the daemon is upgrading, each closes once it waits for a request
    /// (the requests it took are answered first).
    pub async fn drain_connections(&self, limit: Duration) {
        until_none(&self.health.connections, &self.health.closed, limit).await;
    }
}

/// How client connections are limited.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most connections one client process may hold open at once.
    pub max_connections_per_process: usize,
}

/// How the socket fares: connections open, refused, accept failures.
#[derive(Default)]
pub(crate) struct Health {
    pub(crate) connections: std::sync::atomic::AtomicUsize,
    pub(crate) per_process: std::sync::Mutex<HashMap<u32, usize>>,
    pub(crate) refused: std::sync::atomic::AtomicU64,
    pub(crate) accept_errors: std::sync::atomic::AtomicU64,
    pub(crate) last_accept_error: std::sync::Mutex<Option<(String, std::time::Instant)>>,
    /// Notified whenever a connection closes (a descriptor came free).
    pub(crate) closed: tokio::sync::Notify,
}

/// One open connection, counted while it lives.
pub(crate) struct Counted<'a> {
    health: &'a Health,
    pid: Option<u32>,
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering::SeqCst;
        self.health.connections.fetch_sub(1, SeqCst);
        if let Some(pid) = self.pid {
            let mut map = self
                .health
                .per_process
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(n) = map.get_mut(&pid) {
                *n -= 1;
                if *n == 0 {
                    map.remove(&pid);
                }
            }
        }
        self.health.closed.notify_waiters();
    }
}

impl Health {
    /// Counts a new connection of process `pid`; `Err` with the count when
    /// that process already holds `max`.
    pub(crate) fn admit(&self, pid: Option<u32>, max: usize) -> Result<Counted<'_>, usize> {
        use std::sync::atomic::Ordering::SeqCst;
        if let Some(pid) = pid {
            let mut map = self.per_process.lock().unwrap_or_else(|p| p.into_inner());
            let n = map.entry(pid).or_insert(0);
            if *n >= max {
                return Err(*n);
            }
            *n += 1;
        }
        self.connections.fetch_add(1, SeqCst);
        Ok(Counted { health: self, pid })
    }

    pub(crate) fn accept_failed(&self, e: &std::io::Error) {
        use std::sync::atomic::Ordering::SeqCst;
        let n = self.accept_errors.fetch_add(1, SeqCst) + 1;
        let now = std::time::Instant::now();
        let mut last = self
            .last_accept_error
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // Logged at most every 5 s: a daemon out of descriptors must not
        // also fill its disk.
        let quiet = last
            .as_ref()
            .is_some_and(|(_, at)| now.duration_since(*at) < Duration::from_secs(5));
        let text = format!(
            "{} ({})",
            e,
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        );
        if !quiet {
            tracing::warn!(
                "accepting a connection failed ({n} time(s) so far): {e}; backing off (existing monitors go on)"
            );
            *last = Some((text, now));
        } else if let Some((t, _)) = last.as_mut() {
            *t = text;
        }
    }
}

/// A daemon's state on a temporary directory, with no socket: for the
/// handlers' unit tests.
/// Waits (up to `limit`) until `count` is 0, woken by `left` each time one
/// of what it counts ends.
async fn until_none(
    count: &std::sync::atomic::AtomicUsize,
    left: &tokio::sync::Notify,
    limit: Duration,
) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let notified = left.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            return;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;

    use wakeful_engine::registry::RegistryConfig;
    use wakeful_engine::{DiskGuard, Hub, MonitorRegistry, NetPolicy};
    use wakeful_protocol::Paths;

    use super::{Limits, State};

    /// A state and the directory it lives in (removed when dropped).
    pub(crate) struct TestState {
        pub(crate) state: Arc<State>,
        pub(crate) dir: tempfile::TempDir,
    }

    /// A fresh daemon state: an empty store, no monitors, no routes, no
    /// cluster link.
    pub(crate) fn state() -> TestState {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths {
            state_dir: dir.path().to_path_buf(),
            runtime_dir: dir.path().to_path_buf(),
            config_file: dir.path().join("config.toml"),
        };
        std::fs::create_dir_all(paths.output_dir()).unwrap();
        let (writer, reader) = wakeful_store::open(&paths.database()).unwrap();
        let pruner = writer.pruner().unwrap();
        let latest = reader.latest_seq().unwrap();
        let replay: Arc<dyn wakeful_engine::Replay> =
            Arc::new(crate::startup::StoreReplay(reader.clone()));
        let hub = Hub::new(writer, latest, Some(replay));
        let registry = MonitorRegistry::with_hub(
            RegistryConfig {
                output_dir: paths.output_dir(),
                ..RegistryConfig::default()
            },
            hub,
        );
        let options = crate::config::StoreOptions::default();
        let disk = DiskGuard::new(paths.state_dir.clone(), options.keep_free);
        let storage = crate::storage::Storage::new(
            paths.output_dir(),
            &options,
            disk,
            pruner,
            registry.clone(),
            reader.clone(),
        );
        let wakes = crate::wake::Wakes::new(
            registry.clone(),
            reader.clone(),
            NetPolicy::new(&[]).unwrap(),
            false,
        );
        let state = Arc::new(State::new(
            registry,
            reader,
            paths,
            wakes,
            Limits {
                max_connections_per_process: 8,
            },
            storage,
        ));
        TestState { state, dir }
    }
}
