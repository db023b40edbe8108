//! What a client asks the daemon: [`Request`], wrapped in an [`Envelope`]
//! that carries the protocol version.

use std::collections::BTreeMap;
#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use wakeful_core::MonitorSpec;

#[cfg(test)]
use crate::route::find_program;
pub use crate::route::WakeAdapter;
#[allow(unused_imports)] // rustdoc links
use crate::PROTOCOL_VERSION;
#[allow(unused_imports)] // rustdoc links
use wakeful_core::MonitorInfo;

/// A request, tagged by `op`, wrapped in an [`Envelope`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Daemon facts. Reply: `ok` with a [`Status`](crate::Status).
    Status {},
    /// Start a monitor (or return the one holding its key). Reply: `ok` with
    /// a [`StartResult`](crate::StartResult).
    Start {
        /// The owning session.
        session: String,
        /// The monitor's parameters.
        spec: Box<MonitorSpec>,
        /// The client's environment; the command runs with it.
        env: BTreeMap<String, String>,
        /// The client's working directory.
        cwd: PathBuf,
        /// Start it on this host of the cluster instead (docs/CLUSTER.md):
        /// the request goes to that host's daemon, which starts it only when
        /// its configuration says `accept_remote = true`, with its own
        /// limits, `[network]` policy, environment and working directory
        /// (`env` and `cwd` here are not sent). Errors `refused`,
        /// `unreachable`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
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
        /// This stream pushes each event to an agent that is woken by it (an
        /// MCP client that declared it shows channel notifications): while
        /// it lasts, the session counts as live (see [`crate::WakeInfo`]).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        wakes_agent: bool,
        /// Write the events, in this form, to the descriptor that came with
        /// this request (`SCM_RIGHTS`: the client's stdout, a pipe opened
        /// non-blocking or a stream socket) instead of sending them on the
        /// connection: the reader gets each event from the daemon itself,
        /// with no process in between. The connection then carries only
        /// the end: `ok` (as without it), or an error
        /// ([`crate::ErrorKind::OutputClosed`] once the reader is gone).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        write_to: Option<OutputForm>,
    },
    /// Read the events of every session (never moves a cursor): `events`
    /// without the session filter, for views that show all sessions.
    /// Replies as [`Request::Events`] without `monitor`.
    EventsAll {
        /// Only events with a greater seq.
        after: u64,
        /// Keep streaming new events until the client disconnects.
        follow: bool,
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
        /// Hand out events that do not wake too, at once. Without it a batch
        /// is handed out only when it holds an event that wakes (see
        /// `wake_on`); the events before it that do not wake come with it.
        #[serde(default)]
        all: bool,
        /// Stand by: take a batch only while no other waiter of the same
        /// session and consumer that does not stand by is attached (the
        /// Claude Code bridge defers so to the rewake hook). A batch that
        /// such a waiter took and acknowledged is never handed out again.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        fallback: bool,
        /// Only this monitor's events (a subagent waiting for the monitor it
        /// started). The cursor still moves by seq, past events of other
        /// monitors: give such a wait a consumer of its own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        monitor: Option<String>,
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
    /// Start a terminal (docs/CONTRACT.md §5), and with `until` a monitor attached to
    /// it. Reply: `ok` with a [`RunResult`](crate::RunResult).
    Run(RunRequest),
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
    /// Whether, and through what, the session's events would wake its agent
    /// now. Reply: `ok` with a [`crate::WakeReport`].
    WakeCheck {
        /// The session.
        session: String,
    },
    /// What an agent coming back should know about its session's monitors.
    /// Reply: `ok` with a [`crate::Digest`].
    Digest {
        /// The session.
        session: String,
    },
    /// Remove a session's route (set with `wake_set`). Reply: `ok`.
    WakeClear {
        /// The session.
        session: String,
    },
    /// Keep events and monitors recorded elsewhere (`wakeful import`): each
    /// event gets a seq here and reaches followers like a local one, once
    /// per origin (importing twice stores nothing twice); the monitors are
    /// listed as ended. Events of a monitor of this state directory are
    /// passed over. Reply: `ok` with an [`crate::ImportResult`].
    Import {
        /// The events, in order, each with its origin.
        events: Vec<ImportedEvent>,
        /// The records of the monitors they belong to.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        monitors: Vec<MonitorInfo>,
    },
    /// This host's cluster link and every host's last heartbeat. Reply:
    /// `ok` with a [`crate::ClusterStatus`]; error `invalid` without
    /// `[cluster]`, `unreachable` when NATS cannot be asked.
    ClusterStatus {},
    /// The monitors of every host of the cluster, as each host last
    /// published them. Reply: `ok` with an array of [`crate::HostMonitor`];
    /// errors as for `cluster_status`.
    ClusterMonitors {
        /// Only this session's; `None` for all sessions.
        session: Option<String>,
    },
    /// Prune now (docs/STORAGE.md): ended monitors past `[store]
    /// max_age`, then whatever the size caps call for, oldest first; with
    /// `dry_run`, only say what would go. Reply: `ok` with a
    /// [`crate::PruneResult`].
    Prune {
        /// Only say what would be removed.
        #[serde(default)]
        dry_run: bool,
    },
    /// What prunes removed, oldest first (those at or after `since`).
    /// Reply: `ok` with an array of [`wakeful_core::storage::PruneRecord`].
    Prunes {
        /// Only prunes at or after this time.
        #[serde(
            default,
            with = "wakeful_core::info::ts_opt",
            skip_serializing_if = "Option::is_none"
        )]
        since: Option<chrono::DateTime<chrono::Utc>>,
    },
}

/// An event recorded elsewhere, for [`Request::Import`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportedEvent {
    /// Where it was first recorded: `<host>/<seq>`
    /// ([`wakeful_core::export::origin`]).
    pub origin: String,
    /// The event as `events --json` printed it there (its seq is replaced).
    pub event: wakeful_core::Event,
}

/// What [`Request::Run`] asks for.
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
    /// The `op` on the wire.
    pub fn op(&self) -> &'static str {
        match self {
            Request::Status {} => "status",
            Request::Start { .. } => "start",
            Request::List { .. } => "list",
            Request::Get { .. } => "get",
            Request::Stop { .. } => "stop",
            Request::Events { .. } => "events",
            Request::EventsAll { .. } => "events_all",
            Request::Wait { .. } => "wait",
            Request::WakeCheck { .. } => "wake_check",
            Request::Digest { .. } => "digest",
            Request::Ack { .. } => "ack",
            Request::Consumers { .. } => "consumers",
            Request::SessionEnd { .. } => "session_end",
            Request::Shutdown {} => "shutdown",
            Request::Run(_) => "run",
            Request::TerminalList { .. } => "terminal_list",
            Request::TerminalGet { .. } => "terminal_get",
            Request::TerminalKill { .. } => "terminal_kill",
            Request::TerminalWait { .. } => "terminal_wait",
            Request::WakeSet { .. } => "wake_set",
            Request::WakeShow { .. } => "wake_show",
            Request::WakeClear { .. } => "wake_clear",
            Request::Import { .. } => "import",
            Request::ClusterStatus {} => "cluster_status",
            Request::ClusterMonitors { .. } => "cluster_monitors",
            Request::Prune { .. } => "prune",
            Request::Prunes { .. } => "prunes",
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

    fn webhook(url: &str) -> Result<(), String> {
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
            let err = webhook(bad).unwrap_err();
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

        assert_eq!(find_program(Path::new("tool"), path), Ok(tool.clone()));
        assert_eq!(find_program(&tool, None), Ok(tool.clone()));
        let err = find_program(Path::new("no-such-tool"), path).unwrap_err();
        assert!(err.contains("no-such-tool was not found on PATH"), "{err}");
        // Not executable: not found by name, refused by path.
        assert!(find_program(Path::new("plain"), path).is_err());
        let err = find_program(&plain, path).unwrap_err();
        assert!(err.contains("not executable"), "{err}");
        let err = find_program(dir.path(), path).unwrap_err();
        assert!(err.contains("directory"), "{err}");
        let err = find_program(Path::new("/nonexistent-dir/agent"), path).unwrap_err();
        assert!(err.contains("/nonexistent-dir/agent"), "{err}");

        let exec = |p: &str| WakeAdapter::Exec {
            argv: vec![p.into(), "{text}".into()],
            busy_exit_codes: vec![],
        };
        assert_eq!(exec("tool").check_programs(path), Ok(()));
        assert!(exec("no-such-tool").check_programs(path).is_err());
        // A program made of a placeholder is known only at delivery.
        assert_eq!(exec("{session}-notify").check_programs(path), Ok(()));
        let codex = |binary: Option<PathBuf>| WakeAdapter::Codex {
            thread: None,
            binary,
            codex_home: None,
        };
        let err = codex(None).check_programs(path).unwrap_err();
        assert!(
            err.contains("codex was not found on PATH") && err.contains("--binary"),
            "{err}"
        );
        assert_eq!(codex(Some(tool)).check_programs(path), Ok(()));
        assert!(codex(Some(plain)).check_programs(path).is_err());
        let webhook = WakeAdapter::Webhook {
            url: "https://x.example".into(),
        };
        assert_eq!(webhook.check_programs(path), Ok(()));
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
        let err = WakeAdapter::exec_args(&argv, "--help", "w", "t").unwrap_err();
        assert!(
            err.contains("argument 1") && err.contains("{session}"),
            "{err}"
        );
        let err = WakeAdapter::exec_args(&argv, "s", "w", "-rf /").unwrap_err();
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
