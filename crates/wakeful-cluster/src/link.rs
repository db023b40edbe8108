//! The link: the NATS connection and the tasks that use it (its
//! vocabulary is [`crate::shared`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use wakeful_engine::Hub;
use wakeful_protocol::{ClusterStatus, HostMonitor, LinkState, LinkStatus, Reply, Request};
use wakeful_store::StoreReader;

use crate::config::ClusterConfig;
use crate::shared::{reconnect_delay, Backoff, LinkError, Node, Shared};

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
            shared.refuse_server(why.to_string());
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
