//! The top-level `capabilities.events` some clients look for.
//!
//! The Vercel AI SDK (`@ai-sdk/mcp` 2.0.99) sends `events/list`,
//! `events/subscribe` and `events/unsubscribe` only when the server's
//! `initialize` or `server/discover` result has `capabilities.events` (an
//! object); it does not read `capabilities.extensions`. rmcp 3.11's typed
//! `ServerCapabilities` has no such field and keeps no unknown keys, so
//! [`Declared`] wraps the server's stdout: a frame whose
//! `result.capabilities.extensions` declares the events extension gets
//! `result.capabilities.events: {}` beside it ([`patch`]). Every other
//! frame passes byte for byte.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use serde_json::Value;
use tokio::io::AsyncWrite;

use super::EXTENSION;

/// `frame` (one JSON-RPC line, newline included) with
/// `result.capabilities.events` added when its capabilities declare the
/// events extension; otherwise `frame` as it is.
pub fn patch(frame: Vec<u8>) -> Vec<u8> {
    let key = format!("\"{EXTENSION}\"");
    if !frame.windows(key.len()).any(|w| w == key.as_bytes()) {
        return frame;
    }
    let Ok(mut v) = serde_json::from_slice::<Value>(&frame) else {
        return frame;
    };
    let Some(caps) = v
        .pointer_mut("/result/capabilities")
        .and_then(Value::as_object_mut)
    else {
        return frame;
    };
    let declared = caps
        .get("extensions")
        .and_then(Value::as_object)
        .is_some_and(|e| e.contains_key(EXTENSION));
    if !declared || caps.contains_key("events") {
        return frame;
    }
    caps.insert("events".into(), Value::Object(Default::default()));
    match serde_json::to_vec(&v) {
        Ok(mut out) => {
            out.push(b'\n');
            out
        }
        Err(_) => frame,
    }
}

/// A writer of JSON-RPC lines that [`patch`]es each line before it goes
/// to `inner`. A line is held until its newline; nothing else is held.
pub struct Declared<W> {
    inner: W,
    frame: Vec<u8>,
    out: Vec<u8>,
    sent: usize,
}

impl<W> Declared<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Declared {
            inner,
            frame: Vec::new(),
            out: Vec::new(),
            sent: 0,
        }
    }
}

impl<W: AsyncWrite + Unpin> Declared<W> {
    /// Writes what waits in `out` to `inner`.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.out[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.out.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Declared<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        ready!(me.poll_drain(cx))?;
        match buf.iter().position(|b| *b == b'\n') {
            None => {
                me.frame.extend_from_slice(buf);
                Poll::Ready(Ok(buf.len()))
            }
            Some(i) => {
                me.frame.extend_from_slice(&buf[..=i]);
                me.out = patch(std::mem::take(&mut me.frame));
                me.sent = 0;
                // Taken: written by this poll if it can, else by the next
                // write or flush.
                if let Poll::Ready(Err(e)) = me.poll_drain(cx) {
                    return Poll::Ready(Err(e));
                }
                Poll::Ready(Ok(i + 1))
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_drain(cx))?;
        Pin::new(&mut me.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_drain(cx))?;
        if !me.frame.is_empty() {
            me.out = std::mem::take(&mut me.frame);
            me.sent = 0;
            ready!(me.poll_drain(cx))?;
        }
        Pin::new(&mut me.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn line(v: Value) -> Vec<u8> {
        let mut l = serde_json::to_vec(&v).unwrap();
        l.push(b'\n');
        l
    }

    #[test]
    fn an_initialize_result_gets_capabilities_events() {
        let init = line(json!({"jsonrpc": "2.0", "id": 1, "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}, "extensions": {EXTENSION: {}}},
            "serverInfo": {"name": "wakeful", "version": "0"}}}));
        let out: Value = serde_json::from_slice(&patch(init)).unwrap();
        assert_eq!(out["result"]["capabilities"]["events"], json!({}));
        assert_eq!(out["result"]["capabilities"]["tools"], json!({}));
    }

    #[test]
    fn other_frames_pass_byte_for_byte() {
        for frame in [
            line(
                json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": EXTENSION}]}}),
            ),
            line(json!({"jsonrpc": "2.0", "id": 3, "result": {"capabilities": {"tools": {}}}})),
            b"{not json \"io.modelcontextprotocol/events\"\n".to_vec(),
        ] {
            assert_eq!(patch(frame.clone()), frame);
        }
    }

    #[tokio::test]
    async fn the_writer_patches_lines_split_across_writes() {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let mut w = Declared::new(a);
        let init =
            line(json!({"id": 1, "result": {"capabilities": {"extensions": {EXTENSION: {}}}}}));
        let other = line(json!({"id": 2, "result": {}}));
        let (x, y) = init.split_at(10);
        w.write_all(x).await.unwrap();
        w.write_all(y).await.unwrap();
        w.write_all(&other).await.unwrap();
        w.shutdown().await.unwrap();
        drop(w);
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        let text = String::from_utf8(got).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].contains("\"events\":{}"), "{text}");
        assert_eq!(format!("{}\n", lines[1]).as_bytes(), &other[..]);
    }
}
