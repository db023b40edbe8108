//! The real Claude Code 2.1.332 with `wakeful mcp` alone (no plugin, no
//! channel flag), offline against the project's fake Anthropic API:
//! `tests/e2e/mcp-tasks/claude_wakeful.py` has the model start a monitor on
//! a log file and call `monitor_wait`, then appends a line once the session
//! is idle. On MCP 2026-07-28 (what `--protocol auto` gives Claude Code)
//! the call is a task that Claude Code backgrounds, and the line starts a
//! new turn; with `CLAUDE_CODE_DISABLE_MCP_TASKS=1` the call blocks the turn
//! and returns the line (no hang); a Claude Code closed while the task
//! waits and started again with `--continue` (a new `wakeful mcp`) still
//! gets the line, because the daemon keeps the task.
//!
//! Runs when `WAKEFUL_CLAUDE_BIN` names Claude Code 2.1.332 (CI sets it);
//! without it the test is skipped with a message, except under CI. Needs
//! python3 and tmux.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsStr;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(180);

/// Runs the harness with `args`; its findings.
fn run(claude: &OsStr, args: &[&str]) -> serde_json::Value {
    let mut all: Vec<&OsStr> = vec![OsStr::new("--claude"), claude];
    all.extend(args.iter().map(OsStr::new));
    let e2e = common::run_e2e_script("mcp-tasks", "claude_wakeful.py", &all, LIMIT);
    let findings = std::fs::read_to_string(e2e.out.join("findings.json")).unwrap_or_else(|e| {
        panic!(
            "no findings ({e}) in {}\n{}\n{}",
            e2e.out.display(),
            e2e.stdout,
            e2e.stderr
        )
    });
    serde_json::from_str(&findings).unwrap()
}

#[test]
fn real_claude_code_backgrounds_monitor_wait_as_a_task_and_is_woken_by_the_line() {
    let Some(claude) = std::env::var_os("WAKEFUL_CLAUDE_BIN") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "WAKEFUL_CLAUDE_BIN is missing in CI: .ci/run sets it"
        );
        eprintln!("skipped: set WAKEFUL_CLAUDE_BIN to a Claude Code 2.1.332 executable");
        return;
    };
    let tasks = run(&claude, &[]);
    assert_eq!(tasks["backgrounded_as_task"], true, "{tasks:#}");
    assert_eq!(tasks["line_reached_model"], true, "{tasks:#}");
    assert!(
        tasks["debug"].to_string().contains("2026-07-28"),
        "{tasks:#}"
    );

    let blocking = run(&claude, &["--env", "CLAUDE_CODE_DISABLE_MCP_TASKS=1"]);
    assert_eq!(blocking["backgrounded_as_task"], false, "{blocking:#}");
    assert_eq!(blocking["line_reached_model"], true, "{blocking:#}");

    let resumed = run(&claude, &["--resume"]);
    assert_eq!(resumed["backgrounded_as_task"], true, "{resumed:#}");
    assert_eq!(resumed["line_reached_model"], true, "{resumed:#}");
}
