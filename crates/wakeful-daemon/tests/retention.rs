//! Retention over simulated time: a month of chatty monitors in a real
//! store and real output files, pruned by the daemon's own prune with the
//! clock passed in (docs/STORAGE.md).
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use wakeful_core::journal::{JournalEntry, Registration};
use wakeful_core::storage::{ByteSize, KeepFree, PruneCause, Span};
use wakeful_core::{EventBody, MonitorInfo, MonitorSpec, MonitorStopReason, PendingEvent};
use wakeful_daemon::config::StoreOptions;
use wakeful_daemon::storage::{output_sizes, Storage};
use wakeful_engine::{DiskGuard, Hub, MonitorRegistry, RegistryConfig};

const MONITORS_A_DAY: usize = 20;
const LINES_A_MONITOR: u64 = 60;

fn event(id: &str, ts: DateTime<Utc>, body: EventBody, text: String) -> JournalEntry {
    JournalEntry::Event(PendingEvent {
        session: "s".into(),
        monitor_id: id.into(),
        ts,
        text,
        body,
        wakes: true,
        replayed: false,
        host: None,
    })
}

/// One monitor that ran on `day` (its events and its output file).
async fn chatty(hub: &Hub, output: &Path, id: &str, start: DateTime<Utc>) {
    let mut info = MonitorInfo::starting(
        id.into(),
        "s".into(),
        &MonitorSpec::command("make", "build"),
        output.join(format!("{id}.log")),
    );
    info.started_at = start;
    let mut batch = vec![JournalEntry::Registered(Box::new(Registration {
        info,
        spec: MonitorSpec::command("make", "build"),
        base_env: None,
        base_cwd: None,
    }))];
    batch.push(event(
        id,
        start,
        EventBody::MonitorStarted,
        "started".into(),
    ));
    let mut file = String::new();
    for n in 1..=LINES_A_MONITOR {
        let line = format!("{id} compiling unit {n:04} {}", "x".repeat(180));
        file.push_str(&line);
        file.push('\n');
        batch.push(event(
            id,
            start + Duration::seconds(n as i64),
            EventBody::MonitorEvent {
                lines: vec![line.clone()],
                from_line: n,
                to_line: n,
            },
            line,
        ));
    }
    // Most of the output never became events (a filter, the rate limit).
    file.push_str(&"quiet output line\n".repeat(4000));
    std::fs::write(output.join(format!("{id}.log")), file).unwrap();
    batch.push(event(
        id,
        start + Duration::minutes(5),
        EventBody::MonitorStopped {
            reason: MonitorStopReason::ExitCode { code: 0 },
            last_lines: vec![],
            survivors: vec![],
            unverified: None,
        },
        "build: exited with code 0".into(),
    ));
    hub.append(batch).await.unwrap();
}

struct Sim {
    _dir: tempfile::TempDir,
    output: std::path::PathBuf,
    storage: Arc<Storage>,
    registry: MonitorRegistry,
    reader: wakeful_store::StoreReader,
}

fn sim(options: StoreOptions) -> Sim {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("output");
    std::fs::create_dir_all(&output).unwrap();
    let (writer, reader) = wakeful_store::open(&dir.path().join("wakeful.db")).unwrap();
    let pruner = writer.pruner().unwrap();
    let hub = Hub::new(writer, 0, None);
    let disk = DiskGuard::new(dir.path(), KeepFree::Bytes(ByteSize(0)));
    let registry = MonitorRegistry::with_hub(
        RegistryConfig {
            output_dir: output.clone(),
            ..RegistryConfig::default()
        },
        hub,
    );
    let storage = Storage::new(
        output.clone(),
        &options,
        disk,
        pruner,
        registry.clone(),
        reader.clone(),
    );
    Sim {
        _dir: dir,
        output,
        storage,
        registry,
        reader,
    }
}

fn day(n: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 8, 0, 0).unwrap() + Duration::days(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_month_of_chatty_monitors_stays_under_the_caps_and_keeps_the_window() {
    let options = StoreOptions {
        max_age: Span::days(7),
        max_size: ByteSize::mib(48),
        output_total: ByteSize::mib(32),
        ..StoreOptions::default()
    };
    let s = sim(options.clone());
    let hub = s.registry.hub().clone();
    let mut prunes = 0;
    let mut largest = 0;
    for d in 0..30 {
        for m in 0..MONITORS_A_DAY {
            let start = day(d) + Duration::minutes(m as i64 * 30);
            chatty(&hub, &s.output, &format!("mon-d{d:02}m{m:02}"), start).await;
        }
        let now = day(d) + Duration::hours(23);
        let r = s.storage.prune(now, false).await.unwrap();
        if !r.monitors.is_empty() || !r.outputs.is_empty() {
            prunes += 1;
            // Announced: kept as a record that status and export show.
            let records = s.reader.prunes(Some(now)).unwrap();
            assert_eq!(records.last().unwrap(), &r.record, "day {d}");
            assert!(r.record.events > 0, "day {d}: {:?}", r.record);
        }
        let status = s.storage.status();
        let total = status.database_bytes + status.output_bytes;
        largest = largest.max(total);
        assert!(
            total <= options.max_size.0,
            "day {d}: {} over {}",
            ByteSize(total),
            options.max_size
        );
        assert!(status.output_bytes <= options.output_total.0, "day {d}");
        // Nothing within the window is lost: every monitor that ended in
        // the last 7 days has all its events and its output file.
        for back in 0..7 {
            let dd = d - back;
            if dd < 0 {
                break;
            }
            let ended = day(dd) + Duration::minutes(5);
            if now - ended >= Duration::days(7) {
                continue;
            }
            for m in 0..MONITORS_A_DAY {
                let id = format!("mon-d{dd:02}m{m:02}");
                let n = s
                    .reader
                    .events_after(None, Some(&id), 0, 1000)
                    .unwrap()
                    .len();
                assert_eq!(n as u64, LINES_A_MONITOR + 2, "day {d}: {id}");
                assert!(s.output.join(format!("{id}.log")).exists(), "day {d}: {id}");
            }
        }
    }
    // Older ones went, day by day, oldest first, every prune announced.
    assert!(prunes >= 20, "{prunes} prunes");
    let sizes = output_sizes(&s.output);
    assert!(!sizes.contains_key("mon-d00m00"));
    assert!(s.reader.monitor("mon-d00m00").unwrap().is_none());
    assert!(s.reader.monitor("mon-d29m19").unwrap().is_some());
    // Seqs go on past what was pruned.
    assert_eq!(
        s.reader.latest_seq().unwrap(),
        30 * 20 * (LINES_A_MONITOR + 2)
    );
    let status = s.storage.status();
    assert_eq!(
        status.last_prune.as_ref().map(|p| p.at),
        Some(day(29) + Duration::hours(23))
    );
    eprintln!(
        "30 days, {} monitors: largest {} (cap {}), {prunes} prunes, {} events pruned in all",
        30 * MONITORS_A_DAY,
        ByteSize(largest),
        options.max_size,
        status.pruned_events
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_size_cap_prunes_before_the_age_limit_oldest_first_and_never_a_running_monitor() {
    let options = StoreOptions {
        max_age: Span::days(30),
        max_size: ByteSize::mib(6),
        output_total: ByteSize::mib(4),
        ..StoreOptions::default()
    };
    let s = sim(options.clone());
    let hub = s.registry.hub().clone();
    // A monitor that runs all along: registered, never ended.
    let mut info = MonitorInfo::starting(
        "mon-running".into(),
        "s".into(),
        &MonitorSpec::command("tail -F x", "tail"),
        s.output.join("mon-running.log"),
    );
    info.started_at = day(0);
    hub.append(vec![
        JournalEntry::Registered(Box::new(Registration {
            info,
            spec: MonitorSpec::command("tail -F x", "tail"),
            base_env: None,
            base_cwd: None,
        })),
        event(
            "mon-running",
            day(0),
            EventBody::MonitorStarted,
            "started".into(),
        ),
    ])
    .await
    .unwrap();
    for d in 0..10 {
        for m in 0..5 {
            chatty(
                &hub,
                &s.output,
                &format!("mon-d{d:02}m{m}"),
                day(d) + Duration::minutes(m),
            )
            .await;
        }
        let r = s
            .storage
            .prune(day(d) + Duration::hours(12), false)
            .await
            .unwrap();
        let status = s.storage.status();
        assert!(
            status.database_bytes + status.output_bytes <= options.max_size.0,
            "day {d}: {status:?}"
        );
        // What went is the oldest there was.
        if let Some(first) = r.monitors.first() {
            let kept_oldest = (0..=d)
                .flat_map(|dd| (0..5).map(move |m| format!("mon-d{dd:02}m{m}")))
                .find(|id| s.reader.monitor(id).unwrap().is_some());
            if let Some(kept) = kept_oldest {
                assert!(
                    first.id < kept,
                    "day {d}: pruned {} while {kept} is older",
                    first.id
                );
            }
        }
    }
    assert!(
        s.reader.monitor("mon-d00m0").unwrap().is_none(),
        "pruned by size, well before 30 days"
    );
    assert!(s.reader.monitor("mon-running").unwrap().is_some());
    assert_eq!(
        s.reader
            .events_after(None, Some("mon-running"), 0, 10)
            .unwrap()
            .len(),
        1,
        "a running monitor keeps its events"
    );
    // The dry run says what would go and removes nothing.
    let before = s.reader.latest_seq().unwrap();
    let dry = s.storage.prune(day(60), true).await.unwrap();
    assert!(dry.dry_run && !dry.monitors.is_empty());
    assert!(s.reader.monitor(&dry.monitors[0].id).unwrap().is_some());
    assert_eq!(s.reader.latest_seq().unwrap(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_that_runs_for_a_month_keeps_the_store_under_its_cap() {
    let options = StoreOptions {
        max_age: Span::days(7),
        max_size: ByteSize::mib(16),
        output_total: ByteSize::mib(1),
        output_max: ByteSize::mib(1),
        ..StoreOptions::default()
    };
    let s = sim(options.clone());
    let hub = s.registry.hub().clone();
    let id = "mon-devserver";
    let mut info = MonitorInfo::starting(
        id.into(),
        "s".into(),
        &MonitorSpec::command("npm run dev", "dev"),
        s.output.join(format!("{id}.log")),
    );
    info.started_at = day(0);
    hub.append(vec![
        JournalEntry::Registered(Box::new(Registration {
            info,
            spec: MonitorSpec::command("npm run dev", "dev"),
            base_env: None,
            base_cwd: None,
        })),
        event(id, day(0), EventBody::MonitorStarted, "started".into()),
    ])
    .await
    .unwrap();
    // A dev server that never ends, a day's events at a time: 30 days of
    // 4,000 line events of ~400 bytes each, about 46 MiB in all, three
    // times the cap. Retention alone (ended monitors only) could not hold
    // it. (The cap is large beside the redo log, about 1 MiB, which only
    // the next fold empties.)
    let mut line_no = 0u64;
    let mut trimmed = 0u64;
    for d in 0..30 {
        let mut batch = Vec::new();
        for n in 0..4_000 {
            line_no += 1;
            let line = format!("GET /api/items/{line_no} 200 {}", "x".repeat(160));
            batch.push(event(
                id,
                day(d) + Duration::seconds(n * 20),
                EventBody::MonitorEvent {
                    lines: vec![line.clone()],
                    from_line: line_no,
                    to_line: line_no,
                },
                line,
            ));
        }
        hub.append(batch).await.unwrap();
        let r = s
            .storage
            .prune(day(d) + Duration::hours(23), false)
            .await
            .unwrap();
        let status = s.storage.status();
        assert!(
            status.database_bytes + status.output_bytes <= options.max_size.0,
            "day {d}: {} over {}",
            ByteSize(status.database_bytes + status.output_bytes),
            options.max_size
        );
        if r.record.running_events > 0 {
            // Announced like every prune, and said to be a running one's.
            assert_eq!(r.record.running_monitors, 1, "day {d}");
            assert!(r.record.causes.contains(&PruneCause::Size), "day {d}");
            assert!(
                r.record.to_string().contains("of 1 running monitor"),
                "{}",
                r.record
            );
            let records = s.reader.prunes(None).unwrap();
            assert_eq!(records.last().unwrap(), &r.record, "day {d}");
            trimmed += r.record.running_events;
        }
    }
    assert!(trimmed > 50_000, "the oldest events went: {trimmed}");
    // What is left is the start and the newest events, contiguous.
    let left = s.reader.events_after(None, Some(id), 0, 100_000).unwrap();
    assert!(matches!(left[0].body, EventBody::MonitorStarted));
    assert_eq!(left.len() as u64, 120_000 + 1 - trimmed);
    let seqs: Vec<u64> = left[1..].iter().map(|e| e.seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "newest kept whole"
    );
    assert_eq!(*seqs.last().unwrap(), s.reader.latest_seq().unwrap());
    assert!(s.reader.monitor(id).unwrap().is_some(), "the monitor stays");
}
