//! # wakeful-store
//!
//! The durable log: events, monitors and consumer cursors in one SQLite
//! database in WAL mode.
//!
//! - [`StoreWriter`] is the only writer. It implements the engine's
//!   [`Journal`](wakeful_core::journal::Journal): events get their `seq`
//!   (global, strictly increasing, never reused, even once a prune removed events)
//!   and are durable once they are in the *redo log* ([`redo`]: one write),
//!   which is when they are handed out; they are put into the tables a
//!   moment later (`Journal::flush`), and monitor rows follow their events
//!   (a final event ends the monitor's row). Other entries are written in a
//!   transaction of their own, after every event appended before them.
//! - [`retention`]: pruning ended monitors and giving the space back.
//! - [`StoreReader`] answers queries from any task; WAL lets it read while
//!   the writer writes. A read first puts whatever the redo log holds
//!   beyond the tables into them: every query sees every event handed out.
//!
//! Events recorded elsewhere (`wakeful import`) keep their *origin*
//! (`<host>/<seq there>`) in the nullable `origin` column, under a UNIQUE
//! index: the writer stores at most one event per origin (schema 2; a
//! database of schema 1 gets the column when it is opened).
//!
//! A monitor's row holds its `MonitorInfo` as JSON; the counters a fold
//! brings (events, lines, suppressed lines, at most once a second a
//! monitor) go to three columns beside it instead of into that JSON
//! (schema 3). A reader takes the larger of column and JSON. A rewrite of
//! the JSON (a monitor's final event) takes in the columns set so far and
//! clears them; the counters a monitor sends with its final event come
//! after it, and set them again.
//!
//! The cluster link (docs/CLUSTER.md) ships this host's own events (those
//! without an origin) in seq order; its cursor, the *shipped mark*, is a row
//! of `marks` written through the same writer ([`JournalEntry::Shipped`](wakeful_core::journal::JournalEntry::Shipped))
//! and read with [`StoreReader::shipped_mark`] and
//! [`StoreReader::local_events_after`].
//!
//! Durability: `synchronous = NORMAL` in WAL mode. A committed transaction
//! survives the daemon being killed (even `kill -9`): it is in the WAL file;
//! so does an event in the redo log: opening the store puts it into the
//! tables. Only an operating-system crash or power loss may lose the last
//! events.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};
use wakeful_core::journal::Recorded;
use wakeful_core::terminal::TerminalInfo;
use wakeful_core::{Event, MonitorInfo, MonitorSpec};

pub mod redo;
pub mod retention;
mod writer;

use redo::Redo;
use writer::Shared;
pub use writer::StoreWriter;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS events (
    seq        INTEGER PRIMARY KEY,
    session    TEXT NOT NULL,
    monitor_id TEXT NOT NULL,
    kind       TEXT NOT NULL,
    json       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_session ON events(session, seq);
CREATE INDEX IF NOT EXISTS events_by_monitor ON events(monitor_id, seq);
CREATE TABLE IF NOT EXISTS monitors (
    id         TEXT PRIMARY KEY,
    session    TEXT NOT NULL,
    info       TEXT NOT NULL,
    spec       TEXT NOT NULL,
    base_env   TEXT,
    base_cwd   TEXT,
    running    INTEGER NOT NULL,
    persistent INTEGER NOT NULL,
    pid        INTEGER,
    start_ticks INTEGER,
    events     INTEGER,
    lines      INTEGER,
    suppressed_lines INTEGER
);
CREATE INDEX IF NOT EXISTS monitors_running ON monitors(running);
CREATE TABLE IF NOT EXISTS cursors (
    session  TEXT NOT NULL,
    consumer TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    PRIMARY KEY (session, consumer)
);
CREATE TABLE IF NOT EXISTS terminals (
    id      TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    info    TEXT NOT NULL,
    running INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS wake_routes (
    session TEXT PRIMARY KEY,
    route   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS marks (name TEXT PRIMARY KEY, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS prunes (
    id     INTEGER PRIMARY KEY,
    at     TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', '1');
";

/// The schema this build writes: 2 added `events.origin`; 3 added the
/// counters of `monitors` (`events`, `lines`, `suppressed_lines`), set by
/// folds beside the row's `info` (a reader takes the larger of the two);
/// 4 added `prunes` (what each prune removed) and the `seq_floor` of
/// `meta` (the highest seq ever given, kept when a prune removes the
/// newest events, so that no seq is given twice).
const SCHEMA_VERSION: u32 = 4;

/// The counters a fold sets in a monitor's row without touching its `info`
/// (see the crate docs).
const COUNTER_COLUMNS: [&str; 3] = ["events", "lines", "suppressed_lines"];

/// Brings a database made by an older build up to [`SCHEMA_VERSION`]:
/// adds what is missing, never drops anything.
fn migrate(conn: &Connection) -> Result<(), rusqlite::Error> {
    let has_origin = conn
        .prepare("SELECT 1 FROM pragma_table_info('events') WHERE name = 'origin'")?
        .exists([])?;
    if !has_origin {
        conn.execute_batch("ALTER TABLE events ADD COLUMN origin TEXT")?;
    }
    for column in COUNTER_COLUMNS {
        let has = conn
            .prepare("SELECT 1 FROM pragma_table_info('monitors') WHERE name = ?1")?
            .exists([column])?;
        if !has {
            conn.execute_batch(&format!("ALTER TABLE monitors ADD COLUMN {column} INTEGER"))?;
        }
    }
    // Only imported events have an origin: a partial index, so that this
    // host's own events (origin NULL) cost no index entry. An index of an
    // older build covered every row; it is made again.
    let full_origin_index = conn
        .prepare(
            "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'events_by_origin'
             AND sql NOT LIKE '%WHERE%'",
        )?
        .exists([])?;
    if full_origin_index {
        conn.execute_batch("DROP INDEX events_by_origin")?;
    }
    conn.execute_batch(
        "CREATE UNIQUE INDEX IF NOT EXISTS events_by_origin ON events(origin)
         WHERE origin IS NOT NULL",
    )?;
    conn.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'schema' AND CAST(value AS INTEGER) < ?1",
        [SCHEMA_VERSION],
    )?;
    Ok(())
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("database {path}: {source}; check disk space and permissions of the state directory")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The error.
        source: rusqlite::Error,
    },
    /// The redo log could not be read or written.
    #[error("redo log {path}: {source}; check disk space and permissions of the state directory")]
    Io {
        /// The redo log.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A stored row is not what this version wrote.
    #[error("database {path} holds a row this version cannot read ({detail}); it may come from a newer wakeful")]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What could not be read.
        detail: String,
    },
}

/// A monitor as stored, with what is needed to start it again.
#[derive(Debug, Clone)]
pub struct StoredMonitor {
    /// As listings show it.
    pub info: MonitorInfo,
    /// Its parameters.
    pub spec: MonitorSpec,
    /// The caller's environment.
    pub base_env: Option<BTreeMap<String, String>>,
    /// The caller's working directory.
    pub base_cwd: Option<PathBuf>,
    /// Process id (and group id) of its command, when one ran.
    pub pid: Option<i32>,
    /// Start time of that process, in clock ticks after boot.
    pub start_ticks: Option<u64>,
}

fn open_conn(path: &Path) -> Result<Connection, StoreError> {
    let err = |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open(path).map_err(err)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(err)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(err)?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(err)?;
    // A checkpoint leaves the WAL file at most this large (it is not
    // shrunk otherwise): the WAL stays bounded however many lines came.
    conn.pragma_update(None, "journal_size_limit", WAL_LIMIT as i64)
        .map_err(err)?;
    Ok(conn)
}

/// The size a checkpoint truncates the WAL file to, at most.
pub const WAL_LIMIT: u64 = 16 << 20;

/// Opens (creating it) the database at `path`: its one writer and a reader.
/// Events that reached the redo log but not the tables (the daemon was
/// killed in between) are put in first.
pub fn open(path: &Path) -> Result<(StoreWriter, StoreReader), StoreError> {
    let sqlite = |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let conn = open_conn(path)?;
    // A new database gives space back page by page after a prune
    // (`incremental_vacuum`); this must be set before its first table.
    let new = conn
        .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })
        .map_err(sqlite)?
        == 0;
    if new {
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
            .map_err(sqlite)?;
    }
    conn.execute_batch(SCHEMA)
        .and_then(|()| migrate(&conn))
        .map_err(sqlite)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    }
    let redo_path = redo_path(path);
    let io = |source| StoreError::Io {
        path: redo_path.clone(),
        source,
    };
    let (mut redo, held) = Redo::open(&redo_path).map_err(io)?;
    let latest = latest_seq(&conn).map_err(sqlite)?;
    let recovered = redo::beyond(&held, latest);
    if !recovered.is_empty() {
        let tx = conn.unchecked_transaction().map_err(sqlite)?;
        for (event, json) in &recovered {
            writer::insert_event(&tx, event, json).map_err(sqlite)?;
        }
        tx.commit().map_err(sqlite)?;
    }
    redo.clear().map_err(io)?;
    let next_seq = latest + recovered.len() as u64 + 1;
    let reader_conn = open_conn(path)?;
    let (writer, shared) = StoreWriter::start(conn, path, redo, next_seq, recovered.len() as u64);
    let reader = StoreReader {
        conn: Arc::new(Mutex::new(reader_conn)),
        path: path.to_path_buf(),
        writer: shared,
        fold_warned: Arc::new(Mutex::new(None)),
    };
    Ok((writer, reader))
}

/// The redo log of the database at `path` (see [`redo`]).
pub fn redo_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-redo");
    PathBuf::from(name)
}

/// The last seq given: the newest event's, or, if a prune removed the
/// newest events, the highest it recorded (`seq_floor`).
fn latest_seq(conn: &Connection) -> Result<u64, rusqlite::Error> {
    conn.query_row(
        "SELECT MAX(COALESCE((SELECT MAX(seq) FROM events), 0),
                    COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'seq_floor'), 0))",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|v| v as u64)
}

/// One of this host's own events as stored (see
/// [`StoreReader::local_events_after`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalEvent {
    /// Its seq here.
    pub seq: u64,
    /// Its session.
    pub session: String,
    /// Its monitor.
    pub monitor_id: String,
    /// The event's JSON as stored (what `events --json` prints).
    pub json: String,
}

/// Queries; cheap to clone, usable from any task (each call is short).
#[derive(Clone)]
pub struct StoreReader {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
    writer: Arc<Shared>,
    /// When a failed fold was last logged.
    fold_warned: Arc<Mutex<Option<std::time::Instant>>>,
}

impl StoreReader {
    fn with<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, rusqlite::Error>,
    ) -> Result<T, StoreError> {
        self.folded();
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&conn).map_err(|source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        })
    }

    /// Puts every event handed out into the tables before anything is
    /// read; returns `false` when that failed (a full disk): the read
    /// goes on with the tables as they are (what still waits is in the
    /// redo log, safe; [`StoreReader::recorded_after`] adds it from
    /// memory), so a full disk never stops a read.
    fn folded(&self) -> bool {
        match self.writer.fold() {
            Ok(()) => true,
            Err(e) => {
                let now = std::time::Instant::now();
                let mut last = self.fold_warned.lock().unwrap_or_else(|p| p.into_inner());
                if last.is_none_or(|t| now.duration_since(t) >= std::time::Duration::from_secs(60))
                {
                    *last = Some(now);
                    tracing::warn!(
                        "database {}: events wait in the redo log, not yet in the tables ({e}); reads go on, and they go in once the disk has room",
                        self.path.display()
                    );
                }
                false
            }
        }
    }

    fn corrupt(&self, detail: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            detail: detail.into(),
        }
    }

    /// How far the cluster link shipped this host's events: every event of
    /// this host up to it is in the stream (0 when nothing was shipped).
    pub fn shipped_mark(&self) -> Result<u64, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM marks WHERE name = 'shipped'",
                [],
                |r| r.get::<_, i64>(0),
            )
        })
        .map(|v| v as u64)
    }

    /// This host's own events (recorded here: no origin) with seq > `after`,
    /// in order, at most `limit`: `(seq, session, monitor id, stored JSON)`.
    pub fn local_events_after(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LocalEvent>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT seq, session, monitor_id, json FROM events
                 WHERE seq > ?1 AND origin IS NULL ORDER BY seq LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![after as i64, limit as i64], |r| {
                Ok(LocalEvent {
                    seq: r.get::<_, i64>(0)? as u64,
                    session: r.get(1)?,
                    monitor_id: r.get(2)?,
                    json: r.get(3)?,
                })
            })?;
            rows.collect()
        })
    }

    /// How many of this host's own events have a seq above `after`.
    pub fn count_local_after(&self, after: u64) -> Result<u64, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM events WHERE seq > ?1 AND origin IS NULL",
                [after as i64],
                |r| r.get::<_, i64>(0),
            )
        })
        .map(|n| n as u64)
    }

    /// The seq of the last event (0 for an empty log).
    pub fn latest_seq(&self) -> Result<u64, StoreError> {
        let tables = self.with(latest_seq)?;
        Ok(tables.max(retention::Tables::last_taken(&*self.writer)))
    }

    /// Events with seq > `after`, in order, at most `limit`; only `session`'s
    /// (all sessions for `None`) and only `monitor`'s when given.
    pub fn events_after(
        &self,
        session: Option<&str>,
        monitor: Option<&str>,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let recorded = self.recorded_after(session, monitor, after, limit)?;
        Ok(recorded
            .into_iter()
            .map(|r| Arc::unwrap_or_clone(r.event))
            .collect())
    }

    /// Like [`StoreReader::events_after`], with each event's stored JSON
    /// (what readers are sent, as it is).
    pub fn recorded_after(
        &self,
        session: Option<&str>,
        monitor: Option<&str>,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Recorded>, StoreError> {
        // The limit is part of the SQL text, not a bound parameter: SQLite
        // plans a bound LIMIT with its value, so re-binding it would make
        // the cached statement re-prepare on every call.
        let sql = format!(
            "SELECT json FROM events WHERE seq > ?1
               AND (?2 IS NULL OR session = ?2)
               AND (?3 IS NULL OR monitor_id = ?3)
             ORDER BY seq LIMIT {limit}"
        );
        let folded = self.folded();
        let rows: Vec<String> = {
            let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
            let mut stmt = conn.prepare_cached(&sql).map_err(|e| self.sqlite(e))?;
            let rows = stmt
                .query_map(params![after as i64, session, monitor], |r| r.get(0))
                .map_err(|e| self.sqlite(e))?;
            rows.collect::<Result<_, _>>().map_err(|e| self.sqlite(e))?
        };
        let mut out: Vec<Recorded> = rows
            .into_iter()
            .map(|json| {
                let event =
                    serde_json::from_str(&json).map_err(|e| self.corrupt(format!("event: {e}")))?;
                Ok(Recorded {
                    event: Arc::new(event),
                    json: Some(Arc::from(json)),
                })
            })
            .collect::<Result<_, StoreError>>()?;
        if !folded && out.len() < limit {
            // What could not go into the tables is read from memory.
            let last = out.last().map_or(after, |r| r.event.seq);
            let waiting = self.writer.pending_after(session, monitor, last);
            out.extend(waiting.into_iter().take(limit - out.len()));
        }
        Ok(out)
    }

    fn sqlite(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Whether an event of this origin is stored (see
    /// [`JournalEntry::Imported`](wakeful_core::journal::JournalEntry::Imported)).
    pub fn has_origin(&self, origin: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            c.prepare_cached("SELECT 1 FROM events WHERE origin = ?1")?
                .exists([origin])
        })
    }

    /// Whether monitor `id` has events recorded here (not imported): it
    /// is this state directory's own monitor.
    pub fn has_local_events(&self, id: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT 1 FROM events WHERE monitor_id = ?1 AND origin IS NULL LIMIT 1",
            )?
            .exists([id])
        })
    }

    /// What prunes removed, oldest first (those at or after `since`).
    pub fn prunes(
        &self,
        since: Option<DateTime<Utc>>,
    ) -> Result<Vec<wakeful_core::storage::PruneRecord>, StoreError> {
        let rows = self.with(|c| retention::prunes_since(c, since))?;
        rows.iter()
            .map(|j| serde_json::from_str(j).map_err(|e| self.corrupt(format!("prune: {e}"))))
            .collect()
    }

    /// Where `consumer` of `session` acknowledged up to (0: nothing yet).
    pub fn cursor(&self, session: &str, consumer: &str) -> Result<u64, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT seq FROM cursors WHERE session = ?1 AND consumer = ?2",
                params![session, consumer],
                |r| r.get::<_, i64>(0),
            )
            .optional()
        })
        .map(|v| v.unwrap_or(0) as u64)
    }

    /// Every consumer cursor of `session` (all sessions for `None`), with how
    /// many of the session's events lie after it: (session, consumer, acked
    /// seq, unacknowledged events), by session and consumer.
    pub fn consumers(
        &self,
        session: Option<&str>,
    ) -> Result<Vec<(String, String, u64, u64)>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT c.session, c.consumer, c.seq,
                        (SELECT COUNT(*) FROM events e WHERE e.session = c.session AND e.seq > c.seq)
                   FROM cursors c WHERE (?1 IS NULL OR c.session = ?1)
                  ORDER BY c.session, c.consumer",
            )?;
            let rows = stmt.query_map([session], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)? as u64,
                    r.get::<_, i64>(3)? as u64,
                ))
            })?;
            rows.collect()
        })
    }

    /// How many of `session`'s events have a seq above `after`.
    pub fn count_after(&self, session: &str, after: u64) -> Result<u64, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM events WHERE session = ?1 AND seq > ?2",
                params![session, after as i64],
                |r| r.get::<_, i64>(0),
            )
        })
        .map(|n| n as u64)
    }

    /// The last seq of `session`'s events (0 when it has none).
    pub fn latest_seq_of(&self, session: &str) -> Result<u64, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session = ?1",
                [session],
                |r| r.get::<_, i64>(0),
            )
        })
        .map(|v| v as u64)
    }

    /// The furthest cursor of `session`'s consumers: every event up to it
    /// reached the agent by one path or another (0 when none did). The
    /// consumers of one monitor (`wait --monitor`, named after it) do not
    /// count: their cursor passes other monitors' events unread.
    pub fn furthest_cursor(&self, session: &str) -> Result<u64, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM cursors WHERE session = ?1 AND consumer NOT LIKE 'mon-%'",
                [session],
                |r| r.get::<_, i64>(0),
            )
        })
        .map(|v| v as u64)
    }

    /// `session`'s final events (`stopped`, `failed`) after `after`, newest
    /// first, at most `limit`, and how many there are in all.
    pub fn endings_after(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<(Vec<Event>, u64), StoreError> {
        const ENDED: &str = "session = ?1 AND seq > ?2 AND kind IN ('stopped', 'failed')";
        let sql = format!("SELECT json FROM events WHERE {ENDED} ORDER BY seq DESC LIMIT {limit}");
        let (rows, total): (Vec<String>, i64) = self.with(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let rows = stmt
                .query_map(params![session, after as i64], |r| r.get(0))?
                .collect::<Result<Vec<String>, _>>()?;
            let total = c.query_row(
                &format!("SELECT COUNT(*) FROM events WHERE {ENDED}"),
                params![session, after as i64],
                |r| r.get(0),
            )?;
            Ok((rows, total))
        })?;
        let events = rows
            .iter()
            .map(|j| serde_json::from_str(j).map_err(|e| self.corrupt(format!("event: {e}"))))
            .collect::<Result<Vec<Event>, _>>()?;
        Ok((events, total as u64))
    }

    /// `session`'s events after `after`, counted by monitor id.
    pub fn unread_by_monitor(
        &self,
        session: &str,
        after: u64,
    ) -> Result<std::collections::HashMap<String, u64>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT monitor_id, COUNT(*) FROM events WHERE session = ?1 AND seq > ?2 GROUP BY monitor_id",
            )?;
            let rows = stmt.query_map(params![session, after as i64], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
            })?;
            rows.collect()
        })
    }

    /// Stored wake routes: (session, route JSON).
    pub fn wake_routes(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare_cached("SELECT session, route FROM wake_routes")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })
    }

    /// Every terminal the store knows, running or not.
    pub fn terminals(&self) -> Result<Vec<TerminalInfo>, StoreError> {
        let rows: Vec<String> = self.with(|c| {
            let mut stmt = c.prepare_cached("SELECT info FROM terminals")?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            rows.collect()
        })?;
        rows.iter()
            .map(|j| serde_json::from_str(j).map_err(|e| self.corrupt(format!("terminal: {e}"))))
            .collect()
    }

    /// Monitors whose row says they were running.
    pub fn running_monitors(&self) -> Result<Vec<StoredMonitor>, StoreError> {
        self.monitors_where("running = 1")
    }

    /// Monitors that ended at or after `since`.
    pub fn ended_since(&self, since: DateTime<Utc>) -> Result<Vec<MonitorInfo>, StoreError> {
        Ok(self
            .monitors_where("running = 0")?
            .into_iter()
            .map(|m| m.info)
            .filter(|i| i.ended_at.is_some_and(|t| t >= since))
            .collect())
    }

    /// One monitor by id.
    pub fn monitor(&self, id: &str) -> Result<Option<StoredMonitor>, StoreError> {
        let mut v = self.monitors_where_id(id)?;
        Ok(v.pop())
    }

    fn monitors_where_id(&self, id: &str) -> Result<Vec<StoredMonitor>, StoreError> {
        let rows = self.with(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT info, spec, base_env, base_cwd, pid, start_ticks, events, lines, suppressed_lines
                 FROM monitors WHERE id = ?1",
            )?;
            let rows = stmt.query_map([id], row_tuple)?;
            rows.collect::<Result<Vec<_>, _>>()
        })?;
        rows.into_iter().map(|r| self.decode(r)).collect()
    }

    fn monitors_where(&self, cond: &'static str) -> Result<Vec<StoredMonitor>, StoreError> {
        let sql = format!(
            "SELECT info, spec, base_env, base_cwd, pid, start_ticks, events, lines, suppressed_lines
             FROM monitors WHERE {cond}"
        );
        let rows = self.with(|c| {
            let mut stmt = c.prepare(&sql)?;
            let rows = stmt.query_map([], row_tuple)?;
            rows.collect::<Result<Vec<_>, _>>()
        })?;
        rows.into_iter().map(|r| self.decode(r)).collect()
    }

    fn decode(&self, r: RowTuple) -> Result<StoredMonitor, StoreError> {
        let (info, spec, env, cwd, pid, ticks, counters) = r;
        let mut info: MonitorInfo =
            serde_json::from_str(&info).map_err(|e| self.corrupt(format!("monitor: {e}")))?;
        writer::take_counters(&mut info, counters);
        Ok(StoredMonitor {
            info,
            spec: serde_json::from_str(&spec).map_err(|e| self.corrupt(format!("spec: {e}")))?,
            base_env: env
                .map(|e| serde_json::from_str(&e))
                .transpose()
                .map_err(|e| self.corrupt(format!("env: {e}")))?,
            base_cwd: cwd.map(PathBuf::from),
            pid,
            start_ticks: ticks.map(|t| t as u64),
        })
    }
}

type RowTuple = (
    String,
    String,
    Option<String>,
    Option<String>,
    Option<i32>,
    Option<i64>,
    writer::CounterColumns,
);

fn row_tuple(r: &rusqlite::Row<'_>) -> Result<RowTuple, rusqlite::Error> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        writer::counter_columns(r, 6)?,
    ))
}

/// Events for the unit tests of this crate's modules.
#[cfg(test)]
pub(crate) mod test_events {
    use wakeful_core::journal::JournalEntry;
    use wakeful_core::{EventBody, PendingEvent};

    /// A monitor's counters: `lines` events, lines read, lines suppressed.
    pub(crate) fn counters(
        monitor: &str,
        events: u64,
        lines: u64,
        suppressed: u64,
    ) -> JournalEntry {
        JournalEntry::Counters {
            monitor_id: monitor.into(),
            events,
            lines,
            suppressed_lines: suppressed,
        }
    }

    /// Output line `n` of monitor `m` in session `s`, as one event.
    pub(crate) fn line(n: u64) -> PendingEvent {
        PendingEvent {
            wakes: true,
            session: "s".into(),
            monitor_id: "m".into(),
            ts: chrono::Utc::now(),
            text: format!("line {n}"),
            body: EventBody::MonitorEvent {
                lines: vec![format!("line {n}")],
                from_line: n,
                to_line: n,
            },
            replayed: false,
            host: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wakeful_core::journal::{Journal, JournalEntry, Registration};
    use wakeful_core::{EventBody, MonitorState, MonitorStopReason, PendingEvent};

    fn pending(monitor: &str, body: EventBody) -> JournalEntry {
        JournalEntry::Event(PendingEvent {
            wakes: true,
            session: "s".into(),
            monitor_id: monitor.into(),
            ts: Utc::now(),
            text: "t".into(),
            body,
            replayed: false,
            host: None,
        })
    }

    /// An event of monitor `monitor`, imported from `origin`.
    fn imported_as(origin: &str, monitor: &str, body: EventBody) -> JournalEntry {
        JournalEntry::Imported {
            origin: origin.into(),
            event: PendingEvent {
                session: "s".into(),
                monitor_id: monitor.into(),
                ts: Utc::now(),
                text: "t".into(),
                body,
                wakes: true,
                replayed: false,
                host: None,
            },
        }
    }

    fn info(id: &str) -> MonitorInfo {
        MonitorInfo::starting(
            id.into(),
            "s".into(),
            &MonitorSpec::command("true", "d"),
            "/x".into(),
        )
    }

    #[test]
    fn seqs_survive_reopen_and_monitor_rows_follow_events() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        {
            let (mut w, r) = open(&db).unwrap();
            let mut batch = vec![
                JournalEntry::Registered(Box::new(Registration {
                    info: info("m1"),
                    spec: MonitorSpec::command("true", "d"),
                    base_env: Some(BTreeMap::from([("A".into(), "1".into())])),
                    base_cwd: Some("/tmp".into()),
                })),
                pending("m1", EventBody::MonitorStarted),
                JournalEntry::Spawned {
                    monitor_id: "m1".into(),
                    pid: 42,
                    start_ticks: 7,
                },
            ];
            let evs = w.append(&mut batch).unwrap();
            assert_eq!(evs[0].event.seq, 1);
            assert_eq!(r.running_monitors().unwrap()[0].pid, Some(42));
            let mut batch = vec![pending(
                "m1",
                EventBody::MonitorStopped {
                    reason: MonitorStopReason::ExitCode { code: 0 },
                    last_lines: vec![],
                    survivors: vec![],
                    unverified: None,
                },
            )];
            assert_eq!(w.append(&mut batch).unwrap()[0].event.seq, 2);
            assert!(r.running_monitors().unwrap().is_empty());
            let m = r.monitor("m1").unwrap().unwrap();
            assert_eq!(m.info.state, MonitorState::Ended);
            assert_eq!(m.base_env.unwrap()["A"], "1");
        }
        let (mut w, r) = open(&db).unwrap();
        assert_eq!(r.latest_seq().unwrap(), 2);
        let mut batch = vec![pending("m2", EventBody::MonitorStarted)];
        assert_eq!(w.append(&mut batch).unwrap()[0].event.seq, 3);
        let all = r.events_after(Some("s"), None, 0, 100).unwrap();
        assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(r.events_after(None, Some("m2"), 0, 100).unwrap().len(), 1);
        assert_eq!(
            r.events_after(Some("other"), None, 0, 100).unwrap().len(),
            0
        );
    }

    #[test]
    fn counters_reach_the_monitor_row_and_leave_the_rest_of_it_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let (mut w, r) = open(&db).unwrap();
        let registered = |id: &str| {
            JournalEntry::Registered(Box::new(Registration {
                info: info(id),
                spec: MonitorSpec::command("true", "d"),
                base_env: None,
                base_cwd: None,
            }))
        };
        let counters = |id: &str, n: u64| test_events::counters(id, n, n * 10, n * 100);
        w.append(&mut vec![registered("m1"), registered("m2")])
            .unwrap();
        let before = r.monitor("m1").unwrap().unwrap().info;
        // Taken with the events (the redo log), folded before a read.
        w.append(&mut vec![
            pending("m1", EventBody::MonitorStarted),
            counters("m1", 3),
        ])
        .unwrap();
        w.append(&mut vec![counters("m1", 4), counters("m2", 1)])
            .unwrap();
        let after = r.monitor("m1").unwrap().unwrap().info;
        assert_eq!(
            (after.events, after.lines, after.suppressed_lines),
            (4, 40, 400)
        );
        let mut expected = before.clone();
        (expected.events, expected.lines, expected.suppressed_lines) = (4, 40, 400);
        assert_eq!(
            serde_json::to_value(&after).unwrap(),
            serde_json::to_value(&expected).unwrap()
        );
        assert_eq!(r.monitor("m2").unwrap().unwrap().info.lines, 10);
        // A row that is not JSON is left as it is; the fold goes on.
        Connection::open(&db)
            .unwrap()
            .execute("UPDATE monitors SET info = 'not json' WHERE id = 'm2'", [])
            .unwrap();
        w.append(&mut vec![counters("m2", 2), counters("m1", 5)])
            .unwrap();
        assert_eq!(r.monitor("m1").unwrap().unwrap().info.events, 5);
        let raw: String = Connection::open(&db)
            .unwrap()
            .query_row("SELECT info FROM monitors WHERE id = 'm2'", [], |row| {
                row.get(0)
            })
            .unwrap();
        assert_eq!(raw, "not json");
    }

    #[test]
    fn a_schema_2_database_gets_counter_columns_that_a_final_event_takes_in() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("v2.db");
        let mut stored = info("m1");
        (stored.events, stored.lines, stored.suppressed_lines) = (1, 2, 3);
        {
            // The monitors table as schema 2 made it: no counter columns.
            let c = Connection::open(&db).unwrap();
            c.execute_batch(
                "CREATE TABLE monitors (id TEXT PRIMARY KEY, session TEXT NOT NULL,
                    info TEXT NOT NULL, spec TEXT NOT NULL, base_env TEXT, base_cwd TEXT,
                    running INTEGER NOT NULL, persistent INTEGER NOT NULL,
                    pid INTEGER, start_ticks INTEGER);
                 CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 INSERT INTO meta VALUES ('schema', '2');",
            )
            .unwrap();
            c.execute(
                "INSERT INTO monitors(id, session, info, spec, running, persistent)
                 VALUES ('m1', 's', ?1, ?2, 1, 0)",
                [
                    serde_json::to_string(&stored).unwrap(),
                    serde_json::to_string(&MonitorSpec::command("true", "d")).unwrap(),
                ],
            )
            .unwrap();
        }
        let (mut w, r) = open(&db).unwrap();
        // The row as it was: no counter set yet.
        let m = r.monitor("m1").unwrap().unwrap().info;
        assert_eq!((m.events, m.lines, m.suppressed_lines), (1, 2, 3));
        // A fold sets the columns; readers see them over `info`, which
        // stays as it was written.
        w.append(&mut vec![test_events::counters("m1", 7, 70, 700)])
            .unwrap();
        let m = r.running_monitors().unwrap().remove(0).info;
        assert_eq!((m.events, m.lines, m.suppressed_lines), (7, 70, 700));
        let raw = |sql: &str| -> String {
            Connection::open(&db)
                .unwrap()
                .query_row(sql, [], |row| row.get(0))
                .unwrap()
        };
        assert_eq!(
            raw("SELECT info FROM monitors WHERE id = 'm1'"),
            serde_json::to_string(&stored).unwrap()
        );
        // The final event rewrites `info`: the counters go into it and the
        // columns are cleared, so that `info` alone says it again.
        let stopped = pending(
            "m1",
            EventBody::MonitorStopped {
                reason: MonitorStopReason::ExitCode { code: 0 },
                last_lines: vec![],
                survivors: vec![],
                unverified: None,
            },
        );
        w.append(&mut vec![stopped]).unwrap();
        let m = r.monitor("m1").unwrap().unwrap().info;
        assert_eq!(m.state, MonitorState::Ended);
        assert_eq!((m.events, m.lines, m.suppressed_lines), (7, 70, 700));
        assert_eq!(
            raw("SELECT coalesce(events, lines, suppressed_lines, 'cleared') FROM monitors"),
            "cleared"
        );
        let in_info: MonitorInfo =
            serde_json::from_str(&raw("SELECT info FROM monitors WHERE id = 'm1'")).unwrap();
        assert_eq!(in_info.lines, 70);
        assert_eq!(
            raw("SELECT value FROM meta WHERE key = 'schema'"),
            SCHEMA_VERSION.to_string()
        );
        // A monitor sends its last counters after its final event (as the
        // engine does): they set the columns again, and readers see them.
        w.append(&mut vec![test_events::counters("m1", 8, 80, 700)])
            .unwrap();
        let m = r.monitor("m1").unwrap().unwrap().info;
        assert_eq!((m.events, m.lines, m.suppressed_lines), (8, 80, 700));
        assert_eq!(m.state, MonitorState::Ended);
    }

    #[test]
    fn an_imported_event_is_stored_once_per_origin() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, r) = open(&dir.path().join("w.db")).unwrap();
        let imported = |origin: &str, body: EventBody| imported_as(origin, "m1", body);
        let mut ended = info("m1");
        ended.state = MonitorState::Ended;
        let mut batch = vec![
            pending("local", EventBody::MonitorStarted),
            JournalEntry::Registered(Box::new(Registration {
                info: ended,
                spec: MonitorSpec::command("true", "d"),
                base_env: None,
                base_cwd: None,
            })),
            imported("h/1", EventBody::MonitorStarted),
            imported("h/2", EventBody::MonitorRearmed),
        ];
        let got = w.append(&mut batch).unwrap();
        assert_eq!(
            got.iter().map(|r| r.event.seq).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        // Imported monitors are not running: nothing to re-arm or end.
        assert!(r.running_monitors().unwrap().is_empty());
        // Again, with one new event: only that one is stored, next in line,
        // with the wake flag it was recorded with.
        let mut quiet = imported("h/3", EventBody::MonitorRearmed);
        if let JournalEntry::Imported { event, .. } = &mut quiet {
            event.wakes = false;
            event.replayed = true;
        }
        let mut again = vec![
            imported("h/1", EventBody::MonitorStarted),
            imported("h/2", EventBody::MonitorRearmed),
            quiet,
        ];
        let got = w.append(&mut again).unwrap();
        assert_eq!(got.iter().map(|r| r.event.seq).collect::<Vec<_>>(), [4]);
        let stored = r.events_after(None, None, 3, 10).unwrap();
        assert_eq!(stored.len(), 1);
        assert!(!stored[0].wakes && stored[0].replayed);
        assert_eq!(r.latest_seq().unwrap(), 4);
        assert!(r.has_origin("h/3").unwrap());
        assert!(!r.has_origin("h/4").unwrap());
        assert!(r.has_local_events("local").unwrap());
        assert!(!r.has_local_events("m1").unwrap());
    }

    #[test]
    fn a_schema_1_database_gets_the_origin_column() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("old.db");
        {
            let c = Connection::open(&db).unwrap();
            c.execute_batch(
                "CREATE TABLE events (seq INTEGER PRIMARY KEY, session TEXT NOT NULL,
                    monitor_id TEXT NOT NULL, kind TEXT NOT NULL, json TEXT NOT NULL);
                 CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 INSERT INTO meta VALUES ('schema', '1');",
            )
            .unwrap();
            c.execute(
                "INSERT INTO events VALUES (1, 's', 'm', 'started', ?1)",
                [r#"{"seq":1,"session":"s","monitor_id":"m","kind":"started","ts":"2026-01-01T00:00:00.000Z","text":"x"}"#],
            )
            .unwrap();
        }
        let (mut w, r) = open(&db).unwrap();
        assert_eq!(r.events_after(None, None, 0, 10).unwrap().len(), 1);
        let entry = || imported_as("h/9", "m2", EventBody::MonitorStarted);
        assert_eq!(w.append(&mut vec![entry()]).unwrap()[0].event.seq, 2);
        assert!(w.append(&mut vec![entry()]).unwrap().is_empty());
        let schema: String = r
            .with(|c| {
                c.query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| {
                    r.get(0)
                })
            })
            .unwrap();
        assert_eq!(schema, SCHEMA_VERSION.to_string());
        drop((w, r));
        // Opening again changes nothing.
        let (_, r) = open(&db).unwrap();
        assert_eq!(r.latest_seq().unwrap(), 2);
    }

    #[test]
    fn an_origin_index_of_every_row_becomes_partial() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("v2.db");
        drop(open(&db).unwrap());
        // As the first schema-2 build left it: every row in the index.
        Connection::open(&db)
            .unwrap()
            .execute_batch(
                "DROP INDEX events_by_origin;
                 CREATE UNIQUE INDEX events_by_origin ON events(origin);",
            )
            .unwrap();
        let (mut w, r) = open(&db).unwrap();
        let sql: String = r
            .with(|c| {
                c.query_row(
                    "SELECT sql FROM sqlite_master WHERE name = 'events_by_origin'",
                    [],
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert!(sql.contains("WHERE origin IS NOT NULL"), "{sql}");
        // Still one event per origin.
        let entry = || imported_as("h/1", "m", EventBody::MonitorStarted);
        assert_eq!(w.append(&mut vec![entry()]).unwrap().len(), 1);
        assert!(w.append(&mut vec![entry(), entry()]).unwrap().is_empty());
    }

    #[test]
    fn the_shipped_mark_and_local_events() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, r) = open(&dir.path().join("w.db")).unwrap();
        assert_eq!(r.shipped_mark().unwrap(), 0);
        let mut imported = imported_as("h/1", "far", EventBody::MonitorStarted);
        if let JournalEntry::Imported { event, .. } = &mut imported {
            event.host = Some("h".into());
        }
        let mut batch = vec![
            pending("m1", EventBody::MonitorStarted),
            imported,
            pending("m1", EventBody::MonitorRearmed),
        ];
        w.append(&mut batch).unwrap();
        let local = r.local_events_after(0, 10).unwrap();
        assert_eq!(local.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(local[0].monitor_id, "m1");
        assert!(local[1].json.contains(r#""kind":"rearmed""#));
        assert_eq!(r.count_local_after(1).unwrap(), 1);
        // The imported event keeps its host.
        let far = r.events_after(None, Some("far"), 0, 10).unwrap();
        assert_eq!(far[0].host.as_deref(), Some("h"));
        w.append(&mut vec![JournalEntry::Shipped { seq: 3 }])
            .unwrap();
        w.append(&mut vec![JournalEntry::Shipped { seq: 1 }])
            .unwrap();
        assert_eq!(r.shipped_mark().unwrap(), 3);
        assert_eq!(r.count_local_after(3).unwrap(), 0);
    }

    #[test]
    fn cursors_never_move_back() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, r) = open(&dir.path().join("w.db")).unwrap();
        let ack = |seq| JournalEntry::Ack {
            session: "s".into(),
            consumer: "c".into(),
            seq,
        };
        w.append(&mut vec![ack(5)]).unwrap();
        assert_eq!(r.cursor("s", "c").unwrap(), 5);
        w.append(&mut vec![ack(3)]).unwrap();
        assert_eq!(r.cursor("s", "c").unwrap(), 5);
        assert_eq!(r.cursor("s", "other").unwrap(), 0);
        assert_eq!(
            r.consumers(Some("s")).unwrap(),
            [("s".to_string(), "c".to_string(), 5, 0)]
        );
        assert!(r.consumers(Some("t")).unwrap().is_empty());
    }

    fn line(n: u64) -> JournalEntry {
        pending(
            "m1",
            EventBody::MonitorEvent {
                lines: vec![format!("line {n}")],
                from_line: n,
                to_line: n,
            },
        )
    }

    #[test]
    fn events_are_read_back_before_they_are_folded_into_the_tables() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, r) = open(&dir.path().join("w.db")).unwrap();
        let out = w.append(&mut vec![line(1), line(2)]).unwrap();
        assert_eq!(
            out.iter().map(|e| e.event.seq).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert!(w.needs_flush(), "events wait in the redo log");
        // A read folds them in first: a query sees every event handed out.
        let seen = r.events_after(None, None, 0, 10).unwrap();
        assert_eq!(seen.len(), 2);
        assert!(!w.needs_flush());
        // Another kind of entry folds what is pending before its own
        // transaction, in order.
        w.append(&mut vec![line(3)]).unwrap();
        w.append(&mut vec![JournalEntry::Ack {
            session: "s".into(),
            consumer: "c".into(),
            seq: 3,
        }])
        .unwrap();
        assert!(!w.needs_flush());
        assert_eq!(r.latest_seq().unwrap(), 3);
        assert_eq!(r.cursor("s", "c").unwrap(), 3);
    }

    #[test]
    fn events_handed_out_survive_a_kill_before_they_reach_the_tables() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        {
            let (mut w, r) = open(&db).unwrap();
            w.append(&mut vec![line(1)]).unwrap();
            w.flush().unwrap();
            assert!(!w.needs_flush());
            w.append(&mut vec![line(2), line(3)]).unwrap();
            w.append(&mut vec![line(4)]).unwrap();
            assert!(w.needs_flush());
            // Killed: nothing runs after the appends (no flush, no drop).
            std::mem::forget(w);
            drop(r);
        }
        let held = std::fs::read(redo_path(&db)).unwrap();
        assert_eq!(
            held.split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .count(),
            4
        );
        let (mut w, r) = open(&db).unwrap();
        assert_eq!(w.recovered(), 3);
        let texts: Vec<(u64, String)> = r
            .events_after(None, None, 0, 10)
            .unwrap()
            .into_iter()
            .map(|e| (e.seq, e.text))
            .collect();
        assert_eq!(texts.len(), 4);
        assert_eq!(texts[3], (4, "t".into()));
        // Seqs go on after the recovered ones; the redo log was emptied.
        assert_eq!(std::fs::metadata(redo_path(&db)).unwrap().len(), 0);
        assert_eq!(w.append(&mut vec![line(5)]).unwrap()[0].event.seq, 5);
    }

    #[test]
    fn a_clean_close_leaves_nothing_in_the_redo_log() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        {
            let (mut w, _r) = open(&db).unwrap();
            w.append(&mut vec![line(1), line(2)]).unwrap();
        }
        assert_eq!(std::fs::metadata(redo_path(&db)).unwrap().len(), 0);
        let (w, r) = open(&db).unwrap();
        assert_eq!(w.recovered(), 0);
        assert_eq!(r.latest_seq().unwrap(), 2);
    }
}

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
