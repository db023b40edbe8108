//! The file source: follow a file like `tail -F`.
//!
//! - It starts at the file's end (or waits for a file that does not exist yet).
//! - The platform layer's [`Watch`] says when to look (Linux: inotify on the
//!   file and, for names coming and going, its directory, read in the
//!   monitor's own task; the posix backend: `stat` polled every 100 ms). A
//!   change wakes the follower, which then reads everything new. A reported
//!   write is one `pread` at the offset read so far; only a read that finds
//!   nothing, or any other change, looks at the path again (rotation,
//!   truncation).
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

use wakeful_core::machine::SourceEnd;
use wakeful_core::Stream;
use wakeful_platform::follow::{Change, Watch};

use crate::process::driver::READ_CHUNK;
use crate::source::{Input, InputSource};

/// A `tail -F` follower; see the module docs.
pub(crate) struct Follower {
    path: PathBuf,
    file: Option<File>,
    /// (device, inode) of the open file.
    identity: Option<(u64, u64)>,
    offset: u64,
    watch: Watch,
    /// The last read stopped short of a full buffer after a write was
    /// reported: the file was read to its end, and any later write brings
    /// another change. The next call waits for that change instead of
    /// reading again.
    at_end: bool,
    /// What a read takes: [`FIRST_READ`] bytes until a read fills it, then
    /// [`READ_CHUNK`] (a file written in bursts).
    buf: Vec<u8>,
    /// The last read filled the buffer: there may be more to read.
    filled: bool,
}

/// Why a file cannot be followed (the `failed` reason of its monitor).
#[derive(Debug, thiserror::Error)]
pub(crate) enum FollowFileError {
    /// The path has no parent directory.
    #[error("{} has no parent directory to watch", path.display())]
    NoParent {
        /// The path.
        path: PathBuf,
    },
    /// The parent directory does not exist.
    #[error("directory {} does not exist; create it first (the file itself may appear later)", dir.display())]
    NoDirectory {
        /// The directory.
        dir: PathBuf,
    },
    /// The path names no file.
    #[error("{} names no file", path.display())]
    NoFile {
        /// The path.
        path: PathBuf,
    },
    /// The watch could not be set up.
    #[error("cannot watch {}: {source}", dir.display())]
    Watch {
        /// The directory watched.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The watch broke.
    #[error("the watch on {} failed: {source}", path.display())]
    WatchFailed {
        /// The file followed.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The buffer a follower starts with: a page, enough for the lines of a
/// log, so that a thousand followers do not each hold 64 KiB.
const FIRST_READ: usize = 4 * 1024;

impl Follower {
    /// Starts following `path` (absolute) from its current end.
    pub(crate) fn new(path: PathBuf) -> Result<Self, FollowFileError> {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .ok_or_else(|| FollowFileError::NoParent { path: path.clone() })?
            .to_path_buf();
        if !dir.is_dir() {
            return Err(FollowFileError::NoDirectory { dir });
        }
        if path.file_name().is_none() {
            return Err(FollowFileError::NoFile { path });
        }
        // Follow from the end of what is there now (the watch first, so
        // that no write after the end was taken goes unnoticed).
        let watch = Watch::new(&path).map_err(|source| FollowFileError::Watch {
            dir: dir.clone(),
            source,
        })?;
        let mut f = Follower {
            path,
            file: None,
            identity: None,
            offset: 0,
            watch,
            at_end: false,
            buf: vec![0; FIRST_READ],
            filled: false,
        };
        if let Ok(file) = File::open(&f.path) {
            if let Ok(meta) = file.metadata() {
                f.identity = Some((meta.dev(), meta.ino()));
                f.offset = meta.len();
            }
            f.file = Some(file);
        }
        Ok(f)
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
                        self.watch.rewatch();
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
    async fn changed(&mut self) -> Result<bool, FollowFileError> {
        match self.watch.changed().await {
            Ok(c) => Ok(c == Change::Write),
            Err(source) => Err(FollowFileError::WatchFailed {
                path: self.path.clone(),
                source,
            }),
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
                Err(e) => return Input::End(SourceEnd::Failed(e.to_string()).into()),
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
        let Some(w) = f.watch.inotify() else {
            // The posix backend polls: it has no watch to run out of.
            assert_eq!(f.watch.kind(), "poll");
            return;
        };
        // As if the watch limit had been reached when the file was watched.
        w.refuse_file_watch();
        w.watch_file();
        assert!(!w.watches_file() && w.dir_reports_writes());
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
        if let Some(w) = f.watch.inotify() {
            assert!(w.seen() <= 4, "{} inotify events read", w.seen());
        }
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
        // (Polled every 100 ms, the posix backend takes longer a write.)
        let rounds = if f.watch.kind() == "poll" { 20 } else { 200 };
        for i in 0..rounds {
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
