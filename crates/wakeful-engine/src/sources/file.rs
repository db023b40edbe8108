//! The file source: follow a file like `tail -F`.
//!
//! - It starts at the file's end (or waits for a file that does not exist yet).
//! - The file's directory is watched with inotify, read in the monitor's own
//!   task (no watcher thread, no hand-over): a change of the file's name in
//!   that directory wakes the follower, which then reads everything new. No
//!   polling.
//! - Rotation (the path now names another file): the old file is read to its
//!   end, then the new one from its start.
//! - Truncation (the file got shorter than what was read): reading restarts at
//!   the start. As with `tail -F`, a truncation immediately followed by more
//!   bytes than the old size, before the follower looks, cannot be told from
//!   an append.
//! - Deletion: what was written before is still read; the follower then waits
//!   for the file to appear again and reads it from its start.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use futures_util::StreamExt;
use inotify::{EventStream, Inotify, WatchMask};
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
    buf: Vec<u8>,
}

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
        inotify
            .watches()
            .add(
                &dir,
                WatchMask::MODIFY
                    | WatchMask::CLOSE_WRITE
                    | WatchMask::CREATE
                    | WatchMask::DELETE
                    | WatchMask::MOVED_FROM
                    | WatchMask::MOVED_TO
                    | WatchMask::ATTRIB,
            )
            .map_err(cannot)?;
        let events = inotify.into_event_stream(vec![0u8; 4096]).map_err(cannot)?;
        let mut f = Follower {
            path,
            name,
            file: None,
            identity: None,
            offset: 0,
            events,
            buf: vec![0; READ_CHUNK],
        };
        // Follow from the end of what is there now.
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
                        // its start.
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
        let Some(file) = self.file.as_mut() else {
            return Ok(None);
        };
        file.seek(SeekFrom::Start(self.offset))?;
        let n = file.read(&mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        self.offset += n as u64;
        Ok(Some(n))
    }

    /// Waits for a change of the followed name; `Err` when the watch broke.
    async fn changed(&mut self) -> Result<(), String> {
        loop {
            match self.events.next().await {
                Some(Ok(e)) => {
                    let ours = e.name.as_deref().is_none_or(|n| n == self.name.as_os_str());
                    if ours || e.mask.contains(inotify::EventMask::Q_OVERFLOW) {
                        return Ok(());
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
        loop {
            match self.read_available() {
                Ok(Some(n)) => return Input::Chunk(Stream::Stdout, &self.buf[..n]),
                Ok(None) => {}
                Err(e) => {
                    return Input::End(
                        SourceEnd::Failed(format!("cannot read {}: {e}", self.path.display()))
                            .into(),
                    )
                }
            }
            if let Err(e) = self.changed().await {
                return Input::End(SourceEnd::Failed(e).into());
            }
        }
    }
}
