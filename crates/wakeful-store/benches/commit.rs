//! How long appending to the journal takes: the latency a follower pays for
//! durability (one write to the redo log; the tables follow off the line's
//! way, in `Journal::flush`, which the benchmark runs untimed between
//! appends as the daemon does).
//!
//! ```sh
//! cargo bench --locked -p wakeful-store --bench commit
//! ```
//!
//! Each iteration is timed alone (`sample_size = 1`): one `append` of one
//! `lines` event, or of a batch of 64.
// A benchmark: a failed step ends the run with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use chrono::Utc;
use divan::counter::ItemsCount;
use divan::Bencher;
use wakeful_core::journal::{Journal, JournalEntry};
use wakeful_core::{EventBody, PendingEvent};
use wakeful_store::StoreWriter;

fn main() {
    divan::main();
}

/// Appends between two untimed flushes (the daemon flushes shortly after an
/// append, once the readers it woke have run).
const FLUSH_EVERY: u64 = 64;

/// One `lines` event of one line, as a command monitor sends it.
fn event(i: u64) -> JournalEntry {
    JournalEntry::Event(PendingEvent {
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
    })
}

/// Appends batches of `size` events to a fresh store, each append timed alone.
fn append_batches(bencher: Bencher, size: u64) {
    let dir = tempfile::Builder::new()
        .prefix("wakeful-bench-commit-")
        .tempdir()
        .expect("create a temp dir");
    let (writer, _reader) = wakeful_store::open(&dir.path().join("w.db")).expect("open the store");
    let writer = std::cell::RefCell::new(writer);
    let mut next = 0u64;
    bencher
        .counter(ItemsCount::new(size))
        .with_inputs(|| {
            let mut w = writer.borrow_mut();
            if next % FLUSH_EVERY < size {
                w.flush().expect("flush");
            }
            let batch: Vec<JournalEntry> = (next..next + size).map(event).collect();
            next += size;
            batch
        })
        .bench_local_refs(|batch| {
            let w: &mut StoreWriter = &mut writer.borrow_mut();
            w.append(batch).expect("append")
        });
}

/// One `lines` event a commit.
#[divan::bench(sample_size = 1, sample_count = 2000)]
fn one_event(bencher: Bencher) {
    append_batches(bencher, 1);
}

/// 64 `lines` events in one commit (a flood's batch).
#[divan::bench(sample_size = 1, sample_count = 500)]
fn batch_of_64(bencher: Bencher) {
    append_batches(bencher, 64);
}
