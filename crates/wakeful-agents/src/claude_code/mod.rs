//! Claude Code: the commands behind its plugin (`wakeful hook …`,
//! `integrations/claude-code/`), which bring a session's events to Claude;
//! how to tell whether a Claude Code process awaits its async hooks
//! ([`mode`]); and the plugin's files and monitors ([`plugin`]).
//!
//! Three paths deliver events, and all of them read and move the cursor of
//! one consumer, [`CONSUMER`] (`claude`), of the session. The daemon hands a
//! batch of one consumer to one waiter at a time and moves the cursor only
//! when that waiter acknowledged the batch, so each event reaches the model
//! exactly once, whichever path takes it:
//!
//! - `wakeful hook rewake`, an `asyncRewake` hook on SessionStart and Stop,
//!   the first path: an exclusive waiter (a newer one makes it give up, exit
//!   0). With events it writes them to stderr and exits 2, which wakes the
//!   model (a median of 62–97 ms from the line to the next model request,
//!   `bench/claude_wake_latency.py`).
//!   Under a Claude Code print run (`claude -p`), which waits for asyncRewake
//!   hooks instead of running them in the background, it exits 0 at once
//!   ([`mode`]); the Stop hook then delivers.
//! - `wakeful hook monitor`, the plugin monitor (`when: "always"`), the
//!   fallback: a lossless follower that prints one line per event, as a
//!   waiter that stands by (`fallback`): the daemon hands it a batch only
//!   while no rewake hook (or other waiter of the consumer) waits — during a
//!   turn, between the rewake hook's exit and the next Stop, or where Claude
//!   Code runs no hooks. Claude Code turns each stdout line into a monitor
//!   notification, which starts a turn when the session is idle, after a
//!   200 ms batching timer of its own. It never exits on its own: when the
//!   daemon goes away it reconnects and goes on after the last acknowledged
//!   event. It holds a shared lock under `<state dir>/claude-code/bridges/`
//!   while it runs.
//! - `wakeful hook stop`, a Stop hook: at the end of a turn it takes what is
//!   still unacknowledged without waiting and prints
//!   `{"decision":"block","reason":…}`, so the turn goes on with the events;
//!   never when `stop_hook_active` is true.
//!
//! A hook never exits 2 by mistake: in a Claude Code hook, exit 2 means
//! "blocking error, show stderr to the model", so every failure of a hook
//! exits 1 (`rewake` exits 2 only with events).
//!
//! **The session.** `/clear` gives the conversation a new session id, but the
//! plugin monitor and the MCP server keep the one the Claude Code process
//! started with. So that everything keeps using one session, the first hook
//! or bridge of a Claude Code process (`$CLAUDE_PID`, checked with its start
//! time) records the session id it sees under
//! `<state dir>/claude-code/processes/<pid>`, and later hooks of the same
//! process use the recorded one; `wakeful hook session-start` also exports
//! it as `WAKEFUL_SESSION` to the session's Bash commands (`$CLAUDE_ENV_FILE`),
//! so that `wakeful start` in a Bash tool call lands in the same session.
//! Order: `--session`, `$WAKEFUL_SESSION`, the recorded session of the
//! Claude Code process, the hook input's `session_id`,
//! `$CLAUDE_CODE_SESSION_ID`.

pub mod channels;
pub mod mode;
pub mod plugin;
pub mod plugin_check;

use std::io::Write;
use std::time::Duration;

use serde_json::json;
use wakeful_client::{connect, connect_existing, ClientError, Connection, Paths};
use wakeful_core::present::{self, sanitize_for_model};

#[cfg(test)]
use crate::hook::parse_input;
use crate::hook::{
    agent_session, digest_text, env, read_input, resolve_session, stop_may_block, take_batch,
    take_now, AgentProcess, HookInput, MAX_EVENT_BYTES,
};
use crate::{process_record, Error};

/// The consumer all three paths share.
pub const CONSUMER: &str = wakeful_protocol::consumer::CLAUDE;
/// The rewake hook gives up (exit 0) after this long by default: a minute
/// under the hook's `timeout` of 86400 s in `hooks/hooks.json`.
pub const REWAKE_TIMEOUT_MS: u64 = 86_340_000;
/// Reconnection backoff of the bridge: from this…
const MIN_RETRY: Duration = Duration::from_millis(50);
/// …doubling up to this.
const MAX_RETRY: Duration = Duration::from_secs(1);

// ------------------------------------------------------------ pure parts

/// Claude Code's session variable.
const CLAUDE_VAR: &str = wakeful_core::session::CLAUDE_CODE_SESSION_ID;

/// The Stop hook's answer for framed events.
pub fn stop_output(reason: &str) -> String {
    json!({"decision": "block", "reason": reason}).to_string()
}

/// A line for `$CLAUDE_ENV_FILE` that exports `WAKEFUL_SESSION`.
pub fn env_file_line(session: &str) -> String {
    format!(
        "export WAKEFUL_SESSION='{}'\n",
        session.replace('\'', "'\\''")
    )
}

// ------------------------------------------------------------ IO

/// The session for a hook with `input`, recording the Claude Code process's
/// session when this is its first hook.
fn session_for(paths: &Paths, explicit: Option<&str>, input: &HookInput) -> Result<String, Error> {
    let recorded = || {
        agent_session(env, input, CLAUDE_VAR).and_then(|current| process_session(paths, &current))
    };
    resolve_session(explicit, env, recorded, input, CLAUDE_VAR).ok_or_else(|| {
        Error::usage("no session: run this from a Claude Code hook or monitor (session_id on stdin, or $CLAUDE_CODE_SESSION_ID), or pass --session",
        )
    })
}

/// The session recorded for this Claude Code process (`$CLAUDE_PID`), or,
/// when there is none yet, `current`, which is then recorded. `None` when
/// the process is unknown (no `$CLAUDE_PID`, no `/proc`).
fn process_session(paths: &Paths, current: &str) -> Option<String> {
    let pid: u32 = env("CLAUDE_PID")?.parse().ok()?;
    process_record::recorded_or_record(paths, "claude-code", pid, current, "wakeful hook")
}

/// A file name for a session and consumer: safe characters kept, the rest
/// replaced, and a hash of the original so that two names never collide.
pub fn lock_name(session: &str, consumer: &str) -> String {
    let key = format!("{session}\u{0}{consumer}");
    // FNV-1a, 64 bits: stable across builds and platforms.
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let safe: String = format!("{session}.{consumer}")
        .chars()
        .take(80)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.{hash:016x}.lock")
}

/// The lock a running bridge holds (shared) for its session and consumer.
fn bridge_lock(paths: &Paths, session: &str, consumer: &str) -> std::path::PathBuf {
    paths
        .state_dir
        .join("claude-code")
        .join("bridges")
        .join(lock_name(session, consumer))
}

/// Holds the bridge lock for as long as the returned guard lives.
fn hold_bridge_lock(
    paths: &Paths,
    session: &str,
    consumer: &str,
) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    use std::os::unix::fs::DirBuilderExt;
    let path = bridge_lock(paths, session, consumer);
    if let Some(dir) = path.parent() {
        paths.prepare().map_err(std::io::Error::other)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockShared)
        .map_err(|(_, e)| std::io::Error::from(e))
}

/// Whether a bridge (`wakeful hook monitor`) of this session and consumer
/// is running.
pub fn bridge_alive(paths: &Paths, session: &str, consumer: &str) -> bool {
    let Ok(file) = std::fs::File::options()
        .write(true)
        .open(bridge_lock(paths, session, consumer))
    else {
        return false;
    };
    matches!(
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock),
        Err((_, nix::errno::Errno::EWOULDBLOCK))
    )
}

/// `wakeful hook session-start`: a synchronous SessionStart hook. Records
/// the Claude Code process's session and exports it to the session's Bash
/// commands as `WAKEFUL_SESSION` (through `$CLAUDE_ENV_FILE`).
pub async fn session_start(paths: &Paths, explicit: Option<&str>) -> Result<u8, Error> {
    let input = read_input().await?;
    let session = session_for(paths, explicit, &input)?;
    // Unless the user chose the session (Bash has it already).
    let chosen = env(wakeful_core::session::WAKEFUL_SESSION).is_some_and(|s| !s.is_empty());
    if let Some(file) = env("CLAUDE_ENV_FILE").filter(|f| !f.is_empty() && !chosen) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .map_err(|e| Error::failed(format!("{file}: {e}")))?;
        f.write_all(env_file_line(&session).as_bytes())
            .map_err(|e| Error::failed(format!("{file}: {e}")))?;
    }
    // The resume digest, as context for the model: which monitors run and
    // which ended since it last saw them. Without a daemon there is none.
    if let Some(text) = digest_text(paths, &session).await {
        let out = json!({
            "hookSpecificOutput": {
                "hookEventName": "SessionStart",
                "additionalContext": text,
            }
        });
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{out}")?;
        stdout.flush()?;
    }
    Ok(0)
}

/// Watches the Claude Code process of this one: `$CLAUDE_PID` (Claude Code
/// sets it for hooks and the commands it runs) or the nearest ancestor that
/// is Claude Code, else the process that started this one.
fn watch_claude() -> AgentProcess {
    let pid = mode::claude_process(env("CLAUDE_PID").as_deref())
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or_else(|| nix::unistd::getppid().as_raw());
    AgentProcess::pid(pid)
}

/// `wakeful hook monitor`: the plugin monitor's command.
pub async fn monitor(paths: &Paths, explicit: Option<&str>, consumer: &str) -> Result<u8, Error> {
    let session = session_for(paths, explicit, &HookInput::default())?;
    // Says that a bridge runs (for `wakeful doctor` and people).
    let _lock = hold_bridge_lock(paths, &session, consumer).map_err(|e| {
        eprintln!("wakeful hook monitor: cannot take the bridge lock: {e}");
    });
    let claude = watch_claude();
    let parent = claude.gone();
    tokio::pin!(parent);
    let mut reported: Option<String> = None;
    let mut first = true;
    let mut retry = MIN_RETRY;
    loop {
        // The first connection starts the daemon if needed; after that, a
        // daemon that went away is waited for (any wakeful command starts it).
        let conn = if first {
            connect(paths).await.map_err(|e| e.to_string())
        } else {
            connect_existing(paths).await.map_err(|e| e.to_string())
        };
        if first {
            if let Err(e) = &conn {
                // Silence is not success: say once why nothing comes.
                let line = format!(
                    "[wakeful] cannot reach the wakeful daemon: {}; events will follow once it runs (any wakeful command starts it)",
                    sanitize_for_model(e).replace('\n', " ")
                );
                if print_line(&line).is_err() {
                    return Ok(0);
                }
            }
        }
        first = false;
        if let Ok(conn) = conn {
            let followed = tokio::select! {
                f = follow(conn, &session, consumer, &claude) => f,
                _ = &mut parent => return Ok(0),
            };
            match followed {
                Followed::OutputClosed => return Ok(0),
                Followed::Delivered => {
                    retry = MIN_RETRY;
                    reported = None;
                }
                Followed::Disconnected => {}
                Followed::Refused(message) => {
                    // Silence is not success: say once why nothing comes.
                    if reported.as_deref() != Some(message.as_str()) {
                        let line = format!(
                            "[wakeful] cannot follow this session's events: {}; retrying",
                            sanitize_for_model(&message).replace('\n', " ")
                        );
                        if print_line(&line).is_err() {
                            return Ok(0);
                        }
                        reported = Some(message);
                    }
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(retry) => {}
            _ = &mut parent => return Ok(0),
        }
        retry = (retry * 2).min(MAX_RETRY);
    }
}

fn print_line(line: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()
}

/// How one daemon connection of the bridge ended.
enum Followed {
    /// Nobody reads our stdout any more: stop.
    OutputClosed,
    /// The connection broke after delivering at least one batch.
    Delivered,
    /// The connection broke with nothing delivered.
    Disconnected,
    /// The daemon refused the wait.
    Refused(String),
}

async fn follow(
    conn: Connection,
    session: &str,
    consumer: &str,
    claude: &AgentProcess,
) -> Followed {
    let request = wakeful_protocol::WaitEvents {
        session: session.to_string(),
        consumer: consumer.to_string(),
        follow: true,
        // The rewake hook goes first: its wake reaches an idle session
        // ~200 ms sooner than a monitor notification.
        fallback: true,
        describe: true,
        ..Default::default()
    };
    let Ok(mut waiter) = conn.waiter(request).await else {
        return Followed::Disconnected;
    };
    let mut delivered = false;
    loop {
        let batch = match waiter.wait().await {
            Ok(Some(batch)) => batch,
            Err(ClientError::Refused { message, .. }) => return Followed::Refused(message),
            Ok(None) | Err(_) if delivered => return Followed::Delivered,
            Ok(None) | Err(_) => return Followed::Disconnected,
        };
        if claude.is_gone() {
            // Nobody will read it: not acknowledged.
            return Followed::OutputClosed;
        }
        let mut out = std::io::stdout().lock();
        let written = batch
            .events
            .iter()
            .try_for_each(|(e, d)| {
                let line = present::notification_line(e, d.as_deref(), MAX_EVENT_BYTES);
                writeln!(out, "{line}")
            })
            .and_then(|()| out.flush());
        drop(out);
        if written.is_err() || claude.is_gone() {
            // Not acknowledged: the next waiter gets these events (Claude
            // Code left while they were written: a file or a pipe another
            // process holds took them, not Claude).
            return Followed::OutputClosed;
        }
        if waiter.ack(batch).await.is_err() {
            return Followed::Disconnected;
        }
        delivered = true;
    }
}

/// `wakeful hook rewake`: an `asyncRewake` hook.
pub async fn rewake(
    paths: &Paths,
    explicit: Option<&str>,
    consumer: &str,
    timeout_ms: u64,
) -> Result<u8, Error> {
    let input = read_input().await?;
    if awaited_by_claude_code() {
        // Waiting would hold back the print run's first request (SessionStart)
        // or its end (Stop) for as long as no event comes.
        return Ok(0);
    }
    let session = session_for(paths, explicit, &input)?;
    // The first path: a running bridge stands by (`fallback`) while this
    // waits, and takes over only when no rewake hook waits (during a turn,
    // or where Claude Code runs no hooks).
    let request = wakeful_protocol::WaitEvents {
        session,
        consumer: consumer.to_string(),
        timeout_ms: Some(timeout_ms),
        exclusive: true,
        ..Default::default()
    };
    let conn = connect(paths).await?;
    let taken = take_batch(conn, request, watch_claude(), |text| {
        let mut err = std::io::stderr().lock();
        writeln!(err, "{text}")?;
        err.flush()
    })
    .await?;
    // Exit 2 with the events on stderr wakes the model.
    Ok(if taken.is_some() { 2 } else { 0 })
}

/// Whether the Claude Code process of this hook waits for its asyncRewake
/// hooks (a print run): `$WAKEFUL_CLAUDE_MODE` when it says, else detected
/// from the process; when there is no Claude Code process to be found, no.
fn awaited_by_claude_code() -> bool {
    mode::forced(env(mode::MODE_ENV).as_deref())
        .or_else(|| mode::detect(env("CLAUDE_PID").as_deref()).map(|f| f.mode))
        .is_some_and(mode::Mode::awaits_async_hooks)
}

/// `wakeful hook stop`: a Stop hook.
pub async fn stop(paths: &Paths, explicit: Option<&str>, consumer: &str) -> Result<u8, Error> {
    let input = read_input().await?;
    if !stop_may_block(&input) {
        return Ok(0);
    }
    let session = session_for(paths, explicit, &input)?;
    // The end of the turn: events that did not wake are read now.
    let request = take_now(session, consumer, true);
    take_batch(connect(paths).await?, request, watch_claude(), |text| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", stop_output(text))?;
        out.flush()
    })
    .await?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hook_input() {
        let i = parse_input(
            r#"{"session_id":"abc","hook_event_name":"Stop","stop_hook_active":true,"cwd":"/x"}"#,
        )
        .unwrap();
        assert_eq!(i.session_id.as_deref(), Some("abc"));
        assert!(i.stop_hook_active);
        assert_eq!(i.hook_event_name.as_deref(), Some("Stop"));
        assert_eq!(parse_input("").unwrap(), HookInput::default());
        assert_eq!(parse_input(" \n").unwrap(), HookInput::default());
        let i = parse_input(r#"{"session_id":"","stop_hook_active":"yes"}"#).unwrap();
        assert_eq!(i, HookInput::default());
        assert!(parse_input("not json").is_err());
        assert!(parse_input("[1]").is_err());
    }

    #[test]
    fn stop_hook_active_never_blocks() {
        let active = parse_input(r#"{"session_id":"s","stop_hook_active":true}"#).unwrap();
        assert!(!stop_may_block(&active));
        let idle = parse_input(r#"{"session_id":"s","stop_hook_active":false}"#).unwrap();
        assert!(stop_may_block(&idle));
        assert!(stop_may_block(&HookInput::default()));
    }

    #[test]
    fn session_order() {
        let input = HookInput {
            session_id: Some("stdin".into()),
            ..HookInput::default()
        };
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let rec = || Some("rec".to_string());
        let all = vars(&[("WAKEFUL_SESSION", "w"), ("CLAUDE_CODE_SESSION_ID", "cc")]);
        assert_eq!(
            resolve_session(Some("x"), all, rec, &input, CLAUDE_VAR).as_deref(),
            Some("x")
        );
        assert_eq!(
            resolve_session(None, all, rec, &input, CLAUDE_VAR).as_deref(),
            Some("w")
        );
        let cc = vars(&[("CLAUDE_CODE_SESSION_ID", "cc"), ("WAKEFUL_SESSION", "")]);
        assert_eq!(
            resolve_session(None, cc, rec, &input, CLAUDE_VAR).as_deref(),
            Some("rec")
        );
        assert_eq!(
            resolve_session(None, cc, || None, &input, CLAUDE_VAR).as_deref(),
            Some("stdin")
        );
        assert_eq!(
            resolve_session(None, cc, || None, &HookInput::default(), CLAUDE_VAR).as_deref(),
            Some("cc")
        );
        assert_eq!(
            resolve_session(None, vars(&[]), || None, &HookInput::default(), CLAUDE_VAR),
            None
        );
        assert_eq!(
            agent_session(cc, &input, CLAUDE_VAR).as_deref(),
            Some("stdin")
        );
        assert_eq!(
            agent_session(cc, &HookInput::default(), CLAUDE_VAR).as_deref(),
            Some("cc")
        );
    }

    #[test]
    fn stop_answer_is_a_block_decision() {
        let out = stop_output("[wakeful] 1 event\nline \"q\"");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["decision"], "block");
        assert_eq!(v["reason"], "[wakeful] 1 event\nline \"q\"");
        assert!(!out.contains('\n'));
    }

    #[test]
    fn env_file_line_is_quoted() {
        assert_eq!(
            env_file_line("0b5e-11"),
            "export WAKEFUL_SESSION='0b5e-11'\n"
        );
        assert_eq!(env_file_line("a'b"), "export WAKEFUL_SESSION='a'\\''b'\n");
    }

    #[test]
    fn lock_names_are_safe_and_distinct() {
        let a = lock_name("0b5e-11", "claude");
        assert!(
            a.starts_with("0b5e-11.claude.") && a.ends_with(".lock"),
            "{a}"
        );
        let odd = lock_name("../x y/", "claude");
        assert!(!odd.contains('/') && !odd.contains(' '), "{odd}");
        assert_ne!(lock_name("a_b", "c"), lock_name("a b", "c"));
        assert_ne!(lock_name("a", "b.c"), lock_name("a.b", "c"));
        assert!(lock_name(&"x".repeat(500), "claude").len() < 120);
    }
}
