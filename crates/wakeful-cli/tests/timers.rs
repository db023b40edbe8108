//! Timers end to end (`start --in/--at/--cron --say`): one wake at the
//! deadline, exactly one across a `kill -9` of the daemon, a late fire
//! after a deadline that passed while no daemon ran, and bad input refused
//! with exit 2 before anything starts.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::{eventually, Home};
use serde_json::Value;

fn start_timer(home: &Home, args: &[&str]) -> (String, DateTime<Utc>) {
    let mut a = vec!["start"];
    a.extend_from_slice(args);
    let id = home.json(&a)["id"].as_str().unwrap().to_string();
    let m = home.listed(&id).expect("the timer is listed");
    let due = m["source"]["due"].as_str().unwrap().parse().unwrap();
    (id, due)
}

/// The fired events of monitor `id` in the session's log.
fn fires(home: &Home, id: &str) -> Vec<Value> {
    home.json_lines(&["events"])
        .into_iter()
        .filter(|e| e["monitor_id"] == id && e["stop_reason"]["kind"] == "fired")
        .collect()
}

#[test]
fn in_2s_wakes_wait_once_at_its_deadline() {
    let home = Home::new();
    let t0 = Instant::now();
    let (id, due) = start_timer(&home, &["--in", "2s", "--say", "check the build"]);
    let listed = home.ok(&["list"]);
    assert!(listed.contains("check the build (due in"), "{listed}");

    let batch = home.json_lines(&["wait", "--timeout-ms", "20000"]);
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "woke after {waited:?}, before the deadline"
    );
    assert!(Utc::now() >= due);
    let fired: Vec<&Value> = batch
        .iter()
        .filter(|e| e["stop_reason"]["kind"] == "fired")
        .collect();
    assert_eq!(fired.len(), 1, "{batch:?}");
    assert_eq!(fired[0]["monitor_id"], id.as_str());
    let text = fired[0]["text"].as_str().unwrap();
    assert!(
        text.contains("check the build") && text.contains("timer fired"),
        "{text}"
    );
    assert!(!text.contains("late"), "{text}");
    // The started event came with it, without waking.
    assert!(batch
        .iter()
        .any(|e| e["kind"] == "started" && e["wake"] == false));

    // Nothing more wakes.
    let (code, out, _) = home.run(&["wait", "--timeout-ms", "2500"]);
    assert_eq!(code, 124, "{out}");
    assert_eq!(fires(&home, &id).len(), 1);
    let listed = home.json(&["list"]);
    assert_eq!(listed[0]["state"], "ended");
}

#[test]
fn a_kill_9_between_start_and_deadline_gives_exactly_one_fire_after_the_restart() {
    let home = Home::new();
    let (id, due) = start_timer(&home, &["--in", "3s", "--say", "after the crash"]);
    home.kill_daemon();
    // The next client starts a new daemon, which re-arms the timer.
    let batch = home.json_lines(&["wait", "--timeout-ms", "20000"]);
    assert!(Utc::now() >= due);
    assert!(
        batch.iter().any(|e| e["stop_reason"]["kind"] == "fired"),
        "{batch:?}"
    );
    let events = home.json_lines(&["events"]);
    let rearmed: Vec<&Value> = events
        .iter()
        .filter(|e| e["monitor_id"] == id.as_str() && e["kind"] == "rearmed")
        .collect();
    assert_eq!(rearmed.len(), 1, "{events:?}");
    assert_eq!(rearmed[0]["wake"], false, "a re-armed timer does not wake");
    assert_eq!(fires(&home, &id).len(), 1, "{events:?}");
}

#[test]
fn a_timer_due_while_no_daemon_ran_fires_once_at_the_next_start_saying_how_late() {
    let home = Home::new();
    let (id, due) = start_timer(&home, &["--in", "1s", "--say", "while away"]);
    home.ok(&["daemon", "stop"]);
    // No daemon runs while the deadline passes, and three seconds more.
    assert!(eventually(Duration::from_secs(10), || {
        Utc::now() > due + chrono::TimeDelta::seconds(3)
    }));
    let batch = home.json_lines(&["wait", "--timeout-ms", "20000"]);
    let fired: Vec<&Value> = batch
        .iter()
        .filter(|e| e["stop_reason"]["kind"] == "fired")
        .collect();
    assert_eq!(fired.len(), 1, "{batch:?}");
    let late = fired[0]["stop_reason"]["late_ms"].as_u64().unwrap();
    assert!(late >= 3000, "late_ms {late}");
    let text = fired[0]["text"].as_str().unwrap();
    assert!(
        text.contains("while away") && text.contains(" late"),
        "{text}"
    );
    assert_eq!(fires(&home, &id).len(), 1);
}

#[test]
fn stop_cancels_a_timer_and_cron_lists_its_next_occurrence() {
    let home = Home::new();
    let (id, _) = start_timer(&home, &["--in", "1h", "--say", "never"]);
    let (cron, _) = start_timer(&home, &["--cron", "0 9 * * *", "--say", "standup"]);
    let listed = home.ok(&["list"]);
    assert!(listed.contains("never (due in 59 min"), "{listed}");
    assert!(listed.contains("standup (due in"), "{listed}");
    home.ok(&["stop", &id]);
    home.ok(&["stop", &cron]);
    assert!(fires(&home, &id).is_empty());
    let listed = home.json(&["list"]);
    assert!(listed
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["state"] == "ended" && m["stop_reason"]["kind"] == "stopped"));
}

#[test]
fn bad_timer_input_exits_2_saying_why_and_starts_nothing() {
    let home = Home::new();
    let cases: [(&[&str], &str); 9] = [
        (&["--in", "0"], "more than 0"),
        (&["--in", "20"], "90s, 20m"),
        (&["--in", "400d"], "366 days"),
        (&["--at", "2001-01-01T00:00:00Z"], "ago"),
        (&["--at", "half past three"], "HH:MM"),
        (&["--cron", "every day"], "five fields"),
        (&["--say", "lonely"], "goes with a timer"),
        (&["--in", "1m", "--timeout-ms", "5000"], "no timeout"),
        (&["--in", "1m", "--", "echo", "x"], "takes no command"),
    ];
    for (args, why) in cases {
        let mut a = vec!["start"];
        a.extend_from_slice(args);
        let (code, out, err) = home.run(&a);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let (code, out, err) = home.run(&["start", "--at", "2001-01-01T00:00:00Z"]);
    assert_eq!(code, 2);
    assert!(err.contains("--in") && out.is_empty(), "{err}");
    assert_eq!(home.json(&["list"]), serde_json::json!([]));
}
