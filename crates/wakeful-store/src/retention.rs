//! Pruning: removing ended monitors' events and rows, recording what was
//! removed, and giving the space back to the filesystem (docs/STORAGE.md).
//!
//! Which monitors go is decided by the pure
//! [`wakeful_core::storage::plan`]; this module finds the candidates,
//! measures the database, removes what the plan names and reclaims the
//! space. A [`Pruner`] reads through a connection of its own (finding the
//! candidates scans the events table; the store's reader is never held up
//! by it) and writes through the writer's connection in short
//! transactions, a few thousand rows each, so that folds and reads go on
//! between them and a daemon killed in the middle of a prune leaves a
//! consistent store (every transaction is whole; the next prune goes on
//! where this one stopped).
//!
//! Seqs are never given twice: before the first row goes, the highest seq
//! given so far is written to `meta` (`seq_floor`), which a reopened store
//! counts on from even when a prune removed the newest events.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};
use wakeful_core::storage::{Candidate, PruneRecord};
use wakeful_core::MonitorInfo;

use crate::{open_conn, StoreError};

/// What a prune needs of the writer's side: the writer implements it, so
/// this module knows nothing of how events are taken and folded.
pub(crate) trait Tables: Send + Sync {
    /// The write connection (a prune writes in short transactions of its
    /// own, between folds).
    fn tables(&self) -> MutexGuard<'_, Connection>;
    /// The database file.
    fn path(&self) -> &Path;
    /// The redo log's size.
    fn redo_len(&self) -> u64;
    /// The seq of the newest event taken.
    fn last_taken(&self) -> u64;
}

/// Rows removed per transaction.
const CHUNK: i64 = 2_000;

/// What [`Pruner::forget`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forgotten {
    /// Events.
    pub events: u64,
    /// Monitor and terminal rows.
    pub monitors: u64,
}

/// Removes what a prune plan names; see the module docs.
pub struct Pruner {
    conn: Mutex<Connection>,
    shared: Arc<dyn Tables>,
}

impl std::fmt::Debug for Pruner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pruner")
            .field("path", &self.shared.path())
            .finish_non_exhaustive()
    }
}

impl Pruner {
    pub(crate) fn new(shared: Arc<dyn Tables>) -> Result<Pruner, StoreError> {
        let conn = open_conn(shared.path())?;
        Ok(Pruner {
            conn: Mutex::new(conn),
            shared,
        })
    }

    fn sqlite(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.shared.path().to_path_buf(),
            source,
        }
    }

    fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, rusqlite::Error>,
    ) -> Result<T, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&conn).map_err(|e| self.sqlite(e))
    }

    /// What the database takes on disk: the file, its WAL and the redo
    /// log.
    pub fn database_bytes(&self) -> u64 {
        let path = self.shared.path();
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        size(path) + size(Path::new(&wal)) + self.shared.redo_len()
    }

    /// Every ended monitor and terminal the store holds, and the events
    /// of monitors it has no row of (imported from elsewhere) whose last
    /// event ended them, with what their events take; `output_bytes`
    /// tells what a monitor's output files take.
    pub fn candidates(
        &self,
        output_bytes: &dyn Fn(&str) -> u64,
    ) -> Result<Vec<Candidate>, StoreError> {
        let rows: Vec<(String, String, i64, i64)> = self.read(|c| {
            let mut stmt = c.prepare(
                "SELECT m.id, m.info,
                        (SELECT COUNT(*) FROM events e WHERE e.monitor_id = m.id),
                        (SELECT COALESCE(SUM(LENGTH(e.json)), 0) FROM events e WHERE e.monitor_id = m.id)
                   FROM monitors m WHERE m.running = 0",
            )?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
            rows.collect()
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, info, events, bytes) in rows {
            // A row this build cannot read is left alone.
            let Ok(info) = serde_json::from_str::<MonitorInfo>(&info) else {
                continue;
            };
            let Some(ended_at) = info.ended_at else {
                continue;
            };
            out.push(Candidate {
                output_bytes: output_bytes(&id),
                id,
                ended_at,
                events: events as u64,
                event_bytes: bytes as u64,
            });
        }
        let terminals: Vec<(String, String)> = self.read(|c| {
            let mut stmt = c.prepare("SELECT id, info FROM terminals WHERE running = 0")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })?;
        for (id, info) in terminals {
            let Ok(info) = serde_json::from_str::<wakeful_core::terminal::TerminalInfo>(&info)
            else {
                continue;
            };
            let Some(ended_at) = info.ended_at else {
                continue;
            };
            out.push(Candidate {
                output_bytes: output_bytes(&id),
                id,
                ended_at,
                events: 0,
                event_bytes: 0,
            });
        }
        // Events of monitors without a row: those whose last event is a
        // final one are ended monitors of another host.
        let orphans: Vec<(String, i64, i64, String, String)> = self.read(|c| {
            let mut stmt = c.prepare(
                "SELECT g.monitor_id, g.n, g.bytes, e.kind, e.json FROM
                   (SELECT monitor_id, COUNT(*) AS n, SUM(LENGTH(json)) AS bytes, MAX(seq) AS last
                      FROM events WHERE monitor_id NOT IN (SELECT id FROM monitors)
                     GROUP BY monitor_id) g
                   JOIN events e ON e.seq = g.last",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })?;
            rows.collect()
        })?;
        for (id, events, bytes, kind, json) in orphans {
            if kind != "stopped" && kind != "failed" {
                continue;
            }
            let Ok(last) = serde_json::from_str::<wakeful_core::Event>(&json) else {
                continue;
            };
            out.push(Candidate {
                output_bytes: output_bytes(&id),
                id,
                ended_at: last.ts,
                events: events as u64,
                event_bytes: bytes as u64,
            });
        }
        Ok(out)
    }

    /// Removes the events and rows of `ids` (and cursors of consumers
    /// named after them), in short transactions.
    pub fn forget(&self, ids: &[String]) -> Result<Forgotten, StoreError> {
        let mut done = Forgotten::default();
        if ids.is_empty() {
            return Ok(done);
        }
        self.keep_seq_floor()?;
        for id in ids {
            loop {
                let n = self.write(|tx| {
                    tx.execute(
                        "DELETE FROM events WHERE seq IN
                           (SELECT seq FROM events WHERE monitor_id = ?1 LIMIT ?2)",
                        params![id, CHUNK],
                    )
                })?;
                done.events += n as u64;
                if (n as i64) < CHUNK {
                    break;
                }
            }
            // The row goes last: a prune cut short finds it again.
            done.monitors += self.write(|tx| {
                tx.execute("DELETE FROM cursors WHERE consumer = ?1", [id])?;
                let m = tx.execute("DELETE FROM monitors WHERE id = ?1", [id])?;
                let t = tx.execute("DELETE FROM terminals WHERE id = ?1", [id])?;
                Ok((m + t) as u64)
            })?;
        }
        Ok(done)
    }

    /// Writes the highest seq given so far to `meta`: it stays the floor
    /// of the next, whatever a prune removes.
    fn keep_seq_floor(&self) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO meta(key, value) VALUES ('seq_floor', ?1)
                 ON CONFLICT(key) DO UPDATE
                   SET value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
                [self.shared.last_taken() as i64],
            )?;
            Ok(())
        })
    }

    /// Removes the oldest events of running monitors, about `bytes` of
    /// them (their JSON), oldest first across monitors; each monitor's
    /// `started` event stays. Only asked for when the store is over
    /// `max_size` with every ended monitor gone (docs/STORAGE.md). Returns
    /// the events removed and how many monitors they belonged to; with
    /// `dry_run`, what would be removed, removing nothing.
    pub fn trim_running(&self, bytes: u64, dry_run: bool) -> Result<Forgotten, StoreError> {
        const RUNNING: &str = "FROM events e JOIN monitors m ON m.id = e.monitor_id
                                WHERE m.running = 1 AND e.kind != 'started'";
        if bytes == 0 {
            return Ok(Forgotten::default());
        }
        let (cut, monitors, count) = self.read(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT e.seq, LENGTH(e.json), e.monitor_id {RUNNING} ORDER BY e.seq"
            ))?;
            let mut rows = stmt.query([])?;
            let mut sum = 0u64;
            let mut cut = None;
            let mut count = 0u64;
            let mut ids = std::collections::HashSet::new();
            while let Some(r) = rows.next()? {
                let seq: i64 = r.get(0)?;
                let len: i64 = r.get(1)?;
                let id: String = r.get(2)?;
                sum += len.max(0) as u64;
                ids.insert(id);
                cut = Some(seq);
                count += 1;
                if sum >= bytes {
                    break;
                }
            }
            Ok((cut, ids.len() as u64, count))
        })?;
        let Some(cut) = cut else {
            return Ok(Forgotten::default());
        };
        if dry_run {
            return Ok(Forgotten {
                events: count,
                monitors,
            });
        }
        self.keep_seq_floor()?;
        let mut events = 0u64;
        loop {
            let n = self.write(|tx| {
                tx.execute(
                    &format!(
                        "DELETE FROM events WHERE seq IN
                           (SELECT e.seq {RUNNING} AND e.seq <= ?1 LIMIT ?2)"
                    ),
                    params![cut, CHUNK],
                )
            })?;
            events += n as u64;
            if (n as i64) < CHUNK {
                break;
            }
        }
        Ok(Forgotten { events, monitors })
    }

    /// Runs `f` in a transaction of the writer's connection.
    fn write<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, rusqlite::Error>,
    ) -> Result<T, StoreError> {
        let mut conn = self.shared.tables();
        let tx = conn.transaction().map_err(|e| self.sqlite(e))?;
        let out = f(&tx).map_err(|e| self.sqlite(e))?;
        tx.commit().map_err(|e| self.sqlite(e))?;
        Ok(out)
    }

    /// The oldest event left: its seq and time.
    pub fn oldest_kept(&self) -> Result<Option<(u64, DateTime<Utc>)>, StoreError> {
        let json: Option<String> = self.read(|c| {
            c.query_row("SELECT json FROM events ORDER BY seq LIMIT 1", [], |r| {
                r.get(0)
            })
            .optional()
        })?;
        Ok(json
            .and_then(|j| serde_json::from_str::<wakeful_core::Event>(&j).ok())
            .map(|e| (e.seq, e.ts)))
    }

    /// Keeps `record` (status, export and the views show it).
    pub fn record(&self, record: &PruneRecord) -> Result<(), StoreError> {
        let json = serde_json::to_string(record).map_err(|e| StoreError::Corrupt {
            path: self.shared.path().to_path_buf(),
            detail: format!("prune record: {e}"),
        })?;
        self.write(|tx| {
            tx.execute(
                "INSERT INTO prunes(at, record) VALUES (?1, ?2)",
                params![wakeful_core::event::format_ts(&record.at), json],
            )?;
            Ok(())
        })
    }

    /// Gives the database's free pages back to the filesystem and
    /// truncates its WAL. A database made before incremental vacuum
    /// (schema 3 and older) is converted once, with a full VACUUM, when
    /// `free` bytes leave room for its copy; until then its free pages are
    /// reused by new events. Returns the bytes the files shrank by.
    pub fn reclaim(&self, free: u64) -> Result<u64, StoreError> {
        let before = self.database_bytes();
        {
            // Asked of the writer's connection: another connection keeps
            // the mode it read when it opened the file.
            let conn = self.shared.tables();
            let mode: i64 = conn
                .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
                .map_err(|e| self.sqlite(e))?;
            let run = |sql: &str| conn.execute_batch(sql).map_err(|e| self.sqlite(e));
            match mode {
                2 => run("PRAGMA incremental_vacuum")?,
                _ => {
                    let (pages, size): (i64, i64) = conn
                        .query_row(
                            "SELECT page_count, page_size FROM pragma_page_count, pragma_page_size",
                            [],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                        .map_err(|e| self.sqlite(e))?;
                    let bytes = (pages * size) as u64;
                    if free > bytes.saturating_mul(2) {
                        run("PRAGMA auto_vacuum = INCREMENTAL")?;
                        run("VACUUM")?;
                        tracing::info!(
                            "database {}: converted to incremental vacuum (a full VACUUM, once)",
                            self.shared.path().display()
                        );
                    }
                }
            }
            run("PRAGMA wal_checkpoint(TRUNCATE)")?;
        }
        Ok(before.saturating_sub(self.database_bytes()))
    }

    /// Checkpoints the WAL into the database and truncates it (to
    /// [`crate::WAL_LIMIT`] at most).
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        let conn = self.shared.tables();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .map_err(|e| self.sqlite(e))
    }

    /// `PRAGMA integrity_check`: `ok`, or what is wrong.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        self.read(|c| c.query_row("PRAGMA integrity_check", [], |r| r.get(0)))
    }
}

/// Prune records, oldest first, made at or after `since`.
pub(crate) fn prunes_since(
    conn: &Connection,
    since: Option<DateTime<Utc>>,
) -> Result<Vec<String>, rusqlite::Error> {
    let since = since.map(|t| wakeful_core::event::format_ts(&t));
    let mut stmt = conn
        .prepare_cached("SELECT record FROM prunes WHERE (?1 IS NULL OR at >= ?1) ORDER BY id")?;
    let rows = stmt.query_map([since], |r| r.get(0))?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wakeful_core::journal::{Journal, JournalEntry, Registration};
    use wakeful_core::{EventBody, MonitorSpec, MonitorStopReason, PendingEvent};

    fn event(monitor: &str, body: EventBody, text: String) -> JournalEntry {
        JournalEntry::Event(PendingEvent {
            wakes: true,
            session: "s".into(),
            monitor_id: monitor.into(),
            ts: Utc::now(),
            text,
            body,
            replayed: false,
            host: None,
        })
    }

    /// Registers `id`, gives it `lines` line events and ends it.
    fn monitor(w: &mut crate::StoreWriter, id: &str, lines: u64) {
        running(w, id, lines);
        w.append(&mut vec![event(
            id,
            EventBody::MonitorStopped {
                reason: MonitorStopReason::ExitCode { code: 0 },
                last_lines: vec![],
                survivors: vec![],
                unverified: None,
            },
            "done".into(),
        )])
        .unwrap();
    }

    /// Registers `id` and gives it `lines` line events; it goes on running.
    fn running(w: &mut crate::StoreWriter, id: &str, lines: u64) {
        let info = MonitorInfo::starting(
            id.into(),
            "s".into(),
            &MonitorSpec::command("true", "d"),
            "/x".into(),
        );
        w.append(&mut vec![JournalEntry::Registered(Box::new(
            Registration {
                info,
                spec: MonitorSpec::command("true", "d"),
                base_env: None,
                base_cwd: None,
            },
        ))])
        .unwrap();
        let mut batch = vec![event(id, EventBody::MonitorStarted, "started".into())];
        for n in 1..=lines {
            batch.push(event(
                id,
                EventBody::MonitorEvent {
                    lines: vec![format!("{id} line {n} {}", "x".repeat(200))],
                    from_line: n,
                    to_line: n,
                },
                format!("{id} line {n}"),
            ));
        }
        w.append(&mut batch).unwrap();
    }

    #[test]
    fn forgotten_monitors_leave_no_row_and_seqs_are_never_given_twice() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        {
            let (mut w, r) = crate::open(&db).unwrap();
            monitor(&mut w, "mon-a", 5_000);
            monitor(&mut w, "mon-b", 10);
            w.append(&mut vec![JournalEntry::Ack {
                session: "s".into(),
                consumer: "default".into(),
                seq: 7,
            }])
            .unwrap();
            let last = r.latest_seq().unwrap();
            let p = w.pruner().unwrap();
            let c = p.candidates(&|_| 0).unwrap();
            assert_eq!(c.len(), 2);
            let a = c.iter().find(|c| c.id == "mon-a").unwrap();
            assert_eq!(a.events, 5_002);
            // The newest monitor goes: the seq floor keeps its seqs taken.
            let gone = p.forget(&["mon-b".into(), "mon-a".into()]).unwrap();
            assert_eq!(
                gone,
                Forgotten {
                    events: 5_014,
                    monitors: 2
                }
            );
            assert!(r.events_after(None, None, 0, 10).unwrap().is_empty());
            assert!(r.monitor("mon-a").unwrap().is_none());
            assert_eq!(r.cursor("s", "default").unwrap(), 7, "cursors stay");
            assert_eq!(r.latest_seq().unwrap(), last);
            assert_eq!(p.integrity_check().unwrap(), "ok");
        }
        let (mut w, r) = crate::open(&db).unwrap();
        let last = r.latest_seq().unwrap();
        assert_eq!(last, 5_014);
        let got = w
            .append(&mut vec![event(
                "mon-c",
                EventBody::MonitorStarted,
                "s".into(),
            )])
            .unwrap();
        assert_eq!(got[0].event.seq, last + 1);
    }

    #[test]
    fn trimming_running_monitors_takes_their_oldest_events_and_keeps_started() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let (mut w, r) = crate::open(&db).unwrap();
        running(&mut w, "mon-a", 100);
        monitor(&mut w, "mon-ended", 100);
        running(&mut w, "mon-b", 100);
        let p = w.pruner().unwrap();
        assert_eq!(p.trim_running(0, false).unwrap(), Forgotten::default());
        let last = r.latest_seq().unwrap();
        // A line event's JSON is about 400 bytes: 50 of mon-a's go.
        let would = p.trim_running(50 * 400, true).unwrap();
        assert_eq!(r.latest_seq().unwrap(), last);
        let gone = p.trim_running(50 * 400, false).unwrap();
        assert_eq!(gone.monitors, 1, "only mon-a's events are the oldest");
        assert!((45..=55).contains(&gone.events), "{gone:?}");
        assert_eq!(would, gone, "the dry run says what goes");
        let a = r.events_after(None, Some("mon-a"), 0, 1_000).unwrap();
        assert_eq!(a.len() as u64, 101 - gone.events);
        assert!(
            matches!(a[0].body, EventBody::MonitorStarted),
            "a running monitor keeps its start"
        );
        assert_eq!(
            r.events_after(None, Some("mon-b"), 0, 1_000).unwrap().len(),
            101
        );
        assert_eq!(
            r.events_after(None, Some("mon-ended"), 0, 1_000)
                .unwrap()
                .len(),
            102,
            "ended monitors are the plan's, not the trim's"
        );
        // More than there is: every running event but the starts.
        let gone = p.trim_running(u64::MAX, false).unwrap();
        assert_eq!(gone.monitors, 2);
        assert_eq!(
            r.events_after(None, Some("mon-a"), 0, 1_000).unwrap().len(),
            1
        );
        assert_eq!(
            r.events_after(None, Some("mon-b"), 0, 1_000).unwrap().len(),
            1
        );
        assert_eq!(r.latest_seq().unwrap(), last, "seqs stay taken");
        assert_eq!(p.integrity_check().unwrap(), "ok");
    }

    #[test]
    fn a_prune_gives_the_space_back() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let (mut w, _r) = crate::open(&db).unwrap();
        for i in 0..4 {
            monitor(&mut w, &format!("mon-{i}"), 5_000);
        }
        let p = w.pruner().unwrap();
        p.checkpoint().unwrap();
        let full = std::fs::metadata(&db).unwrap().len();
        assert!(full > 4 << 20, "{full}");
        let ids: Vec<String> = (0..3).map(|i| format!("mon-{i}")).collect();
        p.forget(&ids).unwrap();
        p.reclaim(u64::MAX).unwrap();
        let after = std::fs::metadata(&db).unwrap().len();
        assert!(after < full / 2, "{after} of {full}");
        let wal = std::fs::metadata(dir.path().join("w.db-wal")).map_or(0, |m| m.len());
        assert_eq!(wal, 0, "the WAL is truncated");
        assert_eq!(p.integrity_check().unwrap(), "ok");
    }

    #[test]
    fn a_database_without_incremental_vacuum_is_converted_once_there_is_room() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("old.db");
        // As schema 3 and older made it: no auto_vacuum.
        Connection::open(&db)
            .unwrap()
            .execute_batch("CREATE TABLE t(x)")
            .unwrap();
        let (mut w, _r) = crate::open(&db).unwrap();
        monitor(&mut w, "mon-a", 3_000);
        monitor(&mut w, "mon-b", 10);
        let p = w.pruner().unwrap();
        p.forget(&["mon-a".into()]).unwrap();
        let mode = |p: &Pruner| -> i64 {
            p.shared
                .tables()
                .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(mode(&p), 0);
        // No room for the copy: left as it is (its pages are reused).
        p.reclaim(0).unwrap();
        assert_eq!(mode(&p), 0);
        let before = std::fs::metadata(&db).unwrap().len();
        p.reclaim(u64::MAX).unwrap();
        assert_eq!(mode(&p), 2);
        assert!(std::fs::metadata(&db).unwrap().len() < before);
    }

    #[test]
    fn orphan_events_of_ended_monitors_are_candidates_running_ones_not() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let (mut w, _r) = crate::open(&db).unwrap();
        let imported = |origin: &str, monitor: &str, body: EventBody| JournalEntry::Imported {
            origin: origin.into(),
            event: PendingEvent {
                session: "s".into(),
                monitor_id: monitor.into(),
                ts: Utc::now(),
                text: "t".into(),
                body,
                wakes: true,
                replayed: false,
                host: Some("b".into()),
            },
        };
        w.append(&mut vec![
            imported("b/1", "mon-ended", EventBody::MonitorStarted),
            imported(
                "b/2",
                "mon-ended",
                EventBody::MonitorStopped {
                    reason: MonitorStopReason::ExitCode { code: 0 },
                    last_lines: vec![],
                    survivors: vec![],
                    unverified: None,
                },
            ),
            imported("b/3", "mon-running", EventBody::MonitorStarted),
        ])
        .unwrap();
        let c = w.pruner().unwrap().candidates(&|_| 0).unwrap();
        assert_eq!(
            c.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
            ["mon-ended"]
        );
        assert_eq!(c[0].events, 2);
    }
}
