//! How long appending one event to the journal takes (the latency a follower
//! pays for durability: one write to the redo log; the tables follow off the
//! line's way): `cargo run --release -p wakeful-store --example commit_cost`.
// A benchmark: a failed step ends the run with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use chrono::Utc;
use wakeful_core::journal::{Journal, JournalEntry};
use wakeful_core::{EventBody, PendingEvent};

fn main() {
    let dir = std::env::temp_dir().join(format!("wakeful-commit-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (mut writer, _reader) = wakeful_store::open(&dir.join("w.db")).expect("open the store");
    let mut times = Vec::new();
    for i in 0..2000u64 {
        let mut batch = vec![JournalEntry::Event(PendingEvent {
            wakes: true,
            session: "s".into(),
            monitor_id: format!("mon-{}", i % 20),
            ts: Utc::now(),
            text: format!("line {i}"),
            body: EventBody::MonitorEvent {
                lines: vec![format!("line {i}")],
                from_line: i,
                to_line: i,
            },
            replayed: false,
            host: None,
        })];
        let t = Instant::now();
        writer.append(&mut batch).expect("append");
        times.push(t.elapsed().as_micros() as u64);
    }
    times.sort_unstable();
    println!(
        "single-event commit: median {} µs, p90 {} µs, p99 {} µs over {} commits",
        times[times.len() / 2],
        times[times.len() * 9 / 10],
        times[times.len() * 99 / 100],
        times.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
