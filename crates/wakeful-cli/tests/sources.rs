//! Every source through the daemon and the CLI: file, poll, WebSocket
//! (refused as loopback until config.toml allows it), terminals; and the
//! daemon's memory under a flood.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{eventually, live_of, Home};
use serde_json::Value;

fn events_of(home: &Home, id: &str) -> Vec<Value> {
    home.json_lines(&["events"])
        .into_iter()
        .filter(|e| e["monitor_id"] == id)
        .collect()
}

fn lines_of(home: &Home, id: &str) -> Vec<String> {
    events_of(home, id)
        .iter()
        .filter(|e| e["kind"] == "lines")
        .flat_map(|e| {
            e["lines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn wait_lines(home: &Home, id: &str, want: &[&str]) {
    let mut got = vec![];
    assert!(
        eventually(Duration::from_secs(10), || {
            got = lines_of(home, id);
            got.len() >= want.len()
        }),
        "{id}: wanted {want:?}, got {got:?}"
    );
    assert_eq!(got, want);
}

fn final_of(home: &Home, id: &str) -> Value {
    let mut last = Value::Null;
    assert!(
        eventually(Duration::from_secs(10), || {
            last = events_of(home, id).last().cloned().unwrap_or(Value::Null);
            last["kind"] == "stopped" || last["kind"] == "failed"
        }),
        "{id} did not end: {last}"
    );
    last
}

#[test]
fn file_and_poll_sources_through_the_daemon() {
    let home = Home::new();
    let log = home.path().join("app.log");
    std::fs::write(&log, "before\n").unwrap();
    let id = home.json(&[
        "start",
        "-d",
        "app log",
        "--batch-ms",
        "0",
        "--file",
        log.to_str().unwrap(),
    ])["id"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(&log, "").unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut f, b"after\n").unwrap();
    wait_lines(&home, &id, &["after"]);
    let listed = home.json(&["list"]);
    assert_eq!(listed[0]["source"]["kind"], "file");

    let state = home.path().join("state");
    std::fs::write(&state, "green\n").unwrap();
    let cmd = format!("cat {}", state.display());
    let poll = home.json(&["start", "-d", "state", "--every", "1000", "--", &cmd])["id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_lines(&home, &poll, &["green"]);
    std::fs::write(&state, "red\n").unwrap();
    wait_lines(&home, &poll, &["green", "red"]);
    // A command with a source flag, or an interval under 1 s: exit 2.
    assert_eq!(home.run(&["start", "--file", "x", "--", "echo"]).0, 2);
    assert_eq!(home.run(&["start", "--every", "999", "--", "date"]).0, 2);
    home.ok(&["stop", &poll]);
}

#[test]
fn websocket_is_refused_as_loopback_until_config_allows_it() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let addr = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            use futures_util::{SinkExt, StreamExt};
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                        return;
                    };
                    let _ = ws
                        .send(tokio_tungstenite::tungstenite::Message::text(
                            "tick 1\ntick 2",
                        ))
                        .await;
                    while let Some(Ok(_)) = ws.next().await {}
                });
            }
        });
        addr
    });
    let url = format!("ws://{addr}/feed");
    let home = Home::new();
    let id = home.json(&["start", "-d", "feed", "--ws", &url])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let end = final_of(&home, &id);
    assert_eq!(end["kind"], "failed");
    assert!(end["text"].as_str().unwrap().contains("loopback"), "{end}");
    // Only the configuration file can allow it (then restart the daemon).
    std::fs::write(
        home.path().join("config.toml"),
        "[network]\nallow = [\"127.0.0.0/8\"]\n",
    )
    .unwrap();
    home.ok(&["daemon", "stop"]);
    let id = home.json(&["start", "-d", "feed", "--batch-ms", "0", "--ws", &url])["id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_lines(&home, &id, &["tick 1", "tick 2"]);
    home.ok(&["stop", &id]);
    // A bad allow entry is a clear configuration error.
    std::fs::write(
        home.path().join("config.toml"),
        "[network]\nallow = [\"localhost\"]\n",
    )
    .unwrap();
    home.ok(&["daemon", "stop"]);
    let (code, _, err) = home.run(&["status"]);
    assert_eq!(code, 1);
    assert!(err.contains("CIDR"), "{err}");
    std::fs::remove_file(home.path().join("config.toml")).unwrap();
    drop(rt);
}

#[test]
fn run_and_terminals() {
    let home = Home::new();
    // run --until exit: one wake with the exit code and the last lines.
    let r = home.json(&[
        "run",
        "--until",
        "exit",
        "--",
        "echo compiling; echo done; exit 3",
    ]);
    let monitor = r["monitor_id"].as_str().unwrap().to_string();
    let end = final_of(&home, &monitor);
    assert_eq!(
        end["stop_reason"],
        serde_json::json!({"kind": "exit", "code": 3})
    );
    assert_eq!(end["lines"], serde_json::json!(["compiling", "done"]));
    assert!(
        lines_of(&home, &monitor).is_empty(),
        "until exit emits no line events"
    );

    // A long-running terminal with two monitors; one stopped, then killed.
    let trigger = home.path().join("trigger");
    std::fs::write(&trigger, "").unwrap();
    let term = home.json(&["run", "--", &format!("tail -F {}", trigger.display())]);
    let tid = term["id"].as_str().unwrap().to_string();
    assert!(tid.starts_with("term-"));
    let a = home.json(&["start", "--batch-ms", "0", "--terminal", &tid])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = home.json(&["start", "--batch-ms", "0", "--terminal", &tid])["id"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(&trigger, "one\n").unwrap();
    wait_lines(&home, &a, &["one"]);
    wait_lines(&home, &b, &["one"]);
    home.ok(&["stop", &a]);
    let list = home.json(&["terminal", "list"]);
    assert_eq!(list[0]["state"], "running");
    assert_eq!(list[0]["monitors"], 1);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&trigger)
        .unwrap();
    std::io::Write::write_all(&mut f, b"two\n").unwrap();
    wait_lines(&home, &b, &["one", "two"]);
    let killed = home.json(&["terminal", "kill", &tid]);
    assert_eq!(killed["state"], "ended");
    let end = final_of(&home, &b);
    assert_eq!(end["stop_reason"]["kind"], "signal");
    assert_eq!(live_of(&tid), 0);
    assert_eq!(home.ok(&["terminal", "output", &tid]), "one\ntwo\n");
    assert_eq!(home.run(&["terminal", "kill", "term-nothere"]).0, 3);
}

fn daemon_hwm_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn daemon_memory_does_not_grow_with_a_flood() {
    let home = Home::new();
    let pid = home.daemon_pid().unwrap();
    // Warm up: one small flood, then the peak is the baseline.
    home.run(&["watch", "--", "seq 1 20000"]);
    let base = daemon_hwm_kib(pid);
    let (code, out, _) = home.run(&[
        "watch",
        "--json",
        "--timeout-ms",
        "120000",
        "--",
        "seq 1 1000000",
    ]);
    assert_eq!(code, 0);
    let events: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let delivered: u64 = events
        .iter()
        .filter(|e| e["kind"] == "lines")
        .map(|e| e["count"].as_u64().unwrap())
        .sum();
    let suppressed: u64 = events
        .iter()
        .filter(|e| e["kind"] == "suppressed")
        .map(|e| e["count"].as_u64().unwrap())
        .sum();
    assert_eq!(delivered + suppressed, 1_000_000);
    let peak = daemon_hwm_kib(pid);
    // The flood is ~6.9 MB of text and 1,000,000 lines; the daemon's peak
    // must not move by anything near that.
    assert!(
        peak.saturating_sub(base) < 8 * 1024,
        "peak RSS {base} KiB -> {peak} KiB"
    );
}
