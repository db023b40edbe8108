//! The daemon's share of the disk (docs/STORAGE.md): what the store
//! takes, pruning ended monitors by age and size, and refusing writes
//! while the disk is full.
//!
//! - A task ([`Storage::run`]) prunes when the daemon starts, then every
//!   tenth of `max_age` (at most every 10 minutes), and at once when a
//!   size check (three `stat`s and the output directory) finds the store
//!   over a cap. A size check runs at most every 10 s, and only when
//!   something was written since the last ([`storage::SizeChecks`]): an
//!   idle daemon is not woken for it. `wakeful prune` runs the same prune on
//!   request.
//! - A prune removes what [`wakeful_core::storage::plan`] decides, output
//!   files after their rows (a daemon killed in between leaves files that
//!   the next prune sweeps), records what it removed (the `prunes` table:
//!   `status`, `export`, the views), logs it, and gives the space back.
//! - [`Storage::writable`] is asked before any request that must write: a
//!   full disk, or a store that cannot write, refuses it at once with
//!   what to do, and nothing starts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use wakeful_core::outlog::{self, Manifest};
use wakeful_core::storage::{self, ByteSize, PruneCause, PruneRecord, Retention, Usage};
use wakeful_engine::{DiskGuard, MonitorRegistry};
use wakeful_protocol::{PruneResult, PrunedMonitor, StorageStatus};
use wakeful_store::retention::Pruner;
use wakeful_store::StoreReader;

/// How often the sizes are checked.
const SIZE_CHECK: Duration = Duration::from_secs(10);
/// The longest time between two prunes by age.
const PRUNE_EVERY: Duration = Duration::from_secs(600);
/// Rounds of trimming running monitors' oldest events in one prune.
const TRIM_ROUNDS: usize = 4;
/// Output files of no known monitor younger than this are left alone (a
/// monitor being registered right now).
const ORPHAN_AGE: Duration = Duration::from_secs(3600);

/// Why a request that must write cannot ([`Storage::writable`]): the disk
/// is full, or the store failed its last write.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what}: {}; nothing was started or changed. Free some space on that filesystem (`wakeful prune` removes ended monitors past `[store] max_age`; `du -sh {}/*` shows what takes it), then try again: the daemon resumes by itself", why(*full, dir, *free), dir.display())]
pub struct NotWritable {
    /// What the request would have done (`start a monitor` …).
    pub what: String,
    /// The state directory.
    pub dir: PathBuf,
    /// The free space on its filesystem.
    pub free: ByteSize,
    /// Whether the filesystem is full (else the store is failing).
    pub full: bool,
}

/// Why nothing can be written, for [`NotWritable`].
fn why(full: bool, dir: &Path, free: ByteSize) -> String {
    let dir = dir.display();
    if full {
        format!("the filesystem of the state directory {dir} is full ({free} free)")
    } else {
        format!("the event store cannot write ({free} free on {dir}; the daemon log says why)")
    }
}

/// Why a prune failed.
#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    /// The store.
    #[error(transparent)]
    Store(#[from] wakeful_store::StoreError),
    /// The prune's thread.
    #[error("the prune did not finish: {0}")]
    Task(String),
}

#[derive(Default)]
struct Totals {
    last: Option<PruneRecord>,
    events: u64,
    monitors: u64,
    bytes: u64,
    usage: Usage,
}

/// See the module docs.
pub struct Storage {
    output_dir: PathBuf,
    policy: Retention,
    caps: storage::OutputCaps,
    disk: Arc<DiskGuard>,
    pruner: Pruner,
    registry: MonitorRegistry,
    reader: StoreReader,
    totals: Mutex<Totals>,
    /// One prune at a time.
    pruning: tokio::sync::Mutex<()>,
}

impl Storage {
    /// The daemon's storage, over `pruner` and `reader`.
    pub fn new(
        output_dir: PathBuf,
        options: &crate::config::StoreOptions,
        disk: Arc<DiskGuard>,
        pruner: Pruner,
        registry: MonitorRegistry,
        reader: StoreReader,
    ) -> Arc<Self> {
        let last = reader.prunes(None).ok().and_then(|mut p| p.pop());
        Arc::new(Storage {
            output_dir,
            policy: options.retention(),
            caps: options.output_caps(),
            disk,
            pruner,
            registry,
            reader,
            totals: Mutex::new(Totals {
                last,
                ..Totals::default()
            }),
            pruning: tokio::sync::Mutex::new(()),
        })
    }

    /// `Err` with what to tell the client when a request that must write
    /// cannot: the disk is full, or the store failed its last write.
    pub fn writable(&self, what: &str) -> Result<(), NotWritable> {
        // Asked afresh: one `statvfs` per request that writes.
        let r = self.disk.check(Instant::now());
        let failing = self.registry.hub().is_failing();
        if !r.full && !failing {
            return Ok(());
        }
        Err(NotWritable {
            what: what.to_string(),
            dir: self.disk.dir().to_path_buf(),
            free: ByteSize(r.free),
            full: r.full,
        })
    }

    /// What `status` shows.
    pub fn status(&self) -> StorageStatus {
        let r = self.disk.reading(Instant::now());
        let t = self.totals.lock().unwrap_or_else(|p| p.into_inner());
        StorageStatus {
            database_bytes: t.usage.database,
            output_bytes: t.usage.output,
            max_size: self.policy.max_size,
            max_age: self.policy.max_age.to_string(),
            output_max: self.caps.per_file,
            output_total: self.caps.total,
            free_bytes: r.free,
            keep_free_bytes: r.keep_free,
            disk_low: r.low,
            disk_full: r.full || self.registry.hub().is_failing(),
            output_not_written_bytes: self.registry.output_budget().not_written(),
            last_prune: t.last.clone(),
            pruned_events: t.events,
            pruned_monitors: t.monitors,
            pruned_bytes: t.bytes,
            oldest_seq: t.last.as_ref().and_then(|l| l.oldest_kept_seq),
        }
    }

    /// Measures what the store takes now.
    fn measure(&self) -> (Usage, HashMap<String, u64>) {
        let outputs = output_sizes(&self.output_dir);
        let usage = Usage {
            database: self.pruner.database_bytes(),
            output: outputs.values().sum(),
        };
        self.totals.lock().unwrap_or_else(|p| p.into_inner()).usage = usage;
        (usage, outputs)
    }

    /// Prunes now (see the module docs) as of `now`; with `dry_run`,
    /// only says what would go.
    pub async fn prune(
        self: &Arc<Self>,
        now: DateTime<Utc>,
        dry_run: bool,
    ) -> Result<PruneResult, PruneError> {
        let _one = self.pruning.lock().await;
        let me = self.clone();
        let result = tokio::task::spawn_blocking(move || me.prune_blocking(now, dry_run))
            .await
            .map_err(|e| PruneError::Task(e.to_string()))??;
        Ok(result)
    }

    fn prune_blocking(&self, now: DateTime<Utc>, dry_run: bool) -> Result<PruneResult, PruneError> {
        let (usage, outputs) = self.measure();
        let candidates = self
            .pruner
            .candidates(&|id| outputs.get(id).copied().unwrap_or(0))?;
        let plan = storage::plan(&candidates, usage, &self.policy, now);
        let mut causes: Vec<PruneCause> = Vec::new();
        for (_, c) in &plan.monitors {
            if !causes.contains(c) {
                causes.push(*c);
            }
        }
        if !plan.outputs.is_empty() {
            causes.push(PruneCause::OutputTotal);
        }
        if plan.running_trim > 0 && !causes.contains(&PruneCause::Size) {
            causes.push(PruneCause::Size);
        }
        let mut record = PruneRecord {
            at: now,
            events: plan.events,
            monitors: plan.monitors.len() as u64,
            outputs: plan.outputs.len() as u64,
            bytes: plan.bytes,
            causes,
            oldest_kept_seq: None,
            oldest_kept_at: None,
            running_events: 0,
            running_monitors: 0,
        };
        let result = |record: PruneRecord| PruneResult {
            dry_run,
            record,
            monitors: plan
                .monitors
                .iter()
                .map(|(id, cause)| PrunedMonitor {
                    id: id.clone(),
                    cause: *cause,
                })
                .collect(),
            outputs: plan.outputs.clone(),
            database_bytes: usage.database,
            output_bytes: usage.output,
        };
        if dry_run {
            let trim = self.pruner.trim_running(plan.running_trim, true)?;
            record.running_events = trim.events;
            record.running_monitors = trim.monitors;
            record.events += trim.events;
            return Ok(result(record));
        }
        let swept = self.sweep_orphans(&outputs);
        if plan.is_empty() {
            if swept > 0 {
                tracing::info!(
                    "removed {swept} output files of monitors the store no longer knows"
                );
            }
            self.measure();
            return Ok(result(record));
        }
        let ids: Vec<String> = plan.monitors.iter().map(|(id, _)| id.clone()).collect();
        let forgotten = self.pruner.forget(&ids)?;
        self.registry.hub().forget(&ids);
        self.registry.forget_ended(&ids);
        // The files go after the rows and the registry's entries: a reader
        // (`list`, `get`) never finds a monitor whose files are gone without
        // a word.
        for id in &ids {
            remove_output(&self.output_dir, id);
        }
        for id in &plan.outputs {
            self.prune_output(id);
        }
        self.reclaim();
        let (mut after, _) = self.measure();
        // Still over `max_size` with every ended monitor gone: the oldest
        // events of running monitors go, the store's own bound. What their
        // JSON takes is an estimate of what their pages take, so the store
        // is measured again and trimmed again, a few rounds at most.
        let mut trim = wakeful_store::retention::Forgotten::default();
        let mut want = plan.running_trim;
        for _ in 0..TRIM_ROUNDS {
            if want == 0 {
                break;
            }
            let t = self.pruner.trim_running(want, false)?;
            if t.events == 0 {
                break;
            }
            trim.events += t.events;
            trim.monitors = trim.monitors.max(t.monitors);
            self.reclaim();
            after = self.measure().0;
            let total = after.database + after.output;
            let max = self.policy.max_size;
            want = if total > max {
                total - max + max / 10
            } else {
                0
            };
        }
        record.events = forgotten.events + trim.events;
        record.monitors = forgotten.monitors;
        record.running_events = trim.events;
        record.running_monitors = trim.monitors;
        record.bytes =
            (usage.database + usage.output).saturating_sub(after.database + after.output);
        if let Some((seq, at)) = self.pruner.oldest_kept()? {
            record.oldest_kept_seq = Some(seq);
            record.oldest_kept_at = Some(at);
        }
        self.pruner.record(&record)?;
        tracing::info!(
            "{record} (database {} → {}, output files {} → {})",
            ByteSize(usage.database),
            ByteSize(after.database),
            ByteSize(usage.output),
            ByteSize(after.output)
        );
        {
            let mut t = self.totals.lock().unwrap_or_else(|p| p.into_inner());
            t.events += record.events;
            t.monitors += record.monitors;
            t.bytes += record.bytes;
            t.last = Some(record.clone());
        }
        Ok(result(record))
    }

    /// Gives the database's free pages back to the filesystem.
    fn reclaim(&self) {
        let free = self.disk.check(Instant::now()).free;
        if let Err(e) = self.pruner.reclaim(free) {
            tracing::warn!("after a prune, giving the database's space back failed: {e}");
        }
    }

    /// Removes an ended monitor's output files, leaving a manifest that
    /// says the lines were pruned (its events stay).
    fn prune_output(&self, id: &str) {
        let path = self.output_dir.join(format!("{id}.log"));
        let lines = self
            .reader
            .monitor(id)
            .ok()
            .flatten()
            .map_or(0, |m| m.info.lines);
        let bytes = file_group(&self.output_dir, id)
            .iter()
            .filter(|p| !is_manifest(p))
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum();
        let known = wakeful_engine::output_writer::read_manifest(&path)
            .ok()
            .flatten()
            .map(|m| (m.lines(), m.bytes()));
        let pruned = Manifest::pruned(
            lines.max(known.map_or(0, |k| k.0)),
            known.map_or(bytes, |k| k.1.max(bytes)),
        );
        if let Err(e) = wakeful_engine::output_writer::write_manifest(&path, &pruned) {
            tracing::warn!("cannot record that the output of {id} was pruned: {e}");
        }
        for p in file_group(&self.output_dir, id) {
            if !is_manifest(&p) {
                let _ = std::fs::remove_file(p);
            }
        }
    }

    /// Removes output files older than an hour whose monitor or terminal
    /// the store and the registry no longer know (a prune killed between
    /// its rows and its files). Returns how many went.
    fn sweep_orphans(&self, outputs: &HashMap<String, u64>) -> usize {
        let mut n = 0;
        for id in outputs.keys() {
            let known = self.registry.get(id).is_some()
                || self.registry.terminals().get(id).is_some()
                || self.reader.monitor(id).ok().flatten().is_some()
                || self
                    .reader
                    .terminals()
                    .map(|t| t.iter().any(|t| &t.id == id))
                    .unwrap_or(true);
            if known {
                continue;
            }
            let files = file_group(&self.output_dir, id);
            let old = files.iter().all(|p| {
                std::fs::metadata(p)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age >= ORPHAN_AGE)
            });
            if old {
                for p in files {
                    let _ = std::fs::remove_file(p);
                }
                n += 1;
            }
        }
        n
    }

    /// The storage task; see the module docs. Ends when `stop` is set.
    pub async fn run(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let every = (self.policy.max_age.0 / 10).clamp(Duration::from_secs(1), PRUNE_EVERY);
        let mut next_prune = tokio::time::Instant::now();
        let mut checks = storage::SizeChecks::new(SIZE_CHECK, Instant::now());
        // What makes the store grow: events (the hub's latest seq) and
        // output files (the disk guard sees every write). While neither
        // moves, no size check is armed.
        let mut latest = self.registry.hub().latest_watch();
        let mut events_open = true;
        let disk = self.disk.clone();
        loop {
            let due = checks.due().map(tokio::time::Instant::from_std);
            let idle = due.is_none();
            tokio::select! {
                _ = tokio::time::sleep_until(next_prune) => {
                    self.prune_logged().await;
                    next_prune = tokio::time::Instant::now() + every;
                }
                _ = sleep_until_opt(due), if !idle => {
                    checks.checked();
                    // What comes from now on arms the next check.
                    latest.borrow_and_update();
                    let me = self.clone();
                    let over = tokio::task::spawn_blocking(move || {
                        let (u, _) = me.measure();
                        u.output > me.policy.output_total || u.database + u.output > me.policy.max_size
                    })
                    .await
                    .unwrap_or(false);
                    if over {
                        self.prune_logged().await;
                    }
                }
                changed = latest.changed(), if idle && events_open => {
                    events_open = changed.is_ok();
                    checks.wrote(Instant::now());
                }
                _ = disk.written(), if idle => checks.wrote(Instant::now()),
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() {
                        return;
                    }
                }
            }
        }
    }

    async fn prune_logged(self: &Arc<Self>) {
        if let Err(e) = self.prune(Utc::now(), false).await {
            tracing::error!("pruning the store failed: {e}; it is tried again later");
        }
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn is_manifest(p: &Path) -> bool {
    p.to_str().is_some_and(|s| s.ends_with(".manifest"))
}

/// The id an output directory's file belongs to: `mon-x.log`,
/// `mon-x.log.3` and `mon-x.log.manifest` are `mon-x`'s.
fn owner(name: &str) -> Option<&str> {
    let (id, rest) = name.split_once(".log")?;
    let ok = rest.is_empty()
        || rest == ".manifest"
        || rest
            .strip_prefix('.')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    ok.then_some(id)
}

/// Bytes of every output file by the id it belongs to.
pub fn output_sizes(dir: &Path) -> HashMap<String, u64> {
    let mut out: HashMap<String, u64> = HashMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(id) = name.to_str().and_then(owner) else {
            continue;
        };
        let len = e.metadata().map_or(0, |m| m.len());
        *out.entry(id.to_string()).or_insert(0) += len;
    }
    out
}

/// Every file of `id`'s output (live file, segments, manifest).
fn file_group(dir: &Path, id: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_str().and_then(owner) == Some(id))
        .map(|e| e.path())
        .collect()
}

/// Removes every file of `id`'s output.
fn remove_output(dir: &Path, id: &str) {
    for p in file_group(dir, id) {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_file(outlog::manifest_path(&dir.join(format!("{id}.log"))));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_files_are_grouped_by_their_monitor() {
        assert_eq!(owner("mon-a.log"), Some("mon-a"));
        assert_eq!(owner("mon-a.log.12"), Some("mon-a"));
        assert_eq!(owner("mon-a.log.manifest"), Some("mon-a"));
        assert_eq!(owner("mon-a.log.manifest.tmp"), None);
        assert_eq!(owner("mon-a.log.x"), None);
        assert_eq!(owner("notes.txt"), None);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("mon-a.log"), b"12345").unwrap();
        std::fs::write(dir.path().join("mon-a.log.1"), b"123").unwrap();
        std::fs::write(dir.path().join("term-b.log"), b"1").unwrap();
        let sizes = output_sizes(dir.path());
        assert_eq!(sizes["mon-a"], 8);
        assert_eq!(sizes["term-b"], 1);
        assert_eq!(file_group(dir.path(), "mon-a").len(), 2);
        remove_output(dir.path(), "mon-a");
        assert!(!dir.path().join("mon-a.log.1").exists());
        assert!(dir.path().join("term-b.log").exists());
    }
}
