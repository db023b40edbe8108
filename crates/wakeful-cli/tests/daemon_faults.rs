//! The daemon under faults: its starter's process tree torn down, out of
//! file descriptors, too many connections from one process, malformed
//! requests, clients that see another runtime directory. It stays up, its
//! monitors go on, and every refusal says why.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

use common::{eventually, Home};
use nix::sys::resource::{setrlimit, Resource};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use wakeful_engine::process::{proc_info, subtree};

fn id_of(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

fn alive(pid: i32) -> bool {
    proc_info(pid).is_some_and(|p| p.is_live())
}

fn lines_events(home: &Home, id: &str) -> usize {
    home.json_lines(&["events"])
        .iter()
        .filter(|e| e["monitor_id"] == id && e["kind"] == "lines")
        .count()
}

fn output_len(v: &Value) -> u64 {
    std::fs::metadata(v["output_path"].as_str().unwrap()).map_or(0, |m| m.len())
}

/// A ticking monitor: a line every 20 ms (rate-limited events, a growing
/// output file).
fn ticker(home: &Home) -> Value {
    home.json(&[
        "start",
        "--persistent",
        "--",
        "while true; do echo tick; sleep 0.02; done",
    ])
}

#[test]
fn the_daemon_outlives_the_process_tree_that_started_it() {
    let home = Home::new();
    // A long-lived first client (as `wakeful hook rewake` is inside Claude
    // Code), in a process group of its own: it starts the daemon.
    let mut starter = home
        .cmd(&["wait", "--timeout-ms", "600000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let starter_pid = starter.id() as i32;
    assert!(
        eventually(Duration::from_secs(15), || home.socket().exists()
            && home.daemon_pid().is_some()),
        "the daemon started"
    );
    let daemon = home.daemon_pid().unwrap();
    let d = proc_info(daemon).unwrap();
    assert_ne!(d.ppid, starter_pid, "not a child of its starter");
    assert_eq!(d.pgrp, daemon, "a process group of its own");
    assert!(
        !subtree(starter_pid).iter().any(|p| p.pid == daemon),
        "not in its starter's process tree"
    );
    let v = ticker(&home);
    let id = id_of(&v);
    // Tear the starter down as an agent tears down its hooks: SIGTERM to its
    // whole group and to every process of its tree, then SIGKILL.
    for sig in [Signal::SIGTERM, Signal::SIGKILL] {
        let tree: Vec<i32> = subtree(starter_pid).iter().map(|p| p.pid).collect();
        let _ = killpg(Pid::from_raw(starter_pid), sig);
        for pid in tree {
            let _ = kill(Pid::from_raw(pid), sig);
        }
    }
    let _ = starter.wait();
    assert!(alive(daemon), "the daemon survived");
    assert_eq!(home.daemon_pid(), Some(daemon));
    let list = home.json(&["list"]);
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["state"], "running");
    let before = output_len(&v);
    assert!(
        eventually(Duration::from_secs(10), || output_len(&v) > before),
        "its monitor still streams"
    );
}

#[test]
fn a_client_with_another_runtime_dir_finds_the_same_daemon() {
    // Without WAKEFUL_HOME: state under $HOME, the socket in
    // $XDG_RUNTIME_DIR when set. An MCP server started by an agent that
    // drops XDG_RUNTIME_DIR must not start a second daemon on the same
    // database.
    let base = tempfile::Builder::new()
        .prefix("wkx")
        .tempdir_in("/tmp")
        .unwrap();
    let home_dir = base.path().join("home");
    let run_dir = base.path().join("run");
    std::fs::create_dir_all(&home_dir).unwrap();
    std::fs::create_dir_all(&run_dir).unwrap();
    let cmd = |with_runtime: bool, args: &[&str]| {
        let mut c = std::process::Command::new(common::BIN);
        c.args(args)
            .env_remove("WAKEFUL_HOME")
            .env_remove("XDG_STATE_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env("HOME", &home_dir)
            .env("WAKEFUL_SESSION", "x")
            .stdin(Stdio::null());
        if with_runtime {
            c.env("XDG_RUNTIME_DIR", &run_dir);
        } else {
            c.env_remove("XDG_RUNTIME_DIR");
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let a = cmd(true, &["--json", "status"]);
    let b = cmd(false, &["--json", "status"]);
    assert_eq!(a["pid"], b["pid"], "one daemon for one state directory");
    let id = cmd(false, &["--json", "start", "--", "sleep 30"])["id"].clone();
    let listed = cmd(true, &["--json", "list"]);
    assert_eq!(listed[0]["id"], id);
    let _ = cmd(true, &["--json", "daemon", "stop"]);
}

/// Runs `wakeful ARGS` with a limit of `soft`/`hard` open files (inherited
/// by a daemon it starts).
fn run_limited(home: &Home, soft: u64, hard: u64, args: &[&str]) -> std::process::Output {
    let mut c = home.cmd(args);
    // SAFETY: setrlimit is async-signal-safe and only changes the child.
    unsafe {
        c.pre_exec(move || {
            setrlimit(Resource::RLIMIT_NOFILE, soft, hard).map_err(std::io::Error::from)
        });
    }
    c.output().unwrap()
}

#[test]
fn the_soft_open_file_limit_is_raised_to_the_hard_one() {
    let home = Home::new();
    let out = run_limited(&home, 64, 4096, &["status"]);
    assert!(out.status.success());
    assert_eq!(home.json(&["status"])["max_open_files"], 4096);
}

#[test]
fn out_of_descriptors_the_daemon_stays_up_and_its_monitors_go_on() {
    let home = Home::new();
    let out = run_limited(&home, 64, 64, &["status"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let daemon = home.daemon_pid().unwrap();
    assert_eq!(home.json(&["status"])["max_open_files"], 64);
    let v = ticker(&home);
    let id = id_of(&v);
    assert!(eventually(Duration::from_secs(10), || lines_events(
        &home, &id
    ) > 0));
    // Idle connections, more than the daemon has descriptors for (40 is
    // already about its headroom under this limit).
    let mut conns = Vec::new();
    for _ in 0..60 {
        conns.push(UnixStream::connect(home.socket()).unwrap());
    }
    let log = home.path().join("daemon.log");
    assert!(
        eventually(Duration::from_secs(15), || std::fs::read_to_string(&log)
            .is_ok_and(|t| t.contains("accepting a connection failed"))),
        "the condition is in the log"
    );
    // Clients the daemon could not take are told so (`busy`).
    for c in &conns {
        c.set_nonblocking(true).unwrap();
    }
    let mut busy = 0;
    eventually(Duration::from_secs(10), || {
        for c in &conns {
            let mut line = String::new();
            if BufReader::new(c).read_line(&mut line).is_ok() && line.contains("\"busy\"") {
                busy += 1;
            }
        }
        busy > 0
    });
    assert!(
        busy > 0,
        "at least one waiting client was refused with busy; log: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let during = output_len(&v);
    drop(conns);
    assert!(alive(daemon), "the daemon is still up");
    let status = home.json(&["status"]);
    assert_eq!(status["pid"], daemon);
    assert!(status["accept_errors"].as_u64().unwrap() > 0, "{status}");
    assert!(status["last_accept_error"].is_string(), "{status}");
    assert!(
        status["connections_refused"].as_u64().unwrap() > 0,
        "{status}"
    );
    let (_, text, _) = home.run(&["status"]);
    assert!(text.contains("accept errors"), "{text}");
    assert!(
        eventually(Duration::from_secs(10), || output_len(&v) > during),
        "its monitor goes on"
    );
    assert_eq!(home.json(&["list"])[0]["state"], "running");
}

#[test]
fn one_process_cannot_take_every_connection() {
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[limits]\nmax_connections_per_process = 5\n",
    )
    .unwrap();
    home.ok(&["status"]);
    let mut held = Vec::new();
    for _ in 0..5 {
        let mut c = UnixStream::connect(home.socket()).unwrap();
        // A request answered: the connection is counted.
        writeln!(c, r#"{{"v":1,"op":"status"}}"#).unwrap();
        let mut line = String::new();
        BufReader::new(&c).read_line(&mut line).unwrap();
        assert!(line.contains("\"ok\""), "{line}");
        held.push(c);
    }
    let mut extra = UnixStream::connect(home.socket()).unwrap();
    writeln!(extra, r#"{{"v":1,"op":"status"}}"#).unwrap();
    let mut line = String::new();
    BufReader::new(&extra).read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["kind"], "busy", "{reply}");
    let message = reply["message"].as_str().unwrap();
    assert!(message.contains("max_connections_per_process"), "{message}");
    // Other processes are not affected.
    assert_eq!(home.json(&["status"])["connections_refused"], 1);
    drop(held);
}

/// Sends one raw line, returns the daemon's first answer.
fn raw(home: &Home, line: &str) -> Value {
    let mut c = UnixStream::connect(home.socket()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    writeln!(c, "{line}").unwrap();
    let mut answer = String::new();
    BufReader::new(&c).read_line(&mut answer).unwrap();
    serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

#[test]
fn every_protocol_error_has_its_kind() {
    let home = Home::new();
    home.ok(&["status"]);
    let kind = |line: &str| {
        let reply = raw(&home, line);
        reply["kind"]
            .as_str()
            .unwrap_or_else(|| panic!("{line} -> {reply}"))
            .to_string()
    };
    // invalid: not JSON, no version, unknown op, unknown field, wrong type,
    // a parameter out of range.
    assert_eq!(kind("not json"), "invalid");
    assert_eq!(kind(r#"[1,2]"#), "invalid");
    assert_eq!(kind(r#"{"op":"status"}"#), "invalid");
    assert_eq!(kind(r#"{"v":1,"op":"nope"}"#), "invalid");
    assert_eq!(kind(r#"{"v":1,"op":"status","bogus":1}"#), "invalid");
    assert_eq!(kind(r#"{"v":1,"op":"stop","id":5}"#), "invalid");
    assert_eq!(kind(r#"{"v":1,"op":"stop","id":"x","bogus":1}"#), "invalid");
    assert_eq!(
        kind(
            r#"{"v":1,"op":"start","session":"t","spec":{"source":{"kind":"command","command":"true"},"description":"d","timeout_ms":1},"env":{},"cwd":"/"}"#
        ),
        "invalid"
    );
    assert_eq!(
        kind(
            r#"{"v":1,"op":"start","session":"t","spec":{"source":{"kind":"command","command":"true"},"description":"d","bogus":1},"env":{},"cwd":"/"}"#
        ),
        "invalid"
    );
    // version: another protocol version.
    let v = raw(&home, r#"{"v":2,"op":"status"}"#);
    assert_eq!(v["kind"], "version");
    assert!(v["message"]
        .as_str()
        .unwrap()
        .contains("wakeful daemon stop"));
    // not_found, timeout.
    assert_eq!(kind(r#"{"v":1,"op":"stop","id":"mon-nope"}"#), "not_found");
    assert_eq!(
        kind(r#"{"v":1,"op":"wait","session":"t","consumer":"c","timeout_ms":10}"#),
        "timeout"
    );
    // limit: a ninth active monitor.
    for _ in 0..8 {
        home.ok(&["--session", "lim", "start", "--", "sleep 30"]);
    }
    assert_eq!(
        kind(
            r#"{"v":1,"op":"start","session":"lim","spec":{"source":{"kind":"command","command":"sleep 30"},"description":"d"},"env":{},"cwd":"/"}"#
        ),
        "limit"
    );
    // superseded: a newer exclusive waiter takes over.
    let mut first = UnixStream::connect(home.socket()).unwrap();
    writeln!(
        first,
        r#"{{"v":1,"op":"wait","session":"ex","consumer":"c","exclusive":true}}"#
    )
    .unwrap();
    assert!(eventually(Duration::from_secs(10), || {
        home.json(&["--session", "ex", "consumers"])
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["waiters"] == 1)
    }));
    let mut second = UnixStream::connect(home.socket()).unwrap();
    writeln!(
        second,
        r#"{{"v":1,"op":"wait","session":"ex","consumer":"c","exclusive":true,"timeout_ms":50}}"#
    )
    .unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut line = String::new();
    BufReader::new(&first).read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["kind"], "superseded", "{reply}");
    drop(second);
    // The daemon is still fine after all of that.
    home.ok(&["status"]);
}

#[test]
fn the_daemon_log_says_what_happened() {
    let home = Home::new();
    home.ok(&["status"]);
    let log = home.path().join("daemon.log");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("listening on"), "{text}");
    assert!(text.contains(" INFO "), "{text}");
    // A wake route whose program fails: the failure is in the log.
    home.ok(&["wake", "set", "exec", "--", "/bin/sh", "-c", "exit 3"]);
    home.ok(&["start", "--", "echo x"]);
    assert!(
        eventually(Duration::from_secs(15), || std::fs::read_to_string(&log)
            .is_ok_and(|t| t.contains("wake ")
                && t.contains("exit")
                && t.lines().any(|l| l.contains("WARN")))),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    home.ok(&["daemon", "stop"]);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("stopped"), "{text}");
    // The level comes from WAKEFUL_LOG.
    let mut c = home.cmd(&["status"]);
    c.env("WAKEFUL_LOG", "debug");
    assert!(c.output().unwrap().status.success());
    home.ok(&["start", "--", "echo y"]);
    assert!(
        eventually(Duration::from_secs(10), || std::fs::read_to_string(&log)
            .is_ok_and(|t| t.contains("DEBUG"))),
        "debug lines with WAKEFUL_LOG=debug"
    );
}

/// An event is handed out once it is in the store's redo log; the tables
/// get it a moment later (here the fold is held back for ten minutes). A
/// daemon killed with SIGKILL in between loses nothing: the next daemon
/// puts the event into the tables under the seq its reader saw, says so in
/// its log, and numbers on after it.
#[test]
fn an_event_a_reader_saw_survives_kill_9_before_it_reached_the_tables() {
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[store]\nfold_delay_ms = 600000\n",
    )
    .unwrap();
    let fifo = home.path().join("in.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    home.json(&[
        "start",
        "--batch-ms",
        "0",
        "--",
        "cat",
        fifo.to_str().unwrap(),
    ]);
    // Read and write: opening does not wait for the monitor's `cat`.
    let mut writer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let mut follower = home
        .cmd(&["--json", "events", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follower.stdout.take().unwrap()).lines();
    writeln!(writer, "survivor").unwrap();
    let seen = loop {
        let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        if v["kind"] == "lines" {
            break v;
        }
    };
    home.kill_daemon();
    let _ = follower.kill();
    let _ = follower.wait();

    // The next daemon starts with this command.
    let events = home.json_lines(&["events"]);
    let again: Vec<&Value> = events.iter().filter(|e| e["kind"] == "lines").collect();
    assert_eq!(again.len(), 1, "{events:?}");
    assert_eq!(again[0]["seq"], seen["seq"]);
    assert_eq!(again[0]["text"], "survivor");
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let log = std::fs::read_to_string(home.path().join("daemon.log")).unwrap();
    assert!(
        log.contains("events from the redo log into the database"),
        "the log does not say the event came from the redo log:\n{log}"
    );
}

/// Takes `daemon.lock` the way a daemon does, as a daemon that is still
/// exiting (or hung) would hold it; let go when dropped.
fn hold_daemon_lock(home: &Home) -> nix::fcntl::Flock<std::fs::File> {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(home.path().join("daemon.lock"))
        .unwrap();
    nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusiveNonblock).unwrap()
}

#[test]
fn a_start_waits_for_an_exiting_daemon_to_let_go_of_its_lock() {
    // A daemon killed (or finishing a stop) closes its socket before the
    // last of its threads lets go of the daemon lock. A client that comes
    // in that moment starts a daemon which must wait for the lock — not
    // report "running" and send the client to a socket nobody serves.
    let home = Home::new();
    let held = hold_daemon_lock(&home);
    let mut list = home.cmd(&["--json", "list"]);
    let mut list = list
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = home.path().join("daemon.log");
    assert!(
        eventually(Duration::from_secs(10), || {
            std::fs::read_to_string(&log).is_ok_and(|l| l.contains("refuses connections: waiting"))
        }),
        "the new daemon does not say it waits"
    );
    assert!(list.try_wait().unwrap().is_none(), "the client gave up");
    drop(held);
    let out = list.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "after the lock was let go: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed, serde_json::json!([]));
    let _ = home.run(&["daemon", "stop"]);
}

#[test]
fn a_lock_never_let_go_is_named_in_the_error_and_no_daemon_stays() {
    // The holder does not serve the socket and does not exit: after
    // HOLDER_EXIT_WAIT the start gives up and says which lock, and where
    // to look; the client fails, and no second daemon is left running.
    let home = Home::new();
    let _held = hold_daemon_lock(&home);
    let t0 = std::time::Instant::now();
    let (code, _out, err) = home.run(&["--json", "list"]);
    assert_ne!(code, 0, "{err}");
    assert!(
        t0.elapsed() >= wakeful_daemon::HOLDER_EXIT_WAIT,
        "gave up after {:?}",
        t0.elapsed()
    );
    let lock_path = home.path().join("daemon.lock");
    assert!(
        err.contains(&lock_path.display().to_string()) && err.contains("fuser"),
        "{err}"
    );
    assert!(
        !home.path().join("daemon.json").exists(),
        "a daemon recorded itself"
    );
    let log = std::fs::read_to_string(home.path().join("daemon.log")).unwrap();
    assert!(log.contains("cannot start"), "{log}");
    // The daemon that gave up has exited, though the lock is still held
    // (its wait for the lock does not keep it alive).
    assert!(
        eventually(Duration::from_secs(5), || daemons_of(&home).is_empty()),
        "daemon processes left: {:?}",
        daemons_of(&home)
    );
}

/// Pids of `wakeful daemon` processes started for this home (by the
/// `WAKEFUL_HOME` in their environment).
fn daemons_of(home: &Home) -> Vec<i32> {
    let marker = format!("WAKEFUL_HOME={}", home.path().display());
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let (Ok(env), Ok(cmd)) = (
            std::fs::read(entry.path().join("environ")),
            std::fs::read(entry.path().join("cmdline")),
        ) else {
            continue; // gone meanwhile, or not ours to read
        };
        let has = |bytes: &[u8], what: &[u8]| bytes.split(|b| *b == 0).any(|part| part == what);
        if has(&env, marker.as_bytes()) && has(&cmd, b"daemon") {
            pids.push(pid);
        }
    }
    pids
}

/// Issue #31, point 11 (the socket frame parser, end to end): a request
/// line longer than the daemon reads (64 MiB) is refused as invalid and
/// passed over without being held whole; the same connection goes on with
/// the next request, and the daemon's memory did not grow by the line.
#[test]
fn a_request_line_longer_than_64_mib_is_refused_and_the_connection_goes_on() {
    let home = Home::new();
    home.ok(&["status"]);
    let pid = home.daemon_pid().unwrap();
    let rss = || -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap()
    };
    let before = rss();
    let mut c = UnixStream::connect(home.socket()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let chunk = vec![b'x'; 1024 * 1024];
    for _ in 0..80 {
        c.write_all(&chunk).unwrap();
    }
    c.write_all(b"\n{\"v\":1,\"op\":\"status\"}\n").unwrap();
    let mut reader = BufReader::new(c.try_clone().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    let reply: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(reply["kind"], "invalid", "{reply}");
    assert!(
        reply["message"]
            .as_str()
            .unwrap()
            .contains("longer than 67108864 bytes"),
        "{reply}"
    );
    let mut second = String::new();
    reader.read_line(&mut second).unwrap();
    assert!(second.contains("\"ok\""), "{second}");
    let grew = rss().saturating_sub(before);
    assert!(
        grew < 72 * 1024,
        "the daemon's peak memory grew by {grew} kB"
    );
}
