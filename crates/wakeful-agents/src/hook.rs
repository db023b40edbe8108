//! What the hooks of every agent share: the hook input on stdin, the order
//! in which a hook finds its session, and taking one batch of a consumer's
//! events through `wait` so that it is acknowledged only once the agent's
//! process has it.

use std::io::{IsTerminal, Read};
use std::time::Duration;

use wakeful_client::{ClientError, Connection, Paths};
use wakeful_core::present;
use wakeful_core::session::{self, Known};
use wakeful_protocol::{ErrorKind, WaitEvents};

use crate::Error;

/// Largest event body in a notification line or a framed block; longer
/// text is cut with a pointer to the output file.
pub const MAX_EVENT_BYTES: usize = 16 * 1024;
/// Largest framed text handed to a hook at once; the events that do not
/// fit stay unacknowledged for the next delivery.
pub const MAX_FRAMED_BYTES: usize = 48 * 1024;
/// How long a hook waits for its JSON on stdin.
const STDIN_TIMEOUT: Duration = Duration::from_secs(5);

/// What a hook reads from its stdin (Claude Code's hook input).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HookInput {
    /// `session_id`.
    pub session_id: Option<String>,
    /// `stop_hook_active`: the turn already continues because of a Stop hook.
    pub stop_hook_active: bool,
    /// `hook_event_name`.
    pub hook_event_name: Option<String>,
}

/// Why a hook's stdin is not a hook's input ([`parse_input`]).
#[derive(Debug, thiserror::Error)]
pub enum HookInputError {
    /// Not JSON.
    #[error("the hook input on stdin is not JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// JSON, but not an object.
    #[error("the hook input on stdin is not a JSON object")]
    NotAnObject,
}

/// Parses a hook's stdin. Empty input is no input; anything else must be a
/// JSON object.
pub fn parse_input(text: &str) -> Result<HookInput, HookInputError> {
    if text.trim().is_empty() {
        return Ok(HookInput::default());
    }
    let v: serde_json::Value = serde_json::from_str(text).map_err(HookInputError::Json)?;
    let Some(o) = v.as_object() else {
        return Err(HookInputError::NotAnObject);
    };
    let string = |k: &str| {
        o.get(k)
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    Ok(HookInput {
        session_id: string("session_id"),
        stop_hook_active: o
            .get("stop_hook_active")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
        hook_event_name: string("hook_event_name"),
    })
}

/// Whether the Stop hook may hand events over: never while the turn already
/// continues because of a Stop hook (that would keep it going forever).
pub fn stop_may_block(input: &HookInput) -> bool {
    !input.stop_hook_active
}

/// The session a hook or the bridge speaks for, by the hooks' order
/// ([`wakeful_core::session::hook`]), or `None` when nothing names one.
/// `recorded` looks up the session recorded for the agent's process (asked
/// only when `--session` and `$WAKEFUL_SESSION` name none), `agent_var` is
/// the agent's own session variable (`CLAUDE_CODE_SESSION_ID`,
/// `GEMINI_SESSION_ID`).
pub fn resolve_session(
    explicit: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
    recorded: impl Fn() -> Option<String>,
    input: &HookInput,
    agent_var: &'static str,
) -> Option<String> {
    let known = Known::new(explicit, &env)
        .recorded(&recorded)
        .hook_input(input.session_id.as_deref());
    session::resolve(&session::hook(agent_var), &known).map(|(s, _)| s)
}

/// The session the agent itself runs in ([`session::agent_own`]): the hook
/// input's `session_id`, else the agent's variable `agent_var`.
pub fn agent_session(
    env: impl Fn(&str) -> Option<String>,
    input: &HookInput,
    agent_var: &'static str,
) -> Option<String> {
    let known = Known::new(None, &env).hook_input(input.session_id.as_deref());
    session::resolve(&session::agent_own(agent_var), &known).map(|(s, _)| s)
}

pub(crate) fn env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// Reads the hook input from stdin (not from a terminal, and not longer
/// than 5 s).
pub async fn read_input() -> Result<HookInput, Error> {
    if std::io::stdin().is_terminal() {
        return Ok(HookInput::default());
    }
    let read = tokio::task::spawn_blocking(|| {
        let mut text = String::new();
        std::io::stdin()
            .take(1024 * 1024)
            .read_to_string(&mut text)
            .map(|_| text)
    });
    let text = match tokio::time::timeout(STDIN_TIMEOUT, read).await {
        Ok(Ok(Ok(text))) => text,
        Ok(Ok(Err(e))) => return Err(Error::failed(format!("stdin: {e}"))),
        Ok(Err(e)) => return Err(Error::failed(e.to_string())),
        Err(_) => String::new(),
    };
    parse_input(&text).map_err(|e| Error::failed(e.to_string()))
}

/// The session's resume digest for a shell-using agent, if there is
/// anything to say and a daemon runs.
pub async fn digest_text(paths: &Paths, session: &str) -> Option<String> {
    wakeful_client::digest(paths, session)
        .await?
        .text(wakeful_core::digest::Reader::Cli)
}

/// The agent process a hook or the bridge serves, watched through the
/// platform layer's `tree::exit_watch` (a pidfd on Linux; under the posix
/// backend, `kill(pid, 0)` every 250 ms). Its reader is gone once that process is: a batch written after it
/// left (into an output file, or a pipe some other process still holds) is
/// never acknowledged.
pub struct AgentProcess {
    fd: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
    /// The process, when it is watched by asking (no exit descriptor).
    polled: Option<i32>,
}

impl AgentProcess {
    /// Watches the process that started this one (another agent's hook).
    pub fn parent() -> AgentProcess {
        Self::pid(nix::unistd::getppid().as_raw())
    }

    /// Watches process `pid` (nothing, when it is 1 or less or cannot be
    /// watched).
    pub fn pid(pid: i32) -> AgentProcess {
        let fd = Self::open(pid);
        let polled =
            (fd.is_none() && pid > 1 && wakeful_platform::tree::is_alive(pid)).then_some(pid);
        AgentProcess { fd, polled }
    }

    fn open(pid: i32) -> Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
        if pid <= 1 {
            return None;
        }
        let owned = wakeful_platform::tree::exit_watch(pid)?;
        // SAFETY: `owned` is a valid open descriptor, owned by the AsyncFd and
        // closed only when it is dropped.
        unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE)
        }
        .ok()
    }

    /// Whether the process has exited (its exit descriptor is readable).
    pub fn is_gone(&self) -> bool {
        use std::os::fd::AsRawFd;
        let Some(fd) = &self.fd else {
            return self
                .polled
                .is_some_and(|pid| !wakeful_platform::tree::is_alive(pid));
        };
        let mut pfd = libc::pollfd {
            fd: fd.get_ref().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, a zero timeout.
        unsafe { libc::poll(&mut pfd, 1, 0) > 0 }
    }

    /// Completes when the process has exited; never, when it cannot be
    /// watched.
    pub async fn gone(&self) {
        match (&self.fd, self.polled) {
            (Some(fd), _) => {
                let _ = fd.readable().await;
            }
            (None, Some(pid)) => {
                while wakeful_platform::tree::is_alive(pid) {
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
            }
            (None, None) => std::future::pending().await,
        }
    }
}

/// A `wait` for what `consumer` has now, without waiting (the hooks that
/// run at a point of the turn); `all`: every unacknowledged event, not only
/// up to the last one that wakes.
pub fn take_now(session: String, consumer: &str, all: bool) -> WaitEvents {
    WaitEvents {
        session,
        consumer: consumer.to_string(),
        timeout_ms: Some(0),
        all,
        ..Default::default()
    }
}

/// One batch of the consumer's events, taken through `wait` (with each
/// monitor's description): `Ok(None)` when there was nothing (timeout,
/// superseded, or the daemon went away). `deliver` hands the framed text
/// on; only when it succeeds, and `agent` (the process that reads it) is
/// still there, are the events it held acknowledged.
pub async fn take_batch(
    conn: Connection,
    request: WaitEvents,
    agent: AgentProcess,
    deliver: impl FnOnce(&str) -> std::io::Result<()>,
) -> Result<Option<usize>, Error> {
    let mut waiter = conn
        .waiter(WaitEvents {
            describe: true,
            ..request
        })
        .await?;
    let waited = tokio::select! {
        r = waiter.wait() => r,
        _ = agent.gone() => return Ok(None),
    };
    let mut batch = match waited {
        Ok(Some(batch)) => batch,
        Err(ClientError::Refused { kind, message })
            if !matches!(kind, ErrorKind::Timeout | ErrorKind::Superseded) =>
        {
            return Err(Error::failed(message))
        }
        // The daemon went away: the next hook or the bridge goes on.
        _ => return Ok(None),
    };
    let (text, n) = present::batch(&batch.events, MAX_FRAMED_BYTES, MAX_EVENT_BYTES, None);
    if n == 0 || agent.is_gone() {
        return Ok(None);
    }
    deliver(&text)?;
    if agent.is_gone() {
        // Written after the agent left: nobody read it.
        return Ok(None);
    }
    batch.keep(n);
    waiter.ack_last(batch).await?;
    Ok(Some(n))
}
