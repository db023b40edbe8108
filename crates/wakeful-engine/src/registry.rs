//! The embeddable [`MonitorRegistry`]: start, list and stop monitors, and
//! subscribe to their events.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use wakeful_engine::{MonitorRegistry, RegistryConfig};
//! use wakeful_core::{EventBody, MonitorSpec};
//!
//! let registry = MonitorRegistry::new(RegistryConfig::default());
//! let mut events = registry.subscribe();
//! let started = registry
//!     .start(MonitorSpec::command("cargo build 2>&1", "cargo build"))
//!     .await?;
//! while let Ok(event) = events.recv().await {
//!     if event.monitor_id != started.info.id {
//!         continue;
//!     }
//!     println!("{}", event.text);
//!     if event.kind().is_terminal() {
//!         break;
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! Dropping the last handle of a registry ends every monitor it runs with
//! `session_ended`; their final events still reach subscribers.

use crate::id::new_monitor_id;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::watch;

use wakeful_core::{Event, MonitorInfo, MonitorSpec, MonitorStopReason, ParamError};

pub use crate::source::{Control, HandedMonitor};

use crate::hub::{Filter, FollowError, Hub};
use crate::monitor::{self, MonitorTask};
use crate::source::Launch;
use wakeful_core::journal::{Journal, JournalEntry, MemoryJournal};

/// Ended monitors stay listed this long.
pub const ENDED_RETENTION: Duration = Duration::from_secs(3600);

/// How a registry runs its monitors.
#[derive(Debug, Clone)]
pub struct RegistryConfig {
    /// The session of monitors started with [`MonitorRegistry::start`].
    pub session: String,
    /// Where output files go (`<dir>/<monitor id>.log`).
    pub output_dir: PathBuf,
    /// Most active monitors per session.
    pub max_active_per_session: usize,
    /// How processes are launched and stopped.
    pub launch: Launch,
    /// The output files' caps and the disk they keep free; `None`: the
    /// defaults, on `output_dir`'s filesystem.
    pub output: Option<Arc<crate::output_writer::OutputBudget>>,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        let uid = nix::unistd::getuid();
        RegistryConfig {
            session: wakeful_core::session::DEFAULT_SESSION.to_string(),
            output_dir: std::env::temp_dir()
                .join(format!("wakeful-{uid}"))
                .join("output"),
            max_active_per_session: 8,
            launch: Launch::default(),
            output: None,
        }
    }
}

/// Options of one start beyond its [`MonitorSpec`].
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// The session (default: the registry's).
    pub session: Option<String>,
    /// Keep this id (a re-armed monitor); default: a new one.
    pub id: Option<String>,
    /// Emit `rearmed` instead of `started`.
    pub rearm: bool,
    /// The caller's environment (default: this process's).
    pub base_env: Option<BTreeMap<String, String>>,
    /// The caller's working directory (default: this process's).
    pub base_cwd: Option<PathBuf>,
    /// Go on with a monitor the program before this one handed over (an
    /// upgrade): already registered and announced, so no limit or key is
    /// checked, nothing is recorded and no `started` is emitted; a
    /// command goes on with its own process. Needs `id`.
    pub adopt: Option<HandedMonitor>,
}

/// The result of a start.
#[derive(Debug, Clone)]
pub struct Started {
    /// The monitor (the one already running, for a held key).
    pub info: MonitorInfo,
    /// True when the key was held and nothing new was started.
    pub already_running: bool,
}

/// Why a start was refused. Nothing was started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A parameter breaks the contract.
    #[error(transparent)]
    Invalid(#[from] ParamError),
    /// The working directory does not exist.
    #[error("working directory {0} does not exist or is not a directory")]
    Cwd(PathBuf),
    /// The session already has its maximum of active monitors.
    #[error("session `{session}` already has {max} active monitors (the limit): {}; stop one (`wakeful stop ID`) or re-arm with the same key", active.iter().map(|(id, d)| format!("{id} \"{d}\"")).collect::<Vec<_>>().join(", "))]
    Limit {
        /// The session.
        session: String,
        /// The limit.
        max: usize,
        /// The active monitors: id and description.
        active: Vec<(String, String)>,
    },
    /// The registry's journal is gone (its owner is shutting down).
    #[error("the monitor registry is shutting down")]
    Closed,
    /// The store could not record the monitor (a full disk): nothing ran.
    #[error("{0}")]
    Storage(String),
}

/// How long a start (or an acknowledgement) waits for the store to
/// record it: a client hears within a second when the disk is full.
pub const REGISTER_WAIT: Duration = Duration::from_millis(800);

/// Why a stop was refused.
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    /// No active monitor has this id.
    #[error(
        "monitor {0} not found (unknown, or already ended); `wakeful list` shows the active ones"
    )]
    NotFound(String),
}

/// Events as a subscriber receives them (every event numbered after it
/// subscribed, in log order).
pub struct Subscription {
    follow: crate::hub::Follow,
}

/// Why [`Subscription::recv`] returned no event.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// The subscriber fell behind and missed this many events.
    #[error("fell behind and missed {0} events")]
    Lagged(u64),
    /// The registry is gone and every event was received.
    #[error("the registry is closed")]
    Closed,
}

impl Subscription {
    /// The next event, in log order.
    pub async fn recv(&mut self) -> Result<Event, RecvError> {
        match self.follow.next().await {
            Ok(c) => Ok(Event::clone(&c.event)),
            Err(FollowError::Lagged(n)) => Err(RecvError::Lagged(n)),
            Err(FollowError::Closed) => Err(RecvError::Closed),
        }
    }
}

struct Entry {
    status: Arc<Mutex<MonitorInfo>>,
    stop_tx: watch::Sender<Option<Control>>,
    done: watch::Receiver<bool>,
    /// True once its listing says it ended (its final event may still
    /// wait for the store).
    ended: watch::Receiver<bool>,
}

struct Inner {
    config: RegistryConfig,
    output: Arc<crate::output_writer::OutputBudget>,
    terminals: crate::terminal::Terminals,
    monitors: Mutex<HashMap<String, Entry>>,
    hub: Hub,
    /// What monitors handed over put here ([`MonitorRegistry::hand_over`]).
    handed: Arc<Mutex<Vec<HandedMonitor>>>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // A panic while holding the lock leaves plain data behind; keep going.
        self.monitors.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let mut running = Vec::new();
        for entry in self
            .monitors
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            let _ = entry
                .stop_tx
                .send(Some(Control::Stop(MonitorStopReason::SessionEnded)));
            running.push(entry.done.clone());
        }
        // Once every monitor has written its final event, subscribers get
        // them all and then `Closed`.
        let hub = self.hub.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                for mut done in running {
                    let _ = done.wait_for(|d| *d).await;
                }
                hub.close().await;
            });
        }
    }
}

/// Starts, lists and stops monitors; see the module docs. Cloning gives
/// another handle to the same registry.
#[derive(Clone)]
pub struct MonitorRegistry {
    inner: Arc<Inner>,
}

/// The short name used in the issue tracker and docs.
pub type Registry = MonitorRegistry;

fn info_of(status: &Arc<Mutex<MonitorInfo>>) -> MonitorInfo {
    status.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

impl MonitorRegistry {
    /// A registry with an in-memory journal. Must be called inside a tokio
    /// runtime.
    pub fn new(config: RegistryConfig) -> Self {
        Self::with_journal(config, MemoryJournal::default())
    }

    /// A registry whose events are numbered (and kept) by `journal`.
    pub fn with_journal(config: RegistryConfig, journal: impl Journal) -> Self {
        Self::with_journal_at(config, journal, 0)
    }

    /// Like [`MonitorRegistry::with_journal`], for a journal whose last
    /// event already has seq `latest`.
    pub fn with_journal_at(config: RegistryConfig, journal: impl Journal, latest: u64) -> Self {
        Self::with_hub(config, Hub::new(journal, latest, None))
    }

    /// A registry whose events go through `hub` (the daemon's, with its
    /// store behind it).
    pub fn with_hub(config: RegistryConfig, hub: Hub) -> Self {
        let output = config
            .output
            .clone()
            .unwrap_or_else(|| crate::output_writer::OutputBudget::for_dir(&config.output_dir));
        MonitorRegistry {
            inner: Arc::new(Inner {
                terminals: crate::terminal::Terminals::new(
                    config.output_dir.clone(),
                    config.launch.clone(),
                    hub.clone(),
                    output.clone(),
                ),
                output,
                config,
                monitors: Mutex::new(HashMap::new()),
                hub,
                handed: Arc::default(),
            }),
        }
    }

    /// The event hub: commit entries, follow events.
    pub fn hub(&self) -> &Hub {
        &self.inner.hub
    }

    /// The registry's configuration.
    pub fn config(&self) -> &RegistryConfig {
        &self.inner.config
    }

    /// What output files share: caps, the disk guard.
    pub fn output_budget(&self) -> &Arc<crate::output_writer::OutputBudget> {
        &self.inner.output
    }

    /// The registry's terminals.
    pub fn terminals(&self) -> &crate::terminal::Terminals {
        &self.inner.terminals
    }

    /// Receives every event numbered from now on.
    pub fn subscribe(&self) -> Subscription {
        let hub = &self.inner.hub;
        Subscription {
            follow: hub.follow(Filter::default(), hub.latest()),
        }
    }

    /// How many times the journal failed to take a batch (each was retried
    /// until it succeeded; nothing was dropped).
    pub fn journal_failures(&self) -> u64 {
        self.inner.hub.failures()
    }

    /// The seq of the last journaled event; changes whenever events are
    /// journaled.
    pub fn latest_seq(&self) -> watch::Receiver<u64> {
        self.inner.hub.latest_watch()
    }

    /// Sends an entry of the owner's (an acknowledgement, an event of a
    /// monitor that is not running here) through the journal, in order with
    /// the monitors' entries, and waits until it has been appended.
    pub async fn record(&self, entry: JournalEntry) -> Result<(), StartError> {
        self.inner
            .hub
            .append(vec![entry])
            .await
            .map_err(|_| StartError::Closed)
    }

    /// Starts a monitor in the registry's session.
    pub async fn start(&self, spec: MonitorSpec) -> Result<Started, StartError> {
        self.start_with(spec, StartOptions::default()).await
    }

    /// Starts a monitor with explicit options. Validation, the key and the
    /// session limit are checked first; on any error nothing is started. A
    /// pid source (`--pid`) is identified first, unless re-armed: its start
    /// time and command line are filled in (a pid no process has, or one
    /// that cannot be watched, is [`StartError::Invalid`]).
    pub async fn start_with(
        &self,
        mut spec: MonitorSpec,
        opts: StartOptions,
    ) -> Result<Started, StartError> {
        spec.validate()?;
        if !opts.rearm && opts.adopt.is_none() {
            // Which process a pid names is read now, and kept: a re-arm
            // checks it instead (it must not take a later process given
            // the same pid for the one it watched).
            crate::sources::pid::identify(&mut spec.source)
                .await
                .map_err(|e| StartError::Invalid(e.into()))?;
        }
        let cwd = match (&spec.cwd, &opts.base_cwd) {
            (Some(c), Some(base)) => Some(base.join(c)),
            (Some(c), None) => Some(c.clone()),
            (None, base) => base.clone(),
        };
        if let Some(cwd) = cwd {
            if !cwd.is_dir() {
                return Err(StartError::Cwd(cwd));
            }
        }
        let session = opts
            .session
            .clone()
            .unwrap_or_else(|| self.inner.config.session.clone());
        let id = opts.id.clone().unwrap_or_else(new_monitor_id);
        let (stop_tx, stop_rx) = watch::channel(None);
        let (done_tx, done_rx) = watch::channel(false);
        let (ended_tx, ended_rx) = watch::channel(false);
        let mut info = MonitorInfo::starting(
            id.clone(),
            session.clone(),
            &spec,
            self.inner.config.output_dir.join(format!("{id}.log")),
        );
        if let Some(a) = &opts.adopt {
            info.started_at = a.started_at;
            info.events = a.counters.events;
            info.lines = a.counters.lines;
            info.suppressed_lines = a.counters.suppressed_lines;
        }
        let status = Arc::new(Mutex::new(info.clone()));
        {
            let mut monitors = self.inner.lock();
            let active: Vec<MonitorInfo> = monitors
                .values()
                .map(|e| info_of(&e.status))
                .filter(|i| i.session == session && i.is_active())
                .collect();
            let adopting = opts.adopt.is_some();
            if let Some(key) = spec.key.as_ref().filter(|_| !adopting) {
                if let Some(held) = active.iter().find(|i| i.key.as_ref() == Some(key)) {
                    return Ok(Started {
                        info: held.clone(),
                        already_running: true,
                    });
                }
            }
            if !adopting && active.len() >= self.inner.config.max_active_per_session {
                return Err(StartError::Limit {
                    session,
                    max: self.inner.config.max_active_per_session,
                    active: active.into_iter().map(|i| (i.id, i.description)).collect(),
                });
            }
            monitors.insert(
                id.clone(),
                Entry {
                    status: status.clone(),
                    stop_tx,
                    done: done_rx,
                    ended: ended_rx,
                },
            );
        }
        let registered = JournalEntry::Registered(Box::new(wakeful_core::journal::Registration {
            info: info.clone(),
            spec: spec.clone(),
            base_env: opts.base_env.clone(),
            base_cwd: opts.base_cwd.clone(),
        }));
        let registering = if opts.adopt.is_some() {
            Ok(())
        } else {
            self.inner
                .hub
                .append_within(vec![registered], REGISTER_WAIT)
                .await
        };
        match registering {
            Ok(()) => {}
            Err(crate::hub::AppendError::Closed) => {
                self.inner.lock().remove(&id);
                return Err(StartError::Closed);
            }
            Err(crate::hub::AppendError::TimedOut) => {
                // The registration waits in the hub and goes into the store
                // once it has room: the monitor's record then ends at once,
                // as failed; nothing of it ever runs.
                self.inner.lock().remove(&id);
                let error = "the event store could not record this monitor in time (the disk is full?); it was not started".to_string();
                let ended =
                    wakeful_core::journal::JournalEntry::Event(wakeful_core::PendingEvent {
                        session: session.clone(),
                        monitor_id: id.clone(),
                        ts: Utc::now(),
                        text: format!("{}: failed: {error}", spec.description),
                        body: wakeful_core::EventBody::MonitorFailed {
                            error: error.clone(),
                            last_lines: vec![],
                            survivors: vec![],
                            unverified: None,
                        },
                        wakes: true,
                        replayed: false,
                        host: None,
                    });
                let hub = self.inner.hub.clone();
                tokio::spawn(async move {
                    let _ = hub.append(vec![ended]).await;
                });
                return Err(StartError::Storage(format!(
                    "cannot start: the event store did not take the monitor within {} ms (it is failing: see `wakeful status` and the daemon log; a full disk is the usual cause); nothing was started",
                    REGISTER_WAIT.as_millis()
                )));
            }
        }
        let mut launch = self.inner.config.launch.clone();
        launch.base_env = opts.base_env;
        launch.base_cwd = opts.base_cwd;
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = MonitorTask {
            ready: ready_tx,
            output: self.inner.output.clone(),
            terminals: self.inner.terminals.clone(),
            spec,
            launch,
            rearm: opts.rearm,
            status,
            ended: ended_tx,
            stop_rx,
            hub: self.inner.hub.clone(),
            adopt: opts.adopt,
            handed: self.inner.handed.clone(),
        };
        tokio::spawn(async move {
            monitor::run(task).await;
            let _ = done_tx.send(true);
        });
        // Return once the source is watched: a line written after `start`
        // returns is seen. (An error or a failure drops the sender.)
        let _ = ready_rx.await;
        Ok(Started {
            info,
            already_running: false,
        })
    }

    /// Active monitors first (oldest first), then those that ended within
    /// the last hour (most recent first).
    pub fn list(&self) -> Vec<MonitorInfo> {
        let cutoff = Utc::now() - chrono::Duration::from_std(ENDED_RETENTION).unwrap_or_default();
        let mut monitors = self.inner.lock();
        monitors.retain(|_, e| {
            let i = info_of(&e.status);
            i.is_active() || i.ended_at.is_some_and(|t| t >= cutoff)
        });
        let mut all: Vec<MonitorInfo> = monitors.values().map(|e| info_of(&e.status)).collect();
        drop(monitors);
        all.sort_by(|a, b| {
            b.is_active()
                .cmp(&a.is_active())
                .then_with(|| match a.is_active() {
                    true => a.started_at.cmp(&b.started_at),
                    false => b.ended_at.cmp(&a.ended_at),
                })
                .then_with(|| a.id.cmp(&b.id))
        });
        all
    }

    /// One monitor, active or recently ended.
    pub fn get(&self, id: &str) -> Option<MonitorInfo> {
        self.inner.lock().get(id).map(|e| info_of(&e.status))
    }

    /// Forgets ended monitors (a prune removed them); running ones stay.
    pub fn forget_ended(&self, ids: &[String]) {
        let mut monitors = self.inner.lock();
        for id in ids {
            if monitors
                .get(id)
                .is_some_and(|e| !info_of(&e.status).is_active())
            {
                monitors.remove(id);
            }
        }
    }

    /// Keeps an ended monitor listed (a daemon restoring its recent history).
    pub fn insert_ended(&self, info: MonitorInfo) {
        let (stop_tx, _) = watch::channel(None);
        let (_, done) = watch::channel(true);
        let (_, ended) = watch::channel(true);
        self.inner.lock().insert(
            info.id.clone(),
            Entry {
                status: Arc::new(Mutex::new(info)),
                stop_tx,
                done,
                ended,
            },
        );
    }

    /// Stops an active monitor (`stopped`) and waits until it has ended.
    pub async fn stop(&self, id: &str) -> Result<MonitorInfo, StopError> {
        self.stop_with(id, MonitorStopReason::UserStopped).await
    }

    /// Stops an active monitor for `reason` and waits until it has ended.
    pub async fn stop_with(
        &self,
        id: &str,
        reason: MonitorStopReason,
    ) -> Result<MonitorInfo, StopError> {
        let (mut done, mut ended, status) = {
            let monitors = self.inner.lock();
            let entry = monitors
                .get(id)
                .filter(|e| info_of(&e.status).is_active())
                .ok_or_else(|| StopError::NotFound(id.to_string()))?;
            let _ = entry.stop_tx.send(Some(Control::Stop(reason)));
            (
                entry.done.clone(),
                entry.ended.clone(),
                entry.status.clone(),
            )
        };
        self.wait_done(&mut done, &mut ended).await;
        // Its final event is in the log before we answer (unless the
        // store cannot take it now: it goes in once it can).
        self.sync_within(REGISTER_WAIT).await;
        Ok(info_of(&status))
    }

    /// Waits until a monitor's task is done. While the store is failing
    /// (a full disk) its final event cannot be recorded, and the task
    /// waits for that: then the wait ends once the monitor has ended (its
    /// processes stopped), so that no client waits on a disk without a
    /// word. The final event goes in once the store takes it.
    async fn wait_done(&self, done: &mut watch::Receiver<bool>, ended: &mut watch::Receiver<bool>) {
        let hub = &self.inner.hub;
        let ended_unrecorded = async move {
            hub.failing().await;
            let _ = ended.wait_for(|e| *e).await;
        };
        tokio::select! {
            _ = done.wait_for(|d| *d) => {}
            _ = ended_unrecorded => {}
        }
    }

    /// [`MonitorRegistry::sync`], waiting at most `limit`.
    pub async fn sync_within(&self, limit: Duration) {
        let _ = tokio::time::timeout(limit, self.sync()).await;
    }

    /// Waits until monitor `id` has ended (returns at once for unknown ids).
    pub async fn wait_ended(&self, id: &str) -> Option<MonitorInfo> {
        let (mut done, status) = {
            let monitors = self.inner.lock();
            let entry = monitors.get(id)?;
            (entry.done.clone(), entry.status.clone())
        };
        let _ = done.wait_for(|d| *d).await;
        Some(info_of(&status))
    }

    /// Stops every active monitor of `session` (`session_ended`); returns
    /// their ids once all have ended.
    pub async fn end_session(&self, session: &str) -> Vec<String> {
        self.stop_where(|i| i.session == session, MonitorStopReason::SessionEnded)
            .await
    }

    /// Stops every active monitor for `reason` and waits for them.
    pub async fn shutdown(&self, reason: MonitorStopReason) -> Vec<String> {
        self.stop_where(|_| true, reason).await
    }

    /// Stops the processes of every active monitor matching `pred` without
    /// ending the monitors: no final event is emitted, so a later owner can
    /// re-arm them (persistent monitors across a daemon restart).
    pub async fn suspend_where(&self, pred: impl Fn(&MonitorInfo) -> bool) -> Vec<String> {
        self.control_where(pred, Control::Suspend).await
    }

    /// Hands every active monitor to the program that replaces this one
    /// (an upgrade): each stops reading, emits what it held, and leaves
    /// its command running with its pipes open; none ends. Monitors being
    /// stopped end as they would. Returns what the next program needs;
    /// after this, the program must be replaced (nothing reads the handed
    /// commands any more).
    pub async fn hand_over(&self) -> Vec<HandedMonitor> {
        self.control_where(|_| true, Control::HandOver).await;
        std::mem::take(&mut *self.inner.handed.lock().unwrap_or_else(|p| p.into_inner()))
    }

    async fn stop_where(
        &self,
        pred: impl Fn(&MonitorInfo) -> bool,
        reason: MonitorStopReason,
    ) -> Vec<String> {
        self.control_where(pred, Control::Stop(reason)).await
    }

    async fn control_where(
        &self,
        pred: impl Fn(&MonitorInfo) -> bool,
        control: Control,
    ) -> Vec<String> {
        let targets: Vec<(String, watch::Receiver<bool>, watch::Receiver<bool>)> = {
            let monitors = self.inner.lock();
            monitors
                .iter()
                .filter(|(_, e)| {
                    let i = info_of(&e.status);
                    i.is_active() && pred(&i)
                })
                .map(|(id, e)| {
                    let _ = e.stop_tx.send(Some(control.clone()));
                    (id.clone(), e.done.clone(), e.ended.clone())
                })
                .collect()
        };
        let mut ids = Vec::with_capacity(targets.len());
        for (id, mut done, mut ended) in targets {
            self.wait_done(&mut done, &mut ended).await;
            ids.push(id);
        }
        self.sync_within(REGISTER_WAIT).await;
        ids
    }

    /// Waits until every entry sent so far has been journaled (and handed
    /// to followers): after this, a new subscriber misses nothing that
    /// happened before.
    pub async fn sync(&self) {
        self.inner.hub.sync().await;
    }
}
