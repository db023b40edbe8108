//! What every source shares: how commands are launched ([`Launch`]), what
//! an owner can ask of a monitor ([`Control`]), what a monitor hands to the
//! program that replaces this one ([`HandedMonitor`], [`HandedProcess`]),
//! and the one interface every source implements ([`InputSource`]), which the monitor loop
//! (`crate::monitor`) drives. Sources depend on this module only, never on
//! the monitor loop.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use wakeful_core::machine::SourceEnd;
use wakeful_core::{MonitorSpec, MonitorStopReason, Stream};

use crate::net::NetPolicy;

/// How a monitor's process is launched and stopped.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The caller's environment; `None` inherits this process's.
    pub base_env: Option<BTreeMap<String, String>>,
    /// The caller's working directory; `None` uses this process's.
    pub base_cwd: Option<PathBuf>,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// How long to keep reading after the main process exited while a
    /// grandchild still holds the pipes.
    pub drain: Duration,
    /// Make `sh` die (SIGKILL) when the thread that started it dies; for the
    /// daemon, so a crash does not leave commands running.
    pub die_with_parent: bool,
    /// Which non-public addresses network sources may reach.
    pub net: NetPolicy,
    /// Where commands get a container of their own, if anywhere.
    pub containers: Option<wakeful_platform::tree::ContainerRoot>,
}

impl Default for Launch {
    fn default() -> Self {
        Launch {
            base_env: None,
            base_cwd: None,
            grace: Duration::from_secs(2),
            drain: Duration::from_millis(100),
            die_with_parent: false,
            net: NetPolicy::default(),
            containers: None,
        }
    }
}

/// What a monitor's owner can ask of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// End the monitor for this reason (its final event says so).
    Stop(MonitorStopReason),
    /// Stop its processes but do not end it: no final event, so that the
    /// next owner can re-arm it.
    Suspend,
    /// Stop reading but leave everything running and do not end it: the
    /// program that replaces this one goes on with it (an upgrade). What
    /// it needs is given to the registry ([`crate::MonitorRegistry::hand_over`]).
    HandOver,
}

/// A command this process hands to the program that replaces it (an
/// upgrade): what that program needs to go on reading it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HandedProcess {
    /// The `sh`'s process id (and group id).
    pub pid: i32,
    /// Its start time, in clock ticks after boot.
    pub start_ticks: u64,
    /// The read end of its stdout pipe, while it is read.
    pub stdout: Option<i32>,
    /// The read end of its stderr pipe, while it is read.
    pub stderr: Option<i32>,
    /// Its wait status, when it already exited (its pipes still drained).
    pub exit: Option<i32>,
}

/// A running monitor handed to the program that replaces this one
/// ([`crate::MonitorRegistry::hand_over`]), and what that program needs
/// to go on with it ([`crate::StartOptions::adopt`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HandedMonitor {
    /// The monitor's id.
    pub id: String,
    /// When it started (under the first program that ran it).
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// Its counters so far.
    pub counters: wakeful_core::machine::Counters,
    /// Its command's process and pipes (command monitors); other sources
    /// are made again from their spec.
    pub process: Option<HandedProcess>,
}

/// How a source ended: its exit as the state machines see it, and the
/// processes that survived its stop (commands only; normally none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ended {
    /// How it ended.
    pub end: SourceEnd,
    /// Processes still alive after SIGKILL.
    pub survivors: Vec<i32>,
    /// The stop could not look for every process (commands under the
    /// posix platform backend): what it found.
    pub unverified: Option<wakeful_core::Unverified>,
}

impl From<SourceEnd> for Ended {
    fn from(end: SourceEnd) -> Self {
        Ended {
            end,
            survivors: Vec::new(),
            unverified: None,
        }
    }
}

/// What a source produces.
#[derive(Debug)]
pub(crate) enum Input<'a> {
    /// Bytes of a stream (borrowed from the source until its next call).
    Chunk(Stream, &'a [u8]),
    /// A stream is complete: its last line counts even without a newline
    /// (a command's stream closed, a poll run's output ended).
    Flush(Stream),
    /// Nothing to hand out this time (the caller asks again).
    Nothing,
    /// The source ended.
    End(Ended),
}

/// A source read by the monitor loop. `next` must be cancel-safe: it is
/// dropped when a stop request or a timer comes first.
pub(crate) trait InputSource {
    /// The next input.
    async fn next(&mut self) -> Input<'_>;
    /// A stop was decided (by the owner or the monitor's own rules). A
    /// source whose end comes later — a command being terminated, whose
    /// last output and exit status are still to be read — starts that and
    /// returns `true`: the loop goes on reading until [`Input::End`]. The
    /// others return `false` (the default): the loop ends now.
    fn stop(&mut self) -> bool {
        false
    }
    /// The monitor is handed to the program that replaces this one: the
    /// process it reads, for a source that has one that must go on running
    /// (a command). The caller then keeps the source alive until the
    /// program is replaced. `None` (the default): the source is closed and
    /// made again from its spec.
    fn hand_over(&mut self) -> Option<HandedProcess> {
        None
    }
    /// The monitor is ending: release what the source holds.
    async fn close(&mut self) {}
}

/// A timer a loop keeps across its turns, set again only when its deadline
/// changes. A new `sleep_until` each turn enters the runtime's timer wheel
/// when first polled and leaves it when dropped — two turns of the time
/// driver's lock for every line a monitor reads; a deadline that stays (or
/// moves later) costs an alarm nothing.
pub(crate) struct Alarm {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    at: Option<tokio::time::Instant>,
}

impl Alarm {
    /// An alarm without a deadline.
    pub(crate) fn new() -> Self {
        Alarm {
            sleep: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
            at: None,
        }
    }

    /// Rings at `at` (or never, with `None`) from now on.
    pub(crate) fn set(&mut self, at: Option<tokio::time::Instant>) {
        if at != self.at {
            if let Some(d) = at {
                self.sleep.as_mut().reset(d);
            }
            self.at = at;
        }
    }

    /// Whether it has a deadline.
    pub(crate) fn is_set(&self) -> bool {
        self.at.is_some()
    }

    /// Ready once its deadline has passed (at once if it had already);
    /// never without one.
    pub(crate) async fn ring(&mut self) {
        match self.at {
            Some(_) => self.sleep.as_mut().await,
            None => std::future::pending().await,
        }
    }
}

/// The working directory a monitor's source is resolved against.
pub(crate) fn monitor_cwd(spec: &MonitorSpec, launch: &Launch) -> Option<PathBuf> {
    match (&spec.cwd, &launch.base_cwd) {
        (Some(c), Some(base)) => Some(base.join(c)),
        (Some(c), None) => Some(c.clone()),
        (None, base) => base.clone(),
    }
}

/// `path` resolved against the monitor's working directory.
pub(crate) fn resolve(spec: &MonitorSpec, launch: &Launch, path: &std::path::Path) -> PathBuf {
    match monitor_cwd(spec, launch) {
        Some(cwd) if path.is_relative() => cwd.join(path),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::Alarm;
    use std::time::Duration;
    use tokio::time::Instant;

    /// Whether the alarm rings without time passing.
    async fn rings_now(alarm: &mut Alarm) -> bool {
        tokio::select! {
            biased;
            _ = alarm.ring() => true,
            _ = std::future::ready(()) => false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_alarm_rings_at_its_deadline_follows_a_new_one_and_never_without() {
        let mut alarm = Alarm::new();
        assert!(!alarm.is_set());
        assert!(!rings_now(&mut alarm).await, "no deadline: never");

        let t0 = Instant::now();
        alarm.set(Some(t0 + Duration::from_millis(100)));
        assert!(alarm.is_set());
        tokio::time::advance(Duration::from_millis(99)).await;
        assert!(!rings_now(&mut alarm).await, "before its deadline");
        // The same deadline again changes nothing.
        alarm.set(Some(t0 + Duration::from_millis(100)));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(rings_now(&mut alarm).await, "at its deadline");
        assert!(rings_now(&mut alarm).await, "and until it is set again");

        // Later, then earlier: each takes the place of the last.
        alarm.set(Some(t0 + Duration::from_millis(500)));
        assert!(!rings_now(&mut alarm).await);
        alarm.set(Some(t0 + Duration::from_millis(200)));
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(rings_now(&mut alarm).await, "the earlier deadline");

        alarm.set(None);
        assert!(!alarm.is_set());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(!rings_now(&mut alarm).await, "cleared: never");
    }
}
