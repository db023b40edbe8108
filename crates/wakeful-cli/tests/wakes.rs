//! Which events wake (`--wake-on`), silence as an event (`--expect-within`):
//! every event is recorded; only the chosen ones end a `wait` or start a
//! wake route's delivery, and the others come with them, each once.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{eventually, Home};
use serde_json::Value;

/// A monitor that prints `lines`, then waits until `gate` exists, then exits
/// with `code`.
fn gated(lines: &[&str], gate: &std::path::Path, code: i32) -> String {
    let mut s = String::new();
    // Apart in time, so each line is an event of its own.
    for l in lines {
        s.push_str(&format!("echo '{l}'; sleep 0.05; "));
    }
    s.push_str(&format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; exit {code}",
        gate.display()
    ));
    s
}

/// The texts of the `lines` events and the kinds, in order.
fn kinds_and_lines(events: &[Value]) -> (Vec<String>, Vec<String>) {
    let kinds = events
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    let lines = events
        .iter()
        .filter(|e| e["kind"] == "lines")
        .flat_map(|e| e["lines"].as_array().unwrap().clone())
        .map(|l| l.as_str().unwrap().to_string())
        .collect();
    (kinds, lines)
}

/// Waits until the session's log holds an event with this text in a line.
fn logged(home: &Home, line: &str) {
    assert!(
        eventually(Duration::from_secs(10), || home
            .json_lines(&["events"])
            .iter()
            .any(|e| e["lines"]
                .as_array()
                .is_some_and(|l| l.iter().any(|l| l == line)))),
        "{line:?} never logged"
    );
}

#[test]
fn wake_on_exit_records_every_line_and_wakes_once_at_the_end() {
    let home = Home::new();
    let gate = home.path().join("gate");
    let cmd = gated(&["one", "two"], &gate, 3);
    let v = home.json(&["start", "--wake-on", "exit", "--batch-ms", "0", "--", &cmd]);
    let id = v["id"].as_str().unwrap().to_string();
    logged(&home, "two");
    // Recorded and readable, marked as not waking.
    let log = home.json_lines(&["events"]);
    let lines: Vec<&Value> = log.iter().filter(|e| e["kind"] == "lines").collect();
    assert!(lines.iter().all(|e| e["wake"] == false), "{log:?}");
    // Nothing that wakes yet: a wait times out although events are unread.
    let started = Instant::now();
    let (code, out, err) = home.run(&["wait", "--timeout-ms", "300"]);
    assert_eq!((code, out.as_str()), (124, ""), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(err.contains("that wake"), "{err}");

    std::fs::write(&gate, "").unwrap();
    let got = home.json_lines(&["wait", "--timeout-ms", "10000"]);
    let (kinds, lines) = kinds_and_lines(&got);
    assert_eq!(lines, ["one", "two"]);
    assert_eq!(kinds.first().map(String::as_str), Some("started"));
    assert_eq!(kinds.last().map(String::as_str), Some("stopped"));
    let stopped = got.last().unwrap();
    assert_eq!(stopped["monitor_id"], id.as_str());
    assert_eq!(stopped["stop_reason"]["code"], 3, "{stopped}");
    assert!(stopped.get("wake").is_none(), "{stopped}");
    // Each once.
    let (code, out, _) = home.run(&["wait", "--timeout-ms", "0"]);
    assert_eq!((code, out.as_str()), (124, ""));
    let (code, out, _) = home.run(&["wait", "--all", "--timeout-ms", "0"]);
    assert_eq!((code, out.as_str()), (124, ""));
}

#[test]
fn wake_on_match_wakes_on_the_line_and_all_reads_the_rest() {
    let home = Home::new();
    let gate = home.path().join("gate");
    let cmd = gated(&["compiling a", "ERROR: b broke", "compiling c"], &gate, 0);
    home.json(&[
        "start",
        "--wake-on",
        "match:ERROR",
        "--batch-ms",
        "0",
        "--",
        &cmd,
    ]);
    logged(&home, "compiling c");
    let got = home.json_lines(&["wait", "--timeout-ms", "10000"]);
    let (_, lines) = kinds_and_lines(&got);
    assert_eq!(lines, ["compiling a", "ERROR: b broke"], "{got:?}");
    assert!(got.last().unwrap().get("wake").is_none());
    // The line after it does not wake: only --all hands it out.
    let (code, _, _) = home.run(&["wait", "--timeout-ms", "200"]);
    assert_eq!(code, 124);
    let rest = home.json_lines(&["wait", "--all", "--timeout-ms", "0"]);
    let (_, lines) = kinds_and_lines(&rest);
    assert_eq!(lines, ["compiling c"]);
    assert!(rest.iter().all(|e| e["wake"] == false), "{rest:?}");
    // A successful end is not a failure: it waits for --all as well.
    std::fs::write(&gate, "").unwrap();
    assert!(eventually(Duration::from_secs(10), || home
        .json_lines(&["events"])
        .iter()
        .any(|e| e["kind"] == "stopped")));
    let (code, _, _) = home.run(&["wait", "--timeout-ms", "0"]);
    assert_eq!(code, 124);
    let end = home.json_lines(&["wait", "--all", "--timeout-ms", "0"]);
    assert_eq!(end.len(), 1, "{end:?}");
    assert_eq!(end[0]["kind"], "stopped");
}

#[test]
fn more_than_a_page_of_quiet_events_reach_the_waiter_with_the_wake() {
    // Over 1,000 events that do not wake (more than a batch holds: 70
    // monitors of 18 events each, within the rate limit's burst; lines
    // 10 ms apart, so that each is read alone even while the daemon is
    // busy with the others), then a failure: a plain wait hands out all of
    // them, in order, each once.
    let home = Home::new();
    let config = home.path().join("config.toml");
    std::fs::write(&config, "[limits]\nmax_active_per_session = 100\n").unwrap();
    let quiet = "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do echo q$i; sleep 0.01; done";
    for _ in 0..70 {
        home.json(&["start", "--wake-on", "fail", "--batch-ms", "0", "--", quiet]);
    }
    assert!(eventually(Duration::from_secs(60), || home
        .json(&["list"])
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["state"] != "running")));
    let logged = home.json_lines(&["events"]).len();
    assert!(logged > 1000, "only {logged} events");
    home.json(&["start", "--wake-on", "fail", "--", "echo boom; exit 1"]);
    let got = home.json_lines(&["wait", "--timeout-ms", "20000"]);
    assert_eq!(
        got.len(),
        logged + 3,
        "started, boom, stopped after the rest"
    );
    assert_eq!(got.last().unwrap()["kind"], "stopped");
    let seqs: Vec<u64> = got.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "gaps or repeats");
    let (code, _, _) = home.run(&["wait", "--all", "--timeout-ms", "0"]);
    assert_eq!(code, 124);
}

#[test]
fn silence_is_an_event_and_the_monitor_keeps_running() {
    let home = Home::new();
    let gate = home.path().join("gate");
    let cmd = format!(
        "echo first; while [ ! -e '{0}' ]; do sleep 0.02; done; echo back; rm '{0}'; \
         while [ ! -e '{0}' ]; do sleep 0.02; done",
        gate.display()
    );
    let v = home.json(&[
        "start",
        "--expect-within",
        "1000",
        "--wake-on",
        "fail",
        "--batch-ms",
        "0",
        "--",
        &cmd,
    ]);
    let id = v["id"].as_str().unwrap().to_string();
    // `silent` is a failure for --wake-on fail: it ends a wait.
    let started = Instant::now();
    let got = home.json_lines(&["wait", "--timeout-ms", "10000"]);
    let silent = got.last().unwrap();
    assert_eq!(silent["kind"], "silent", "{got:?}");
    assert!(silent["quiet_ms"].as_u64().unwrap() >= 1000, "{silent}");
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert!(
        silent["text"].as_str().unwrap().contains("no output for 1"),
        "{silent}"
    );
    // Once per quiet period, and the monitor still runs.
    let (code, _, _) = home.run(&["wait", "--timeout-ms", "1500"]);
    assert_eq!(code, 124);
    let list = home.json(&["list"]);
    assert_eq!(list[0]["state"], "running", "{list}");
    // Output again: `resumed` (recorded, not a failure), then the line.
    std::fs::write(&gate, "").unwrap();
    logged(&home, "back");
    let rest = home.json_lines(&["wait", "--all", "--timeout-ms", "0"]);
    let kinds: Vec<&str> = rest.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["resumed", "lines"], "{rest:?}");
    assert_eq!(rest[0]["wake"], false);
    assert!(rest[0]["quiet_ms"].as_u64().unwrap() >= 1000);
    // A second quiet period: a second `silent`.
    let again = home.json_lines(&["wait", "--timeout-ms", "10000"]);
    assert_eq!(again.last().unwrap()["kind"], "silent", "{again:?}");
    home.ok(&["stop", &id]);
}

#[test]
fn expect_within_is_checked() {
    let home = Home::new();
    for (args, says) in [
        (vec!["--expect-within", "10"], "expect-within"),
        (vec!["--wake-on", "sometimes"], "wake-on"),
        (vec!["--wake-on", "match:("], "wake-on"),
    ] {
        let mut a = vec!["start"];
        a.extend(args.iter().copied());
        a.extend(["--", "true"]);
        let (code, out, err) = home.run(&a);
        assert_eq!(code, 2, "{a:?}: {out}{err}");
        assert!(err.contains(says), "{a:?}: {err}");
    }
    // Nothing started.
    assert_eq!(home.json(&["list"]), serde_json::json!([]));
}

#[test]
fn a_wake_route_is_delivered_only_for_events_that_wake() {
    let home = Home::new();
    let out = home.path().join("wakes");
    home.json(&[
        "wake",
        "set",
        "exec",
        "--",
        "/bin/sh",
        "-c",
        "printf '%s\\n===\\n' \"$1\" >> \"$0\"",
        out.to_str().unwrap(),
        "{text}",
    ]);
    let gate = home.path().join("gate");
    let cmd = gated(&["quiet-1", "quiet-2"], &gate, 4);
    home.json(&["start", "--wake-on", "fail", "--batch-ms", "0", "--", &cmd]);
    logged(&home, "quiet-2");
    // Recorded, and no delivery for them.
    assert!(
        !eventually(Duration::from_millis(300), || out.exists()),
        "{:?}",
        std::fs::read_to_string(&out)
    );
    std::fs::write(&gate, "").unwrap();
    let mut text = String::new();
    assert!(eventually(Duration::from_secs(10), || {
        text = std::fs::read_to_string(&out).unwrap_or_default();
        text.contains("exited with code 4")
    }));
    // One wake, carrying the quiet lines before the failure.
    assert_eq!(text.matches("===").count(), 1, "{text}");
    assert!(
        text.contains("quiet-1") && text.contains("quiet-2"),
        "{text}"
    );
    // Its delivery is in the route's recent history.
    let show = home.json(&["wake", "show"]);
    let recent = show["recent"].as_array().unwrap();
    assert_eq!(recent.len(), 1, "{show}");
    assert_eq!(recent[0]["outcome"], "accepted");
    assert_eq!(recent[0]["attempt"], 1);
    assert_eq!(recent[0]["events_from"], 1);
    let last = home.json_lines(&["events"]).last().unwrap()["seq"].clone();
    assert_eq!(recent[0]["events_to"], last);
    assert!(home
        .ok(&["wake", "show"])
        .contains("recent deliveries (newest last):"));
}

/// `wakeful --json start` of a quiet monitor; returns its `wake`.
fn wake_of_start(home: &Home) -> Value {
    let v = home.json(&["start", "-d", "quiet", "--", "sleep 600"]);
    let id = v["id"].as_str().unwrap().to_string();
    home.ok(&["stop", &id]);
    v["wake"].clone()
}

/// A `wakeful wait --follow` of consumer `consumer`, killed on drop.
struct Waiter(std::process::Child);

impl Waiter {
    fn spawn(home: &Home, consumer: &str) -> Self {
        let child = home
            .cmd(&["wait", "--follow", "--consumer", consumer])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            eventually(Duration::from_secs(10), || home
                .json(&["consumers"])
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["consumer"] == consumer && c["waiters"] == 1)),
            "the waiter never attached"
        );
        Waiter(child)
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn start_says_whether_a_wake_will_come() {
    let home = Home::new();
    // Nothing attached: not live, and the text says what to do.
    let wake = wake_of_start(&home);
    assert_eq!(wake["live"], false, "{wake}");
    assert_eq!(wake["route"], "none");
    let reason = wake["reason"].as_str().unwrap();
    assert!(reason.starts_with("nothing will wake you"), "{reason}");
    assert!(reason.contains("wakeful wait --session t"), "{reason}");
    let (code, out, err) = home.run(&["start", "-d", "x", "--", "true"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("mon-") && out.lines().count() == 1, "{out}");
    assert!(err.contains("wakeful: nothing will wake you"), "{err}");
    // A waiter attached: live, through it.
    let waiter = Waiter::spawn(&home, "ci");
    let wake = wake_of_start(&home);
    assert_eq!(wake["live"], true, "{wake}");
    assert_eq!(wake["route"], "wait:ci");
    let (_, _, err) = home.run(&["start", "-d", "y", "--", "true"]);
    assert!(!err.contains("nothing will wake you"), "{err}");
    // `run` says it too.
    let r = home.json(&["run", "--until", "exit", "--", "true"]);
    assert_eq!(r["wake"]["live"], true, "{r}");
    // It goes away: not live again within seconds.
    drop(waiter);
    assert!(eventually(Duration::from_secs(5), || wake_of_start(&home)
        ["live"]
        == false));
    // Another session's waiter does not count.
    let _other = {
        let mut c = home.cmd(&["--session", "other", "wait", "--follow"]);
        c.stdout(std::process::Stdio::null());
        Waiter(c.spawn().unwrap())
    };
    assert!(eventually(Duration::from_secs(10), || home
        .json(&["--session", "other", "consumers"])
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["waiters"] == 1)));
    assert_eq!(wake_of_start(&home)["live"], false);
}

#[test]
fn doctor_exits_0_only_when_a_wake_would_arrive() {
    let home = Home::new();
    // No daemon yet.
    let (code, out, _) = home.run(&["doctor"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("PROBLEM  daemon"), "{out}");
    assert!(out.contains("fix: any wakeful command starts it"), "{out}");
    assert!(
        out.contains("No wake would arrive for session `t`"),
        "{out}"
    );
    // A daemon but nothing attached.
    home.ok(&["status"]);
    let (code, out, _) = home.run(&["doctor"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("ok       daemon"), "{out}");
    assert!(out.contains("ok       state directory"), "{out}");
    assert!(out.contains("PROBLEM  wake"), "{out}");
    assert!(
        out.contains("fix: before ending your turn, block on `wakeful wait --session t`"),
        "{out}"
    );
    // Healthy: a waiter.
    let waiter = Waiter::spawn(&home, "default");
    let (code, out, _) = home.run(&["doctor"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ok       path wait:default"), "{out}");
    assert!(
        out.contains("A wake would arrive for session `t`."),
        "{out}"
    );
    let v = doctor(&home);
    assert_eq!(v["live"], true);
    assert_eq!(v["wake"]["route"], "wait:default");
    assert!(
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["level"] != "problem"),
        "{v}"
    );
    drop(waiter);
    assert!(eventually(Duration::from_secs(5), || home
        .run(&["doctor"])
        .0
        == 1));
}

#[test]
fn doctor_probes_each_wake_route_target() {
    let home = Home::new();
    // An exec route whose program went away.
    let agent = home.path().join("agent");
    std::fs::write(&agent, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    home.json(&[
        "wake",
        "set",
        "exec",
        "--",
        agent.to_str().unwrap(),
        "{text}",
    ]);
    let v = doctor(&home);
    assert_eq!(v["live"], true, "a fresh route counts: {v}");
    assert!(
        checks(&v).contains(&("route exec".to_string(), "ok".to_string())),
        "{v}"
    );
    std::fs::remove_file(&agent).unwrap();
    // Issue #31, point 7: the program is gone, so no wake can come that
    // way, even before a delivery failed: the exit code says so.
    let (code, out, _) = home.run(&["doctor"]);
    assert!(out.contains("PROBLEM  route exec"), "{out}");
    assert!(out.contains("fix: install the program"), "{out}");
    assert!(out.contains("PROBLEM  path exec"), "{out}");
    assert!(
        out.contains("PROBLEM  wake")
            && out.contains("the exec wake route cannot deliver: cannot run"),
        "{out}"
    );
    assert!(
        out.contains("No wake would arrive for session `t` (exit 1)."),
        "{out}"
    );
    assert_eq!(code, 1, "{out}");
    let v = doctor(&home);
    assert_eq!(v["live"], false, "{v}");
    // A waiter makes it live again, but the broken route is still a
    // problem: exit 1.
    let waiter = Waiter::spawn(&home, "default");
    let (code, out, _) = home.run(&["doctor"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("ok       wake"), "{out}");
    assert!(
        out.contains(
            "A wake would arrive for session `t`, but 2 problems above need fixing (exit 1)."
        ),
        "{out}"
    );
    let v = doctor(&home);
    assert_eq!(
        (v["live"].clone(), v["problems"].clone()),
        (Value::from(true), Value::from(2)),
        "{v}"
    );
    drop(waiter);
    // Delivery fails: the route is no longer live, and the doctor says so.
    home.ok(&["start", "--", "echo hi"]);
    assert!(eventually(Duration::from_secs(10), || home
        .json(&["wake", "show"])["state"]
        == "undelivered"));
    let (code2, out, _) = home.run(&["doctor"]);
    assert_eq!(code2, 1, "{out}");
    assert!(out.contains("PROBLEM  path exec"), "{out}");
    // An OpenCode route where nothing listens.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    home.json(&["wake", "set", "opencode", "--url", &url]);
    let (_, out, _) = home.run(&["doctor"]);
    assert!(
        out.contains(&format!(
            "PROBLEM  route opencode         nothing answers at 127.0.0.1:{port}"
        )),
        "{out}"
    );
    assert!(out.contains("fix: start the OpenCode server"), "{out}");
    // ... and where something does.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    home.json(&["wake", "set", "opencode", "--url", &url]);
    let v = doctor(&home);
    assert!(
        checks(&v).contains(&("route opencode".to_string(), "ok".to_string())),
        "{v}"
    );
}

/// `wakeful --json doctor`, whatever its verdict.
fn doctor(home: &Home) -> Value {
    let (code, out, err) = home.run(&["--json", "doctor"]);
    assert!(code == 0 || code == 1, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["live"] == true && v["problems"] == 0, code == 0, "{v}");
    v
}

/// (name, level) of each check of a `doctor --json`.
fn checks(v: &Value) -> Vec<(String, String)> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["level"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn doctor_reports_a_state_directory_it_cannot_use() {
    let home = Home::new();
    let file = home.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let out = home
        .cmd(&["doctor"])
        .env("WAKEFUL_HOME", &file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("PROBLEM  state directory"), "{text}");
    assert!(text.contains("fix: point WAKEFUL_HOME"), "{text}");
}

#[test]
fn doctor_checks_the_claude_code_plugin_copy() {
    let home = Home::new();
    home.ok(&["status"]);
    let v = doctor(&home);
    assert!(
        checks(&v).contains(&("claude code plugin".to_string(), "info".to_string())),
        "{v}"
    );
    home.ok(&["integrate", "claude-code"]);
    let v = doctor(&home);
    assert!(
        checks(&v).contains(&("claude code plugin".to_string(), "ok".to_string())),
        "{v}"
    );
    let hooks = home
        .path()
        .join("integrations/claude-code/hooks/hooks.json");
    std::fs::write(&hooks, "{}").unwrap();
    let (_, out, _) = home.run(&["doctor"]);
    assert!(out.contains("PROBLEM  claude code plugin"), "{out}");
    assert!(
        out.contains("fix: run `wakeful integrate claude-code` again"),
        "{out}"
    );
}

#[test]
fn the_digest_lists_running_monitors_and_those_ended_unseen() {
    let home = Home::new();
    // Nothing: no text at all.
    home.ok(&["status"]);
    assert_eq!(home.ok(&["digest"]), "");
    let running = home.json(&["start", "-d", "dev server", "--", "echo up; sleep 600"]);
    let running = running["id"].as_str().unwrap().to_string();
    let ended = home.json(&["start", "-d", "unit tests", "--", "exit 3"]);
    let ended = ended["id"].as_str().unwrap().to_string();
    assert!(eventually(Duration::from_secs(10), || home
        .json_lines(&["events"])
        .iter()
        .any(|e| e["kind"] == "stopped")));
    let text = home.ok(&["digest"]);
    assert!(text.starts_with("[wakeful] Background monitors of this session (t): 1 active, 1 ended since you last saw their events"), "{text}");
    assert!(
        text.contains(&format!("- {running} \"dev server\"")),
        "{text}"
    );
    assert!(
        text.contains(&format!("- {ended} \"unit tests\": exited with code 3")),
        "{text}"
    );
    assert!(
        text.contains("`wakeful events --session t --after 0`"),
        "{text}"
    );
    let v = home.json(&["digest"]);
    assert_eq!(v["active"][0]["id"], running.as_str());
    assert_eq!(v["ended"][0]["ended"], "exited with code 3");
    // Once the agent has seen the events, only the running monitor is left.
    home.ok(&["wait", "--all", "--timeout-ms", "0"]);
    let text = home.ok(&["digest"]);
    assert!(text.contains("1 active, 0 ended"), "{text}");
    assert!(!text.contains(&ended), "{text}");
    home.ok(&["stop", &running]);
}

#[test]
fn doctor_looks_at_codex_and_its_app_server() {
    let home = Home::new();
    let codex = home.path().join("codex");
    std::fs::write(&codex, "#!/bin/sh\necho 'codex-cli 0.171.0'\n").unwrap();
    std::fs::set_permissions(&codex, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let codex_home = home.path().join("codex-home");
    std::fs::create_dir_all(codex_home.join("app-server-control")).unwrap();
    home.json(&[
        "wake",
        "set",
        "codex",
        "--thread",
        "th-1",
        "--binary",
        codex.to_str().unwrap(),
        "--codex-home",
        codex_home.to_str().unwrap(),
    ]);
    let v = doctor(&home);
    let c = checks(&v);
    assert!(
        c.contains(&("route codex".to_string(), "ok".to_string())),
        "{v}"
    );
    assert!(
        c.contains(&("codex app-server".to_string(), "info".to_string())),
        "{v}"
    );
    let text = v.to_string();
    assert!(
        text.contains("codex-cli 0.171.0") && text.contains("thread th-1"),
        "{text}"
    );
    // Codex's app-server listening on its control socket.
    let socket = codex_home.join("app-server-control/app-server-control.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let v = doctor(&home);
    assert!(
        checks(&v).contains(&("codex app-server".to_string(), "ok".to_string())),
        "{v}"
    );
}

#[test]
fn doctor_sees_a_project_scope_install_of_the_claude_code_plugin() {
    let home = Home::new();
    home.ok(&["status"]);
    let project = home.path().join("project");
    let plugin = project.join(".claude/skills/wakeful/.claude-plugin");
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::write(plugin.join("plugin.json"), r#"{"name": "wakeful"}"#).unwrap();
    let out = home
        .cmd(&["doctor"])
        .current_dir(&project)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("info     claude code scope"), "{text}");
    assert!(text.contains("arms no plugin monitor there"), "{text}");
    assert!(text.contains("info     claude code mcp"), "{text}");
    // Approved ahead: no word about the dialog.
    std::fs::write(
        project.join(".claude/settings.local.json"),
        r#"{"enabledMcpjsonServers": ["plugin:wakeful:wakeful"]}"#,
    )
    .unwrap();
    let out = home
        .cmd(&["doctor"])
        .current_dir(&project)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("claude code scope"), "{text}");
    assert!(!text.contains("claude code mcp"), "{text}");
}
