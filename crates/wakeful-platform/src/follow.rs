//! Being woken when a followed file changes: the part of `tail -F` that
//! depends on the system. What to read, rotation and truncation are the
//! follower's (the engine's file source); a [`Watch`] only says when to
//! look, and whether only a write to the open file was seen.
//!
//! - Linux backend: inotify, read in the caller's task, on the file itself
//!   (writes, truncation, attributes) and on its directory for names coming
//!   and going only; when the file itself cannot be watched (the inotify
//!   watch limit), the directory watch reports writes too. No polling.
//! - posix backend: `stat` of the path every [`POLL`]; a change of device,
//!   inode, size or modification time wakes the follower (creation,
//!   rotation, truncation, writes). A write is noticed up to [`POLL`] late.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often the posix backend looks at a followed path.
pub const POLL: Duration = Duration::from_millis(100);

/// What woke the follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A write to the open file, and nothing else seen: one read at the
    /// offset reached is enough.
    Write,
    /// Anything else (a name came or went, attributes, truncation, an
    /// overflow): look at the path again.
    Other,
}

/// The watch of one followed path.
pub struct Watch {
    inner: Inner,
}

enum Inner {
    #[cfg(target_os = "linux")]
    Inotify(Box<crate::linux::follow::Inotify>),
    Poll(Poll),
}

impl Watch {
    /// Watches `path` (whose directory must exist) with the backend in use.
    pub fn new(path: &Path) -> std::io::Result<Watch> {
        let (dir, name) = split(path)?;
        #[cfg(target_os = "linux")]
        if crate::backend() == crate::Backend::Linux {
            let w = crate::linux::follow::Inotify::new(path.to_path_buf(), dir, name)?;
            return Ok(Watch {
                inner: Inner::Inotify(Box::new(w)),
            });
        }
        let _ = (dir, name);
        Ok(Watch {
            inner: Inner::Poll(Poll::new(path.to_path_buf())),
        })
    }

    /// The path names another file now (or a file again): watch that one.
    pub fn rewatch(&mut self) {
        match &mut self.inner {
            #[cfg(target_os = "linux")]
            Inner::Inotify(w) => w.watch_file(),
            Inner::Poll(p) => p.last = Poll::look(&p.path),
        }
    }

    /// Waits for the next change; `Err` when the watch broke.
    pub async fn changed(&mut self) -> std::io::Result<Change> {
        match &mut self.inner {
            #[cfg(target_os = "linux")]
            Inner::Inotify(w) => w.changed().await,
            Inner::Poll(p) => Ok(p.changed().await),
        }
    }

    /// How it watches: `inotify` or `poll`.
    pub fn kind(&self) -> &'static str {
        match &self.inner {
            #[cfg(target_os = "linux")]
            Inner::Inotify(_) => "inotify",
            Inner::Poll(_) => "poll",
        }
    }

    /// The Linux backend's watch, for its tests.
    #[cfg(target_os = "linux")]
    #[doc(hidden)]
    pub fn inotify(&mut self) -> Option<&mut crate::linux::follow::Inotify> {
        match &mut self.inner {
            Inner::Inotify(w) => Some(w),
            Inner::Poll(_) => None,
        }
    }
}

fn split(path: &Path) -> std::io::Result<(PathBuf, OsString)> {
    let bad = |what: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} {what}", path.display()),
        )
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| bad("has no parent directory to watch"))?;
    let name = path.file_name().ok_or_else(|| bad("names no file"))?;
    Ok((dir.to_path_buf(), name.to_os_string()))
}

/// (device, inode, size, modification time in ns) of what a path names.
type Look = Option<(u64, u64, u64, i128)>;

/// The posix backend's watch: `stat` every [`POLL`].
struct Poll {
    path: PathBuf,
    last: Look,
}

impl Poll {
    fn new(path: PathBuf) -> Poll {
        let last = Poll::look(&path);
        Poll { path, last }
    }

    fn look(path: &Path) -> Look {
        let m = std::fs::metadata(path).ok()?;
        let mtime = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
        Some((m.dev(), m.ino(), m.len(), mtime))
    }

    async fn changed(&mut self) -> Change {
        loop {
            tokio::time::sleep(POLL).await;
            let now = Poll::look(&self.path);
            if now == self.last {
                continue;
            }
            let change = match (self.last, now) {
                (Some((d0, i0, len0, _)), Some((d1, i1, len1, _)))
                    if (d0, i0) == (d1, i1) && len1 > len0 =>
                {
                    Change::Write
                }
                _ => Change::Other,
            };
            self.last = now;
            return change;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn next(w: &mut Watch) -> Change {
        let f = tokio::time::timeout(Duration::from_secs(10), w.changed());
        f.await.expect("a change within 10 s").unwrap()
    }

    #[tokio::test]
    async fn polling_sees_creation_writes_truncation_and_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        let mut w = Watch {
            inner: Inner::Poll(Poll::new(path.clone())),
        };
        assert_eq!(w.kind(), "poll");
        std::fs::write(&path, "a\n").unwrap();
        assert_eq!(next(&mut w).await, Change::Other);
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"b\n").unwrap();
        assert_eq!(next(&mut w).await, Change::Write);
        std::fs::write(&path, "").unwrap();
        assert_eq!(next(&mut w).await, Change::Other);
        std::fs::rename(&path, dir.path().join("app.log.1")).unwrap();
        std::fs::write(&path, "new\n").unwrap();
        assert_eq!(next(&mut w).await, Change::Other);
    }
}
