//! End to end: the real `wakeful` binary and daemon in a temporary
//! WAKEFUL_HOME.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use common::{eventually, live_of, Home};
use serde_json::Value;

fn start(home: &Home, args: &[&str]) -> Value {
    let mut a = vec!["start"];
    a.extend_from_slice(args);
    home.json(&a)
}

/// Waits until the daemon counts `n` streaming connections.
fn wait_followers(home: &Home, n: u64) {
    assert!(
        eventually(Duration::from_secs(10), || home.json(&["status"])
            ["followers"]
            == n),
        "the daemon never had {n} followers"
    );
}

fn id_of(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

fn kinds(events: &[Value], id: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["monitor_id"] == id)
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until monitor `id` has ended (its final event is in the log).
fn wait_ended(home: &Home, id: &str) -> Vec<Value> {
    let mut events = vec![];
    assert!(
        eventually(Duration::from_secs(15), || {
            events = home.json_lines(&["events"]);
            kinds(&events, id)
                .iter()
                .any(|k| k == "stopped" || k == "failed")
        }),
        "monitor {id} did not end: {events:?}"
    );
    events
}

#[test]
fn commands_shapes_and_exit_codes() {
    let home = Home::new();
    // Invalid input: exit 2, nothing started, and no daemon needed.
    let (code, _, err) = home.run(&["start", "--timeout-ms", "999", "--", "true"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("timeout_ms must be between 1000 and 3600000"),
        "{err}"
    );
    let (code, _, err) = home.run(&["start", "--until", "soon", "--", "true"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = home.run(&["start", "--cwd", "/nonexistent-dir", "--", "true"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent-dir"), "{err}");
    assert_eq!(home.json(&["list"]), Value::Array(vec![]));

    // start --json shape
    let s = start(
        &home,
        &["-d", "ticker", "--", "echo one; echo two; sleep 600"],
    );
    for k in ["id", "session", "already_running", "output_path"] {
        assert!(s.get(k).is_some(), "start --json lacks {k}: {s}");
    }
    assert_eq!(s["session"], "t");
    assert_eq!(s["already_running"], false);
    let id = id_of(&s);

    // status --json shape
    let st = home.json(&["status"]);
    for k in ["pid", "version", "socket", "state_dir", "monitors_running"] {
        assert!(st.get(k).is_some(), "status lacks {k}: {st}");
    }
    assert_eq!(st["monitors_running"], 1);

    // list --json shape
    let list = home.json(&["list"]);
    let m = &list[0];
    for k in [
        "id",
        "session",
        "description",
        "source",
        "persistent",
        "timeout_ms",
        "state",
        "stop_reason",
        "started_at",
        "ended_at",
        "events",
        "lines",
        "suppressed_lines",
        "output_path",
    ] {
        assert!(m.get(k).is_some(), "list entry lacks {k}: {m}");
    }
    assert_eq!(m["source"]["kind"], "command");
    assert_eq!(m["state"], "running");

    // events: read-only, the same twice; the event shape.
    assert!(eventually(Duration::from_secs(5), || {
        home.json_lines(&["events"])
            .iter()
            .any(|e| e["text"] == "one\ntwo" || e["text"] == "two")
    }));
    let first = home.ok(&["--json", "events"]);
    let second = home.ok(&["--json", "events"]);
    assert_eq!(first, second);
    let ev: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    for k in ["seq", "session", "monitor_id", "kind", "ts", "text"] {
        assert!(ev.get(k).is_some(), "event lacks {k}: {ev}");
    }
    let plain = home.ok(&["events", "--after", "1"]);
    assert!(
        plain
            .lines()
            .all(|l| l.split(' ').nth(1) == Some(id.as_str())),
        "{plain}"
    );

    // wait acknowledges: a second wait has nothing and times out with 124.
    let got = home.json_lines(&["wait", "--timeout-ms", "5000"]);
    assert!(!got.is_empty());
    let (code, _, _) = home.run(&["wait", "--timeout-ms", "300"]);
    assert_eq!(code, 124);
    // Another consumer still gets everything.
    let other = home.json_lines(&["wait", "--consumer", "other", "--timeout-ms", "5000"]);
    assert_eq!(other.len(), got.len());

    // output, whole and by range.
    assert_eq!(home.ok(&["output", &id]), "one\ntwo\n");
    assert_eq!(
        home.ok(&["output", &id, "--from-line", "2", "--to-line", "2"]),
        "two\n"
    );
    assert_eq!(home.run(&["output", "mon-unknown"]).0, 3);

    // stop: 0, then 3 for the ended id and for an unknown one.
    let stopped = home.json(&["stop", &id]);
    assert_eq!(stopped["stop_reason"]["kind"], "stopped");
    assert_eq!(live_of(&id), 0);
    assert_eq!(home.run(&["stop", &id]).0, 3);
    assert_eq!(home.run(&["stop", "mon-nothere"]).0, 3);

    // A woken waiter: wait blocks until a new event arrives.
    home.ok(&["wait", "--timeout-ms", "5000"]);
    let waiter = home
        .cmd(&["--json", "wait", "--timeout-ms", "10000"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let s2 = start(&home, &["-d", "late", "--", "echo late"]);
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&id_of(&s2)));

    // session end stops that session's monitors only.
    let a = start(&home, &["--session", "s1", "--", "sleep 600"]);
    let b = start(&home, &["--session", "s2", "--", "sleep 600"]);
    let ended = home.json(&["session", "end", "s1"]);
    assert_eq!(ended["stopped"][0], a["id"]);
    let list = home.json(&["list", "--all-sessions"]);
    let state_of = |id: &Value| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|m| &m["id"] == id)
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state_of(&a["id"]), "ended");
    assert_eq!(state_of(&b["id"]), "running");
    // Active first.
    assert_eq!(list[0]["state"], "running");

    // watch through the daemon: exit codes.
    assert_eq!(home.run(&["watch", "--", "echo hi; exit 7"]).0, 7);
    assert_eq!(home.run(&["watch", "--", "kill -TERM $$"]).0, 128 + 15);
    let (code, out, _) = home.run(&["watch", "--", "printf abc"]);
    assert_eq!(code, 0);
    assert!(out.lines().any(|l| l == "abc"), "{out}");
}

#[test]
fn ninth_monitor_is_refused_while_other_sessions_start() {
    let home = Home::new();
    let mut ids = vec![];
    for i in 0..8 {
        ids.push(id_of(&start(
            &home,
            &["-d", &format!("m{i}"), "--", "sleep 600"],
        )));
    }
    let (code, _, err) = home.run(&["start", "-d", "ninth", "--", "sleep 600"]);
    assert_eq!(code, 4, "{err}");
    for id in &ids {
        assert!(err.contains(id), "the error should name {id}: {err}");
    }
    let other = start(&home, &["--session", "other", "--", "sleep 600"]);
    assert_eq!(other["already_running"], false);
    assert_eq!(home.json(&["list"]).as_array().unwrap().len(), 8);
}

#[test]
fn same_key_twice_runs_one_process_and_watch_reattaches() {
    let home = Home::new();
    let a = start(
        &home,
        &["--key", "k1", "-d", "keyed", "--", "echo up; sleep 600"],
    );
    let b = start(
        &home,
        &["--key", "k1", "-d", "keyed", "--", "echo up; sleep 600"],
    );
    assert_eq!(a["id"], b["id"]);
    assert_eq!(b["already_running"], true);
    let id = id_of(&a);
    assert!(
        eventually(Duration::from_secs(5), || live_of(&id) == 2),
        "sh + sleep: {}",
        live_of(&id)
    );
    // The same key in another session is another monitor.
    let c = start(&home, &["--session", "x", "--key", "k1", "--", "sleep 600"]);
    assert_ne!(c["id"], a["id"]);
    // watch --key re-attaches: it prints new events of the running monitor
    // and ends when it ends.
    let watcher = home
        .cmd(&["--json", "watch", "--key", "k1", "--", "echo up; sleep 600"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_followers(&home, 1);
    home.ok(&["stop", &id]);
    let out = watcher.wait_with_output().unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.iter().all(|e| e["monitor_id"] == id.as_str()));
    assert_eq!(lines.last().unwrap()["kind"], "stopped");
    assert!(
        lines.iter().all(|e| e["kind"] != "started"),
        "re-attach does not replay: {lines:?}"
    );
    assert_eq!(live_of(&id), 0);
}

#[test]
fn stop_leaves_no_process_of_the_group() {
    let home = Home::new();
    let log = home.path().join("app.log");
    std::fs::write(&log, "").unwrap();
    let cmd = format!(
        "sleep 600 & tail -F {} | grep --line-buffered X",
        log.display()
    );
    let id = id_of(&start(&home, &["--", &cmd]));
    assert!(
        eventually(Duration::from_secs(5), || live_of(&id) >= 4),
        "{}",
        live_of(&id)
    );
    let pgid = wakeful_engine::process::live_of_monitor(&id)[0].pgrp;
    home.ok(&["stop", &id]);
    assert_eq!(wakeful_engine::process::live_group_members(pgid), vec![]);
    assert_eq!(live_of(&id), 0);
}

#[test]
fn racing_clients_start_exactly_one_daemon() {
    let home = Home::new();
    let children: Vec<_> = (0..6)
        .map(|_| {
            home.cmd(&["--json", "status"])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let pids: Vec<i64> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success());
            serde_json::from_slice::<Value>(&out.stdout).unwrap()["pid"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert!(pids.windows(2).all(|w| w[0] == w[1]), "{pids:?}");
    // Exactly one daemon process serves this home (the losers of the race
    // exit once the winner is ready).
    let daemons = || {
        // What the system shows, whatever the platform backend.
        wakeful_engine::process::observed_processes()
            .into_iter()
            .filter(|p| p.is_live())
            .filter(|p| {
                wakeful_engine::process::observed_has_env(
                    p.pid,
                    "WAKEFUL_HOME",
                    &home.path().display().to_string(),
                )
            })
            .filter(|p| {
                std::fs::read(format!("/proc/{}/cmdline", p.pid))
                    .map(|c| c.split(|b| *b == 0).any(|a| a == b"--foreground"))
                    .unwrap_or(false)
            })
            .count()
    };
    assert!(
        eventually(Duration::from_secs(10), || daemons() == 1),
        "{} daemons",
        daemons()
    );
}

#[test]
fn permissions_and_foreign_uids_are_refused() {
    let home = Home::new();
    home.ok(&["status"]);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(home.path()), 0o700);
    assert_eq!(mode(&home.socket()), 0o600);
    assert_eq!(mode(&home.path().join("wakeful.db")), 0o600);
    assert_eq!(mode(&home.path().join("output")), 0o700);
    // A second daemon never removes the live socket.
    let (code, _, err) = home.run(&["daemon", "--foreground"]);
    assert_eq!(code, 0);
    assert!(err.contains("already running"), "{err}");
    assert!(home.socket().exists());
    home.ok(&["status"]);

    // Another uid is refused by peer credentials even when file modes would
    // let it connect. (Needs root to switch uid; CI runs as root.)
    if nix::unistd::getuid().is_root() {
        std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::set_permissions(home.socket(), std::fs::Permissions::from_mode(0o777)).unwrap();
        // The build directory may be closed to other users: run a copy of
        // the binary from a directory they can enter.
        let bin_dir = tempfile::Builder::new()
            .prefix("wkbin")
            .tempdir_in("/tmp")
            .unwrap();
        std::fs::set_permissions(bin_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = bin_dir.path().join("wakeful");
        std::fs::copy(common::BIN, &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let run = || {
            std::process::Command::new(&bin)
                .args(["status"])
                .env("WAKEFUL_HOME", home.path())
                .env("WAKEFUL_SESSION", "t")
                .current_dir("/")
                .stdin(std::process::Stdio::null())
                .uid(65534)
                .gid(65534)
                .output()
        };
        // A test forking in another thread may hold the fresh copy open for
        // a moment ("text file busy"): retry that, and only that.
        let mut out = run();
        let mut left = 50;
        while matches!(&out, Err(e) if e.raw_os_error() == Some(libc::ETXTBSY)) && left > 0 {
            std::thread::sleep(Duration::from_millis(20));
            out = run();
            left -= 1;
        }
        let out = out.unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("not the daemon's owner"), "{err}");
        std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
}

#[test]
fn kill_9_during_flood_then_restart_keeps_the_log_and_cursors() {
    let home = Home::new();
    let persistent = id_of(&start(
        &home,
        &[
            "--persistent",
            "-d",
            "keeper",
            "--",
            "echo armed-$WAKEFUL_MONITOR_ID; sleep 600",
        ],
    ));
    let flood = id_of(&start(&home, &["-d", "flood", "--", "yes flood-line"]));
    // Several sessions keep the writer busy with real events.
    let mut busy = vec![];
    for s in ["b1", "b2", "b3"] {
        busy.push(id_of(&start(
            &home,
            &[
                "--session",
                s,
                "--batch-ms",
                "0",
                "--",
                "while true; do echo tick; sleep 0.01; done",
            ],
        )));
    }
    assert!(eventually(Duration::from_secs(5), || live_of(&persistent) == 2));
    // Acknowledge what is there now.
    let acked = home.json_lines(&["wait", "--timeout-ms", "5000"]);
    let acked_max = acked
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .max()
        .unwrap();
    let before = home.ok(&["--json", "events"]);
    let before_all: Vec<String> = ["t", "b1", "b2", "b3"]
        .iter()
        .flat_map(|s| {
            home.ok(&["--json", "--session", s, "events"])
                .lines()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    // Kill it while the writers are busy: wait for more events first.
    // (b1 is over its rate limit by now: about one event a second.)
    let seen = home.json_lines(&["--session", "b1", "events"]).len();
    assert!(eventually(Duration::from_secs(20), || {
        home.json_lines(&["--session", "b1", "events"]).len() > seen + 2
    }));

    let pid = home.kill_daemon();

    // The next command starts a new daemon.
    let t0 = Instant::now();
    let after = home.ok(&["--json", "events"]);
    assert!(t0.elapsed() < Duration::from_secs(10));
    let new_pid = home.daemon_pid().unwrap();
    assert_ne!(new_pid, pid);

    // Everything read before the crash is still there, unchanged.
    for line in before.lines() {
        assert!(
            after.contains(line),
            "lost or changed after restart: {line}"
        );
    }
    let all_after: Vec<String> = ["t", "b1", "b2", "b3"]
        .iter()
        .flat_map(|s| {
            home.ok(&["--json", "--session", s, "events"])
                .lines()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    for line in &before_all {
        assert!(all_after.contains(line), "lost: {line}");
    }
    // Seqs are unique and strictly increasing (per session stream, and
    // globally unique across sessions).
    let mut seqs: Vec<u64> = vec![];
    for s in ["t", "b1", "b2", "b3"] {
        let evs = home.json_lines(&["--session", s, "events"]);
        let ss: Vec<u64> = evs.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert!(ss.windows(2).all(|w| w[0] < w[1]), "session {s}: {ss:?}");
        seqs.extend(ss);
    }
    let n = seqs.len();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), n, "a seq was used twice");

    let events = home.json_lines(&["events"]);
    // The flood monitor ended with daemon_stopped; its processes are gone.
    let flood_end = events
        .iter()
        .find(|e| e["monitor_id"] == flood.as_str() && e["kind"] == "stopped")
        .unwrap();
    assert_eq!(flood_end["stop_reason"]["kind"], "daemon_stopped");
    assert_eq!(live_of(&flood), 0);
    for id in &busy {
        assert_eq!(live_of(id), 0);
    }
    // The persistent monitor was re-armed exactly once and runs once.
    assert_eq!(
        kinds(&events, &persistent)
            .iter()
            .filter(|k| *k == "rearmed")
            .count(),
        1
    );
    assert!(
        eventually(Duration::from_secs(5), || live_of(&persistent) == 2),
        "{}",
        live_of(&persistent)
    );
    let list = home.json(&["list"]);
    let p = list
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == persistent.as_str())
        .unwrap();
    assert_eq!(p["state"], "running");

    // No acknowledged event is delivered again.
    let redelivered = home.json_lines(&["wait", "--timeout-ms", "5000"]);
    assert!(!redelivered.is_empty());
    assert!(
        redelivered
            .iter()
            .all(|e| e["seq"].as_u64().unwrap() > acked_max),
        "{redelivered:?}"
    );

    // A second restart does not re-arm it again.
    home.ok(&["daemon", "stop"]);
    home.ok(&["status"]);
    let events = home.json_lines(&["events"]);
    assert_eq!(
        kinds(&events, &persistent)
            .iter()
            .filter(|k| *k == "rearmed")
            .count(),
        2
    );
    assert!(eventually(Duration::from_secs(5), || live_of(&persistent) == 2));
    assert_eq!(
        home.json(&["list"])
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["id"] == persistent.as_str())
            .count(),
        1
    );
    let _ = wait_ended;
}

#[test]
fn exclusive_waiters_hand_over_and_batches_are_never_duplicated() {
    let home = Home::new();
    home.ok(&["status"]);
    let spawn = |args: &[&str]| {
        home.cmd(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let older = spawn(&[
        "--json",
        "wait",
        "--exclusive",
        "--consumer",
        "hook",
        "--timeout-ms",
        "20000",
    ]);
    // Once the first waiter is registered, the second supersedes it.
    wait_followers(&home, 1);
    let newer = spawn(&[
        "--json",
        "wait",
        "--exclusive",
        "--consumer",
        "hook",
        "--timeout-ms",
        "20000",
    ]);
    let out = older.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("took over"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    start(&home, &["-d", "wake", "--", "echo ping"]);
    let out = newer.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"started\""));

    // Two followers of one consumer: every event is handed out exactly once.
    let collect = |mut c: std::process::Child| {
        let out = c.stdout.take().unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
        let sink = seen.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line).unwrap();
                sink.lock().unwrap().push(v["seq"].as_u64().unwrap());
            }
        });
        (c, seen)
    };
    let (a, seen_a) = collect(spawn(&[
        "--json",
        "wait",
        "--follow",
        "--consumer",
        "shared",
    ]));
    let (b, seen_b) = collect(spawn(&[
        "--json",
        "wait",
        "--follow",
        "--consumer",
        "shared",
    ]));
    wait_followers(&home, 2);
    let mut ids = vec![];
    for i in 0..5 {
        ids.push(id_of(&start(
            &home,
            &["-d", &format!("m{i}"), "--", &format!("echo line-{i}")],
        )));
    }
    let all_ended = || {
        let events = home.json_lines(&["events"]);
        ids.iter()
            .all(|id| {
                events
                    .iter()
                    .any(|e| e["monitor_id"] == id.as_str() && e["kind"] == "stopped")
            })
            .then_some(events.len())
    };
    let mut total = 0;
    assert!(
        eventually(Duration::from_secs(10), || {
            total = all_ended().unwrap_or(usize::MAX);
            seen_a.lock().unwrap().len() + seen_b.lock().unwrap().len() >= total
        }),
        "handed out {} + {} of {total}",
        seen_a.lock().unwrap().len(),
        seen_b.lock().unwrap().len()
    );
    home.ok(&["daemon", "stop"]);
    let _ = (a.wait_with_output(), b.wait_with_output());
    let mut all: Vec<u64> = seen_a.lock().unwrap().clone();
    all.extend(seen_b.lock().unwrap().iter());
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "an event was handed to both followers");
    assert_eq!(n, total, "every event of the session was handed out");
}
