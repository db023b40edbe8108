//! MCP 2026-07-28 tasks with a real tasks client: FastMCP
//! (`pip install "fastmcp[tasks]==4.1.4"`) runs
//! `tests/e2e/mcp-tasks/fastmcp_check.py` against `wakeful mcp`: the
//! dual-era client stays on 2026-07-28, `monitor_wait` runs as a task kept
//! by the daemon (status, wait, result, cancel; fetched by a second `wakeful
//! mcp` after the first one exited), and a task's events are acknowledged
//! only once its result was fetched. Python is `$WAKEFUL_MCP_PYTHON`, else
//! `python3`; without FastMCP the test is skipped, except under CI.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::Home;

#[test]
fn fastmcp_runs_monitor_wait_as_a_task_kept_by_the_daemon() {
    let python = std::env::var("WAKEFUL_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    if !common::have(
        "FastMCP with tasks (pip install \"fastmcp[tasks]==4.1.4\")",
        Command::new(&python).args(["-c", "import fastmcp_tasks"]),
    ) {
        return;
    }
    let home = Home::new();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/e2e/mcp-tasks/fastmcp_check.py");
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
    assert_eq!(stdout.matches("ok   ").count(), 6, "{stdout}\n{stderr}");
}
