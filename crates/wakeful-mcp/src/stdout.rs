//! The server's stdout, shared with the daemon frame by frame.
//!
//! Once `wakeful mcp` handed its stdout to the daemon for channel push
//! ([`crate::channel`]), two processes write JSON-RPC lines to it. Each
//! takes the frame lock ([`FrameLock`]) before the first byte of a frame and
//! lets go once the frame's newline is written and flushed, so frames never
//! interleave however a write is split. A JSON-RPC frame holds no newline
//! but its last byte (JSON escapes them in strings), so "the last byte
//! written is a newline" marks the end of a frame.
//!
//! [`Locked`] wraps the writer the MCP transport writes frames to. The lock
//! is taken at once when free; when the daemon holds it (for the length of
//! one write of notifications), a blocking thread waits for it. Taking it,
//! the writer looks at the daemon's "writing" mark: set, the daemon died in
//! the middle of a frame, and a newline ends that cut line before the
//! server's frame (the client then drops one broken line, not two frames).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::io::AsyncWrite;
use tokio::task::JoinHandle;
use wakeful_protocol::FrameLock;

/// A writer that holds the frame lock from the first byte of a frame to
/// its flushed newline.
pub struct Locked<W> {
    inner: W,
    lock: Option<Arc<FrameLock>>,
    /// The lock is held.
    held: bool,
    /// A blocking thread waiting for the lock.
    waiting: Option<JoinHandle<io::Result<()>>>,
    /// The last byte written was a newline: the end of a frame.
    at_end: bool,
    /// The daemon died in the middle of a frame: end that line first.
    newline_due: bool,
}

impl<W> Locked<W> {
    /// Wraps `inner`; with `lock` `None`, writes go straight through.
    pub fn new(inner: W, lock: Option<Arc<FrameLock>>) -> Self {
        Locked {
            inner,
            lock,
            held: false,
            waiting: None,
            at_end: true,
            newline_due: false,
        }
    }

    /// Takes the lock, or says what to wait for.
    fn poll_lock(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(lock) = &self.lock else {
            return Poll::Ready(Ok(()));
        };
        loop {
            if self.held {
                return Poll::Ready(Ok(()));
            }
            if let Some(waiting) = &mut self.waiting {
                let got = ready!(Pin::new(waiting).poll(cx));
                self.waiting = None;
                got.map_err(io::Error::other)??;
                self.held = true;
                self.newline_due = lock.left_mid_frame()?;
                continue;
            }
            if lock.try_lock()? {
                self.held = true;
                self.newline_due = lock.left_mid_frame()?;
                continue;
            }
            let lock = lock.clone();
            self.waiting = Some(tokio::task::spawn_blocking(move || lock.lock_blocking()));
        }
    }

    /// Lets go of the lock if held at the end of a frame.
    fn release_at_end(&mut self) -> io::Result<()> {
        if let (true, true, Some(lock)) = (self.held, self.at_end, &self.lock) {
            self.held = false;
            lock.unlock()?;
        }
        Ok(())
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Locked<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if buf.is_empty() {
            return Pin::new(&mut me.inner).poll_write(cx, buf);
        }
        ready!(me.poll_lock(cx))?;
        if me.newline_due {
            if ready!(Pin::new(&mut me.inner).poll_write(cx, b"\n"))? == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            me.newline_due = false;
            if let Some(lock) = &me.lock {
                lock.mark_writing(false)?;
            }
        }
        let n = ready!(Pin::new(&mut me.inner).poll_write(cx, buf))?;
        if n > 0 {
            me.at_end = buf[n - 1] == b'\n';
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(Pin::new(&mut me.inner).poll_flush(cx))?;
        // Written through: the other writer may go on after a whole frame.
        Poll::Ready(me.release_at_end())
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(Pin::new(&mut me.inner).poll_shutdown(cx))?;
        me.at_end = true;
        Poll::Ready(me.release_at_end())
    }
}

impl<W> Drop for Locked<W> {
    fn drop(&mut self) {
        self.at_end = true;
        let _ = self.release_at_end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    /// A locked writer into an in-memory pipe, the pipe's reading end, and
    /// the other writer's side of the lock.
    fn locked_pair() -> (Locked<DuplexStream>, DuplexStream, FrameLock) {
        let (mine, theirs) = FrameLock::create().unwrap();
        let (tx, rx) = tokio::io::duplex(1024);
        (
            Locked::new(tx, Some(Arc::new(mine))),
            rx,
            FrameLock::from_handed(theirs).unwrap(),
        )
    }

    #[tokio::test]
    async fn the_lock_is_held_from_a_frames_first_byte_to_its_flushed_newline() {
        let (mut w, mut rx, theirs) = locked_pair();
        w.write_all(b"{\"half\":").await.unwrap();
        assert!(!theirs.try_lock().unwrap(), "held in the middle of a frame");
        w.write_all(b"1}\n").await.unwrap();
        assert!(!theirs.try_lock().unwrap(), "held until flushed");
        w.flush().await.unwrap();
        assert!(theirs.try_lock().unwrap(), "free after the flushed newline");
        theirs.unlock().unwrap();
        let mut got = [0u8; 11];
        rx.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"{\"half\":1}\n");
    }

    #[tokio::test]
    async fn a_line_the_daemon_left_cut_is_ended_before_the_next_frame() {
        let (mut w, mut rx, theirs) = locked_pair();
        // The daemon marked a frame, wrote part of it, and died.
        assert!(theirs.try_lock().unwrap());
        theirs.mark_writing(true).unwrap();
        drop(theirs);
        w.write_all(b"{\"id\":1}\n").await.unwrap();
        w.flush().await.unwrap();
        let mut got = [0u8; 10];
        rx.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"\n{\"id\":1}\n");
        // Once: the mark is cleared.
        w.write_all(b"{\"id\":2}\n").await.unwrap();
        w.flush().await.unwrap();
        let mut got = [0u8; 9];
        rx.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"{\"id\":2}\n");
    }

    #[tokio::test]
    async fn a_frame_waits_while_the_other_writer_holds_the_lock() {
        let (mut w, mut rx, theirs) = locked_pair();
        let theirs = Arc::new(theirs);
        assert!(theirs.try_lock().unwrap());
        let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = released.clone();
        let writer = tokio::spawn(async move {
            w.write_all(b"mine\n").await.unwrap();
            w.flush().await.unwrap();
            // Written only once the other writer let go.
            assert!(seen.load(std::sync::atomic::Ordering::SeqCst));
            w
        });
        released.store(true, std::sync::atomic::Ordering::SeqCst);
        theirs.unlock().unwrap();
        let _w = writer.await.unwrap();
        let mut got = [0u8; 5];
        rx.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"mine\n");
    }
}
