//! Where events get their place in the log.
//!
//! Monitors send [`JournalEntry`]s into one bounded channel; a single pump
//! thread drains it in batches and hands each batch to a [`Journal`], which
//! gives every event its `seq` (and, for the daemon's SQLite journal, makes it
//! durable in one transaction per batch). The numbered events are then
//! broadcast to subscribers. A full channel makes monitors wait (and so their
//! sources): nothing is dropped on the way to the journal.

use std::path::PathBuf;

use wakeful_core::{Event, MonitorInfo, PendingEvent};

/// What monitors tell the journal.
#[derive(Debug, Clone)]
pub enum JournalEntry {
    /// A monitor was registered (before its `started` event).
    Registered(MonitorInfo),
    /// Its process started: the group to kill should the owner die.
    Spawned {
        /// The monitor.
        monitor_id: String,
        /// Process id of `sh` (and id of its process group).
        pid: i32,
        /// The process start time, in clock ticks after boot.
        start_ticks: u64,
    },
    /// An event to number and keep.
    Event(PendingEvent),
    /// Counters changed (sent with the events that changed them).
    Counters {
        /// The monitor.
        monitor_id: String,
        /// `lines` events so far.
        events: u64,
        /// Lines read so far.
        lines: u64,
        /// Suppressed lines so far.
        suppressed_lines: u64,
    },
}

/// Why a journal could not take a batch.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The backing store failed.
    #[error("the event store failed: {0}; check the state directory's disk space and permissions")]
    Store(String),
    /// A file could not be written.
    #[error("could not write {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Numbers (and possibly persists) events. Called from one thread, in order.
pub trait Journal: Send + 'static {
    /// Takes a batch of entries, in order, and returns the events among them
    /// with their `seq`.
    fn append(&mut self, batch: Vec<JournalEntry>) -> Result<Vec<Event>, JournalError>;
}

/// The in-memory journal of an embedded registry: numbers events from 1 and
/// keeps nothing.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    next: u64,
}

impl Journal for MemoryJournal {
    fn append(&mut self, batch: Vec<JournalEntry>) -> Result<Vec<Event>, JournalError> {
        Ok(batch
            .into_iter()
            .filter_map(|e| match e {
                JournalEntry::Event(p) => {
                    self.next += 1;
                    Some(p.with_seq(self.next))
                }
                _ => None,
            })
            .collect())
    }
}
