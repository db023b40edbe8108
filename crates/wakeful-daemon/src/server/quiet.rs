//! A client connection that wakes the daemon only when the client wrote,
//! and the descriptors a client hands over to be written to.
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
//!
//! A client may send a descriptor along with its request (`SCM_RIGHTS`):
//! `wakeful events` hands over its stdout so that the daemon writes the
//! events to the reader itself ([`handed`]). The same writer serves it,
//! never blocking: a pipe must come opened non-blocking, a stream socket
//! is written with `MSG_DONTWAIT`. [`Whole`] writes one event to a handed
//! pipe or Unix socket at once or not at all, for the hub's inline writes.

use std::io::{self, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use nix::sys::socket::{recvmsg, send, ControlMessageOwned, MsgFlags, UnixAddr};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// The most descriptors one message can carry (Linux's `SCM_MAX_FD`): room
/// for all of them, so that none is ever cut off (and leaked) on receipt.
const MAX_PASSED: usize = 253;

/// The descriptors a client sent last with its bytes (one message's, in
/// the order sent), until a request takes them; those of an earlier
/// message still untaken are closed.
#[derive(Clone, Default)]
pub(crate) struct Passed(Arc<Mutex<Vec<OwnedFd>>>);

impl Passed {
    /// Takes the descriptors the client sent, if any.
    pub(crate) fn take(&self) -> Vec<OwnedFd> {
        self.0
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default()
    }

    fn put(&self, fds: Vec<OwnedFd>) {
        if let Ok(mut p) = self.0.lock() {
            *p = fds;
        }
    }
}

/// The reading half.
pub(crate) struct QuietRead {
    stream: Arc<AsyncFd<UnixStream>>,
    passed: Passed,
    /// Room for the control messages of one receive, kept between reads.
    control: Vec<u8>,
}

/// The writing half, or a descriptor handed over by a client.
pub(crate) struct QuietWrite {
    target: Target,
    /// Registered for writability while a write waits for room.
    room: Option<AsyncFd<OwnedFd>>,
}

/// Where a [`QuietWrite`] writes, and how without blocking.
enum Target {
    /// The connection itself (non-blocking).
    Connection(Arc<AsyncFd<UnixStream>>),
    /// A stream socket of the client's: `send(MSG_DONTWAIT)`. Registered
    /// for reading only, to see its reader hang up. Whether it is a Unix
    /// one.
    Socket(Arc<AsyncFd<OwnedFd>>, bool),
    /// A pipe the client opened non-blocking: `write(2)`. Registered for
    /// reading only, which a pipe's writing end never is: it reports an
    /// error once it has no reader left.
    Pipe(Arc<AsyncFd<OwnedFd>>),
}

/// Splits an accepted connection into its two halves; descriptors the
/// client sends go to the returned [`Passed`].
pub(crate) fn split(stream: tokio::net::UnixStream) -> io::Result<(QuietRead, QuietWrite, Passed)> {
    let stream = stream.into_std()?;
    stream.set_nonblocking(true)?;
    let fd = Arc::new(register(stream, Interest::READABLE)?);
    let passed = Passed::default();
    Ok((
        QuietRead {
            stream: fd.clone(),
            passed: passed.clone(),
            control: nix::cmsg_space!([RawFd; MAX_PASSED]),
        },
        QuietWrite {
            target: Target::Connection(fd),
            room: None,
        },
        passed,
    ))
}

/// A writer for a descriptor a client handed over; an error that says why
/// when the daemon cannot write to it without blocking.
pub(crate) fn handed(fd: OwnedFd) -> Result<QuietWrite, HandedError> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    use nix::sys::stat::{fstat, SFlag};
    let stat = fstat(fd.as_raw_fd()).map_err(HandedError::Descriptor)?;
    let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
    let target = if kind == SFlag::S_IFSOCK {
        let ty = nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::SockType)
            .map_err(HandedError::Socket)?;
        if ty != nix::sys::socket::SockType::Stream {
            return Err(HandedError::Datagram);
        }
        let unix =
            nix::sys::socket::getsockname::<nix::sys::socket::SockaddrStorage>(fd.as_raw_fd())
                .is_ok_and(|a| {
                    nix::sys::socket::SockaddrLike::family(&a)
                        == Some(nix::sys::socket::AddressFamily::Unix)
                });
        Target::Socket(Arc::new(watched(fd)?), unix)
    } else if kind == SFlag::S_IFIFO {
        let flags = fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL)
            .map(OFlag::from_bits_truncate)
            .map_err(HandedError::Pipe)?;
        if !flags.contains(OFlag::O_NONBLOCK) {
            return Err(HandedError::Blocking);
        }
        Target::Pipe(Arc::new(watched(fd)?))
    } else {
        return Err(HandedError::Kind);
    };
    Ok(QuietWrite { target, room: None })
}

/// A handed-over descriptor, registered to watch for its reader leaving
/// ([`QuietWrite::reader_gone`]).
fn watched(fd: OwnedFd) -> Result<AsyncFd<OwnedFd>, HandedError> {
    register(fd, Interest::READABLE | Interest::ERROR).map_err(HandedError::Watch)
}

/// Why the daemon cannot write events to a descriptor a client handed
/// over; each says what to hand instead.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandedError {
    /// The descriptor cannot be looked at.
    #[error("the descriptor sent: {0}")]
    Descriptor(#[source] nix::errno::Errno),
    /// The socket's type cannot be read.
    #[error("the socket sent: {0}")]
    Socket(#[source] nix::errno::Errno),
    /// A datagram socket.
    #[error("events are written only to a stream socket, not a datagram one")]
    Datagram,
    /// The pipe's flags cannot be read.
    #[error("the pipe sent: {0}")]
    Pipe(#[source] nix::errno::Errno),
    /// A blocking pipe.
    #[error("a pipe to write events to must be opened non-blocking (O_NONBLOCK), so that a slow reader never blocks the daemon")]
    Blocking,
    /// Neither a pipe nor a socket.
    #[error("events are written only to a pipe or a stream socket; read them from the connection instead")]
    Kind,
    /// The descriptor cannot be watched for its reader leaving.
    #[error("cannot watch the descriptor sent: {0}")]
    Watch(#[source] io::Error),
    /// `write_to` came without a descriptor.
    #[error("`write_to` needs a descriptor sent with the request (SCM_RIGHTS); none came")]
    NoDescriptor,
    /// `write_to: channel` came without its frame lock.
    #[error("`write_to: channel` needs a second descriptor, the frame lock both writers take (see docs/PROTOCOL.md); none came")]
    NoLock,
    /// The frame lock handed over is not one.
    #[error("{0}")]
    Lock(#[from] wakeful_protocol::frame_lock::HandedLockError),
}

/// Registers a descriptor the `AsyncFd` will own, for `interest` only.
fn register<T: AsRawFd>(owned: T, interest: Interest) -> io::Result<AsyncFd<T>> {
    // SAFETY: `owned` owns its open descriptor (a `UnixStream` or an
    // `OwnedFd`); the AsyncFd holds it, unchanged, until it is dropped,
    // which closes it.
    unsafe { AsyncFd::register_with_interest(owned, interest) }.map_err(io::Error::from)
}

/// One `recvmsg(2)`: the bytes into `buf`, a descriptor that came with
/// them into `passed` (close-on-exec, so no monitor's command inherits it).
fn receive(fd: RawFd, buf: &mut [u8], control: &mut Vec<u8>, passed: &Passed) -> io::Result<usize> {
    control.clear();
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<UnixAddr>(
        fd,
        &mut iov,
        Some(control),
        wakeful_platform::fd::recv_cloexec(),
    )?;
    let n = msg.bytes;
    let mut fds = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = c {
            // SAFETY: the kernel has just installed each of `raw` in this
            // process for us; nothing else owns them.
            fds.extend(raw.into_iter().map(|r| unsafe { OwnedFd::from_raw_fd(r) }));
        }
    }
    fds.iter().for_each(wakeful_platform::fd::received_cloexec);
    if !fds.is_empty() {
        passed.put(fds);
    }
    Ok(n)
}

/// A handed-over pipe or Unix stream socket, written without waiting,
/// each write whole or not at all.
///
/// A write of at most `PIPE_BUF` bytes to a non-blocking pipe takes all of
/// it or fails with `EAGAIN` (POSIX). A Unix stream socket queues a send
/// that small as one buffer, or none (Linux: `unix_stream_sendmsg` cuts a
/// send only at buffers of half the socket's send buffer, 100 KiB by
/// default). Either way a reader never sees part of an event from it.
pub(crate) struct Whole {
    fd: Arc<AsyncFd<OwnedFd>>,
    socket: bool,
}

impl Whole {
    /// Writes all of `buf` now and returns `true`; or writes nothing and
    /// returns `false`: longer than `PIPE_BUF`, no room now, or the reader
    /// is gone (which the stream's task then sees for itself).
    pub(crate) fn write(&self, buf: &[u8]) -> bool {
        if buf.len() > nix::libc::PIPE_BUF {
            return false;
        }
        let fd = self.fd.get_ref();
        let sent = match self.socket {
            true => send(
                fd.as_raw_fd(),
                buf,
                wakeful_platform::fd::send_no_signal() | MsgFlags::MSG_DONTWAIT,
            ),
            false => nix::unistd::write(fd, buf),
        };
        match sent {
            Ok(n) if n == buf.len() => true,
            Ok(n) => {
                // Neither kind of descriptor does this (see above).
                tracing::error!(
                    "a handed-over descriptor took {n} of {} bytes of one event; its line is cut",
                    buf.len()
                );
                true
            }
            Err(_) => false,
        }
    }
}

impl AsyncRead for QuietRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        loop {
            let mut guard = ready!(me.stream.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let (control, passed) = (&mut me.control, &me.passed);
            match guard.try_io(|s| receive(s.get_ref().as_raw_fd(), unfilled, control, passed)) {
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
            // MSG_NOSIGNAL: a client gone is an error (EPIPE), not a signal
            // (for a pipe, the daemon ignores SIGPIPE).
            let fd = self.target_fd();
            let sent = match self.target {
                Target::Pipe(_) => nix::unistd::write(fd, data),
                _ => send(
                    fd.as_raw_fd(),
                    data,
                    wakeful_platform::fd::send_no_signal() | MsgFlags::MSG_DONTWAIT,
                ),
            };
            match sent {
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
                let dup = self.target_fd().try_clone_to_owned()?;
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
        Poll::Ready(match &self.target {
            Target::Connection(s) => s.get_ref().shutdown(std::net::Shutdown::Write),
            Target::Socket(..) | Target::Pipe(_) => Ok(()),
        })
    }
}

impl QuietWrite {
    /// The handed-over descriptor, for writes that take an event whole or
    /// not at all: a pipe or a Unix stream socket (shared: it is closed
    /// when the last holder lets go).
    pub(crate) fn whole(&self) -> Option<Whole> {
        match &self.target {
            Target::Pipe(fd) => Some(Whole {
                fd: fd.clone(),
                socket: false,
            }),
            Target::Socket(fd, true) => Some(Whole {
                fd: fd.clone(),
                socket: true,
            }),
            _ => None,
        }
    }

    /// Completes when the reader of a handed-over descriptor is gone, with
    /// nothing written: a pipe without readers reports an error, a socket
    /// whose peer closed a hang-up. Never for the connection itself (its
    /// end shows on its reading half).
    pub(crate) async fn reader_gone(&self) -> io::Result<()> {
        let (watch, socket) = match &self.target {
            Target::Socket(fd, _) => (&**fd, true),
            Target::Pipe(fd) => (&**fd, false),
            Target::Connection(_) => return std::future::pending().await,
        };
        loop {
            let mut guard = watch.ready(Interest::READABLE | Interest::ERROR).await?;
            let ready = guard.ready();
            if ready.is_error() || ready.is_read_closed() {
                return Ok(());
            }
            // Readable: the reader sent something on its socket (not ours to
            // read) or closed it; a peek tells which.
            if socket {
                let mut byte = [0u8; 1];
                let peeked = nix::sys::socket::recv(
                    watch.get_ref().as_raw_fd(),
                    &mut byte,
                    MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
                );
                if peeked == Ok(0) {
                    return Ok(());
                }
            }
            guard.clear_ready();
        }
    }

    fn target_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match &self.target {
            Target::Connection(s) => s.get_ref().as_fd(),
            Target::Socket(fd, _) => fd.get_ref().as_fd(),
            Target::Pipe(fd) => fd.get_ref().as_fd(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    #[tokio::test]
    async fn lines_go_both_ways_and_a_full_socket_waits_for_room() {
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        let (r, mut w, _) = split(ours).unwrap();
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
        let (_r, mut w, _) = split(ours).unwrap();
        drop(theirs);
        let err = w.write_all(b"event\n").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }

    /// Sends `bytes` with `fds` attached, as a client does.
    fn send_with(to: &std::os::unix::net::UnixStream, bytes: &[u8], fds: &[RawFd]) {
        use nix::sys::socket::{sendmsg, ControlMessage};
        let sent = sendmsg::<UnixAddr>(
            to.as_raw_fd(),
            &[std::io::IoSlice::new(bytes)],
            &[ControlMessage::ScmRights(fds)],
            MsgFlags::empty(),
            None,
        )
        .unwrap();
        assert_eq!(sent, bytes.len());
    }

    fn nonblocking_pipe() -> (OwnedFd, OwnedFd) {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC).unwrap()
    }

    #[tokio::test]
    async fn a_descriptor_sent_with_a_request_is_kept_close_on_exec() {
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        let (r, _w, passed) = split(ours).unwrap();
        let theirs = theirs.into_std().unwrap();
        theirs.set_nonblocking(false).unwrap();
        let (pipe_r, pipe_w) = nonblocking_pipe();
        let (lock, _other) = nix::unistd::pipe().unwrap();
        send_with(
            &theirs,
            b"request\n",
            &[pipe_w.as_raw_fd(), lock.as_raw_fd()],
        );
        drop(pipe_w);
        let mut lines = BufReader::new(r).lines();
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("request"));
        let mut fds = passed.take();
        assert_eq!(fds.len(), 2, "both descriptors came with the request");
        assert!(passed.take().is_empty(), "taken once");
        for fd in &fds {
            let flags = nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFD).unwrap();
            assert_ne!(flags & libc::FD_CLOEXEC, 0, "close-on-exec");
        }
        let fd = fds.remove(0);
        // It is the pipe: what the daemon writes, the reader reads.
        let mut out = handed(fd).unwrap();
        out.write_all(b"event\n").await.unwrap();
        let mut buf = [0u8; 16];
        let n = nix::unistd::read(pipe_r.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"event\n");
    }

    #[tokio::test]
    async fn only_what_never_blocks_the_daemon_is_written_to() {
        let (_r, blocking) = nix::unistd::pipe().unwrap();
        let err = handed(blocking).err().unwrap().to_string();
        assert!(err.contains("non-blocking"), "{err}");
        let file = tempfile::tempfile().unwrap();
        let err = handed(OwnedFd::from(file)).err().unwrap().to_string();
        assert!(err.contains("only to a pipe or a stream socket"), "{err}");
        let (dgram, _other) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let err = handed(OwnedFd::from(dgram)).err().unwrap().to_string();
        assert!(err.contains("datagram"), "{err}");
        let (_r, w) = nonblocking_pipe();
        assert!(handed(w).is_ok());
        let (stream, _other) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(handed(OwnedFd::from(stream)).is_ok());
    }

    /// Writes `n`-byte records through `whole` until one is refused; the
    /// count written.
    fn fill(whole: &Whole, n: usize) -> usize {
        let record = vec![b'x'; n];
        let mut written = 0;
        while whole.write(&record) {
            written += 1;
            assert!(written < 1_000_000, "never full");
        }
        written
    }

    /// Reads everything there is now from a non-blocking descriptor.
    fn drain(fd: &OwnedFd) -> usize {
        let mut buf = [0u8; 65536];
        let mut n = 0;
        while let Ok(k) = nix::unistd::read(fd.as_raw_fd(), &mut buf) {
            if k == 0 {
                break;
            }
            n += k;
        }
        n
    }

    #[tokio::test]
    async fn whole_writes_take_all_of_an_event_or_none_of_it() {
        // A pipe and a Unix stream socket: records of 3,000 bytes until one
        // does not fit; the reader then finds whole records only.
        let (pipe_r, pipe_w) = nonblocking_pipe();
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        for (read, write) in [
            (pipe_r, pipe_w),
            (OwnedFd::from(ours), OwnedFd::from(theirs)),
        ] {
            let out = handed(write).unwrap();
            let whole = out.whole().expect("a pipe or a Unix socket");
            let records = fill(&whole, 3000);
            assert!(records > 0);
            assert_eq!(drain(&read), records * 3000, "whole records only");
            // Longer than PIPE_BUF: never written this way.
            assert!(!whole.write(&vec![b'y'; nix::libc::PIPE_BUF + 1]));
            assert_eq!(drain(&read), 0);
            // The reader gone: refused, no signal.
            drop(read);
            assert!(!whole.write(b"line\n"));
        }
        // The connection itself is never written this way.
        let (conn, _peer) = tokio::net::UnixStream::pair().unwrap();
        let (_r, w, _passed) = split(conn).unwrap();
        assert!(w.whole().is_none());
    }

    #[tokio::test]
    async fn a_handed_pipe_waits_for_room_and_a_reader_gone_is_an_error() {
        let (pipe_r, pipe_w) = nonblocking_pipe();
        let mut out = handed(pipe_w).unwrap();
        // Far more than a pipe holds: the writer waits for the reader, more
        // than once, and loses nothing.
        let big: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
        let expected = big.clone();
        let reader = tokio::task::spawn_blocking(move || {
            let mut f = std::fs::File::from(pipe_r);
            // Blocking reads on our own description of the read end.
            let fl = nix::fcntl::fcntl(f.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL).unwrap();
            let fl = nix::fcntl::OFlag::from_bits_truncate(fl) - nix::fcntl::OFlag::O_NONBLOCK;
            nix::fcntl::fcntl(f.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(fl)).unwrap();
            let mut got = vec![0u8; expected.len()];
            std::io::Read::read_exact(&mut f, &mut got).unwrap();
            assert!(got == expected);
            // The reader leaves.
        });
        out.write_all(&big).await.unwrap();
        reader.await.unwrap();
        let err = out.write_all(b"one more\n").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }
}
