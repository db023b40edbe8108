//! Descriptors: opening one again as an open file description of its own.

use std::os::fd::OwnedFd;

/// Descriptor `fd` of this process opened again with `options`: a new open
/// file description of the same file or pipe, so that flags such as
/// `O_NONBLOCK` set on it do not reach the original. Only the Linux backend
/// can (`/proc/self/fd/N`); the posix backend answers `Unsupported`
/// (macOS's `/dev/fd/N` duplicates the descriptor instead), and callers
/// then keep the descriptor to themselves.
pub fn reopen(fd: i32, options: &std::fs::OpenOptions) -> std::io::Result<OwnedFd> {
    #[cfg(target_os = "linux")]
    if crate::backend() == crate::Backend::Linux {
        return crate::linux::reopen(fd, options);
    }
    let _ = (fd, options);
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "the posix platform backend cannot open a descriptor again as a description of its own",
    ))
}

/// Where descriptor `fd` of process `pid` points, and what `stat` says of
/// it; `None` when the system does not say (always, under the posix
/// backend).
pub fn target_of(pid: i32, fd: i32) -> Option<(std::path::PathBuf, std::fs::Metadata)> {
    #[cfg(target_os = "linux")]
    if crate::backend() == crate::Backend::Linux {
        return crate::linux::proc::fd_target(pid, fd);
    }
    let _ = (pid, fd);
    None
}
