//! The daemon's start, step by step:
//!
//! 1. [`prepare`]: private files, the state directories, the open-file
//!    limit.
//! 2. The locks ([`locks`]); an upgrade's new program keeps the daemon lock
//!    the program before it held.
//! 3. [`monitors`]: the platform backend, the store, recovery after a crash
//!    ([`crate::recovery`]), the event hub and the registry, with the
//!    persistent monitors re-armed and those an upgrade handed over going
//!    on.
//! 4. The socket ([`socket`]), bound only once the monitors are there.
//! 5. [`serve_state`]: wake routes, storage and the state every connection
//!    shares, with an upgrade's background tasks.
//! 6. [`background`]: the storage loop, the webhook subscriptions, the
//!    cluster link.

mod locks;
mod socket;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::net::UnixListener;
use wakeful_engine::registry::ENDED_RETENTION;
use wakeful_engine::{Launch, MonitorRegistry, RegistryConfig};
use wakeful_protocol::Paths;

use crate::config::{self, Config};
use crate::{cluster, io, recovery, server, state, storage, upgrade, wake, DaemonError};

pub(crate) use locks::Locks;

/// A started daemon, ready to serve.
pub(crate) struct Daemon {
    pub(crate) listener: UnixListener,
    pub(crate) state: Arc<state::State>,
    pub(crate) registry: MonitorRegistry,
    pub(crate) socket: std::path::PathBuf,
}

/// Takes the locks, recovers after a crash, re-arms persistent monitors (or
/// goes on with those an upgrade handed over), binds the socket.
pub(crate) async fn start(paths: &Paths) -> Result<(Daemon, Locks), DaemonError> {
    prepare(paths)?;
    // An upgrade's new program: its commands are this process's children
    // already; the reaper must leave them to their monitors from the start.
    let handover = upgrade::take();
    let _handed_children: Vec<wakeful_engine::process::Managed> = handover
        .iter()
        .flat_map(|h| &h.monitors)
        .filter_map(|m| m.process.as_ref())
        .map(|p| wakeful_engine::process::reaper::adopt(p.pid))
        .collect();
    let locks = match &handover {
        Some(h) => locks::take_handed(paths, h.lock).await?,
        None => locks::take(paths).await?,
    };
    let config = Config::load(&paths.config_file)?;
    let monitors = monitors(paths, &config, handover.as_ref()).await?;
    let registry = monitors.registry.clone();
    let (listener, socket) = match &handover {
        Some(h) => socket::inherit(paths, h.listener)?,
        None => socket::bind(paths)?,
    };
    let (state, storage) = serve_state(paths, &config, monitors, handover.as_ref())?;
    background(paths, &config, &state, storage).await?;
    let daemon = Daemon {
        listener,
        state,
        registry,
        socket,
    };
    Ok((daemon, locks))
}

/// Everything the daemon creates (database, WAL, output files) is private;
/// the state directories exist; every descriptor the daemon may need can
/// be opened.
fn prepare(paths: &Paths) -> Result<(), DaemonError> {
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    paths.prepare()?;
    raise_open_file_limit();
    Ok(())
}

/// What [`monitors`] sets up and the later steps share.
struct Monitors {
    registry: MonitorRegistry,
    reader: wakeful_store::StoreReader,
    pruner: wakeful_store::retention::Pruner,
    disk: Arc<wakeful_engine::DiskGuard>,
    net: wakeful_engine::NetPolicy,
}

/// Opens the store, recovers what a crash left, and builds the registry
/// with its monitors: the ended ones of the last [`ENDED_RETENTION`], the
/// persistent ones re-armed, and those `handover` names going on.
async fn monitors(
    paths: &Paths,
    config: &Config,
    handover: Option<&upgrade::Handover>,
) -> Result<Monitors, DaemonError> {
    let output_dir = paths.output_dir();
    std::fs::create_dir_all(&output_dir)
        .map_err(io(format!("cannot create {}", output_dir.display())))?;
    let containers = platform(config, paths)?;
    let net = wakeful_engine::NetPolicy::new(&config.network.allow)
        .map_err(|e| invalid(paths, e.to_string()))?;
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
    let handed = handover.map_or(&[][..], |h| &h.monitors[..]);
    let (to_rearm, to_adopt) =
        recovery::recover(&mut writer, &reader, containers.as_ref(), handed)?;
    let latest = reader.latest_seq()?;

    let replay: Arc<dyn wakeful_engine::Replay> = Arc::new(StoreReplay(reader.clone()));
    let hub = wakeful_engine::Hub::new(writer, latest, Some(replay));
    hub.set_fold_delay(Duration::from_millis(config.store.fold_delay_ms));
    let registry = MonitorRegistry::with_hub(
        RegistryConfig {
            session: wakeful_core::session::DEFAULT_SESSION.into(),
            output_dir,
            max_active_per_session: config.limits.max_active_per_session,
            launch: Launch {
                grace: Duration::from_millis(config.monitors.grace_ms),
                die_with_parent: true,
                net: net.clone(),
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
    recovery::rearm(&registry, to_rearm).await;
    recovery::adopt(&registry, to_adopt).await;
    Ok(Monitors {
        registry,
        reader,
        pruner,
        disk,
        net,
    })
}

/// The state every connection shares: the wake routes (started), the
/// storage, and what an upgrade handed over (its count, its background
/// tasks).
fn serve_state(
    paths: &Paths,
    config: &Config,
    monitors: Monitors,
    handover: Option<&upgrade::Handover>,
) -> Result<(Arc<state::State>, Arc<storage::Storage>), DaemonError> {
    let Monitors {
        registry,
        reader,
        pruner,
        disk,
        net,
    } = monitors;
    let wakes = wake::Wakes::new(
        registry.clone(),
        reader.clone(),
        net,
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
        registry,
        reader,
        paths.clone(),
        wakes,
        server::Limits {
            max_connections_per_process: config.limits.max_connections_per_process,
        },
        storage.clone(),
    );
    if let Some(h) = handover {
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
    if let Some(h) = handover {
        server::tasks::adopt(&state, h.tasks.clone());
    }
    Ok((state, storage))
}

/// What runs beside the connections: the storage loop, the webhook
/// subscriptions' deliveries, and the cluster link (only with `[cluster]`).
async fn background(
    paths: &Paths,
    config: &Config,
    state: &Arc<state::State>,
    storage: Arc<storage::Storage>,
) -> Result<(), DaemonError> {
    tokio::spawn(storage.run(state.stopping()));
    server::subscriptions::resume(state);
    if let Some(cluster) = config.cluster.clone() {
        cluster::start_link(cluster, state)
            .await
            .map_err(|e| invalid(paths, format!("[cluster]: {e}")))?;
    }
    Ok(())
}

/// The configuration file is invalid: `message` says how.
fn invalid(paths: &Paths, message: String) -> config::ConfigError {
    config::ConfigError::Invalid {
        path: paths.config_file.display().to_string(),
        message,
    }
}

/// Chooses the platform backend, becomes the subreaper of the commands
/// (and reaps the orphans it adopts), and finds the containers commands can
/// run in.
fn platform(
    config: &Config,
    paths: &Paths,
) -> Result<Option<wakeful_platform::tree::ContainerRoot>, DaemonError> {
    let backend = wakeful_platform::configure(config.platform.as_deref())
        .map_err(|e| invalid(paths, e.to_string()))?;
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

/// The store, read back by the event hub for followers that catch up.
pub(crate) struct StoreReplay(pub(crate) wakeful_store::StoreReader);

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
