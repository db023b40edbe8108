//! What a client asks the daemon: [`Request`], wrapped in an [`Envelope`]
//! that carries the protocol version.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

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
    /// it. Reply: `ok` with a [`RunResult`].
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

/// A session's wake route: which adapter, with its options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "adapter", rename_all = "snake_case", deny_unknown_fields)]
pub enum WakeAdapter {
    /// A Codex thread, through the app-server control socket under
    /// `CODEX_HOME` (`thread/queue/add`, accepted when the turn carrying the
    /// wake starts), else `codex queue --thread <id> --message <text>`.
    Codex {
        /// The thread (default: the session name, which is `CODEX_THREAD_ID`
        /// for sessions detected inside Codex).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<String>,
        /// The `codex` executable for `codex queue` (default: `codex` on PATH).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binary: Option<PathBuf>,
        /// `CODEX_HOME` (default: the daemon's `$CODEX_HOME`, else
        /// `~/.codex`): the control socket's place, and `codex queue`'s.
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

    /// Checks the options (before a route is stored). Pure: nothing is
    /// looked up; [`WakeAdapter::check_programs`] checks that the programs
    /// exist.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            WakeAdapter::Exec { argv, .. } if argv.is_empty() || argv[0].is_empty() => Err(
                "the exec adapter needs a program: `wakeful wake set exec -- PROGRAM ARGS...`"
                    .into(),
            ),
            WakeAdapter::Exec {
                busy_exit_codes, ..
            } => match busy_exit_codes.iter().find(|c| !(1..=255).contains(*c)) {
                Some(c) => Err(format!(
                    "busy exit code {c} cannot happen: an exit code that means busy is a number from 1 to 255 (0 means accepted)"
                )),
                None => Ok(()),
            },
            WakeAdapter::Opencode { url, .. } | WakeAdapter::Webhook { url } => check_url(url),
            WakeAdapter::Codex {
                binary: Some(b), ..
            } if b.as_os_str().is_empty() => {
                Err("the codex binary is empty: give its path, or leave it out for `codex` on PATH".into())
            }
            WakeAdapter::Codex { .. } => Ok(()),
        }
    }

    /// Checks that the route can carry `session` without it turning into
    /// an option of the program it runs: an exec argument that begins with
    /// `{session}` (or a codex route without `--thread`, whose thread is
    /// the session) and a session id that begins with `-` would hand the
    /// program `--help` or `--dangerously-skip-permissions` as an option.
    pub fn check_session(&self, session: &str) -> Result<(), String> {
        if !session.starts_with('-') {
            return Ok(());
        }
        let refused = |how: &str| {
            Err(format!(
                "session `{session}` begins with `-`: {how} it where the program reads options, so it could act as one; use a session id that does not begin with `-`"
            ))
        };
        match self {
            WakeAdapter::Exec { argv, .. }
                if argv.iter().skip(1).any(|a| a.starts_with("{session}")) =>
            {
                refused("the exec route's {session} would put")
            }
            WakeAdapter::Codex { thread: None, .. } => refused("`codex queue --thread` would get"),
            _ => Ok(()),
        }
    }

    /// An exec route's arguments for one wake: `{session}`, `{wake_id}`
    /// and `{text}` replaced in each (never split, never through a shell).
    /// An argument whose template begins with a placeholder and whose value
    /// begins with `-` is refused: the program would read it as an option.
    pub fn exec_args(
        argv: &[String],
        session: &str,
        wake_id: &str,
        text: &str,
    ) -> Result<Vec<String>, String> {
        let subst = |s: &str| {
            s.replace("{session}", session)
                .replace("{wake_id}", wake_id)
                .replace("{text}", text)
        };
        argv.iter()
            .enumerate()
            .map(|(i, template)| {
                let value = subst(template);
                let placed = PLACEHOLDERS.iter().any(|h| template.starts_with(h));
                if i > 0 && placed && !template.starts_with('-') && value.starts_with('-') {
                    let name = PLACEHOLDERS
                        .iter()
                        .find(|h| template.starts_with(*h))
                        .copied()
                        .unwrap_or("a placeholder");
                    return Err(format!(
                        "argument {i} of the exec route ({template}) would begin with `-` ({name} begins with it) and the program could read it as an option; nothing was run"
                    ));
                }
                Ok(value)
            })
            .collect()
    }

    /// Checks that the programs the route runs can be run: the exec
    /// program and the codex binary, searched in `path` (a `PATH` value)
    /// unless given with a `/`; a relative path is taken from the current
    /// directory. An exec program with a placeholder is not checked. Reads
    /// the file system, unlike [`WakeAdapter::validate`].
    pub fn check_programs(&self, path: Option<&OsStr>) -> Result<(), String> {
        match self {
            WakeAdapter::Exec { argv, .. } => match argv.first() {
                Some(p) if !PLACEHOLDERS.iter().any(|h| p.contains(h)) => {
                    find_program(Path::new(p), path).map(drop)
                }
                _ => Ok(()),
            },
            WakeAdapter::Codex { binary, .. } => {
                let program = binary.as_deref().unwrap_or(Path::new("codex"));
                find_program(program, path).map(drop).map_err(|e| {
                    if binary.is_none() {
                        format!("{e}; install Codex, or give its path with --binary")
                    } else {
                        e
                    }
                })
            }
            WakeAdapter::Opencode { .. } | WakeAdapter::Webhook { .. } => Ok(()),
        }
    }
}

impl WakeAdapter {
    /// The host and port a network adapter (opencode, webhook) talks to,
    /// for a reachability probe; `None` for the others or a URL that does
    /// not parse.
    pub fn endpoint(&self) -> Option<(String, u16)> {
        let url = match self {
            WakeAdapter::Opencode { url, .. } | WakeAdapter::Webhook { url } => url,
            _ => return None,
        };
        let uri: http::Uri = url.parse().ok()?;
        let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("https") {
                443
            } else {
                80
            });
        Some((host.to_string(), port))
    }
}

/// What the exec adapter substitutes in its argv.
const PLACEHOLDERS: [&str; 3] = ["{session}", "{text}", "{wake_id}"];

/// An http or https URL with a host, parsed by a real URI parser.
fn check_url(url: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "`{url}` is not a usable URL: {why}; give an http:// or https:// URL with a host, e.g. http://127.0.0.1:4096"
        ))
    };
    let uri: http::Uri = match url.parse() {
        Ok(u) => u,
        Err(e) => return bad(&e.to_string()),
    };
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return bad(&format!("the scheme is {other}, not http or https")),
        None => return bad("it has no scheme"),
    }
    let Some(authority) = uri.authority() else {
        return bad("it has no host");
    };
    if authority.host().is_empty() {
        return bad("it has no host");
    }
    if authority.as_str().contains('@') {
        return bad("credentials in the URL are not accepted");
    }
    // The parser keeps a port it cannot read as none; look at it here.
    if let Some((_, port)) = authority.as_str().rsplit_once(':') {
        if !port.contains(']') && port.parse::<u16>().is_err() {
            return bad("the port is not a number from 0 to 65535");
        }
    }
    Ok(())
}

/// Where `program` is: itself when it holds a `/` (relative to the current
/// directory), else the first executable file of that name in the
/// directories of `path` (a `PATH` value; an empty entry is the current
/// directory). The error says what is wrong and what to do.
pub fn find_program(program: &Path, path: Option<&OsStr>) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.as_os_str().as_encoded_bytes().contains(&b'/') {
        return match std::fs::metadata(program) {
            Err(e) => Err(format!("cannot run {}: {e}", program.display())),
            Ok(_) if executable(program) => Ok(program.to_path_buf()),
            Ok(m) if m.is_dir() => Err(format!(
                "cannot run {}: it is a directory",
                program.display()
            )),
            Ok(_) => Err(format!(
                "cannot run {}: it is not executable (chmod +x {0})",
                program.display()
            )),
        };
    }
    let dirs: Vec<PathBuf> = path
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    dirs.iter()
        .map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".").join(program)
            } else {
                d.join(program)
            }
        })
        .find(|p| executable(p))
        .ok_or_else(|| {
            format!(
                "{} was not found on PATH ({}); install it, or give its path",
                program.display(),
                path.map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "PATH is not set".into())
            )
        })
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
