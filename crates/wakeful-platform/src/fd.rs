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
        return crate::linux::proc::locks_table();
    }
    None
}

/// A small file two writers lock (the MCP frame lock): two descriptors of
/// it, each its own open file description, both close-on-exec. Linux: a
/// memfd opened again through [`reopen`] (so the posix backend refuses);
/// other systems: a temporary file opened twice and unlinked at once.
pub fn lock_file_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let fd = nix::sys::memfd::memfd_create(
            c"wakeful-frame-lock",
            nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
        )?;
        let other = reopen(
            fd.as_raw_fd(),
            std::fs::OpenOptions::new().read(true).write(true),
        )?;
        Ok((fd, other))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let template = std::env::temp_dir().join("wakeful-frame-lock-XXXXXX");
        let (raw, path) = nix::unistd::mkstemp(&template)?;
        // SAFETY: mkstemp returned a new descriptor that nobody else owns.
        let first = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path);
        let _ = std::fs::remove_file(&path);
        let second = OwnedFd::from(opened?);
        nix::fcntl::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&first),
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )?;
        Ok((first, second))
    }
}

/// A file that lives in memory only, close-on-exec (the handover of an
/// upgrade: its program passes it to the next one, and a full disk does
/// not stop it). Linux: a memfd; other systems: a temporary file unlinked
/// at once.
pub fn anonymous_file(name: &std::ffi::CStr) -> std::io::Result<std::fs::File> {
    #[cfg(target_os = "linux")]
    {
        let fd =
            nix::sys::memfd::memfd_create(name, nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)?;
        Ok(std::fs::File::from(fd))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let template = std::env::temp_dir().join(format!("{}-XXXXXX", name.to_string_lossy()));
        let (raw, path) = nix::unistd::mkstemp(&template)?;
        let _ = std::fs::remove_file(&path);
        // SAFETY: mkstemp returned a new descriptor that nobody else owns.
        let file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(raw) };
        nix::fcntl::fcntl(
            raw,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )?;
        Ok(file)
    }
}

/// Takes (`exclusive`) or lets go of a lock on the whole of `fd`, held by
/// its open file description (so two descriptions of one file exclude each
/// other, and the kernel lets go when the holder dies); `wait`: block while
/// another holds it. `EAGAIN`/`EACCES`: held by another. Linux: `F_OFD_SETLK`
/// (either backend: both writers of one lock must use the same kind);
/// other systems: `flock(2)`.
pub fn lock_whole(fd: &OwnedFd, exclusive: bool, wait: bool) -> Result<(), nix::errno::Errno> {
    use nix::errno::Errno;
    use std::os::fd::AsRawFd;
    let raw = fd.as_raw_fd();
    #[cfg(target_os = "linux")]
    {
        use nix::fcntl::{fcntl, FcntlArg};
        // SAFETY: an all-zero `flock` is a valid value (l_pid must be 0 for
        // an open file description lock); the fields that matter are set.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_type = (if exclusive {
            libc::F_WRLCK
        } else {
            libc::F_UNLCK
        }) as libc::c_short;
        lock.l_whence = libc::SEEK_SET as libc::c_short;
        lock.l_start = 0;
        lock.l_len = 0;
        loop {
            let arg = if wait {
                FcntlArg::F_OFD_SETLKW(&lock)
            } else {
                FcntlArg::F_OFD_SETLK(&lock)
            };
            match fcntl(raw, arg) {
                Err(Errno::EINTR) => continue,
                other => return other.map(|_| ()),
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let op = match (exclusive, wait) {
            (true, true) => libc::LOCK_EX,
            (true, false) => libc::LOCK_EX | libc::LOCK_NB,
            (false, _) => libc::LOCK_UN,
        };
        loop {
            // SAFETY: flock takes a descriptor and flags; no memory.
            let r = unsafe { libc::flock(raw, op) };
            if r == 0 {
                return Ok(());
            }
            match Errno::last() {
                Errno::EINTR => continue,
                e => return Err(e),
            }
        }
    }
}

/// The flag that makes a send to a socket whose reader left fail with
/// `EPIPE` rather than raise SIGPIPE (`MSG_NOSIGNAL`); empty on macOS,
/// which has no such flag (Rust programs ignore SIGPIPE there anyway).
pub fn send_no_signal() -> nix::sys::socket::MsgFlags {
    #[cfg(not(target_vendor = "apple"))]
    return nix::sys::socket::MsgFlags::MSG_NOSIGNAL;
    #[cfg(target_vendor = "apple")]
    nix::sys::socket::MsgFlags::empty()
}

/// A pipe whose two ends are close-on-exec (`pipe2(O_CLOEXEC)` where
/// there is one; macOS: `pipe` and `FD_CLOEXEC` on each end).
pub fn pipe_cloexec() -> std::io::Result<(OwnedFd, OwnedFd)> {
    #[cfg(not(target_vendor = "apple"))]
    return Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?);
    #[cfg(target_vendor = "apple")]
    {
        use std::os::fd::AsRawFd;
        let (r, w) = nix::unistd::pipe()?;
        for fd in [&r, &w] {
            nix::fcntl::fcntl(
                fd.as_raw_fd(),
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
            )?;
        }
        Ok((r, w))
    }
}

/// The soft limit on open descriptors (`RLIMIT_NOFILE`); 0 when unknown.
/// (`rlim_t` is signed on FreeBSD.)
#[allow(clippy::useless_conversion)]
pub fn max_open_files() -> u64 {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .ok()
        .and_then(|(soft, _)| u64::try_from(soft).ok())
        .unwrap_or(0)
}

/// The `recvmsg` flag that makes received descriptors close-on-exec as
/// they arrive (`MSG_CMSG_CLOEXEC`); empty on macOS, which has none: there
/// [`received_cloexec`] sets the flag afterwards (a command spawned in
/// between could inherit the descriptor).
pub fn recv_cloexec() -> nix::sys::socket::MsgFlags {
    #[cfg(not(target_vendor = "apple"))]
    return nix::sys::socket::MsgFlags::MSG_CMSG_CLOEXEC;
    #[cfg(target_vendor = "apple")]
    nix::sys::socket::MsgFlags::empty()
}

/// Makes a received descriptor close-on-exec where [`recv_cloexec`]
/// could not (macOS); nothing elsewhere.
pub fn received_cloexec(fd: &OwnedFd) {
    #[cfg(target_vendor = "apple")]
    {
        use std::os::fd::AsRawFd;
        let _ = nix::fcntl::fcntl(
            fd.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        );
    }
    #[cfg(not(target_vendor = "apple"))]
    let _ = fd;
}
