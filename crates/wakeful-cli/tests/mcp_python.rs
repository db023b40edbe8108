//! The real MCP Python SDK (`pip install mcp==2.3.0`) against `wakeful mcp`:
//! `tests/e2e/mcp-python/check.py` reads the tool schema as a client does,
//! starts each source as the schema describes it, and cancels a pending
//! monitor_wait (`notifications/cancelled`), then checks that the next
//! events all come back; first, its stdio transport reads the channel
//! notifications the daemon writes into the server's stdout, between the
//! server's own responses. Python is `$WAKEFUL_MCP_PYTHON`, else `python3`;
//! without the `mcp` package it is skipped, except under CI.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::Home;

#[test]
fn the_mcp_python_sdk_uses_every_source_and_cancels_without_losing_events() {
    let python = std::env::var("WAKEFUL_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    if !common::have(
        "the MCP Python SDK (pip install mcp==2.3.0)",
        Command::new(&python).args(["-c", "import mcp"]),
    ) {
        return;
    }
    let home = Home::new();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e/mcp-python/check.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(common::BIN)
        .arg(home.path())
        .env_remove("WAKEFUL_SESSION")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.trim_end().ends_with(r#"{"ok": true}"#), "{stdout}");
    assert_eq!(stdout.matches("\nok   ").count() + 1, 6, "{stdout}");
}
