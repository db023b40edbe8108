//! `wakeful acp-proxy` with a minimal ACP agent (`tests/e2e/acp/fake_agent.py`), no
//! npm: messages pass unchanged, a monitor's event becomes a turn of the idle
//! session (shown to the editor, the agent's answer swallowed, acknowledged), the
//! agent gets the proxy's session and `--wake-on`, and closing stdin ends the
//! agent's whole process group even though the agent ignores it. The real ACP
//! agents are in acp_e2e.rs. Needs python3.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{eventually, Home, BIN};
use serde_json::{json, Value};

const LIMIT: Duration = Duration::from_secs(20);

fn agent_log(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn a_monitor_event_becomes_a_turn_of_the_idle_session_and_closing_stdin_ends_the_agent() {
    let home = Home::new();
    home.ok(&["status"]);
    let repo = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let log = home.path().join("agent.jsonl");
    let mut proxy = Command::new(BIN)
        .args(["acp-proxy", "--wake-on", "match:HELLO", "--"])
        .arg("python3")
        .arg(repo.join("tests/e2e/acp/fake_agent.py"))
        .env("WAKEFUL_HOME", home.path())
        .env("FAKE_AGENT_LOG", &log)
        .env_remove("WAKEFUL_SESSION")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut to_proxy = proxy.stdin.take().unwrap();
    let (tx, from_proxy) = mpsc::channel::<Value>();
    let out = proxy.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let line = line.unwrap();
            tx.send(serde_json::from_str(&line).unwrap()).unwrap();
        }
    });
    let send = |to: &mut std::process::ChildStdin, v: Value| writeln!(to, "{v}").unwrap();
    let next = |what: &str| {
        from_proxy
            .recv_timeout(LIMIT)
            .unwrap_or_else(|_| panic!("no {what}"))
    };
    send(
        &mut to_proxy,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
    );
    assert_eq!(next("initialize answer")["id"], 0);
    send(
        &mut to_proxy,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}),
    );
    assert_eq!(next("session/new answer")["result"]["sessionId"], "s1");

    // The agent got the proxy's session and the wake rule.
    let env = agent_log(&log)[0]["env"].clone();
    let session = env["WAKEFUL_SESSION"].as_str().unwrap().to_string();
    assert!(session.starts_with("acp-"), "{env}");
    assert_eq!(env["WAKEFUL_WAKE_ON"], "match:HELLO");

    // A monitor of that session, started with the agent's environment:
    // its `started` event does not wake (match:HELLO), its line does.
    let started = Instant::now();
    let (code, _, err) = home.run(&[
        "start",
        "--session",
        &session,
        "--wake-on",
        "match:HELLO",
        "--",
        "echo HELLO-from-monitor; sleep 30",
    ]);
    assert_eq!(code, 0, "{err}");
    let shown = next("the wake shown to the editor");
    assert_eq!(shown["method"], "session/update");
    assert_eq!(
        shown["params"]["update"]["sessionUpdate"],
        "user_message_chunk"
    );
    assert_eq!(shown["params"]["update"]["_meta"]["wakeful"]["wake"], true);
    let text = shown["params"]["update"]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(text.starts_with("[wakeful wake-"), "{text}");
    assert!(text.contains("HELLO-from-monitor"), "{text}");
    // The agent's update of the woken turn reaches the editor; its answer
    // to the proxy's prompt does not.
    let update = next("the woken turn's update");
    assert_eq!(
        update["params"]["update"]["sessionUpdate"],
        "agent_message_chunk"
    );
    eprintln!(
        "wake: monitor start → the turn's update at the editor in {:?}",
        started.elapsed()
    );
    let prompts: Vec<Value> = agent_log(&log)
        .into_iter()
        .filter(|m| m["method"] == "session/prompt")
        .collect();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0]["id"], "wakeful-acp-1");

    // Acknowledged once answered: consumer `acp` is past every event.
    assert!(eventually(LIMIT, || {
        let c = home.json(&["consumers", "--session", &session, "--json"]);
        c.as_array()
            .unwrap()
            .iter()
            .any(|c| c["consumer"] == "acp" && c["unacked"] == 0)
    }));

    // A user prompt goes through and is answered as sent.
    send(
        &mut to_proxy,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}}),
    );
    assert_eq!(
        next("the user's update")["params"]["update"]["content"]["text"],
        "echo: hi"
    );
    let answer = next("the user's answer");
    assert_eq!(answer["id"], 2);
    assert!(
        from_proxy.recv_timeout(Duration::from_millis(300)).is_err(),
        "nothing more"
    );

    // Closing stdin: the agent ignores it; its group is ended; exit 0.
    let child = agent_log(&log)[1]["child"].as_i64().unwrap() as i32;
    drop(to_proxy);
    let closed = Instant::now();
    let status = loop {
        if let Some(s) = proxy.try_wait().unwrap() {
            break s;
        }
        assert!(closed.elapsed() < LIMIT, "the proxy did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    eprintln!("exit {:?} after stdin closed", closed.elapsed());
    assert!(
        eventually(Duration::from_secs(2), || !std::path::Path::new(&format!(
            "/proc/{child}"
        ))
        .exists()
            || std::fs::read_to_string(format!("/proc/{child}/stat"))
                .is_ok_and(|s| s.contains(") Z "))),
        "the agent's child {child} survived"
    );
    reader.join().unwrap();
}
