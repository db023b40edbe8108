//! A connection's two halves: the client's request lines, cut by
//! [`Framer`], and the replies ([`Conn`]); and what a handler returns
//! ([`Handled`]). The dispatch ([`super`]) and the streaming handlers
//! use it.

use tokio::io::AsyncWriteExt;
use wakeful_protocol::frame::{parse_request, FrameError, Framer, MAX_REQUEST_BYTES};
use wakeful_protocol::{ErrorKind, Reply, Request};

use crate::server::quiet::{QuietRead, QuietWrite};
use crate::state::Failure;

/// What a handler of request `C` returns: the result `C` names, or why
/// there is none. The compiler pairs each handler with its request.
pub(crate) type Handled<C> = Result<<C as wakeful_protocol::Call>::Reply, Failure>;

/// A client's lines, cut by [`Framer`]: no line longer than
/// [`MAX_REQUEST_BYTES`] is ever held. Cancel-safe, like
/// `tokio::io::Lines::next_line`.
pub(crate) struct ClientLines {
    read: QuietRead,
    framer: Framer,
    ended: bool,
}

impl ClientLines {
    pub(crate) fn new(read: QuietRead) -> Self {
        ClientLines {
            read,
            framer: Framer::new(MAX_REQUEST_BYTES),
            ended: false,
        }
    }

    /// The next line, or why it cannot be taken; `None` at the end.
    async fn next_frame(&mut self) -> std::io::Result<Option<Result<String, FrameError>>> {
        use tokio::io::AsyncReadExt;
        loop {
            if let Some(frame) = self.framer.next_line() {
                return Ok(Some(frame));
            }
            if self.ended {
                return Ok(None);
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.read.read(&mut chunk).await?;
            if n == 0 {
                self.ended = true;
                return Ok(self.framer.finish());
            }
            self.framer.push(&chunk[..n]);
        }
    }

    /// The next line; a line that cannot be taken is an error.
    pub(crate) async fn next_line(&mut self) -> std::io::Result<Option<String>> {
        match self.next_frame().await? {
            None => Ok(None),
            Some(Ok(line)) => Ok(Some(line)),
            Some(Err(e)) => Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        }
    }
}

pub(crate) struct Conn {
    pub(crate) lines: ClientLines,
    pub(crate) out: QuietWrite,
    /// The descriptor the client sent with its request, if any.
    pub(crate) passed: crate::server::quiet::Passed,
}

impl Conn {
    pub(crate) async fn reply(&mut self, r: &Reply) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(r).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.out.write_all(&line).await
    }

    pub(crate) async fn ok<T: serde::Serialize>(&mut self, result: &T) -> std::io::Result<()> {
        let reply = Reply::ok(result).map_err(std::io::Error::other)?;
        self.reply(&reply).await
    }

    pub(crate) async fn error(
        &mut self,
        kind: ErrorKind,
        message: impl Into<String>,
    ) -> std::io::Result<()> {
        self.reply(&Reply::Error {
            kind,
            message: message.into(),
        })
        .await
    }

    /// Answers with a handler's result: `ok` with it, or the error.
    pub(crate) async fn answer<T: serde::Serialize>(
        &mut self,
        result: Result<T, Failure>,
    ) -> std::io::Result<()> {
        match result {
            Ok(r) => self.ok(&r).await,
            Err((kind, message)) => self.error(kind, message).await,
        }
    }

    /// The next request; `None` at end of stream.
    pub(crate) async fn request(
        &mut self,
    ) -> std::io::Result<Option<Result<Request, (ErrorKind, String)>>> {
        Ok(match self.lines.next_frame().await? {
            None => None,
            Some(Ok(line)) => Some(parse_request(&line)),
            Some(Err(e)) => Some(Err((ErrorKind::Invalid, e.to_string()))),
        })
    }
}
