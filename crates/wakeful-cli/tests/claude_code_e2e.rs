//! The real Claude Code, offline: `tests/e2e/claude-code/run.py` runs the
//! interactive Claude Code (its TUI in tmux) against the project's fake
//! Anthropic API, with the shipped plugin (`integrations/claude-code`) and
//! this build's `wakeful` on PATH, through three scenarios: a monitor's line
//! wakes the idle session, a line printed while a tool call runs reaches the
//! model once, and a wakeful timer set from the model's shell (`wakeful
//! start --in 3s`) wakes the idle session when it fires (see run.py and
//! tests/e2e/claude-code/README.md).
//!
//! Runs when `WAKEFUL_CLAUDE_BIN` names a Claude Code 2.1.332 executable (CI
//! sets it after `npm install @anthropic-ai/claude-code@2.1.332`); then any
//! failure, Claude Code not working included, fails the test. Without the
//! variable it is skipped with a message, except under CI (`CI` set), where
//! that is a failure. Needs python3 (standard library only) and tmux.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(240);

#[test]
fn real_claude_code_is_woken_by_a_monitor_line_and_gets_each_line_once() {
    common::e2e_scenarios(
        "claude-code",
        "WAKEFUL_CLAUDE_BIN",
        "--claude",
        &["idle", "busy", "timer"],
        "2.1.332 (Claude Code): all scenarios passed",
        LIMIT,
    );
}
