//! Where events get their place in the log: the interface between the
//! engine, which produces entries, and a store, which keeps them.
//!
//! Monitors send [`JournalEntry`]s into one bounded channel; a single pump
//! thread drains it in batches and hands each batch to a [`Journal`], which
//! gives every event its `seq` (and, for the daemon's SQLite journal, makes it
//! durable in one transaction per batch). The numbered events are then
//! broadcast to subscribers. A full channel makes monitors wait (and so their
//! sources): nothing is dropped on the way to the journal.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use crate::{Event, MonitorInfo, MonitorSpec, PendingEvent};

/// What monitors (and their owner) tell the journal.
pub enum JournalEntry {
    /// A monitor was registered (before its `started` event), with what is
    /// needed to start it again. (Boxed: it is rare and large.)
    Registered(Box<Registration>),
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
    /// A consumer acknowledged every event of `session` up to `seq`.
    Ack {
        /// The session.
        session: String,
        /// The consumer name.
        consumer: String,
        /// The last acknowledged seq.
        seq: u64,
    },
    /// A session's wake route was set (its JSON) or cleared (`None`).
    WakeRoute {
        /// The session.
        session: String,
        /// The route as JSON, or `None` to remove it.
        route: Option<String>,
    },
    /// A terminal started or ended (insert or replace its row).
    Terminal(crate::terminal::TerminalInfo),
    /// Called once every entry sent before it has been appended.
    Barrier(Box<dyn FnOnce() + Send>),
}

impl fmt::Debug for JournalEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalEntry::Registered(r) => write!(f, "Registered({})", r.info.id),
            JournalEntry::Spawned {
                monitor_id, pid, ..
            } => {
                write!(f, "Spawned({monitor_id}, pid {pid})")
            }
            JournalEntry::Event(e) => write!(f, "Event({}, {})", e.monitor_id, e.body.kind()),
            JournalEntry::Counters { monitor_id, .. } => write!(f, "Counters({monitor_id})"),
            JournalEntry::Ack {
                session,
                consumer,
                seq,
            } => write!(f, "Ack({session}, {consumer}, {seq})"),
            JournalEntry::Terminal(t) => write!(f, "Terminal({})", t.id),
            JournalEntry::WakeRoute { session, .. } => write!(f, "WakeRoute({session})"),
            JournalEntry::Barrier(_) => f.write_str("Barrier"),
        }
    }
}

/// A monitor as registered: what a listing shows and what starting it
/// again needs.
#[derive(Debug, Clone)]
pub struct Registration {
    /// As listings show it.
    pub info: MonitorInfo,
    /// Its parameters.
    pub spec: MonitorSpec,
    /// The caller's environment, if it was given.
    pub base_env: Option<BTreeMap<String, String>>,
    /// The caller's working directory, if it was given.
    pub base_cwd: Option<PathBuf>,
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
///
/// [`JournalEntry::Barrier`] callbacks are run by the caller after `append`
/// returns; a journal can ignore them.
pub trait Journal: Send + 'static {
    /// Takes a batch of entries, in order, and returns the events among them
    /// with their `seq`.
    fn append(&mut self, batch: &mut Vec<JournalEntry>) -> Result<Vec<Event>, JournalError>;
}

/// The in-memory journal of an embedded registry: numbers events from 1 and
/// keeps nothing.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    next: u64,
}

impl Journal for MemoryJournal {
    fn append(&mut self, batch: &mut Vec<JournalEntry>) -> Result<Vec<Event>, JournalError> {
        let mut out = Vec::new();
        for e in batch.iter_mut() {
            if let JournalEntry::Event(p) = e {
                self.next += 1;
                out.push(p.clone().with_seq(self.next));
            }
        }
        Ok(out)
    }
}
