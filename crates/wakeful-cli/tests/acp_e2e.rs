//! `wakeful acp-proxy` with real ACP parts, offline: `tests/e2e/acp/run.py`
//! runs the ACP TypeScript SDK as the editor (`tests/e2e/acp/client.mjs`)
//! against the proxy in front of `codex-acp` (with the fake Responses API)
//! and `claude-agent-acp` (with the real Claude Code and the fake Anthropic
//! Messages API); see docs/agents/acp.md.
//!
//! Runs when `WAKEFUL_ACP_E2E_DIR` names the npm prefix holding the pinned
//! packages (CI sets it, see .ci/run) and, for claude-agent-acp, when
//! `WAKEFUL_CLAUDE_BIN` names Claude Code; then any failure fails the test.
//! Without the variable it is skipped, except under CI (`CI` set), where
//! that is a failure. Prints the wake latency of each agent (a monitor's
//! line → the agent's turn request at the fake model). Needs python3 and node.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsStr;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(600);

#[test]
fn an_acp_editor_sees_its_idle_agent_woken_by_a_monitor_once_and_the_proxy_ends_clean() {
    let Some(npm) = std::env::var_os("WAKEFUL_ACP_E2E_DIR").filter(|v| !v.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "WAKEFUL_ACP_E2E_DIR is not set in CI: .ci/run installs the ACP packages and sets it"
        );
        eprintln!("skipped: set WAKEFUL_ACP_E2E_DIR to the npm prefix of the ACP packages");
        return;
    };
    let claude = std::env::var_os("WAKEFUL_CLAUDE_BIN").filter(|v| !v.is_empty());
    if claude.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "WAKEFUL_CLAUDE_BIN is not set in CI"
        );
    }
    let mut args: Vec<&OsStr> = vec![OsStr::new("--npm"), &npm];
    if let Some(c) = &claude {
        args.push(OsStr::new("--claude"));
        args.push(c);
    }
    let common::E2e {
        status,
        stdout,
        stderr,
        out,
    } = common::run_e2e("acp", &args, LIMIT);
    println!("{stdout}");
    assert!(
        status.success(),
        "the ACP end-to-end run failed ({status}); logs in {}\n{stdout}\n{stderr}",
        out.display()
    );
    assert!(stdout.contains("PASS codex-acp "), "{stdout}");
    if claude.is_some() {
        assert!(stdout.contains("PASS claude-agent-acp "), "{stdout}");
    }
    assert!(stdout.contains("codex-acp 0.16.0"), "{stdout}");
    let _ = std::fs::remove_dir_all(&out);
}
