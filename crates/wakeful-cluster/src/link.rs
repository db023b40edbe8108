//! The link: the NATS connection, its state and counters, and the tasks
//! that use it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
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
    fn refuse_server(&self, reason: String) {
        self.server_refused.store(true, Ordering::SeqCst);
        self.refused(reason);
    }

    /// The server connected to can be used: the link is up.
    fn accept_server(&self) {
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

    fn down_reason(&self) -> Option<String> {
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

/// The connection, once it was made (the client reconnects by itself
/// from then on).
struct Connection {
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
}

/// A running cluster link; see the crate docs. Dropping it stops its tasks.
pub struct Link {
    shared: Arc<Shared>,
    connection: Arc<OnceLock<Connection>>,
    /// `None` once stopped: nothing is started after that.
    tasks: Arc<Mutex<Option<Vec<JoinHandle<()>>>>>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Link {
    /// Starts the link: connects (in the background, retrying with
    /// backoff; each failed attempt's reason is in [`Link::status`] and the
    /// log), then ships, imports, publishes the directory and answers
    /// remote control. Fails only for a configuration it cannot use (a
    /// credentials file it cannot read, an address it cannot parse).
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
            down_reason: Mutex::new(None),
            server_refused: std::sync::atomic::AtomicBool::new(true),
            config,
        });
        let (opts, addrs) = options(&shared).await?;
        let connection = Arc::new(OnceLock::new());
        let tasks = Arc::new(Mutex::new(Some(Vec::new())));
        let connecting = tokio::spawn(connect(
            shared.clone(),
            opts,
            addrs,
            connection.clone(),
            tasks.clone(),
            node,
            hub,
        ));
        if let Some(list) = tasks.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            list.push(connecting);
        }
        Ok(Link {
            shared,
            connection,
            tasks,
        })
    }

    /// Stops the link's tasks (the daemon is stopping). What was not
    /// shipped or imported yet waits for the next daemon.
    pub fn stop(&self) {
        let tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner()).take();
        for t in tasks.into_iter().flatten() {
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

    /// The connection when the link is up.
    fn up(&self) -> Result<&Connection, LinkError> {
        match self.connection.get() {
            Some(c) if self.shared.up() => Ok(c),
            _ => Err(LinkError::Down {
                reason: self.shared.down_reason().unwrap_or_else(|| {
                    format!("NATS at {} is not connected yet", self.shared.config.url)
                }),
            }),
        }
    }

    /// This link and every host's last heartbeat.
    pub async fn cluster_status(&self) -> Result<ClusterStatus, LinkError> {
        let c = self.up()?;
        let hosts = crate::directory::hosts(&c.js).await?;
        Ok(ClusterStatus {
            link: self.status(),
            hosts,
        })
    }

    /// The monitors of every host, as each last published them (this
    /// host's as they are now); only `session`'s when given.
    pub async fn monitors(&self, session: Option<&str>) -> Result<Vec<HostMonitor>, LinkError> {
        let c = self.up()?;
        let mut all = crate::directory::monitors(&c.js).await?;
        all.retain(|m| session.is_none_or(|s| m.monitor.session == s));
        Ok(all)
    }

    /// Sends `request` (`start`, `stop`) to `host`'s daemon and returns
    /// its reply.
    pub async fn remote(&self, host: &str, request: Request) -> Result<Reply, LinkError> {
        let c = self.up()?;
        crate::control::request(&c.client, host, request).await
    }
}

/// Connects, retrying with backoff until the server takes this host (each
/// failure's reason goes to the status and, when it changes, the log),
/// then starts the tasks that use the connection. From then on the client
/// reconnects by itself.
async fn connect(
    shared: Arc<Shared>,
    opts: async_nats::ConnectOptions,
    addrs: Vec<async_nats::ServerAddr>,
    connection: Arc<OnceLock<Connection>>,
    tasks: Arc<Mutex<Option<Vec<JoinHandle<()>>>>>,
    node: Arc<dyn Node>,
    hub: Hub,
) {
    tracing::info!(
        "cluster: host {} connecting to {}",
        shared.host,
        shared.config.url
    );
    let mut backoff = Backoff::new();
    let (client, js) = loop {
        let client = match opts.clone().connect(addrs.clone()).await {
            Ok(client) => client,
            Err(e) => {
                shared.refused(crate::diagnose::connect_error(&shared.config, &e));
                backoff.wait().await;
                continue;
            }
        };
        // What the server supports: a version the client can read
        // JetStream's answers of, and JetStream itself (here or, for a leaf
        // node, in its domain). Anything else is refused with the reason
        // (status's `down_reason` and the log), and tried again later.
        let version = client.server_info().version;
        if let Err(why) = crate::diagnose::server_version(&shared.config.url, &version) {
            shared.refuse_server(why);
            drop(client);
            backoff.wait().await;
            continue;
        }
        let js = match &shared.config.domain {
            Some(domain) => async_nats::jetstream::with_domain(client.clone(), domain),
            None => async_nats::jetstream::new(client.clone()),
        };
        match tokio::time::timeout(Duration::from_secs(5), js.query_account()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                shared.refuse_server(crate::diagnose::no_jetstream(
                    &shared.config,
                    &e.to_string(),
                ));
                drop((js, client));
                backoff.wait().await;
                continue;
            }
            Err(_) => {
                shared.refuse_server(crate::diagnose::no_jetstream(
                    &shared.config,
                    "no answer within 5 s",
                ));
                drop((js, client));
                backoff.wait().await;
                continue;
            }
        }
        shared.accept_server();
        break (client, js);
    };
    let setup = crate::directory::Setup::new(shared.clone(), js.clone());
    let mut tasks = tasks.lock().unwrap_or_else(|p| p.into_inner());
    // Stopped meanwhile: start nothing.
    let Some(tasks) = tasks.as_mut() else {
        return;
    };
    tasks.extend([
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
    ]);
    let _ = connection.set(Connection { client, js });
}

/// The connection options from the configured credentials and TLS, and
/// the server addresses; the client reconnects forever with backoff once
/// connected, and the link's state follows the connection.
async fn options(
    shared: &Arc<Shared>,
) -> Result<(async_nats::ConnectOptions, Vec<async_nats::ServerAddr>), LinkError> {
    let config = &shared.config;
    let mut opts = match &config.creds {
        Some(path) => async_nats::ConnectOptions::with_credentials_file(path)
            .await
            .map_err(|e| {
                LinkError::Config(format!(
                    "creds {}: {e}; it must be a NATS credentials file (a user JWT and its seed, as `nsc generate creds` writes it)",
                    path.display()
                ))
            })?,
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
        .map_err(|e| {
            LinkError::Config(format!(
                "url {}: {e}; e.g. nats://host:4222 or tls://host:4222",
                config.url
            ))
        })?;
    Ok((opts, addrs))
}

fn on_event(shared: &Shared, event: async_nats::Event) {
    match event {
        async_nats::Event::Connected => {
            shared.connects.fetch_add(1, Ordering::SeqCst);
            if shared.server_refused.load(Ordering::SeqCst) {
                // Not up until the server was checked (`connect`).
                return;
            }
            tracing::info!(
                "cluster link up: host {} connected to {}",
                shared.host,
                shared.config.url
            );
            *shared.down_reason.lock().unwrap_or_else(|p| p.into_inner()) = None;
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
        // A reconnection attempt failed; the client says only what kind
        // of failure it was.
        async_nats::Event::ClientError(async_nats::ClientError::Other(kind)) if !shared.up() => {
            shared.refused(crate::diagnose::reconnect_error(&shared.config, &kind));
        }
        other => shared.error(other),
    }
}
