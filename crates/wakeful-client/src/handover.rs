//! Handing stdout to the daemon.
//!
//! `wakeful events`, `wakeful watch` and `wakeful mcp` may give the daemon
//! their stdout (`SCM_RIGHTS`, [`crate::Connection::send_with_fds`]) so
//! that the daemon writes each event to the reader itself: the reader gets
//! a line one process hop sooner, and the client only waits for the end.
//! OpenSSH's connection sharing hands a multiplexing client's descriptors
//! to the master the same way.
//!
//! The daemon must never block on a slow reader, so it is handed only what
//! it can write to without blocking, and without changing how this
//! process's own stdout behaves: a pipe is opened again through
//! `/proc/self/fd/1` (an open file description of its own, non-blocking),
//! a stream socket is duplicated (the daemon sends with `MSG_DONTWAIT`).
//! A terminal, a regular file or anything else stays with this process,
//! which relays the events as before.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// Stdout, made ready for the daemon to write to; `None` when this process
/// should write it itself.
pub fn stdout_for_daemon() -> Option<OwnedFd> {
    use nix::sys::stat::{fstat, SFlag};
    let stdout = std::io::stdout();
    let fd = stdout.as_fd();
    let stat = fstat(fd.as_raw_fd()).ok()?;
    let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
    if kind == SFlag::S_IFIFO {
        reopen_nonblocking(fd.as_raw_fd())
    } else if kind == SFlag::S_IFSOCK {
        use nix::sys::socket::{getsockopt, sockopt::SockType, SockType as Type};
        (getsockopt(&fd, SockType).ok()? == Type::Stream)
            .then(|| fd.try_clone_to_owned().ok())
            .flatten()
    } else {
        None
    }
}

/// The pipe at descriptor `fd`, opened again for writing, non-blocking and
/// close-on-exec; `None` when it cannot be (no `/proc`, no reader left).
fn reopen_nonblocking(fd: i32) -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    wakeful_platform::fd::reopen(
        fd,
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK),
    )
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_is_opened_again_non_blocking_and_the_original_stays_blocking() {
        let (read, write) = nix::unistd::pipe().unwrap();
        let again = reopen_nonblocking(write.as_raw_fd()).expect("reopened");
        let flags = |fd: i32| {
            nix::fcntl::OFlag::from_bits_truncate(
                nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL).unwrap(),
            )
        };
        assert!(flags(again.as_raw_fd()).contains(nix::fcntl::OFlag::O_NONBLOCK));
        assert!(!flags(write.as_raw_fd()).contains(nix::fcntl::OFlag::O_NONBLOCK));
        // Same pipe: what goes into the new description comes out of the old
        // pipe's read end.
        nix::unistd::write(&again, b"x\n").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(nix::unistd::read(read.as_raw_fd(), &mut buf).unwrap(), 2);
        // Full: the new description says so instead of blocking.
        let chunk = vec![0u8; 65536];
        let full = loop {
            match nix::unistd::write(&again, &chunk) {
                Ok(_) => continue,
                Err(e) => break e,
            }
        };
        assert_eq!(full, nix::errno::Errno::EAGAIN);
    }
}
