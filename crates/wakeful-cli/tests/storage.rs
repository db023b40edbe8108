//! Living on a small, full disk (docs/STORAGE.md): the real daemon in a
//! `WAKEFUL_HOME` on a tmpfs of its own. Mounting needs root (CI runs as
//! root); elsewhere these tests say they skipped.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{eventually, Home, Tmpfs};

/// One test of this file at a time: their timings (a list under 200 ms
/// during a flood) are about wakeful, not about the other tests' load.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// A home on a fresh tmpfs of `size`, with `config` as its config.toml.
/// Field order: the home (its daemon) goes before the filesystem.
struct Small {
    home: Home,
    fs: Tmpfs,
}

fn small(size: &str, config: &str) -> Option<Small> {
    let fs = Tmpfs::mount(size)?;
    let home = Home::new_in(fs.path());
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    Some(Small { home, fs })
}

/// `events --follow --json` of session `t`, its lines as they come.
fn follow(home: &Home) -> (Child, std::sync::mpsc::Receiver<serde_json::Value>) {
    let mut child = home
        .cmd(&["--json", "events", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            let Ok(v) = serde_json::from_str(&line) else {
                continue;
            };
            if tx.send(v).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// Waits (up to `limit`) for an event matching `want`; returns it and
/// how long it took.
fn expect(
    rx: &std::sync::mpsc::Receiver<serde_json::Value>,
    limit: Duration,
    want: impl Fn(&serde_json::Value) -> bool,
) -> Option<(serde_json::Value, Duration)> {
    let start = Instant::now();
    let deadline = start + limit;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        match rx.recv_timeout(left) {
            Ok(v) if want(&v) => return Some((v, start.elapsed())),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

#[test]
fn a_flood_on_a_small_disk_leaves_the_keep_free_space_and_nothing_stalls() {
    let _serial = serial();
    let keep = 8u64 << 20;
    let Some(s) = small("40m", "[store]\nkeep_free = \"8MiB\"\n") else {
        return;
    };
    let home = &s.home;
    let flood = home.json(&["start", "-d", "flood", "--", "yes flood-line"]);
    let flood_id = flood["id"].as_str().unwrap().to_string();
    let (mut follower, rx) = follow(home);
    let started = Instant::now();
    let mut slowest_list = Duration::ZERO;
    let mut least_free = u64::MAX;
    let mut line_latency = Vec::new();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(10) {
        let t = Instant::now();
        let (code, _, err) = home.run(&["list"]);
        assert_eq!(code, 0, "{err}");
        slowest_list = slowest_list.max(t.elapsed());
        least_free = least_free.min(s.fs.free());
        if n % 4 == 0 {
            // A second monitor's line reaches a follower within a second.
            let mark = format!("second-{n}");
            let t = Instant::now();
            home.ok(&["start", "-d", "second", "--", &format!("echo {mark}")]);
            let got = expect(&rx, Duration::from_secs(5), |v| {
                v["kind"] == "lines" && v["text"].as_str().is_some_and(|t| t.contains(&mark))
            });
            let (_, _) = got.unwrap_or_else(|| panic!("{mark} never reached events --follow"));
            line_latency.push(t.elapsed());
        }
        n += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = home.json(&["status"]);
    home.ok(&["stop", &flood_id]);
    let _ = follower.kill();
    let _ = follower.wait();
    eprintln!(
        "flood on a 40 MiB tmpfs for 10 s: least free {} KiB (keep-free {} KiB), slowest list {:?}, second monitor's line {:?} at worst",
        least_free >> 10,
        keep >> 10,
        slowest_list,
        line_latency.iter().max()
    );
    // What the database writes meanwhile (events are still recorded) may
    // take a little of the keep-free space; output files take none of it.
    assert!(
        least_free + (1 << 20) >= keep,
        "the flood took the keep-free space: {least_free} bytes free"
    );
    assert!(
        slowest_list < Duration::from_millis(200),
        "list took {slowest_list:?}"
    );
    assert!(
        line_latency.iter().all(|l| *l < Duration::from_secs(1)),
        "{line_latency:?}"
    );
    assert_eq!(status["storage"]["disk_low"], true, "{status}");
    assert!(
        status["storage"]["output_not_written_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    // The flood's session heard of the hole, with the lines it covers.
    let events = home.json_lines(&["events"]);
    let hole = events
        .iter()
        .find(|e| e["kind"] == "output_dropped" && e["monitor_id"] == flood_id.as_str())
        .unwrap_or_else(|| panic!("no output_dropped event"));
    assert_eq!(hole["reason"], "disk_low");
    let from = hole["from_line"].as_u64().unwrap();
    assert!(
        hole["text"].as_str().unwrap().contains("not written"),
        "{hole}"
    );
    // `wakeful output` says so where the lines are missing, and shows no
    // other lines in their place.
    let out = home.ok(&[
        "output",
        &flood_id,
        "--from-line",
        &(from - 1).to_string(),
        "--to-line",
        &(from + 1).to_string(),
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "flood-line", "{out}");
    assert!(
        lines[1].starts_with(&format!("[wakeful: output lines {from}–"))
            && lines[1].contains("disk was low"),
        "{out}"
    );
    assert_eq!(lines.len(), 2, "the range is one line: {out}");
}

/// Starts a monitor printing `tick N` ten times a second; its id.
fn ticker(home: &Home) -> String {
    let m = home.json(&[
        "start",
        "-d",
        "ticker",
        "--batch-ms",
        "0",
        "--",
        "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done",
    ]);
    m["id"].as_str().unwrap().to_string()
}

/// Fills the filesystem with one file; returns its path.
fn fill(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![0u8; 1 << 20];
    while f.write_all(&block).is_ok() {}
    let small = [0u8; 4096];
    while f.write_all(&small).is_ok() {}
    let _ = f.flush();
    path
}

#[test]
fn a_full_disk_refuses_writes_at_once_answers_reads_and_resumes_by_itself() {
    let _serial = serial();
    let Some(s) = small("24m", "[store]\nkeep_free = \"1MiB\"\n") else {
        return;
    };
    let home = &s.home;
    let ticker_id = ticker(home);
    let (mut follower, rx) = follow(home);
    assert!(expect(&rx, Duration::from_secs(5), |v| v["kind"] == "lines").is_some());
    let filler = fill(s.fs.path());
    assert!(s.fs.free() < 64 << 10, "{} free", s.fs.free());
    // A request that must write fails within a second, says why and what
    // to do, and starts nothing.
    let t = Instant::now();
    let (code, _, err) = home.run(&["start", "-d", "refused", "--", "echo never"]);
    let took = t.elapsed();
    assert_eq!(code, 1, "{err}");
    assert!(took < Duration::from_secs(1), "start took {took:?}");
    assert!(err.contains(&home.path().display().to_string()), "{err}");
    assert!(
        err.contains("full") && err.contains("free") && err.contains("try again"),
        "{err}"
    );
    let (code, _, err) = home.run(&["run", "--until", "exit", "--", "echo never"]);
    assert_eq!(code, 1, "{err}");
    // Reads answer at once.
    for args in [
        vec!["list"],
        vec!["status"],
        vec!["events"],
        vec!["output", ticker_id.as_str()],
        vec!["consumers"],
    ] {
        let t = Instant::now();
        let (code, out, err) = home.run(&args);
        assert_eq!(code, 0, "{args:?}: {err}{out}");
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "{args:?} took {:?}",
            t.elapsed()
        );
    }
    let status = home.json(&["status"]);
    assert_eq!(status["storage"]["disk_full"], true, "{status}");
    let list = home.json(&["list"]);
    assert!(
        !list
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["description"] == "refused"),
        "nothing was started: {list}"
    );
    // Space returns: the daemon resumes by itself, within one retry period.
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::remove_file(&filler).unwrap();
    let t = Instant::now();
    assert!(eventually(Duration::from_secs(7), || {
        home.run(&["start", "-d", "after", "--", "echo back-again"])
            .0
            == 0
    }));
    let back = expect(&rx, Duration::from_secs(10), |v| {
        v["text"].as_str().is_some_and(|t| t.contains("back-again"))
    });
    assert!(
        back.is_some(),
        "the follower never saw the new monitor's line"
    );
    eprintln!("resumed {:?} after the space came back", t.elapsed());
    home.ok(&["stop", &ticker_id]);
    let _ = follower.kill();
    let _ = follower.wait();
    // No event lost, none repeated: seqs only grow, and the ticker's line
    // events cover its lines 1..N without a gap or a repeat.
    let events = home.json_lines(&["events"]);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let all = home.json_lines(&["events"]);
    let mut next = 1;
    for e in all.iter().filter(|e| e["monitor_id"] == ticker_id.as_str()) {
        if e["kind"] == "lines" || e["kind"] == "suppressed" {
            assert_eq!(e["from_line"].as_u64().unwrap(), next, "{e}");
            next = e["to_line"].as_u64().unwrap() + 1;
        }
    }
    assert!(next > 10, "ticker lines: {next}");
    let ended = all
        .iter()
        .filter(|e| {
            e["monitor_id"] == ticker_id.as_str()
                && (e["kind"] == "stopped" || e["kind"] == "failed")
        })
        .count();
    assert_eq!(ended, 1);
    // The log is written again.
    let log = std::fs::read_to_string(home.path().join("daemon.log")).unwrap();
    assert!(
        log.contains("log record(s) could not be written") || log.contains("failed"),
        "{log}"
    );
}

#[test]
fn ended_monitors_are_pruned_by_age_and_every_prune_is_told() {
    let _serial = serial();
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[store]\nmax_age = \"2s\"\n",
    )
    .unwrap();
    let m = home.json(&["start", "-d", "short", "--", "echo one; echo two"]);
    let id = m["id"].as_str().unwrap().to_string();
    assert!(eventually(Duration::from_secs(5), || {
        home.json(&["list"])
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["id"] == id.as_str() && i["state"] == "ended")
    }));
    let output = home.path().join("output").join(format!("{id}.log"));
    assert!(output.exists());
    // Past 2 s the daemon prunes it by itself (a tenth of max_age later at
    // most): no row, no events, no output file.
    assert!(
        eventually(Duration::from_secs(8), || !output.exists()),
        "the output file stayed"
    );
    assert!(!home
        .json(&["list"])
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["id"] == id.as_str()));
    assert!(home
        .json_lines(&["events"])
        .iter()
        .all(|e| e["monitor_id"] != id.as_str()));
    let (code, _, _) = home.run(&["output", &id]);
    assert_eq!(code, 3, "a pruned monitor is not found");
    // Told: status, the log, and the export.
    let status = home.json(&["status"]);
    let last = &status["storage"]["last_prune"];
    assert!(last["events"].as_u64().unwrap() >= 3, "{status}");
    assert_eq!(last["causes"][0], "age");
    let plain = home.ok(&["status"]);
    assert!(plain.contains("last prune:       pruned"), "{plain}");
    let log = std::fs::read_to_string(home.path().join("daemon.log")).unwrap();
    assert!(log.contains("pruned") && log.contains("monitor"), "{log}");
    home.ok(&["start", "-d", "later", "--", "echo later"]);
    let export = home.ok(&["export"]);
    assert!(
        export.lines().any(|l| l.starts_with("{\"prune\":")),
        "{export}"
    );
    // `wakeful prune --dry-run` says nothing is left to do; `prune` agrees.
    assert!(home
        .ok(&["prune", "--dry-run"])
        .starts_with("nothing to prune"));
    let r = home.json(&["prune"]);
    assert_eq!(r["dry_run"], false);
}

/// An export of `monitors` ended monitors with `events` events each,
/// from long ago.
fn old_export(monitors: usize, events: usize) -> String {
    let mut out = String::from(
        "{\"wakeful_export\":1,\"wakeful_version\":\"0.1.0\",\"host\":\"old-host\",\"exported_at\":\"2020-01-02T00:00:00.000Z\"}\n",
    );
    let mut seq = 0;
    for m in 0..monitors {
        let id = format!("mon-old{m:04}");
        seq += 1;
        out.push_str(&format!("{{\"seq\":{seq},\"session\":\"t\",\"monitor_id\":\"{id}\",\"kind\":\"started\",\"ts\":\"2020-01-01T00:00:00.000Z\",\"text\":\"started\"}}\n"));
        for n in 1..=events {
            seq += 1;
            out.push_str(&format!("{{\"seq\":{seq},\"session\":\"t\",\"monitor_id\":\"{id}\",\"kind\":\"lines\",\"ts\":\"2020-01-01T00:00:01.000Z\",\"text\":\"line {n}\",\"lines\":[\"line {n} of an old build, long enough to take some room\"],\"count\":1,\"from_line\":{n},\"to_line\":{n}}}\n"));
        }
        seq += 1;
        out.push_str(&format!("{{\"seq\":{seq},\"session\":\"t\",\"monitor_id\":\"{id}\",\"kind\":\"stopped\",\"ts\":\"2020-01-01T00:10:00.000Z\",\"text\":\"done\",\"stop_reason\":{{\"kind\":\"exit\",\"code\":0}}}}\n"));
    }
    out
}

#[test]
fn a_kill_in_the_middle_of_a_prune_leaves_a_consistent_store() {
    let _serial = serial();
    let home = Home::new();
    let file = home.path().join("old.jsonl");
    let mut killed_mid_prune = 0;
    for round in 0..3 {
        std::fs::write(
            &file,
            old_export(40, 1500).replace("mon-old", &format!("mon-r{round}o")),
        )
        .unwrap();
        home.ok(&["import", file.to_str().unwrap()]);
        home.ok(&["start", "-d", "anchor", "--", "echo anchor"]);
        let acked = home.json_lines(&["wait", "--all", "--timeout-ms", "5000"]);
        let cursor = acked.last().unwrap()["seq"].as_u64().unwrap();
        let latest = home.json(&["status"])["last_seq"].as_u64().unwrap();
        let pid = home.daemon_pid().unwrap();
        let count = |db: &rusqlite::Connection| -> i64 {
            db.query_row(
                "SELECT COUNT(*) FROM events WHERE monitor_id LIKE ?1",
                [format!("mon-r{round}o%")],
                |r| r.get(0),
            )
            .unwrap_or(-1)
        };
        let watch = rusqlite::Connection::open(home.path().join("wakeful.db")).unwrap();
        let before = count(&watch);
        let mut prune = home
            .cmd(&["prune"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // In the middle of the prune: it removes 60,000 events in chunks,
        // one transaction each; kill once the first chunks went.
        assert!(eventually(Duration::from_secs(20), || count(&watch) < before));
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        drop(watch);
        let _ = prune.wait();
        assert!(eventually(Duration::from_secs(5), || {
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
        }));
        // The store as the killed daemon left it.
        let db = rusqlite::Connection::open(home.path().join("wakeful.db")).unwrap();
        let check: String = db
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        let left: i64 = db
            .query_row(
                "SELECT COUNT(*) FROM events WHERE monitor_id LIKE ?1",
                [format!("mon-r{round}o%")],
                |r| r.get(0),
            )
            .unwrap();
        if left > 0 && left < 40 * 1502 {
            killed_mid_prune += 1;
        }
        drop(db);
        // The next daemon: cursors where they were, seqs go on past all
        // given before, and a prune finishes the work.
        let status = home.json(&["status"]);
        assert!(status["last_seq"].as_u64().unwrap() >= latest);
        let consumers = home.json(&["consumers"]);
        let default = consumers
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["consumer"] == "default")
            .unwrap_or_else(|| panic!("{consumers}"));
        assert_eq!(default["acked_seq"].as_u64().unwrap(), cursor);
        let m = home.json(&["start", "-d", "after", "--", "echo after"]);
        let first = home
            .json_lines(&["events"])
            .into_iter()
            .find(|e| e["monitor_id"] == m["id"])
            .unwrap();
        assert!(
            first["seq"].as_u64().unwrap() > latest,
            "a seq was given twice"
        );
        home.ok(&["prune"]);
        let db = rusqlite::Connection::open(home.path().join("wakeful.db")).unwrap();
        let left: i64 = db
            .query_row(
                "SELECT COUNT(*) FROM events WHERE monitor_id LIKE ?1",
                [format!("mon-r{round}o%")],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(left, 0);
        let rows: i64 = db
            .query_row(
                "SELECT COUNT(*) FROM monitors WHERE id LIKE ?1",
                [format!("mon-r{round}o%")],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(rows, 0);
    }
    eprintln!("{killed_mid_prune} of 3 kills landed in the middle of a prune");
    assert!(
        killed_mid_prune >= 2,
        "the kills did not land inside the prunes: make them longer"
    );
}

#[test]
fn a_daemon_stops_on_a_full_disk_and_the_next_one_ends_what_it_could_not() {
    let _serial = serial();
    let Some(s) = small("24m", "[store]\nkeep_free = \"1MiB\"\n") else {
        return;
    };
    let home = &s.home;
    let id = ticker(home);
    let pid = home.daemon_pid().unwrap();
    let filler = fill(s.fs.path());
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    let (code, _, err) = home.run(&["daemon", "stop"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "daemon stop took {:?}",
        t.elapsed()
    );
    assert!(eventually(Duration::from_secs(5), || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    }));
    assert_eq!(common::live_of(&id), 0, "the ticker survived the daemon");
    std::fs::remove_file(filler).unwrap();
    // The next daemon records the end the stopping one could not.
    let events = home.json_lines(&["events"]);
    let end: Vec<_> = events
        .iter()
        .filter(|e| {
            e["monitor_id"] == id.as_str() && (e["kind"] == "stopped" || e["kind"] == "failed")
        })
        .collect();
    assert_eq!(end.len(), 1, "{end:?}");
    assert_eq!(end[0]["stop_reason"]["kind"], "daemon_stopped");
}
