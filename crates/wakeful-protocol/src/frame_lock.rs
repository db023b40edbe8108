//! The lock two writers of one output take around each frame.
//!
//! `wakeful mcp` may hand its stdout to the daemon ([`OutputForm::Channel`]):
//! the daemon then writes the channel notifications, and `wakeful mcp`
//! keeps writing its replies to the client's requests. A frame longer than
//! a pipe's atomic size (4 KiB), or any frame on a socket, may be written
//! in parts, so each writer takes this lock before the first byte of a
//! frame and lets go after its newline: frames never interleave.
//!
//! The lock is an open file description lock (`F_OFD_SETLK` on Linux,
//! `flock(2)` elsewhere) on the whole of a file that `wakeful mcp` creates
//! (a memfd on Linux; the platform layer's `fd::lock_file_pair`). Such
//! locks belong to an open file description, so each writer needs its own:
//! `wakeful mcp` keeps the one it created and hands the daemon another
//! ([`FrameLock::create`]). The kernel lets go of a lock
//! when its holder dies. The daemon also keeps in the memfd the seq of the
//! last event it wrote ([`FrameLock::done_writing`]), so that `wakeful mcp` can
//! resume after it when the daemon restarts, and a mark while it writes
//! ([`FrameLock::mark_writing`]): a writer that takes the lock and finds the
//! mark set knows the daemon died in the middle of a frame, and ends that
//! cut line with a newline before its own frame (the client drops one broken
//! line instead of also losing the next frame, glued to it).
//!
//! [`OutputForm::Channel`]: crate::OutputForm::Channel

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::errno::Errno;

/// Why a handed descriptor is not a frame lock ([`FrameLock::from_handed`]).
#[derive(Debug, thiserror::Error)]
pub enum HandedLockError {
    /// The descriptor cannot be looked at.
    #[error("the lock descriptor sent: {0}")]
    Stat(#[source] Errno),
    /// Not a regular file.
    #[error("the second descriptor of a `channel` output must be the memfd both writers lock (see docs/PROTOCOL.md)")]
    NotMemfd,
}

/// One writer's side of the frame lock.
#[derive(Debug)]
pub struct FrameLock {
    fd: OwnedFd,
}

/// Where the seq of the last event written is kept, and how long it is.
const SEQ_AT: i64 = 0;
const SEQ_LEN: usize = 8;
/// Where the "writing" mark is kept (one byte, 1 while the daemon writes).
const MARK_AT: i64 = SEQ_AT + SEQ_LEN as i64;

impl FrameLock {
    /// A new lock: this writer's side, and the descriptor to hand to the
    /// other writer (its own open file description of the same memfd,
    /// close-on-exec).
    pub fn create() -> io::Result<(FrameLock, OwnedFd)> {
        let (fd, other) = wakeful_platform::fd::lock_file_pair()?;
        Ok((FrameLock { fd }, other))
    }

    /// The side of a lock that another writer created and handed over.
    /// Refuses anything but a regular file (a memfd is one).
    pub fn from_handed(fd: OwnedFd) -> Result<FrameLock, HandedLockError> {
        use nix::sys::stat::{fstat, SFlag};
        let stat = fstat(fd.as_raw_fd()).map_err(HandedLockError::Stat)?;
        if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
            return Err(HandedLockError::NotMemfd);
        }
        Ok(FrameLock { fd })
    }

    fn set(&self, exclusive: bool, wait: bool) -> Result<(), Errno> {
        wakeful_platform::fd::lock_whole(&self.fd, exclusive, wait)
    }

    /// Takes the lock if no other writer holds it: `Ok(false)` when one
    /// does.
    pub fn try_lock(&self) -> io::Result<bool> {
        match self.set(true, false) {
            Ok(()) => Ok(true),
            Err(Errno::EAGAIN) | Err(Errno::EACCES) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Takes the lock, waiting (blocking the thread) while another writer
    /// holds it.
    pub fn lock_blocking(&self) -> io::Result<()> {
        self.set(true, true).map_err(io::Error::from)
    }

    /// Lets go of the lock.
    pub fn unlock(&self) -> io::Result<()> {
        self.set(false, false).map_err(io::Error::from)
    }

    /// After a write of frames: keeps `last` (when given) as the last event
    /// written and clears the "writing" mark, in one write (the seq's 8
    /// bytes and the mark's byte are next to each other).
    pub fn done_writing(&self, last: Option<u64>) -> io::Result<()> {
        let Some(seq) = last else {
            return self.mark_writing(false);
        };
        let mut record = [0u8; SEQ_LEN + 1];
        record[..SEQ_LEN].copy_from_slice(&seq.to_le_bytes());
        let n = nix::sys::uio::pwrite(self.fd.as_fd(), &record, SEQ_AT)?;
        if n != record.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "the frame lock's seq was written in part",
            ));
        }
        Ok(())
    }

    /// Sets (before writing frames) or clears (after) the mark that says a
    /// frame is being written. Call it holding the lock.
    pub fn mark_writing(&self, writing: bool) -> io::Result<()> {
        let n = nix::sys::uio::pwrite(self.fd.as_fd(), &[u8::from(writing)], MARK_AT)?;
        if n != 1 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "the frame lock's mark was not written",
            ));
        }
        Ok(())
    }

    /// Whether the mark is set while nobody else holds the lock: a writer
    /// died in the middle of a frame. Call it holding the lock.
    pub fn left_mid_frame(&self) -> io::Result<bool> {
        let mut buf = [0u8; 1];
        let n = nix::sys::uio::pread(self.fd.as_fd(), &mut buf, MARK_AT)?;
        Ok(n == 1 && buf[0] == 1)
    }

    /// The last event written, as the other writer kept it; `None` before
    /// it kept any.
    pub fn recorded(&self) -> io::Result<Option<u64>> {
        let mut buf = [0u8; SEQ_LEN];
        let n = nix::sys::uio::pread(self.fd.as_fd(), &mut buf, SEQ_AT)?;
        // Seqs start at 1: 0 is a memfd that only holds the mark.
        Ok((n == SEQ_LEN)
            .then(|| u64::from_le_bytes(buf))
            .filter(|seq| *seq > 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_sides_exclude_each_other_and_share_the_seq() {
        let (mine, theirs) = FrameLock::create().unwrap();
        let theirs = FrameLock::from_handed(theirs).unwrap();
        assert!(mine.try_lock().unwrap());
        // Taken again by its holder: still held (locks do not nest).
        assert!(mine.try_lock().unwrap());
        assert!(!theirs.try_lock().unwrap());
        mine.unlock().unwrap();
        assert!(theirs.try_lock().unwrap());
        assert!(!mine.try_lock().unwrap());
        assert_eq!(mine.recorded().unwrap(), None);
        theirs.done_writing(Some(41)).unwrap();
        theirs.done_writing(Some(42)).unwrap();
        assert_eq!(mine.recorded().unwrap(), Some(42));
        theirs.unlock().unwrap();
        assert!(mine.try_lock().unwrap());
        // The mark: set while writing, seen by the other side, cleared after;
        // it does not touch the seq.
        assert!(!mine.left_mid_frame().unwrap());
        theirs.mark_writing(true).unwrap();
        assert!(mine.left_mid_frame().unwrap());
        theirs.mark_writing(false).unwrap();
        assert!(!mine.left_mid_frame().unwrap());
        assert_eq!(mine.recorded().unwrap(), Some(42));
    }

    #[test]
    fn a_blocked_writer_goes_on_once_the_holder_lets_go() {
        let (mine, theirs) = FrameLock::create().unwrap();
        let theirs = FrameLock::from_handed(theirs).unwrap();
        assert!(mine.try_lock().unwrap());
        let released = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = released.clone();
        let waiter = std::thread::spawn(move || {
            theirs.lock_blocking().unwrap();
            // It got the lock only after the holder let go.
            assert!(seen.load(std::sync::atomic::Ordering::SeqCst));
            theirs
        });
        released.store(true, std::sync::atomic::Ordering::SeqCst);
        mine.unlock().unwrap();
        let theirs = waiter.join().unwrap();
        assert!(!mine.try_lock().unwrap());
        // The holder's death (its description closed) lets go too.
        drop(theirs);
        assert!(mine.try_lock().unwrap());
    }

    #[test]
    fn anything_but_a_regular_file_is_refused() {
        let (_r, w) = nix::unistd::pipe().unwrap();
        let e = FrameLock::from_handed(w).unwrap_err().to_string();
        assert!(e.contains("memfd"), "{e}");
    }
}
