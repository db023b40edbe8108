//! The decisions of a `wait` (docs/CONTRACT.md "wake_on"): which events a
//! waiter keeps, when it has a batch to hand out, where that batch ends,
//! and whether the wait ends with it. Pure: the daemon's `wait` handler
//! reads events from its follower into a [`Pending`], asks it, and does
//! the IO (writing the batch, reading the acknowledgement).
//!
//! A batch is handed out only when it holds an event that wakes (or the
//! wait takes `all`); it ends at the last event that wakes, the quiet ones
//! before it come along, those after it wait for the next one. At most
//! `page` events are kept: past that, quiet events are only counted as
//! skipped, and once one that wakes turns up the wait reads again from the
//! consumer's cursor ([`Pending::needs_reread`]), so a long quiet run costs
//! no memory and none is lost.
//!
//! ```
//! use wakeful_core::wait::{Pending, WaitItem};
//!
//! #[derive(Clone)]
//! struct E(u64, bool);
//! impl WaitItem for E {
//!     fn seq(&self) -> u64 { self.0 }
//!     fn wakes(&self) -> bool { self.1 }
//! }
//!
//! let mut p = Pending::new(1000);
//! p.take(E(1, false));
//! assert!(!p.ready(false), "a quiet event waits for one that wakes");
//! p.take(E(2, true));
//! p.take(E(3, false));
//! let batch = p.batch(false).unwrap();
//! assert_eq!((batch.len, batch.last_seq, batch.wakes), (2, 2, true));
//! p.acked(batch.last_seq);
//! assert!(!p.ready(false), "event 3 waits for the next that wakes");
//! ```

use std::collections::VecDeque;

/// What a wait needs to know of an event.
pub trait WaitItem {
    /// Its seq in the log.
    fn seq(&self) -> u64;
    /// Whether it wakes (`wake_on`).
    fn wakes(&self) -> bool;
}

/// The events a wait read and has not handed out yet.
#[derive(Debug)]
pub struct Pending<T> {
    events: VecDeque<T>,
    /// The last event that wakes, read but not yet acknowledged.
    wake_at: Option<u64>,
    /// Events were read past the page and not kept.
    skipped: bool,
    page: usize,
}

/// Where the next batch ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// How many of the kept events it takes, from the first.
    pub len: usize,
    /// The seq of its last event (what the client acknowledges).
    pub last_seq: u64,
    /// Whether it holds an event that wakes.
    pub wakes: bool,
}

impl<T: WaitItem> Pending<T> {
    /// Nothing read yet; at most `page` events kept.
    pub fn new(page: usize) -> Self {
        Pending {
            events: VecDeque::new(),
            wake_at: None,
            skipped: false,
            page,
        }
    }

    /// Takes one event read from the follower.
    pub fn take(&mut self, e: T) {
        if e.wakes() {
            // The largest: a read again from the cursor meets the events
            // that wake before one already seen.
            self.wake_at = self.wake_at.max(Some(e.seq()));
        }
        if self.events.len() < self.page && !self.skipped {
            self.events.push_back(e);
        } else {
            self.skipped = true;
        }
    }

    /// Forgets what was acknowledged (up to `seq`), by this waiter or
    /// another of the consumer.
    pub fn acked(&mut self, seq: u64) {
        while self.events.front().is_some_and(|e| e.seq() <= seq) {
            self.events.pop_front();
        }
        if self.wake_at.is_some_and(|w| w <= seq) {
            self.wake_at = None;
        }
    }

    /// Whether there is something to hand out now (`all`: without waiting
    /// for an event that wakes).
    pub fn ready(&self, all: bool) -> bool {
        !self.events.is_empty() && (all || self.wake_at.is_some())
    }

    /// Whether reading should pause: events were skipped and one that wakes
    /// has come, so the wait must read again from the cursor first.
    pub fn stop_reading(&self) -> bool {
        self.skipped && self.wake_at.is_some()
    }

    /// Whether the wait must read again from the consumer's cursor: events
    /// were skipped, and either one that wakes came after them or nothing
    /// kept is left to hand out.
    pub fn needs_reread(&self) -> bool {
        self.skipped && (self.wake_at.is_some() || self.events.is_empty())
    }

    /// Starts over for a read from the cursor, remembering an event that
    /// wakes seen before (it will be read again).
    pub fn restart(&mut self) {
        let wake_at = self.wake_at;
        *self = Pending::new(self.page);
        self.wake_at = wake_at;
    }

    /// Whether the page is full (a read from the cursor stops there).
    pub fn full(&self) -> bool {
        self.events.len() >= self.page
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The next batch: up to the last event that wakes (all kept events
    /// with `all`); `None` when nothing is ready.
    pub fn batch(&self, all: bool) -> Option<Batch> {
        if !self.ready(all) {
            return None;
        }
        let len = match (all, self.wake_at) {
            (false, Some(w)) => self.events.iter().take_while(|e| e.seq() <= w).count(),
            _ => self.events.len(),
        };
        let last_seq = self.events.get(len.checked_sub(1)?)?.seq();
        let wakes = self.events.iter().take(len).any(|e| e.wakes());
        Some(Batch {
            len,
            last_seq,
            wakes,
        })
    }

    /// The kept events, oldest first (a batch is the first [`Batch::len`]).
    pub fn events(&self) -> impl Iterator<Item = &T> {
        self.events.iter()
    }
}

/// Whether a wait ends after handing out a batch: without `follow`, one
/// batch ends it, unless the event that wakes is still ahead (more than a
/// page of quiet events before it).
pub fn ends_after(batch: &Batch, follow: bool, all: bool) -> bool {
    !follow && (all || batch.wakes)
}

/// Whether an acknowledgement of `seq` is one the wait can take: within
/// the batch it handed out (`last_seq`) and past the cursor (`acked`).
pub fn ack_fits(seq: u64, last_seq: u64, acked: u64) -> bool {
    seq <= last_seq && seq > acked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct E(u64, bool);
    impl WaitItem for E {
        fn seq(&self) -> u64 {
            self.0
        }
        fn wakes(&self) -> bool {
            self.1
        }
    }

    #[test]
    fn a_batch_ends_at_the_last_event_that_wakes() {
        let mut p = Pending::new(10);
        for e in [
            E(1, false),
            E(2, true),
            E(3, false),
            E(4, true),
            E(5, false),
        ] {
            p.take(e);
        }
        let b = p.batch(false).unwrap();
        assert_eq!((b.len, b.last_seq, b.wakes), (4, 4, true));
        assert!(ends_after(&b, false, false));
        assert!(!ends_after(&b, true, false), "a follow goes on");
        p.acked(4);
        assert_eq!(p.batch(false), None, "5 is quiet");
        let all = p.batch(true).unwrap();
        assert_eq!((all.len, all.last_seq, all.wakes), (1, 5, false));
        assert!(ends_after(&all, false, true));
    }

    #[test]
    fn past_a_page_quiet_events_are_skipped_and_read_again() {
        let mut p = Pending::new(2);
        p.take(E(1, false));
        p.take(E(2, false));
        p.take(E(3, false));
        assert!(!p.stop_reading());
        assert!(!p.needs_reread(), "two kept, nothing wakes yet");
        p.take(E(4, true));
        assert!(p.stop_reading() && p.needs_reread());
        p.restart();
        assert!(p.is_empty());
        // Read again from the cursor (0): 1 and 2 fill the page.
        p.take(E(1, false));
        p.take(E(2, false));
        assert!(p.full());
        let b = p.batch(false).unwrap();
        assert_eq!(
            (b.len, b.last_seq, b.wakes),
            (2, 2, false),
            "the wake seen before is remembered: the quiet page goes out"
        );
        assert!(
            !ends_after(&b, false, false),
            "the event that wakes is ahead"
        );
    }

    #[test]
    fn another_waiters_acknowledgement_is_forgotten() {
        let mut p = Pending::new(10);
        p.take(E(7, true));
        p.take(E(8, true));
        p.acked(7);
        assert_eq!(p.events().map(|e| e.0).collect::<Vec<_>>(), [8]);
        p.acked(8);
        assert_eq!(p.batch(true), None);
    }

    #[test]
    fn only_an_ack_within_the_batch_fits() {
        assert!(ack_fits(5, 5, 4));
        assert!(ack_fits(4, 5, 3));
        assert!(!ack_fits(6, 5, 4), "beyond what was handed out");
        assert!(!ack_fits(4, 5, 4), "already acknowledged");
    }
}
