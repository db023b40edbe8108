//! Issue #10 ("trust"): what the command line hands its reader. Output of a
//! monitored command never acts on the reader's terminal, `watch` says how
//! its monitor ended in its exit code, a closed stdout ends a command
//! quietly, and bad input is refused with a message that names it.

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
