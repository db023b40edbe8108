//! Following a file with inotify ([`crate::follow`]'s Linux backend).
//!
//! The file itself is watched for writes, truncation and attributes; its
//! directory only for names coming and going (create, delete, move): an
//! append to another file of the same directory wakes nobody, so twenty
//! followers of twenty files in one directory wake once per line, not
//! twenty times. When the file itself cannot be watched (the system's
//! inotify watch limit), the directory watch reports writes too, with a
//! warning in the log: slower, never deaf. The events are read in the
//! caller's task (no watcher thread, no hand-over).

use std::ffi::OsString;
use std::path::PathBuf;

use futures_util::StreamExt;
use inotify::{EventMask, EventStream, Inotify as Raw, WatchDescriptor, WatchMask, Watches};

use crate::follow::Change;

/// What the directory watch reports: names coming and going.
const DIR_MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::DELETE)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::MOVED_TO);

/// What the file watch reports: writes, truncation, attributes.
const FILE_MASK: WatchMask = WatchMask::MODIFY
    .union(WatchMask::CLOSE_WRITE)
    .union(WatchMask::ATTRIB);

/// The inotify watches of one followed path.
pub struct Inotify {
    path: PathBuf,
    /// The file's name in its directory (what the directory's events name).
    name: OsString,
    dir: PathBuf,
    events: EventStream<Vec<u8>>,
    /// The watch on the file the path named when last looked at.
    file_watch: Option<WatchDescriptor>,
    /// The directory watch reports writes too: a watch on the file itself
    /// could not be added.
    dir_reports_writes: bool,
    /// Makes the file watch fail, to test the fallback.
    refuse_file_watch: bool,
    /// Events read so far (each one a wake-up of the caller's task).
    seen: usize,
}

impl Inotify {
    /// Watches directory `dir` for `name` coming and going, and the file
    /// `path` names now, if any.
    pub fn new(path: PathBuf, dir: PathBuf, name: OsString) -> std::io::Result<Inotify> {
        let raw = Raw::init()?;
        raw.watches().add(&dir, DIR_MASK)?;
        let events = raw.into_event_stream(vec![0u8; 4096])?;
        let mut w = Inotify {
            path,
            name,
            dir,
            events,
            file_watch: None,
            dir_reports_writes: false,
            refuse_file_watch: false,
            seen: 0,
        };
        w.watch_file();
        Ok(w)
    }

    /// Watches the file the path names now, instead of the one before. A
    /// path that names nothing (yet) is left to the directory watch.
    pub fn watch_file(&mut self) {
        let mut watches: Watches = self.events.watches();
        if let Some(old) = self.file_watch.take() {
            // Gone already when the old file was deleted.
            let _ = watches.remove(old);
        }
        let added = match self.refuse_file_watch {
            true => Err(std::io::Error::other("the inotify watch limit (a test)")),
            false => watches.add(&self.path, FILE_MASK),
        };
        match added {
            Ok(wd) => self.file_watch = Some(wd),
            // Not there (yet): the directory watch sees it come.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if !self.dir_reports_writes => {
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

    /// Waits for an event about the followed name (or an overflow).
    pub async fn changed(&mut self) -> std::io::Result<Change> {
        loop {
            match self.events.next().await {
                Some(Ok(e)) => {
                    self.seen += 1;
                    let ours = e.name.as_deref().is_none_or(|n| n == self.name.as_os_str());
                    if ours || e.mask.contains(EventMask::Q_OVERFLOW) {
                        return Ok(match e.mask == EventMask::MODIFY {
                            true => Change::Write,
                            false => Change::Other,
                        });
                    }
                }
                Some(Err(e)) => return Err(e),
                None => return Err(std::io::Error::other("the inotify stream ended")),
            }
        }
    }

    /// Events read so far (tests count wake-ups with it).
    pub fn seen(&self) -> usize {
        self.seen
    }

    /// Whether the file itself is watched.
    pub fn watches_file(&self) -> bool {
        self.file_watch.is_some()
    }

    /// Whether the directory watch reports writes (the fallback).
    pub fn dir_reports_writes(&self) -> bool {
        self.dir_reports_writes
    }

    /// From now on, adding a watch on the file fails as at the watch
    /// limit (for tests of the fallback).
    #[doc(hidden)]
    pub fn refuse_file_watch(&mut self) {
        self.refuse_file_watch = true;
    }
}
