//! What a client asks the daemon: [`Request`], wrapped in an [`Envelope`]
//! that carries the protocol version.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use wakeful_core::MonitorSpec;

#[allow(unused_imports)] // rustdoc links
use crate::reply::{Reply, RunResult, StartResult, Status, WakeStatus};
#[allow(unused_imports)] // rustdoc links
use crate::PROTOCOL_VERSION;
#[allow(unused_imports)] // rustdoc links
use wakeful_core::MonitorInfo;

/// A request, tagged by `op`, wrapped in an [`Envelope`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Daemon facts. Reply: `ok` with a [`Status`].
    Status {},
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
    /// Consumers and their cursors. Reply: `ok` with an array of
    /// [`crate::ConsumerInfo`].
    Consumers {
        /// Only this session's; `None` for all sessions.
        session: Option<String>,
    },
    /// Stop every active monitor of a session (`session_ended`). Reply: `ok`
    /// with `{"stopped": [ids]}`.
    SessionEnd {
        /// The session.
        session: String,
    },
    /// Stop the daemon. Reply: `ok`, then the daemon exits.
    Shutdown {},
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

impl Request {
    /// The `op` on the wire.
    pub fn op(&self) -> &'static str {
        match self {
            Request::Status {} => "status",
            Request::Start { .. } => "start",
            Request::List { .. } => "list",
            Request::Get { .. } => "get",
            Request::Stop { .. } => "stop",
            Request::Events { .. } => "events",
            Request::Wait { .. } => "wait",
            Request::Ack { .. } => "ack",
            Request::Consumers { .. } => "consumers",
            Request::SessionEnd { .. } => "session_end",
            Request::Shutdown {} => "shutdown",
            Request::Run { .. } => "run",
            Request::TerminalList { .. } => "terminal_list",
            Request::TerminalGet { .. } => "terminal_get",
            Request::TerminalKill { .. } => "terminal_kill",
            Request::TerminalWait { .. } => "terminal_wait",
            Request::WakeSet { .. } => "wake_set",
            Request::WakeShow { .. } => "wake_show",
            Request::WakeClear { .. } => "wake_clear",
        }
    }
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
