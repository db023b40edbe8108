//! MCP 2026-07-28 over raw stdio, in each `--protocol` mode (see
//! `wakeful_mcp::era`). A probe that the mode sends to the legacy handshake
//! gets a JSON-RPC error that is not a modern one (`-32601`, naming the
//! revisions to use with `initialize`), so a dual-era client falls back;
//! after the probe, `initialize` opens the session with channel push; a
//! malformed probe, or (in the legacy mode) a stateless request naming
//! 2026-07-28, gets a JSON-RPC error, never a hang; a client that only
//! probes and leaves ends `wakeful mcp` cleanly. A probe that stays modern
//! gets a `DiscoverResult` with the tasks extension, and the tools are
//! served per request, with `_meta` required; `monitor_wait` is a task when
//! the request declares the extension. Which era `auto` gives Claude Code
//! depends on its command line (channels on or not), and `[mcp] protocol`
//! in config.toml chooses the mode when the flag does not.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/mcp_stdio.rs"]
mod mcp_stdio;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Home;
use mcp_stdio::Raw;
use serde_json::{json, Value};

/// One deadline for each condition a test waits for.
const DEADLINE: Duration = Duration::from_secs(20);
const MODERN: &str = "2026-07-28";

/// `wakeful mcp ARGS…` in session `session`, its stderr kept for
/// [`Raw::close`].
fn start_with(home: &Home, session: &str, args: &[&str]) -> Raw {
    let mut cmd = home.cmd(&[&["mcp"], args].concat());
    cmd.env("WAKEFUL_SESSION", session).stderr(Stdio::piped());
    Raw::spawn(&mut cmd, DEADLINE)
}

fn start(home: &Home, session: &str) -> Raw {
    start_with(home, session, &[])
}

/// The `_meta` every 2026-07-28 request carries.
fn modern_meta(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

#[test]
fn a_client_that_opens_with_server_discover_is_told_to_fall_back_to_initialize() {
    let home = Home::new();
    let mut mcp = start_with(&home, "modern", &["--protocol", "2025-11-25"]);

    // Without the `_meta` 2026-07-28 requires: an error, and the server goes on.
    let r = mcp.request(1, "server/discover", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("io.modelcontextprotocol/protocolVersion"),
        "{r}"
    );

    // The probe: not a modern error, so a dual-era client falls back.
    for (id, version) in [(2, MODERN), (3, "2099-01-01")] {
        let r = mcp.request(
            id,
            "server/discover",
            json!({"_meta": modern_meta(version)}),
        );
        assert_eq!(r["error"]["code"], -32601, "{r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains("Send initialize"), "{r}");
        assert!(message.contains("2025-11-25"), "{r}");
        assert_eq!(
            r["error"]["data"]["initializeVersions"],
            json!(["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]),
            "{r}"
        );
    }

    // A stateless request on 2026-07-28: UnsupportedProtocolVersion, with
    // the revisions wakeful speaks.
    let r = mcp.request(4, "tools/list", json!({"_meta": modern_meta(MODERN)}));
    assert_eq!(r["error"]["code"], -32022, "{r}");
    assert_eq!(r["error"]["data"]["requested"], MODERN, "{r}");
    assert_eq!(
        r["error"]["data"]["supported"],
        json!(["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]),
        "{r}"
    );
    let r = mcp.request(
        5,
        "tools/call",
        json!({"name": "monitor_wait", "arguments": {"timeout_ms": 0},
               "_meta": modern_meta(MODERN)}),
    );
    assert_eq!(r["error"]["code"], -32022, "{r}");

    // Still open for the legacy handshake.
    let r = mcp.request(
        6,
        "initialize",
        json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        }),
    );
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25", "{r}");
    mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let r = mcp.request(
        7,
        "tools/call",
        json!({"name": "monitor_wait", "arguments": {"timeout_ms": 0}}),
    );
    assert_eq!(r["result"]["structuredContent"]["timed_out"], true, "{r}");
    // Nothing but responses so far.
    assert!(
        mcp.seen.iter().all(|f| f.get("id").is_some()),
        "{:?}",
        mcp.seen
    );
    let (status, stderr) = mcp.close();
    assert!(status.success(), "{status}: {stderr}");
}

#[test]
fn a_dual_era_client_that_probes_and_then_initializes_gets_the_legacy_session() {
    let home = Home::new();
    let mut mcp = start(&home, "probe");
    let r = mcp.request(1, "server/discover", json!({"_meta": modern_meta(MODERN)}));
    assert_eq!(r["error"]["code"], -32601, "{r}");

    // What Claude Code sends: initialize, declaring the channel.
    let r = mcp.request(
        2,
        "initialize",
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"experimental": {"claude/channel": {}}},
            "clientInfo": {"name": "raw", "version": "0"},
        }),
    );
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18", "{r}");
    assert!(
        r["result"]["capabilities"]["experimental"]["claude/channel"].is_object(),
        "{r}"
    );
    // As before 2026-07-28 was served, but for MCP Events (served on both
    // eras, with the top-level `events` the AI SDK looks for): no tasks
    // extension on the legacy handshake.
    assert_eq!(
        r["result"]["capabilities"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["events", "experimental", "extensions", "tools"],
        "{r}"
    );
    assert_eq!(
        r["result"]["capabilities"]["extensions"],
        json!({"io.modelcontextprotocol/events": {}}),
        "{r}"
    );
    mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let r = mcp.request(
        3,
        "tools/call",
        json!({"name": "monitor_start",
               "arguments": {"command": "echo raw-legacy", "description": "raw"}}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    // Channel push: the monitor's events come as notifications (some
    // perhaps before the response).
    let kind = |f: &Value| {
        (f["method"] == "notifications/claude/channel")
            .then(|| f["params"]["meta"]["kind"].as_str().unwrap().to_string())
    };
    let mut kinds: Vec<String> = mcp.seen.iter().filter_map(kind).collect();
    while !kinds.contains(&"stopped".to_string()) {
        let frame = mcp.next_where("channel notification `stopped`", |f| kind(f).is_some());
        kinds.extend(kind(&frame));
    }
    assert_eq!(kinds, ["started", "lines", "stopped"]);
    let (status, stderr) = mcp.close();
    assert!(status.success(), "{status}: {stderr}");
}

#[test]
fn a_client_that_only_probes_and_leaves_ends_wakeful_mcp_cleanly() {
    let home = Home::new();
    let mut mcp = start(&home, "probe-only");
    let r = mcp.request(1, "server/discover", json!({"_meta": modern_meta(MODERN)}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let (status, stderr) = mcp.close();
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(stderr, "");

    // Without a probe, closing at once is still the misuse it was.
    let mut mcp = start(&home, "nothing");
    let (status, stderr) = mcp.close();
    assert!(!status.success());
    assert!(stderr.contains("handshake"), "{stderr}");
}

/// The `_meta` of a 2026-07-28 request from `client` with `capabilities`.
fn meta_of(client: &str, capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

fn tasks() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

#[test]
fn auto_serves_a_tasks_client_2026_07_28_and_keeps_channel_clients_on_initialize() {
    let home = Home::new();
    let mut mcp = start(&home, "auto");
    // A client that declares the channel, and one without the tasks
    // extension: the legacy answer (Claude Code started with channels on is
    // the third case: tests/mcp_era.rs).
    for (id, client, caps) in [
        (
            2,
            "other",
            json!({"experimental": {"claude/channel": {}},
                   "extensions": {"io.modelcontextprotocol/tasks": {}}}),
        ),
        (3, "other", json!({})),
    ] {
        let r = mcp.request(
            id,
            "server/discover",
            json!({"_meta": meta_of(client, caps)}),
        );
        assert_eq!(r["error"]["code"], -32601, "{r}");
    }
    // A client that declares the tasks extension stays modern, Claude Code
    // included.
    let r = mcp.request(
        1,
        "server/discover",
        json!({"_meta": meta_of("claude-code", tasks())}),
    );
    assert!(r["result"]["supportedVersions"].is_array(), "{r}");
    let r = mcp.request(
        4,
        "server/discover",
        json!({"_meta": meta_of("other", tasks())}),
    );
    let found = &r["result"];
    assert_eq!(
        found["supportedVersions"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
        MODERN,
        "{r}"
    );
    assert!(
        found["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "{r}"
    );
    assert!(found["capabilities"]["tools"].is_object(), "{r}");
    assert!(found["capabilities"].get("experimental").is_none(), "{r}");
    assert_eq!(found["ttlMs"], 0, "{r}");
    assert_eq!(
        found["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "wakeful",
        "{r}"
    );

    // Per-request `_meta`, no initialize.
    let r = mcp.request(5, "tools/list", json!({"_meta": meta_of("other", tasks())}));
    assert_eq!(r["result"]["ttlMs"], 0, "{r}");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(r["result"]["tools"].as_array().unwrap().len(), 6, "{r}");
    // A request that does not declare the tasks extension gets a plain
    // result, never a task.
    let r = mcp.request(
        6,
        "tools/call",
        json!({"name": "monitor_wait", "arguments": {"timeout_ms": 0},
               "_meta": meta_of("other", json!({}))}),
    );
    assert_eq!(r["result"]["structuredContent"]["timed_out"], true, "{r}");
    // One that does gets a task, kept by the daemon.
    let r = mcp.request(
        13,
        "tools/call",
        json!({"name": "monitor_wait", "arguments": {"timeout_ms": 60000},
               "_meta": meta_of("other", tasks())}),
    );
    let task = &r["result"];
    assert_eq!(task["resultType"], "task", "{r}");
    assert_eq!(task["status"], "working", "{r}");
    assert_eq!(task["pollIntervalMs"], 250, "{r}");
    assert_eq!(task["ttlMs"], 60_000 + 3_600_000, "{r}");
    let id = task["taskId"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32, "{r}");
    let r = mcp.request(
        14,
        "tasks/get",
        json!({"taskId": id, "_meta": meta_of("other", tasks())}),
    );
    assert_eq!(r["result"]["status"], "working", "{r}");
    let r = mcp.request(
        15,
        "tasks/cancel",
        json!({"taskId": id, "_meta": meta_of("other", tasks())}),
    );
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let r = mcp.request(
        16,
        "tasks/get",
        json!({"taskId": id, "_meta": meta_of("other", tasks())}),
    );
    assert_eq!(r["result"]["status"], "cancelled", "{r}");
    let r = mcp.request(
        17,
        "tasks/cancel",
        json!({"taskId": id, "_meta": meta_of("other", tasks())}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already cancelled"),
        "{r}"
    );
    // A bad argument is a plain tool error: no task is created.
    let r = mcp.request(
        18,
        "tools/call",
        json!({"name": "monitor_wait", "arguments": {"timeout_ms": 700000},
               "_meta": meta_of("other", tasks())}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    // A modern request without `_meta`: a clear error, and the server goes on.
    let r = mcp.request(7, "tools/list", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("_meta"), "{r}");
    assert!(
        message.contains("io.modelcontextprotocol/protocolVersion"),
        "{r}"
    );

    // Tasks: an unknown id reveals nothing; a client that did not declare
    // the extension is told which capability is missing.
    let r = mcp.request(
        8,
        "tasks/get",
        json!({"taskId": "nope", "_meta": meta_of("other", tasks())}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["message"], "unknown task id", "{r}");
    let r = mcp.request(
        9,
        "tasks/get",
        json!({"taskId": "nope", "_meta": meta_of("other", json!({}))}),
    );
    assert_eq!(r["error"]["code"], -32021, "{r}");

    // subscriptions/listen: acknowledged, then open until cancelled.
    mcp.send(
        json!({"jsonrpc": "2.0", "id": 10, "method": "subscriptions/listen",
                    "params": {"notifications": {"toolsListChanged": true},
                               "_meta": meta_of("other", tasks())}}),
    );
    let r = mcp.request(
        11,
        "tools/list",
        json!({"_meta": meta_of("other", tasks())}),
    );
    assert!(r["result"]["tools"].is_array(), "{r}");
    // The acknowledgement and the response to 11 may come in either order.
    let ack = mcp.notification("notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 10,
        "{ack}"
    );
    assert_eq!(ack["params"]["notifications"], json!({}), "{ack}");
    assert!(
        mcp.seen.iter().all(|f| f["id"] != 10),
        "the listen request ended: {:?}",
        mcp.seen
    );
    mcp.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 10,
                               "_meta": meta_of("other", tasks())}}),
    );
    // Nothing but responses and the acknowledgement: no channel push.
    let r = mcp.request(
        12,
        "tools/list",
        json!({"_meta": meta_of("other", tasks())}),
    );
    assert!(r["result"]["tools"].is_array(), "{r}");
    assert!(
        mcp.seen
            .iter()
            .all(|f| f.get("id").is_some()
                || f["method"] == "notifications/subscriptions/acknowledged"),
        "{:?}",
        mcp.seen
    );
    let (status, stderr) = mcp.close();
    assert!(status.success(), "{status}: {stderr}");
}

#[test]
fn the_2026_07_28_mode_keeps_even_claude_code_modern() {
    let home = Home::new();
    let mut mcp = start_with(&home, "modern-only", &["--protocol", "2026-07-28"]);
    let r = mcp.request(
        1,
        "server/discover",
        json!({"_meta": meta_of("claude-code", tasks())}),
    );
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert!(
        r["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "{r}"
    );
    let r = mcp.request(
        2,
        "tools/list",
        json!({"_meta": meta_of("claude-code", tasks())}),
    );
    assert!(r["result"]["tools"].is_array(), "{r}");
    let (status, stderr) = mcp.close();
    assert!(status.success(), "{status}: {stderr}");
}

#[test]
fn a_bad_protocol_mode_is_refused_with_the_accepted_ones() {
    let out = Command::new(common::BIN)
        .args(["mcp", "--protocol", "2024-01-01"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("auto, 2026-07-28 or 2025-11-25"),
        "{stderr}"
    );
}

#[test]
fn a_task_that_ends_is_pushed_on_an_open_listen_stream_and_then_acknowledged() {
    let home = Home::new();
    let mut mcp = start(&home, "push");
    mcp.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
               "params": {"notifications": {}, "_meta": meta_of("other", tasks())}}),
    );
    mcp.notification("notifications/subscriptions/acknowledged");
    let r = mcp.request(
        2,
        "tools/call",
        json!({"name": "monitor_wait", "arguments": {"timeout_ms": 60000},
               "_meta": meta_of("other", tasks())}),
    );
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    let r = mcp.request(
        3,
        "tools/call",
        json!({"name": "monitor_start",
               "arguments": {"command": "echo pushed-line", "description": "push"},
               "_meta": meta_of("other", tasks())}),
    );
    assert!(r["result"]["structuredContent"]["id"].is_string(), "{r}");
    let note = mcp.notification("notifications/tasks");
    let p = &note["params"];
    assert_eq!(p["taskId"], id.as_str(), "{note}");
    assert_eq!(p["status"], "completed", "{note}");
    assert_eq!(
        p["_meta"]["io.modelcontextprotocol/subscriptionId"], 1,
        "{note}"
    );
    let events = p["result"]["structuredContent"]["events"]
        .as_array()
        .unwrap();
    assert!(!events.is_empty(), "{note}");
    // Written to the client: acknowledged without a tasks/get.
    assert!(
        common::eventually(DEADLINE, || {
            home.json(&["consumers", "--session", "push"])
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["consumer"] == "mcp" && c["acked_seq"] == events.last().unwrap()["seq"])
        }),
        "{:?}",
        home.json(&["consumers", "--session", "push"])
    );
    let (status, stderr) = mcp.close();
    assert!(status.success(), "{status}: {stderr}");
}

#[test]
fn monitor_start_with_wait_is_one_task_that_ends_with_the_monitor() {
    let home = Home::new();
    let mut mcp = start(&home, "startwait");
    let r = mcp.request(
        1,
        "tools/call",
        json!({"name": "monitor_start",
               "arguments": {"command": "echo built; exit 3", "description": "the build",
                             "until": "exit", "wait": true},
               "_meta": meta_of("other", tasks())}),
    );
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    let deadline = Instant::now() + DEADLINE;
    let done = loop {
        let r = mcp.request(
            2,
            "tasks/get",
            json!({"taskId": id, "_meta": meta_of("other", tasks())}),
        );
        if r["result"]["status"] != "working" {
            break r;
        }
        assert!(Instant::now() < deadline, "the task never ended: {r}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let result = &done["result"]["result"]["structuredContent"];
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let monitor = result["monitor"]["id"].as_str().unwrap();
    let ended: Vec<&Value> = result["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["monitor_id"] == monitor && e["kind"] == "stopped")
        .collect();
    assert_eq!(ended.len(), 1, "{done}");
    assert!(
        ended[0]["text"].as_str().unwrap().contains("built"),
        "{done}"
    );

    // Without the tasks extension: one blocking call, the same result.
    let r = mcp.request(
        3,
        "tools/call",
        json!({"name": "monitor_start",
               "arguments": {"command": "echo again", "description": "again",
                             "until": "exit", "wait": true},
               "_meta": meta_of("other", json!({}))}),
    );
    let result = &r["result"]["structuredContent"];
    let monitor = result["monitor"]["id"].as_str().unwrap();
    assert!(
        result["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["monitor_id"] == monitor && e["kind"] == "stopped"),
        "{r}"
    );
    let (status, stderr) = mcp.close();
    assert!(status.success(), "{status}: {stderr}");
}

// What `auto` gives Claude Code, from the command line above `wakeful mcp`.

/// The probe Claude Code 2.1.332 sends first (client `name`, declaring the
/// tasks extension).
fn probe(name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": "server-discover-probe-1", "method": "server/discover",
           "params": {"_meta": {
               "io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientInfo": {"name": name, "version": "2.1.332"},
               "io.modelcontextprotocol/clientCapabilities": {
                   "extensions": {"io.modelcontextprotocol/tasks": {}}}}}})
}

/// Sends `probe(name)` to `wakeful mcp ARGS` started by `sh -c` whose own
/// command line ends with `parent_args` (as Claude Code's would); the answer.
fn discover(home: &Home, name: &str, args: &[&str], parent_args: &[&str]) -> Value {
    let mut child = Command::new("sh")
        .arg("-c")
        // The shell's own argv carries `parent_args`; `wakeful mcp` gets only
        // `args` (plain words, no quoting needed).
        .arg(format!(r#""$0" mcp {}; :"#, args.join(" ")))
        .arg(common::BIN)
        .args(parent_args)
        .env("WAKEFUL_HOME", home.path())
        .env("WAKEFUL_SESSION", "era")
        .env_remove("WAKEFUL_MCP_PROTOCOL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", probe(name)).unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        !line.is_empty(),
        "no answer; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&line).unwrap()
}

fn modern(answer: &Value) -> bool {
    match (answer.get("result"), answer.get("error")) {
        (Some(r), None) => {
            assert!(
                r["supportedVersions"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("2026-07-28")),
                "{answer}"
            );
            assert!(
                r["capabilities"]["extensions"]
                    .get("io.modelcontextprotocol/tasks")
                    .is_some(),
                "{answer}"
            );
            true
        }
        (None, Some(e)) => {
            assert_eq!(e["code"], -32601, "{answer}");
            false
        }
        _ => panic!("neither a result nor an error: {answer}"),
    }
}

#[test]
fn claude_code_gets_tasks_unless_it_runs_with_channels() {
    let home = Home::new();
    assert!(modern(&discover(&home, "claude-code", &[], &[])));
    for flag in [
        &["--dangerously-load-development-channels", "server:wakeful"][..],
        &["--channels=plugin:wakeful@wakeful"],
    ] {
        assert!(
            !modern(&discover(&home, "claude-code", &[], flag)),
            "with {flag:?} Claude Code keeps the legacy handshake and its channel"
        );
    }
    // Another client is not Claude Code: a channel flag above it changes nothing.
    assert!(modern(&discover(
        &home,
        "codex",
        &[],
        &["--channels", "server:wakeful"]
    )));
    // --protocol wins over the flag.
    assert!(modern(&discover(
        &home,
        "claude-code",
        &["--protocol", "2026-07-28"],
        &["--channels", "x"]
    )));
}

#[test]
fn the_config_key_chooses_the_mode_and_the_flag_wins_over_it() {
    let home = Home::new();
    let config = home.path().join("config.toml");
    std::fs::write(&config, "[mcp]\nprotocol = \"2025-11-25\"\n").unwrap();
    assert!(!modern(&discover(&home, "claude-code", &[], &[])));
    assert!(modern(&discover(
        &home,
        "claude-code",
        &["--protocol", "auto"],
        &[]
    )));
    // A bad value: a clear error that names the file, and no server.
    std::fs::write(&config, "[mcp]\nprotocol = \"2025-06-18\"\n").unwrap();
    let out = home
        .cmd(&["mcp"])
        .env_remove("WAKEFUL_MCP_PROTOCOL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("config.toml"), "{stderr}");
    assert!(stderr.contains("2026-07-28"), "{stderr}");
}
