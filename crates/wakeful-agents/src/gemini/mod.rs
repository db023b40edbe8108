//! `wakeful hook gemini-…`: the Gemini CLI hooks that `wakeful integrate
//! gemini` installs in Gemini's `settings.json` ([`settings`]).
//!
//! Gemini CLI runs a hook as a shell command, with the hook input as JSON on
//! stdin (`session_id`, `hook_event_name`, `cwd`, … and per event its own
//! fields), and reads one JSON object from its stdout (exit 0). All three
//! hooks read and move the cursor of one consumer, [`CONSUMER`] (`gemini`),
//! of the session, and acknowledge a batch only after its JSON was written,
//! so each event reaches the model once, whichever hook takes it:
//!
//! - `gemini-session-start` (SessionStart: startup, resume, `/clear`):
//!   records the session of the Gemini process and prints the resume digest
//!   as `hookSpecificOutput.additionalContext` (Gemini adds it to the
//!   history, or prepends it to the prompt of `gemini -p`).
//! - `gemini-after-tool` (AfterTool, every tool): events that wake (see
//!   `--wake-on`) and arrived since the last delivery, with the quieter ones
//!   before them, as `hookSpecificOutput.additionalContext`, which Gemini
//!   appends to the tool's result. Never waits.
//! - `gemini-after-agent` (AfterAgent, the end of a turn): every
//!   unacknowledged event as `{"decision":"deny","reason":…}`, which Gemini
//!   sends back to the model as a new prompt; never when the input's
//!   `stop_hook_active` is true (that turn already is such a continuation).
//!   Never waits.
//!
//! Nothing is printed when nothing is pending. A failure exits 1, which
//! Gemini shows as a warning and otherwise ignores (exit 2 would block the
//! tool result or force a retry with stderr as the prompt).
//!
//! What Gemini CLI does with a hook (read from its hooks reference and
//! `packages/core/src/hooks/hookRunner.ts`, `types.ts`, `core/client.ts`,
//! `coreToolHookTriggers.ts`; checked with 0.61.0): it runs `bash -c
//! <command>` in the session's cwd with its own environment plus
//! `GEMINI_SESSION_ID`, `GEMINI_PROJECT_DIR` and `GEMINI_CWD` (under GitHub
//! Actions only a few variables such as `PATH` and `HOME` pass); on exit 0
//! it parses stdout as JSON, or stderr when stdout is empty; it escapes `<`
//! and `>` in `additionalContext` but sends a `reason` as it is; after an
//! AfterAgent `deny` it runs the continuation in the same request loop and
//! fires AfterAgent again with `stop_hook_active: true`.
//!
//! **The session.** Gemini gives hooks `session_id` (and
//! `$GEMINI_SESSION_ID`) but gives its shell tool's commands neither, only
//! `GEMINI_CLI=1`. So the first hook of a Gemini process records the session
//! it sees under `<state dir>/gemini/processes/<pid>` (the nearest ancestor
//! that is Gemini CLI: the same process runs hooks and shell commands), and
//! a wakeful command run by Gemini's shell tool (`GEMINI_CLI=1`, no
//! `--session` or session variable) reads it back ([`shell_session`]):
//! `wakeful start` in a tool call lands in the session the hooks deliver
//! from. Later hooks of the process keep the recorded session (after
//! `/clear` too, like the Claude Code plugin). Order for hooks: `--session`,
//! `$WAKEFUL_SESSION`, the recorded session of the Gemini process, the
//! input's `session_id`, `$GEMINI_SESSION_ID`.

pub mod settings;

use std::io::Write;

use serde_json::json;
use wakeful_client::{connect_existing, Paths};

use crate::agent_process::{nearest_ancestor, AgentProgram};
use crate::hook::{self, HookInput};
use crate::{process_record, Error};
use wakeful_core::session::GEMINI_SESSION_ID;

/// The consumer the Gemini hooks share.
pub const CONSUMER: &str = wakeful_protocol::consumer::GEMINI;
/// The folder of Gemini process records under the state directory.
const AGENT_DIR: &str = "gemini";

// ------------------------------------------------------------ pure parts

/// The AfterAgent hook's answer: the turn's answer is refused and `reason`
/// becomes the next prompt.
pub fn after_agent_output(reason: &str) -> String {
    json!({"decision": "deny", "reason": reason}).to_string()
}

/// The AfterTool hook's answer: `text` appended to the tool's result.
pub fn after_tool_output(text: &str) -> String {
    json!({
        "hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": text}
    })
    .to_string()
}

/// The SessionStart hook's answer: `text` as context for the model.
pub fn session_start_output(text: &str) -> String {
    json!({
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}
    })
    .to_string()
}

/// Gemini CLI from npm: `…/.bin/gemini` (the bundle's `gemini.js`), run
/// by Node.js, which Gemini relaunches as `node --max-old-space-size=N
/// …/gemini …`; the relaunched child runs hooks and shell commands.
pub const GEMINI: AgentProgram = AgentProgram {
    names: &["gemini", "gemini.js"],
    package: "/@google/gemini-cli/",
};

// ------------------------------------------------------------ IO

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// The nearest ancestor of this process that is Gemini CLI.
fn gemini_ancestor() -> Option<u32> {
    nearest_ancestor(&GEMINI).map(|(pid, _)| pid)
}

/// The session a wakeful command run by Gemini CLI's shell tool belongs
/// to: the one the Gemini process's hooks recorded. `None` outside Gemini
/// (`GEMINI_CLI` is not `1`), or when no hook recorded one.
pub fn shell_session(paths: &Paths) -> Option<String> {
    if env("GEMINI_CLI").as_deref() != Some("1") {
        return None;
    }
    process_record::recorded(paths, AGENT_DIR, gemini_ancestor()?)
}

/// The session for a hook with `input`, recording the Gemini process's
/// session when this is its first hook.
fn session_for(paths: &Paths, explicit: Option<&str>, input: &HookInput) -> Result<String, Error> {
    let recorded = || {
        hook::agent_session(env, input, GEMINI_SESSION_ID).and_then(|current| {
            let pid = gemini_ancestor()?;
            process_record::recorded_or_record(paths, AGENT_DIR, pid, &current, "wakeful hook")
        })
    };
    hook::resolve_session(explicit, env, recorded, input, GEMINI_SESSION_ID).ok_or_else(|| {
        Error::usage("no session: run this from a Gemini CLI hook (session_id on stdin, or $GEMINI_SESSION_ID), or pass --session",
        )
    })
}

fn print_json(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

/// `wakeful hook gemini-session-start`.
pub async fn session_start(paths: &Paths, explicit: Option<&str>) -> Result<u8, Error> {
    let input = hook::read_input().await?;
    let session = session_for(paths, explicit, &input)?;
    // Without a daemon, or with nothing to say, there is no digest.
    if let Some(text) = hook::digest_text(paths, &session).await {
        print_json(&session_start_output(&text))?;
    }
    Ok(0)
}

/// Takes one batch of `consumer` without waiting and prints it with
/// `render`; `all`: every unacknowledged event, not only up to the last one
/// that wakes.
async fn drain(
    paths: &Paths,
    session: String,
    consumer: &str,
    all: bool,
    render: fn(&str) -> String,
) -> Result<u8, Error> {
    let request = hook::take_now(session, consumer, all);
    // A hook that runs after every tool call does not start a daemon: with
    // none running, nothing is delivered now (what is stored waits for the
    // next hook after any wakeful command started it).
    let Ok(conn) = connect_existing(paths).await else {
        return Ok(0);
    };
    hook::take_batch(conn, request, hook::AgentProcess::parent(), |text| {
        print_json(&render(text))
    })
    .await?;
    Ok(0)
}

/// `wakeful hook gemini-after-tool`.
pub async fn after_tool(
    paths: &Paths,
    explicit: Option<&str>,
    consumer: &str,
) -> Result<u8, Error> {
    let input = hook::read_input().await?;
    let session = session_for(paths, explicit, &input)?;
    // Mid-turn: what wakes, with the quieter events before it.
    drain(paths, session, consumer, false, after_tool_output).await
}

/// `wakeful hook gemini-after-agent`.
pub async fn after_agent(
    paths: &Paths,
    explicit: Option<&str>,
    consumer: &str,
) -> Result<u8, Error> {
    let input = hook::read_input().await?;
    if !hook::stop_may_block(&input) {
        return Ok(0);
    }
    let session = session_for(paths, explicit, &input)?;
    // The end of the turn: events that did not wake are read now.
    drain(paths, session, consumer, true, after_agent_output).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_process::is_agent;

    #[test]
    fn outputs_are_gemini_hook_json() {
        let v: serde_json::Value =
            serde_json::from_str(&after_agent_output("[wakeful] 1 event\nx \"q\"")).unwrap();
        assert_eq!(
            v,
            json!({"decision": "deny", "reason": "[wakeful] 1 event\nx \"q\""})
        );
        let v: serde_json::Value = serde_json::from_str(&after_tool_output("t")).unwrap();
        assert_eq!(
            v,
            json!({"hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": "t"}})
        );
        let v: serde_json::Value = serde_json::from_str(&session_start_output("d")).unwrap();
        assert_eq!(
            v["hookSpecificOutput"],
            json!({"hookEventName": "SessionStart", "additionalContext": "d"})
        );
        for out in [
            after_agent_output("a\nb"),
            after_tool_output("a\nb"),
            session_start_output("a\nb"),
        ] {
            assert!(!out.contains('\n'), "{out}");
        }
    }

    #[test]
    fn session_order_ends_with_gemini_session_id() {
        let g = |k: &str| (k == "GEMINI_SESSION_ID").then(|| "g".to_string());
        let input = HookInput {
            session_id: Some("stdin".into()),
            ..HookInput::default()
        };
        let resolve = |input: &HookInput, recorded: Option<&str>| {
            let recorded = || recorded.map(String::from);
            hook::resolve_session(None, g, recorded, input, GEMINI_SESSION_ID)
        };
        assert_eq!(resolve(&input, Some("rec")).as_deref(), Some("rec"));
        assert_eq!(resolve(&input, None).as_deref(), Some("stdin"));
        assert_eq!(resolve(&HookInput::default(), None).as_deref(), Some("g"));
    }

    #[test]
    fn which_processes_are_gemini() {
        // As seen with Gemini CLI 0.61.0 from npm: the launcher and the
        // relaunched child that runs hooks and shell commands.
        let child = [
            "/usr/bin/node",
            "--max-old-space-size=12052",
            "/tmp/gem/node_modules/.bin/gemini",
            "--yolo",
            "-p",
            "hi",
        ];
        assert!(is_agent(&GEMINI, Some("/usr/bin/node"), &child));
        assert!(is_agent(
            &GEMINI,
            Some("/usr/bin/node"),
            &["node", "/tmp/gem/node_modules/.bin/gemini"]
        ));
        assert!(is_agent(
            &GEMINI,
            Some("/usr/bin/node"),
            &[
                "node",
                "/usr/lib/node_modules/@google/gemini-cli/bundle/gemini.js"
            ]
        ));
        assert!(is_agent(&GEMINI, None, &["/usr/local/bin/gemini"]));
        assert!(!is_agent(
            &GEMINI,
            Some("/usr/bin/node"),
            &["node", "/srv/app.js", "gemini"]
        ));
        assert!(!is_agent(
            &GEMINI,
            Some("/usr/bin/bash"),
            &["bash", "-c", "gemini"]
        ));
        assert!(!is_agent::<&str>(&GEMINI, None, &[]));
    }
}
