//! The single writer: two steps for events, one transaction for the rest.
//!
//! A batch of events (with monitor counters) is *taken*: each event gets
//! its seq, is moved out of the batch and encoded to JSON straight into its
//! redo record, and the records are appended to the redo log
//! ([`crate::redo`]) in one write. Then the events are durable, and
//! [`Journal::append`] returns them to be handed out — the same `Arc`s of
//! event and JSON that wait for the fold, nothing copied. Counters wait in
//! memory only: a crash before the fold leaves a monitor's row with the
//! counters it had (they are written at most once a second anyway; the
//! events themselves are all kept). They are *folded* into the tables, in one transaction
//! for all that wait, by [`Journal::flush`] — which the engine calls a
//! moment later, once the readers a line woke have had the processor (a
//! reader woken by the daemon often runs on the daemon's processor, and
//! would wait for a transaction written right after its line) — or by
//! whatever comes first of: any other entry (a registration, an
//! acknowledgement, …: it folds what is pending, then is written in a
//! transaction of its own before `append` returns, so entries reach the
//! tables in the order they were appended), any read of a
//! [`crate::StoreReader`] (a query sees every event that was handed out),
//! [`MAX_PENDING`] entries waiting, or the writer being dropped.
//!
//! Locks: `tables` (the connection) before `taken` (seq, redo log,
//! pending), always in that order; a take holds only `taken`, for one
//! write; a fold holds `taken` only to move what waits out of it (and to
//! put it back if the transaction failed), not for its transaction.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{params, Connection, OptionalExtension};
use wakeful_core::journal::{Flusher, Journal, JournalEntry, JournalError, Recorded, Registration};
use wakeful_core::{Event, MonitorInfo, MonitorState};

use crate::redo::Redo;

/// Entries that may wait in the redo log; past this a take folds first.
const MAX_PENDING: usize = 4096;

/// The single writer; see the module docs.
pub struct StoreWriter {
    shared: Arc<Shared>,
    recovered: u64,
}

/// What the writer and the readers share.
pub(crate) struct Shared {
    /// The connection the tables are written through.
    tables: Mutex<Connection>,
    taken: Mutex<Taken>,
    /// The database file (for messages; never changes).
    path: PathBuf,
    /// Whether `taken.pending` holds anything (read without the lock).
    pending: AtomicBool,
}

struct Taken {
    next_seq: u64,
    redo: Redo,
    pending: Vec<Pending>,
}

/// Taken, in the redo log, not yet in the tables.
enum Pending {
    Event { event: Arc<Event>, json: Arc<str> },
    Counters(Counters),
}

/// Bytes a batch's redo records get per entry before the first is encoded
/// (a line's event encodes to ~200).
const RECORD_ROOM: usize = 384;

/// An entry of a batch being taken, until its redo record is written.
enum Staged {
    /// An event, numbered, and its JSON.
    Event(Event, Arc<str>),
    /// Anything else, as it came: counters, or an event after one that
    /// could not be encoded.
    Other(JournalEntry),
}

impl Staged {
    /// The entry as it came (the batch could not be taken).
    fn give_back(self) -> JournalEntry {
        match self {
            Staged::Event(event, _) => JournalEntry::Event(event.into_pending()),
            Staged::Other(entry) => entry,
        }
    }
}

/// A monitor's counters, as [`JournalEntry::Counters`] carries them.
struct Counters {
    monitor_id: String,
    events: u64,
    lines: u64,
    suppressed_lines: u64,
}

impl Counters {
    fn of(entry: &JournalEntry) -> Option<Counters> {
        match entry {
            JournalEntry::Counters {
                monitor_id,
                events,
                lines,
                suppressed_lines,
            } => Some(Counters {
                monitor_id: monitor_id.clone(),
                events: *events,
                lines: *lines,
                suppressed_lines: *suppressed_lines,
            }),
            _ => None,
        }
    }

    /// Sets the three counters in the monitor's row, in their own columns:
    /// its `info` is neither decoded nor rewritten for them (decoding and
    /// encoding it in Rust was half of a fold's work when every line came
    /// with counters; SQLite's `json_set` on it, a quarter). A reader takes
    /// the larger of them and `info`'s ([`take_counters`]); a rewrite of
    /// `info` takes in those set so far and clears them ([`update_info`]),
    /// and counters folded after it set them again.
    fn apply(&self, tx: &rusqlite::Transaction<'_>) -> Result<(), rusqlite::Error> {
        tx.prepare_cached(
            "UPDATE monitors SET events = ?2, lines = ?3, suppressed_lines = ?4 WHERE id = ?1",
        )?
        .execute(params![
            self.monitor_id,
            counter(self.events),
            counter(self.lines),
            counter(self.suppressed_lines)
        ])?;
        Ok(())
    }
}

/// A counter as SQLite's integer (counts past `i64::MAX` stay at it).
fn counter(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A monitor row's counter columns (`events`, `lines`, `suppressed_lines`):
/// `None` where no fold has set them since its `info` was written.
pub(crate) type CounterColumns = (Option<i64>, Option<i64>, Option<i64>);

/// A row's counter columns, read from `row` starting at column `first`
/// (`events`, `lines`, `suppressed_lines`, in that order).
pub(crate) fn counter_columns(
    row: &rusqlite::Row<'_>,
    first: usize,
) -> Result<CounterColumns, rusqlite::Error> {
    Ok((row.get(first)?, row.get(first + 1)?, row.get(first + 2)?))
}

/// Puts a row's counter columns, where set, over its `info`'s counters.
/// Within one registration of a monitor (a new one replaces the row and
/// clears the columns) counters only grow, so the larger of the two is the
/// newer: an `info` rewritten by a build that knew no columns still wins
/// over columns it left behind.
pub(crate) fn take_counters(info: &mut MonitorInfo, (events, lines, suppressed): CounterColumns) {
    let newer = |ours: &mut u64, column: Option<i64>| {
        if let Some(n) = column.and_then(|n| u64::try_from(n).ok()) {
            *ours = (*ours).max(n);
        }
    };
    newer(&mut info.events, events);
    newer(&mut info.lines, lines);
    newer(&mut info.suppressed_lines, suppressed);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn sql(&self, source: rusqlite::Error) -> JournalError {
        JournalError::Store(format!("{}: {source}", self.path.display()))
    }

    /// Folds what is pending into the tables, in one transaction.
    ///
    /// Only `tables` is held for the transaction: what waits is moved out
    /// of `taken` at once, so takes go on meanwhile — a line that comes
    /// during a fold is handed out without waiting for the transaction,
    /// even one that waits on the database (another process holding its
    /// write lock: up to the 5 s busy timeout). Whoever folds next (a
    /// reader too) first waits for a fold in progress, on `tables`, so a
    /// query still sees every event handed out.
    pub(crate) fn fold(&self) -> Result<(), rusqlite::Error> {
        if !self.pending.load(Ordering::Acquire) && self.tables.try_lock().is_ok() {
            return Ok(());
        }
        let mut conn = lock(&self.tables);
        let batch = {
            let mut taken = lock(&self.taken);
            self.pending.store(false, Ordering::Release);
            std::mem::take(&mut taken.pending)
        };
        if batch.is_empty() {
            return Ok(());
        }
        if let Err(e) = insert_pending(&mut conn, &batch) {
            // Back in front of what came meanwhile, for the next fold.
            let mut taken = lock(&self.taken);
            let newer = std::mem::replace(&mut taken.pending, batch);
            taken.pending.extend(newer);
            self.pending.store(true, Ordering::Release);
            return Err(e);
        }
        let mut taken = lock(&self.taken);
        if taken.redo.is_large() {
            // Everything it holds is in the tables now but what came
            // during the transaction: that goes in too, holding `taken` —
            // a take waits for this one transaction — so the log is
            // emptied however fast lines come. If emptying fails it is
            // tried next time; opening passes over what is in the tables
            // already.
            fold_into(&mut conn, &mut taken)?;
            self.pending
                .store(!taken.pending.is_empty(), Ordering::Release);
        }
        Ok(())
    }

    /// The events taken but not yet in the tables, matching `session`
    /// and `monitor`, with a seq above `after` (a read that could not fold
    /// them still sees them).
    pub(crate) fn pending_after(
        &self,
        session: Option<&str>,
        monitor: Option<&str>,
        after: u64,
    ) -> Vec<Recorded> {
        let taken = lock(&self.taken);
        taken
            .pending
            .iter()
            .filter_map(|p| match p {
                Pending::Event { event, json }
                    if event.seq > after
                        && session.is_none_or(|s| event.session == s)
                        && monitor.is_none_or(|m| event.monitor_id == m) =>
                {
                    Some(Recorded {
                        event: event.clone(),
                        json: Some(json.clone()),
                    })
                }
                _ => None,
            })
            .collect()
    }
}

impl crate::retention::Tables for Shared {
    fn last_taken(&self) -> u64 {
        lock(&self.taken).next_seq.saturating_sub(1)
    }

    fn tables(&self) -> MutexGuard<'_, Connection> {
        lock(&self.tables)
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn redo_len(&self) -> u64 {
        lock(&self.taken).redo.len()
    }
}

/// Puts what `taken` holds into the tables (holding `taken` throughout);
/// the redo log is emptied when it has grown large (everything it holds
/// is in then).
fn fold_into(conn: &mut Connection, taken: &mut Taken) -> Result<(), rusqlite::Error> {
    if !taken.pending.is_empty() {
        insert_pending(conn, &taken.pending)?;
        taken.pending.clear();
    }
    if taken.redo.is_large() {
        let _ = taken.redo.clear();
    }
    Ok(())
}

/// Writes `pending` into the tables, in one transaction.
fn insert_pending(conn: &mut Connection, pending: &[Pending]) -> Result<(), rusqlite::Error> {
    let tx = conn.transaction()?;
    for p in pending {
        match p {
            Pending::Event { event, json } => insert_event(&tx, event, json)?,
            Pending::Counters(c) => c.apply(&tx)?,
        }
    }
    tx.commit()
}

impl StoreWriter {
    /// A writer over `conn` (schema made, redo log recovered), whose next
    /// event gets `next_seq`.
    pub(crate) fn start(
        conn: Connection,
        path: &Path,
        redo: Redo,
        next_seq: u64,
        recovered: u64,
    ) -> (StoreWriter, Arc<Shared>) {
        let shared = Arc::new(Shared {
            tables: Mutex::new(conn),
            path: path.to_path_buf(),
            taken: Mutex::new(Taken {
                next_seq,
                redo,
                pending: Vec::new(),
            }),
            pending: AtomicBool::new(false),
        });
        (
            StoreWriter {
                shared: shared.clone(),
                recovered,
            },
            shared,
        )
    }

    /// A pruner of this store (a connection of its own for its reads;
    /// its writes go through this writer's connection).
    pub fn pruner(&self) -> Result<crate::retention::Pruner, crate::StoreError> {
        crate::retention::Pruner::new(self.shared.clone())
    }

    /// How many events opening the store took from the redo log (the daemon
    /// before was killed after handing them out, before they were in the
    /// tables).
    pub fn recovered(&self) -> u64 {
        self.recovered
    }

    /// The first step for a batch of events and counters: seqs, one write
    /// to the redo log. The batch's events are moved, not copied: into
    /// what is returned and what waits for the fold, which share them.
    fn take(&self, batch: &mut Vec<JournalEntry>) -> Result<Vec<Recorded>, JournalError> {
        if self.shared.pending.load(Ordering::Acquire)
            && lock(&self.shared.taken).pending.len() >= MAX_PENDING
        {
            self.shared.fold().map_err(|e| self.shared.sql(e))?;
        }
        let mut taken = lock(&self.shared.taken);
        // Everything is prepared before anything changes: an entry that
        // cannot be encoded, or a failed write, leaves no trace (the batch
        // is given back as it was, and the hub offers it again).
        // Room for the usual event's record at once: grown piece by piece
        // as serde writes, it would be copied five or six times.
        let mut records = Vec::with_capacity(RECORD_ROOM * batch.len());
        let mut staged = Vec::with_capacity(batch.len());
        let mut failed = None;
        let mut seq = taken.next_seq;
        for entry in batch.drain(..) {
            match entry {
                JournalEntry::Event(p) if failed.is_none() => {
                    let event = p.with_seq(seq);
                    // Encoded straight into the redo log's record; the
                    // tables and every reader get that same text.
                    let start = records.len();
                    match serde_json::to_writer(&mut records, &event) {
                        Ok(()) => {
                            staged.push(Staged::Event(event, json_of(&records[start..])));
                            records.push(b'\n');
                            seq += 1;
                        }
                        Err(e) => {
                            failed = Some(self.shared.sql(json_error(e)));
                            staged.push(Staged::Other(JournalEntry::Event(event.into_pending())));
                        }
                    }
                }
                other => staged.push(Staged::Other(other)),
            }
        }
        if failed.is_none() && !records.is_empty() {
            if let Err(source) = taken.redo.append(&records) {
                failed = Some(JournalError::Io {
                    path: taken.redo.path().to_path_buf(),
                    source,
                });
            }
        }
        if let Some(e) = failed {
            batch.extend(staged.into_iter().map(Staged::give_back));
            return Err(e);
        }
        let mut out = Vec::with_capacity(staged.len());
        for s in staged {
            match s {
                Staged::Event(event, json) => {
                    let event = Arc::new(event);
                    out.push(Recorded {
                        event: event.clone(),
                        json: Some(json.clone()),
                    });
                    taken.pending.push(Pending::Event { event, json });
                }
                Staged::Other(other) => {
                    taken
                        .pending
                        .extend(Counters::of(&other).map(Pending::Counters));
                }
            }
        }
        taken.next_seq = seq;
        if !taken.pending.is_empty() {
            self.shared.pending.store(true, Ordering::Release);
        }
        Ok(out)
    }

    /// Any other batch: what is pending first, then the batch, each in one
    /// transaction, before this returns.
    fn write(&self, batch: &mut Vec<JournalEntry>) -> Result<Vec<Recorded>, JournalError> {
        let mut conn = lock(&self.shared.tables);
        let mut taken = lock(&self.shared.taken);
        let written = fold_into(&mut conn, &mut taken)
            .and_then(|()| write_batch(&mut conn, &mut taken.next_seq, batch));
        self.shared
            .pending
            .store(!taken.pending.is_empty(), Ordering::Release);
        if written.is_ok() {
            batch.clear();
        }
        written.map_err(|e| self.shared.sql(e))
    }
}

impl Drop for StoreWriter {
    fn drop(&mut self) {
        if self.shared.fold().is_ok() {
            let _ = lock(&self.shared.taken).redo.clear();
        }
    }
}

/// Entries the writer takes through the redo log.
fn is_fast(entry: &JournalEntry) -> bool {
    matches!(
        entry,
        JournalEntry::Event(_) | JournalEntry::Counters { .. }
    )
}

impl Journal for StoreWriter {
    fn append(&mut self, batch: &mut Vec<JournalEntry>) -> Result<Vec<Recorded>, JournalError> {
        if batch.iter().all(is_fast) {
            self.take(batch)
        } else {
            self.write(batch)
        }
    }

    fn needs_flush(&self) -> bool {
        self.shared.pending.load(Ordering::Acquire)
    }

    fn flush(&mut self) -> Result<(), JournalError> {
        self.shared.fold().map_err(|e| self.shared.sql(e))
    }

    fn flusher(&self) -> Option<Arc<dyn Flusher>> {
        Some(self.shared.clone())
    }
}

/// A fold holds only the tables' lock for its transaction ([`Shared::fold`]),
/// so it runs beside takes.
impl Flusher for Shared {
    fn needs_flush(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    fn flush(&self) -> Result<(), JournalError> {
        self.fold().map_err(|e| self.sql(e))
    }
}

/// Writes `batch` in one transaction; events get seqs from `next_seq`.
fn write_batch(
    conn: &mut Connection,
    next_seq: &mut u64,
    batch: &[JournalEntry],
) -> Result<Vec<Recorded>, rusqlite::Error> {
    let tx = conn.transaction()?;
    let mut out = Vec::new();
    let mut seq = *next_seq;
    {
        for entry in batch {
            match entry {
                JournalEntry::Event(p) => {
                    let event = p.clone().with_seq(seq);
                    let json = to_json(&event)?;
                    insert_event(&tx, &event, &json)?;
                    out.push(Recorded {
                        event: Arc::new(event),
                        json: Some(Arc::from(json)),
                    });
                    seq += 1;
                }
                JournalEntry::Imported { origin, event } => {
                    let event = event.clone().with_seq(seq);
                    let json = to_json(&event)?;
                    // One event per origin: a second import passes over it.
                    let stored = tx
                        .prepare_cached(
                            "INSERT INTO events(seq, session, monitor_id, kind, json, origin)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                             ON CONFLICT(origin) WHERE origin IS NOT NULL DO NOTHING",
                        )?
                        .execute(params![
                            seq as i64,
                            event.session,
                            event.monitor_id,
                            event.kind().as_str(),
                            json,
                            origin
                        ])?;
                    if stored == 0 {
                        continue;
                    }
                    monitor_follows_event(&tx, &event)?;
                    out.push(Recorded {
                        event: Arc::new(event),
                        json: Some(Arc::from(json)),
                    });
                    seq += 1;
                }
                JournalEntry::Registered(r) => {
                    let Registration {
                        info,
                        spec,
                        base_env,
                        base_cwd,
                    } = r.as_ref();
                    tx.execute(
                        "INSERT OR REPLACE INTO monitors(id, session, info, spec, base_env, base_cwd, running, persistent)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?8, ?7)",
                        params![
                            info.id,
                            info.session,
                            to_json(info)?,
                            to_json(spec)?,
                            base_env.as_ref().map(to_json).transpose()?,
                            base_cwd.as_ref().map(|p| p.display().to_string()),
                            info.persistent,
                            info.is_active()
                        ],
                    )?;
                }
                JournalEntry::Spawned {
                    monitor_id,
                    pid,
                    start_ticks,
                } => {
                    tx.execute(
                        "UPDATE monitors SET pid = ?2, start_ticks = ?3 WHERE id = ?1",
                        params![monitor_id, pid, *start_ticks as i64],
                    )?;
                }
                JournalEntry::Counters { .. } => {
                    if let Some(c) = Counters::of(entry) {
                        c.apply(&tx)?;
                    }
                }
                JournalEntry::Ack {
                    session,
                    consumer,
                    seq,
                } => {
                    tx.prepare_cached(
                        "INSERT INTO cursors(session, consumer, seq) VALUES (?1, ?2, ?3)
                         ON CONFLICT(session, consumer) DO UPDATE SET seq = max(seq, excluded.seq)",
                    )?
                    .execute(params![session, consumer, *seq as i64])?;
                }
                JournalEntry::Terminal(t) => {
                    tx.execute(
                        "INSERT OR REPLACE INTO terminals(id, session, info, running) VALUES (?1, ?2, ?3, ?4)",
                        params![t.id, t.session, to_json(t)?, t.state == MonitorState::Running],
                    )?;
                }
                JournalEntry::Shipped { seq } => {
                    tx.prepare_cached(
                        "INSERT INTO marks(name, seq) VALUES ('shipped', ?1)
                         ON CONFLICT(name) DO UPDATE SET seq = max(seq, excluded.seq)",
                    )?
                    .execute([*seq as i64])?;
                }
                JournalEntry::WakeRoute { session, route } => match route {
                    Some(r) => {
                        tx.execute(
                            "INSERT OR REPLACE INTO wake_routes(session, route) VALUES (?1, ?2)",
                            params![session, r],
                        )?;
                    }
                    None => {
                        tx.execute("DELETE FROM wake_routes WHERE session = ?1", [session])?;
                    }
                },
            }
        }
    }
    tx.commit()?;
    *next_seq = seq;
    Ok(out)
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String, rusqlite::Error> {
    serde_json::to_string(v).map_err(json_error)
}

fn json_error(e: serde_json::Error) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(e))
}

/// The text serde_json wrote (always UTF-8; should it ever not be, the
/// bytes it could not read are replaced rather than the event lost).
fn json_of(bytes: &[u8]) -> Arc<str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Arc::from(text),
        Err(_) => Arc::from(String::from_utf8_lossy(bytes)),
    }
}

fn update_info(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    f: impl FnOnce(&mut MonitorInfo),
) -> Result<(), rusqlite::Error> {
    // Cached statements: this runs with every monitor's final event.
    let row: Option<(String, CounterColumns)> = tx
        .prepare_cached("SELECT info, events, lines, suppressed_lines FROM monitors WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, counter_columns(r, 1)?)))
        .optional()?;
    let Some((json, counters)) = row else {
        return Ok(());
    };
    let Ok(mut info) = serde_json::from_str::<MonitorInfo>(&json) else {
        return Ok(());
    };
    take_counters(&mut info, counters);
    f(&mut info);
    tx.prepare_cached(
        "UPDATE monitors SET info = ?2, running = ?3,
         events = NULL, lines = NULL, suppressed_lines = NULL WHERE id = ?1",
    )?
    .execute(params![id, to_json(&info)?, info.is_active()])?;
    Ok(())
}

fn monitor_follows_event(tx: &rusqlite::Transaction<'_>, e: &Event) -> Result<(), rusqlite::Error> {
    match e.body.stop_reason() {
        Some(reason) => update_info(tx, &e.monitor_id, |info| {
            info.state = MonitorState::Ended;
            info.stop_reason = Some(reason);
            info.survivors = e.body.survivors().to_vec();
            info.unverified = e.body.unverified().cloned();
            info.ended_at = Some(e.ts);
        }),
        None => Ok(()),
    }
}

pub(crate) fn insert_event(
    tx: &rusqlite::Transaction<'_>,
    event: &Event,
    json: &str,
) -> Result<(), rusqlite::Error> {
    tx.prepare_cached(
        "INSERT INTO events(seq, session, monitor_id, kind, json) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        event.seq as i64,
        event.session,
        event.monitor_id,
        event.kind().as_str(),
        json
    ])?;
    monitor_follows_event(tx, event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_larger_of_a_counter_column_and_info_is_the_newer() {
        let mut info = MonitorInfo::starting(
            "m".into(),
            "s".into(),
            &wakeful_core::MonitorSpec::command("true", "d"),
            "/x".into(),
        );
        (info.events, info.lines, info.suppressed_lines) = (10, 100, 0);
        // Columns ahead of info (a fold since info was written); one unset.
        take_counters(&mut info, (Some(12), Some(120), None));
        assert_eq!(
            (info.events, info.lines, info.suppressed_lines),
            (12, 120, 0)
        );
        // Columns behind info (left by a build that rewrote info without
        // them), or not a count: info stays.
        take_counters(&mut info, (Some(5), Some(-1), Some(3)));
        assert_eq!(
            (info.events, info.lines, info.suppressed_lines),
            (12, 120, 3)
        );
    }

    fn line(n: u64) -> JournalEntry {
        JournalEntry::Event(crate::test_events::line(n))
    }

    /// `"<seq> <text>"` of every event a reader sees in the tables.
    fn texts_in(r: &crate::StoreReader) -> Vec<String> {
        r.events_after(None, None, 0, 10)
            .unwrap()
            .into_iter()
            .map(|e| format!("{} {}", e.seq, e.text))
            .collect()
    }

    #[test]
    fn a_failed_redo_write_leaves_no_trace_and_the_retry_takes_the_same_seqs() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let (mut w, r) = crate::open(&db).unwrap();
        assert_eq!(w.append(&mut vec![line(1)]).unwrap()[0].event.seq, 1);
        lock(&w.shared.taken).redo.set_writable(false);
        let counters = crate::test_events::counters("m", 3, 3, 0);
        let mut batch = vec![line(2), counters, line(3)];
        let failed = w.append(&mut batch);
        assert!(matches!(failed, Err(JournalError::Io { .. })), "{failed:?}");
        // Given back as it came, in order: the hub offers this same batch again.
        let what: Vec<String> = batch
            .iter()
            .map(|e| match e {
                JournalEntry::Event(p) => p.text.clone(),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(what, ["line 2", "Counters(m)", "line 3"]);
        lock(&w.shared.taken).redo.set_writable(true);
        let again = w.append(&mut batch).unwrap();
        assert!(batch.is_empty(), "taken: {batch:?}");
        assert_eq!(
            again.iter().map(|e| e.event.seq).collect::<Vec<_>>(),
            vec![2, 3]
        );
        let texts = texts_in(&r);
        assert_eq!(texts, vec!["1 line 1", "2 line 2", "3 line 3"]);
    }

    #[test]
    fn a_take_goes_on_while_a_fold_waits_for_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let (mut w, r) = crate::open(&db).unwrap();
        w.append(&mut vec![line(1)]).unwrap();
        // Another connection holds the write lock: the fold's transaction
        // waits for it (busy timeout).
        let other = Connection::open(&db).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let shared = w.shared.clone();
        let fold = std::thread::spawn(move || shared.fold());
        // Wait (one deadline) until the fold has moved what waits out and
        // holds the tables.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while w.shared.pending.load(Ordering::Acquire) || w.shared.tables.try_lock().is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "the fold never started"
            );
            std::thread::yield_now();
        }
        // A take does not wait for that transaction.
        assert_eq!(w.append(&mut vec![line(2)]).unwrap()[0].event.seq, 2);
        assert!(!fold.is_finished(), "the fold is still waiting");
        other.execute_batch("COMMIT").unwrap();
        fold.join().unwrap().unwrap();
        // Both are in the tables for a reader (which folds line 2 first).
        let texts = texts_in(&r);
        assert_eq!(texts, vec!["1 line 1", "2 line 2"]);
    }

    #[test]
    fn the_redo_log_stays_bounded_however_fast_lines_come() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let (mut w, _r) = crate::open(&db).unwrap();
        // A fold runs beside takes all along (as the hub's background
        // flush does); takes never stop, so `pending` is rarely empty when
        // a fold ends.
        let shared = w.shared.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let folding = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    shared.fold().unwrap();
                }
            })
        };
        let mut largest = 0;
        for n in 0..2_000 {
            let mut batch: Vec<JournalEntry> = (0..32).map(|i| line(n * 32 + i)).collect();
            w.append(&mut batch).unwrap();
            largest = largest.max(lock(&w.shared.taken).redo.len());
        }
        stop.store(true, Ordering::Relaxed);
        folding.join().unwrap();
        assert!(
            largest < 3 * crate::redo::CLEAR_AT,
            "the redo log reached {largest} bytes"
        );
    }

    #[test]
    fn a_read_goes_on_when_the_events_cannot_go_into_the_tables() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let (mut w, r) = crate::open(&db).unwrap();
        w.append(&mut vec![line(1)]).unwrap();
        assert_eq!(texts_in(&r), ["1 line 1"]);
        // Another process holds the database's write lock: folds fail
        // (at once here), as they do on a full disk.
        lock(&w.shared.tables)
            .busy_timeout(std::time::Duration::from_millis(1))
            .unwrap();
        let other = Connection::open(&db).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        w.append(&mut vec![line(2), line(3)]).unwrap();
        assert!(w.shared.fold().is_err());
        // Reads answer, with the events that wait (from memory).
        assert_eq!(texts_in(&r), ["1 line 1", "2 line 2", "3 line 3"]);
        assert_eq!(r.latest_seq().unwrap(), 3);
        assert!(r.monitor("m").unwrap().is_none());
        other.execute_batch("COMMIT").unwrap();
        w.shared.fold().unwrap();
        let raw: i64 = Connection::open(&db)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM events", [], |row| row.get(0))
            .unwrap();
        assert_eq!(raw, 3, "in the tables once the lock is gone");
    }
}
