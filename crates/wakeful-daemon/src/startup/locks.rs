//! The daemon's two locks: `daemon.start.lock` (one start at a time, held
//! until the daemon accepts connections) and `daemon.lock` (held for the
//! daemon's whole life, and across an upgrade on the descriptor the program
//! before left open).

use std::fs::File;

use nix::fcntl::{Flock, FlockArg};
use wakeful_protocol::Paths;

use crate::{io, DaemonError, HOLDER_EXIT_WAIT};

/// The locks a daemon holds: `daemon.lock` for its whole life,
/// `daemon.start.lock` until it accepts connections.
pub(crate) struct Locks {
    pub(crate) daemon: Flock<File>,
    pub(crate) start: Flock<File>,
}

fn lock_file(path: &std::path::Path) -> Result<File, DaemonError> {
    File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io(format!("cannot open lock {}", path.display())))
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
pub(super) async fn take_handed(
    paths: &Paths,
    fd: std::os::fd::RawFd,
) -> Result<Locks, DaemonError> {
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
    Ok(Locks { daemon, start })
}

/// Takes the start lock (one start at a time) and then the daemon lock,
/// waiting up to [`HOLDER_EXIT_WAIT`] for a holder that no longer accepts
/// connections to let go.
pub(super) async fn take(paths: &Paths) -> Result<Locks, DaemonError> {
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
    Ok(Locks { daemon, start })
}
