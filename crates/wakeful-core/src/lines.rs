//! Splitting a byte stream into lines (docs/CONTRACT.md §4 "Lines").
//!
//! - Lines end at `\n`; a final line without a newline is still a line.
//! - A `\r\n` ending loses its `\r` in the event text; the output file keeps
//!   every byte.
//! - Invalid UTF-8 is replaced with U+FFFD in the event text only.
//! - A line longer than [`MAX_EVENT_LINE_BYTES`] is cut in its event text with
//!   `…[truncated N bytes]`; the output file still gets all of it.
//!
//! Memory stays bounded: a line still being received is held in memory up to
//! [`MAX_BUFFERED_LINE_BYTES`]; past that its bytes are handed out as
//! [`Piece::Partial`] (for the output file) and only its first
//! [`MAX_EVENT_LINE_BYTES`] are kept for the event.

/// Longest line text an event carries before it is cut.
pub const MAX_EVENT_LINE_BYTES: usize = 64 * 1024;
/// Longest unfinished line held in memory before its bytes are passed on.
pub const MAX_BUFFERED_LINE_BYTES: usize = 4 * 1024 * 1024;

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Standard output (or the only stream of a non-command source).
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    /// The prefix its lines get in the output file.
    pub fn file_prefix(self) -> &'static [u8] {
        match self {
            Stream::Stdout => b"",
            Stream::Stderr => b"[stderr] ",
        }
    }
}

/// One complete line, as the state machines see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The stream it came from.
    pub stream: Stream,
    /// Event text: lossless UTF-8 or U+FFFD-replaced, `\r` stripped, cut at 64 KiB.
    pub text: String,
    /// Its line number in the output file (1-based).
    pub file_line: u64,
}

/// What [`LineSplitter`] hands out.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Bytes of a very long line that is not finished yet; they belong in the
    /// output file, and the line continues.
    Partial(&'a [u8]),
    /// A finished line. `rest` is its bytes not already handed out as
    /// [`Piece::Partial`] (with any `\r`, without the `\n`); `text` is the
    /// event text.
    Line {
        /// Remaining raw bytes of the line.
        rest: &'a [u8],
        /// Event text of the whole line.
        text: String,
        /// Whether the source ended it with `\n` (false for a final line
        /// without one: the output file gets no newline the source did not
        /// write).
        terminated: bool,
    },
}

/// Splits one stream into lines; see the module docs.
#[derive(Debug, Default)]
pub struct LineSplitter {
    buf: Vec<u8>,
    /// Bytes of the current line already handed out as `Partial`.
    spilled: u64,
    /// The first bytes of the current line when part of it was spilled.
    head: Vec<u8>,
}

impl LineSplitter {
    /// A splitter with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether part of an unfinished line is held.
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty() || self.spilled > 0
    }

    /// Feeds a chunk; calls `out` for every piece it completes, in order.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut impl FnMut(Piece<'_>)) {
        while let Some(nl) = memchr::memchr(b'\n', chunk) {
            let (line, rest) = (&chunk[..nl], &chunk[nl + 1..]);
            if self.has_partial() {
                self.buf.extend_from_slice(line);
                let text = self.text_of_buffered();
                out(Piece::Line {
                    rest: &self.buf,
                    text,
                    terminated: true,
                });
                self.reset();
            } else {
                let text_bytes = strip_cr(line);
                out(Piece::Line {
                    rest: line,
                    text: event_text(text_bytes, text_bytes.len() as u64),
                    terminated: true,
                });
            }
            chunk = rest;
        }
        if !chunk.is_empty() {
            self.buf.extend_from_slice(chunk);
            if self.buf.len() > MAX_BUFFERED_LINE_BYTES {
                self.spill(out);
            }
        }
    }

    /// Ends the stream: a final line without a newline is still a line.
    pub fn finish(&mut self, out: &mut impl FnMut(Piece<'_>)) {
        if self.has_partial() {
            let text = self.text_of_buffered();
            out(Piece::Line {
                rest: &self.buf,
                text,
                terminated: false,
            });
            self.reset();
        }
    }

    fn spill(&mut self, out: &mut impl FnMut(Piece<'_>)) {
        if self.spilled == 0 {
            let keep = self.buf.len().min(MAX_EVENT_LINE_BYTES + 1);
            self.head = self.buf[..keep].to_vec();
        }
        // Keep a trailing '\r' back: it may be the end of a "\r\n".
        let hold = usize::from(self.buf.last() == Some(&b'\r'));
        let n = self.buf.len() - hold;
        out(Piece::Partial(&self.buf[..n]));
        self.spilled += n as u64;
        self.buf.drain(..n);
    }

    fn text_of_buffered(&self) -> String {
        let tail = strip_cr(&self.buf);
        let total = self.spilled + tail.len() as u64;
        if self.spilled == 0 {
            event_text(tail, total)
        } else {
            event_text(&self.head, total)
        }
    }

    fn reset(&mut self) {
        self.buf.clear();
        if self.buf.capacity() > 2 * MAX_EVENT_LINE_BYTES {
            self.buf.shrink_to(MAX_EVENT_LINE_BYTES);
        }
        self.spilled = 0;
        self.head = Vec::new();
    }
}

/// The event text of one complete line (without its `\n`), as
/// [`LineSplitter`] would give it.
pub fn text_of(line: &[u8]) -> String {
    let bytes = strip_cr(line);
    event_text(bytes, bytes.len() as u64)
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Event text of a line whose first bytes are `prefix` and whose full length,
/// without a trailing `\r`, is `total`.
fn event_text(prefix: &[u8], total: u64) -> String {
    let max = MAX_EVENT_LINE_BYTES as u64;
    if total <= max && prefix.len() as u64 >= total {
        return String::from_utf8_lossy(&prefix[..total as usize]).into_owned();
    }
    // Cut at a char boundary at or before the limit.
    let mut cut = MAX_EVENT_LINE_BYTES.min(prefix.len());
    while cut > 0
        && cut < prefix.len()
        && cut + 3 > MAX_EVENT_LINE_BYTES
        && (prefix[cut] & 0xC0) == 0x80
    {
        cut -= 1;
    }
    let mut text = String::from_utf8_lossy(&prefix[..cut]).into_owned();
    text.push_str(&format!("…[truncated {} bytes]", total - cut as u64));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds chunks, returns (file bytes as the IO edge would write them, texts).
    fn run(chunks: &[&[u8]]) -> (Vec<u8>, Vec<String>) {
        let mut s = LineSplitter::new();
        let mut file = Vec::new();
        let mut texts = Vec::new();
        let mut out = |p: Piece<'_>| match p {
            Piece::Partial(b) => file.extend_from_slice(b),
            Piece::Line {
                rest,
                text,
                terminated,
            } => {
                file.extend_from_slice(rest);
                if terminated {
                    file.push(b'\n');
                }
                texts.push(text);
            }
        };
        for c in chunks {
            s.push(c, &mut out);
        }
        s.finish(&mut out);
        (file, texts)
    }

    #[test]
    fn splits_on_newline_across_chunks() {
        let (file, texts) = run(&[b"a\nb", b"c\n", b"\nd"]);
        assert_eq!(texts, ["a", "bc", "", "d"]);
        assert_eq!(file, b"a\nbc\n\nd");
    }

    #[test]
    fn final_line_without_newline_is_a_line() {
        let (file, texts) = run(&[b"abc"]);
        assert_eq!(texts, ["abc"]);
        assert_eq!(file, b"abc", "no newline the source did not write");
        let (_, texts) = run(&[b""]);
        assert!(texts.is_empty());
    }

    #[test]
    fn crlf_loses_cr_in_text_but_not_in_file() {
        let (file, texts) = run(&[b"x\r", b"\ny\r\n"]);
        assert_eq!(texts, ["x", "y"]);
        assert_eq!(file, b"x\r\ny\r\n");
        // A lone \r inside a line stays.
        let (_, texts) = run(&[b"a\rb\n"]);
        assert_eq!(texts, ["a\rb"]);
    }

    #[test]
    fn invalid_utf8_is_replaced_in_text_and_kept_in_file() {
        let (file, texts) = run(&[b"ok \xff\xfe end\n"]);
        assert_eq!(texts, ["ok \u{fffd}\u{fffd} end"]);
        assert_eq!(file, b"ok \xff\xfe end\n");
    }

    #[test]
    fn long_line_is_cut_in_text_and_whole_in_file() {
        let line = vec![b'x'; 1024 * 1024];
        let mut input = line.clone();
        input.push(b'\n');
        let chunks: Vec<&[u8]> = input.chunks(65536).collect();
        let (file, texts) = run(&chunks);
        assert_eq!(file.len(), line.len() + 1);
        let expected = format!(
            "{}…[truncated {} bytes]",
            "x".repeat(MAX_EVENT_LINE_BYTES),
            1024 * 1024 - MAX_EVENT_LINE_BYTES
        );
        assert_eq!(texts, [expected]);
    }

    #[test]
    fn huge_line_spills_and_memory_stays_bounded() {
        let mut s = LineSplitter::new();
        let chunk = vec![b'y'; 1024 * 1024];
        let mut file_len = 0u64;
        let mut texts = Vec::new();
        for _ in 0..10 {
            s.push(&chunk, &mut |p| match p {
                Piece::Partial(b) => file_len += b.len() as u64,
                Piece::Line { rest, text, .. } => {
                    file_len += rest.len() as u64;
                    texts.push(text)
                }
            });
            assert!(s.buf.len() <= MAX_BUFFERED_LINE_BYTES + chunk.len());
        }
        s.push(b"\r\n", &mut |p| match p {
            Piece::Partial(b) => file_len += b.len() as u64,
            Piece::Line { rest, text, .. } => {
                file_len += rest.len() as u64;
                texts.push(text)
            }
        });
        assert_eq!(file_len, 10 * 1024 * 1024 + 1);
        assert_eq!(texts.len(), 1);
        assert!(texts[0].ends_with(&format!(
            "…[truncated {} bytes]",
            10 * 1024 * 1024 - MAX_EVENT_LINE_BYTES
        )));
    }

    #[test]
    fn cut_respects_char_boundaries() {
        let mut line = "é".repeat(MAX_EVENT_LINE_BYTES); // 2 bytes each
        line.push('\n');
        let (_, texts) = run(&[line.as_bytes()]);
        assert!(!texts[0].contains('\u{fffd}'));
        assert!(texts[0].ends_with(&format!("…[truncated {} bytes]", MAX_EVENT_LINE_BYTES)));
    }
}
