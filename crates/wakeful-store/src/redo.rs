//! The redo log: where an event is durable before it is in the tables.
//!
//! Putting an event into SQLite costs a transaction: lock calls, three
//! WAL pages (the row and its two indexes), B-tree work — about half of
//! what the daemon spends on a line. The redo log makes the event as
//! durable with one `pwrite(2)`: its JSON line (which holds its seq)
//! appended to `<database>-redo`. The writer hands the event out once that
//! write returned, and folds it into the tables right after (see
//! [`crate::StoreWriter`]). Once it has grown past 1 MiB, the next fold
//! puts everything it holds into the tables and empties it (whatever the
//! line rate: lines that come during that fold's transaction wait for it),
//! so it stays near 1 MiB.
//!
//! Opening the store reads what the log holds beyond the tables' last seq
//! and puts it in: a daemon killed between the two steps loses nothing.
//! Reading stops at the first line that is not the next event (a write
//! torn by a crash of the machine; nothing after it can be trusted).
//!
//! Durability is the same as the tables' (`synchronous = NORMAL`): the
//! write is in the page cache, so it survives the daemon being killed, not
//! the machine losing power.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use wakeful_core::Event;

/// The log is emptied, once all it holds is in the tables, when it is
/// larger than this.
pub(crate) const CLEAR_AT: u64 = 1 << 20;

/// The open redo log.
pub(crate) struct Redo {
    file: File,
    path: PathBuf,
    /// Where the next record goes: after the last whole one. A write that
    /// failed half-way is overwritten by the next.
    len: u64,
}

impl Redo {
    /// Opens (creating it) the log at `path` and returns what it holds.
    pub(crate) fn open(path: &Path) -> std::io::Result<(Redo, Vec<u8>)> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        let mut held = Vec::new();
        file.read_to_end(&mut held)?;
        let redo = Redo {
            file,
            path: path.to_path_buf(),
            len: held.len() as u64,
        };
        Ok((redo, held))
    }

    /// Its path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `records` (whole lines) in one write.
    pub(crate) fn append(&mut self, records: &[u8]) -> std::io::Result<()> {
        self.file.write_all_at(records, self.len)?;
        self.len += records.len() as u64;
        Ok(())
    }

    /// Makes the next appends fail (the file open for reading only), or
    /// work again.
    #[cfg(test)]
    pub(crate) fn set_writable(&mut self, writable: bool) {
        self.file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(&self.path)
            .unwrap();
    }

    /// Its length.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Whether it is larger than [`CLEAR_AT`].
    pub(crate) fn is_large(&self) -> bool {
        self.len > CLEAR_AT
    }

    /// Empties it (everything it held is in the tables).
    pub(crate) fn clear(&mut self) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.len = 0;
        Ok(())
    }
}

/// The events `held` (the log's bytes) has after seq `after`: the lines
/// whose events continue `after + 1, after + 2, …`, with their JSON; lines
/// at or below `after` (already in the tables) are passed over. Reading
/// stops at the first line that is not whole, not an event or not the
/// next seq.
pub(crate) fn beyond(held: &[u8], after: u64) -> Vec<(Event, String)> {
    let mut out = Vec::new();
    let mut next = after + 1;
    for line in held.split_inclusive(|b| *b == b'\n') {
        let Some(line) = line.strip_suffix(b"\n") else {
            break; // torn: the last write did not finish
        };
        let Ok(json) = std::str::from_utf8(line) else {
            break;
        };
        let Ok(event) = serde_json::from_str::<Event>(json) else {
            break;
        };
        if event.seq < next && out.is_empty() {
            continue;
        }
        if event.seq != next {
            break;
        }
        next += 1;
        out.push((event, json.to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64) -> String {
        let e = crate::test_events::line(seq).with_seq(seq);
        serde_json::to_string(&e).unwrap() + "\n"
    }

    fn seqs(v: &[(Event, String)]) -> Vec<u64> {
        v.iter().map(|(e, _)| e.seq).collect()
    }

    #[test]
    fn events_beyond_the_tables_are_read_in_order() {
        let lines = [line(4), line(5), line(6), line(7)];
        let held = lines.concat();
        assert_eq!(seqs(&beyond(held.as_bytes(), 5)), vec![6, 7]);
        assert_eq!(seqs(&beyond(held.as_bytes(), 3)), vec![4, 5, 6, 7]);
        assert_eq!(seqs(&beyond(held.as_bytes(), 7)), Vec::<u64>::new());
        let (e, json) = &beyond(held.as_bytes(), 6)[0];
        assert_eq!(json.as_str(), lines[3].trim_end());
        assert_eq!(e.text, "line 7");
    }

    #[test]
    fn a_torn_last_line_is_left_out() {
        let mut held = [line(1), line(2)].concat();
        let third = line(3);
        held.push_str(&third[..third.len() / 2]);
        assert_eq!(seqs(&beyond(held.as_bytes(), 0)), vec![1, 2]);
        // Without its newline, even a whole JSON text is not trusted.
        let held = [line(1), line(2).trim_end().to_string()].concat();
        assert_eq!(seqs(&beyond(held.as_bytes(), 0)), vec![1]);
    }

    #[test]
    fn reading_stops_at_a_gap_or_at_garbage() {
        let held = [line(1), line(2), line(4), line(5)].concat();
        assert_eq!(seqs(&beyond(held.as_bytes(), 0)), vec![1, 2]);
        let held = [line(1), "{not an event}\n".into(), line(2)].concat();
        assert_eq!(seqs(&beyond(held.as_bytes(), 0)), vec![1]);
        // The tables end at 2 but the log starts at 5: nothing fits.
        let held = [line(5), line(6)].concat();
        assert_eq!(seqs(&beyond(held.as_bytes(), 2)), Vec::<u64>::new());
    }

    #[test]
    fn a_write_after_a_failed_one_takes_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db-redo");
        let (mut redo, held) = Redo::open(&path).unwrap();
        assert!(held.is_empty());
        redo.append(line(1).as_bytes()).unwrap();
        // A half-written record, as a failed write may leave it: the next
        // write starts where the last whole one ended.
        redo.file
            .write_all_at(b"{\"seq\":2,\"sess", redo.len)
            .unwrap();
        redo.append(line(2).as_bytes()).unwrap();
        drop(redo);
        let (mut redo, held) = Redo::open(&path).unwrap();
        assert_eq!(seqs(&beyond(&held, 0)), vec![1, 2]);
        redo.clear().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
    }
}
