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

/// A path naming descriptor `fd` of process `pid`, which can be `stat`ed
/// (what the descriptor refers to), read as a link (its name) and opened
/// (Linux: `/proc/PID/fd/N`); `None` under the posix backend, which has
/// no such path.
pub fn of_process(pid: i32, fd: i32) -> Option<std::path::PathBuf> {
    #[cfg(target_os = "linux")]
    if crate::backend() == crate::Backend::Linux {
        return Some(crate::linux::proc::fd_path(pid, fd));
    }
    let _ = (pid, fd);
    None
}

/// Asks for pipe `fd` to hold `bytes` (Linux: `F_SETPIPE_SZ`, refused
/// above `/proc/sys/fs/pipe-max-size`); elsewhere pipes keep their size.
/// Either backend on Linux: the capacity is no guarantee, only a figure.
pub fn widen_pipe(fd: i32, bytes: i32) {
    #[cfg(target_os = "linux")]
    let _ = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETPIPE_SZ(bytes));
    #[cfg(not(target_os = "linux"))]
    let _ = (fd, bytes);
}

/// The kernel's table of file locks, in the format of Linux's
/// `/proc/locks`; `None` under the posix backend.
pub fn locks_table() -> Option<String> {
    #[cfg(target_os = "linux")]
    if crate::backend() == crate::Backend::Linux {
        return std::fs::read_to_string("/proc/locks").ok();
    }
    None
}
