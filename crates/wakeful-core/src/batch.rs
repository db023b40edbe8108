//! Leading-edge batching of lines into `lines` events (docs/CONTRACT.md §4 "Latency",
//! "Size").
//!
//! A line that arrives after a quiet period goes out at once, together with
//! whatever else was readable at that moment ("leading edge"), and opens a
//! window of `batch_ms`. Lines arriving inside the window are held and go out
//! together when it closes, which opens the next window; a window that closes
//! with nothing held ends the busy period. A single line never waits for a
//! timer.
//!
//! One batch holds at most [`MAX_EVENT_LINES`] lines and [`MAX_EVENT_BYTES`]
//! of text (a single longer line forms a batch of its own). When more is ready
//! it is cut into further batches immediately, so memory stays bounded.

use std::time::{Duration, Instant};

use crate::lines::Line;

/// Most lines in one `lines` event.
pub const MAX_EVENT_LINES: usize = 50;
/// Most text bytes in one `lines` event (unless one line alone is longer).
pub const MAX_EVENT_BYTES: usize = 32 * 1024;

/// The batching state machine. Feed it with [`Batcher::push`] for every line
/// and [`Batcher::drained`] whenever the source has nothing more readable
/// right now; call [`Batcher::on_deadline`] at [`Batcher::next_deadline`].
#[derive(Debug)]
pub struct Batcher {
    window: Duration,
    pending: Vec<Line>,
    pending_bytes: usize,
    window_end: Option<Instant>,
}

impl Batcher {
    /// A batcher with the given coalescing window (`batch_ms`).
    pub fn new(window: Duration) -> Self {
        Batcher {
            window,
            pending: Vec::new(),
            pending_bytes: 0,
            window_end: None,
        }
    }

    /// Adds one line. A batch that would grow past its limits is cut off and
    /// pushed to `out` first.
    pub fn push(&mut self, line: Line, out: &mut Vec<Vec<Line>>) {
        let len = line.text.len();
        if !self.pending.is_empty()
            && (self.pending.len() >= MAX_EVENT_LINES || self.pending_bytes + len > MAX_EVENT_BYTES)
        {
            self.cut(out);
        }
        self.pending_bytes += len;
        self.pending.push(line);
    }

    /// The source has nothing more readable now. Outside a window this is the
    /// leading edge: everything held goes out and a window opens.
    pub fn drained(&mut self, now: Instant, out: &mut Vec<Vec<Line>>) {
        if self.pending.is_empty() {
            return;
        }
        let in_window = self.window_end.is_some_and(|end| now < end);
        if !in_window {
            self.cut(out);
            self.window_end = Some(now + self.window);
        }
    }

    /// When [`Batcher::on_deadline`] must be called, if at all.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.pending.is_empty() {
            None
        } else {
            self.window_end
        }
    }

    /// Closes the window if `now` is past it: what it held goes out and the
    /// next window opens; an empty window ends the busy period.
    pub fn on_deadline(&mut self, now: Instant, out: &mut Vec<Vec<Line>>) {
        match self.window_end {
            Some(end) if now >= end => {
                if self.pending.is_empty() {
                    self.window_end = None;
                } else {
                    self.cut(out);
                    self.window_end = Some(now + self.window);
                }
            }
            _ => {}
        }
    }

    /// Everything held, for the end of the monitor.
    pub fn flush(&mut self, out: &mut Vec<Vec<Line>>) {
        if !self.pending.is_empty() {
            self.cut(out);
        }
        self.window_end = None;
    }

    /// Everything held, without touching the window (for a bulk count that
    /// must come after these lines).
    pub fn take_pending(&mut self, out: &mut Vec<Vec<Line>>) {
        if !self.pending.is_empty() {
            self.cut(out);
        }
    }

    fn cut(&mut self, out: &mut Vec<Vec<Line>>) {
        self.pending_bytes = 0;
        out.push(std::mem::take(&mut self.pending));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::Stream;

    fn line(n: u64, text: &str) -> Line {
        Line {
            stream: Stream::Stdout,
            text: text.to_string(),
            file_line: n,
        }
    }

    fn texts(batches: &[Vec<Line>]) -> Vec<Vec<&str>> {
        batches
            .iter()
            .map(|b| b.iter().map(|l| l.text.as_str()).collect())
            .collect()
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn single_line_goes_out_at_once() {
        let t0 = Instant::now();
        let mut b = Batcher::new(200 * MS);
        let mut out = vec![];
        b.push(line(1, "a"), &mut out);
        assert!(out.is_empty());
        b.drained(t0, &mut out);
        assert_eq!(texts(&out), [["a"]]);
        assert_eq!(b.next_deadline(), None, "nothing held, no timer");
    }

    #[test]
    fn lines_within_window_are_coalesced_into_next_event() {
        let t0 = Instant::now();
        let mut b = Batcher::new(200 * MS);
        let mut out = vec![];
        b.push(line(1, "a"), &mut out);
        b.push(line(2, "b"), &mut out);
        b.drained(t0, &mut out);
        assert_eq!(texts(&out), [["a", "b"]]);
        out.clear();
        b.push(line(3, "c"), &mut out);
        b.drained(t0 + 50 * MS, &mut out);
        b.push(line(4, "d"), &mut out);
        b.drained(t0 + 150 * MS, &mut out);
        assert!(out.is_empty());
        assert_eq!(b.next_deadline(), Some(t0 + 200 * MS));
        b.on_deadline(t0 + 199 * MS, &mut out);
        assert!(out.is_empty(), "not before the window closes");
        b.on_deadline(t0 + 200 * MS, &mut out);
        assert_eq!(texts(&out), [["c", "d"]]);
        // The next window is open; if it closes empty, the busy period ends.
        out.clear();
        b.on_deadline(t0 + 400 * MS, &mut out);
        assert!(out.is_empty());
        // After the quiet period a new line is a leading edge again.
        b.push(line(5, "e"), &mut out);
        b.drained(t0 + 401 * MS, &mut out);
        assert_eq!(texts(&out), [["e"]]);
    }

    #[test]
    fn expired_window_without_timer_is_a_leading_edge() {
        let t0 = Instant::now();
        let mut b = Batcher::new(200 * MS);
        let mut out = vec![];
        b.push(line(1, "a"), &mut out);
        b.drained(t0, &mut out);
        out.clear();
        b.push(line(2, "b"), &mut out);
        b.drained(t0 + 250 * MS, &mut out);
        assert_eq!(texts(&out), [["b"]]);
    }

    #[test]
    fn zero_window_never_holds() {
        let t0 = Instant::now();
        let mut b = Batcher::new(Duration::ZERO);
        let mut out = vec![];
        for i in 0..3 {
            b.push(line(i, "x"), &mut out);
            b.drained(t0, &mut out);
        }
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn batches_are_cut_at_50_lines_and_32_kib() {
        let t0 = Instant::now();
        let mut b = Batcher::new(200 * MS);
        let mut out = vec![];
        for i in 0..120 {
            b.push(line(i, "x"), &mut out);
        }
        b.drained(t0, &mut out);
        assert_eq!(out.iter().map(Vec::len).collect::<Vec<_>>(), [50, 50, 20]);
        out.clear();
        let big = "y".repeat(10_000);
        for i in 0..7 {
            b.push(line(i, &big), &mut out);
        }
        b.flush(&mut out);
        assert_eq!(out.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 1]);
        // One line over the byte limit is a batch of its own.
        out.clear();
        b.push(line(1, "a"), &mut out);
        b.push(line(2, &"z".repeat(40_000)), &mut out);
        b.flush(&mut out);
        assert_eq!(out.iter().map(Vec::len).collect::<Vec<_>>(), [1, 1]);
    }
}
