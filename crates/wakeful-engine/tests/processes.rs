//! The engine against real processes: process groups, stops, floods, line
//! handling, timeouts. No fixed sleeps: every wait is on a condition with one
//! deadline.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use wakeful_core::{Event, EventBody, EventKind, MonitorSpec, MonitorStopReason, StderrMode};
use wakeful_engine::process::{all_processes, live_group_members};
use wakeful_engine::{Launch, MonitorRegistry, RegistryConfig, Subscription};

fn registry(dir: &Path, grace: Duration) -> MonitorRegistry {
    MonitorRegistry::new(RegistryConfig {
        session: "test".into(),
        output_dir: dir.join("output"),
        launch: Launch {
            grace,
            ..Launch::default()
        },
        ..RegistryConfig::default()
    })
}

/// Collects the events of monitor `id` until its final event.
async fn until_end(sub: &mut Subscription, id: &str, limit: Duration) -> Vec<Event> {
    let mut got = Vec::new();
    let res = tokio::time::timeout(limit, async {
        loop {
            let e = sub.recv().await.expect("event stream");
            if e.monitor_id == id {
                let end = e.kind().is_terminal();
                got.push(e);
                if end {
                    return;
                }
            }
        }
    })
    .await;
    assert!(
        res.is_ok(),
        "monitor {id} did not end within {limit:?}: {got:#?}"
    );
    got
}

/// Waits for the first `lines` event of `id` containing `needle`.
async fn until_line(sub: &mut Subscription, id: &str, needle: &str) {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let e = sub.recv().await.expect("event stream");
            if e.monitor_id == id && e.kind() == EventKind::Lines && e.text.contains(needle) {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no line with {needle:?}"));
}

/// Live processes of monitor `id` (see `process::live_of_monitor`).
fn live_of_monitor(id: &str) -> Vec<i32> {
    wakeful_engine::process::live_of_monitor(id)
        .into_iter()
        .map(|p| p.pid)
        .collect()
}

/// Waits until `cond` holds, up to `limit`.
async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn lines_of(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .flat_map(|e| match &e.body {
            EventBody::MonitorEvent { lines, .. } => lines.clone(),
            _ => vec![],
        })
        .collect()
}

fn final_reason(events: &[Event]) -> MonitorStopReason {
    match &events.last().expect("events").body {
        EventBody::MonitorStopped { reason, .. } => reason.clone(),
        other => panic!("not stopped: {other:?}"),
    }
}

fn own_zombie_children() -> usize {
    let me = std::process::id() as i32;
    all_processes()
        .iter()
        .filter(|p| p.ppid == me && p.state == 'Z')
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_kills_tail_grep_pipeline_and_background_sleep() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    std::fs::write(&log, "").unwrap();
    let reg = registry(dir.path(), Duration::from_secs(2));
    let mut sub = reg.subscribe();
    let cmd = format!(
        "sleep 600 & echo pgid=$$; tail -F {} | grep --line-buffered X",
        log.display()
    );
    let id = reg
        .start(MonitorSpec::command(cmd, "tail grep"))
        .await
        .unwrap()
        .info
        .id;
    until_line(&mut sub, &id, "pgid=").await;
    // The pipeline is reading: a matching line arrives as an event.
    std::fs::write(&log, "a X line\nno match\n").unwrap();
    until_line(&mut sub, &id, "a X line").await;
    assert!(
        eventually(Duration::from_secs(5), || live_of_monitor(&id).len() >= 4).await,
        "sh, sleep, tail and grep should run: {:?}",
        live_of_monitor(&id)
    );
    let pgid = {
        let pids = live_of_monitor(&id);
        wakeful_engine::process::proc_info(pids[0]).unwrap().pgrp
    };
    assert!(live_group_members(pgid).len() >= 4);

    let info = reg.stop(&id).await.unwrap();
    assert_eq!(info.stop_reason, Some(MonitorStopReason::UserStopped));
    // Counted right after stop() returned: nothing of the group is left.
    assert_eq!(
        live_group_members(pgid),
        vec![],
        "survivors in group {pgid}"
    );
    assert_eq!(live_of_monitor(&id), Vec::<i32>::new());
    let events = until_end(&mut sub, &id, Duration::from_secs(5)).await;
    assert_eq!(final_reason(&events), MonitorStopReason::UserStopped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_ignoring_sigterm_is_killed_after_grace() {
    let dir = tempfile::tempdir().unwrap();
    let grace = Duration::from_millis(700);
    let reg = registry(dir.path(), grace);
    let mut sub = reg.subscribe();
    let cmd = "trap '' TERM; sh -c \"trap '' TERM; echo ready; sleep 600\" & wait";
    let id = reg
        .start(MonitorSpec::command(cmd, "stubborn"))
        .await
        .unwrap()
        .info
        .id;
    until_line(&mut sub, &id, "ready").await;
    let t0 = Instant::now();
    reg.stop(&id).await.unwrap();
    let took = t0.elapsed();
    assert!(took >= grace, "killed before the grace period: {took:?}");
    assert!(took < grace + Duration::from_secs(2), "took {took:?}");
    assert_eq!(live_of_monitor(&id), Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn main_exit_ends_monitor_even_if_grandchild_holds_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_secs(2));
    let mut sub = reg.subscribe();
    let t0 = Instant::now();
    let id = reg
        .start(MonitorSpec::command("echo done; sleep 600 &", "bg"))
        .await
        .unwrap()
        .info
        .id;
    let events = until_end(&mut sub, &id, Duration::from_secs(5)).await;
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(lines_of(&events), ["done"]);
    assert_eq!(
        final_reason(&events),
        MonitorStopReason::ExitCode { code: 0 }
    );
    assert!(
        eventually(Duration::from_secs(2), || live_of_monitor(&id).is_empty()).await,
        "survivors: {:?}",
        live_of_monitor(&id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instant_dump_of_5000_lines_is_accounted_exactly() {
    flood(5_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn million_line_flood_is_accounted_exactly() {
    // Memory is measured on the daemon, a process of its own, in
    // crates/wakeful-cli/tests/daemon.rs (tests here share one process).
    flood(1_000_000).await;
}

async fn flood(n: u64) {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_secs(2));
    let mut sub = reg.subscribe();
    let mut spec = MonitorSpec::command(format!("seq 1 {n}"), "flood");
    spec.timeout_ms = Some(120_000);
    let started = reg.start(spec).await.unwrap();
    let id = started.info.id.clone();
    let events = until_end(&mut sub, &id, Duration::from_secs(120)).await;
    let file = std::fs::read(&started.info.output_path).unwrap();
    assert_eq!(file.iter().filter(|b| **b == b'\n').count() as u64, n);
    let delivered = lines_of(&events).len() as u64;
    let suppressed: u64 = events
        .iter()
        .map(|e| match e.body {
            EventBody::MonitorSuppressed { count, .. } => count,
            _ => 0,
        })
        .sum();
    assert_eq!(
        delivered + suppressed,
        n,
        "delivered {delivered} + suppressed {suppressed}"
    );
    assert!(events.iter().any(|e| e.kind() == EventKind::Suppressed));
    // Delivered lines are the file's lines, in order, without gaps or repeats
    // inside each event.
    for e in &events {
        if let EventBody::MonitorEvent {
            lines,
            from_line,
            to_line,
        } = &e.body
        {
            assert_eq!(lines.first().unwrap(), &from_line.to_string());
            assert_eq!(lines.last().unwrap(), &to_line.to_string());
            assert!(lines.len() <= 50);
        }
    }
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    let info = reg.get(&id).unwrap();
    assert_eq!(info.lines, n);
    assert_eq!(info.suppressed_lines, suppressed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonzero_exit_reports_code_and_last_lines() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_secs(2));
    let mut sub = reg.subscribe();
    let id = reg
        .start(MonitorSpec::command(
            "for i in $(seq 1 25); do echo line$i; done; echo boom >&2; exit 7",
            "failing",
        ))
        .await
        .unwrap()
        .info
        .id;
    let events = until_end(&mut sub, &id, Duration::from_secs(5)).await;
    match &events.last().unwrap().body {
        EventBody::MonitorStopped {
            reason, last_lines, ..
        } => {
            assert_eq!(reason, &MonitorStopReason::ExitCode { code: 7 });
            assert_eq!(last_lines.len(), 20);
            // stdout and stderr are two pipes: where the stderr line lands
            // among the stdout lines depends on which pipe was read first.
            // The tail is the last 20 lines in the order the output file has.
            let file = std::fs::read_to_string(dir.path().join("output").join(format!("{id}.log")))
                .unwrap();
            let file_lines: Vec<&str> = file.lines().collect();
            assert_eq!(file_lines.len(), 26);
            assert_eq!(last_lines, &file_lines[6..]);
            assert!(file.contains("[stderr] boom\n"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(events[0].kind(), EventKind::Started);
    assert_eq!(
        events.iter().filter(|e| e.kind().is_terminal()).count(),
        1,
        "exactly one final event"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn line_edge_cases() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_secs(2));
    let mut sub = reg.subscribe();

    // printf abc: one line "abc".
    let s = reg
        .start(MonitorSpec::command("printf abc", "p"))
        .await
        .unwrap();
    let events = until_end(&mut sub, &s.info.id, Duration::from_secs(5)).await;
    assert_eq!(lines_of(&events), ["abc"]);

    // Invalid UTF-8 and CRLF: replaced and stripped in events, byte-exact in the file.
    let s = reg
        .start(MonitorSpec::command(
            r"printf 'bad \377\376 end\r\nok\n'",
            "u",
        ))
        .await
        .unwrap();
    let events = until_end(&mut sub, &s.info.id, Duration::from_secs(5)).await;
    assert_eq!(lines_of(&events), ["bad \u{fffd}\u{fffd} end", "ok"]);
    assert_eq!(
        std::fs::read(&s.info.output_path).unwrap(),
        b"bad \xff\xfe end\r\nok\n"
    );

    // A 1 MiB line: cut in its event, whole in the file.
    let s = reg
        .start(MonitorSpec::command(
            "head -c 1048576 /dev/zero | tr '\\0' x; echo; echo after",
            "big",
        ))
        .await
        .unwrap();
    let events = until_end(&mut sub, &s.info.id, Duration::from_secs(10)).await;
    let lines = lines_of(&events);
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0],
        format!(
            "{}…[truncated {} bytes]",
            "x".repeat(65536),
            1048576 - 65536
        )
    );
    assert_eq!(lines[1], "after");
    let file = std::fs::read(&s.info.output_path).unwrap();
    assert_eq!(file.len(), 1048576 + 1 + 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_second_timeout_is_on_time_with_the_known_text() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_secs(2));
    let mut sub = reg.subscribe();
    let mut spec = MonitorSpec::command("echo waiting; sleep 600", "sleeper");
    spec.timeout_ms = Some(2_000);
    let t0 = Instant::now();
    let id = reg.start(spec).await.unwrap().info.id;
    let events = until_end(&mut sub, &id, Duration::from_secs(5)).await;
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(1_700) && took <= Duration::from_millis(2_300),
        "took {took:?}"
    );
    assert_eq!(final_reason(&events), MonitorStopReason::Timeout);
    assert!(events
        .last()
        .unwrap()
        .text
        .contains("[Monitor timed out — re-arm if needed.]"));
    assert!(live_of_monitor(&id).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_cwd_stdin_and_stderr_routing() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_secs(2));
    let mut sub = reg.subscribe();
    let mut spec = MonitorSpec::command(
        "echo id=$WAKEFUL_MONITOR_ID session=$WAKEFUL_SESSION extra=$EXTRA; pwd; cat; echo to-stderr >&2",
        "env",
    );
    spec.env.insert("EXTRA".into(), "yes".into());
    spec.cwd = Some(dir.path().to_path_buf());
    spec.stderr = StderrMode::Events;
    let s = reg.start(spec).await.unwrap();
    let events = until_end(&mut sub, &s.info.id, Duration::from_secs(5)).await;
    let lines = lines_of(&events);
    // `cat` read /dev/null: nothing, and it did not hang. The stderr line is
    // there once; where it falls beside the stdout lines is not defined (two
    // pipes, read as either is readable), so the stdout lines are checked in
    // their own order.
    let stdout: Vec<&String> = lines.iter().filter(|l| *l != "to-stderr").collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(stdout.len(), 2, "{lines:?}");
    assert_eq!(
        *stdout[0],
        format!("id={} session=test extra=yes", s.info.id)
    );
    assert_eq!(
        *stdout[1],
        dir.path().canonicalize().unwrap().display().to_string()
    );
    let file = std::fs::read_to_string(&s.info.output_path).unwrap();
    // The file holds every line once, the stderr one tagged.
    let mut in_file: Vec<&str> = file.lines().collect();
    in_file.sort_unstable();
    let mut expected = vec!["[stderr] to-stderr", stdout[0].as_str(), stdout[1].as_str()];
    expected.sort_unstable();
    assert_eq!(in_file, expected, "{file}");
    assert!(file.ends_with('\n'), "{file}");
    assert_eq!(
        final_reason(&events),
        MonitorStopReason::ExitCode { code: 0 }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_leaked_fds_and_no_zombies() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_secs(2));
    let mut sub = reg.subscribe();
    // Warm up once so lazily created runtime fds are counted in the baseline.
    let s = reg
        .start(MonitorSpec::command("true", "warm"))
        .await
        .unwrap();
    until_end(&mut sub, &s.info.id, Duration::from_secs(5)).await;
    let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    let before = fds();
    for i in 0..20 {
        let s = reg
            .start(MonitorSpec::command(format!("echo {i}; echo e >&2"), "fd"))
            .await
            .unwrap();
        until_end(&mut sub, &s.info.id, Duration::from_secs(5)).await;
    }
    // (Other tests of this process open and close descriptors meanwhile:
    // wait until they are back down, with one generous deadline.)
    assert!(
        eventually(Duration::from_secs(20), || fds() <= before).await,
        "fds {before} -> {}",
        fds()
    );
    // Other tests of this process may have a child that just exited and is
    // about to be reaped: wait for none to be left.
    assert!(
        eventually(Duration::from_secs(5), || own_zombie_children() == 0).await,
        "zombie children: {}",
        own_zombie_children()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_registry_ends_monitors_with_session_ended() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_secs(2));
    let mut sub = reg.subscribe();
    let id = reg
        .start(MonitorSpec::command("echo up; sleep 600", "long"))
        .await
        .unwrap()
        .info
        .id;
    until_line(&mut sub, &id, "up").await;
    drop(reg);
    let events = until_end(&mut sub, &id, Duration::from_secs(5)).await;
    assert_eq!(final_reason(&events), MonitorStopReason::SessionEnded);
    assert!(eventually(Duration::from_secs(2), || live_of_monitor(&id).is_empty()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_limit_and_list_order() {
    let dir = tempfile::tempdir().unwrap();
    let reg = MonitorRegistry::new(RegistryConfig {
        session: "s".into(),
        output_dir: dir.path().join("out"),
        max_active_per_session: 2,
        ..RegistryConfig::default()
    });
    let mut sub = reg.subscribe();
    let mut keyed = MonitorSpec::command("sleep 600", "keyed");
    keyed.key = Some("k".into());
    let a = reg.start(keyed.clone()).await.unwrap();
    let again = reg.start(keyed).await.unwrap();
    assert!(again.already_running);
    assert_eq!(again.info.id, a.info.id);
    let b = reg
        .start(MonitorSpec::command("sleep 600", "b"))
        .await
        .unwrap();
    let err = reg
        .start(MonitorSpec::command("sleep 600", "c"))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&a.info.id) && msg.contains(&b.info.id),
        "{msg}"
    );
    // Another session is unaffected.
    let other = reg
        .start_with(
            MonitorSpec::command("true", "other"),
            wakeful_engine::StartOptions {
                session: Some("t".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    until_end(&mut sub, &other.info.id, Duration::from_secs(5)).await;
    let list = reg.list();
    let ids: Vec<&str> = list.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            a.info.id.as_str(),
            b.info.id.as_str(),
            other.info.id.as_str()
        ]
    );
    assert!(reg.stop("mon-nope").await.is_err());
    assert_eq!(reg.end_session("s").await.len(), 2);
    assert!(reg.list().iter().all(|i| !i.is_active()));
}

/// Embedded (no subreaper, no cgroup): a `setsid` descendant is found by
/// its environment marker in the process table and stopped with the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setsid_descendant_is_stopped_without_a_subreaper() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_millis(500));
    let mut sub = reg.subscribe();
    let id = reg
        .start(MonitorSpec::command(
            "setsid sleep 600 & echo up; sleep 601",
            "setsid",
        ))
        .await
        .unwrap()
        .info
        .id;
    until_line(&mut sub, &id, "up").await;
    assert!(
        eventually(Duration::from_secs(5), || live_of_monitor(&id).len() == 3).await,
        "sh, sleep 600 and sleep 601 run: {:?}",
        live_of_monitor(&id)
    );
    let info = reg.stop(&id).await.unwrap();
    assert!(info.survivors.is_empty(), "{:?}", info.survivors);
    assert_eq!(live_of_monitor(&id), Vec::<i32>::new(), "nothing survives");
    let events = until_end(&mut sub, &id, Duration::from_secs(5)).await;
    assert_eq!(final_reason(&events), MonitorStopReason::UserStopped);
}

/// A `setsid` descendant whose parent already exited: the Linux backend
/// finds it (marker, subreaper) and nothing survives; the posix backend
/// cannot find it, and the final event and the listing say so (the
/// processes it saw, `unverified`) instead of claiming a clean stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escapee_is_found_or_the_stop_says_it_could_not_look() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), Duration::from_millis(500));
    let mut sub = reg.subscribe();
    // The subshell exits at once: its `setsid sleep` is reparented.
    let id = reg
        .start(MonitorSpec::command(
            "(setsid sleep 600 >/dev/null 2>&1 &); echo up; sleep 601",
            "escapee",
        ))
        .await
        .unwrap()
        .info
        .id;
    until_line(&mut sub, &id, "up").await;
    assert!(
        eventually(Duration::from_secs(5), || live_of_monitor(&id).len() == 3).await,
        "sh, sleep 600 and sleep 601 run: {:?}",
        live_of_monitor(&id)
    );
    let info = reg.stop(&id).await.unwrap();
    let events = until_end(&mut sub, &id, Duration::from_secs(5)).await;
    let last = events.last().unwrap();
    match wakeful_platform::backend() {
        wakeful_platform::Backend::Linux => {
            assert!(info.unverified.is_none() && last.body.unverified().is_none());
            assert_eq!(live_of_monitor(&id), Vec::<i32>::new(), "nothing survives");
        }
        wakeful_platform::Backend::Posix => {
            let u = last
                .body
                .unverified()
                .expect("the stop says it could not look");
            assert_eq!(u.backend, "posix");
            assert!(u.seen.len() >= 2, "sh and sleep 601 at least: {u:?}");
            assert!(last.text.contains("others may survive"), "{}", last.text);
            let listed = reg.list().into_iter().find(|i| i.id == id).unwrap();
            assert_eq!(listed.unverified.as_ref(), Some(u));
            // The escapee is indeed alive; the test cleans it up.
            let left = live_of_monitor(&id);
            assert_eq!(left.len(), 1, "the setsid sleep escaped: {left:?}");
            assert!(!u.seen.contains(&left[0]));
            for p in left {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}
