//! The file source: follow a file like `tail -F`.
//!
//! - It starts at the file's end (or waits for a file that does not exist yet).
//! - inotify, read in the monitor's own task (no watcher thread, no
//!   hand-over), watches the file itself for writes and the file's directory
//!   only for names coming and going (create, delete, move): an append to
//!   another file of the same directory wakes nobody, so twenty followers of
//!   twenty files in one directory wake once per line, not twenty times. A
//!   change wakes the follower, which then reads everything new. No polling.
//!   A reported write is one `pread` at the offset read so far; only a read
//!   that finds nothing, or a change of name or attributes, looks at the path
//!   again (rotation, truncation).
//!   When the file itself cannot be watched (the system's inotify watch
//!   limit), the directory watch reports writes too, with a warning in the
//!   log: slower, never deaf.
//! - Rotation (the path now names another file): the old file is read to its
//!   end, then the new one from its start.
//! - Truncation (the file got shorter than what was read): reading restarts at
//!   the start. As with `tail -F`, a truncation immediately followed by more
//!   bytes than the old size, before the follower looks, cannot be told from
//!   an append.
//! - Deletion: what was written before is still read; the follower then waits
//!   for the file to appear again and reads it from its start.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;

use futures_util::StreamExt;
use inotify::{EventStream, Inotify, WatchDescriptor, WatchMask, Watches};
use wakeful_core::machine::SourceEnd;
use wakeful_core::Stream;

use crate::process::driver::READ_CHUNK;
use crate::source::{Input, InputSource};

/// A `tail -F` follower; see the module docs.
pub(crate) struct Follower {
    path: PathBuf,
    /// The file's name in its directory (what inotify events name).
    name: std::ffi::OsString,
    file: Option<File>,
    /// (device, inode) of the open file.
    identity: Option<(u64, u64)>,
    offset: u64,
    events: EventStream<Vec<u8>>,
    /// The followed file's directory.
    dir: PathBuf,
    /// The watch on the open file (writes, truncation, attributes).
    file_watch: Option<WatchDescriptor>,
    /// The directory watch reports writes too: a watch on the file itself
    /// could not be added (the system's inotify watch limit, say).
    dir_reports_writes: bool,
    /// Makes the file watch fail, to test the fallback.
    #[cfg(test)]
    refuse_file_watch: bool,
    /// inotify events read so far (each one a wake-up of this task).
    #[cfg(test)]
    seen: usize,
    /// The last read stopped short of a full buffer after a write was
    /// reported: the file was read to its end, and any later write brings
    /// another inotify event. The next call waits for that event instead
    /// of reading again.
    at_end: bool,
    /// What a read takes: [`FIRST_READ`] bytes until a read fills it, then
    /// [`READ_CHUNK`] (a file written in bursts).
    buf: Vec<u8>,
    /// The last read filled the buffer: there may be more to read.
    filled: bool,
}

/// The buffer a follower starts with: a page, enough for the lines of a
/// log, so that a thousand followers do not each hold 64 KiB.
const FIRST_READ: usize = 4 * 1024;

/// What the directory watch reports: names coming and going.
const DIR_MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::DELETE)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::MOVED_TO);

/// What the file watch reports: writes, truncation, attributes.
const FILE_MASK: WatchMask = WatchMask::MODIFY
    .union(WatchMask::CLOSE_WRITE)
    .union(WatchMask::ATTRIB);

impl Follower {
    /// Starts following `path` (absolute) from its current end.
    pub(crate) fn new(path: PathBuf) -> Result<Self, String> {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .ok_or_else(|| format!("{} has no parent directory to watch", path.display()))?
            .to_path_buf();
        if !dir.is_dir() {
            return Err(format!(
                "directory {} does not exist; create it first (the file itself may appear later)",
                dir.display()
            ));
        }
        let name = path
            .file_name()
            .ok_or_else(|| format!("{} names no file", path.display()))?
            .to_os_string();
        let cannot = |e: std::io::Error| format!("cannot watch {}: {e}", dir.display());
        let inotify = Inotify::init().map_err(cannot)?;
        inotify.watches().add(&dir, DIR_MASK).map_err(cannot)?;
        let events = inotify.into_event_stream(vec![0u8; 4096]).map_err(cannot)?;
        let mut f = Follower {
            path,
            name,
            file: None,
            identity: None,
            offset: 0,
            events,
            dir,
            file_watch: None,
            dir_reports_writes: false,
            #[cfg(test)]
            refuse_file_watch: false,
            #[cfg(test)]
            seen: 0,
            at_end: false,
            buf: vec![0; FIRST_READ],
            filled: false,
        };
        // Follow from the end of what is there now (the watch first, so
        // that no write after the end was taken goes unnoticed).
        f.watch_file();
        if let Ok(file) = File::open(&f.path) {
            if let Ok(meta) = file.metadata() {
                f.identity = Some((meta.dev(), meta.ino()));
                f.offset = meta.len();
            }
            f.file = Some(file);
        }
        Ok(f)
    }

    /// Watches the file the path names now, instead of the one before. A
    /// path that names nothing (yet) is left to the directory watch, whose
    /// create or move brings the follower back here.
    fn watch_file(&mut self) {
        let mut watches: Watches = self.events.watches();
        if let Some(old) = self.file_watch.take() {
            // Gone already when the old file was deleted.
            let _ = watches.remove(old);
        }
        #[cfg(test)]
        let added = match self.refuse_file_watch {
            true => Err(std::io::Error::other("the inotify watch limit (a test)")),
            false => watches.add(&self.path, FILE_MASK),
        };
        #[cfg(not(test))]
        let added = watches.add(&self.path, FILE_MASK);
        match added {
            Ok(wd) => self.file_watch = Some(wd),
            // Not there (yet): the directory watch sees it come.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if !self.dir_reports_writes => {
                // Never miss a write: the directory watch reports the
                // writes of every file in it, as it did before file watches.
                tracing::warn!(
                    "cannot watch {} itself ({e}); watching the writes of its whole directory instead",
                    self.path.display()
                );
                if watches.add(&self.dir, DIR_MASK | FILE_MASK).is_ok() {
                    self.dir_reports_writes = true;
                }
            }
            Err(_) => {}
        }
    }

    /// Reads what is new into the buffer, following rotation and
    /// truncation; returns how many bytes. `Ok(None)`: nothing new now.
    fn read_available(&mut self) -> std::io::Result<Option<usize>> {
        loop {
            if let Some(chunk) = self.read_open()? {
                return Ok(Some(chunk));
            }
            // Nothing more in the open file: has the path moved on?
            match std::fs::metadata(&self.path) {
                Ok(meta) => {
                    let id = (meta.dev(), meta.ino());
                    if Some(id) != self.identity {
                        // Rotated, or created (again): read the new file from
                        // its start, watched before it is read.
                        self.watch_file();
                        match File::open(&self.path) {
                            Ok(file) => {
                                self.file = Some(file);
                                self.identity = Some(id);
                                self.offset = 0;
                                continue;
                            }
                            Err(_) => return Ok(None),
                        }
                    }
                    if meta.len() < self.offset {
                        // Truncated in place.
                        self.offset = 0;
                        continue;
                    }
                    return Ok(None);
                }
                Err(_) => return Ok(None), // deleted or not there yet
            }
        }
    }

    fn read_open(&mut self) -> std::io::Result<Option<usize>> {
        let Some(file) = self.file.as_ref() else {
            return Ok(None);
        };
        if self.filled && self.buf.len() < READ_CHUNK {
            self.buf.resize(READ_CHUNK, 0);
        }
        let n = file.read_at(&mut self.buf, self.offset)?;
        self.filled = n == self.buf.len();
        if n == 0 {
            return Ok(None);
        }
        self.offset += n as u64;
        Ok(Some(n))
    }

    /// Waits for a change of the followed name; `Err` when the watch broke.
    /// `Ok(true)` when the change is a write to the open file and nothing
    /// else (no name came or went, no truncation seen yet).
    async fn changed(&mut self) -> Result<bool, String> {
        loop {
            match self.events.next().await {
                Some(Ok(e)) => {
                    #[cfg(test)]
                    {
                        self.seen += 1;
                    }
                    let ours = e.name.as_deref().is_none_or(|n| n == self.name.as_os_str());
                    if ours || e.mask.contains(inotify::EventMask::Q_OVERFLOW) {
                        return Ok(e.mask == inotify::EventMask::MODIFY);
                    }
                }
                Some(Err(e)) => {
                    return Err(format!("the watch on {} failed: {e}", self.path.display()))
                }
                None => return Err(format!("the watch on {} ended", self.path.display())),
            }
        }
    }
}

impl InputSource for Follower {
    async fn next(&mut self) -> Input<'_> {
        // Whether only a write was reported since the last read: then the
        // open file is read and nothing else is looked at (a `tail -F`
        // read: one `pread`); a read that finds nothing, or any other
        // change, checks for rotation and truncation.
        let mut write_only = false;
        loop {
            if !std::mem::take(&mut self.at_end) {
                let read = match write_only {
                    true => match self.read_open() {
                        Ok(None) => self.read_available(),
                        other => other,
                    },
                    false => self.read_available(),
                };
                match read {
                    Ok(Some(n)) => {
                        self.at_end = write_only && !self.filled;
                        return Input::Chunk(Stream::Stdout, &self.buf[..n]);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        return Input::End(
                            SourceEnd::Failed(format!("cannot read {}: {e}", self.path.display()))
                                .into(),
                        )
                    }
                }
            }
            match self.changed().await {
                Ok(w) => write_only = w,
                Err(e) => return Input::End(SourceEnd::Failed(e).into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A follower of `name` in a new directory, the file holding `first`.
    fn following(name: &str, first: &str) -> (tempfile::TempDir, PathBuf, Follower) {
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join(name);
        append(&ours, first);
        let f = Follower::new(ours.clone()).unwrap();
        (dir, ours, f)
    }

    #[tokio::test]
    async fn without_a_watch_on_the_file_its_directory_reports_the_writes() {
        let (_dir, ours, mut f) = following("ours.log", "before\n");
        // As if the watch limit had been reached when the file was watched.
        f.refuse_file_watch = true;
        f.watch_file();
        assert!(f.file_watch.is_none() && f.dir_reports_writes);
        // The old watch's removal is an event: taken first, so that only a
        // write can wake the follower below.
        f.changed().await.unwrap();
        let (got, ()) = tokio::join!(next_text(&mut f), async { append(&ours, "line\n") });
        assert_eq!(got, "line\n");
    }

    fn append(path: &std::path::Path, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    /// The next chunk, or a failure after 10 s (a change nobody noticed).
    async fn next_text(f: &mut Follower) -> String {
        let next = tokio::time::timeout(std::time::Duration::from_secs(10), f.next());
        match next.await.expect("no wake-up within 10 s") {
            Input::Chunk(_, bytes) => String::from_utf8_lossy(bytes).into_owned(),
            _ => panic!("the follower ended"),
        }
    }

    #[tokio::test]
    async fn writes_to_other_files_of_the_directory_wake_nobody() {
        let (dir, ours, mut f) = following("ours.log", "before\n");
        // The follower waits first (joined futures are polled in order),
        // then the writes come. Alternating names, so that inotify cannot
        // merge the events.
        let writes = async {
            for i in 0..20 {
                append(&dir.path().join(format!("other-{}.log", i % 2)), "x\n");
            }
            append(&ours, "line\n");
        };
        let (got, ()) = tokio::join!(next_text(&mut f), writes);
        assert_eq!(got, "line\n");
        // The two creations of other files are name events; the 20 writes
        // to them are not seen at all.
        assert!(f.seen <= 4, "{} inotify events read", f.seen);
    }

    #[tokio::test]
    async fn a_rotated_file_is_followed_by_its_new_watch() {
        let (dir, ours, mut f) = following("app.log", "old\n");
        let rotated = dir.path().join("app.log.1");
        // Each time the follower waits first, then the file changes.
        let (got, ()) = tokio::join!(next_text(&mut f), async { append(&ours, "a\n") });
        assert_eq!(got, "a\n");
        let rotate = async {
            std::fs::rename(&ours, &rotated).unwrap();
            append(&ours, "b\n");
        };
        let (got, ()) = tokio::join!(next_text(&mut f), rotate);
        assert_eq!(got, "b\n");
        // The new file's writes wake it through the new file's watch; the
        // rotated file is no longer read.
        let (got, ()) = tokio::join!(next_text(&mut f), async {
            append(&rotated, "late\n");
            append(&ours, "c\n");
        });
        assert_eq!(got, "c\n");
        let (got, ()) = tokio::join!(next_text(&mut f), async { append(&ours, "d\n") });
        assert_eq!(got, "d\n");
    }

    #[tokio::test]
    async fn reads_after_writes_miss_nothing_and_see_a_truncation() {
        let (_dir, ours, mut f) = following("app.log", "before\n");
        // Each write is read once its event came: the follower does not
        // read again after a short read, it waits for the next event.
        for i in 0..200 {
            let line = format!("line {i}\n");
            let (got, ()) = tokio::join!(next_text(&mut f), async { append(&ours, &line) });
            assert_eq!(got, line);
        }
        assert!(f.at_end);
        // Short lines never fill the first buffer: it stays a page.
        assert_eq!(f.buf.len(), FIRST_READ);
        // Two writes before the follower looks: both in one read, and the
        // second write's event finds nothing new (a read to the end, then
        // back to waiting), never a repeat.
        append(&ours, "x\n");
        append(&ours, "y\n");
        assert_eq!(next_text(&mut f).await, "x\ny\n");
        let (got, ()) = tokio::join!(next_text(&mut f), async { append(&ours, "z\n") });
        assert_eq!(got, "z\n");
        // A truncation is reported as a write too: the read finds the file
        // shorter than what was read, and starts over.
        let (got, ()) = tokio::join!(next_text(&mut f), async {
            std::fs::write(&ours, "").unwrap();
            append(&ours, "after truncation\n");
        });
        assert_eq!(got, "after truncation\n");
    }

    #[tokio::test]
    async fn a_burst_fills_the_first_buffer_then_is_read_in_full_chunks() {
        let (_dir, ours, mut f) = following("burst.log", "before\n");
        let burst: String = (0..2000).map(|i| format!("line {i:05}\n")).collect();
        assert!(burst.len() > FIRST_READ && burst.len() < READ_CHUNK);
        let (first, ()) = tokio::join!(next_text(&mut f), async { append(&ours, &burst) });
        // The first read took a page and found it full: not at the end.
        assert_eq!(first.len(), FIRST_READ);
        assert!(!f.at_end);
        // The rest comes at once, in a buffer grown to a full chunk.
        let rest = next_text(&mut f).await;
        assert_eq!(f.buf.len(), READ_CHUNK);
        assert_eq!(first + &rest, burst);
        let (got, ()) = tokio::join!(next_text(&mut f), async { append(&ours, "after\n") });
        assert_eq!(got, "after\n");
    }
}
