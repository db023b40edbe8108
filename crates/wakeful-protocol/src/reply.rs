//! What the daemon answers: [`Reply`] lines, the [`ErrorKind`]s with their
//! exit codes, and the typed result of every request.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use wakeful_core::Event;

#[allow(unused_imports)] // rustdoc links
use crate::route::WakeAdapter;

/// One line from the daemon, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    /// Success, with the request's result.
    Ok {
        /// Result; its shape depends on the request.
        result: serde_json::Value,
    },
    /// One event of a stream.
    Event {
        /// The event.
        event: Event,
        /// Its monitor's description, with the first event of each monitor
        /// in a stream whose request asked for it (`describe`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// The end of a `wait` batch; answer with [`Request::Ack`](crate::Request::Ack).
    Batch {
        /// The seq of its last event.
        last_seq: u64,
    },
    /// Failure.
    Error {
        /// What kind of failure; decides the client's exit code.
        kind: ErrorKind,
        /// What happened and what to do.
        message: String,
    },
}

impl Reply {
    /// An `ok` reply with `result` (of the type the request names:
    /// [`Call::Reply`](crate::Call::Reply), [`Stream::End`](crate::Stream::End)).
    pub fn ok<T: Serialize>(result: &T) -> Result<Reply, serde_json::Error> {
        Ok(Reply::Ok {
            result: serde_json::to_value(result)?,
        })
    }
}

/// Kinds of failure, each with its exit code (docs/CONTRACT.md §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Invalid input (exit 2).
    Invalid,
    /// Unknown or ended id (exit 3).
    NotFound,
    /// A limit was hit (exit 4).
    Limit,
    /// `wait` timed out (exit 124).
    Timeout,
    /// Protocol version mismatch (exit 1).
    Version,
    /// A newer exclusive waiter took over (exit 0: nothing to do).
    Superseded,
    /// The daemon is out of connections for this client (too many open from
    /// one process, or no file descriptor left); retry later (exit 1).
    Busy,
    /// The connection is not allowed: the daemon belongs to another user
    /// (exit 1).
    Denied,
    /// Anything else (exit 1).
    Internal,
    /// Another host of the cluster refused the request (it does not accept
    /// remote control, or its limits or policy said no) (exit 2).
    Refused,
    /// The host named is not reachable through the cluster (no daemon of
    /// that name answers, or NATS is down) (exit 1).
    Unreachable,
    /// The reader of the descriptor the events were written to
    /// ([`crate::Request::Events`]'s `write_to`) closed it (exit 141, as a
    /// closed stdout).
    OutputClosed,
    /// The request must write, and the state directory's disk is full (or
    /// the store cannot write): nothing was started or changed (exit 1).
    DiskFull,
}

impl ErrorKind {
    /// The command-line exit code for this failure.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Invalid | ErrorKind::Refused => 2,
            ErrorKind::NotFound => 3,
            ErrorKind::Limit => 4,
            ErrorKind::Timeout => 124,
            ErrorKind::Superseded => 0,
            ErrorKind::OutputClosed => 141,
            ErrorKind::Busy
            | ErrorKind::Denied
            | ErrorKind::Version
            | ErrorKind::Internal
            | ErrorKind::DiskFull
            | ErrorKind::Unreachable => 1,
        }
    }
}

/// Result of [`Request::Status`](crate::Request::Status) (`status --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The daemon's process id.
    pub pid: u32,
    /// The daemon's version.
    pub version: String,
    /// Protocol version.
    pub protocol: u32,
    /// The socket path.
    pub socket: PathBuf,
    /// The state directory.
    pub state_dir: PathBuf,
    /// Active monitors, all sessions.
    pub monitors_running: usize,
    /// Monitors that ended within the last hour.
    pub monitors_recently_ended: usize,
    /// Sessions with at least one active monitor.
    pub sessions_active: usize,
    /// The last event's seq.
    pub last_seq: u64,
    /// Sessions whose last wake could not be delivered.
    #[serde(default)]
    pub wakes_undelivered: usize,
    /// Connections streaming events now (`events --follow`, `wait`, `watch`,
    /// MCP push).
    #[serde(default)]
    pub followers: usize,
    /// Times the store failed to take a batch of events (retried until it
    /// did; nothing dropped). Anything but 0 deserves a look at the log.
    #[serde(default)]
    pub journal_failures: u64,
    /// Client connections open now.
    #[serde(default)]
    pub connections: usize,
    /// The daemon's limit of open files (its soft `RLIMIT_NOFILE`).
    #[serde(default)]
    pub max_open_files: u64,
    /// Times accepting a connection failed (out of file descriptors, …);
    /// the daemon backed off and went on.
    #[serde(default)]
    pub accept_errors: u64,
    /// The last accept failure and when (RFC 3339), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_accept_error: Option<String>,
    /// Connections refused with `busy` (too many from one process, or no
    /// file descriptor left).
    #[serde(default)]
    pub connections_refused: u64,
    /// Upgrades this daemon process went through (`wakeful daemon
    /// upgrade`), and the version it ran before the last one.
    #[serde(default)]
    pub upgrades: u32,
    /// The version it ran before the last upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgraded_from: Option<String>,
    /// The cluster link, when `[cluster]` is configured (docs/CLUSTER.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<crate::LinkStatus>,
    /// What the store takes, the disk it keeps free, and the last prune
    /// (docs/STORAGE.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageStatus>,
    /// The webhook subscriptions of MCP Events, every session's (never
    /// their secrets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_webhooks: Vec<EventSubscriptionInfo>,
}

/// The store's share of the disk, in [`Status`] (`status --json`'s
/// `storage`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageStatus {
    /// Database, WAL and redo log, in bytes.
    pub database_bytes: u64,
    /// Every output file, in bytes.
    pub output_bytes: u64,
    /// `[store] max_size`: database plus output files.
    pub max_size: u64,
    /// `[store] max_age`, as written (`7d`).
    pub max_age: String,
    /// `[store] output_max`: one output file.
    pub output_max: u64,
    /// `[store] output_total`: all output files.
    pub output_total: u64,
    /// Bytes free on the state directory's filesystem.
    pub free_bytes: u64,
    /// Bytes it keeps free (`[store] keep_free`).
    pub keep_free_bytes: u64,
    /// Below the keep-free space: output files do not grow.
    pub disk_low: bool,
    /// The disk is full, or the store cannot write: requests that must
    /// write are refused.
    pub disk_full: bool,
    /// Output bytes not written since the daemon started (disk low).
    #[serde(default)]
    pub output_not_written_bytes: u64,
    /// The last prune, if there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_prune: Option<wakeful_core::storage::PruneRecord>,
    /// Every prune so far: events, monitors, bytes.
    #[serde(default)]
    pub pruned_events: u64,
    /// Monitors pruned so far.
    #[serde(default)]
    pub pruned_monitors: u64,
    /// Bytes given back by prunes so far.
    #[serde(default)]
    pub pruned_bytes: u64,
    /// The oldest event kept: its seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_seq: Option<u64>,
}

/// Result of [`crate::Request::Prune`] (`wakeful prune --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PruneResult {
    /// Nothing was removed; `record` says what would have been.
    pub dry_run: bool,
    /// What was (or would be) removed.
    pub record: wakeful_core::storage::PruneRecord,
    /// The monitors removed with their events, and why.
    pub monitors: Vec<PrunedMonitor>,
    /// The monitors whose output files only were removed.
    pub outputs: Vec<String>,
    /// Database bytes before.
    pub database_bytes: u64,
    /// Output bytes before.
    pub output_bytes: u64,
}

/// One monitor a prune removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrunedMonitor {
    /// Its id.
    pub id: String,
    /// Why.
    pub cause: wakeful_core::storage::PruneCause,
}

/// Result of [`Request::Start`](crate::Request::Start) (`start --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartResult {
    /// The monitor id.
    pub id: String,
    /// Its session.
    pub session: String,
    /// True when the key was held and nothing was started.
    pub already_running: bool,
    /// Its output file.
    pub output_path: PathBuf,
    /// Every event of this monitor that a watcher has not seen yet has a
    /// greater seq (its `started` event, for a new monitor).
    pub after_seq: u64,
    /// Whether its events will wake the agent now.
    pub wake: crate::WakeInfo,
}

/// Result of [`Request::Run`](crate::Request::Run) (`run --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunResult {
    /// The terminal id (`term-…`).
    pub id: String,
    /// Its session.
    pub session: String,
    /// Its output file.
    pub output_path: PathBuf,
    /// The monitor attached with `until`, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor_id: Option<String>,
    /// Whether the session's events will wake the agent now.
    pub wake: crate::WakeInfo,
}

/// Result of [`Request::SessionEnd`](crate::Request::SessionEnd).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionEndResult {
    /// The session.
    pub session: String,
    /// The monitors that were stopped (`session_ended`).
    pub stopped: Vec<String>,
}

/// Result of [`Request::Shutdown`](crate::Request::Shutdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShutdownResult {
    /// The daemon's process id.
    pub pid: u32,
}

/// The `ok` that ends a finite event stream ([`Request::Events`](crate::Request::Events) without
/// `follow`, or a monitor's stream after its final event), or any event
/// stream of a daemon being replaced (`resume`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamEnd {
    /// The seq of the last event sent (or the `after` asked for).
    pub last_seq: u64,
    /// The daemon is being replaced by another build (`wakeful daemon
    /// upgrade`): connect again and ask for the events after `last_seq`
    /// (the socket stays; the new daemon answers once it runs).
    #[serde(default, skip_serializing_if = "is_false")]
    pub resume: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The result of [`Request::Upgrade`](crate::Request::Upgrade): the new
/// program passed its check, and the daemon is handing over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeResult {
    /// The daemon's process id (the same after the upgrade).
    pub pid: u32,
    /// The version running now.
    pub from: String,
    /// The version of the new program.
    pub to: String,
    /// The new program.
    pub binary: PathBuf,
    /// Monitors running now, handed over.
    pub monitors: usize,
    /// Upgrades this daemon went through before this one.
    pub upgrades: u32,
}

/// The `ok` that ends a [`Request::Wait`](crate::Request::Wait) without `follow`,
/// or any wait of a daemon being replaced (`resume`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acked {
    /// The consumer's cursor now.
    pub acked: u64,
    /// The daemon is being replaced by another build (`wakeful daemon
    /// upgrade`): connect again and ask again; nothing unacknowledged was
    /// handed out.
    #[serde(default, skip_serializing_if = "is_false")]
    pub resume: bool,
}

/// A background task ([`Request::TaskCreate`](crate::Request::TaskCreate),
/// [`Request::TaskGet`](crate::Request::TaskGet), …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskInfo {
    /// Its id: random, unguessable.
    pub id: String,
    /// `working`, `completed`, `failed` or `cancelled`.
    pub status: String,
    /// When it was created (ms since the epoch).
    pub created_ms: i64,
    /// When its status last changed (ms since the epoch).
    pub updated_ms: i64,
    /// How long it lives after its creation.
    pub ttl_ms: u64,
    /// A completed task's events, in seq order (empty when its wait timed
    /// out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<wakeful_core::Event>,
    /// A completed task's wait gave up after this many ms without an event
    /// that wakes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_out_ms: Option<u64>,
    /// Why a failed task failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its outcome was handed over and acknowledged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub handed: bool,
    /// What the client kept with the task ([`CreateTask`](crate::CreateTask)'s `note`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A webhook subscription of MCP Events
/// ([`Request::EventSubscribe`](crate::Request::EventSubscribe)), as
/// `status` shows it: never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventSubscriptionInfo {
    /// Its id.
    pub id: String,
    /// The session whose events it delivers.
    pub session: String,
    /// The event type.
    pub name: String,
    /// Only this monitor's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<String>,
    /// Where deliveries go.
    pub url: String,
    /// When it ends unless refreshed (ms since the epoch).
    pub expires_ms: i64,
    /// The last seq delivered or passed over.
    pub position: u64,
    /// `active`, or `given_up` (deliveries stopped; a refresh resumes).
    pub state: String,
    /// Occurrences delivered since it was made.
    #[serde(default)]
    pub delivered: u64,
    /// Failed attempts at the current delivery.
    #[serde(default)]
    pub failures: u32,
    /// The last failure, or why it was given up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Result of [`Request::Import`](crate::Request::Import).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportResult {
    /// Events stored (each with a new seq).
    pub imported: u64,
    /// Events passed over: their origin was already here, or they belong to
    /// a monitor of this state directory.
    pub skipped: u64,
    /// Monitor records kept (listed as ended).
    pub monitors: u64,
}

/// Result of [`Request::WakeClear`](crate::Request::WakeClear).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeClearResult {
    /// The session.
    pub session: String,
    /// Whether it had a route.
    pub cleared: bool,
}

/// Where a session's wake route came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteSource {
    /// `wakeful wake set` (kept in the store).
    Set,
    /// A `[[wake]]` table of config.toml.
    Config,
    /// Detected: a monitor started inside Codex.
    Auto,
}

/// Where a session's wake delivery stands (`state` on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum WakeDelivery {
    /// Nothing to deliver.
    Idle,
    /// A wake is being handed to the agent.
    Delivering {
        /// The wake's id.
        wake_id: String,
    },
    /// The agent refused (busy); the same wake is tried again.
    Retrying {
        /// The wake's id.
        wake_id: String,
        /// Attempts so far.
        attempts: u32,
        /// Time until the next attempt.
        next_attempt_in_ms: u64,
    },
    /// The agent holds the wake in its own queue (a busy Codex thread, or
    /// Codex not running) but has not started the turn that carries it; it
    /// is checked again, never sent again.
    Queued {
        /// The wake's id.
        wake_id: String,
        /// Checks so far.
        checks: u32,
        /// Time until the next check.
        next_check_in_ms: u64,
        /// What the last check found.
        detail: String,
    },
    /// Given up; the events go with the next wake.
    Undelivered {
        /// The wake's id.
        wake_id: String,
        /// Why.
        reason: String,
        /// First event of the wake.
        events_from: u64,
        /// Last event of the wake.
        events_to: u64,
    },
}

/// Result of [`Request::WakeShow`](crate::Request::WakeShow) and [`Request::WakeSet`](crate::Request::WakeSet): a session's
/// route and its delivery state (`wake show --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeStatus {
    /// The session.
    pub session: String,
    /// How the agent is reached.
    pub route: WakeAdapter,
    /// Where the route came from.
    pub source: RouteSource,
    /// Where delivery stands.
    #[serde(flatten)]
    pub delivery: WakeDelivery,
    /// The `wake` consumer's cursor.
    pub acked_seq: u64,
    /// Wakes the agent accepted.
    pub wakes_delivered: u64,
    /// Why the last attempt failed, if one did (kept while idle again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The last delivery attempts, newest last (at most
    /// [`MAX_RECENT_DELIVERIES`]; kept in memory, not across restarts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<DeliveryAttempt>,
}

/// Most delivery attempts [`WakeStatus::recent`] keeps.
pub const MAX_RECENT_DELIVERIES: usize = 10;

/// One delivery attempt of a wake route (an element of
/// [`WakeStatus::recent`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryAttempt {
    /// The wake.
    pub wake_id: String,
    /// Its attempt number (1 for the first).
    pub attempt: u32,
    /// When it ended (RFC 3339).
    pub at: String,
    /// First event it carried.
    pub events_from: u64,
    /// Last event it carried.
    pub events_to: u64,
    /// `accepted`, `queued`, `refused` or `failed`.
    pub outcome: String,
    /// What the agent or adapter said, when anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// One consumer of a session's events (an element of the result of
/// [`Request::Consumers`](crate::Request::Consumers)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerInfo {
    /// The session.
    pub session: String,
    /// The consumer's name (`default`, `mcp`, `claude`, `wake`, …).
    pub consumer: String,
    /// Every event up to this seq was acknowledged.
    pub acked_seq: u64,
    /// Events of the session after `acked_seq`: not yet acknowledged.
    pub unacked: u64,
    /// Waiters (`wait`, `monitor_wait`, hooks, the Claude Code bridge)
    /// attached to this consumer now.
    pub waiters: usize,
    /// How many of those stand by (`wait` with `fallback`: the Claude Code
    /// bridge); the others take batches first.
    #[serde(default)]
    pub fallback_waiters: usize,
}

/// What a running daemon records in [`crate::Paths::daemon_info`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonInfo {
    /// Its process id.
    pub pid: u32,
    /// The socket it listens on.
    pub socket: PathBuf,
    /// Its version.
    pub version: String,
}
