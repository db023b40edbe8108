//! Where events get their place in the log: the interface between the
//! engine, which produces entries, and a store, which keeps them.
//!
//! The engine's event hub hands [`JournalEntry`]s to a [`Journal`] in
//! batches (one batch holds whatever several monitors had ready: a group
//! commit); the journal gives every event its `seq` (and, for the daemon's
//! SQLite journal, makes the batch durable in one transaction) and returns
//! them as [`Recorded`] events, with the JSON they were stored as, so that
//! nothing encodes them again.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

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
    /// An event recorded elsewhere (another state directory, another
    /// host), to number and keep once: a store keeps at most one event per
    /// `origin` and passes over the others (they get no seq and are not
    /// returned).
    Imported {
        /// Where it was first recorded: `<host>/<seq there>`
        /// ([`crate::export::origin`]).
        origin: String,
        /// The event as it was recorded (its seq is given here).
        event: PendingEvent,
    },
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
    /// The cluster link shipped every event of this host up to `seq` (the
    /// stream acknowledged them): its cursor, which never moves back.
    Shipped {
        /// The last shipped seq.
        seq: u64,
    },
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
            JournalEntry::Imported { origin, event } => {
                write!(
                    f,
                    "Imported({origin}, {}, {})",
                    event.monitor_id,
                    event.body.kind()
                )
            }
            JournalEntry::Counters { monitor_id, .. } => write!(f, "Counters({monitor_id})"),
            JournalEntry::Ack {
                session,
                consumer,
                seq,
            } => write!(f, "Ack({session}, {consumer}, {seq})"),
            JournalEntry::Terminal(t) => write!(f, "Terminal({})", t.id),
            JournalEntry::WakeRoute { session, .. } => write!(f, "WakeRoute({session})"),
            JournalEntry::Shipped { seq } => write!(f, "Shipped({seq})"),
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

/// An event with its place in the log, and its wire JSON when the journal
/// made it (a store does; an in-memory journal need not). Both are shared,
/// not copied: a store keeps the same event and JSON until it has written
/// them into its tables, and the hub hands them to every reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The event.
    pub event: Arc<Event>,
    /// `serde_json::to_string(&event)`, if the journal already has it.
    pub json: Option<Arc<str>>,
}

/// Numbers (and possibly persists) events. Called by one caller at a time,
/// in order.
pub trait Journal: Send + 'static {
    /// Takes a batch of entries, in order, and returns the events among them
    /// with their `seq`. On success the batch is left empty (its events are
    /// moved into what it returns, not copied); on error nothing of it was
    /// kept, it is left as it was, and the same batch is offered again.
    /// The events it returns are in the log: a journal that persists them
    /// has them where a crash of the process cannot take them back.
    fn append(&mut self, batch: &mut Vec<JournalEntry>) -> Result<Vec<Recorded>, JournalError>;

    /// Whether entries taken by `append` wait for [`Journal::flush`]:
    /// durable, but not yet where the journal keeps them for good (a
    /// store: its redo log, not yet its tables).
    fn needs_flush(&self) -> bool {
        false
    }

    /// Finishes what `append` began for every entry that waits. Callers
    /// choose the moment (the engine: shortly after the append, once the
    /// readers it woke have run); a journal must also stay correct if it
    /// never comes. On error the entries keep waiting and the next flush
    /// tries again.
    fn flush(&mut self) -> Result<(), JournalError> {
        Ok(())
    }

    /// A handle that flushes beside the journal's appends, for a journal
    /// whose flush takes long (a database transaction) and can run while
    /// it takes more entries: its caller then flushes through the handle,
    /// without holding the journal, so an append need not wait for a
    /// flush. `None` (the default): flushes go through [`Journal::flush`].
    fn flusher(&self) -> Option<std::sync::Arc<dyn Flusher>> {
        None
    }
}

/// Flushes a journal beside its appends; see [`Journal::flusher`].
pub trait Flusher: Send + Sync + 'static {
    /// As [`Journal::needs_flush`].
    fn needs_flush(&self) -> bool;

    /// As [`Journal::flush`]; may run while the journal appends.
    fn flush(&self) -> Result<(), JournalError>;
}

/// The in-memory journal of an embedded registry: numbers events from 1 and
/// keeps nothing (so it cannot tell an imported event it saw before: it
/// numbers every one).
#[derive(Debug, Default)]
pub struct MemoryJournal {
    next: u64,
}

impl MemoryJournal {
    /// A journal whose next event gets seq `latest + 1`.
    pub fn starting_after(latest: u64) -> Self {
        MemoryJournal { next: latest }
    }
}

impl Journal for MemoryJournal {
    fn append(&mut self, batch: &mut Vec<JournalEntry>) -> Result<Vec<Recorded>, JournalError> {
        let mut out = Vec::new();
        for e in batch.drain(..) {
            if let JournalEntry::Event(p) | JournalEntry::Imported { event: p, .. } = e {
                self.next += 1;
                out.push(Recorded {
                    event: Arc::new(p.with_seq(self.next)),
                    json: None,
                });
            }
        }
        Ok(out)
    }
}
