//! The `events_all` request: every session's events, in seq order, read-only.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use common::{eventually, Home};
use serde_json::Value;

/// Sends one request on a new connection and reads replies until `ok`
/// (or `limit` event replies with `follow`).
fn request(home: &Home, line: &str, limit: usize) -> Vec<Value> {
    let mut s = UnixStream::connect(home.socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(line.as_bytes()).unwrap();
    s.write_all(b"\n").unwrap();
    let mut replies = vec![];
    for l in BufReader::new(s).lines() {
        let v: Value = serde_json::from_str(&l.unwrap()).unwrap();
        let done = v["type"] != "event" || replies.len() + 1 >= limit;
        replies.push(v);
        if done {
            break;
        }
    }
    replies
}

#[test]
fn events_all_reads_every_session_in_order_and_acknowledges_nothing() {
    let home = Home::new();
    let a = home.ok(&["--session", "a", "start", "--", "echo from-a"]);
    let b = home.ok(&["--session", "b", "start", "--", "echo from-b"]);
    let (a, b) = (a.trim().to_string(), b.trim().to_string());
    // Both monitors ended: six events, three per session.
    assert!(eventually(Duration::from_secs(10), || {
        let r = request(
            &home,
            r#"{"v":1,"op":"events_all","after":0,"follow":false}"#,
            100,
        );
        r.iter().filter(|e| e["type"] == "event").count() == 6
    }));
    let r = request(
        &home,
        r#"{"v":1,"op":"events_all","after":0,"follow":false}"#,
        100,
    );
    let events: Vec<&Value> = r.iter().filter(|e| e["type"] == "event").collect();
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| e["event"]["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    for id in [&a, &b] {
        assert_eq!(
            events
                .iter()
                .filter(|e| e["event"]["monitor_id"] == **id)
                .count(),
            3
        );
    }
    let last = r.last().unwrap();
    assert_eq!(last["type"], "ok");
    assert_eq!(last["result"]["last_seq"], seqs[5]);

    // `after` skips what was seen; `follow` streams what comes next.
    let r = request(
        &home,
        &format!(
            r#"{{"v":1,"op":"events_all","after":{},"follow":false}}"#,
            seqs[3]
        ),
        100,
    );
    assert_eq!(r.iter().filter(|e| e["type"] == "event").count(), 2);
    let follower = std::thread::spawn({
        let socket = home.socket();
        let after = seqs[5];
        move || {
            let mut s = UnixStream::connect(socket).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
            writeln!(
                s,
                r#"{{"v":1,"op":"events_all","after":{after},"follow":true}}"#
            )
            .unwrap();
            let mut lines = BufReader::new(s).lines();
            let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
            first
        }
    });
    home.ok(&["--session", "c", "start", "--", "true"]);
    let first = follower.join().unwrap();
    assert_eq!(first["event"]["session"], "c");
    assert_eq!(first["event"]["kind"], "started");
    // Read-only: no consumer appeared.
    assert_eq!(
        home.json(&["consumers", "--all-sessions"]),
        Value::Array(vec![])
    );
}
