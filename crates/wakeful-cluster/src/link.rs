//! The link: the NATS connection, its state and counters, and the tasks
//! that use it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use wakeful_core::MonitorInfo;
use wakeful_engine::Hub;
use wakeful_protocol::{
    ClusterStatus, HostMonitor, ImportResult, ImportedEvent, LinkState, LinkStatus, Reply, Request,
};
use wakeful_store::StoreReader;

use crate::config::ClusterConfig;

/// A boxed future, for [`Node`]'s methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the link needs of the daemon it runs in.
pub trait Node: Send + Sync + 'static {
    /// Keeps events of other hosts through the daemon's import path (each
    /// once per origin), returning once they are committed.
    fn import(&self, events: Vec<ImportedEvent>) -> BoxFuture<'_, Result<ImportResult, String>>;
    /// Answers a request another host sent (`start`, `stop`) as the socket
    /// would answer it.
    fn control(&self, request: Request) -> BoxFuture<'_, Reply>;
    /// This host's monitors now (active, and ended within the hour).
    fn monitors(&self) -> Vec<MonitorInfo>;
}

/// Why the link could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// NATS is not connected now.
    #[error("the cluster link is down (NATS at {url} is not reachable); events wait in the local log and ship when it is back")]
    Down {
        /// The configured URL.
        url: String,
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
}

impl Shared {
    pub(crate) fn error(&self, what: impl std::fmt::Display) {
        let text = what.to_string();
        tracing::warn!("cluster: {text}");
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(text);
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

/// A running cluster link; see the crate docs. Dropping it stops its tasks.
pub struct Link {
    shared: Arc<Shared>,
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Link {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Link {
    /// Starts the link: connects (in the background, retrying with
    /// backoff), then ships, imports, publishes the directory and answers
    /// remote control. Fails only for a configuration it cannot use.
    pub async fn start(
        config: ClusterConfig,
        node: Arc<dyn Node>,
        hub: Hub,
        reader: StoreReader,
    ) -> Result<Link, LinkError> {
        let host = config.host();
        let shipped_seq = reader
            .shipped_mark()
            .map_err(|e| LinkError::Nats(format!("reading the shipped mark: {e}")))?;
        let shared = Arc::new(Shared {
            host: host.clone(),
            state: watch::channel(LinkState::Connecting).0,
            reader,
            shipped_seq: AtomicU64::new(shipped_seq),
            shipped: AtomicU64::new(0),
            imported: AtomicU64::new(0),
            import_skipped: AtomicU64::new(0),
            import_rejected: AtomicU64::new(0),
            publish_failures: AtomicU64::new(0),
            reordered: AtomicU64::new(0),
            connects: AtomicU64::new(0),
            disconnects: AtomicU64::new(0),
            import_lag: AtomicU64::new(u64::MAX),
            last_error: Mutex::new(None),
            config,
        });
        let client = connect(&shared).await?;
        let js = match &shared.config.domain {
            Some(domain) => async_nats::jetstream::with_domain(client.clone(), domain),
            None => async_nats::jetstream::new(client.clone()),
        };
        let setup = crate::directory::Setup::new(shared.clone(), js.clone());
        let tasks = vec![
            tokio::spawn(crate::ship::run(
                shared.clone(),
                js.clone(),
                hub.clone(),
                setup.clone(),
            )),
            tokio::spawn(crate::import::run(
                shared.clone(),
                js.clone(),
                node.clone(),
                setup.clone(),
            )),
            tokio::spawn(crate::directory::run(
                shared.clone(),
                node.clone(),
                hub,
                setup.clone(),
            )),
            tokio::spawn(crate::control::serve(shared.clone(), client.clone(), node)),
        ];
        Ok(Link {
            shared,
            client,
            js,
            tasks,
        })
    }

    /// Stops the link's tasks (the daemon is stopping). What was not
    /// shipped or imported yet waits for the next daemon.
    pub fn stop(&self) {
        for t in &self.tasks {
            t.abort();
        }
    }

    /// This host's name in the cluster.
    pub fn host(&self) -> &str {
        &self.shared.host
    }

    /// The link as `status` shows it.
    pub fn status(&self) -> LinkStatus {
        self.shared.status()
    }

    fn check_up(&self) -> Result<(), LinkError> {
        if self.shared.up() {
            Ok(())
        } else {
            Err(LinkError::Down {
                url: self.shared.config.url.clone(),
            })
        }
    }

    /// This link and every host's last heartbeat.
    pub async fn cluster_status(&self) -> Result<ClusterStatus, LinkError> {
        self.check_up()?;
        let hosts = crate::directory::hosts(&self.js).await?;
        Ok(ClusterStatus {
            link: self.status(),
            hosts,
        })
    }

    /// The monitors of every host, as each last published them (this
    /// host's as they are now); only `session`'s when given.
    pub async fn monitors(&self, session: Option<&str>) -> Result<Vec<HostMonitor>, LinkError> {
        self.check_up()?;
        let mut all = crate::directory::monitors(&self.js).await?;
        all.retain(|m| session.is_none_or(|s| m.monitor.session == s));
        Ok(all)
    }

    /// Sends `request` (`start`, `stop`) to `host`'s daemon and returns
    /// its reply.
    pub async fn remote(&self, host: &str, request: Request) -> Result<Reply, LinkError> {
        self.check_up()?;
        crate::control::request(&self.client, host, request).await
    }
}

/// Connects with the configured credentials and TLS, reconnecting forever
/// with backoff; the link's state follows the connection.
async fn connect(shared: &Arc<Shared>) -> Result<async_nats::Client, LinkError> {
    let config = &shared.config;
    let mut opts = match &config.creds {
        Some(path) => async_nats::ConnectOptions::with_credentials_file(path)
            .await
            .map_err(|e| LinkError::Nats(format!("creds {}: {e}", path.display())))?,
        None => async_nats::ConnectOptions::new(),
    };
    if let Some(token) = &config.token {
        opts = opts.token(token.clone());
    }
    if let Some(tls) = &config.tls {
        opts = opts.require_tls(true);
        if let Some(ca) = &tls.ca {
            opts = opts.add_root_certificates(ca.clone());
        }
        if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
            opts = opts.add_client_certificate(cert.clone(), key.clone());
        }
    }
    let events = shared.clone();
    opts = opts
        .name(format!("wakeful {}", shared.host))
        .retry_on_initial_connect()
        .max_reconnects(None)
        .reconnect_delay_callback(reconnect_delay)
        .connection_timeout(Duration::from_secs(5))
        .event_callback(move |event| {
            let shared = events.clone();
            async move { on_event(&shared, event) }
        });
    let addrs: Vec<async_nats::ServerAddr> = config
        .urls()
        .iter()
        .map(|u| u.parse())
        .collect::<Result<_, _>>()
        .map_err(|e| LinkError::Nats(format!("url {}: {e}", config.url)))?;
    tracing::info!("cluster: host {} connecting to {}", shared.host, config.url);
    opts.connect(addrs)
        .await
        .map_err(|e| LinkError::Nats(e.to_string()))
}

fn on_event(shared: &Shared, event: async_nats::Event) {
    match event {
        async_nats::Event::Connected => {
            shared.connects.fetch_add(1, Ordering::SeqCst);
            tracing::info!(
                "cluster link up: host {} connected to {}",
                shared.host,
                shared.config.url
            );
            shared.state.send_replace(LinkState::Up);
        }
        async_nats::Event::Disconnected => {
            shared.disconnects.fetch_add(1, Ordering::SeqCst);
            tracing::warn!(
                "cluster link down: lost {}; reconnecting with backoff, events wait in the local log",
                shared.config.url
            );
            shared.state.send_replace(LinkState::Down);
        }
        async_nats::Event::Closed => {
            shared.state.send_replace(LinkState::Down);
        }
        other => shared.error(other),
    }
}
