//! # wakeful-daemon
//!
//! The process that owns every monitor and the store, and serves the socket
//! protocol of [`wakeful_protocol`].
//!
//! - [`run`]: take the lock, recover after a crash ([`recovery`]), re-arm
//!   persistent monitors, report readiness ([`Readiness`]), serve until
//!   asked to stop.
//! - [`log`]: the daemon's log file.
//! - [`config`]: the `config.toml` file.
//! - [`server`]: one task per connection, answering requests; a connection
//!   is polled for reading only (`quiet`), and events go to a descriptor a
//!   client handed over in the form it asked for (`handed`: JSON, plain,
//!   `watch` lines, or Claude Code channel notifications under the frame
//!   lock).
//! - [`import`]: keeping events and monitors recorded elsewhere.
//! - [`wake`]: delivering events to agents as new turns (wake routes).
//! - [`service`]: the systemd unit and launchd agent that keep the daemon
//!   up from login.
//! - [`upgrade`]: replacing the daemon's program with another build while
//!   every monitor goes on running (`wakeful daemon upgrade`).
//! - [`storage`]: the store's share of the disk: pruning, the caps, and
//!   refusing writes while the disk is full.
//! - `task_book` and `webhook_book`: the background tasks and the MCP
//!   Events webhook subscriptions that [`state::State`] holds and
//!   `server::tasks` and `server::subscriptions` serve (an upgrade hands
//!   the tasks over).
//! - the cluster link (`[cluster]`, docs/CLUSTER.md): started only when
//!   configured, through `wakeful-cluster`.

mod cluster;
pub mod config;
mod digest;
pub mod import;
mod liveness;
pub mod log;
pub mod recovery;
pub mod server;
pub mod service;
pub mod state;
pub mod storage;
mod task_book;
pub mod upgrade;
pub mod wake;
mod webhook_book;

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use nix::fcntl::{Flock, FlockArg};
use tokio::net::UnixListener;
use wakeful_core::journal::{Journal, JournalEntry};
use wakeful_core::{EventBody, MonitorStopReason, PendingEvent};
use wakeful_engine::registry::ENDED_RETENTION;
use wakeful_engine::{Launch, MonitorRegistry, RegistryConfig, StartOptions};
use wakeful_protocol::Paths;

use config::Config;

/// How long a starting daemon waits for a daemon that holds the lock but no
/// longer accepts connections (one exiting) to let go of it; less than a
/// client waits for the start, so that the client hears why.
pub const HOLDER_EXIT_WAIT: Duration = Duration::from_secs(8);

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Another daemon holds the lock (not a failure for a racing start);
    /// its socket.
    #[error("a wakeful daemon is already running (socket {0})")]
    AlreadyRunning(String),
    /// The daemon lock is held, but not by a daemon that accepts
    /// connections: one still exiting (its socket closed first) that did
    /// not let go within [`HOLDER_EXIT_WAIT`], or one that hangs.
    #[error(
        "the lock {} is held by a process that does not accept connections on {socket} \
         (a daemon still shutting down, or one that hangs); wait for it to exit, or find it \
         with `fuser {}`",
        lock.display(),
        lock.display()
    )]
    LockHeld {
        /// The daemon lock.
        lock: std::path::PathBuf,
        /// The socket its holder recorded.
        socket: String,
    },
    /// The state directories.
    #[error(transparent)]
    Paths(#[from] wakeful_protocol::PathsError),
    /// The configuration file.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// The store.
    #[error(transparent)]
    Store(#[from] wakeful_store::StoreError),
    /// The journal refused the recovery events.
    #[error("could not record recovery events: {0}")]
    Journal(#[from] wakeful_core::journal::JournalError),
    /// An upgrade could run neither the new program nor this one.
    #[error(transparent)]
    Upgrade(#[from] upgrade::UpgradeError),
    /// Socket or lock IO.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DaemonError {
    let what = what.into();
    move |source| DaemonError::Io { what, source }
}

/// Where the daemon reports how its start went, when a client started it:
/// one line on an inherited pipe — `ready SOCKET`, `running SOCKET` (another
/// daemon already serves this state directory) or `error MESSAGE`.
#[derive(Debug, Default)]
pub struct Readiness {
    pipe: Option<File>,
}

impl Readiness {
    /// Reports on the pipe whose write end is descriptor `fd` (inherited
    /// from the client that started this process).
    pub fn from_fd(fd: i32) -> Self {
        use std::os::fd::FromRawFd;
        // SAFETY: the client passed us this descriptor for this purpose, and
        // nothing else in this process uses it.
        let pipe = (fd > 2).then(|| unsafe { File::from_raw_fd(fd) });
        Readiness { pipe }
    }

    fn say(&mut self, line: &str) {
        if let Some(mut pipe) = self.pipe.take() {
            use std::io::Write;
            let one_line = line.replace('\n', " ");
            let _ = writeln!(pipe, "{one_line}");
        }
    }
}

/// Runs the daemon until it is asked to stop (SIGTERM, SIGINT or a
/// `shutdown` request), telling `ready` how its start went.
pub async fn run(paths: Paths, mut ready: Readiness) -> Result<(), DaemonError> {
    // The daemon writes events to pipes that clients hand over (`events`
    // writing to its reader directly): a reader gone must be an error of
    // that write (EPIPE), never the daemon's death.
    // SAFETY: setting a signal's disposition to "ignore" installs no
    // handler; nothing runs in signal context.
    if let Err(e) = unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigIgn,
        )
    } {
        tracing::warn!(
            "cannot ignore SIGPIPE ({e}): a reader closing a pipe handed over may end the daemon"
        );
    }
    let started = start(&paths).await;
    let (daemon, lock) = match started {
        Ok(d) => d,
        Err(DaemonError::AlreadyRunning(socket)) => {
            ready.say(&format!("running {socket}"));
            return Err(DaemonError::AlreadyRunning(socket));
        }
        Err(e) => {
            tracing::error!("cannot start: {e}");
            ready.say(&format!("error {e}"));
            return Err(e);
        }
    };
    ready.say(&format!("ready {}", daemon.socket.display()));
    tracing::info!(
        "wakeful daemon {} (pid {}) listening on {}",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        daemon.socket.display()
    );
    // Clients waiting for us to be ready may go on.
    drop(lock.start);
    let Daemon {
        listener,
        state,
        registry,
        socket,
    } = daemon;
    let served = server::serve(&listener, state.clone()).await;
    let upgrade_to = state.upgrade_to.borrow().clone();
    if let Some(binary) = upgrade_to {
        let e = hand_over(&state, &registry, &listener, &lock.daemon, &binary).await;
        tracing::error!("the upgrade failed: {e}");
        return Err(DaemonError::Upgrade(e));
    }

    // The link stops first: nothing is shipped or imported while the
    // monitors end (the next daemon ships what is left, in order).
    if let Some(link) = state.cluster.get() {
        link.stop();
    }

    // Persistent monitors are suspended (re-armed by the next daemon); the
    // others end with `daemon_stopped`.
    registry.suspend_where(|i| i.persistent).await;
    registry.shutdown(MonitorStopReason::DaemonStopped).await;
    registry.terminals().kill_all().await;
    // Readers get every last event before the daemon goes.
    registry.hub().close().await;
    state.drain_followers(Duration::from_secs(2)).await;
    let _ = std::fs::remove_file(&socket);
    let _ = std::fs::remove_file(paths.daemon_info());
    served.map_err(io("accepting connections"))?;
    tracing::info!("wakeful daemon (pid {}) stopped", std::process::id());
    drop(lock.daemon);
    Ok(())
}

/// Hands everything over to `binary` (see [`upgrade`]); returns only if
/// neither it nor this program could be run. Then the handed commands are
/// stopped: nothing would read them.
async fn hand_over(
    state: &Arc<state::State>,
    registry: &MonitorRegistry,
    listener: &UnixListener,
    lock: &Flock<File>,
    binary: &std::path::Path,
) -> upgrade::UpgradeError {
    if let Some(link) = state.cluster.get() {
        link.stop();
    }
    state.upgrading.send_replace(true);
    state.drain_waits(upgrade::WAITS_END).await;
    let monitors = registry.hand_over().await;
    registry.terminals().kill_all().await;
    registry.hub().close().await;
    state.drain_followers(Duration::from_secs(2)).await;
    state.drain_connections(upgrade::WAITS_END).await;
    let handover = upgrade::Handover {
        format: upgrade::HANDOVER_FORMAT,
        pid: std::process::id(),
        from: env!("CARGO_PKG_VERSION").to_string(),
        upgrades: state.upgrades.0 + 1,
        listener: upgrade::raw(listener),
        lock: upgrade::raw(&**lock),
        monitors,
        tasks: state.tasks.hand_over(),
    };
    let e = upgrade::exec(binary, &handover);
    for m in &handover.monitors {
        if let Some(p) = &m.process {
            wakeful_engine::process::signal_group(p.pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
    e
}

/// The locks a daemon holds: `daemon.lock` for its whole life,
/// `daemon.start.lock` until it accepts connections.
struct Locks {
    daemon: Flock<File>,
    start: Flock<File>,
}

struct Daemon {
    listener: UnixListener,
    state: Arc<state::State>,
    registry: MonitorRegistry,
    socket: std::path::PathBuf,
}

fn lock_file(path: &std::path::Path) -> Result<File, DaemonError> {
    File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io(format!("cannot open lock {}", path.display())))
}

/// Takes the locks, recovers after a crash, re-arms persistent monitors,
/// binds the socket.
async fn start(paths: &Paths) -> Result<(Daemon, Locks), DaemonError> {
    // Everything the daemon creates (database, WAL, output files) is private.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    paths.prepare()?;
    raise_open_file_limit();
    // An upgrade's new program: its commands are this process's children
    // already; the reaper must leave them to their monitors from the start.
    let handover = upgrade::take();
    let _handed_children: Vec<wakeful_engine::process::Managed> = handover
        .iter()
        .flat_map(|h| &h.monitors)
        .filter_map(|m| m.process.as_ref())
        .map(|p| wakeful_engine::process::reaper::adopt(p.pid))
        .collect();
    let (daemon, start) = match &handover {
        Some(h) => take_handed_locks(paths, h.lock).await?,
        None => take_locks(paths).await?,
    };
    let config = Config::load(&paths.config_file)?;
    let output_dir = paths.output_dir();
    std::fs::create_dir_all(&output_dir)
        .map_err(io(format!("cannot create {}", output_dir.display())))?;
    let containers = platform(&config, paths)?;
    let net = wakeful_engine::NetPolicy::new(&config.network.allow).map_err(|e| {
        config::ConfigError::Invalid {
            path: paths.config_file.display().to_string(),
            message: e.to_string(),
        }
    })?;
    let launch_net = net.clone();
    let (mut writer, reader) = wakeful_store::open(&paths.database())?;
    let pruner = writer.pruner()?;
    let disk = wakeful_engine::DiskGuard::new(paths.state_dir.clone(), config.store.keep_free);
    let output_budget = wakeful_engine::OutputBudget::new(config.store.output_caps(), disk.clone());
    if writer.recovered() > 0 {
        tracing::warn!(
            "put {} events from the redo log into the database (the daemon before ended after handing them out, before they were in the tables)",
            writer.recovered()
        );
    }
    let handed: Vec<wakeful_engine::HandedMonitor> = handover
        .as_ref()
        .map(|h| h.monitors.clone())
        .unwrap_or_default();
    let (to_rearm, to_adopt) = recover(&mut writer, &reader, containers.as_ref(), &handed)?;
    let latest = reader.latest_seq()?;

    let replay: Arc<dyn wakeful_engine::Replay> = Arc::new(StoreReplay(reader.clone()));
    let hub = wakeful_engine::Hub::new(writer, latest, Some(replay));
    hub.set_fold_delay(Duration::from_millis(config.store.fold_delay_ms));
    let registry = MonitorRegistry::with_hub(
        RegistryConfig {
            session: wakeful_core::session::DEFAULT_SESSION.into(),
            output_dir: paths.output_dir(),
            max_active_per_session: config.limits.max_active_per_session,
            launch: Launch {
                grace: Duration::from_millis(config.monitors.grace_ms),
                die_with_parent: true,
                net,
                containers,
                ..Launch::default()
            },
            output: Some(output_budget),
        },
        hub,
    );
    let since = Utc::now() - chrono::Duration::from_std(ENDED_RETENTION).unwrap_or_default();
    for info in reader.ended_since(since)? {
        registry.insert_ended(info);
    }
    rearm(&registry, to_rearm).await;
    adopt(&registry, to_adopt).await;

    let (listener, socket) = match &handover {
        Some(h) => listen_on(paths, h.listener)?,
        None => listen(paths)?,
    };

    let wakes = wake::Wakes::new(
        registry.clone(),
        reader.clone(),
        launch_net,
        config.wake_options.auto_codex,
    );
    wakes.start_all(
        config
            .wake_routes()
            .map_err(|e| config::ConfigError::Rules {
                path: paths.config_file.display().to_string(),
                source: Box::new(e.into()),
            })?,
    );
    let storage = storage::Storage::new(
        paths.output_dir(),
        &config.store,
        disk,
        pruner,
        registry.clone(),
        reader.clone(),
    );
    let mut state = state::State::new(
        registry.clone(),
        reader,
        paths.clone(),
        wakes,
        server::Limits {
            max_connections_per_process: config.limits.max_connections_per_process,
        },
        storage.clone(),
    );
    if let Some(h) = &handover {
        tracing::info!(
            "upgraded from {} to {}: went on with {} monitors (upgrade {} of this process)",
            h.from,
            env!("CARGO_PKG_VERSION"),
            h.monitors.len(),
            h.upgrades
        );
        state.upgrades = (h.upgrades, Some(h.from.clone()));
    }
    let state = Arc::new(state);
    if let Some(h) = &handover {
        server::tasks::adopt(&state, h.tasks.clone());
    }
    tokio::spawn(storage.run(state.stopping()));
    server::subscriptions::resume(&state);
    // Without `[cluster]` nothing of the link runs.
    if let Some(cluster) = config.cluster.clone() {
        cluster::start_link(cluster, &state)
            .await
            .map_err(|e| config::ConfigError::Invalid {
                path: paths.config_file.display().to_string(),
                message: format!("[cluster]: {e}"),
            })?;
    }
    Ok((
        Daemon {
            listener,
            state,
            registry,
            socket,
        },
        Locks { daemon, start },
    ))
}

/// The start lock: one start at a time.
async fn take_start_lock(paths: &Paths) -> Result<Flock<File>, DaemonError> {
    let start_lock = lock_file(&paths.start_lock_file())?;
    let start = tokio::task::spawn_blocking(move || {
        Flock::lock(start_lock, FlockArg::LockExclusive).map_err(|(_, e)| e)
    })
    .await
    .map_err(|e| DaemonError::Io {
        what: "waiting for the start lock".into(),
        source: std::io::Error::other(e),
    })?
    .map_err(|e| DaemonError::Io {
        what: format!("cannot lock {}", paths.start_lock_file().display()),
        source: e.into(),
    })?;
    Ok(start)
}

/// The locks of an upgrade's new program: the start lock as any start
/// takes it, and the daemon lock the program before it held, on the
/// descriptor it left open (`fd`): the same lock, never let go.
async fn take_handed_locks(
    paths: &Paths,
    fd: std::os::fd::RawFd,
) -> Result<(Flock<File>, Flock<File>), DaemonError> {
    use std::os::fd::FromRawFd;
    let start = take_start_lock(paths).await?;
    // SAFETY: the handover names the descriptor of the daemon lock, which
    // the program before this one left open for it and nothing else uses.
    let held = unsafe { File::from_raw_fd(fd) };
    let daemon =
        Flock::lock(held, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| DaemonError::Io {
            what: format!("cannot keep the lock {}", paths.lock_file().display()),
            source: e.into(),
        })?;
    Ok((daemon, start))
}

/// Takes the start lock (one start at a time) and then the daemon lock,
/// waiting up to [`HOLDER_EXIT_WAIT`] for a holder that no longer accepts
/// connections to let go.
async fn take_locks(paths: &Paths) -> Result<(Flock<File>, Flock<File>), DaemonError> {
    // One start at a time: a daemon that waits here finds, once it gets the
    // start lock, either no daemon (and becomes it) or one that is ready.
    let start = take_start_lock(paths).await?;
    let daemon = match Flock::lock(
        lock_file(&paths.lock_file())?,
        FlockArg::LockExclusiveNonblock,
    ) {
        Ok(l) => l,
        Err((file, _)) => {
            let socket = std::fs::read(paths.daemon_info())
                .ok()
                .and_then(|b| serde_json::from_slice::<wakeful_protocol::DaemonInfo>(&b).ok())
                .map(|i| i.socket)
                .unwrap_or_else(|| paths.socket());
            if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                return Err(DaemonError::AlreadyRunning(socket.display().to_string()));
            }
            // Its holder no longer accepts connections: a daemon exiting
            // (killed, its last threads still closing its files — the
            // socket may go before the lock — or a stop finishing). Wait
            // for it to let go rather than send clients to a closed socket.
            tracing::info!(
                "the daemon lock is held but {} refuses connections: waiting up to {} s for its holder to exit",
                socket.display(),
                HOLDER_EXIT_WAIT.as_secs()
            );
            let waited = tokio::time::timeout(
                HOLDER_EXIT_WAIT,
                tokio::task::spawn_blocking(move || {
                    Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| e)
                }),
            )
            .await;
            match waited {
                Ok(Ok(Ok(l))) => l,
                Ok(Ok(Err(e))) => {
                    return Err(DaemonError::Io {
                        what: format!("cannot lock {}", paths.lock_file().display()),
                        source: e.into(),
                    })
                }
                Ok(Err(_)) | Err(_) => {
                    return Err(DaemonError::LockHeld {
                        lock: paths.lock_file(),
                        socket: socket.display().to_string(),
                    })
                }
            }
        }
    };
    Ok((daemon, start))
}

/// Chooses the platform backend, becomes the subreaper of the commands
/// (and reaps the orphans it adopts), and finds the containers commands can
/// run in.
fn platform(
    config: &Config,
    paths: &Paths,
) -> Result<Option<wakeful_platform::tree::ContainerRoot>, DaemonError> {
    let backend = wakeful_platform::configure(config.platform.as_deref()).map_err(|e| {
        config::ConfigError::Invalid {
            path: paths.config_file.display().to_string(),
            message: e.to_string(),
        }
    })?;
    tracing::info!("platform backend: {}", backend.name());
    for limit in backend.limits() {
        tracing::info!("platform backend {}: {limit}", backend.name());
    }
    match wakeful_engine::process::become_subreaper() {
        Err(e) => tracing::warn!("cannot become child subreaper: {e}"),
        // Orphans of commands are reparented to us: reap them when they exit.
        Ok(()) => {
            if let Err(e) = wakeful_engine::process::reaper::start_reaper() {
                tracing::warn!("cannot reap adopted orphans (no SIGCHLD handler): {e}");
            }
        }
    }
    let containers = wakeful_platform::tree::detect_containers(config.monitors.cgroups);
    Ok(containers)
}

/// Starts the persistent monitors a crash or a stop left, under their ids.
async fn rearm(registry: &MonitorRegistry, to_rearm: Vec<wakeful_store::StoredMonitor>) {
    for m in to_rearm {
        let opts = StartOptions {
            session: Some(m.info.session.clone()),
            id: Some(m.info.id.clone()),
            rearm: true,
            base_env: m.base_env.clone(),
            base_cwd: m.base_cwd.clone(),
            adopt: None,
        };
        if let Err(e) = registry.start_with(m.spec.clone(), opts).await {
            tracing::error!("cannot re-arm monitor {}: {e}", m.info.id);
        }
    }
}

/// Goes on with the monitors an upgrade handed over, under their ids.
async fn adopt(
    registry: &MonitorRegistry,
    to_adopt: Vec<(wakeful_store::StoredMonitor, wakeful_engine::HandedMonitor)>,
) {
    for (m, handed) in to_adopt {
        let opts = StartOptions {
            session: Some(m.info.session.clone()),
            id: Some(m.info.id.clone()),
            rearm: false,
            base_env: m.base_env.clone(),
            base_cwd: m.base_cwd.clone(),
            adopt: Some(handed),
        };
        if let Err(e) = registry.start_with(m.spec.clone(), opts).await {
            tracing::error!("cannot go on with monitor {}: {e}", m.info.id);
        }
    }
}

/// The socket an upgrade's program before this one listened on (`fd`),
/// kept open across the exec: connections made meanwhile wait in its
/// backlog. Writes `daemon.json` (this version).
fn listen_on(
    paths: &Paths,
    fd: std::os::fd::RawFd,
) -> Result<(UnixListener, std::path::PathBuf), DaemonError> {
    use std::os::fd::FromRawFd;
    // SAFETY: the handover names the listening socket, which the program
    // before this one left open for it and nothing else uses.
    let std_listener = unsafe { std::os::unix::net::UnixListener::from_raw_fd(fd) };
    std_listener
        .set_nonblocking(true)
        .map_err(io("cannot take over the listening socket"))?;
    let listener = UnixListener::from_std(std_listener)
        .map_err(io("cannot take over the listening socket"))?;
    let socket = listener
        .local_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(std::path::Path::to_path_buf))
        .unwrap_or_else(|| paths.socket());
    write_info(paths, &socket)?;
    Ok((listener, socket))
}

/// Binds the socket (private to the user) and writes `daemon.json`.
fn listen(paths: &Paths) -> Result<(UnixListener, std::path::PathBuf), DaemonError> {
    let socket = paths.socket();
    // We hold the lock, so no live daemon owns this path: it is stale.
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket)
        .map_err(io(format!("cannot listen on {}", socket.display())))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
        .map_err(io(format!("cannot secure {}", socket.display())))?;
    write_info(paths, &socket)?;
    Ok((listener, socket))
}

/// Writes `daemon.json`: this daemon's pid, socket and version.
fn write_info(paths: &Paths, socket: &std::path::Path) -> Result<(), DaemonError> {
    let info = wakeful_protocol::DaemonInfo {
        pid: std::process::id(),
        socket: socket.to_path_buf(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let info = serde_json::to_vec(&info).map_err(|e| DaemonError::Io {
        what: "encoding daemon.json".into(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(paths.daemon_info(), info).map_err(io(format!(
        "cannot write {}",
        paths.daemon_info().display()
    )))
}

/// The store, read back by the event hub for followers that catch up.
pub(crate) struct StoreReplay(wakeful_store::StoreReader);

impl wakeful_engine::Replay for StoreReplay {
    fn after(
        &self,
        filter: &wakeful_engine::Filter,
        after: u64,
        limit: usize,
    ) -> Result<Vec<wakeful_core::journal::Recorded>, wakeful_engine::ReplayError> {
        self.0
            .recorded_after(
                filter.session.as_deref(),
                filter.monitor.as_deref(),
                after,
                limit,
            )
            .map_err(|e| wakeful_engine::ReplayError(Box::new(e)))
    }
}

/// Raises this process's soft limit of open files to its hard limit: every
/// client connection and every command's pipes take descriptors.
fn raise_open_file_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                tracing::warn!("cannot raise the open-file limit from {soft} to {hard}: {e}");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot read the open-file limit: {e}"),
    }
}

/// A monitor to go on with, as the store keeps it, and what an upgrade
/// handed over of it.
type ToAdopt = (wakeful_store::StoredMonitor, wakeful_engine::HandedMonitor);

/// Kills leftovers of monitors the store lists as running, ends the
/// non-persistent ones with `daemon_stopped`, and returns the persistent ones
/// to re-arm; those an upgrade handed over (`handed`) are left running and
/// returned to go on with.
fn recover(
    writer: &mut wakeful_store::StoreWriter,
    reader: &wakeful_store::StoreReader,
    containers: Option<&wakeful_platform::tree::ContainerRoot>,
    handed: &[wakeful_engine::HandedMonitor],
) -> Result<(Vec<wakeful_store::StoredMonitor>, Vec<ToAdopt>), DaemonError> {
    let mut rearm = Vec::new();
    let mut adopt = Vec::new();
    let mut batch = Vec::new();
    for m in reader.running_monitors()? {
        if let Some(h) = handed.iter().find(|h| h.id == m.info.id) {
            adopt.push((m, h.clone()));
            continue;
        }
        let killed = recovery::kill_leftovers(&m.info.id, m.pid, m.start_ticks)
            + containers.map_or(0, |c| c.clean_up(&m.info.id));
        if killed > 0 {
            tracing::warn!(
                "killed {killed} leftover processes of monitor {}",
                m.info.id
            );
        }
        if m.info.persistent {
            rearm.push(m);
            continue;
        }
        batch.push(JournalEntry::Event(PendingEvent {
            session: m.info.session.clone(),
            monitor_id: m.info.id.clone(),
            ts: Utc::now(),
            text: format!(
                "{}: daemon stopped (the wakeful daemon ended while this monitor ran; start it again if still needed)",
                m.info.description
            ),
            body: EventBody::MonitorStopped {
                reason: MonitorStopReason::DaemonStopped,
                last_lines: vec![],
                survivors: vec![],
                unverified: None,
            },
            wakes: true,
            replayed: matches!(m.info.source, wakeful_core::Source::Replay { .. }),
            host: None,
        }));
    }
    for mut t in reader.terminals()? {
        if t.state != wakeful_core::MonitorState::Running {
            continue;
        }
        recovery::kill_leftovers(&t.id, t.pid, None);
        if let Some(c) = containers {
            c.clean_up(&t.id);
        }
        t.state = wakeful_core::MonitorState::Ended;
        t.exit = Some(MonitorStopReason::DaemonStopped);
        t.ended_at = Some(Utc::now());
        t.monitors = 0;
        batch.push(JournalEntry::Terminal(t));
    }
    if !batch.is_empty() {
        writer.append(&mut batch)?;
    }
    Ok((rearm, adopt))
}

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
