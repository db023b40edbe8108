//! wakeful's platform layer: every operating-system-specific capability
//! behind one small interface per concern, so that the rest of the
//! workspace names no Linux-only call (docs/PLATFORMS.md).
//!
//! - [`tree`]: the process tree — reading the process table, a process's
//!   children and environment, adopting orphans (subreaper), dying with the
//!   parent, and per-command containers that no process can leave.
//! - [`follow`]: being woken when a followed file changes (feature
//!   `follow`).
//! - [`fd`]: opening a descriptor again as a new open file description.
//! - [`disk`]: a filesystem's free space.
//!
//! Two backends: `linux` (`/proc`, `prctl`, cgroup v2, inotify; Linux
//! only) and [`posix`] (what macOS and the BSDs have too: `ps`, process
//! groups, polling `stat`). [`backend`] says which one runs: on Linux the
//! Linux one unless `WAKEFUL_PLATFORM=posix` (or the daemon's
//! `platform = "posix"`, see [`configure`]) chose the portable one, so that
//! it is tested here; elsewhere always the portable one.

#[cfg(not(unix))]
compile_error!("wakeful-platform needs a Unix system (docs/PLATFORMS.md)");

use std::sync::atomic::{AtomicU8, Ordering};

pub mod disk;
pub mod fd;
#[cfg(feature = "follow")]
pub mod follow;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod posix;
pub mod tree;

/// Which backend does the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `/proc`, `prctl` (subreaper, parent-death signal), cgroup v2,
    /// inotify: Linux only.
    Linux,
    /// Process groups, `kill`/`waitpid`, a `ps` scan of the process table,
    /// polling `stat` for files: what macOS and the BSDs have too. No
    /// subreaper, no parent-death signal, no containers, no environment
    /// marker: a process that left the command's group and whose parent
    /// exited cannot be found (docs/PLATFORMS.md).
    Posix,
}

impl Backend {
    /// Its name, as `WAKEFUL_PLATFORM` and the config spell it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Linux => "linux",
            Backend::Posix => "posix",
        }
    }

    /// Whether a stop can prove that nothing of a command survived (every
    /// process it started is found, however it left its group).
    pub fn finds_every_process(self) -> bool {
        self == Backend::Linux
    }

    /// What this backend cannot do, one sentence each (empty for Linux).
    pub fn limits(self) -> &'static [&'static str] {
        match self {
            Backend::Linux => &[],
            Backend::Posix => &[
                "no subreaper: an orphan of a command is reparented to init, not to the daemon",
                "no environment marker scan: a process that left the command's process group and whose parent exited (setsid, double fork) cannot be found, so a stop cannot rule out survivors",
                "no parent-death signal: a command outlives a daemon killed with SIGKILL until the next daemon stops what it recorded",
                "no containers (cgroups)",
                "files are followed by polling stat() every 100 ms, not by change notification",
                "a pipe cannot be opened again as a description of its own: stdout is relayed, not handed to the daemon",
            ],
        }
    }

    fn parse(name: &str) -> Option<Backend> {
        match name.trim() {
            "linux" if cfg!(target_os = "linux") => Some(Backend::Linux),
            "posix" => Some(Backend::Posix),
            _ => None,
        }
    }
}

/// The name or value was not a backend this build has.
#[derive(Debug, thiserror::Error)]
#[error("unknown platform backend {0:?}: this build has {1}")]
pub struct UnknownBackend(String, &'static str);

const UNSET: u8 = 0;
const LINUX: u8 = 1;
const POSIX: u8 = 2;
static CHOSEN: AtomicU8 = AtomicU8::new(UNSET);

fn store(b: Backend) {
    let v = match b {
        Backend::Linux => LINUX,
        Backend::Posix => POSIX,
    };
    CHOSEN.store(v, Ordering::Relaxed);
}

fn default_backend() -> Backend {
    if cfg!(target_os = "linux") {
        Backend::Linux
    } else {
        Backend::Posix
    }
}

const AVAILABLE: &str = if cfg!(target_os = "linux") {
    "linux, posix"
} else {
    "posix"
};

/// The backend `WAKEFUL_PLATFORM` names, if it is set (and valid).
fn from_env() -> Option<Result<Backend, UnknownBackend>> {
    let v = std::env::var("WAKEFUL_PLATFORM").ok()?;
    if v.is_empty() {
        return None;
    }
    Some(Backend::parse(&v).ok_or(UnknownBackend(v, AVAILABLE)))
}

/// The backend in use: chosen once, by `WAKEFUL_PLATFORM`, else by
/// [`configure`], else the system's own (Linux on Linux).
pub fn backend() -> Backend {
    match CHOSEN.load(Ordering::Relaxed) {
        LINUX => return Backend::Linux,
        POSIX => return Backend::Posix,
        _ => {}
    }
    let b = match from_env() {
        Some(Ok(b)) => b,
        Some(Err(e)) => {
            tracing::warn!("{e}; using {}", default_backend().name());
            default_backend()
        }
        None => default_backend(),
    };
    store(b);
    b
}

/// Chooses the backend from a configuration value (the daemon's
/// `platform = "…"`), before anything asks [`backend`]. The environment
/// wins: with `WAKEFUL_PLATFORM` set, the configured value is only
/// checked. `None` keeps the system's own.
pub fn configure(name: Option<&str>) -> Result<Backend, UnknownBackend> {
    let configured = match name {
        Some(n) => Some(Backend::parse(n).ok_or_else(|| UnknownBackend(n.to_string(), AVAILABLE))?),
        None => None,
    };
    let b = match from_env() {
        Some(Ok(b)) => b,
        Some(Err(e)) => return Err(e),
        None => configured.unwrap_or_else(default_backend),
    };
    store(b);
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        assert_eq!(Backend::parse("posix"), Some(Backend::Posix));
        assert_eq!(Backend::parse(Backend::Posix.name()), Some(Backend::Posix));
        assert_eq!(Backend::parse("windows"), None);
        assert!(Backend::Posix.limits().len() > 3);
        assert!(Backend::Linux.limits().is_empty());
        assert!(!Backend::Posix.finds_every_process());
    }
}

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
