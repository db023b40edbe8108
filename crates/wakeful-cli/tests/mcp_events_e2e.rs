//! MCP Events webhooks with a real client: the Vercel AI SDK
//! (`@ai-sdk/mcp` 2.0.99) over stdio, its `experimental_events` subscribing
//! with a webhook served by its own `experimental_createMCPEventWebhook` on
//! loopback (`tests/e2e/mcp-events/webhook.mjs`): the types listed with
//! webhook delivery, a monitor's lines verified by the SDK's signature
//! check, `kill -9` of the daemon between two lines with every `eventId`
//! received, and no delivery after unsubscribe.
//!
//! Runs when `WAKEFUL_MCP_EVENTS_E2E_DIR` names the npm prefix holding the
//! pinned `@ai-sdk/mcp` and `zod` (CI sets it, see .ci/run); then any
//! failure fails the test. Without it the test is skipped, except under CI
//! (`CI` set), where that is a failure. Needs node.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(180);

#[test]
fn the_ai_sdk_receives_signed_webhooks_across_kill_9_and_unsubscribes() {
    let Some(npm) = std::env::var_os("WAKEFUL_MCP_EVENTS_E2E_DIR").filter(|v| !v.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "WAKEFUL_MCP_EVENTS_E2E_DIR is not set in CI: .ci/run installs @ai-sdk/mcp and sets it"
        );
        eprintln!("skipped: set WAKEFUL_MCP_EVENTS_E2E_DIR to the npm prefix of @ai-sdk/mcp");
        return;
    };
    let home = common::Home::new();
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/e2e/mcp-events/webhook.mjs");
    let mut child = Command::new("node")
        .arg(&script)
        .arg("--npm")
        .arg(&npm)
        .arg("--wakeful")
        .arg(common::BIN)
        .arg("--home")
        .arg(home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("PASS webhook"),
        "the @ai-sdk/mcp run failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("@ai-sdk/mcp 2.0.99"), "{stdout}");
}
