//! The real Codex, offline: `tests/e2e/codex/run.py` drives Codex's
//! app-server (and `codex exec`, `codex queue`) against a fake Responses API
//! with this build's `wakeful` as the wake route, through six scenarios
//! (idle, busy, unloaded, exec, fallback, hooks: see run.py and
//! tests/e2e/codex/README.md).
//!
//! Runs when `WAKEFUL_CODEX_BIN` names a Codex 0.171 executable (CI sets it
//! after `npm install @openai/codex@0.171.0`); then any failure, Codex not
//! working included, fails the test. Without the variable it is skipped
//! with a message, except under CI (`CI` set), where that is a failure.
//! Needs python3 (standard library only).
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(600);

#[test]
fn real_codex_wakes_idle_busy_and_unloaded_threads_and_refuses_exec_ones() {
    common::e2e_scenarios(
        "codex",
        "WAKEFUL_CODEX_BIN",
        "--codex",
        &["idle", "busy", "unloaded", "exec", "fallback", "hooks"],
        "codex-cli 0.171.0",
        LIMIT,
    );
}
