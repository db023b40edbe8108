//! The real Gemini CLI, offline: `tests/e2e/gemini/run.py` runs `gemini -p`
//! against a fake Gemini API with the hooks `wakeful integrate gemini`
//! installs and this build's `wakeful` on PATH, through three scenarios
//! (after-tool, digest, after-agent; see run.py and docs/INTEGRATIONS.md).
//!
//! Runs when `WAKEFUL_GEMINI_BIN` names a Gemini CLI 0.61.0 executable (CI
//! sets it after `npm install @google/gemini-cli@0.61.0`); then any failure,
//! Gemini not working included, fails the test. Without the variable it is
//! skipped with a message, except under CI (`CI` set), where that is a
//! failure. Needs python3 (standard library only) and Node.js.

mod common;

use std::ffi::OsStr;
use std::time::Duration;

use common::E2e;

const LIMIT: Duration = Duration::from_secs(240);

#[test]
fn real_gemini_gets_events_after_tools_at_the_end_of_turns_and_the_digest_at_start() {
    let Some(gemini) = std::env::var_os("WAKEFUL_GEMINI_BIN").filter(|v| !v.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "WAKEFUL_GEMINI_BIN is not set in CI: .ci/run installs Gemini CLI and sets it"
        );
        eprintln!("skipped: set WAKEFUL_GEMINI_BIN to a Gemini CLI 0.61.0 executable to run it");
        return;
    };
    let E2e {
        status,
        stdout,
        stderr,
        out,
    } = common::run_e2e("gemini", &[OsStr::new("--gemini"), &gemini], LIMIT);
    assert!(
        status.success(),
        "the Gemini end-to-end run failed ({status}); logs in {}\n{stdout}\n{stderr}",
        out.display()
    );
    for scenario in ["after-tool", "digest", "after-agent"] {
        assert!(
            stdout.contains(&format!("PASS {scenario} ")),
            "{scenario} did not pass:\n{stdout}"
        );
    }
    assert!(stdout.contains("gemini 0.61.0:"), "{stdout}");
    let _ = std::fs::remove_dir_all(&out);
}
