//! The Linux backend: `/proc`, `prctl`, cgroup v2 and inotify.
//!
//! Linux facts it relies on, read from `/proc`:
//! - a process's group and state are fields 5 and 3 of `/proc/PID/stat`;
//! - `/proc/PID/task/TID/children` lists a thread's children;
//! - `/proc/PID/environ` holds the environment a process started with;
//! - `/proc/self/fd/N` opened again gives a new open file description of
//!   what descriptor `N` refers to;
//! - orphans are reparented to the nearest *subreaper*
//!   (`PR_SET_CHILD_SUBREAPER`).

pub mod cgroup;
#[cfg(feature = "follow")]
pub mod follow;
pub mod proc;

use std::os::fd::OwnedFd;

/// Descriptor `fd` of this process, opened again through `/proc/self/fd`.
pub fn reopen(fd: i32, options: &std::fs::OpenOptions) -> std::io::Result<OwnedFd> {
    options
        .open(format!("/proc/self/fd/{fd}"))
        .map(OwnedFd::from)
}

/// Arranges for the calling process to get SIGKILL when its parent dies
/// (`PR_SET_PDEATHSIG`). Async-signal-safe: meant for a child between fork
/// and exec.
pub fn die_with_parent() -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_PDEATHSIG takes integer arguments and
    // touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
