//! Processes under the real daemon: nothing a command started survives its
//! stop, orphans adopted by the daemon are reaped, output files hold exactly
//! the bytes written, and a failed monitor says why.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{eventually, Home};
use serde_json::Value;
use wakeful_engine::process::{children_of, proc_info, ProcInfo};
// What the system shows, whatever the platform backend the daemon runs
// (`WAKEFUL_PLATFORM=posix` in .ci/run's second pass).
use wakeful_engine::process::{observed_has_env as has_env, observed_processes as all_processes};

fn id_of(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

/// Live processes whose command line is exactly `words` and that carry
/// monitor `id`'s marker.
fn live_with_cmdline(id: &str, words: &[&str]) -> Vec<ProcInfo> {
    all_processes()
        .into_iter()
        .filter(|p| p.is_live() && has_env(p.pid, "WAKEFUL_MONITOR_ID", id))
        .filter(|p| {
            std::fs::read(format!("/proc/{}/cmdline", p.pid)).is_ok_and(|c| {
                let args: Vec<&[u8]> = c.split(|b| *b == 0).filter(|a| !a.is_empty()).collect();
                args == words.iter().map(|w| w.as_bytes()).collect::<Vec<_>>()
            })
        })
        .collect()
}

fn monitor(home: &Home, session: &str, id: &str) -> Value {
    home.json(&["--session", session, "list"])
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Both ways of finding a command's processes: with a cgroup per command
/// (where the machine lets the daemon make one) and without (process tree,
/// group and environment marker only). The flag says whether the daemon of
/// that home must put each command in a cgroup of its own: where this test
/// process can make one (the daemon runs in the same cgroup, as the same
/// user) and the home does not turn them off.
fn homes() -> Vec<(Home, bool)> {
    let with = Home::new();
    let without = Home::new();
    std::fs::write(
        without.path().join("config.toml"),
        "[monitors]\ncgroups = false\n",
    )
    .unwrap();
    let can = wakeful_platform::tree::detect_containers(true).is_some();
    if !can {
        eprintln!("no cgroup can be made here: only the process-tree half runs");
    }
    vec![(with, can), (without, false)]
}

/// The cgroup v2 path of a process (`/proc/PID/cgroup`, line `0::`).
fn cgroup_of(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_setsid_descendant_does_not_survive_stop() {
    for (home, cgroup) in homes() {
        setsid_descendant(&home, cgroup);
    }
}

fn setsid_descendant(home: &Home, cgroup: bool) {
    let v = home.json(&["start", "--", "setsid sleep 600 & sleep 601"]);
    let id = id_of(&v);
    assert!(
        eventually(Duration::from_secs(10), || {
            live_with_cmdline(&id, &["sleep", "600"]).len() == 1
                && live_with_cmdline(&id, &["sleep", "601"]).len() == 1
        }),
        "both sleeps run"
    );
    let escaped = live_with_cmdline(&id, &["sleep", "600"])[0].clone();
    let sh = proc_info(escaped.ppid).unwrap();
    assert_ne!(escaped.pgrp, sh.pgrp, "setsid left the monitor's group");
    // Where a cgroup can be made, the command and what escaped its group
    // are in the command's own; where not (or turned off), in none of ours.
    let own = format!("/wakeful/{id}");
    for pid in [escaped.pid, sh.pid] {
        let path = cgroup_of(pid);
        assert_eq!(
            path.ends_with(&own),
            cgroup,
            "pid {pid} is in cgroup {path:?}; a cgroup of its own ({own}) expected: {cgroup}"
        );
    }
    let stopped = home.json(&["stop", &id]);
    assert_eq!(stopped["stop_reason"]["kind"], "stopped");
    assert!(stopped.get("survivors").is_none(), "{stopped}");
    // Gone by the time stop answered: no waiting.
    assert!(
        proc_info(escaped.pid).is_none_or(|p| !p.is_live()),
        "sleep 600 (pid {}) survived the stop",
        escaped.pid
    );
    assert_eq!(common::live_of(&id), 0);
}

#[test]
fn orphans_that_end_with_their_command_leave_nothing_behind() {
    for (home, _) in homes() {
        orphans_end_with_their_command(&home);
    }
}

fn orphans_end_with_their_command(home: &Home) {
    // `echo done` exits at once; the setsid'd sleep is orphaned and must go
    // with the monitor (the daemon is its subreaper).
    let v = home.json(&["start", "--", "setsid sleep 600 & echo done"]);
    let id = id_of(&v);
    assert!(eventually(Duration::from_secs(10), || monitor(
        home, "t", &id
    )["state"]
        == "ended"));
    let m = monitor(home, "t", &id);
    assert_eq!(
        m["stop_reason"],
        serde_json::json!({"kind": "exit", "code": 0})
    );
    if std::env::var("WAKEFUL_PLATFORM").as_deref() == Ok("posix") {
        // The posix backend cannot find the orphan (no subreaper, no
        // marker scan): `list` says so with the processes it saw, and the
        // orphan is indeed left (the test ends it).
        assert_eq!(m["unverified"]["backend"], "posix", "{m}");
        assert!(m["unverified"]["seen"].is_array(), "{m}");
        let left = wakeful_engine::process::live_of_monitor(&id);
        assert_eq!(left.len(), 1, "the setsid sleep is left: {left:?}");
        for p in left {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        return;
    }
    assert!(m.get("unverified").is_none(), "{m}");
    assert_eq!(common::live_of(&id), 0, "no process of {id} is left");
}

fn zombie_children(pid: i32) -> Vec<i32> {
    children_of(pid)
        .into_iter()
        .filter(|c| proc_info(*c).is_some_and(|p| !p.is_live()))
        .collect()
}

fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn two_hundred_orphaning_monitors_leave_no_zombie_and_no_fd() {
    let home = Home::new();
    home.ok(&["status"]);
    let daemon = home.daemon_pid().unwrap();
    // Warm up (first monitor opens the output directory, the store grows).
    let warm = id_of(&home.json(&["start", "--", "echo warm"]));
    assert!(eventually(Duration::from_secs(10), || monitor(
        &home, "t", &warm
    )["state"]
        == "ended"));
    let fds_before = fd_count(daemon);
    let mut ids = Vec::new();
    for batch in 0..25 {
        let session = format!("z{batch}");
        for _ in 0..8 {
            let v = home.json(&[
                "--session",
                &session,
                "start",
                "--",
                "setsid sleep 0.5 & echo hi",
            ]);
            ids.push((session.clone(), id_of(&v)));
        }
        // Each session holds at most 8 active monitors: wait for this batch.
        assert!(
            eventually(Duration::from_secs(20), || {
                home.json(&["--session", &session, "list"])
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|m| m["state"] == "ended")
            }),
            "batch {batch} did not end"
        );
    }
    assert_eq!(ids.len(), 200);
    assert!(
        eventually(Duration::from_secs(10), || zombie_children(daemon)
            .is_empty()),
        "zombie children of the daemon: {:?}",
        zombie_children(daemon)
    );
    assert!(
        eventually(Duration::from_secs(10), || fd_count(daemon) <= fds_before),
        "daemon fds: {} before, {} after",
        fds_before,
        fd_count(daemon)
    );
    if std::env::var("WAKEFUL_PLATFORM").as_deref() == Ok("posix") {
        // The posix backend cannot find the setsid'd sleeps: each stop
        // says so, and the sleeps end by themselves (0.5 s) — an init
        // that reaps, not the daemon, collects them.
        for (session, id) in &ids {
            assert_eq!(
                monitor(&home, session, id)["unverified"]["backend"],
                "posix"
            );
        }
        for (_, id) in &ids {
            assert!(
                eventually(Duration::from_secs(10), || common::live_of(id) == 0),
                "{id}'s sleep 0.5 never ended"
            );
        }
        return;
    }
    for (_, id) in &ids {
        assert_eq!(common::live_of(id), 0, "{id} left a process");
    }
}

#[test]
fn the_output_file_holds_exactly_the_bytes_written() {
    let home = Home::new();
    let v = home.json(&["start", "--", "printf abc"]);
    let id = id_of(&v);
    assert!(eventually(Duration::from_secs(10), || monitor(
        &home, "t", &id
    )["state"]
        == "ended"));
    let path = v["output_path"].as_str().unwrap();
    assert_eq!(std::fs::read(path).unwrap(), b"abc");
    let events = home.json_lines(&["events"]);
    let lines: Vec<&Value> = events.iter().filter(|e| e["kind"] == "lines").collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["text"], "abc");
    assert_eq!(lines[0]["from_line"], 1);
}

#[test]
fn a_failed_monitor_says_why_everywhere() {
    let home = Home::new();
    let v = home.json(&["start", "--file", "/nonexistent-wakeful-dir/sub/x.log"]);
    let id = id_of(&v);
    assert!(eventually(Duration::from_secs(10), || monitor(
        &home, "t", &id
    )["state"]
        == "ended"));
    let m = monitor(&home, "t", &id);
    assert_eq!(m["stop_reason"]["kind"], "failed", "{m}");
    let error = m["stop_reason"]["error"].as_str().unwrap();
    assert!(error.contains("/nonexistent-wakeful-dir"), "{error}");
    let events = home.json_lines(&["events"]);
    let failed = events.iter().find(|e| e["kind"] == "failed").unwrap();
    assert_eq!(failed["stop_reason"]["kind"], "failed");
    assert_eq!(failed["stop_reason"]["error"], failed["error"]);
    // `get` (through a restarted daemon: the store) says the same.
    home.ok(&["daemon", "stop"]);
    let m = monitor(&home, "t", &id);
    assert_eq!(m["stop_reason"]["kind"], "failed", "{m}");
}
