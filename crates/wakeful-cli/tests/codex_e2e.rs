//! The real Codex, offline: `tests/e2e/codex/run.py` drives Codex's
//! app-server (and `codex exec`, `codex queue`) against a fake Responses API
//! with this build's `wakeful` as the wake route, through five scenarios
//! (idle, busy, unloaded, exec, fallback; see run.py and
//! docs/INTEGRATIONS.md).
//!
//! Runs when `WAKEFUL_CODEX_BIN` names a Codex 0.171 executable (CI sets it
//! after `npm install @openai/codex@0.171.0`); then any failure, Codex not
//! working included, fails the test. Without the variable it is skipped
//! with a message. Needs python3 (standard library only).

mod common;

use std::ffi::OsStr;
use std::time::Duration;

use common::E2e;

const LIMIT: Duration = Duration::from_secs(600);

#[test]
fn real_codex_wakes_idle_busy_and_unloaded_threads_and_refuses_exec_ones() {
    let Some(codex) = std::env::var_os("WAKEFUL_CODEX_BIN").filter(|v| !v.is_empty()) else {
        eprintln!("skipped: set WAKEFUL_CODEX_BIN to a Codex 0.171 executable to run it");
        return;
    };
    let E2e {
        status,
        stdout,
        stderr,
        out,
    } = common::run_e2e("codex", &[OsStr::new("--codex"), &codex], LIMIT);
    assert!(
        status.success(),
        "the Codex end-to-end run failed ({status}); logs in {}\n{stdout}\n{stderr}",
        out.display()
    );
    for scenario in ["idle", "busy", "unloaded", "exec", "fallback"] {
        assert!(
            stdout.contains(&format!("PASS {scenario} ")),
            "{scenario} did not pass:\n{stdout}"
        );
    }
    assert!(stdout.contains("codex-cli 0.171.0"), "{stdout}");
    let _ = std::fs::remove_dir_all(&out);
}
