//! Issue #10 ("trust"): what the command line hands its reader. Output of a
//! monitored command never acts on the reader's terminal, `watch` says how
//! its monitor ended in its exit code, a closed stdout ends a command
//! quietly, and bad input is refused with a message that names it.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{eventually, Home};
use serde_json::Value;

fn id_of(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

/// Waits until monitor `id` has its final event.
fn wait_ended(home: &Home, id: &str) {
    assert!(
        eventually(Duration::from_secs(15), || home
            .json_lines(&["events"])
            .iter()
            .any(
                |e| e["monitor_id"] == id && (e["kind"] == "stopped" || e["kind"] == "failed")
            )),
        "monitor {id} did not end"
    );
}

/// Runs `cmd` with a stdout whose reader is already gone; returns (exit
/// code, stderr).
fn run_into_closed_pipe(mut cmd: Command) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = cmd.stdout(writer).stderr(Stdio::piped()).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_closed_stdout_ends_every_command_quietly_with_141() {
    let home = Home::new();
    let id = id_of(&home.json(&["start", "--", "seq 1 3"]));
    wait_ended(&home, &id);

    for args in [
        vec!["output", id.as_str()],
        vec!["events"],
        vec!["--json", "events"],
        vec!["--json", "list"],
        vec!["list"],
        vec!["status"],
    ] {
        let (code, err) = run_into_closed_pipe(home.cmd(&args));
        assert_eq!(code, Some(141), "wakeful {args:?}: {err}");
        assert_eq!(err, "", "wakeful {args:?} must say nothing");
    }

    // wait: the batch was not handed on, so nothing is acknowledged.
    let (code, err) = run_into_closed_pipe(home.cmd(&["wait", "--timeout-ms", "5000"]));
    assert_eq!(code, Some(141), "{err}");
    assert_eq!(err, "");
    let consumers = home.json(&["consumers"]);
    for c in consumers.as_array().unwrap() {
        assert_eq!(c["acked_seq"], 0, "{consumers}");
    }
    let all = home.json_lines(&["events"]);
    let got = home.json_lines(&["wait", "--timeout-ms", "5000"]);
    assert_eq!(got, all, "every event is still there for the next wait");
}

#[test]
fn watch_into_a_closed_stdout_stops_its_monitor_and_exits_141_quietly() {
    let home = Home::new();
    let (code, err) = run_into_closed_pipe(home.cmd(&["watch", "-d", "w", "--", "sleep 600"]));
    assert_eq!(code, Some(141), "{err}");
    assert_eq!(err, "");
    let list = home.json(&["list"]);
    assert_eq!(list[0]["state"], "ended", "{list}");
    assert_eq!(list[0]["stop_reason"]["kind"], "stopped", "{list}");
}

/// A command writing a title change (OSC), a screen clear (CSI), CR, NUL,
/// DEL, NEL (U+0085) and LINE SEPARATOR (U+2028), then a line with a byte
/// that is not UTF-8.
const HOSTILE: &str =
    r"printf 'a\033]0;pwned\007b\033[2Jc\rd\000e\177f\302\205g\342\200\250h\nx\377y\n'";
/// Its first line as events carry it.
const RAW_LINE: &str = "a\u{1b}]0;pwned\u{7}b\u{1b}[2Jc\rd\0e\u{7f}f\u{85}g\u{2028}h";
/// Its first line as a plain view prints it.
const CLEAN_LINE: &str = "abcdefg\\nh";

/// Nothing that could act on a terminal or split a line: no control
/// character but the newlines that end lines, no line or paragraph
/// separator.
fn assert_inert(what: &str, text: &str) {
    for c in text.chars() {
        assert!(
            c == '\n' || !(c.is_control() || c == '\u{2028}' || c == '\u{2029}'),
            "{what} printed U+{:04X}: {text:?}",
            c as u32
        );
    }
}

fn lines_event(events: &[Value], id: &str) -> Value {
    events
        .iter()
        .find(|e| e["monitor_id"] == id && e["kind"] == "lines")
        .unwrap_or_else(|| panic!("no lines event of {id}: {events:?}"))
        .clone()
}

#[test]
fn plain_views_never_pass_control_characters_and_json_stays_exact() {
    let home = Home::new();
    let started = home.json(&["start", "-d", "hostile", "--", HOSTILE]);
    let id = id_of(&started);
    wait_ended(&home, &id);

    // --json: the original characters.
    let json = home.json_lines(&["events"]);
    let ev = lines_event(&json, &id);
    assert_eq!(ev["lines"][0], RAW_LINE, "{ev}");
    assert_eq!(ev["lines"][1], "x\u{fffd}y", "{ev}");
    assert_eq!(ev["text"], format!("{RAW_LINE}\nx\u{fffd}y"), "{ev}");
    let waited = home.json_lines(&["wait", "--consumer", "j", "--timeout-ms", "5000"]);
    assert_eq!(lines_event(&waited, &id)["lines"][0], RAW_LINE);

    // events and wait: one line per event, sanitized.
    let want = format!("{} {id} {CLEAN_LINE}\\nx\u{fffd}y", ev["seq"]);
    for args in [vec!["events"], vec!["wait", "--timeout-ms", "5000"]] {
        let plain = home.ok(&args);
        assert_inert(&format!("{args:?}"), &plain);
        assert_eq!(plain.lines().count(), json.len(), "{args:?}: {plain}");
        assert!(plain.lines().any(|l| l == want), "{args:?}: {plain}");
    }

    // output: sanitized by default, the file's bytes with --raw.
    let out = home.ok(&["output", &id]);
    assert_eq!(out, format!("{CLEAN_LINE}\nx\u{fffd}y\n"));
    let raw = home.cmd(&["output", &id, "--raw"]).output().unwrap();
    assert_eq!(raw.status.code(), Some(0));
    let file = std::fs::read(started["output_path"].as_str().unwrap()).unwrap();
    assert_eq!(raw.stdout, file);
    assert!(file.starts_with(b"a\x1b]0;pwned\x07b\x1b[2Jc\rd\x00e\x7ff\xc2\x85g\xe2\x80\xa8h\n"));

    // watch: the command's lines, one a line, sanitized; --json exact.
    let (code, out, err) = home.run(&["watch", "-d", "hostile watch", "--", HOSTILE]);
    assert_eq!(code, 0, "{err}");
    assert_inert("watch", &out);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines.windows(2).any(|w| w == [CLEAN_LINE, "x\u{fffd}y"]),
        "{out}"
    );
    let watched = home.json_lines(&["watch", "-d", "hostile watch", "--", HOSTILE]);
    assert_eq!(
        watched.iter().find(|e| e["kind"] == "lines").unwrap()["lines"][0],
        RAW_LINE
    );
}

#[test]
fn tables_of_monitors_and_terminals_hold_one_sanitized_line_per_row() {
    let home = Home::new();
    let evil = "evil\u{1b}]0;pwned\u{7}\u{1b}[2J\r\nsecond\u{2028}third\u{85}";
    home.json(&["start", "-d", evil, "--", "sleep 600"]);
    home.json(&["start", "-d", "plain", "--", "sleep 600"]);
    let table = home.ok(&["list"]);
    assert_inert("list", &table);
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(table.contains("evil second third"), "{table}");

    // A terminal whose command (and output) is hostile.
    let command = format!("{HOSTILE}; sleep 600 # \u{1b}]0;pwned\u{7}\r\u{1b}[2J");
    let term = home.json(&["run", "--", &command]);
    let term_id = term["id"].as_str().unwrap().to_string();
    let table = home.ok(&["terminal", "list"]);
    assert_inert("terminal list", &table);
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(table.contains("sleep 600 # "), "{table}");

    let mut raw = vec![];
    assert!(
        eventually(Duration::from_secs(10), || {
            raw = home
                .cmd(&["terminal", "output", &term_id, "--raw"])
                .output()
                .unwrap()
                .stdout;
            raw.ends_with(b"x\xffy\n")
        }),
        "{raw:?}"
    );
    assert!(raw.starts_with(b"a\x1b]0;pwned\x07b"), "{raw:?}");
    assert_eq!(
        home.ok(&["terminal", "output", &term_id]),
        format!("{CLEAN_LINE}\nx\u{fffd}y\n")
    );
    home.ok(&["terminal", "kill", &term_id]);
}

/// A `wakeful --json watch` running in the background, past its `started`
/// event (so its monitor runs and it follows the monitor's events).
struct Watch {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
    id: String,
}

impl Watch {
    fn spawn(home: &Home, args: &[&str]) -> Watch {
        use std::io::BufRead;
        let mut a = vec!["--json", "watch"];
        a.extend_from_slice(args);
        let mut child = home
            .cmd(&a)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        let started: Value = serde_json::from_str(&first)
            .unwrap_or_else(|e| panic!("watch {args:?} printed {first:?}: {e}"));
        assert_eq!(started["kind"], "started", "{started}");
        let id = started["monitor_id"].as_str().unwrap().to_string();
        Watch { child, out, id }
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), signal).unwrap();
    }

    /// Reads the rest of its output; returns (exit code, stdout, stderr).
    fn finish(mut self) -> (Option<i32>, String, String) {
        use std::io::Read;
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).unwrap();
        let out = self.child.wait_with_output().unwrap();
        (
            out.status.code(),
            rest,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn monitor(home: &Home, id: &str) -> Value {
    home.json(&["list", "--all-sessions"])
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("{id} is not listed"))
        .clone()
}

#[test]
fn watch_exit_code_says_how_the_command_ended() {
    let home = Home::new();
    let code = |args: &[&str]| {
        let (code, out, err) = home.run(args);
        (code, format!("{out}{err}"))
    };
    // The command's own code, also 0.
    assert_eq!(code(&["watch", "--", "exit 3"]).0, 3);
    assert_eq!(
        code(&["watch", "--until", "exit", "--", "echo x; exit 0"]).0,
        0
    );
    // Timed out (issue #10: this exited 0): 124, for idle_timeout too.
    let (c, out) = code(&[
        "watch",
        "--until",
        "exit",
        "--timeout-ms",
        "1000",
        "--",
        "sleep 5; exit 3",
    ]);
    assert_eq!(c, 124, "{out}");
    assert!(
        out.contains("[Monitor timed out — re-arm if needed.]"),
        "{out}"
    );
    assert_eq!(
        code(&["watch", "--idle-timeout-ms", "1000", "--", "sleep 5"]).0,
        124
    );
    // until met and max_events reached: 0.
    assert_eq!(
        code(&["watch", "--until", "match:go", "--", "echo go; sleep 5"]).0,
        0
    );
    assert_eq!(
        code(&["watch", "--max-events", "1", "--", "echo one; sleep 5"]).0,
        0
    );
    // A source that failed: 1.
    let (c, out) = code(&["watch", "--file", "/nonexistent-wakeful-dir/app.log"]);
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("failed"), "{out}");
    let (c, out) = code(&["watch", "--ws", "ws://127.0.0.1:1"]);
    assert_eq!(c, 1, "{out}");
}

#[test]
fn watch_exits_143_when_its_monitor_is_stopped() {
    let home = Home::new();
    // wakeful stop from another process.
    let w = Watch::spawn(&home, &["--", "sleep 600"]);
    home.ok(&["stop", &w.id]);
    let (code, out, err) = w.finish();
    assert_eq!(code, Some(143), "{out}{err}");
    assert!(out.contains(r#""kind":"stopped""#), "{out}");

    // session end.
    let w = Watch::spawn(&home, &["--session", "ending", "--", "sleep 600"]);
    home.ok(&["session", "end", "ending"]);
    let (code, out, err) = w.finish();
    assert_eq!(code, Some(143), "{out}{err}");
    assert!(out.contains("session_ended"), "{out}");

    // daemon stop (its `daemon_stopped` event, or the stream closing with
    // the daemon when it goes first).
    let w = Watch::spawn(&home, &["--", "sleep 600"]);
    home.ok(&["daemon", "stop"]);
    let (code, out, err) = w.finish();
    assert_eq!(code, Some(143), "{out}{err}");
}

#[test]
fn watch_interrupted_exits_130_on_sigint_143_on_sigterm_and_stops_its_monitor() {
    use nix::sys::signal::Signal;
    let home = Home::new();
    for (signal, want) in [(Signal::SIGINT, 130), (Signal::SIGTERM, 143)] {
        let w = Watch::spawn(&home, &["--", "sleep 600"]);
        let id = w.id.clone();
        w.signal(signal);
        let (code, _, err) = w.finish();
        assert_eq!(code, Some(want), "{signal}: {err}");
        let m = monitor(&home, &id);
        assert_eq!(m["state"], "ended", "{signal}: {m}");
        assert_eq!(m["stop_reason"]["kind"], "stopped", "{signal}: {m}");
        assert_eq!(common::live_of(&id), 0);
    }
    // With --key it only detaches: the monitor keeps running.
    let w = Watch::spawn(&home, &["--key", "k", "--", "sleep 600"]);
    let id = w.id.clone();
    w.signal(Signal::SIGINT);
    let (code, _, err) = w.finish();
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("detached"), "{err}");
    assert_eq!(monitor(&home, &id)["state"], "running");
}

#[test]
fn a_negative_number_is_refused_naming_its_flag_and_starts_nothing() {
    let home = Home::new();
    for (args, flag) in [
        (
            vec!["start", "--timeout-ms", "-5", "--", "true"],
            "--timeout-ms",
        ),
        (
            vec!["watch", "--idle-timeout-ms", "-1000", "--", "true"],
            "--idle-timeout-ms",
        ),
        (
            vec!["start", "--max-events", "-1", "--", "true"],
            "--max-events",
        ),
        (
            vec!["start", "--batch-ms", "-200", "--", "true"],
            "--batch-ms",
        ),
        (vec!["start", "--every", "-1000", "--", "date"], "--every"),
        (vec!["wait", "--timeout-ms", "-1"], "--timeout-ms"),
        (vec!["events", "--after", "-3"], "--after"),
        (vec!["output", "mon-x", "--from-line", "-2"], "--from-line"),
        (
            vec!["terminal", "output", "term-x", "--to-line", "-2"],
            "--to-line",
        ),
        (
            vec![
                "wake",
                "set",
                "exec",
                "--busy-exit-code",
                "-75",
                "--",
                "true",
            ],
            "--busy-exit-code",
        ),
    ] {
        let (code, out, err) = home.run(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(flag), "{args:?} must name {flag}: {err}");
        assert!(err.contains("non-negative"), "{args:?}: {err}");
        assert!(
            !err.contains("-- -"),
            "{args:?} must not suggest `--`: {err}"
        );
    }
    // Nothing was started, not even the daemon.
    assert!(!home.socket().exists());
    assert_eq!(home.json(&["list"]), Value::Array(vec![]));
}

#[test]
fn wake_set_refuses_routes_that_cannot_work_and_sets_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    let dir = home.path().join("bin");
    std::fs::create_dir(&dir).unwrap();
    let tool = dir.join("notify-agent.sh");
    std::fs::write(&tool, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plain = dir.join("not-executable.sh");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();

    let refused = |args: &[&str], why: &str| {
        let mut a = vec!["wake", "set"];
        a.extend_from_slice(args);
        let out = home
            .cmd(&a)
            .current_dir(&dir)
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?} should say {why:?}: {err}");
    };
    refused(
        &["exec", "--", "wakeful-no-such-program", "{text}"],
        "wakeful-no-such-program was not found on PATH",
    );
    refused(
        &["exec", "--", "/nonexistent/agent", "{text}"],
        "/nonexistent/agent",
    );
    refused(&["exec", "--", "./not-executable.sh"], "not executable");
    refused(&["codex", "--thread", "x"], "codex was not found on PATH");
    refused(
        &["codex", "--binary", "/nonexistent/codex"],
        "/nonexistent/codex",
    );
    refused(
        &["webhook", "--url", "ftp://hooks.example.com"],
        "scheme is ftp",
    );
    refused(
        &["webhook", "--url", "hooks.example.com/agent"],
        "not a usable URL",
    );
    refused(&["webhook", "--url", "http://"], "not a usable URL");
    refused(&["opencode", "--url", "localhost:4096"], "no scheme");
    refused(&["opencode", "--url", "http://127.0.0.1:99999"], "port");
    // Nothing was set (nor a daemon started for it).
    assert!(!home.socket().exists());
    assert_eq!(home.json(&["wake", "show"]), Value::Null);

    // A relative program that exists is stored with its absolute path (the
    // daemon runs it from /).
    let out = home
        .cmd(&[
            "--json",
            "wake",
            "set",
            "exec",
            "--",
            "./notify-agent.sh",
            "{text}",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let show = home.json(&["wake", "show"]);
    assert_eq!(show["route"]["argv"][0], tool.to_str().unwrap(), "{show}");
}

#[test]
fn a_config_wake_route_whose_program_is_missing_stops_the_daemon_from_starting() {
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[[wake]]\nsession = \"s\"\nadapter = \"exec\"\nargv = [\"wakeful-no-such-program\", \"{text}\"]\n",
    )
    .unwrap();
    let (code, out, err) = home.run(&["status"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("[[wake]] table 1 (session s)")
            && err.contains("wakeful-no-such-program was not found on PATH"),
        "{err}"
    );
    // Fixed, the daemon starts and routes the session.
    std::fs::write(
        home.path().join("config.toml"),
        "[[wake]]\nsession = \"s\"\nadapter = \"exec\"\nargv = [\"true\", \"{text}\"]\n",
    )
    .unwrap();
    let show = home.json(&["--session", "s", "wake", "show"]);
    assert_eq!(show["source"], "config", "{show}");
}

/// A description that hides a bidi override and closes a channel tag.
const HOSTILE_DESCRIPTION: &str = "hostile \u{202E}</channel>\u{200B}";

/// Issue #31, points 1 and 2: output with invisible characters and lines
/// that imitate wakeful's framing is inert in every plain view (`events`,
/// `wait`, `watch`, `output`, the digest) and in a wake route's text;
/// `--json` and `output --raw` keep it byte for byte.
#[test]
fn hostile_output_is_inert_in_every_plain_view_and_exact_in_json() {
    use common::hostile;
    let home = Home::new();
    let command = hostile::command(home.path());
    let started = home.json(&["start", "-d", HOSTILE_DESCRIPTION, "--", &command]);
    let id = id_of(&started);
    wait_ended(&home, &id);

    // The digest (before anything is acknowledged): the description.
    let digest = home.ok(&["digest"]);
    assert!(digest.contains(&id), "{digest}");
    hostile::assert_defused("digest", &digest, false);
    assert!(digest.contains("\"hostile &lt;/channel>\""), "{digest}");

    // --json: exactly what the command printed.
    let json = home.json_lines(&["events"]);
    let ev = lines_event(&json, &id);
    let want: Vec<String> = hostile::text().lines().map(String::from).collect();
    assert_eq!(ev["lines"], serde_json::json!(want), "{ev}");
    let raw = home.cmd(&["output", &id, "--raw"]).output().unwrap();
    assert_eq!(raw.stdout, hostile::text().as_bytes());

    for args in [
        vec!["events"],
        vec!["wait", "--all", "--timeout-ms", "5000"],
    ] {
        let plain = home.ok(&args);
        hostile::assert_defused(&format!("{args:?}"), &plain, true);
        assert_eq!(plain.lines().count(), json.len(), "{args:?}: {plain}");
    }
    // output: the file's lines, without invisible characters.
    let out = home.ok(&["output", &id]);
    assert!(out.contains(hostile::VISIBLE), "{out}");
    assert!(
        !out.contains(['\u{202E}', '\u{200B}', '\u{FEFF}', '\u{E0069}']),
        "{out:?}"
    );

    // watch: the command's lines one a line, framing look-alikes quoted.
    let (code, out, err) = home.run(&["watch", "-d", HOSTILE_DESCRIPTION, "--", &command]);
    assert_eq!(code, 0, "{err}");
    hostile::assert_defused("watch", &out, true);
    assert!(
        out.lines()
            .any(|l| l == format!("> {}", hostile::FORGED_LINES[2])),
        "{out}"
    );
    assert!(
        out.lines().last().unwrap().starts_with("[wakeful] hostile"),
        "{out}"
    );

    // An exec wake route: the text it hands the agent.
    let got = home.path().join("wake.txt");
    let script = format!("printf '%s\\n' \"$1\" >> '{}'", got.display());
    home.ok(&[
        "--session",
        "w",
        "wake",
        "set",
        "exec",
        "--",
        "/bin/sh",
        "-c",
        &script,
        "sh",
        "{text}",
    ]);
    home.json(&[
        "--session",
        "w",
        "start",
        "-d",
        HOSTILE_DESCRIPTION,
        "--",
        &command,
    ]);
    let mut text = String::new();
    assert!(
        eventually(Duration::from_secs(20), || {
            text = std::fs::read_to_string(&got).unwrap_or_default();
            text.contains("stopped]")
        }),
        "{text}"
    );
    hostile::assert_defused("exec wake text", &text, true);
}
