//! Cutting the socket's byte stream into lines, and reading a request line:
//! what the daemon does with everything a client sends.
//!
//! [`Framer`] is a pure state machine: bytes go in as they arrive, in any
//! pieces, and complete lines come out. A line longer than its limit is
//! never held whole: once its first `max` bytes are in without a newline it
//! is reported as [`FrameError::TooLong`] and the rest of it, up to the next
//! newline, is passed over; the lines after it are read as usual. So a
//! client can never make the daemon hold more than `max` bytes of one
//! line. [`parse_request`] turns a line into a [`Request`] or says what is
//! wrong with it.

use crate::{ErrorKind, Request, PROTOCOL_VERSION};

/// The longest request line the daemon reads: far more than any request
/// needs (an `import` request carries at most about 8 MiB of events; a
/// `start` the client's environment).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

/// Why a line could not be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The line was longer than the limit; it was passed over.
    #[error("invalid request: a request line longer than {max} bytes was passed over")]
    TooLong {
        /// The limit.
        max: usize,
    },
    /// The line was not UTF-8.
    #[error("invalid request: the request line is not UTF-8 text")]
    NotUtf8,
}

/// Lines out of a byte stream; see the module docs.
#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    /// Where the search for a newline goes on (all before it has none).
    scanned: usize,
    max: usize,
    /// Passing over the rest of a line that was too long.
    skipping: bool,
}

impl Framer {
    /// Lines of at most `max` bytes (newline not counted).
    pub fn new(max: usize) -> Self {
        Framer {
            buf: Vec::new(),
            scanned: 0,
            max,
            skipping: false,
        }
    }

    /// Takes the next bytes of the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held (a line not complete yet).
    pub fn held(&self) -> usize {
        self.buf.len()
    }

    /// The next complete line (without its `\n`, and without a `\r` before
    /// it), an error for a line that cannot be taken, or `None` until more
    /// bytes come.
    pub fn next_line(&mut self) -> Option<Result<String, FrameError>> {
        loop {
            match self.buf[self.scanned..].iter().position(|b| *b == b'\n') {
                Some(at) => {
                    let end = self.scanned + at;
                    let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                    self.scanned = 0;
                    line.pop();
                    if std::mem::take(&mut self.skipping) {
                        continue;
                    }
                    if line.len() > self.max {
                        return Some(Err(FrameError::TooLong { max: self.max }));
                    }
                    return Some(Self::text(line));
                }
                None if self.skipping => {
                    self.buf.clear();
                    self.scanned = 0;
                    return None;
                }
                None if self.buf.len() > self.max => {
                    self.buf.clear();
                    self.scanned = 0;
                    self.skipping = true;
                    return Some(Err(FrameError::TooLong { max: self.max }));
                }
                None => {
                    self.scanned = self.buf.len();
                    return None;
                }
            }
        }
    }

    /// At the end of the stream: what is left, as a last line (a final line
    /// without newline counts, as for any text).
    pub fn finish(&mut self) -> Option<Result<String, FrameError>> {
        let rest = std::mem::take(&mut self.buf);
        self.scanned = 0;
        if std::mem::take(&mut self.skipping) || rest.is_empty() {
            return None;
        }
        if rest.len() > self.max {
            return Some(Err(FrameError::TooLong { max: self.max }));
        }
        Some(Self::text(rest))
    }

    fn text(mut line: Vec<u8>) -> Result<String, FrameError> {
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        String::from_utf8(line).map_err(|_| FrameError::NotUtf8)
    }
}

/// One request line: `version` when it speaks another protocol version,
/// `invalid` for anything else wrong with it (not JSON, no `v`, unknown
/// `op`, unknown or wrongly typed field).
pub fn parse_request(line: &str) -> Result<Request, (ErrorKind, String)> {
    let invalid = |m: String| (ErrorKind::Invalid, m);
    let mut v: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| invalid(format!("invalid request: not a JSON object: {e}")))?;
    let Some(obj) = v.as_object_mut() else {
        return Err(invalid("invalid request: not a JSON object".into()));
    };
    match obj.remove("v") {
        None => {
            return Err(invalid(format!(
                "invalid request: no protocol version `v` (this daemon speaks {PROTOCOL_VERSION})"
            )))
        }
        Some(version) if version.as_u64() == Some(u64::from(PROTOCOL_VERSION)) => {}
        Some(version) => {
            return Err((
                ErrorKind::Version,
                format!(
                    "protocol version {version} is not supported (this daemon speaks {PROTOCOL_VERSION}); move the daemon to the client's version with `wakeful daemon upgrade` (its monitors go on running), or stop it (`wakeful daemon stop`) so that the new version starts"
                ),
            ))
        }
    }
    serde_json::from_value::<Request>(v).map_err(|e| invalid(format!("invalid request: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(f: &mut Framer) -> Vec<Result<String, FrameError>> {
        std::iter::from_fn(|| f.next_line()).collect()
    }

    #[test]
    fn lines_come_whole_in_any_pieces() {
        let mut f = Framer::new(10);
        f.push(b"ab");
        assert_eq!(f.next_line(), None);
        f.push(b"c\r\nde\nf");
        assert_eq!(all(&mut f), [Ok("abc".into()), Ok("de".into())]);
        assert_eq!(f.held(), 1);
        assert_eq!(f.finish(), Some(Ok("f".into())));
        assert_eq!(f.finish(), None);
    }

    #[test]
    fn a_line_too_long_is_passed_over_and_never_held() {
        let mut f = Framer::new(4);
        f.push(b"12345");
        assert_eq!(f.next_line(), Some(Err(FrameError::TooLong { max: 4 })));
        f.push(b"6789");
        assert_eq!(f.next_line(), None);
        assert_eq!(f.held(), 0);
        f.push(b"0\nok\n");
        assert_eq!(all(&mut f), [Ok("ok".into())]);
        // Whole in one piece, too.
        f.push(b"123456\nxy\n\xff\n");
        assert_eq!(
            all(&mut f),
            [
                Err(FrameError::TooLong { max: 4 }),
                Ok("xy".into()),
                Err(FrameError::NotUtf8)
            ]
        );
    }

    #[test]
    fn requests_are_read_or_refused_with_the_reason() {
        assert!(matches!(
            parse_request(r#"{"v":1,"op":"status"}"#),
            Ok(Request::Status(_))
        ));
        for (line, kind) in [
            ("nope", ErrorKind::Invalid),
            ("[1]", ErrorKind::Invalid),
            (r#"{"op":"status"}"#, ErrorKind::Invalid),
            (r#"{"v":2,"op":"status"}"#, ErrorKind::Version),
            (r#"{"v":1,"op":"fly"}"#, ErrorKind::Invalid),
        ] {
            assert_eq!(parse_request(line).unwrap_err().0, kind, "{line}");
        }
    }
}
