//! The daemon's socket protocol, version [`PROTOCOL_VERSION`]: one JSON
//! object a line in each direction over a Unix stream socket. The client
//! sends a [`Request`]; the daemon answers with one or more [`Reply`] lines.
//! `docs/PROTOCOL.md` documents every message with examples.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use wakeful_core::{Event, MonitorInfo, MonitorSpec};

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// A request, tagged by `op`, wrapped in an [`Envelope`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Daemon facts. Reply: `ok` with a [`Status`].
    Status,
    /// Start a monitor (or return the one holding its key). Reply: `ok` with
    /// a [`StartResult`].
    Start {
        /// The owning session.
        session: String,
        /// The monitor's parameters.
        spec: MonitorSpec,
        /// The client's environment; the command runs with it.
        env: BTreeMap<String, String>,
        /// The client's working directory.
        cwd: PathBuf,
    },
    /// Monitors: active first, then those ended in the last hour. Reply: `ok`
    /// with an array of [`MonitorInfo`].
    List {
        /// Only this session's; `None` for all sessions.
        session: Option<String>,
    },
    /// One monitor, active or recently ended. Reply: `ok` with a
    /// [`MonitorInfo`], or error `not_found`.
    Get {
        /// The monitor id.
        id: String,
    },
    /// Stop an active monitor and wait until it ended. Reply: `ok` with its
    /// [`MonitorInfo`], or error `not_found`.
    Stop {
        /// The monitor id.
        id: String,
    },
    /// Read events (never moves a cursor). Replies: `event` lines, then
    /// (without `follow`) `ok` with `{"last_seq": N}`.
    Events {
        /// The session.
        session: String,
        /// Only events with a greater seq.
        after: u64,
        /// Keep streaming new events until the client disconnects (or, with
        /// `monitor`, until that monitor's final event).
        follow: bool,
        /// Only this monitor's events.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        monitor: Option<String>,
    },
    /// Block until the session has events the consumer has not acknowledged;
    /// send them, then a `batch`; the client answers [`Request::Ack`] once it
    /// has handed them on. Without `follow` the daemon then replies `ok`;
    /// with it, it waits for the next batch.
    Wait {
        /// The session.
        session: String,
        /// The consumer whose cursor moves.
        consumer: String,
        /// Give up after this long with error `timeout`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        /// Keep going after each batch.
        #[serde(default)]
        follow: bool,
        /// Become the consumer's only exclusive waiter: an older exclusive
        /// waiter of the same session and consumer gives up (error
        /// `superseded`). Batches of one consumer are never handed to two
        /// waiters at once, exclusive or not.
        #[serde(default)]
        exclusive: bool,
    },
    /// Inside a `wait`: everything up to `seq` was handed on.
    Ack {
        /// The `last_seq` of the batch.
        seq: u64,
    },
    /// Stop every active monitor of a session (`session_ended`). Reply: `ok`
    /// with `{"stopped": [ids]}`.
    SessionEnd {
        /// The session.
        session: String,
    },
    /// Stop the daemon. Reply: `ok`, then the daemon exits.
    Shutdown,
    /// Start a terminal (SPEC §5), and with `until` a monitor attached to
    /// it. Reply: `ok` with a [`RunResult`].
    Run {
        /// The owning session.
        session: String,
        /// The command (`sh -c`).
        command: String,
        /// The client's environment.
        env: BTreeMap<String, String>,
        /// The client's working directory.
        cwd: PathBuf,
        /// Attach a monitor that stops on this condition.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<wakeful_core::Until>,
        /// The attached monitor's description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// Terminals, running first. Reply: `ok` with an array of
    /// [`wakeful_core::terminal::TerminalInfo`].
    TerminalList {
        /// Only this session's; `None` for all.
        session: Option<String>,
    },
    /// One terminal. Reply: `ok` with its info, or error `not_found`.
    TerminalGet {
        /// The terminal id.
        id: String,
    },
    /// Stop a terminal's command (its whole group). Reply: `ok` with its
    /// info once it ended, or error `not_found`.
    TerminalKill {
        /// The terminal id.
        id: String,
    },
    /// Wait until a terminal's command ended. Reply: `ok` with its info.
    TerminalWait {
        /// The terminal id.
        id: String,
    },
    /// Route a session's events to its agent. Reply: `ok` with the route
    /// as `wake_show` describes it.
    WakeSet {
        /// The session.
        session: String,
        /// How to reach the agent.
        route: WakeAdapter,
    },
    /// A session's route and delivery state. Reply: `ok` with
    /// `{session, route, source, state, ...}` or `null` without a route.
    WakeShow {
        /// The session.
        session: String,
    },
    /// Remove a session's route (set with `wake_set`). Reply: `ok`.
    WakeClear {
        /// The session.
        session: String,
    },
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
    },
    /// The end of a `wait` batch; answer with [`Request::Ack`].
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

/// Kinds of failure, each with its exit code (SPEC §7).
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
    /// Anything else (exit 1).
    Internal,
}

impl ErrorKind {
    /// The command-line exit code for this failure.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Invalid => 2,
            ErrorKind::NotFound => 3,
            ErrorKind::Limit => 4,
            ErrorKind::Timeout => 124,
            ErrorKind::Superseded => 0,
            ErrorKind::Version | ErrorKind::Internal => 1,
        }
    }
}

/// Result of [`Request::Status`] (`status --json`).
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
}

/// Result of [`Request::Start`] (`start --json`).
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
}

/// A session's wake route: which adapter, with its options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "adapter", rename_all = "snake_case", deny_unknown_fields)]
pub enum WakeAdapter {
    /// `codex queue --thread <id> --message <text>`: Codex's durable queue.
    Codex {
        /// The thread (default: the session name, which is `CODEX_THREAD_ID`
        /// for sessions detected inside Codex).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<String>,
        /// The `codex` executable (default: `codex` on PATH).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binary: Option<PathBuf>,
        /// `CODEX_HOME` for the command.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        codex_home: Option<PathBuf>,
    },
    /// An OpenCode server: `POST {url}/session/{id}/prompt_async`.
    Opencode {
        /// The server, e.g. `http://127.0.0.1:4096`.
        url: String,
        /// The OpenCode session id (default: the wakeful session name).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        opencode_session: Option<String>,
        /// The project directory (`?directory=`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        directory: Option<String>,
    },
    /// Any command: an argv template whose elements may contain `{session}`,
    /// `{text}` and `{wake_id}`; each is substituted inside its one argument,
    /// never through a shell.
    Exec {
        /// The template; the first element is the program.
        argv: Vec<String>,
        /// Exit codes that mean "busy, retry later". Exit 0 is accepted;
        /// any other code is a failure (no retry).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        busy_exit_codes: Vec<i32>,
    },
    /// `POST` a JSON body `{wake_id, session, text, events}` to a URL.
    Webhook {
        /// The URL (http or https).
        url: String,
    },
}

impl WakeAdapter {
    /// The adapter's name.
    pub fn name(&self) -> &'static str {
        match self {
            WakeAdapter::Codex { .. } => "codex",
            WakeAdapter::Opencode { .. } => "opencode",
            WakeAdapter::Exec { .. } => "exec",
            WakeAdapter::Webhook { .. } => "webhook",
        }
    }

    /// Checks the options (before a route is stored).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            WakeAdapter::Exec { argv, .. } if argv.is_empty() || argv[0].is_empty() => Err(
                "the exec adapter needs a program: `wakeful wake set exec -- PROGRAM ARGS...`"
                    .into(),
            ),
            WakeAdapter::Opencode { url, .. } | WakeAdapter::Webhook { url } => {
                if url.starts_with("http://") || url.starts_with("https://") {
                    Ok(())
                } else {
                    Err(format!("`{url}` is not an http:// or https:// URL"))
                }
            }
            _ => Ok(()),
        }
    }
}

/// Result of [`Request::Run`] (`run --json`).
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
}

/// Result of [`Request::Get`]/[`Request::List`] entries.
pub type MonitorEntry = MonitorInfo;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_is_flat_and_versioned() {
        let e = Envelope {
            v: 1,
            request: Request::Stop { id: "mon-1".into() },
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"v":1,"op":"stop","id":"mon-1"}"#
        );
        let back: Envelope = serde_json::from_str(r#"{"v":1,"op":"status"}"#).unwrap();
        assert_eq!(back.request, Request::Status);
    }

    #[test]
    fn replies_are_tagged() {
        let r = Reply::Error {
            kind: ErrorKind::NotFound,
            message: "monitor mon-x not found".into(),
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"type":"error","kind":"not_found","message":"monitor mon-x not found"}"#
        );
        assert_eq!(ErrorKind::Timeout.exit_code(), 124);
    }
}
