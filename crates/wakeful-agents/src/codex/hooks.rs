//! `wakeful hook codex-…`: the Codex hooks that `wakeful integrate codex
//! --hooks` installs in Codex's `config.toml` ([`super::config`]).
//!
//! Codex (0.171, feature `hooks`, on by default) runs a command hook with its
//! input as JSON on stdin — `session_id` (the thread id, the same id Codex
//! gives its shell commands as `CODEX_THREAD_ID`), `turn_id`,
//! `hook_event_name`, `cwd`, and for Stop `stop_hook_active` — and reads one
//! JSON object from its stdout (exit 0). Both hooks read and move the
//! cursor of one consumer, [`CONSUMER`] (`codex`), of the session:
//!
//! - `codex-session-start` (SessionStart: startup, resume, `/clear`): the
//!   session's resume digest (which monitors run, which ended unseen) as
//!   `hookSpecificOutput.additionalContext`, which Codex adds to the
//!   thread's context.
//! - `codex-stop` (Stop, the end of every turn): the session's
//!   unacknowledged events that wake (see `--wake-on`), with the quieter
//!   ones before them, as `{"decision":"block","reason":…}` (a monitor's
//!   `started` alone does not keep a turn going). Codex then
//!   does not end the turn: the reason goes to the model as a continuation
//!   prompt of the same turn, and Stop fires again at its end with
//!   `stop_hook_active: true` — Codex's loop guard — when this hook never
//!   blocks. The batch is acknowledged only after its JSON was written, and
//!   never when Codex (the hook's parent) is gone. Never waits.
//!
//! **Beside the `codex` wake route.** A session started inside Codex gets
//! the `codex` route (consumer `wake`), which delivers through Codex's
//! app-server: a new turn of an idle thread, the next turn of a busy one.
//! So that no event reaches the model twice, the Stop hook leaves the route
//! what it has taken: events up to the route's cursor (accepted) and those
//! of the wake it is delivering, retrying or holds in Codex's queue are
//! acknowledged on `codex` without being shown ([`covered_by_route`]). What
//! is left is what the route could not deliver — above all in a thread that
//! a `codex exec` run (or another process) holds, which the route refuses —
//! or what came after its last wake began; the Stop hook hands that to the
//! model before the turn ends.
//!
//! A failure exits 1, which Codex shows as a failed hook and otherwise
//! ignores (exit 2 would block the turn with stderr as the prompt).
//! Session order: `--session`, `$WAKEFUL_SESSION`, the input's
//! `session_id`, `$CODEX_THREAD_ID`.

use std::io::Write;

use serde_json::json;
use wakeful_client::{connect_existing, ClientError, Paths};
use wakeful_core::present;
use wakeful_core::session::CODEX_THREAD_ID;
use wakeful_protocol::{ErrorKind, WakeDelivery, WakeStatus};

use crate::hook::{self, HookInput, MAX_EVENT_BYTES, MAX_FRAMED_BYTES};
use crate::Error;

/// The consumer the Codex hooks share.
pub const CONSUMER: &str = wakeful_protocol::consumer::CODEX;

// ------------------------------------------------------------ pure parts

/// The Stop hook's answer: the turn goes on with `reason` as its prompt.
pub fn stop_output(reason: &str) -> String {
    json!({"decision": "block", "reason": reason}).to_string()
}

/// The SessionStart hook's answer: `text` as context for the model.
pub fn session_start_output(text: &str) -> String {
    json!({
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}
    })
    .to_string()
}

/// The `<to>` of a wake id `wake-<from>-<to>`.
fn wake_id_end(wake_id: &str) -> Option<u64> {
    wake_id
        .strip_prefix("wake-")?
        .rsplit('-')
        .next()?
        .parse()
        .ok()
}

/// The last seq the session's wake route has taken on: everything up to
/// its cursor (accepted by the agent) and, while a wake is delivering,
/// retrying or queued in the agent, that wake's events too. 0 without a
/// route. An undelivered wake is not counted: the route gave it up.
pub fn covered_by_route(status: Option<&WakeStatus>) -> u64 {
    let Some(status) = status else {
        return 0;
    };
    let in_flight = match &status.delivery {
        WakeDelivery::Delivering { wake_id }
        | WakeDelivery::Retrying { wake_id, .. }
        | WakeDelivery::Queued { wake_id, .. } => wake_id_end(wake_id),
        _ => None,
    };
    status.acked_seq.max(in_flight.unwrap_or(0))
}

/// How many of a batch's first events (their seqs, in order) the route
/// covers: those are acknowledged without being shown.
pub fn covered_prefix(seqs: impl IntoIterator<Item = u64>, covered: u64) -> usize {
    seqs.into_iter().take_while(|s| *s <= covered).count()
}

// ------------------------------------------------------------ IO

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// The session for a hook with `input`.
fn session_for(explicit: Option<&str>, input: &HookInput) -> Result<String, Error> {
    hook::resolve_session(explicit, env, || None, input, CODEX_THREAD_ID).ok_or_else(|| {
        Error::usage(
            "no session: run this from a Codex hook (session_id on stdin, or $CODEX_THREAD_ID), or pass --session",
        )
    })
}

fn print_json(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

/// `wakeful hook codex-session-start`.
pub async fn session_start(paths: &Paths, explicit: Option<&str>) -> Result<u8, Error> {
    let input = hook::read_input().await?;
    let session = session_for(explicit, &input)?;
    // Without a daemon, or with nothing to say, there is no digest.
    if let Some(text) = hook::digest_text(paths, &session).await {
        print_json(&session_start_output(&text))?;
    }
    Ok(0)
}

/// `wakeful hook codex-stop`.
pub async fn stop(paths: &Paths, explicit: Option<&str>, consumer: &str) -> Result<u8, Error> {
    let input = hook::read_input().await?;
    if !hook::stop_may_block(&input) {
        // Codex's loop guard: this turn already goes on because of a Stop
        // hook.
        return Ok(0);
    }
    let session = session_for(explicit, &input)?;
    // A hook at the end of every turn does not start a daemon: with none
    // running there is nothing to hand over.
    let Ok(mut conn) = connect_existing(paths).await else {
        return Ok(0);
    };
    let route: Option<WakeStatus> = conn
        .call(wakeful_protocol::ShowWake {
            session: session.clone(),
        })
        .await?;
    let covered = covered_by_route(route.as_ref());
    let codex = hook::AgentProcess::parent();
    let mut waiter = conn
        .waiter(wakeful_protocol::WaitEvents {
            describe: true,
            // What wakes, with the quieter events before it.
            ..hook::take_now(session, consumer, false)
        })
        .await?;
    let mut batch = match waiter.wait().await {
        Ok(Some(batch)) => batch,
        Err(ClientError::Refused { kind, message })
            if !matches!(kind, ErrorKind::Timeout | ErrorKind::Superseded) =>
        {
            return Err(Error::failed(message))
        }
        _ => return Ok(0),
    };
    let skip = covered_prefix(batch.events.iter().map(|(e, _)| e.seq), covered);
    let (text, n) = present::batch(
        &batch.events[skip..],
        MAX_FRAMED_BYTES,
        MAX_EVENT_BYTES,
        None,
    );
    if codex.is_gone() {
        return Ok(0);
    }
    if n > 0 {
        print_json(&stop_output(&text))?;
        if codex.is_gone() {
            // Written after Codex left: nobody read it.
            return Ok(0);
        }
    }
    if skip + n == 0 {
        return Ok(0);
    }
    batch.keep(skip + n);
    waiter.ack_last(batch).await?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wakeful_protocol::{RouteSource, WakeAdapter};

    fn status(delivery: WakeDelivery, acked_seq: u64) -> WakeStatus {
        WakeStatus {
            session: "t".into(),
            route: WakeAdapter::Codex {
                thread: Some("t".into()),
                binary: None,
                codex_home: None,
            },
            source: RouteSource::Auto,
            delivery,
            acked_seq,
            wakes_delivered: 0,
            last_error: None,
            recent: Vec::new(),
        }
    }

    #[test]
    fn outputs_are_codex_hook_json() {
        let v: serde_json::Value =
            serde_json::from_str(&stop_output("[wakeful] 1\n\"x\"")).unwrap();
        assert_eq!(
            v,
            json!({"decision": "block", "reason": "[wakeful] 1\n\"x\""})
        );
        let v: serde_json::Value = serde_json::from_str(&session_start_output("d")).unwrap();
        assert_eq!(
            v,
            json!({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "d"}})
        );
        assert!(!stop_output("a\nb").contains('\n'));
    }

    #[test]
    fn the_route_covers_its_cursor_and_the_wake_in_flight() {
        assert_eq!(covered_by_route(None), 0);
        assert_eq!(covered_by_route(Some(&status(WakeDelivery::Idle, 7))), 7);
        let queued = WakeDelivery::Queued {
            wake_id: "wake-8-12".into(),
            checks: 1,
            next_check_in_ms: 1000,
            detail: String::new(),
        };
        assert_eq!(covered_by_route(Some(&status(queued, 7))), 12);
        let delivering = WakeDelivery::Delivering {
            wake_id: "wake-8-9".into(),
        };
        assert_eq!(covered_by_route(Some(&status(delivering, 7))), 9);
        let retrying = WakeDelivery::Retrying {
            wake_id: "wake-8-10".into(),
            attempts: 2,
            next_attempt_in_ms: 2000,
        };
        assert_eq!(covered_by_route(Some(&status(retrying, 7))), 10);
        // Given up (a thread `codex exec` holds): the hook delivers it.
        let undelivered = WakeDelivery::Undelivered {
            wake_id: "wake-8-10".into(),
            reason: "held".into(),
            events_from: 8,
            events_to: 10,
        };
        assert_eq!(covered_by_route(Some(&status(undelivered, 7))), 7);
        // An id that does not parse counts for nothing beyond the cursor.
        let odd = WakeDelivery::Delivering {
            wake_id: "w".into(),
        };
        assert_eq!(covered_by_route(Some(&status(odd, 3))), 3);
    }

    #[test]
    fn covered_events_are_the_prefix_up_to_the_mark() {
        assert_eq!(covered_prefix([3, 4, 5], 0), 0);
        assert_eq!(covered_prefix([3, 4, 5], 4), 2);
        assert_eq!(covered_prefix([3, 4, 5], 9), 3);
        assert_eq!(covered_prefix([], 9), 0);
    }

    #[test]
    fn session_order_ends_with_the_thread() {
        let t = |k: &str| (k == "CODEX_THREAD_ID").then(|| "thread".to_string());
        let input = HookInput {
            session_id: Some("stdin".into()),
            ..HookInput::default()
        };
        let resolve =
            |input: &HookInput| hook::resolve_session(None, t, || None, input, CODEX_THREAD_ID);
        assert_eq!(resolve(&input).as_deref(), Some("stdin"));
        assert_eq!(resolve(&HookInput::default()).as_deref(), Some("thread"));
        let w = |k: &str| (k == "WAKEFUL_SESSION").then(|| "w".to_string());
        assert_eq!(
            hook::resolve_session(None, w, || None, &input, CODEX_THREAD_ID).as_deref(),
            Some("w")
        );
    }
}
