//! The real MCP Python SDK (`pip install mcp==2.3.0`) against `wakeful mcp`:
//! `tests/e2e/mcp-python/check.py` reads the tool schema as a client does,
//! starts each source as the schema describes it, and cancels a pending
//! monitor_wait (`notifications/cancelled`), then checks that the next
//! events all come back; first, its stdio transport reads the channel
//! notifications the daemon writes into the server's stdout, between the
//! server's own responses. `long_wait.py` waits 5 minutes in one
//! monitor_wait with a progress token, and `auto.py` is the SDK's dual-era
//! client, which probes with `server/discover` (MCP 2026-07-28) and falls
//! back to `initialize`. `upgrade.py` stays attached while the daemon is
//! upgraded six times (`wakeful daemon upgrade`). Python is
//! `$WAKEFUL_MCP_PYTHON`, else `python3`; without the `mcp` package they are
//! skipped, except under CI.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::Home;

/// Runs `tests/e2e/mcp-python/SCRIPT BIN HOME ARGS…` with the SDK's
/// Python; its stdout, or `None` when the SDK is missing (outside CI).
fn run_script(script: &str, args: &[&str]) -> Option<String> {
    let python = std::env::var("WAKEFUL_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    if !common::have(
        "the MCP Python SDK (pip install mcp==2.3.0)",
        Command::new(&python).args(["-c", "import mcp"]),
    ) {
        return None;
    }
    let home = Home::new();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/e2e/mcp-python")
        .join(script);
    let out = Command::new(&python)
        .arg(&script)
        .arg(common::BIN)
        .arg(home.path())
        .args(args)
        .env_remove("WAKEFUL_SESSION")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    Some(stdout)
}

#[test]
fn the_mcp_python_sdk_uses_every_source_and_cancels_without_losing_events() {
    let Some(stdout) = run_script("check.py", &[]) else {
        return;
    };
    assert!(stdout.trim_end().ends_with(r#"{"ok": true}"#), "{stdout}");
    assert_eq!(stdout.matches("\nok   ").count() + 1, 6, "{stdout}");
}

/// Five minutes of mostly idle waiting: it runs beside the other tests of
/// this binary, not after them.
#[test]
fn a_five_minute_monitor_wait_gets_progress_and_then_its_result() {
    let Some(stdout) = run_script("long_wait.py", &["300"]) else {
        return;
    };
    assert!(stdout.trim_end().ends_with('}'), "{stdout}");
    assert!(stdout.contains(r#"{"ok": true"#), "{stdout}");
    assert_eq!(stdout.matches("ok   ").count(), 3, "{stdout}");
}

/// Runs `auto.py` in a `--protocol` mode and checks the protocol the dual-era
/// client ended on and the number of checks that passed.
fn auto(args: &[&str], protocol: &str, oks: usize) -> Option<String> {
    let stdout = run_script("auto.py", args)?;
    let last = format!(r#"{{"ok": true, "protocol": "{protocol}"}}"#);
    assert!(stdout.trim_end().ends_with(&last), "{stdout}");
    assert_eq!(stdout.matches("ok   ").count(), oks, "{stdout}");
    Some(stdout)
}

#[test]
fn the_mcp_python_sdks_dual_era_client_falls_back_to_initialize() {
    auto(&[], "2025-11-25", 3);
}

#[test]
fn the_mcp_python_sdk_stays_on_2026_07_28_when_wakeful_mcp_is_told_to() {
    auto(&["2026-07-28"], "2026-07-28", 2);
}

#[test]
fn the_mcp_python_sdk_pinned_to_2026_07_28_is_refused_by_the_legacy_mode() {
    if let Some(stdout) = auto(&["2025-11-25"], "2025-11-25", 3) {
        assert!(stdout.contains("gets error -32022"), "{stdout}");
    }
}

#[test]
fn the_mcp_python_sdk_stays_attached_while_the_daemon_is_upgraded() {
    let Some(stdout) = run_script("upgrade.py", &[]) else {
        return;
    };
    assert_eq!(
        stdout.matches("1 monitor went on running").count(),
        6,
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with(r#""ok": true}"#), "{stdout}");
}
