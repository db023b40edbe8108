#![warn(missing_docs)]
//! # wakeful-daemon
//!
//! The process that owns every monitor and the store, and serves the socket
//! protocol of [`wakeful_protocol::protocol`].
//!
//! - [`run`]: take the lock, recover after a crash ([`recovery`]), re-arm
//!   persistent monitors, serve until asked to stop.
//! - [`config`]: the `config.toml` file.
//! - [`server`]: one task per connection, answering requests.
//! - [`wake`]: delivering events to agents as new turns (wake routes).

pub mod config;
pub mod recovery;
pub mod server;
pub mod wake;

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

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Another daemon holds the lock (not a failure for a racing start).
    #[error("a wakeful daemon is already running for {0}")]
    AlreadyRunning(String),
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

/// Runs the daemon until it is asked to stop (SIGTERM, SIGINT or a
/// `shutdown` request).
pub async fn run(paths: Paths) -> Result<(), DaemonError> {
    // Everything the daemon creates (database, WAL, output files) is private.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    paths.prepare()?;
    let lock_path = paths.lock_file();
    let lock_file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(format!("cannot open lock {}", lock_path.display())))?;
    let _lock = match Flock::lock(lock_file, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err(_) => {
            return Err(DaemonError::AlreadyRunning(
                paths.runtime_dir.display().to_string(),
            ))
        }
    };
    let config = Config::load(&paths.config_file)?;
    let output_dir = paths.output_dir();
    std::fs::create_dir_all(&output_dir)
        .map_err(io(format!("cannot create {}", output_dir.display())))?;
    if let Err(e) = wakeful_engine::process::become_subreaper() {
        tracing::warn!("cannot become child subreaper: {e}");
    }
    // Orphans of commands are reparented to us: reap them when they exit.
    if let Err(e) = wakeful_engine::process::reaper::start_reaper() {
        tracing::warn!("cannot reap adopted orphans (no SIGCHLD handler): {e}");
    }
    let cgroups = config
        .monitors
        .cgroups
        .then(wakeful_engine::process::cgroup::CgroupRoot::detect)
        .flatten();
    match &cgroups {
        Some(root) => tracing::info!(
            "commands get a cgroup each, under {}",
            root.base().display()
        ),
        None => tracing::info!(
            "no cgroup v2 delegated to us: commands are tracked by process tree and marker"
        ),
    }

    let net = wakeful_engine::NetPolicy::new(&config.network.allow).map_err(|e| {
        config::ConfigError::Invalid {
            path: paths.config_file.display().to_string(),
            message: e.to_string(),
        }
    })?;
    let launch_net = net.clone();
    let (mut writer, reader) = wakeful_store::open(&paths.database())?;
    let to_rearm = recover(&mut writer, &reader, cgroups.as_ref())?;
    let latest = reader.latest_seq()?;

    let registry = MonitorRegistry::with_journal_at(
        RegistryConfig {
            session: wakeful_core::session::DEFAULT_SESSION.into(),
            output_dir: paths.output_dir(),
            max_active_per_session: config.limits.max_active_per_session,
            launch: Launch {
                grace: Duration::from_millis(config.monitors.grace_ms),
                die_with_parent: true,
                net,
                cgroups,
                ..Launch::default()
            },
            subscriber_capacity: 1024,
        },
        writer,
        latest,
    );
    let since = Utc::now() - chrono::Duration::from_std(ENDED_RETENTION).unwrap_or_default();
    for info in reader.ended_since(since)? {
        registry.insert_ended(info);
    }
    for m in to_rearm {
        let opts = StartOptions {
            session: Some(m.info.session.clone()),
            id: Some(m.info.id.clone()),
            rearm: true,
            base_env: m.base_env.clone(),
            base_cwd: m.base_cwd.clone(),
        };
        if let Err(e) = registry.start_with(m.spec.clone(), opts).await {
            tracing::error!("cannot re-arm monitor {}: {e}", m.info.id);
        }
    }

    let socket = paths.socket();
    // We hold the lock, so no live daemon owns this path: it is stale.
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket)
        .map_err(io(format!("cannot listen on {}", socket.display())))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
        .map_err(io(format!("cannot secure {}", socket.display())))?;
    eprintln!(
        "wakeful daemon {} (pid {}) listening on {}",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        socket.display()
    );

    let wakes = wake::Wakes::new(
        registry.clone(),
        reader.clone(),
        launch_net,
        config.wake_options.auto_codex,
    );
    wakes.start_all(
        config
            .wake_routes()
            .map_err(|message| config::ConfigError::Invalid {
                path: paths.config_file.display().to_string(),
                message,
            })?,
    );
    let state = Arc::new(server::State::new(
        registry.clone(),
        reader,
        paths.clone(),
        wakes,
    ));
    let served = server::serve(listener, state.clone()).await;

    // Persistent monitors are suspended (re-armed by the next daemon); the
    // others end with `daemon_stopped`.
    registry.suspend_where(|i| i.persistent).await;
    registry.shutdown(MonitorStopReason::DaemonStopped).await;
    registry.terminals().kill_all().await;
    registry.sync().await;
    let _ = std::fs::remove_file(&socket);
    served.map_err(io("accepting connections"))?;
    eprintln!("wakeful daemon (pid {}) stopped", std::process::id());
    Ok(())
}

/// Kills leftovers of monitors the store lists as running, ends the
/// non-persistent ones with `daemon_stopped`, and returns the persistent ones
/// to re-arm.
fn recover(
    writer: &mut wakeful_store::StoreWriter,
    reader: &wakeful_store::StoreReader,
    cgroups: Option<&wakeful_engine::process::cgroup::CgroupRoot>,
) -> Result<Vec<wakeful_store::StoredMonitor>, DaemonError> {
    let mut rearm = Vec::new();
    let mut batch = Vec::new();
    for m in reader.running_monitors()? {
        let killed = recovery::kill_leftovers(&m.info.id, m.pid, m.start_ticks)
            + cgroups.map_or(0, |c| c.clean_up(&m.info.id));
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
            },
        }));
    }
    for mut t in reader.terminals()? {
        if t.state != wakeful_core::MonitorState::Running {
            continue;
        }
        recovery::kill_leftovers(&t.id, t.pid, None);
        if let Some(c) = cgroups {
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
    Ok(rearm)
}
