//! The daemon's socket: bound afresh (private to the user), or the one an
//! upgrade's program before this one listened on; and `daemon.json`, which
//! tells clients where it is.

use std::os::unix::fs::PermissionsExt;

use tokio::net::UnixListener;
use wakeful_protocol::Paths;

use crate::{io, DaemonError};

/// The socket an upgrade's program before this one listened on (`fd`),
/// kept open across the exec: connections made meanwhile wait in its
/// backlog. Writes `daemon.json` (this version).
pub(super) fn inherit(
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
pub(super) fn bind(paths: &Paths) -> Result<(UnixListener, std::path::PathBuf), DaemonError> {
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
