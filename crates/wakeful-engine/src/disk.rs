//! The free space of the state directory's filesystem, as output files
//! and the daemon see it (docs/STORAGE.md, "Keep-free space").
//!
//! Asking the filesystem (`statvfs(2)`) for every write would cost a
//! system call per line; a [`DiskGuard`] asks at most once a second, and
//! at once when what was written since the last answer could have taken
//! the free space below the keep-free mark. Below it, output files stop
//! growing ([`DiskGuard::allows`] says no); below [`FULL_BYTES`] the disk
//! counts as full, and the daemon refuses requests that must write.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wakeful_core::storage::KeepFree;

/// Below this much free space the disk counts as full: nothing that must
/// write is started.
pub const FULL_BYTES: u64 = 1 << 20;

/// How far above the keep-free mark the free space must be again for a
/// low disk to count as no longer low: an eighth of the mark, between
/// 256 KiB and 64 MiB.
fn hysteresis(keep_free: u64) -> u64 {
    (keep_free / 8).clamp(256 << 10, 64 << 20)
}

/// How far above the keep-free mark output files stop: room for what the
/// database still writes (it records events on, its redo log and WAL
/// grow a little before they are emptied), so that the filesystem keeps
/// its keep-free space: half the mark, between 2 MiB and 32 MiB.
pub fn headroom(keep_free: u64) -> u64 {
    (keep_free / 2).clamp(2 << 20, 32 << 20)
}

/// How long an answer of the filesystem is trusted.
const RECHECK: Duration = Duration::from_secs(1);

/// What the filesystem said, and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskReading {
    /// Bytes free (for this user).
    pub free: u64,
    /// The filesystem's size.
    pub total: u64,
    /// Bytes to keep free.
    pub keep_free: u64,
    /// Below the keep-free space: output files do not grow.
    pub low: bool,
    /// Below [`FULL_BYTES`] (or a write failed for lack of space since
    /// the last answer): requests that must write are refused.
    pub full: bool,
}

/// Asks a filesystem for (free, total) bytes.
pub type SpaceQuery = dyn Fn(&Path) -> std::io::Result<(u64, u64)> + Send + Sync;

/// `statvfs(2)`: the blocks free to unprivileged users, and the size
/// (the platform layer's [`wakeful_platform::disk::space`]).
pub fn statvfs_space(path: &Path) -> std::io::Result<(u64, u64)> {
    wakeful_platform::disk::space(path)
}

struct Last {
    at: Option<Instant>,
    reading: DiskReading,
}

/// Watches the free space of one directory's filesystem; see the module
/// docs. Shared by every output file of a registry and by the daemon.
pub struct DiskGuard {
    dir: PathBuf,
    keep_free: KeepFree,
    query: Box<SpaceQuery>,
    last: Mutex<Last>,
    /// Bytes written since the last answer.
    written: AtomicU64,
    low: AtomicBool,
    /// A write failed for lack of space since the last answer.
    failed: AtomicBool,
    /// Answers that failed (the directory vanished, …): writes go on.
    errors: AtomicU64,
    /// Someone waits in [`DiskGuard::written`] for the next write.
    wanted: AtomicBool,
    /// Wakes that waiter.
    wrote: tokio::sync::Notify,
}

impl std::fmt::Debug for DiskGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskGuard")
            .field("dir", &self.dir)
            .field("keep_free", &self.keep_free)
            .finish_non_exhaustive()
    }
}

impl DiskGuard {
    /// A guard of `dir`'s filesystem keeping `keep_free`.
    pub fn new(dir: impl Into<PathBuf>, keep_free: KeepFree) -> Arc<Self> {
        Self::with_query(dir, keep_free, Box::new(statvfs_space))
    }

    /// A guard that asks `query` instead of the filesystem (tests).
    pub fn with_query(
        dir: impl Into<PathBuf>,
        keep_free: KeepFree,
        query: Box<SpaceQuery>,
    ) -> Arc<Self> {
        Arc::new(DiskGuard {
            dir: dir.into(),
            keep_free,
            query,
            last: Mutex::new(Last {
                at: None,
                reading: DiskReading::default(),
            }),
            written: AtomicU64::new(0),
            low: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            errors: AtomicU64::new(0),
            wanted: AtomicBool::new(false),
            wrote: tokio::sync::Notify::new(),
        })
    }

    /// The directory watched.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The keep-free setting.
    pub fn keep_free(&self) -> KeepFree {
        self.keep_free
    }

    /// Asks the filesystem now.
    pub fn check(&self, now: Instant) -> DiskReading {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        self.refresh(&mut last, now)
    }

    fn refresh(&self, last: &mut Last, now: Instant) -> DiskReading {
        match (self.query)(&self.dir) {
            Ok((free, total)) => {
                let keep_free = self.keep_free.bytes(total);
                let failed = self.failed.swap(false, Ordering::AcqRel);
                // A write that failed for lack of space wins over a reading
                // that still shows a few blocks (reserved, or taken since).
                let full = free < FULL_BYTES.min(keep_free.max(1)) || (failed && free < keep_free);
                // Once low, it stays low until a margin above the mark is
                // free again: a disk that hovers at the mark does not turn
                // output on and off line by line.
                let was_low = last.reading.low;
                let mark = keep_free.saturating_add(headroom(keep_free));
                let mark = if was_low {
                    mark.saturating_add(hysteresis(keep_free))
                } else {
                    mark
                };
                last.reading = DiskReading {
                    free,
                    total,
                    keep_free,
                    low: free < mark || full,
                    full,
                };
            }
            Err(e) => {
                let n = self.errors.fetch_add(1, Ordering::Relaxed);
                if n == 0 {
                    tracing::warn!(
                        "cannot read the free space of {}: {e}; output files are written without the keep-free check",
                        self.dir.display()
                    );
                }
            }
        }
        last.at = Some(now);
        self.written.store(0, Ordering::Relaxed);
        self.low.store(last.reading.low, Ordering::Release);
        last.reading
    }

    /// The last answer (asking again if it is older than a second).
    pub fn reading(&self, now: Instant) -> DiskReading {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last
            .at
            .is_none_or(|at| now.saturating_duration_since(at) >= RECHECK)
        {
            return self.refresh(&mut last, now);
        }
        last.reading
    }

    /// Whether `bytes` more may be written to an output file now: the
    /// free space stays at or above the keep-free mark.
    pub fn allows(&self, bytes: u64, now: Instant) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let stale = last
            .at
            .is_none_or(|at| now.saturating_duration_since(at) >= RECHECK);
        let r = last.reading;
        let since = self.written.load(Ordering::Relaxed) + bytes;
        // Ask again, before the second is over, once what was written
        // since could have reached the mark.
        let near = r.free.saturating_sub(since) < r.keep_free + headroom(r.keep_free) + (1 << 20);
        let r = if stale || (near && !r.low) {
            self.refresh(&mut last, now)
        } else {
            r
        };
        let since = self.written.load(Ordering::Relaxed) + bytes;
        let ok = !r.low && r.free.saturating_sub(since) >= r.keep_free + headroom(r.keep_free);
        if ok {
            self.written.store(since, Ordering::Relaxed);
            drop(last);
            self.note_written();
        }
        ok
    }

    /// Wakes a task waiting in [`DiskGuard::written`]; costs one atomic
    /// load when none waits.
    fn note_written(&self) {
        if self.wanted.load(Ordering::Relaxed) && self.wanted.swap(false, Ordering::AcqRel) {
            self.wrote.notify_one();
        }
    }

    /// Returns once an output file writes again (after this is called):
    /// the daemon's size check sleeps on it while nothing is written.
    pub async fn written(&self) {
        let notified = self.wrote.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        self.wanted.store(true, Ordering::Release);
        notified.await;
    }

    /// A write failed for lack of space (`ENOSPC`, `EDQUOT`): until the
    /// next answer shows room again, the disk counts as full.
    pub fn note_full(&self) {
        self.failed.store(true, Ordering::Release);
        self.low.store(true, Ordering::Release);
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.at = None;
    }

    /// Whether the last answer was below the keep-free mark.
    pub fn is_low(&self) -> bool {
        self.low.load(Ordering::Acquire)
    }
}

/// Whether `e` says the disk (or the user's quota) is full.
pub fn is_no_space(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn guard(free: Arc<AtomicU64>, keep: u64) -> Arc<DiskGuard> {
        DiskGuard::with_query(
            "/x",
            KeepFree::Bytes(wakeful_core::storage::ByteSize(keep)),
            Box::new(move |_| Ok((free.load(Ordering::SeqCst), 100 << 20))),
        )
    }

    #[test]
    fn writes_stop_at_the_keep_free_mark_and_resume_once_there_is_room() {
        let t0 = Instant::now();
        let free = Arc::new(AtomicU64::new(50 << 20));
        // 10 MiB kept free: output stops 5 MiB above it (room for the
        // database), and starts again 1.25 MiB above that.
        let g = guard(free.clone(), 10 << 20);
        assert!(g.allows(1 << 20, t0));
        assert!(!g.check(t0).low);
        // Something else takes the disk: seen within the second.
        free.store(14 << 20, Ordering::SeqCst);
        assert!(g.allows(64 << 10, t0), "the last answer still holds");
        assert!(!g.allows(64 << 10, t0 + RECHECK), "asked again");
        assert!(g.is_low());
        assert!(!g.check(t0).full, "low is not full");
        // Our own writes that would reach the mark ask again at once.
        free.store(17 << 20, Ordering::SeqCst);
        let t1 = t0 + 2 * RECHECK;
        assert!(g.allows(1 << 10, t1));
        assert!(
            !g.allows(3 << 20, t1),
            "17 MiB free minus 3 MiB is below the mark"
        );
        assert!(!g.is_low());
        // Low, then a little room: still low (no flapping at the mark);
        // then room again, seen at the next answer.
        free.store(14 << 20, Ordering::SeqCst);
        assert!(!g.allows(1, t1 + RECHECK));
        free.store(15 << 20 | 512 << 10, Ordering::SeqCst);
        assert!(!g.allows(1, t1 + 2 * RECHECK), "within the margin");
        free.store(60 << 20, Ordering::SeqCst);
        assert!(
            !g.allows(1, t1 + 2 * RECHECK),
            "the answer is still the last one"
        );
        assert!(g.allows(1, t1 + 3 * RECHECK));
        assert!(!g.is_low());
    }

    #[test]
    fn a_failed_write_makes_the_disk_full_until_room_shows() {
        let t0 = Instant::now();
        let free = Arc::new(AtomicU64::new(5 << 20));
        let g = guard(free.clone(), 2 << 20);
        assert!(!g.check(t0).full);
        g.note_full();
        // The filesystem still shows a little room (reserved blocks, or
        // taken since): the failed write wins below the mark.
        free.store(1 << 20, Ordering::SeqCst);
        let r = g.reading(t0);
        assert!(r.full && r.low, "{r:?}");
        free.store(0, Ordering::SeqCst);
        assert!(g.check(t0).full);
        free.store(40 << 20, Ordering::SeqCst);
        let r = g.check(t0);
        assert!(!r.full && !r.low, "{r:?}");
    }
}
