//! `start --pid` end to end: a process wakeful did not start gives exactly
//! one event when it exits (pidfd under the Linux backend, polling under
//! posix); a restart of the daemon neither loses the exit nor reports a
//! live process as exited; bad input is refused with exit 2 before
//! anything starts.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{eventually, Home};
use serde_json::Value;

/// A process that runs until it is killed, started by the test (not by
/// wakeful).
fn sleeper() -> (Child, i32) {
    let child = Command::new("sleep").arg("1000").spawn().unwrap();
    let pid = child.id() as i32;
    (child, pid)
}

/// The platform backend the tests run under unless they choose one:
/// `WAKEFUL_PLATFORM` (.ci/run's second pass sets `posix`), else Linux's.
fn ambient() -> &'static str {
    match std::env::var("WAKEFUL_PLATFORM").as_deref() {
        Ok("posix") => "posix",
        _ => "linux",
    }
}

/// `wakeful ARGS` in `home`, under the platform backend `backend`: its
/// exit code, stdout, stderr. The first command starts the daemon, which
/// keeps the backend.
fn run_on(home: &Home, backend: &str, args: &[&str]) -> (i32, String, String) {
    let out = home
        .cmd(args)
        .env("WAKEFUL_PLATFORM", backend)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`run_on`] with `--json`, one object a line, asserting exit 0.
fn json_on(home: &Home, backend: &str, args: &[&str]) -> Vec<Value> {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let (code, out, err) = run_on(home, backend, &a);
    assert_eq!(code, 0, "wakeful {a:?}: {err}{out}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The exit events of monitor `id` in the session's log.
fn exits(home: &Home, id: &str) -> Vec<Value> {
    home.json_lines(&["events"])
        .into_iter()
        .filter(|e| e["monitor_id"] == id && e["stop_reason"]["kind"] == "exited")
        .collect()
}

/// Starts `--pid PID` under `backend`, checks what `list` shows, and
/// returns the monitor id.
fn start_pid(home: &Home, backend: &str, pid: i32, say: &str) -> String {
    let p = pid.to_string();
    let started = json_on(home, backend, &["start", "--pid", &p, "--say", say]);
    let id = started[0]["id"].as_str().unwrap().to_string();
    let m = home.listed(&id).expect("the monitor is listed");
    assert_eq!(m["state"], "running");
    assert_eq!(m["persistent"], true);
    assert_eq!(m["source"]["kind"], "pid");
    assert_eq!(m["source"]["pid"], pid);
    assert_eq!(m["source"]["backend"], backend);
    assert_eq!(m["source"]["cmdline"], "sleep 1000");
    assert!(m["source"]["start_time"].as_u64().is_some(), "{m}");
    let table = home.ok(&["list"]);
    assert!(table.contains(&format!("{say} (pid {pid})")), "{table}");
    id
}

/// Kills a process `start_pid` watches, collects it when `reap` (else
/// after the event, leaving a zombie meanwhile), and checks the one exit
/// event that wakes `wait`; returns its text.
fn kill_and_wait(home: &Home, backend: &str, id: &str, mut child: Child, reap: bool) -> String {
    let pid = child.id() as i32;
    child.kill().unwrap();
    if reap {
        child.wait().unwrap();
    }
    let batch = json_on(home, backend, &["wait", "--timeout-ms", "20000"]);
    if !reap {
        child.wait().unwrap();
    }
    let exited: Vec<&Value> = batch
        .iter()
        .filter(|e| e["stop_reason"]["kind"] == "exited")
        .collect();
    assert_eq!(exited.len(), 1, "{batch:?}");
    let event = exited[0];
    assert_eq!(event["monitor_id"], id);
    assert_eq!(event["kind"], "stopped");
    assert_eq!(event["stop_reason"]["pid"], pid);
    assert!(event["stop_reason"].get("while_down").is_none(), "{event}");
    // The started event came with it, without waking.
    assert!(batch
        .iter()
        .any(|e| e["kind"] == "started" && e["wake"] == false));
    // Nothing more wakes, and the monitor ended.
    let (code, out, _) = run_on(home, backend, &["wait", "--timeout-ms", "1500"]);
    assert_eq!(code, 124, "{out}");
    assert_eq!(exits(home, id).len(), 1);
    let m = home.listed(id).unwrap();
    assert_eq!(m["state"], "ended");
    assert_eq!(m["stop_reason"]["kind"], "exited");
    event["text"].as_str().unwrap().to_string()
}

#[test]
fn a_killed_process_gives_exactly_one_event_and_ends_its_monitor() {
    let home = Home::new();
    let (child, pid) = sleeper();
    let id = start_pid(&home, ambient(), pid, "the sleeper ended");
    let text = kill_and_wait(&home, ambient(), &id, child, true);
    let head = format!("the sleeper ended: process {pid} (`sleep 1000`) ");
    // Collected at once by its parent (this test): Linux 6.15 and later
    // keep its status for the pidfd; before, and under posix, it is
    // unknown.
    assert!(
        text == format!("{head}was killed by signal 9")
            || text == format!("{head}exited, status unknown"),
        "{text}"
    );
}

#[test]
fn the_posix_backend_polls_and_reports_a_zombie_once_status_unknown() {
    let home = Home::new();
    let (child, pid) = sleeper();
    let id = start_pid(&home, "posix", pid, "polled");
    // Not collected until the event came: a zombie, which kill(pid, 0)
    // still finds; the process table (ps) says it exited.
    let text = kill_and_wait(&home, "posix", &id, child, false);
    assert_eq!(
        text,
        format!("polled: process {pid} (`sleep 1000`) exited, status unknown")
    );
}

#[test]
fn watch_pid_exits_with_the_status_when_known() {
    let home = Home::new();
    let (mut child, pid) = sleeper();
    let p = pid.to_string();
    let mut watch = home
        .cmd(&["watch", "--pid", &p])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(10), || {
        home.json(&["list"])
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["source"]["pid"] == pid)
    }));
    child.kill().unwrap();
    child.wait().unwrap();
    let mut status = None;
    assert!(eventually(Duration::from_secs(20), || {
        status = watch.try_wait().unwrap();
        status.is_some()
    }));
    let code = status.unwrap().code();
    // 128+9 when the status is known, 0 when not.
    assert!(matches!(code, Some(137 | 0)), "{code:?}");
}

#[test]
fn an_exit_while_the_daemon_was_down_is_reported_once_and_a_live_process_is_never() {
    let home = Home::new();
    let (child, pid) = sleeper();
    // Every daemon of this test runs under the ambient backend: the start
    // time recorded is compared under the backend that read it.
    let id = start_pid(&home, ambient(), pid, "across restarts");

    // kill -9 of the daemon while the process runs: the next daemon
    // re-arms the monitor and finds the same process (same start time):
    // no exit.
    let mut child = child;
    home.kill_daemon();
    let listed = home.listed(&id).unwrap();
    assert_eq!(listed["state"], "running", "{listed}");
    // The next daemon's crash recovery left it alone: not wakeful's.
    assert!(
        child.try_wait().unwrap().is_none(),
        "the process still runs"
    );
    let events = home.json_lines(&["events"]);
    assert!(events
        .iter()
        .any(|e| e["monitor_id"] == id.as_str() && e["kind"] == "rearmed" && e["wake"] == false));
    assert!(exits(&home, &id).is_empty(), "{events:?}");
    let (code, out, _) = home.run(&["wait", "--timeout-ms", "1000"]);
    assert_eq!(code, 124, "a live process is not reported: {out}");

    // A stopped daemon, and the process exits meanwhile: the next daemon
    // reports it once, saying so.
    home.ok(&["daemon", "stop"]);
    child.kill().unwrap();
    child.wait().unwrap();
    let batch = home.json_lines(&["wait", "--timeout-ms", "20000"]);
    let exited: Vec<&Value> = batch
        .iter()
        .filter(|e| e["stop_reason"]["kind"] == "exited")
        .collect();
    assert_eq!(exited.len(), 1, "{batch:?}");
    assert_eq!(exited[0]["stop_reason"]["while_down"], true);
    assert_eq!(
        exited[0]["text"],
        format!(
            "across restarts: process {pid} (`sleep 1000`) exited while the daemon was down, status unknown"
        )
    );
    // Once: not again after another restart.
    home.ok(&["daemon", "stop"]);
    let (code, out, _) = home.run(&["wait", "--timeout-ms", "1500"]);
    assert_eq!(code, 124, "{out}");
    assert_eq!(exits(&home, &id).len(), 1);
    assert_eq!(home.listed(&id).unwrap()["state"], "ended");
}

#[test]
fn bad_pid_input_exits_2_saying_why_and_starts_nothing() {
    let home = Home::new();
    // A zombie: exited, not yet collected by its parent (this test).
    let mut zombie = Command::new("true").spawn().unwrap();
    let zombie_pid = zombie.id() as i32;
    assert!(eventually(Duration::from_secs(10), || {
        std::fs::read_to_string(format!("/proc/{zombie_pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')))
    }));
    let zombie_arg = zombie_pid.to_string();
    let (live, live_pid) = sleeper();
    let live_arg = live_pid.to_string();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec!["--pid", "0"], "a whole number from 1".into()),
        (vec!["--pid", "-5"], "a whole number from 1".into()),
        (vec!["--pid", "abc"], "is not a process id".into()),
        (vec!["--pid", "1"], "init process".into()),
        (
            vec!["--pid", "2147483647"],
            "no process 2147483647: it is not running".into(),
        ),
        (
            vec!["--pid", &zombie_arg],
            format!("no process {zombie_pid}: it has already exited"),
        ),
        (
            vec!["--pid", &live_arg, "--in", "1m"],
            "watches one process and nothing else".into(),
        ),
        (
            vec!["--pid", &live_arg, "--file", "/tmp/x"],
            "watches one process and nothing else".into(),
        ),
        (
            vec!["--pid", &live_arg, "--", "echo", "x"],
            "takes no command".into(),
        ),
        (
            vec!["--pid", &live_arg, "--timeout-ms", "5000"],
            "no timeout".into(),
        ),
    ];
    for (args, why) in &cases {
        let mut a = vec!["start"];
        a.extend_from_slice(args);
        let (code, out, err) = home.run(&a);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(why.as_str()), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
    }
    // The daemon's own pid.
    let daemon = home.daemon_pid().unwrap().to_string();
    let (code, _, err) = home.run(&["start", "--pid", &daemon]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is the wakeful daemon itself"), "{err}");
    assert_eq!(home.json(&["list"]), serde_json::json!([]));
    zombie.wait().unwrap();
    let mut live = live;
    live.kill().unwrap();
    live.wait().unwrap();
}

#[test]
fn stop_ends_the_monitor_and_leaves_the_process_alone() {
    let home = Home::new();
    let (mut child, pid) = sleeper();
    let id = start_pid(&home, ambient(), pid, "left alone");
    home.ok(&["stop", &id]);
    let m = home.listed(&id).unwrap();
    assert_eq!(m["state"], "ended");
    assert_eq!(m["stop_reason"]["kind"], "stopped");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the process still runs"
    );
    assert!(exits(&home, &id).is_empty());
    child.kill().unwrap();
    child.wait().unwrap();
}
