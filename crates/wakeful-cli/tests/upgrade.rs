//! `wakeful daemon upgrade`: the daemon replaces its program with another
//! build while a command keeps running — the same process, every line
//! once and in order, to a follower, a waiter and an MCP client that stay
//! attached throughout — and a binary that fails its check changes
//! nothing.
//!
//! The second build is this binary with its version string changed (the
//! test writes the copy): `0.1.0` becomes `9.1.0`, so every upgrade goes
//! to another version and back.

// Test helpers unwrap outside #[test] functions too (the workspace lint
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/mcp_stdio.rs"]
mod mcp_stdio;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Home, BIN};
use mcp_stdio::Raw;
use serde_json::{json, Value};

const DEADLINE: Duration = Duration::from_secs(60);
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A copy of this binary that says it is another version: every
/// occurrence of the version string gets another first digit.
fn bumped_build(dir: &Path) -> (PathBuf, String) {
    let bytes = std::fs::read(BIN).unwrap();
    let old = VERSION.as_bytes();
    let mut new_version = VERSION.to_string();
    new_version.replace_range(0..1, if VERSION.starts_with('9') { "8" } else { "9" });
    let new = new_version.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let mut replaced = 0;
    while i < bytes.len() {
        // Not part of a longer number (`10.1.0`, `0.1.01`); a `.` next to
        // it is fine: string literals sit end to end in the binary (a
        // sentence's full stop, then the version).
        if bytes[i..].starts_with(old)
            && !bytes.get(i + old.len()).is_some_and(|b| b.is_ascii_digit())
            && !(i > 0 && bytes[i - 1].is_ascii_digit())
        {
            out.extend_from_slice(new);
            i += old.len();
            replaced += 1;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    assert!(replaced > 0, "the version string is in the binary");
    let path = dir.join("wakeful-next");
    std::fs::write(&path, out).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The copy says it is the other version, where an upgrade looks.
    let check = std::process::Command::new(&path)
        .args(["daemon", "handover-check"])
        .output()
        .unwrap();
    let check: Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(check["version"], new_version.as_str(), "{check}");
    (path, new_version)
}

/// The command every test runs: a counter, one line every 10 ms.
const COUNTER: &str = "i=0; while :; do i=$((i+1)); echo $i; sleep 0.01; done";

/// Starts the counter as a monitor of session `t`; its id.
fn start_counter(home: &Home) -> String {
    home.ok(&["start", "-d", "counter", "--", COUNTER])
        .trim()
        .to_string()
}

/// Open descriptors of process `pid`.
fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

fn status(home: &Home) -> Value {
    home.json(&["status"])
}

/// The process group leader (`sh`) of monitor `id`, found by its marker.
fn leader_of(id: &str) -> Option<i32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let marker = format!("WAKEFUL_MONITOR_ID={id}");
        if !env.split(|b| *b == 0).any(|v| v == marker.as_bytes()) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = after.split(' ').collect();
        if fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pid) {
            return Some(pid);
        }
    }
    None
}

/// Lines read from a child's stdout by a thread.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The counter values in `lines` events of monitor `id` (and the ranges
/// `suppressed` events report), in order, from JSON event lines; and
/// whether its final event came.
fn counted(events: &[Value], id: &str) -> (Vec<u64>, bool) {
    let mut numbers = Vec::new();
    let mut ended = false;
    for e in events.iter().filter(|e| e["monitor_id"] == id) {
        match e["kind"].as_str() {
            // (MCP gives a `lines` event's text, without the array.)
            Some("lines") => match e["lines"].as_array() {
                Some(lines) => numbers.extend(
                    lines
                        .iter()
                        .map(|l| l.as_str().unwrap().trim().parse::<u64>().unwrap()),
                ),
                None => numbers.extend(
                    e["text"]
                        .as_str()
                        .unwrap()
                        .lines()
                        .map(|l| l.trim().parse::<u64>().unwrap_or_else(|_| panic!("{e}"))),
                ),
            },
            // Over the rate limit: the range is reported instead (the
            // counter's value is its output-file line number).
            Some("suppressed") => {
                let (from, to) = (
                    e["from_line"].as_u64().unwrap(),
                    e["to_line"].as_u64().unwrap(),
                );
                numbers.extend(from..=to);
            }
            Some("stopped") | Some("failed") => ended = true,
            _ => {}
        }
    }
    (numbers, ended)
}

fn assert_every_number_once_in_order(who: &str, numbers: &[u64]) {
    assert!(!numbers.is_empty(), "{who}: no line");
    let first = numbers[0];
    for (i, n) in numbers.iter().enumerate() {
        assert_eq!(
            *n,
            first + i as u64,
            "{who}: line {i} is {n}; lost or repeated around it: {:?}",
            &numbers[i.saturating_sub(3)..(i + 3).min(numbers.len())]
        );
    }
}

fn upgrade(home: &Home, from: &Path, to: &Path) -> String {
    let out = home
        .cmd(&["daemon", "upgrade", "--binary", to.to_str().unwrap()])
        .env("WAKEFUL_TEST_FROM", from)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "upgrade to {}: {}{text}\ndaemon log:\n{}",
        to.display(),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(home.path().join("daemon.log")).unwrap_or_default()
    );
    text
}

#[test]
fn a_counter_lives_through_twenty_upgrades_with_a_follower_and_a_waiter_attached() {
    let home = Home::new();
    let (next, next_version) = bumped_build(home.path());
    let this = PathBuf::from(BIN);
    let id = start_counter(&home);
    let daemon = home.daemon_pid().unwrap();
    let leader = leader_of(&id).expect("the counter's sh");
    // `watch` of a counter of another session, its stdout (a pipe) written
    // by the daemon itself.
    let mut watch = home
        .cmd(&["--json", "watch", "-d", "watched", "--", COUNTER])
        .env("WAKEFUL_SESSION", "w")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let watched = lines_of(&mut watch);
    let first: Value = serde_json::from_str(&watched.recv_timeout(DEADLINE).unwrap()).unwrap();
    let watched_id = first["monitor_id"].as_str().unwrap().to_string();
    let fds = fd_count(daemon);

    // A follower whose stdout (a pipe) the daemon writes to itself, and a
    // waiter that prints and acknowledges batch by batch.
    let mut follower = home
        .cmd(&["--json", "events", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let followed = lines_of(&mut follower);
    let mut waiter = home
        .cmd(&["--json", "wait", "--follow", "--all", "--consumer", "up"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let waited = lines_of(&mut waiter);

    for n in 0..20 {
        let (from, to, version) = if n % 2 == 0 {
            (&this, &next, next_version.as_str())
        } else {
            (&next, &this, VERSION)
        };
        let said = upgrade(&home, from, to);
        assert!(said.contains(&format!("to {version}")), "{said}");
        assert!(said.contains("2 monitors went on running"), "{said}");
        let s = status(&home);
        assert_eq!(s["version"], version);
        assert_eq!(s["upgrades"], n + 1);
        assert_eq!(s["pid"], daemon, "the same process");
        assert_eq!(s["monitors_running"], 2);
        assert_eq!(leader_of(&id), Some(leader), "the same command process");
        // A client of another version than the daemon's names both, and
        // the way to move the daemon.
        let text = home.ok(&["status"]);
        assert_eq!(
            text.contains(&format!("this wakeful is {VERSION}")),
            version != VERSION,
            "{text}"
        );
        if version != VERSION {
            assert!(text.contains("`wakeful daemon upgrade`"), "{text}");
        }
    }
    let text = home.ok(&["status"]);
    assert!(
        text.contains("upgraded:         20 times, last from "),
        "{text}"
    );
    assert!(
        fd_count(daemon) <= fds + 2,
        "no descriptor leaks across upgrades: {fds} before, {} after",
        fd_count(daemon)
    );
    home.ok(&["stop", &id]);
    home.ok(&["stop", &watched_id]);

    let collect = |rx: &mpsc::Receiver<String>, who: &str, id: &str| {
        let deadline = Instant::now() + DEADLINE;
        let mut events = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "{who}: no final event; got {} events, the last {:?}",
                    events.len(),
                    events.last()
                )
            });
            let e: Value = serde_json::from_str(&line).unwrap();
            let end = e["monitor_id"] == id
                && matches!(e["kind"].as_str(), Some("stopped") | Some("failed"));
            events.push(e);
            if end {
                return events;
            }
        }
    };
    let f = collect(&followed, "events --follow", &id);
    let w = collect(&waited, "wait --follow", &id);
    let mut v = vec![first];
    let mut watch_err = watch.stderr.take().unwrap();
    let watch_said = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut watch_err, &mut s);
        s
    });
    v.extend(collect(&watched, "watch", &watched_id));
    let (numbers, ended) = counted(&v, &watched_id);
    assert!(ended, "watch: the monitor's end");
    assert_eq!(numbers[0], 1, "watch: from the first line");
    assert_every_number_once_in_order("watch", &numbers);
    // A stopped monitor's watch exits 143, as if it had been terminated.
    let code = watch.wait().unwrap();
    assert_eq!(code.code(), Some(143), "watch ends with its monitor");
    let said = watch_said.join().unwrap();
    assert!(said.is_empty(), "watch said: {said}");
    let _ = follower.kill();
    let _ = waiter.kill();
    let _ = follower.wait();
    let _ = waiter.wait();

    let stored: Vec<u64> = home
        .json_lines(&["events"])
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    for (who, events) in [("events --follow", &f), ("wait --follow", &w)] {
        let (numbers, ended) = counted(events, &id);
        assert!(ended, "{who}: the monitor's end");
        assert_eq!(numbers[0], 1, "{who}: from the first line");
        assert_every_number_once_in_order(who, &numbers);
        // Exactly the session's events as the store keeps them: none lost,
        // none repeated, in seq order (the other session's are elsewhere).
        let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, stored, "{who}: the session's seqs");
        let starts = events.iter().filter(|e| e["kind"] == "started").count();
        assert_eq!(starts, 1, "{who}: one start, no re-arm");
    }
    // The output file holds every line once, in order.
    let out = home.ok(&["output", &id]);
    let numbers: Vec<u64> = out.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(numbers[0], 1);
    assert_every_number_once_in_order("output file", &numbers);
    let listed = home.listed(&id).unwrap();
    assert_eq!(listed["lines"].as_u64(), Some(numbers.len() as u64));
    assert!(
        common::eventually(Duration::from_secs(10), || common::live_of(&id) == 0),
        "nothing of the command survives its stop"
    );
}

/// `wakeful mcp` (the 2025-11-25 handshake) in session `session`,
/// initialized.
fn mcp_start(home: &Home, session: &str) -> Raw {
    let mut cmd = home.cmd(&["mcp", "--protocol", "2025-11-25"]);
    cmd.env("WAKEFUL_SESSION", session).stderr(Stdio::null());
    Raw::initialized(&mut cmd, DEADLINE).0
}

#[test]
fn an_mcp_client_waiting_on_a_monitor_gets_every_line_across_upgrades() {
    let home = Home::new();
    let (next, _) = bumped_build(home.path());
    let this = PathBuf::from(BIN);
    let mut mcp = mcp_start(&home, "t");
    let started = mcp.request(
        1,
        "tools/call",
        json!({"name": "monitor_start", "arguments": {"description": "counter", "command": COUNTER}}),
    );
    let id = started["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    let leader = leader_of(&id).expect("the counter's sh");
    let mut numbers: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    let mut wait = |mcp: &mut Raw, n: u64| {
        let r = mcp.request(
            100 + n,
            "tools/call",
            json!({"name": "monitor_wait", "arguments": {"timeout_ms": 30000}}),
        );
        let events = r["result"]["structuredContent"]["events"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .clone();
        let (got, _) = counted(&events, &id);
        numbers.insert(n as usize, got);
    };
    for n in 0..6u64 {
        wait(&mut mcp, n);
        let (from, to) = if n % 2 == 0 {
            (&this, &next)
        } else {
            (&next, &this)
        };
        upgrade(&home, from, to);
        assert_eq!(leader_of(&id), Some(leader), "the same command process");
    }
    wait(&mut mcp, 6);
    let all: Vec<u64> = numbers.into_values().flatten().collect();
    assert_eq!(all[0], 1);
    assert_every_number_once_in_order("monitor_wait", &all);
    assert!(
        all.len() > 6,
        "lines came after the upgrades: {}",
        all.len()
    );
    mcp.close();

    // A monitor_wait in flight while the daemon is upgraded twice is
    // answered by the new one, once its line comes.
    let mut quiet = mcp_start(&home, "quiet");
    let poke = home.path().join("poke");
    let command = format!(
        "while :; do if [ -e {p} ]; then rm {p}; echo poked; fi; sleep 0.05; done",
        p = poke.display()
    );
    quiet.request(
        1,
        "tools/call",
        json!({"name": "monitor_start", "arguments": {"description": "quiet", "command": command}}),
    );
    for n in 2.. {
        let r = quiet.request(
            n,
            "tools/call",
            json!({"name": "monitor_wait", "arguments": {"timeout_ms": 300}}),
        );
        if r["result"]["structuredContent"]["timed_out"] == true {
            break;
        }
    }
    quiet.send(json!({"jsonrpc": "2.0", "id": 900, "method": "tools/call",
        "params": {"name": "monitor_wait", "arguments": {"timeout_ms": 60000}}}));
    upgrade(&home, &this, &next);
    upgrade(&home, &next, &this);
    std::fs::write(&poke, "").unwrap();
    let r = quiet.response(900);
    let texts: Vec<&str> = r["result"]["structuredContent"]["events"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(texts, ["poked"], "{r}");
    quiet.close();
}

#[test]
fn an_upgrade_to_a_binary_that_fails_changes_nothing_and_says_why() {
    let home = Home::new();
    let id = start_counter(&home);
    let before = status(&home);
    let leader = leader_of(&id).unwrap();
    let broken = home.path().join("broken");
    std::fs::write(&broken, "#!/bin/sh\nexit 3\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    let not_wakeful = PathBuf::from("/bin/echo");
    for (binary, says) in [
        (broken.as_path(), "exited with"),
        (not_wakeful.as_path(), "not a handover check"),
        (Path::new("/nonexistent/wakeful"), "No such file"),
    ] {
        let (code, out, err) =
            home.run(&["daemon", "upgrade", "--binary", binary.to_str().unwrap()]);
        assert_ne!(code, 0, "{out}");
        assert!(err.contains(says), "{binary:?}: {err}");
        assert!(
            err.contains("nothing changed") || err.contains("keeps running"),
            "{err}"
        );
    }
    let after = status(&home);
    assert_eq!(after["pid"], before["pid"]);
    assert_eq!(after["upgrades"], 0);
    assert_eq!(after["version"], VERSION);
    assert_eq!(leader_of(&id), Some(leader));
    // And the monitor still reads its command.
    let lines = home.listed(&id).unwrap()["lines"].as_u64().unwrap();
    assert!(
        common::eventually(Duration::from_secs(10), || {
            home.listed(&id).unwrap()["lines"].as_u64().unwrap() > lines + 5
        }),
        "the counter goes on"
    );
    // Without a daemon, there is nothing to upgrade.
    home.ok(&["daemon", "stop"]);
    let said = home.ok(&["daemon", "upgrade"]);
    assert!(said.contains("nothing to upgrade"), "{said}");
}

/// Calls `request` on the daemon of `home` (never starts one).
fn call<C: wakeful_protocol::Call>(home: &Home, request: C) -> C::Reply {
    let dir = home.path().to_path_buf();
    let paths =
        wakeful_client::Paths::from_vars(|k| (k == "WAKEFUL_HOME").then(|| dir.clone())).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let mut conn = wakeful_client::connect_existing(&paths).await.unwrap();
            conn.call(request).await.unwrap()
        })
}

#[test]
fn background_tasks_keep_their_ids_and_outcomes_across_upgrades() {
    use wakeful_protocol::{CreateTask, GetTask, HandTask};
    let home = Home::new();
    let (next, _) = bumped_build(home.path());
    let this = PathBuf::from(BIN);
    home.ok(&["status"]);
    let create = || CreateTask {
        session: "tk".into(),
        consumer: "mcp".into(),
        ttl_ms: 600_000,
        note: Some("kept".into()),
        ..Default::default()
    };
    let get = |id: &str, wait_ms| GetTask {
        session: "tk".into(),
        id: id.into(),
        wait_ms,
    };
    // A task that waits while the daemon is upgraded gets the line that
    // comes after.
    let working = call(&home, create());
    assert_eq!(working.status, "working");
    upgrade(&home, &this, &next);
    let line = |text: &str| {
        home.cmd(&["start", "-d", text, "--", &format!("echo {text}")])
            .env("WAKEFUL_SESSION", "tk")
            .output()
            .unwrap()
    };
    line("after-the-upgrade");
    let done = call(&home, get(&working.id, Some(30_000)));
    assert_eq!(done.status, "completed", "{done:?}");
    assert_eq!(done.note.as_deref(), Some("kept"));
    assert!(
        done.events
            .iter()
            .any(|e| e.text.contains("after-the-upgrade")),
        "{done:?}"
    );
    // Completed, not handed yet: its events were not acknowledged, and the
    // next program's run of it finds them again.
    upgrade(&home, &next, &this);
    let again = call(&home, get(&working.id, Some(30_000)));
    assert_eq!(again.status, "completed", "{again:?}");
    // It starts with the same events (and may carry more): an
    // acknowledgement of what the client was shown takes the same ones.
    let before: Vec<u64> = done.events.iter().map(|e| e.seq).collect();
    let after: Vec<u64> = again.events.iter().map(|e| e.seq).collect();
    assert_eq!(after[..before.len()], before[..], "the same first events");
    let handed = call(
        &home,
        HandTask {
            session: "tk".into(),
            id: working.id.clone(),
            keep: done.events.len(),
        },
    );
    assert!(handed.handed);
    // Handed over, then upgraded: the outcome stays as it was, and a new
    // task does not get those events again.
    upgrade(&home, &this, &next);
    let kept = call(&home, get(&working.id, None));
    assert_eq!(kept.status, "completed");
    assert!(kept.handed);
    assert_eq!(kept.events.len(), again.events.len());
    let fresh = call(&home, create());
    let fresh = call(&home, get(&fresh.id, Some(30_000)));
    assert!(
        fresh.events.iter().all(|e| !before.contains(&e.seq)),
        "nothing acknowledged is handed again: {fresh:?}"
    );
    assert_eq!(
        fresh.events.first().map(|e| e.seq),
        Some(before[before.len() - 1] + 1),
        "the next task starts right after what was acknowledged: {fresh:?}"
    );
}
