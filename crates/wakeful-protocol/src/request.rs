//! What a client asks the daemon: [`Request`], wrapped in an [`Envelope`]
//! that carries the protocol version.
//!
//! Each request is a struct of its own ([`GetMonitor`], [`StartMonitor`],
//! …), which [`Request`] holds as the wire form (tagged by `op`). A request
//! answered by one `ok` names the type of its result through [`Call`], so
//! a client decodes the reply into that type ([`Call::decode`]) and the
//! daemon's handler returns it: a request paired with the wrong result is a
//! compile error. The streams ([`ReadEvents`], [`ReadAllEvents`],
//! [`WaitEvents`]) name the `ok` that ends them through [`Stream`].

use std::collections::BTreeMap;
#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use wakeful_core::terminal::TerminalInfo;
use wakeful_core::MonitorSpec;

#[cfg(test)]
use crate::route::find_program;
pub use crate::route::WakeAdapter;
#[allow(unused_imports)] // rustdoc links
use crate::PROTOCOL_VERSION;
use crate::{ErrorKind, Reply};
use wakeful_core::{Event, MonitorInfo};

/// A request, tagged by `op`, wrapped in an [`Envelope`]. Each variant
/// holds the request's own struct, which says what answers it ([`Call`] or
/// [`Stream`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Daemon facts.
    Status(GetStatus),
    /// Start a monitor (or return the one holding its key).
    Start(StartMonitor),
    /// Monitors: active first, then those ended in the last hour.
    List(ListMonitors),
    /// One monitor, active or recently ended.
    Get(GetMonitor),
    /// Stop an active monitor and wait until it ended.
    Stop(StopMonitor),
    /// Read one session's events.
    Events(ReadEvents),
    /// Read the events of every session.
    EventsAll(ReadAllEvents),
    /// Block until the session has events the consumer has not
    /// acknowledged, and hand them out in batches.
    Wait(WaitEvents),
    /// Inside a `wait`: everything up to `seq` was handed on.
    Ack(Ack),
    /// Consumers and their cursors.
    Consumers(ListConsumers),
    /// Stop every active monitor of a session.
    SessionEnd(EndSession),
    /// Stop the daemon.
    Shutdown(Shutdown),
    /// Replace the daemon's program with another build, keeping every
    /// monitor running.
    Upgrade(Upgrade),
    /// Start a terminal, and with `until` a monitor attached to it.
    Run(RunRequest),
    /// Terminals, running first.
    TerminalList(ListTerminals),
    /// One terminal.
    TerminalGet(GetTerminal),
    /// Stop a terminal's command.
    TerminalKill(KillTerminal),
    /// Wait until a terminal's command ended.
    TerminalWait(WaitTerminal),
    /// Route a session's events to its agent.
    WakeSet(SetWake),
    /// A session's route and delivery state.
    WakeShow(ShowWake),
    /// Whether the session's events would wake its agent now.
    WakeCheck(CheckWake),
    /// What an agent coming back should know about its session's monitors.
    Digest(GetDigest),
    /// Remove a session's route.
    WakeClear(ClearWake),
    /// Keep events and monitors recorded elsewhere.
    Import(Import),
    /// This host's cluster link and every host's last heartbeat.
    ClusterStatus(GetClusterStatus),
    /// The monitors of every host of the cluster.
    ClusterMonitors(ListClusterMonitors),
    /// Prune now.
    Prune(Prune),
    /// What prunes removed.
    Prunes(ListPrunes),
    /// Start a background task: a `wait` the daemon runs and keeps.
    TaskCreate(CreateTask),
    /// A background task's status, and its outcome once it has one.
    TaskGet(GetTask),
    /// Cancel a working background task.
    TaskCancel(CancelTask),
    /// A completed task's outcome reached its client: acknowledge it.
    TaskHand(HandTask),
    /// Deliver a session's events to a webhook (MCP Events), or refresh
    /// such a subscription.
    EventSubscribe(SubscribeEvents),
    /// End a webhook subscription.
    EventUnsubscribe(UnsubscribeEvents),
}

impl Request {
    /// Whether this stream request asks for each monitor's description with
    /// its first event ([`ReadEvents::describe`]).
    pub fn describes(&self) -> bool {
        match self {
            Request::Events(r) => r.describe,
            Request::EventsAll(r) => r.describe,
            Request::Wait(r) => r.describe,
            _ => false,
        }
    }
}

/// A request answered by one `ok` whose result is a [`Call::Reply`] (or an
/// error). The compiler pairs the two: a client gets the result as that
/// type ([`Call::decode`]), a daemon handler must produce it.
pub trait Call: Into<Request> {
    /// The result of its `ok`.
    type Reply: Serialize + DeserializeOwned;

    /// The result of the reply to this request: `Ok` with the typed result,
    /// or why there is none.
    fn decode(reply: Reply) -> Result<Self::Reply, ReplyError> {
        decode_ok(reply)
    }
}

/// A request answered by a stream of event lines (and, for a wait, `batch`
/// lines), ended, when it ends by itself, by one `ok` whose result is a
/// [`Stream::End`].
pub trait Stream: Into<Request> {
    /// What a reader of the stream takes at a time: an [`Event`] (`events`,
    /// `events_all`), or a [`Batch`] that it acknowledges (`wait`).
    type Item;
    /// The result of the `ok` that ends the stream.
    type End: Serialize + DeserializeOwned;
}

/// The item of a `wait` stream ([`Stream::Item`]): the `event` lines up to
/// a `batch` line, which the client answers with an [`Ack`] of at most
/// `last_seq` once it has handed them on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    /// Its events, in seq order, each with its monitor's description when
    /// the stream carried one for it.
    pub events: Vec<(Event, Option<String>)>,
    /// Each event's JSON exactly as the daemon sent it (what `wait --json`
    /// prints), in the same order.
    pub json: Vec<String>,
    /// The `batch` line's `last_seq`.
    pub last_seq: u64,
}

impl Batch {
    /// Keeps the first `n` events only: the rest are not acknowledged with
    /// it, and the next wait hands them out again.
    pub fn keep(&mut self, n: usize) {
        self.events.truncate(n);
        self.json.truncate(n);
    }

    /// The seq its [`Ack`] names: its last event's (its `last_seq`, unless
    /// [`Batch::keep`] left some out).
    pub fn ack_seq(&self) -> u64 {
        self.events.last().map_or(self.last_seq, |(e, _)| e.seq)
    }
}

/// Why a reply holds no result of the type asked for.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplyError {
    /// The daemon answered with an error.
    #[error("{message}")]
    Refused {
        /// What kind of failure.
        kind: ErrorKind,
        /// The daemon's message.
        message: String,
    },
    /// The daemon answered something else than `ok` or `error`, or a result
    /// that is not of the type the request names.
    #[error("{0}")]
    Unexpected(String),
}

/// The result of an `ok` reply, decoded as `T`.
pub fn decode_ok<T: DeserializeOwned>(reply: Reply) -> Result<T, ReplyError> {
    match reply {
        Reply::Ok { result } => serde_json::from_value(result)
            .map_err(|e| ReplyError::Unexpected(format!("a result that does not fit: {e}"))),
        Reply::Error { kind, message } => Err(ReplyError::Refused { kind, message }),
        other => Err(ReplyError::Unexpected(format!("{other:?}"))),
    }
}

/// Pairs each request with its result, and lets it convert into a
/// [`Request`].
macro_rules! pairs {
    ($( $variant:ident($request:ty) => $reply:ty; )*) => {
        $(
            impl From<$request> for Request {
                fn from(r: $request) -> Request {
                    Request::$variant(r)
                }
            }
            impl Call for $request {
                type Reply = $reply;
            }
        )*
    };
}

pairs! {
    Status(GetStatus) => crate::Status;
    Start(StartMonitor) => crate::StartResult;
    List(ListMonitors) => Vec<MonitorInfo>;
    Get(GetMonitor) => MonitorInfo;
    Stop(StopMonitor) => MonitorInfo;
    Consumers(ListConsumers) => Vec<crate::ConsumerInfo>;
    SessionEnd(EndSession) => crate::SessionEndResult;
    Shutdown(Shutdown) => crate::ShutdownResult;
    Upgrade(Upgrade) => crate::UpgradeResult;
    Run(RunRequest) => crate::RunResult;
    TerminalList(ListTerminals) => Vec<TerminalInfo>;
    TerminalGet(GetTerminal) => TerminalInfo;
    TerminalKill(KillTerminal) => TerminalInfo;
    TerminalWait(WaitTerminal) => TerminalInfo;
    WakeSet(SetWake) => crate::WakeStatus;
    WakeShow(ShowWake) => Option<crate::WakeStatus>;
    WakeCheck(CheckWake) => crate::WakeReport;
    Digest(GetDigest) => crate::Digest;
    WakeClear(ClearWake) => crate::WakeClearResult;
    Import(Import) => crate::ImportResult;
    ClusterStatus(GetClusterStatus) => crate::ClusterStatus;
    ClusterMonitors(ListClusterMonitors) => Vec<crate::HostMonitor>;
    Prune(Prune) => crate::PruneResult;
    Prunes(ListPrunes) => Vec<wakeful_core::storage::PruneRecord>;
    TaskCreate(CreateTask) => crate::TaskInfo;
    TaskGet(GetTask) => crate::TaskInfo;
    TaskCancel(CancelTask) => crate::TaskInfo;
    TaskHand(HandTask) => crate::TaskInfo;
    EventSubscribe(SubscribeEvents) => crate::EventSubscriptionInfo;
    EventUnsubscribe(UnsubscribeEvents) => Option<crate::EventSubscriptionInfo>;
}

macro_rules! streams {
    ($( $variant:ident($request:ty) => $item:ty, $end:ty; )*) => {
        $(
            impl From<$request> for Request {
                fn from(r: $request) -> Request {
                    Request::$variant(r)
                }
            }
            impl Stream for $request {
                type Item = $item;
                type End = $end;
            }
        )*
    };
}

streams! {
    Events(ReadEvents) => Event, crate::StreamEnd;
    EventsAll(ReadAllEvents) => Event, crate::StreamEnd;
    Wait(WaitEvents) => Batch, crate::Acked;
}

impl From<Ack> for Request {
    fn from(r: Ack) -> Request {
        Request::Ack(r)
    }
}

/// Daemon facts. Reply: a [`Status`](crate::Status).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetStatus {}

/// Start a monitor (or return the one holding its key). Reply: a
/// [`StartResult`](crate::StartResult).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartMonitor {
    /// The owning session.
    pub session: String,
    /// The monitor's parameters.
    pub spec: Box<MonitorSpec>,
    /// The client's environment; the command runs with it.
    pub env: BTreeMap<String, String>,
    /// The client's working directory.
    pub cwd: PathBuf,
    /// Start it on this host of the cluster instead (docs/CLUSTER.md):
    /// the request goes to that host's daemon, which starts it only when
    /// its configuration says `accept_remote = true`, with its own
    /// limits, `[network]` policy, environment and working directory
    /// (`env` and `cwd` here are not sent). Errors `refused`,
    /// `unreachable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// Monitors: active first, then those ended in the last hour. Reply: an
/// array of [`MonitorInfo`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListMonitors {
    /// Only this session's; `None` for all sessions.
    pub session: Option<String>,
}

/// One monitor, active or recently ended. Reply: a [`MonitorInfo`], or
/// error `not_found`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetMonitor {
    /// The monitor id.
    pub id: String,
}

/// Stop an active monitor and wait until it ended. Reply: its
/// [`MonitorInfo`], or error `not_found`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopMonitor {
    /// The monitor id.
    pub id: String,
}

/// Read events (never moves a cursor). Replies: `event` lines, then
/// (without `follow`) `ok` with a [`StreamEnd`](crate::StreamEnd).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadEvents {
    /// The session.
    pub session: String,
    /// Only events with a greater seq.
    pub after: u64,
    /// Keep streaming new events until the client disconnects (or, with
    /// `monitor`, until that monitor's final event).
    pub follow: bool,
    /// Only this monitor's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<String>,
    /// This stream pushes each event to an agent that is woken by it (an
    /// MCP client that declared it shows channel notifications): while
    /// it lasts, the session counts as live (see [`crate::WakeInfo`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wakes_agent: bool,
    /// Write the events, in this form, to the descriptor that came with
    /// this request (`SCM_RIGHTS`: the client's stdout, a pipe opened
    /// non-blocking or a stream socket) instead of sending them on the
    /// connection: the reader gets each event from the daemon itself,
    /// with no process in between. The connection then carries only
    /// the end: `ok` (as without it), or an error
    /// ([`crate::ErrorKind::OutputClosed`] once the reader is gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_to: Option<OutputForm>,
    /// Send each monitor's description with its first event in this
    /// stream (the `event` reply's `description`), so that a reader that
    /// shows it needs no `get` of its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub describe: bool,
}

/// Read the events of every session (never moves a cursor): `events`
/// without the session filter, for views that show all sessions.
/// Replies as [`ReadEvents`] without `monitor`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadAllEvents {
    /// Only events with a greater seq.
    pub after: u64,
    /// Keep streaming new events until the client disconnects.
    pub follow: bool,
    /// Send each monitor's description with its first event in this
    /// stream (the `event` reply's `description`), so that a reader that
    /// shows it needs no `get` of its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub describe: bool,
}

/// Block until the session has events the consumer has not acknowledged;
/// send them, then a `batch`; the client answers [`Ack`] once it has
/// handed them on. Without `follow` the daemon then replies `ok` with an
/// [`Acked`](crate::Acked); with it, it waits for the next batch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitEvents {
    /// The session.
    pub session: String,
    /// The consumer whose cursor moves.
    pub consumer: String,
    /// Give up after this long with error `timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Keep going after each batch.
    #[serde(default)]
    pub follow: bool,
    /// Become the consumer's only exclusive waiter: an older exclusive
    /// waiter of the same session and consumer gives up (error
    /// `superseded`). Batches of one consumer are never handed to two
    /// waiters at once, exclusive or not.
    #[serde(default)]
    pub exclusive: bool,
    /// Hand out events that do not wake too, at once. Without it a batch
    /// is handed out only when it holds an event that wakes (see
    /// `wake_on`); the events before it that do not wake come with it.
    #[serde(default)]
    pub all: bool,
    /// Stand by: take a batch only while no other waiter of the same
    /// session and consumer that does not stand by is attached (the
    /// Claude Code bridge defers so to the rewake hook). A batch that
    /// such a waiter took and acknowledged is never handed out again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fallback: bool,
    /// Only this monitor's events (a subagent waiting for the monitor it
    /// started). The cursor still moves by seq, past events of other
    /// monitors: give such a wait a consumer of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<String>,
    /// Send each monitor's description with its first event in this
    /// stream (the `event` reply's `description`), so that a reader that
    /// shows it needs no `get` of its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub describe: bool,
}

/// Inside a `wait`: everything up to `seq` was handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ack {
    /// The `last_seq` of the batch.
    pub seq: u64,
}

/// Start a background task: the daemon runs a [`WaitEvents`] of
/// `session` and `consumer` without `follow` and keeps what it hands out,
/// unacknowledged, until the task's client fetches it ([`GetTask`]) and
/// says it got it ([`HandTask`]). A task that is cancelled or outlives
/// `ttl_ms` acknowledges nothing: its events go to the consumer's next
/// reader. Reply: the new task's [`TaskInfo`](crate::TaskInfo) (its `id`
/// is random and unguessable); error `limit` when the session holds its
/// limit of live tasks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTask {
    /// The session.
    pub session: String,
    /// The consumer whose cursor moves.
    pub consumer: String,
    /// The wait gives up after this long: the task completes with
    /// `timed_out`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Hand out events that do not wake too, at once ([`WaitEvents::all`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
    /// How long the task lives after its creation, whatever its status.
    pub ttl_ms: u64,
    /// What the client keeps with the task and gets back with it
    /// ([`TaskInfo::note`](crate::TaskInfo::note)): the MCP server keeps
    /// the start result of a `monitor_start` that waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A background task of `session`. Reply: its
/// [`TaskInfo`](crate::TaskInfo); error `not_found` (the same message
/// for an id that is unknown, expired or another session's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetTask {
    /// The session.
    pub session: String,
    /// The task's id.
    pub id: String,
    /// While the task is working, wait up to this long for it to end
    /// before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// Cancel a working background task: its wait ends and acknowledges
/// nothing. Reply: its [`TaskInfo`](crate::TaskInfo); error `not_found`
/// as [`GetTask`], or `invalid` when it already ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelTask {
    /// The session.
    pub session: String,
    /// The task's id.
    pub id: String,
}

/// A completed task's outcome reached its client: the daemon
/// acknowledges its first `keep` events (the rest go to the consumer's
/// next reader). Only the first hand-over of a task acknowledges. Reply:
/// its [`TaskInfo`](crate::TaskInfo); error `not_found` as [`GetTask`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandTask {
    /// The session.
    pub session: String,
    /// The task's id.
    pub id: String,
    /// How many of the outcome's events the client was given.
    pub keep: usize,
}

/// Deliver the events of `session` (one monitor's with `monitor`) that
/// are occurrences of the MCP Events type `name` to `url`, signed with
/// `secret` (Standard Webhooks v1), from the seq `after` (default: the
/// latest), until `ttl_ms` from now. The daemon keeps the subscription
/// across restarts. A subscription with the same `id` is refreshed: its
/// lifetime, secret and URL are replaced, its position is kept, and a
/// given-up one is resumed. The URL must pass the network policy and
/// answer a verification request. Reply: its
/// [`EventSubscriptionInfo`](crate::EventSubscriptionInfo) (never the
/// secret); error `invalid` (the URL, the secret, the type, the TTL, the
/// verification) or `limit` (the session holds its limit).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscribeEvents {
    /// The session.
    pub session: String,
    /// The subscription's id (chosen by the client, stable for the same
    /// session, type, monitor and URL).
    pub id: String,
    /// The event type (`monitor.lines`, …).
    pub name: String,
    /// Only this monitor's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<String>,
    /// Only the events that wake under this rule (`any`, `exit`, `fail`,
    /// `match:<regex>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_on: Option<String>,
    /// Where deliveries are POSTed.
    pub url: String,
    /// The signing secret, `whsec_` and base64; kept by the daemon, never
    /// shown.
    pub secret: String,
    /// Deliver the events after this seq (default: the latest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// How long the subscription lives from now.
    pub ttl_ms: u64,
}

impl std::fmt::Debug for SubscribeEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscribeEvents")
            .field("session", &self.session)
            .field("id", &self.id)
            .field("name", &self.name)
            .field("monitor", &self.monitor)
            .field("wake_on", &self.wake_on)
            .field("url", &self.url)
            .field("secret", &"…")
            .field("after", &self.after)
            .field("ttl_ms", &self.ttl_ms)
            .finish()
    }
}

/// End the webhook subscription `id` of `session`. Reply: what it was, or
/// null when there was none (unsubscribing twice is not an error).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnsubscribeEvents {
    /// The session.
    pub session: String,
    /// The subscription's id.
    pub id: String,
}

/// Consumers and their cursors. Reply: an array of
/// [`crate::ConsumerInfo`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListConsumers {
    /// Only this session's; `None` for all sessions.
    pub session: Option<String>,
}

/// Stop every active monitor of a session (`session_ended`). Reply: a
/// [`SessionEndResult`](crate::SessionEndResult).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndSession {
    /// The session.
    pub session: String,
}

/// Stop the daemon. Reply: a [`ShutdownResult`](crate::ShutdownResult),
/// then the daemon exits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shutdown {}

/// Replace the daemon's program with `binary` (`wakeful daemon upgrade`):
/// the new program goes on with every running monitor — the same ids, the
/// same processes, their output in the same files — and with the socket,
/// so that clients reconnect to it. Reply: an
/// [`UpgradeResult`](crate::UpgradeResult) once `binary` passed its check,
/// just before the daemon hands over; an error, and nothing changed,
/// when it did not (docs/CONTRACT.md "Upgrades").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upgrade {
    /// The new program (absolute path): a `wakeful` executable.
    pub binary: PathBuf,
}

/// Terminals, running first. Reply: an array of [`TerminalInfo`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListTerminals {
    /// Only this session's; `None` for all.
    pub session: Option<String>,
}

/// One terminal. Reply: its [`TerminalInfo`], or error `not_found`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetTerminal {
    /// The terminal id.
    pub id: String,
}

/// Stop a terminal's command (its whole group). Reply: its
/// [`TerminalInfo`] once it ended, or error `not_found`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillTerminal {
    /// The terminal id.
    pub id: String,
}

/// Wait until a terminal's command ended. Reply: its [`TerminalInfo`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitTerminal {
    /// The terminal id.
    pub id: String,
}

/// Route a session's events to its agent. Reply: the route as
/// [`ShowWake`] describes it (a [`WakeStatus`](crate::WakeStatus)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetWake {
    /// The session.
    pub session: String,
    /// How to reach the agent.
    pub route: WakeAdapter,
}

/// A session's route and delivery state. Reply: a
/// [`WakeStatus`](crate::WakeStatus), or `null` without a route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShowWake {
    /// The session.
    pub session: String,
}

/// Whether, and through what, the session's events would wake its agent
/// now. Reply: a [`crate::WakeReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckWake {
    /// The session.
    pub session: String,
}

/// What an agent coming back should know about its session's monitors.
/// Reply: a [`crate::Digest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetDigest {
    /// The session.
    pub session: String,
}

/// Remove a session's route (set with [`SetWake`]). Reply: a
/// [`WakeClearResult`](crate::WakeClearResult).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClearWake {
    /// The session.
    pub session: String,
}

/// Keep events and monitors recorded elsewhere (`wakeful import`): each
/// event gets a seq here and reaches followers like a local one, once per
/// origin (importing twice stores nothing twice); the monitors are listed
/// as ended. Events of a monitor of this state directory are passed over.
/// Reply: an [`crate::ImportResult`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Import {
    /// The events, in order, each with its origin.
    pub events: Vec<ImportedEvent>,
    /// The records of the monitors they belong to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub monitors: Vec<MonitorInfo>,
}

/// This host's cluster link and every host's last heartbeat. Reply: a
/// [`crate::ClusterStatus`]; error `invalid` without `[cluster]`,
/// `unreachable` when NATS cannot be asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetClusterStatus {}

/// The monitors of every host of the cluster, as each host last published
/// them. Reply: an array of [`crate::HostMonitor`]; errors as for
/// [`GetClusterStatus`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListClusterMonitors {
    /// Only this session's; `None` for all sessions.
    pub session: Option<String>,
}

/// Prune now (docs/STORAGE.md): ended monitors past `[store] max_age`,
/// then whatever the size caps call for, oldest first; with `dry_run`,
/// only say what would go. Reply: a [`crate::PruneResult`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prune {
    /// Only say what would be removed.
    #[serde(default)]
    pub dry_run: bool,
}

/// What prunes removed, oldest first (those at or after `since`). Reply: an
/// array of [`wakeful_core::storage::PruneRecord`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListPrunes {
    /// Only prunes at or after this time.
    #[serde(
        default,
        with = "wakeful_core::info::ts_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub since: Option<chrono::DateTime<chrono::Utc>>,
}

/// An event recorded elsewhere, for [`Import`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportedEvent {
    /// Where it was first recorded: `<host>/<seq>`
    /// ([`wakeful_core::export::origin`]).
    pub origin: String,
    /// The event as `events --json` printed it there (its seq is replaced).
    pub event: wakeful_core::Event,
}

/// Start a terminal (docs/CONTRACT.md §5), and with `until` a monitor
/// attached to it. Reply: a [`RunResult`](crate::RunResult).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// The owning session.
    pub session: String,
    /// The command (`sh -c`).
    pub command: String,
    /// The client's environment.
    pub env: BTreeMap<String, String>,
    /// The client's working directory.
    pub cwd: PathBuf,
    /// Attach a monitor that stops on this condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<wakeful_core::Until>,
    /// The attached monitor's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl Request {
    /// The same request, asked again of the daemon that replaced the one
    /// that ended its stream with `resume` (an upgrade): an event stream
    /// goes on after `last_seq`; a `wait` is asked again as it was (its
    /// cursor is the daemon's).
    pub fn resumed_after(&self, last_seq: u64) -> Request {
        let mut r = self.clone();
        match &mut r {
            Request::Events(e) => e.after = last_seq,
            Request::EventsAll(e) => e.after = last_seq,
            _ => {}
        }
        r
    }

    /// The `op` on the wire.
    pub fn op(&self) -> &'static str {
        match self {
            Request::Status(_) => "status",
            Request::Start(_) => "start",
            Request::List(_) => "list",
            Request::Get(_) => "get",
            Request::Stop(_) => "stop",
            Request::Events(_) => "events",
            Request::EventsAll(_) => "events_all",
            Request::Wait(_) => "wait",
            Request::WakeCheck(_) => "wake_check",
            Request::Digest(_) => "digest",
            Request::Ack(_) => "ack",
            Request::Consumers(_) => "consumers",
            Request::SessionEnd(_) => "session_end",
            Request::Shutdown(_) => "shutdown",
            Request::Upgrade(_) => "upgrade",
            Request::Run(_) => "run",
            Request::TerminalList(_) => "terminal_list",
            Request::TerminalGet(_) => "terminal_get",
            Request::TerminalKill(_) => "terminal_kill",
            Request::TerminalWait(_) => "terminal_wait",
            Request::WakeSet(_) => "wake_set",
            Request::WakeShow(_) => "wake_show",
            Request::WakeClear(_) => "wake_clear",
            Request::Import(_) => "import",
            Request::ClusterStatus(_) => "cluster_status",
            Request::ClusterMonitors(_) => "cluster_monitors",
            Request::Prune(_) => "prune",
            Request::Prunes(_) => "prunes",
            Request::TaskCreate(_) => "task_create",
            Request::TaskGet(_) => "task_get",
            Request::TaskCancel(_) => "task_cancel",
            Request::TaskHand(_) => "task_hand",
            Request::EventSubscribe(_) => "event_subscribe",
            Request::EventUnsubscribe(_) => "event_unsubscribe",
        }
    }
}

/// How events written to a handed-over descriptor look
/// ([`Request::Events`]'s `write_to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputForm {
    /// One event JSON object a line, as the store holds it (`--json`).
    Json,
    /// One plain line an event, as `wakeful events` prints it.
    Plain,
    /// As `wakeful watch` prints: a monitor's lines as they came, each on a
    /// line of its own, any other event as `[wakeful] <text>`.
    Watch,
    /// As `wakeful mcp` pushes them: one Claude Code channel notification
    /// (a JSON-RPC line) for each event that wakes, with the events held
    /// back before it. The stdout of an MCP server carries the server's own
    /// replies too, so a second descriptor must come with the request: a
    /// memfd both writers lock (`F_OFD_SETLK`, whole file) around each
    /// frame, and where the daemon keeps the seq of the last event it wrote
    /// (8 bytes, little-endian, at offset 0).
    Channel,
}

/// What travels on the wire: a request with the protocol version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// [`PROTOCOL_VERSION`] of the sender.
    pub v: u32,
    /// The request.
    #[serde(flatten)]
    pub request: Request,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn webhook(url: &str) -> Result<(), crate::route::RouteError> {
        WakeAdapter::Webhook { url: url.into() }.validate()
    }

    #[test]
    fn endpoints_of_network_adapters() {
        let o = WakeAdapter::Opencode {
            url: "http://127.0.0.1:4096".into(),
            opencode_session: None,
            directory: None,
        };
        assert_eq!(o.endpoint(), Some(("127.0.0.1".into(), 4096)));
        let w = WakeAdapter::Webhook {
            url: "https://[::1]/hook".into(),
        };
        assert_eq!(w.endpoint(), Some(("::1".into(), 443)));
    }

    #[test]
    fn urls_are_parsed_not_guessed() {
        for good in [
            "http://127.0.0.1:4096",
            "https://hooks.example.com/agent?x=1",
            "http://[::1]:8080/x",
            "http://localhost",
        ] {
            assert_eq!(webhook(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("ftp://x", "scheme is ftp"),
            ("127.0.0.1:4096", "no scheme"),
            ("localhost", "no scheme"),
            ("http://", ""),
            ("http:///path", ""),
            ("https://exa mple.com", ""),
            ("http://host:99999", "port"),
            ("http://u:p@host/", "credentials"),
            ("", ""),
        ] {
            let err = webhook(bad).unwrap_err().to_string();
            assert!(
                err.contains("not a usable URL") && err.contains(why),
                "{bad}: {err}"
            );
        }
        let opencode = WakeAdapter::Opencode {
            url: "http//127.0.0.1:4096".into(),
            opencode_session: None,
            directory: None,
        };
        assert!(opencode.validate().is_err());
    }

    #[test]
    fn busy_exit_codes_are_exit_codes() {
        let exec = |codes: Vec<i32>| WakeAdapter::Exec {
            argv: vec!["notify".into()],
            busy_exit_codes: codes,
        };
        assert_eq!(exec(vec![75, 1, 255]).validate(), Ok(()));
        for c in [0, -1, 256] {
            assert!(exec(vec![c]).validate().is_err(), "{c}");
        }
    }

    #[test]
    fn programs_are_found_on_the_given_path() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let path =
            std::env::join_paths(["/nonexistent-dir", dir.path().to_str().unwrap()]).unwrap();
        let path = Some(path.as_os_str());

        assert_eq!(
            find_program(Path::new("tool"), path).ok(),
            Some(tool.clone())
        );
        assert_eq!(find_program(&tool, None).ok(), Some(tool.clone()));
        let err = find_program(Path::new("no-such-tool"), path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no-such-tool was not found on PATH"), "{err}");
        // Not executable: not found by name, refused by path.
        assert!(find_program(Path::new("plain"), path).is_err());
        let err = find_program(&plain, path).unwrap_err().to_string();
        assert!(err.contains("not executable"), "{err}");
        let err = find_program(dir.path(), path).unwrap_err().to_string();
        assert!(err.contains("directory"), "{err}");
        let err = find_program(Path::new("/nonexistent-dir/agent"), path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent-dir/agent"), "{err}");

        let exec = |p: &str| WakeAdapter::Exec {
            argv: vec![p.into(), "{text}".into()],
            busy_exit_codes: vec![],
        };
        assert!(exec("tool").check_programs(path).is_ok());
        assert!(exec("no-such-tool").check_programs(path).is_err());
        // A program made of a placeholder is known only at delivery.
        assert!(exec("{session}-notify").check_programs(path).is_ok());
        let codex = |binary: Option<PathBuf>| WakeAdapter::Codex {
            thread: None,
            binary,
            codex_home: None,
        };
        let err = codex(None).check_programs(path).unwrap_err().to_string();
        assert!(
            err.contains("codex was not found on PATH") && err.contains("--binary"),
            "{err}"
        );
        assert!(codex(Some(tool)).check_programs(path).is_ok());
        assert!(codex(Some(plain)).check_programs(path).is_err());
        let webhook = WakeAdapter::Webhook {
            url: "https://x.example".into(),
        };
        assert!(webhook.check_programs(path).is_ok());
    }

    #[test]
    fn an_exec_route_never_makes_a_placeholder_an_option() {
        let argv: Vec<String> = [
            "notify",
            "{session}",
            "id={wake_id}",
            "{text}",
            "--flag={session}",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            WakeAdapter::exec_args(&argv, "s1", "wake-1-2", "[wakeful] x").unwrap(),
            ["notify", "s1", "id=wake-1-2", "[wakeful] x", "--flag=s1"]
        );
        let err = WakeAdapter::exec_args(&argv, "--help", "w", "t")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("argument 1") && err.contains("{session}"),
            "{err}"
        );
        let err = WakeAdapter::exec_args(&argv, "s", "w", "-rf /")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("argument 3") && err.contains("{text}"),
            "{err}"
        );
        // The template's own option takes the value: fine.
        let own: Vec<String> = vec!["n".into(), "--session={session}".into()];
        assert!(WakeAdapter::exec_args(&own, "-x", "w", "t").is_ok());
        let exec = WakeAdapter::Exec {
            argv,
            busy_exit_codes: vec![],
        };
        assert!(exec.check_session("--help").is_err());
        assert!(exec.check_session("s-1").is_ok());
        let later = WakeAdapter::Exec {
            argv: vec!["n".into(), "id={session}".into()],
            busy_exit_codes: vec![],
        };
        assert!(later.check_session("--help").is_ok());
        let codex = WakeAdapter::Codex {
            thread: None,
            binary: None,
            codex_home: None,
        };
        assert!(codex.check_session("-x").is_err());
    }
}
