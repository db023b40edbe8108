//! A client connection that wakes the daemon only when the client wrote.
//!
//! A Unix stream socket tells everyone polling it for writing whenever its
//! peer reads: each time a follower's client reads an event, the kernel
//! reports "writable" to the daemon. A tokio `UnixStream` always polls for
//! both directions, so every event a client read woke the daemon once more
//! — and the woken daemon thread often took the processor from that very
//! client before it could pass the event on (measured with `perf sched`:
//! two context switches more per line). Here the socket is polled for
//! reading only; a write goes straight to the socket, and only a write
//! that finds the socket full (a client that does not keep up) polls for
//! room, through a duplicate of the descriptor registered for just that
//! wait.

use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use nix::sys::socket::{send, MsgFlags};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// The reading half.
pub(crate) struct QuietRead(Arc<AsyncFd<UnixStream>>);

/// The writing half.
pub(crate) struct QuietWrite {
    stream: Arc<AsyncFd<UnixStream>>,
    /// Registered for writability while a write waits for room.
    room: Option<AsyncFd<OwnedFd>>,
}

/// Splits an accepted connection into its two halves.
pub(crate) fn split(stream: tokio::net::UnixStream) -> io::Result<(QuietRead, QuietWrite)> {
    let stream = stream.into_std()?;
    stream.set_nonblocking(true)?;
    let fd = Arc::new(register(stream, Interest::READABLE)?);
    Ok((
        QuietRead(fd.clone()),
        QuietWrite {
            stream: fd,
            room: None,
        },
    ))
}

/// Registers a descriptor the `AsyncFd` will own, for `interest` only.
fn register<T: AsRawFd>(owned: T, interest: Interest) -> io::Result<AsyncFd<T>> {
    // SAFETY: `owned` owns its open descriptor (a `UnixStream` or an
    // `OwnedFd`); the AsyncFd holds it, unchanged, until it is dropped,
    // which closes it.
    unsafe { AsyncFd::register_with_interest(owned, interest) }.map_err(io::Error::from)
}

impl AsyncRead for QuietRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match guard.try_io(|s| (&mut s.get_ref()).read(unfilled)) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for QuietWrite {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            // MSG_NOSIGNAL: a client gone is an error (EPIPE), not a signal.
            let fd = self.stream.get_ref().as_raw_fd();
            match send(fd, data, MsgFlags::MSG_NOSIGNAL) {
                Ok(n) => {
                    // Room again: stop polling for it.
                    self.room = None;
                    return Poll::Ready(Ok(n));
                }
                Err(nix::errno::Errno::EAGAIN) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Poll::Ready(Err(io::Error::from(e))),
            }
            if self.room.is_none() {
                let dup = self.stream.get_ref().as_fd().try_clone_to_owned()?;
                self.room = Some(register(dup, Interest::WRITABLE)?);
            }
            if let Some(room) = &self.room {
                let mut guard = ready!(room.poll_write_ready(cx))?;
                guard.clear_ready();
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.stream.get_ref().shutdown(std::net::Shutdown::Write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    #[tokio::test]
    async fn lines_go_both_ways_and_a_full_socket_waits_for_room() {
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        let (r, mut w) = split(ours).unwrap();
        let (their_r, mut their_w) = theirs.into_split();
        their_w.write_all(b"request\n").await.unwrap();
        let mut lines = BufReader::new(r).lines();
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("request"));
        // Far more than a socket buffer holds: the writer must wait for the
        // reader to make room, more than once, and lose nothing.
        let big: Vec<u8> = (0..8_000_000u32).map(|i| (i % 251) as u8).collect();
        let expected = big.clone();
        let writer = tokio::spawn(async move {
            w.write_all(&big).await.unwrap();
            w.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        let mut their_r = their_r;
        their_r.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        assert_eq!(got.len(), expected.len());
        assert!(got == expected);
        drop(their_w);
        assert_eq!(lines.next_line().await.unwrap(), None);
    }

    #[tokio::test]
    async fn writing_to_a_client_gone_is_an_error() {
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        let (_r, mut w) = split(ours).unwrap();
        drop(theirs);
        let err = w.write_all(b"event\n").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }
}
