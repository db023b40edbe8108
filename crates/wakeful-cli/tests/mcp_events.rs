//! MCP Events (SEP-3415) over raw stdio frames: `events/list`,
//! `events/poll` (cursor from now, paging with `maxEvents`/`hasMore`,
//! `nextPollMs`, the same `eventId`s after `kill -9` of the daemon),
//! `events/stream` (active, event, heartbeat, cancelled), and bad input
//! (another session's cursor, a malformed one, an unknown type, an
//! out-of-range `maxEvents`, a delivery mode `events/subscribe` does not serve), on the legacy handshake and
//! on a 2026-07-28 request.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/mcp_stdio.rs"]
mod mcp_stdio;

use std::process::Stdio;
use std::time::Duration;

use common::Home;
use mcp_stdio::Raw;
use serde_json::{json, Value};

/// One deadline for each condition a test waits for.
const DEADLINE: Duration = Duration::from_secs(20);
const SESSION: &str = "ev";

/// `wakeful mcp` in session [`SESSION`], with `env`.
fn command(home: &Home, env: &[(&str, &str)]) -> std::process::Command {
    let mut cmd = home.cmd(&["mcp"]);
    cmd.env("WAKEFUL_SESSION", SESSION)
        .envs(env.iter().copied())
        .stderr(Stdio::null());
    cmd
}

fn start(home: &Home, env: &[(&str, &str)]) -> Raw {
    Raw::spawn(&mut command(home, env), DEADLINE)
}

fn initialized(home: &Home, env: &[(&str, &str)]) -> (Raw, Value) {
    Raw::initialized(&mut command(home, env), DEADLINE)
}

trait Poll {
    /// `events/poll`'s result.
    fn poll(&mut self, id: u64, params: Value) -> Value;
}

impl Poll for Raw {
    fn poll(&mut self, id: u64, params: Value) -> Value {
        let r = self.request(id, "events/poll", params);
        assert!(r["result"].is_object(), "{r}");
        r["result"].clone()
    }
}

fn start_monitor(home: &Home, command: &str) -> String {
    let v = home.json(&["--session", SESSION, "start", "-d", "ev", "--", command]);
    v["id"].as_str().unwrap().to_string()
}

/// The texts of a poll's events.
fn texts(result: &Value) -> Vec<String> {
    result["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["data"]["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn events_are_listed_and_polled_from_a_cursor_that_survives_kill_9_of_the_daemon() {
    let home = Home::new();
    let (mut mcp, init) = initialized(&home, &[]);
    assert_eq!(
        init["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/events"],
        json!({}),
        "{init}"
    );
    let list = mcp.request(1, "events/list", json!({}));
    let names: Vec<&str> = list["result"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "monitor.lines",
            "monitor.ended",
            "monitor.wake",
            "monitor.notice"
        ],
        "{list}"
    );
    let first = &list["result"]["events"][0];
    assert_eq!(
        first["delivery"],
        json!(["poll", "push", "webhook"]),
        "{list}"
    );
    assert_eq!(first["inputSchema"]["type"], "object", "{list}");
    assert_eq!(first["payloadSchema"]["type"], "object", "{list}");

    // No cursor: from now, nothing returned, an idle poll interval.
    let now = mcp.poll(2, json!({"name": "monitor.lines", "arguments": {}}));
    assert_eq!(now["events"], json!([]), "{now}");
    assert_eq!(now["hasMore"], false);
    assert_eq!(now["truncated"], false);
    assert_eq!(now["nextPollMs"], 5000);
    let from = now["cursor"].as_str().unwrap().to_string();

    let id = start_monitor(
        &home,
        "echo 'one\x1b[31m'; sleep 0.3; echo two; sleep 0.3; echo three",
    );
    let mut all = Value::Null;
    let mut n = 10;
    assert!(
        common::eventually(DEADLINE, || {
            n += 1;
            all = mcp.poll(n, json!({"name": "monitor.lines", "cursor": from}));
            texts(&all).concat().contains("three")
        }),
        "{all}"
    );
    let got = texts(&all);
    // Sanitized as monitor_events' text: the escape is gone.
    assert!(got[0].contains("one") && !got[0].contains('\x1b'), "{all}");
    let ids: Vec<Value> = all["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["eventId"].clone())
        .collect();
    for e in all["events"].as_array().unwrap() {
        assert_eq!(e["name"], "monitor.lines");
        assert_eq!(e["data"]["monitor_id"], id.as_str());
        assert!(e["timestamp"].as_str().unwrap().ends_with('Z'), "{e}");
    }
    assert_eq!(all["nextPollMs"], 1000, "{all}");

    // One at a time: hasMore and an immediate next poll.
    let one = mcp.poll(
        40,
        json!({"name": "monitor.lines", "cursor": from, "maxEvents": 1}),
    );
    assert_eq!(one["events"].as_array().unwrap().len(), 1, "{one}");
    assert_eq!(one["events"][0]["eventId"], ids[0]);
    if ids.len() > 1 {
        assert_eq!(one["hasMore"], true, "{one}");
        assert_eq!(one["nextPollMs"], 0, "{one}");
    }

    // The monitor's end, and nothing after the last cursor.
    assert!(common::eventually(DEADLINE, || {
        n += 1;
        let ended = mcp.poll(
            n,
            json!({"name": "monitor.ended", "cursor": from,
                                       "arguments": {"monitor": id}}),
        );
        ended["events"].as_array().unwrap().len() == 1
    }));
    let done = mcp.poll(
        41,
        json!({"name": "monitor.lines", "cursor": all["cursor"]}),
    );
    assert_eq!(done["events"], json!([]), "{done}");

    // kill -9 of the daemon: the same cursor gives the same events, the
    // same ids (the next request starts the daemon again).
    home.kill_daemon();
    let again = mcp.poll(42, json!({"name": "monitor.lines", "cursor": from}));
    let again_ids: Vec<Value> = again["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["eventId"].clone())
        .collect();
    assert_eq!(again_ids, ids, "{again}");
}

#[test]
fn bad_cursors_names_and_params_get_the_extension_errors_and_reveal_nothing() {
    let home = Home::new();
    let (mut mcp, _) = initialized(&home, &[]);
    let mine = mcp.poll(1, json!({"name": "monitor.wake"}))["cursor"].clone();
    let theirs = mcp.poll(
        2,
        json!({"name": "monitor.wake", "arguments": {"session": "secret-other"}}),
    )["cursor"]
        .clone();
    assert_ne!(mine, theirs);
    let other = mcp.request(
        3,
        "events/poll",
        json!({"name": "monitor.wake", "cursor": theirs}),
    );
    let malformed = mcp.request(
        4,
        "events/poll",
        json!({"name": "monitor.wake", "cursor": "wk1.nope"}),
    );
    for r in [&other, &malformed] {
        assert_eq!(r["error"]["code"], -32012, "{r}");
        assert!(!r.to_string().contains("secret-other"), "{r}");
    }
    assert_eq!(other["error"]["message"], malformed["error"]["message"]);

    let unknown = mcp.request(5, "events/poll", json!({"name": "monitor.nope"}));
    assert_eq!(unknown["error"]["code"], -32011, "{unknown}");
    let zero = mcp.request(
        6,
        "events/poll",
        json!({"name": "monitor.lines", "maxEvents": 0}),
    );
    assert_eq!(zero["error"]["code"], -32602, "{zero}");
    let args = mcp.request(
        7,
        "events/poll",
        json!({"name": "monitor.lines", "arguments": {"x": 1}}),
    );
    assert_eq!(args["error"]["code"], -32602, "{args}");
    let hook = mcp.request(
        8,
        "events/subscribe",
        json!({"name": "monitor.lines", "delivery": {"mode": "poll",
               "url": "https://example.invalid/", "secret": "whsec_AAAA"}}),
    );
    assert_eq!(hook["error"]["code"], -32013, "{hook}");
    let missing = mcp.request(9, "events/nothing", json!({}));
    assert_eq!(missing["error"]["code"], -32601, "{missing}");
}

#[test]
fn a_stream_pushes_each_line_beats_with_the_cursor_and_ends_when_cancelled() {
    let home = Home::new();
    let (mut mcp, _) = initialized(&home, &[("WAKEFUL_MCP_EVENTS_HEARTBEAT_MS", "300")]);
    mcp.send(json!({"jsonrpc": "2.0", "id": 1, "method": "events/stream",
                    "params": {"name": "monitor.lines"}}));
    let active = mcp.next_where("active", |f| f["method"] == "notifications/events/active");
    let sub = active["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone();
    assert_eq!(sub, json!("1"), "{active}");
    let from = active["params"]["cursor"].as_str().unwrap().to_string();

    // A quiet stream beats with the cursor it stands at.
    let beat = mcp.next_where("heartbeat", |f| {
        f["method"] == "notifications/events/heartbeat"
    });
    assert_eq!(beat["params"]["cursor"], from.as_str(), "{beat}");

    start_monitor(&home, "echo streamed-line; sleep 30");
    let ev = mcp.next_where("event", |f| f["method"] == "notifications/events/event");
    let occurrence = &ev["params"]["event"];
    assert_eq!(occurrence["name"], "monitor.lines", "{ev}");
    assert!(
        occurrence["data"]["text"]
            .as_str()
            .unwrap()
            .contains("streamed-line"),
        "{ev}"
    );
    assert_eq!(ev["params"]["cursor"], occurrence["cursor"], "{ev}");
    assert_eq!(
        ev["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        sub
    );

    // The stream's cursor polls on from there: nothing in between lost.
    let polled = mcp.poll(2, json!({"name": "monitor.lines", "cursor": from}));
    assert_eq!(
        polled["events"][0]["eventId"], occurrence["eventId"],
        "{polled}"
    );

    // Cancelled: the heartbeats stop; the connection still answers.
    mcp.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 1, "reason": "done"}}),
    );
    let r = mcp.request(3, "events/list", json!({}));
    assert!(r["result"].is_object(), "{r}");
    let mark = mcp.seen.len();
    let r = mcp.request(4, "events/list", json!({}));
    assert!(r["result"].is_object(), "{r}");
    // Over three heartbeat periods, no frame of the stream.
    mcp.read_for(Duration::from_millis(1000));
    let late: Vec<&Value> = mcp.seen[mark..]
        .iter()
        .filter(|f| f["method"] == "notifications/events/heartbeat")
        .collect();
    assert!(late.is_empty(), "{late:?}");
}

#[test]
fn a_2026_07_28_request_polls_with_its_meta() {
    let home = Home::new();
    let mut mcp = start(&home, &[("WAKEFUL_MCP_PROTOCOL", "2026-07-28")]);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/events": {}}},
    });
    let found = mcp.request(1, "server/discover", json!({"_meta": meta}));
    assert_eq!(
        found["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/events"],
        json!({}),
        "{found}"
    );
    let r = mcp.request(
        2,
        "events/poll",
        json!({"_meta": meta, "name": "monitor.ended"}),
    );
    assert!(
        r["result"]["cursor"].as_str().unwrap().starts_with("wk1."),
        "{r}"
    );
}

#[test]
fn a_wake_on_argument_keeps_only_the_events_that_wake_under_it() {
    let home = Home::new();
    let (mut mcp, _) = initialized(&home, &[]);
    let now = mcp.poll(1, json!({"name": "monitor.lines", "arguments": {}}));
    let from = now["cursor"].as_str().unwrap().to_string();
    start_monitor(
        &home,
        "echo 'INFO fine'; sleep 0.3; echo 'ERROR broke'; sleep 0.3; echo 'INFO after'",
    );
    // Every line is in the log once the last one is.
    let mut plain = Value::Null;
    let mut n = 10;
    assert!(
        common::eventually(DEADLINE, || {
            n += 1;
            plain = mcp.poll(
                n,
                json!({"name": "monitor.lines", "cursor": from, "arguments": {}}),
            );
            texts(&plain).concat().contains("INFO after")
        }),
        "{plain}"
    );
    assert_eq!(texts(&plain).len(), 3, "one event a line: {plain}");
    let got = mcp.poll(
        99,
        json!({"name": "monitor.lines", "cursor": from, "arguments": {"wake_on": "match:ERROR"}}),
    );
    assert_eq!(texts(&got), ["ERROR broke"], "{got}");
    // A rule that cannot be read is refused with the reason.
    let r = mcp.request(
        100,
        "events/poll",
        json!({"name": "monitor.lines", "arguments": {"wake_on": "sometimes"}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("wake_on"),
        "{r}"
    );
}
