//! Which events wake (`--wake-on`), silence as an event (`--expect-within`):
//! every event is recorded; only the chosen ones end a `wait` or start a
//! wake route's delivery, and the others come with them, each once.

mod common;

use std::time::{Duration, Instant};

use common::{eventually, Home};
use serde_json::Value;

/// A monitor that prints `lines`, then waits until `gate` exists, then exits
/// with `code`.
fn gated(lines: &[&str], gate: &std::path::Path, code: i32) -> String {
    let mut s = String::new();
    // Apart in time, so each line is an event of its own.
    for l in lines {
        s.push_str(&format!("echo '{l}'; sleep 0.05; "));
    }
    s.push_str(&format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; exit {code}",
        gate.display()
    ));
    s
}

/// The texts of the `lines` events and the kinds, in order.
fn kinds_and_lines(events: &[Value]) -> (Vec<String>, Vec<String>) {
    let kinds = events
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    let lines = events
        .iter()
        .filter(|e| e["kind"] == "lines")
        .flat_map(|e| e["lines"].as_array().unwrap().clone())
        .map(|l| l.as_str().unwrap().to_string())
        .collect();
    (kinds, lines)
}

/// Waits until the session's log holds an event with this text in a line.
fn logged(home: &Home, line: &str) {
    assert!(
        eventually(Duration::from_secs(10), || home
            .json_lines(&["events"])
            .iter()
            .any(|e| e["lines"]
                .as_array()
                .is_some_and(|l| l.iter().any(|l| l == line)))),
        "{line:?} never logged"
    );
}

#[test]
fn wake_on_exit_records_every_line_and_wakes_once_at_the_end() {
    let home = Home::new();
    let gate = home.path().join("gate");
    let cmd = gated(&["one", "two"], &gate, 3);
    let v = home.json(&["start", "--wake-on", "exit", "--batch-ms", "0", "--", &cmd]);
    let id = v["id"].as_str().unwrap().to_string();
    logged(&home, "two");
    // Recorded and readable, marked as not waking.
    let log = home.json_lines(&["events"]);
    let lines: Vec<&Value> = log.iter().filter(|e| e["kind"] == "lines").collect();
    assert!(lines.iter().all(|e| e["wake"] == false), "{log:?}");
    // Nothing that wakes yet: a wait times out although events are unread.
    let started = Instant::now();
    let (code, out, err) = home.run(&["wait", "--timeout-ms", "300"]);
    assert_eq!((code, out.as_str()), (124, ""), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(err.contains("that wake"), "{err}");

    std::fs::write(&gate, "").unwrap();
    let got = home.json_lines(&["wait", "--timeout-ms", "10000"]);
    let (kinds, lines) = kinds_and_lines(&got);
    assert_eq!(lines, ["one", "two"]);
    assert_eq!(kinds.first().map(String::as_str), Some("started"));
    assert_eq!(kinds.last().map(String::as_str), Some("stopped"));
    let stopped = got.last().unwrap();
    assert_eq!(stopped["monitor_id"], id.as_str());
    assert_eq!(stopped["stop_reason"]["code"], 3, "{stopped}");
    assert!(stopped.get("wake").is_none(), "{stopped}");
    // Each once.
    let (code, out, _) = home.run(&["wait", "--timeout-ms", "0"]);
    assert_eq!((code, out.as_str()), (124, ""));
    let (code, out, _) = home.run(&["wait", "--all", "--timeout-ms", "0"]);
    assert_eq!((code, out.as_str()), (124, ""));
}

#[test]
fn wake_on_match_wakes_on_the_line_and_all_reads_the_rest() {
    let home = Home::new();
    let gate = home.path().join("gate");
    let cmd = gated(&["compiling a", "ERROR: b broke", "compiling c"], &gate, 0);
    home.json(&[
        "start",
        "--wake-on",
        "match:ERROR",
        "--batch-ms",
        "0",
        "--",
        &cmd,
    ]);
    logged(&home, "compiling c");
    let got = home.json_lines(&["wait", "--timeout-ms", "10000"]);
    let (_, lines) = kinds_and_lines(&got);
    assert_eq!(lines, ["compiling a", "ERROR: b broke"], "{got:?}");
    assert!(got.last().unwrap().get("wake").is_none());
    // The line after it does not wake: only --all hands it out.
    let (code, _, _) = home.run(&["wait", "--timeout-ms", "200"]);
    assert_eq!(code, 124);
    let rest = home.json_lines(&["wait", "--all", "--timeout-ms", "0"]);
    let (_, lines) = kinds_and_lines(&rest);
    assert_eq!(lines, ["compiling c"]);
    assert!(rest.iter().all(|e| e["wake"] == false), "{rest:?}");
    // A successful end is not a failure: it waits for --all as well.
    std::fs::write(&gate, "").unwrap();
    assert!(eventually(Duration::from_secs(10), || home
        .json_lines(&["events"])
        .iter()
        .any(|e| e["kind"] == "stopped")));
    let (code, _, _) = home.run(&["wait", "--timeout-ms", "0"]);
    assert_eq!(code, 124);
    let end = home.json_lines(&["wait", "--all", "--timeout-ms", "0"]);
    assert_eq!(end.len(), 1, "{end:?}");
    assert_eq!(end[0]["kind"], "stopped");
}

#[test]
fn more_than_a_page_of_quiet_events_reach_the_waiter_with_the_wake() {
    // Over 1,000 events that do not wake (more than a batch holds: 70
    // monitors of 18 events each, within the rate limit's burst), then a
    // failure: a plain wait hands out all of them, in order, each once.
    let home = Home::new();
    let config = home.path().join("config.toml");
    std::fs::write(&config, "[limits]\nmax_active_per_session = 100\n").unwrap();
    let quiet = "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do echo q$i; sleep 0.002; done";
    for _ in 0..70 {
        home.json(&["start", "--wake-on", "fail", "--batch-ms", "0", "--", quiet]);
    }
    assert!(eventually(Duration::from_secs(60), || home
        .json(&["list"])
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["state"] != "running")));
    let logged = home.json_lines(&["events"]).len();
    assert!(logged > 1000, "only {logged} events");
    home.json(&["start", "--wake-on", "fail", "--", "echo boom; exit 1"]);
    let got = home.json_lines(&["wait", "--timeout-ms", "20000"]);
    assert_eq!(
        got.len(),
        logged + 3,
        "started, boom, stopped after the rest"
    );
    assert_eq!(got.last().unwrap()["kind"], "stopped");
    let seqs: Vec<u64> = got.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "gaps or repeats");
    let (code, _, _) = home.run(&["wait", "--all", "--timeout-ms", "0"]);
    assert_eq!(code, 124);
}

#[test]
fn silence_is_an_event_and_the_monitor_keeps_running() {
    let home = Home::new();
    let gate = home.path().join("gate");
    let cmd = format!(
        "echo first; while [ ! -e '{0}' ]; do sleep 0.02; done; echo back; rm '{0}'; \
         while [ ! -e '{0}' ]; do sleep 0.02; done",
        gate.display()
    );
    let v = home.json(&[
        "start",
        "--expect-within",
        "1000",
        "--wake-on",
        "fail",
        "--batch-ms",
        "0",
        "--",
        &cmd,
    ]);
    let id = v["id"].as_str().unwrap().to_string();
    // `silent` is a failure for --wake-on fail: it ends a wait.
    let started = Instant::now();
    let got = home.json_lines(&["wait", "--timeout-ms", "10000"]);
    let silent = got.last().unwrap();
    assert_eq!(silent["kind"], "silent", "{got:?}");
    assert!(silent["quiet_ms"].as_u64().unwrap() >= 1000, "{silent}");
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert!(
        silent["text"].as_str().unwrap().contains("no output for 1"),
        "{silent}"
    );
    // Once per quiet period, and the monitor still runs.
    let (code, _, _) = home.run(&["wait", "--timeout-ms", "1500"]);
    assert_eq!(code, 124);
    let list = home.json(&["list"]);
    assert_eq!(list[0]["state"], "running", "{list}");
    // Output again: `resumed` (recorded, not a failure), then the line.
    std::fs::write(&gate, "").unwrap();
    logged(&home, "back");
    let rest = home.json_lines(&["wait", "--all", "--timeout-ms", "0"]);
    let kinds: Vec<&str> = rest.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["resumed", "lines"], "{rest:?}");
    assert_eq!(rest[0]["wake"], false);
    assert!(rest[0]["quiet_ms"].as_u64().unwrap() >= 1000);
    // A second quiet period: a second `silent`.
    let again = home.json_lines(&["wait", "--timeout-ms", "10000"]);
    assert_eq!(again.last().unwrap()["kind"], "silent", "{again:?}");
    home.ok(&["stop", &id]);
}

#[test]
fn expect_within_is_checked() {
    let home = Home::new();
    for (args, says) in [
        (vec!["--expect-within", "10"], "expect-within"),
        (vec!["--wake-on", "sometimes"], "wake-on"),
        (vec!["--wake-on", "match:("], "wake-on"),
    ] {
        let mut a = vec!["start"];
        a.extend(args.iter().copied());
        a.extend(["--", "true"]);
        let (code, out, err) = home.run(&a);
        assert_eq!(code, 2, "{a:?}: {out}{err}");
        assert!(err.contains(says), "{a:?}: {err}");
    }
    // Nothing started.
    assert_eq!(home.json(&["list"]), serde_json::json!([]));
}

#[test]
fn a_wake_route_is_delivered_only_for_events_that_wake() {
    let home = Home::new();
    let out = home.path().join("wakes");
    home.json(&[
        "wake",
        "set",
        "exec",
        "--",
        "/bin/sh",
        "-c",
        "printf '%s\\n===\\n' \"$1\" >> \"$0\"",
        out.to_str().unwrap(),
        "{text}",
    ]);
    let gate = home.path().join("gate");
    let cmd = gated(&["quiet-1", "quiet-2"], &gate, 4);
    home.json(&["start", "--wake-on", "fail", "--batch-ms", "0", "--", &cmd]);
    logged(&home, "quiet-2");
    // Recorded, and no delivery for them.
    assert!(
        !eventually(Duration::from_millis(300), || out.exists()),
        "{:?}",
        std::fs::read_to_string(&out)
    );
    std::fs::write(&gate, "").unwrap();
    let mut text = String::new();
    assert!(eventually(Duration::from_secs(10), || {
        text = std::fs::read_to_string(&out).unwrap_or_default();
        text.contains("exited with code 4")
    }));
    // One wake, carrying the quiet lines before the failure.
    assert_eq!(text.matches("===").count(), 1, "{text}");
    assert!(
        text.contains("quiet-1") && text.contains("quiet-2"),
        "{text}"
    );
}
