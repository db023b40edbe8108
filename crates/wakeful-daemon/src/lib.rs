//! # wakeful-daemon
//!
//! The process that owns every monitor and the store, and serves the socket
//! protocol of [`wakeful_protocol`].
//!
//! - [`run`]: start (`startup`: take the lock, recover after a crash
//!   ([`recovery`]), re-arm persistent monitors, bind the socket), report
//!   readiness ([`Readiness`]), serve until asked to stop.
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
mod startup;
pub mod state;
pub mod storage;
mod task_book;
pub mod upgrade;
pub mod wake;
mod webhook_book;

use std::fs::File;
use std::sync::Arc;
use std::time::Duration;

use nix::fcntl::Flock;
use tokio::net::UnixListener;
use wakeful_core::MonitorStopReason;
use wakeful_engine::MonitorRegistry;
use wakeful_protocol::Paths;

use startup::{start, Daemon};

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
    state.drain_waits(upgrade::DRAIN_LIMIT).await;
    let monitors = registry.hand_over().await;
    registry.terminals().kill_all().await;
    registry.hub().close().await;
    state.drain_followers(Duration::from_secs(2)).await;
    state.drain_connections(upgrade::DRAIN_LIMIT).await;
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

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
