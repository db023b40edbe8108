//! A monitor's output file: every line its source produced, kept within
//! bounds (docs/STORAGE.md). Stdout lines are written byte for byte,
//! stderr lines prefixed `[stderr] `. A final line without a newline stays
//! without one (`printf abc` leaves exactly `abc`), unless another line
//! follows it in the file (the other stream, a re-armed run): then a `\n`
//! is put in between so that every line stays a line. Line numbers in
//! `lines` and `suppressed` events refer to this file's lines, and never
//! change.
//!
//! Bounds (the layout is [`wakeful_core::outlog`]'s):
//! - **The cap.** The file is written in segments; past its cap (its own,
//!   or its share of the total for all running files) the oldest segment
//!   but the head goes, and the manifest records the lines and bytes it
//!   held.
//! - **The disk.** Below the keep-free space ([`DiskGuard`]), or when a
//!   write fails for lack of space, lines are counted but not written; the
//!   range is recorded, and reported ([`OutputFile::take_reports`]). A
//!   write that fails half-way is cut back to its last whole line, so the
//!   file never holds half a line.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use wakeful_core::lines::{Piece, Stream};
use wakeful_core::outlog::{self, DropReason, DropReports, Dropped, Layout, Manifest};
use wakeful_core::storage::{ByteSize, OutputCaps};

use crate::disk::{is_no_space, DiskGuard};

/// Bytes buffered before they are written.
const BUFFER: usize = 64 * 1024;

/// What every output file of a registry shares: the caps, the disk guard,
/// and how many files are being written (each gets its share of the
/// total).
#[derive(Debug)]
pub struct OutputBudget {
    caps: OutputCaps,
    disk: Arc<DiskGuard>,
    open: AtomicUsize,
    /// Bytes the open files keep (segments and live files).
    kept: AtomicU64,
    /// Bytes of lines counted but not written (disk low), in all.
    not_written: AtomicU64,
}

impl OutputBudget {
    /// A budget of `caps`, watching the disk through `disk`.
    pub fn new(caps: OutputCaps, disk: Arc<DiskGuard>) -> Arc<Self> {
        Arc::new(OutputBudget {
            caps,
            disk,
            open: AtomicUsize::new(0),
            kept: AtomicU64::new(0),
            not_written: AtomicU64::new(0),
        })
    }

    /// The default caps, keeping the default free space on `dir`'s
    /// filesystem.
    pub fn for_dir(dir: &Path) -> Arc<Self> {
        Self::new(
            OutputCaps::default(),
            DiskGuard::new(dir, Default::default()),
        )
    }

    /// The caps.
    pub fn caps(&self) -> OutputCaps {
        self.caps
    }

    /// The disk guard.
    pub fn disk(&self) -> &Arc<DiskGuard> {
        &self.disk
    }

    /// Output files being written now.
    pub fn open_files(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Bytes the files being written keep.
    pub fn kept_bytes(&self) -> u64 {
        self.kept.load(Ordering::Relaxed)
    }

    /// Bytes of lines that were counted but not written for lack of
    /// space, since this budget was made.
    pub fn not_written(&self) -> u64 {
        self.not_written.load(Ordering::Relaxed)
    }

    /// What one file may keep now.
    fn cap(&self) -> u64 {
        self.caps.share(self.open_files())
    }
}

/// A disk-low range being counted.
#[derive(Debug, Clone, Copy)]
struct Gap {
    lines: u64,
    bytes: u64,
}

/// An open output file with its line count; see the module docs.
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    budget: Arc<OutputBudget>,
    file: File,
    /// Bytes not yet written to `file`.
    buf: Vec<u8>,
    manifest: Manifest,
    /// The manifest has changes not yet in its file.
    dirty: bool,
    /// Where the live file's last run begins in it (after the runs the
    /// manifest names), and its lines (written or buffered).
    run_start: u64,
    run_lines: u64,
    /// Bytes in the live file, written or buffered.
    live_bytes: u64,
    /// The end of each line completed in `buf` (offset in the live file,
    /// and whether it ended with a newline).
    ends: Vec<(u64, bool)>,
    /// The end of the last line that is on disk.
    last_end: (u64, bool),
    /// Where the line being written began, while one is.
    open_start: Option<u64>,
    /// Lines numbered so far (the number of the last line).
    lines: u64,
    open_line: Option<Stream>,
    /// The last line was written without a newline (its stream ended).
    unterminated: bool,
    /// Lines not written for lack of space, being counted.
    gap: Option<Gap>,
    /// The line being read is not written (it began, or broke, while the
    /// disk was low); its bytes so far.
    dropping_line: Option<u64>,
    reports: DropReports,
    /// What this file counts in the budget's `kept`.
    counted: u64,
}

impl OutputFile {
    /// Opens (creating it and its directory, mode 0600/0700) `path` for
    /// appending, within `budget`. Existing lines are counted so numbering
    /// continues, as for a re-armed monitor; a manifest left by a daemon
    /// that died in the middle of a rotation or a drop is put right.
    pub fn open(path: &Path, budget: &Arc<OutputBudget>) -> io::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let mut manifest = read_manifest(path)?.unwrap_or_default();
        let repaired = repair(path, &mut manifest)?;
        if manifest.is_pruned() {
            manifest.next_segment = outlog::HEAD_SEGMENT;
        }
        let mut file = open_append(path)?;
        let offset = manifest.live_offset();
        let (lines, unterminated, live) = count_from(&mut file, offset)?;
        let mut out = OutputFile {
            path: path.to_path_buf(),
            budget: budget.clone(),
            file,
            buf: Vec::with_capacity(BUFFER),
            run_start: offset.min(live),
            run_lines: lines + u64::from(unterminated),
            live_bytes: live,
            ends: Vec::new(),
            last_end: (live, !unterminated),
            open_start: None,
            lines: manifest.lines() + lines + u64::from(unterminated),
            manifest,
            dirty: repaired,
            open_line: None,
            unterminated,
            gap: None,
            dropping_line: None,
            reports: DropReports::default(),
            counted: 0,
        };
        budget.open.fetch_add(1, Ordering::Relaxed);
        out.recount();
        if out.dirty {
            // Best effort: the next rotation or drop writes it again.
            let _ = out.save_manifest();
        }
        Ok(out)
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lines numbered so far (the number of the last line).
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Bytes the file keeps on disk now (segments and live file).
    pub fn kept_bytes(&self) -> u64 {
        self.manifest.segments().iter().map(|(_, b)| b).sum::<u64>() + self.live_bytes
    }

    fn recount(&mut self) {
        let now = self.kept_bytes();
        if now >= self.counted {
            self.budget
                .kept
                .fetch_add(now - self.counted, Ordering::Relaxed);
        } else {
            self.budget
                .kept
                .fetch_sub(self.counted - now, Ordering::Relaxed);
        }
        self.counted = now;
    }

    /// Writes one piece from the line splitter of `stream`. Returns the line
    /// number when the piece finished a line.
    pub fn write(&mut self, stream: Stream, piece: &Piece<'_>) -> io::Result<Option<u64>> {
        let now = Instant::now();
        let (bytes, ends): (&[u8], Option<bool>) = match piece {
            Piece::Partial(bytes) => (bytes, None),
            Piece::Line {
                rest, terminated, ..
            } => (rest, Some(*terminated)),
        };
        let prefix = if self.open_line != Some(stream) {
            stream.file_prefix()
        } else {
            &[]
        };
        if self.open_line.is_none() && self.dropping_line.is_none() {
            // A line begins: written, or counted as missing.
            let len = (prefix.len() + bytes.len() + 1) as u64;
            if !self.may_write(len, now) {
                self.dropping_line = Some(0);
            }
        }
        if let Some(dropped) = self.dropping_line.as_mut() {
            *dropped += (prefix.len() + bytes.len()) as u64;
            self.open_line = Some(stream);
            let Some(terminated) = ends else {
                return Ok(None);
            };
            let line_bytes = *dropped + u64::from(terminated);
            self.dropping_line = None;
            self.open_line = None;
            self.lines += 1;
            self.count_missing(1, line_bytes);
            return Ok(Some(self.lines));
        }
        if self.open_line.is_none() {
            let len = (prefix.len() + bytes.len()) as u64 + u64::from(ends != Some(false));
            self.make_room(len)?;
            self.end_unterminated();
            self.open_start = Some(self.live_bytes);
        }
        self.push(prefix);
        self.push(bytes);
        match ends {
            None => {
                self.open_line = Some(stream);
                self.spill()?;
                Ok(None)
            }
            Some(terminated) => {
                if terminated {
                    self.push(b"\n");
                } else {
                    self.unterminated = true;
                }
                self.ends.push((self.live_bytes, terminated));
                self.open_line = None;
                self.open_start = None;
                self.lines += 1;
                self.run_lines += 1;
                self.spill()?;
                Ok(Some(self.lines))
            }
        }
    }

    /// Whether a line of `len` bytes may be written now; closes a disk-low
    /// range when there is room again.
    fn may_write(&mut self, len: u64, now: Instant) -> bool {
        if !self.budget.disk.allows(len, now) {
            return false;
        }
        match self.gap {
            None => true,
            // Room again: the range is recorded before anything is
            // written after it, so a reader never numbers a line wrongly.
            Some(_) => self.close_gap().is_ok(),
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        self.live_bytes += bytes.len() as u64;
    }

    /// Bytes of the live file's last run.
    fn run_bytes(&self) -> u64 {
        self.live_bytes - self.run_start
    }

    /// Counts `lines` lines of `bytes` bytes after the last ones as
    /// missing (disk low).
    fn count_missing(&mut self, lines: u64, bytes: u64) {
        let first = self.lines + 1 - lines;
        let gap = self.gap.get_or_insert(Gap { lines: 0, bytes: 0 });
        gap.lines += lines;
        gap.bytes += bytes;
        self.budget.not_written.fetch_add(bytes, Ordering::Relaxed);
        self.reports.add(Dropped {
            reason: DropReason::DiskLow,
            count: lines,
            from_line: first,
            to_line: self.lines,
            bytes,
        });
    }

    /// Records the disk-low range counted so far in the manifest.
    fn close_gap(&mut self) -> io::Result<()> {
        // What came before the range must be on disk before the manifest
        // says where the range is.
        self.write_buffer()?;
        let Some(gap) = self.gap else {
            return Ok(());
        };
        if !self.buf.is_empty() {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let saved = self.manifest.clone();
        self.manifest.close_run(self.run_lines, self.run_bytes());
        self.manifest
            .record_drop(gap.lines, gap.bytes, DropReason::DiskLow);
        if let Err(e) = self.save_manifest() {
            self.manifest = saved;
            return Err(e);
        }
        self.run_lines = 0;
        self.run_start = self.live_bytes;
        self.gap = None;
        Ok(())
    }

    /// A line follows one that ended without a newline: separate them.
    fn end_unterminated(&mut self) {
        if self.unterminated {
            self.push(b"\n");
            self.unterminated = false;
        }
    }

    /// Whether a line of some stream is half written (then whole lines of
    /// the other stream must wait for the line splitter).
    pub fn mid_line(&self) -> bool {
        self.open_line.is_some()
    }

    /// Writes `bytes`, which are `count` complete stdout lines (each ending in
    /// `\n`), as they are. Returns the numbers of the first and last line.
    pub fn write_stdout_lines(&mut self, bytes: &[u8], count: u64) -> io::Result<(u64, u64)> {
        let first = self.lines + 1;
        if self.dropping_line.is_none() && self.may_write(bytes.len() as u64, Instant::now()) {
            let segment = self.layout().segment;
            let mut rest = bytes;
            let mut left = count;
            while !rest.is_empty() {
                // As many whole lines as fit in the live file's segment;
                // the live file is rotated first if not even one does.
                let first = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
                self.make_room(first as u64)?;
                let room = segment.saturating_sub(self.live_bytes) as usize;
                let take = if room >= rest.len() {
                    rest.len()
                } else {
                    memchr::memrchr(b'\n', &rest[..room])
                        .map_or(first, |i| i + 1)
                        .max(first)
                };
                let (run, after) = rest.split_at(take);
                let n = if after.is_empty() {
                    left
                } else {
                    (memchr::memchr_iter(b'\n', run).count() as u64).min(left)
                };
                left -= n;
                self.end_unterminated();
                self.push(run);
                // One end for the run of lines: should the write fail
                // part-way, all of them are counted missing and cut back.
                self.ends.push((self.live_bytes, true));
                self.lines += n;
                self.run_lines += n;
                self.spill()?;
                rest = after;
            }
        } else {
            self.lines += count;
            self.count_missing(count, bytes.len() as u64);
        }
        Ok((first, self.lines))
    }

    /// Writes what is buffered once it is a buffer's worth.
    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= BUFFER {
            self.flush()?;
        }
        Ok(())
    }

    /// Pushes buffered bytes to the file, so readers see them; drops
    /// segments when the file is over its cap (its share may have shrunk).
    /// A lack of space is no error: what did not fit is counted as
    /// missing.
    pub fn flush(&mut self) -> io::Result<()> {
        self.write_buffer()?;
        self.trim(self.live_bytes)?;
        self.recount();
        Ok(())
    }

    /// Writes what is buffered; see [`OutputFile::write_failed`].
    fn write_buffer(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let mut written = 0;
        while written < self.buf.len() {
            match self.file.write(&self.buf[written..]) {
                Ok(0) => return self.write_failed(written, io::ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.write_failed(written, e),
            }
        }
        self.buf.clear();
        if let Some(last) = self.ends.pop() {
            self.last_end = last;
        }
        self.ends.clear();
        Ok(())
    }

    /// A write of the buffer failed after `written` bytes. For lack of
    /// space, the file is cut back to the end of its last whole line, the
    /// lines that did not make it are counted as missing, and the line
    /// being read (if one is) is not written either; any other error is
    /// the caller's.
    fn write_failed(&mut self, written: usize, e: io::Error) -> io::Result<()> {
        if !is_no_space(&e) {
            return Err(e);
        }
        self.budget.disk.note_full();
        let durable = self.live_bytes - self.buf.len() as u64;
        let on_disk = durable + written as u64;
        let whole = self.ends.partition_point(|(end, _)| *end <= on_disk);
        if whole > 0 {
            self.last_end = self.ends[whole - 1];
        }
        let lost_lines = (self.ends.len() - whole) as u64;
        let cut = self.last_end.0;
        let partial = match (self.open_line, self.open_start) {
            (Some(_), Some(start)) => Some(self.live_bytes - start),
            _ => None,
        };
        let lost_bytes = self.live_bytes - cut - partial.unwrap_or(0);
        if on_disk > cut {
            // Best effort: should the cut fail too, a partial line stays
            // in the file that no part counts (a reader shows it as is).
            let _ = self.file.set_len(cut);
        }
        self.live_bytes = cut;
        self.unterminated = !self.last_end.1;
        self.run_lines = self.run_lines.saturating_sub(lost_lines);
        self.buf.clear();
        self.ends.clear();
        self.open_start = None;
        if let Some(partial) = partial {
            self.dropping_line = Some(partial);
        }
        if lost_lines > 0 {
            self.count_missing(lost_lines, lost_bytes);
        }
        tracing::warn!(
            "output file {}: {e}; {lost_lines} lines were not written; lines are counted as missing until there is room again",
            self.path.display()
        );
        Ok(())
    }

    /// The layout this file is written by now (its cap is its share of
    /// the total, which changes as files open and close).
    fn layout(&self) -> Layout {
        Layout {
            segment: self.budget.caps.segment(),
            cap: self.budget.cap(),
        }
    }

    /// Before a line (or run of lines) of `len` bytes is written: rotates
    /// the live file if the line would take it past a segment, then drops
    /// the oldest segments but the head that no longer fit the cap
    /// ([`Layout`]). The newest lines are never rotated away after they
    /// are written, so the live file always holds them.
    fn make_room(&mut self, len: u64) -> io::Result<()> {
        if self.open_line.is_some() || self.gap.is_some() {
            return Ok(());
        }
        let pending = u64::from(self.unterminated);
        if !self.layout().rotate_before(self.live_bytes, len + pending) {
            return Ok(());
        }
        self.end_unterminated();
        self.write_buffer()?;
        if !self.buf.is_empty() || self.gap.is_some() || self.dropping_line.is_some() {
            // The write fell short (no space): nothing to rotate now.
            return Ok(());
        }
        // The file is rotated by renaming it; a reader holding it reads
        // on to its end, then finds the new one by the manifest.
        let saved = self.manifest.clone();
        self.manifest.close_run(self.run_lines, self.run_bytes());
        let n = self.manifest.rotate();
        let rotated = outlog::segment_path(&self.path, n);
        std::fs::rename(&self.path, &rotated)?;
        if let Err(e) = self.save_manifest() {
            // Back as it was: the live file goes on growing until the
            // manifest can be written.
            let _ = std::fs::rename(&rotated, &self.path);
            self.manifest = saved;
            return if is_no_space(&e) { Ok(()) } else { Err(e) };
        }
        self.file = open_append(&self.path)?;
        self.live_bytes = 0;
        self.run_start = 0;
        self.run_lines = 0;
        self.last_end = (0, true);
        self.trim(len)?;
        self.recount();
        Ok(())
    }

    /// Drops the oldest segments but the head while they and the live
    /// file (holding or about to hold `live` bytes) would not fit the cap;
    /// the lines they held are reported.
    fn trim(&mut self, live: u64) -> io::Result<()> {
        let over = self.layout().over_cap(&self.manifest, live);
        if over.is_empty() {
            return Ok(());
        }
        let saved = self.manifest.clone();
        let mut drops = Vec::new();
        for n in &over {
            drops.extend(self.manifest.segment_drops(*n, DropReason::Cap));
            self.manifest.drop_segment(*n, DropReason::Cap);
        }
        // The manifest first: a segment is deleted only once no reader
        // would look for it.
        if let Err(e) = self.save_manifest() {
            self.manifest = saved;
            return if is_no_space(&e) { Ok(()) } else { Err(e) };
        }
        for n in over {
            let _ = std::fs::remove_file(outlog::segment_path(&self.path, n));
        }
        for d in drops {
            self.reports.add(d);
        }
        Ok(())
    }

    fn save_manifest(&mut self) -> io::Result<()> {
        write_manifest(&self.path, &self.manifest)?;
        self.dirty = false;
        Ok(())
    }

    /// The reports of dropped ranges due at `now` (the first at once, then
    /// spaced; see [`DropReports`]).
    pub fn take_reports(&mut self, now: Instant) -> Vec<Dropped> {
        self.reports.due(now)
    }

    /// When the next report is due, if one waits.
    pub fn next_report(&self) -> Option<Instant> {
        self.reports.next_due()
    }

    /// Every report still waiting (the monitor ends). A disk-low range
    /// still open is recorded in the manifest if it can be.
    pub fn finish_reports(&mut self) -> Vec<Dropped> {
        if self.gap.is_some() {
            let _ = self.close_gap();
        }
        self.reports.finish()
    }

    /// What a report says about the cause: ` (12 MiB free, 16 MiB kept
    /// free)` for the disk, ` (64 MiB)` for the cap.
    pub fn detail(&self, reason: DropReason) -> String {
        match reason {
            DropReason::DiskLow => {
                let r = self.budget.disk.reading(Instant::now());
                format!(
                    " ({} free on {}, {} kept free)",
                    ByteSize(r.free),
                    self.budget.disk.dir().display(),
                    ByteSize(r.keep_free)
                )
            }
            DropReason::Cap | DropReason::Pruned => {
                format!(" ({})", ByteSize(self.budget.cap()))
            }
        }
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        let _ = self.flush();
        if self.gap.is_some() {
            let _ = self.close_gap();
        }
        if self.dirty {
            let _ = self.save_manifest();
        }
        self.budget.open.fetch_sub(1, Ordering::Relaxed);
        self.budget.kept.fetch_sub(
            self.counted.min(self.budget.kept_bytes()),
            Ordering::Relaxed,
        );
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// The manifest of output file `path`, if it has one.
pub fn read_manifest(path: &Path) -> io::Result<Option<Manifest>> {
    match std::fs::read_to_string(outlog::manifest_path(path)) {
        Ok(text) => Manifest::parse(&text)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes the manifest of output file `path` (a new file renamed over the
/// old one: a reader sees the old or the new, whole).
pub fn write_manifest(path: &Path, m: &Manifest) -> io::Result<()> {
    let target = outlog::manifest_path(path);
    let mut tmp = target.clone().into_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = (|| {
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(m.to_json().as_bytes())?;
        std::fs::rename(&tmp, &target)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Puts right what a daemon that died in the middle of a rotation or a
/// drop left: a rotated live file the manifest does not name yet is the
/// live file again; a segment the manifest names but that is gone is a
/// dropped range; a segment the manifest no longer names is deleted.
/// Returns whether the manifest changed.
fn repair(path: &Path, m: &mut Manifest) -> io::Result<bool> {
    let mut changed = false;
    let next = outlog::segment_path(path, m.next_segment);
    if m.next_segment > 0 && next.exists() {
        // Renamed, and the daemon died before the manifest said so.
        let live_len = std::fs::metadata(path).map(|md| md.len()).unwrap_or(0);
        if live_len == 0 {
            std::fs::rename(&next, path)?;
        }
    }
    for (n, _) in m.segments() {
        if !outlog::segment_path(path, n).exists() {
            m.drop_segment(n, DropReason::Cap);
            changed = true;
        }
    }
    let named: Vec<u32> = m.segments().iter().map(|(n, _)| *n).collect();
    if let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            let prefix = format!("{name}.");
            for e in entries.flatten() {
                let file = e.file_name();
                let Some(n) = file
                    .to_str()
                    .and_then(|f| f.strip_prefix(&prefix))
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    continue;
                };
                if !named.contains(&n) && n < m.next_segment {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
    Ok(changed)
}

/// Counts the complete lines of `file` after `offset`, whether it ends
/// with an unterminated one, and its length.
fn count_from(file: &mut File, offset: u64) -> io::Result<(u64, bool, u64)> {
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(offset.min(len)))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    let mut last = None;
    loop {
        let read = file.read(&mut buf)?;
        if read == 0 {
            return Ok((n, last.is_some_and(|b| b != b'\n'), len));
        }
        n += memchr::memchr_iter(b'\n', &buf[..read]).count() as u64;
        last = buf[..read].last().copied();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use wakeful_core::outlog::Span;
    use wakeful_core::storage::KeepFree;

    fn line(rest: &'static [u8]) -> Piece<'static> {
        Piece::Line {
            rest,
            text: String::new(),
            terminated: true,
        }
    }

    fn budget(dir: &Path) -> Arc<OutputBudget> {
        OutputBudget::for_dir(dir)
    }

    /// A budget with `per_file` bytes a file, on a disk whose free space
    /// the test sets.
    fn small(per_file: u64, free: Arc<AtomicU64>) -> Arc<OutputBudget> {
        let disk = DiskGuard::with_query(
            "/test",
            KeepFree::Bytes(ByteSize(1 << 20)),
            Box::new(move |_| Ok((free.load(Ordering::SeqCst), 100 << 20))),
        );
        OutputBudget::new(
            OutputCaps {
                per_file,
                total: 1 << 30,
            },
            disk,
        )
    }

    #[test]
    fn writes_prefixes_and_counts_lines_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.log");
        let b = budget(dir.path());
        let mut f = OutputFile::open(&path, &b).unwrap();
        assert_eq!(f.write(Stream::Stdout, &line(b"a")).unwrap(), Some(1));
        assert_eq!(f.write(Stream::Stderr, &line(b"oops")).unwrap(), Some(2));
        f.write(Stream::Stdout, &Piece::Partial(b"pa")).unwrap();
        assert_eq!(f.write(Stream::Stdout, &line(b"rt\xff")).unwrap(), Some(3));
        f.flush().unwrap();
        drop(f);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"a\n[stderr] oops\npart\xff\n"
        );
        let mut f = OutputFile::open(&path, &b).unwrap();
        assert_eq!(f.lines(), 3);
        // A final line without newline stays so, until a line follows it.
        let last = Piece::Line {
            rest: b"abc",
            text: String::new(),
            terminated: false,
        };
        assert_eq!(f.write(Stream::Stdout, &last).unwrap(), Some(4));
        f.flush().unwrap();
        assert!(std::fs::read(&path).unwrap().ends_with(b"\nabc"));
        drop(f);
        let mut f = OutputFile::open(&path, &b).unwrap();
        assert_eq!(f.lines(), 4, "the unterminated line counts");
        assert_eq!(f.write(Stream::Stderr, &line(b"e")).unwrap(), Some(5));
        f.flush().unwrap();
        assert!(std::fs::read(&path)
            .unwrap()
            .ends_with(b"\nabc\n[stderr] e\n"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(
            !outlog::manifest_path(&path).exists(),
            "a file within its first segment has no manifest"
        );
        drop(f);
        assert_eq!(b.open_files(), 0);
        assert_eq!(b.kept_bytes(), 0);
    }

    /// Every line numbered `1..=n` as `line N` (10 bytes each with its
    /// newline for N < 1000 … roughly).
    fn numbered(n: u64) -> Vec<Vec<u8>> {
        (1..=n)
            .map(|i| format!("line {i:05}").into_bytes())
            .collect()
    }

    fn write_all(f: &mut OutputFile, lines: &[Vec<u8>]) {
        for l in lines {
            let piece = Piece::Line {
                rest: l,
                text: String::new(),
                terminated: true,
            };
            f.write(Stream::Stdout, &piece).unwrap();
            f.flush().unwrap();
        }
    }

    #[test]
    fn past_the_cap_the_head_and_the_newest_lines_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mon.log");
        let free = Arc::new(AtomicU64::new(50 << 20));
        // 8 segments of 16 KiB.
        let b = small(128 << 10, free);
        let mut f = OutputFile::open(&path, &b).unwrap();
        let lines = numbered(40_000); // 11 bytes each: 440,000 bytes
        write_all(&mut f, &lines);
        assert_eq!(f.lines(), 40_000);
        let m = read_manifest(&path).unwrap().unwrap();
        assert_eq!(
            m.lines() + count_from(&mut File::open(&path).unwrap(), 0).unwrap().0,
            40_000
        );
        assert!(f.kept_bytes() <= 128 << 10, "{}", f.kept_bytes());
        assert!(f.kept_bytes() > 96 << 10, "{}", f.kept_bytes());
        assert_eq!(b.kept_bytes(), f.kept_bytes());
        // The head is segment 1 and starts with line 1; the newest line is
        // the live file's last.
        let head = std::fs::read(outlog::segment_path(&path, 1)).unwrap();
        assert!(head.starts_with(b"line 00001\nline 00002\n"));
        let live = std::fs::read(&path).unwrap();
        assert!(live.ends_with(b"line 40000\n"));
        // The dropped range is recorded exactly and was reported.
        let spans = m.spans();
        let Span::Dropped {
            first_line,
            lines: dropped,
            first_byte,
            bytes,
            reason,
        } = spans[1]
        else {
            panic!("{spans:?}")
        };
        assert_eq!(reason, DropReason::Cap);
        let Span::Kept {
            lines: Some(head_lines),
            ..
        } = spans[0]
        else {
            panic!("{spans:?}")
        };
        assert_eq!(first_line, head_lines + 1);
        assert_eq!(first_byte, head_lines * 11);
        assert_eq!(bytes, dropped * 11);
        let reports = f.finish_reports();
        assert_eq!(reports.iter().map(|r| r.count).sum::<u64>(), dropped);
        assert_eq!(reports[0].from_line, first_line);
        // Only the named segments are on disk, and the manifest.
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let mut want: Vec<String> = m
            .segments()
            .iter()
            .map(|(n, _)| format!("mon.log.{n}"))
            .collect();
        want.extend(["mon.log".into(), "mon.log.manifest".into()]);
        want.sort();
        assert_eq!(names, want);
        // Reopened (a re-armed monitor), numbering goes on.
        drop(f);
        let f = OutputFile::open(&path, &b).unwrap();
        assert_eq!(f.lines(), 40_000);
    }

    /// Issue 40: `seq 1 300000` under the smallest cap, in runs of whole
    /// lines as the feed writes them: no file passes the cap or a
    /// segment, the head and the newest lines are kept, and the reports
    /// name exactly the dropped range.
    #[test]
    fn the_smallest_cap_keeps_the_head_and_the_newest_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mon.log");
        let free = Arc::new(AtomicU64::new(50 << 20));
        let b = small(64 << 10, free);
        let mut f = OutputFile::open(&path, &b).unwrap();
        let text: String = (1..=300_000).map(|i| format!("{i}\n")).collect();
        let mut max_kept = 0;
        // 64 KiB runs cut at a newline, the way the feed hands them over.
        let mut rest = text.as_bytes();
        while !rest.is_empty() {
            let end = rest.len().min(65_536);
            let end = memchr::memrchr(b'\n', &rest[..end]).unwrap() + 1;
            let (run, after) = rest.split_at(end);
            let n = memchr::memchr_iter(b'\n', run).count() as u64;
            f.write_stdout_lines(run, n).unwrap();
            f.flush().unwrap();
            max_kept = max_kept.max(f.kept_bytes());
            for n in 1..f.manifest.next_segment {
                if let Ok(md) = std::fs::metadata(outlog::segment_path(&path, n)) {
                    assert!(md.len() <= 16 << 10, "segment {n}: {}", md.len());
                }
            }
            rest = after;
        }
        assert_eq!(f.lines(), 300_000);
        assert!(max_kept <= 64 << 10, "{max_kept} bytes kept");
        let head = std::fs::read(outlog::segment_path(&path, 1)).unwrap();
        assert!(head.starts_with(b"1\n2\n3\n"));
        assert!(head.len() <= 16 << 10);
        let live = std::fs::read(&path).unwrap();
        assert!(
            live.ends_with(b"\n299999\n300000\n"),
            "the newest lines are kept"
        );
        let m = read_manifest(&path).unwrap().unwrap();
        let spans = m.spans();
        let Span::Dropped {
            first_line, lines, ..
        } = spans[1]
        else {
            panic!("{spans:?}")
        };
        assert!(spans[2..].iter().all(|s| matches!(s, Span::Kept { .. })));
        let reports = f.finish_reports();
        assert_eq!(reports.first().map(|r| r.from_line), Some(first_line));
        assert_eq!(
            reports.last().map(|r| r.to_line),
            Some(first_line + lines - 1)
        );
        assert_eq!(reports.iter().map(|r| r.count).sum::<u64>(), lines);
    }

    #[test]
    fn below_the_keep_free_mark_lines_are_counted_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mon.log");
        let free = Arc::new(AtomicU64::new(50 << 20));
        let b = small(64 << 20, free.clone());
        let mut f = OutputFile::open(&path, &b).unwrap();
        write_all(&mut f, &numbered(10));
        free.store(512 << 10, Ordering::SeqCst);
        b.disk().check(Instant::now());
        write_all(&mut f, &numbered(11)[10..]);
        // Reported at once (the agent learns of the hole), then spaced.
        let r = f.take_reports(Instant::now());
        assert_eq!(r[0].reason, DropReason::DiskLow);
        assert_eq!((r[0].from_line, r[0].to_line, r[0].count), (11, 11, 1));
        write_all(&mut f, &numbered(20)[11..]);
        assert!(f.take_reports(Instant::now()).is_empty());
        assert_eq!(f.lines(), 20);
        assert_eq!(
            std::fs::read(&path).unwrap().len(),
            110,
            "lines 11–20 are not written"
        );
        // Room again: the range is recorded, then writing goes on.
        free.store(50 << 20, Ordering::SeqCst);
        b.disk().check(Instant::now());
        write_all(&mut f, &numbered(25)[20..]);
        let m = read_manifest(&path).unwrap().unwrap();
        assert_eq!(
            m.parts,
            [
                outlog::Part::Kept {
                    segment: 0,
                    lines: 10,
                    bytes: 110
                },
                outlog::Part::Dropped {
                    lines: 10,
                    bytes: 110,
                    reason: DropReason::DiskLow
                }
            ]
        );
        let text = String::from_utf8(std::fs::read(&path).unwrap()).unwrap();
        assert!(text.contains("line 00010\nline 00021\n"), "{text}");
        assert!(text.ends_with("line 00025\n"), "{text}");
        let rest = f.finish_reports();
        assert_eq!(
            (rest[0].from_line, rest[0].to_line, rest[0].count),
            (12, 20, 9)
        );
        drop(f);
        assert_eq!(OutputFile::open(&path, &b).unwrap().lines(), 25);
    }

    #[test]
    fn a_rotation_the_manifest_never_recorded_is_undone_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mon.log");
        std::fs::write(outlog::segment_path(&path, 1), b"a\nb\n").unwrap();
        let b = budget(dir.path());
        let f = OutputFile::open(&path, &b).unwrap();
        assert_eq!(f.lines(), 2);
        assert_eq!(std::fs::read(&path).unwrap(), b"a\nb\n");
        // A segment the manifest names but that is gone is a dropped range.
        drop(f);
        let mut m = Manifest::default();
        m.close_run(2, 4);
        m.rotate();
        write_manifest(&path, &m).unwrap();
        std::fs::write(&path, b"c\n").unwrap();
        let f = OutputFile::open(&path, &b).unwrap();
        assert_eq!(f.lines(), 3);
        let m = read_manifest(&path).unwrap().unwrap();
        assert_eq!(m.dropped(), [(DropReason::Cap, 2, 4)]);
    }
}
