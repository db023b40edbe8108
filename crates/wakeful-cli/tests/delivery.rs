//! Delivery under faults: `wakeful wait` clients killed at random instants.
//! Every event is delivered at least once, an event is acknowledged only
//! after its waiter wrote it out, and nothing acknowledged is delivered
//! again.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

use common::{eventually, Home};
use serde_json::Value;

const CONSUMER: &str = "rnd";

/// The consumer's entry in `consumers`, if it has one yet.
fn consumer(home: &Home) -> Option<Value> {
    home.json(&["consumers"])
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["consumer"] == CONSUMER)
        .cloned()
}

/// The consumer's cursor (0 before its first acknowledgement).
fn cursor(home: &Home) -> u64 {
    consumer(home).map_or(0, |c| c["acked_seq"].as_u64().unwrap())
}

/// Until the daemon has seen the killed waiter's connection close: it
/// reads a connection in order, so an acknowledgement the waiter sent before
/// it died has been applied by then (or never will be).
fn waiter_gone(home: &Home) {
    assert!(
        eventually(Duration::from_secs(10), || {
            consumer(home).is_none_or(|c| c["waiters"] == 0)
        }),
        "the killed waiter is still attached"
    );
}

/// The seqs of the complete event lines a waiter wrote.
fn seqs_of(out: &[u8]) -> Vec<u64> {
    let text = String::from_utf8_lossy(out);
    let complete = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    complete
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["seq"].as_u64())
        .collect()
}

fn all_seqs(home: &Home) -> Vec<u64> {
    home.json_lines(&["events"])
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect()
}

#[test]
fn waiters_killed_at_random_instants_lose_nothing_and_repeat_nothing_acknowledged() {
    let home = Home::new();
    home.ok(&["status"]);
    let seed = std::env::var("WAKEFUL_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    fastrand::seed(seed);
    let mut delivered: BTreeSet<u64> = BTreeSet::new();
    let mut acked = 0u64;
    let mut kills = 0;
    for round in 0..200 {
        // New events every round: a short monitor (started, lines, stopped).
        home.ok(&["start", "--", &format!("echo round-{round}")]);
        let mut waiter = home
            .cmd(&[
                "--json",
                "wait",
                "--consumer",
                CONSUMER,
                "--timeout-ms",
                "3000",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The random instant of the kill is what this test is about.
        std::thread::sleep(Duration::from_micros(fastrand::u64(0..6_000)));
        if waiter.try_wait().unwrap().is_none() {
            kills += 1;
        }
        let _ = waiter.kill();
        let _ = waiter.wait();
        waiter_gone(&home);
        let mut out = Vec::new();
        waiter.stdout.take().unwrap().read_to_end(&mut out).unwrap();
        let seqs = seqs_of(&out);
        let now = cursor(&home);
        assert!(
            now >= acked,
            "seed {seed}, round {round}: the cursor moved back"
        );
        for s in &seqs {
            assert!(
                *s > acked,
                "seed {seed}, round {round}: event {s} was acknowledged (cursor {acked}) and delivered again"
            );
        }
        // Acknowledged only after it was written out: everything up to the
        // new cursor is in this waiter's output.
        let newly: Vec<u64> = all_seqs(&home)
            .into_iter()
            .filter(|s| *s > acked && *s <= now)
            .collect();
        for s in &newly {
            assert!(
                seqs.contains(s),
                "seed {seed}, round {round}: event {s} was acknowledged but not written out: {seqs:?}"
            );
        }
        delivered.extend(seqs);
        acked = now;
    }
    assert!(
        kills > 50,
        "seed {seed}: only {kills} waiters were killed mid-way"
    );
    // A last waiter, not killed, takes the rest.
    loop {
        let out = home
            .cmd(&[
                "--json",
                "wait",
                "--consumer",
                CONSUMER,
                "--timeout-ms",
                "1000",
            ])
            .output()
            .unwrap();
        let seqs = seqs_of(&out.stdout);
        assert!(seqs.iter().all(|s| *s > acked), "seed {seed}: repeated");
        delivered.extend(seqs);
        acked = cursor(&home);
        if out.status.code() == Some(124) {
            break;
        }
    }
    let all = all_seqs(&home);
    assert_eq!(all.len(), 600, "seed {seed}: 3 events per round");
    let missing: Vec<&u64> = all.iter().filter(|s| !delivered.contains(s)).collect();
    assert!(
        missing.is_empty(),
        "seed {seed}: never delivered: {missing:?}"
    );
    assert_eq!(acked, *all.last().unwrap());
}
