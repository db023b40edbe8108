//! The real Gemini CLI, offline: `tests/e2e/gemini/run.py` runs `gemini -p`
//! against a fake Gemini API with the hooks `wakeful integrate gemini`
//! installs and this build's `wakeful` on PATH, through three scenarios
//! (after-tool, digest, after-agent; see run.py and tests/e2e/gemini/README.md).
//!
//! Runs when `WAKEFUL_GEMINI_BIN` names a Gemini CLI 0.61.0 executable (CI
//! sets it after `npm install @google/gemini-cli@0.61.0`); then any failure,
//! Gemini not working included, fails the test. Without the variable it is
//! skipped with a message, except under CI (`CI` set), where that is a
//! failure. Needs python3 (standard library only) and Node.js.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(240);

#[test]
fn real_gemini_gets_events_after_tools_at_the_end_of_turns_and_the_digest_at_start() {
    common::e2e_scenarios(
        "gemini",
        "WAKEFUL_GEMINI_BIN",
        "--gemini",
        &["after-tool", "digest", "after-agent"],
        "gemini 0.61.0:",
        LIMIT,
    );
}
