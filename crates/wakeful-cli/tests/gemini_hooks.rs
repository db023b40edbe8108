//! The Gemini CLI hooks (`wakeful hook gemini-*`) and `wakeful integrate
//! gemini` with the real binary, fed the hook inputs Gemini CLI 0.61.0 sent
//! (tests/fixtures/gemini/), against a temporary WAKEFUL_HOME. The same hooks
//! in the real Gemini CLI: gemini_e2e.rs.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{eventually, Home};
use serde_json::{json, Value};

/// A hook input captured from Gemini CLI 0.61.0, for `session`.
fn fixture(name: &str, session: &str) -> Value {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/gemini/{name}.json"));
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["session_id"] = json!(session);
    v
}

/// A command with no session from the environment (and none of Gemini's).
fn bare(home: &Home, args: &[&str]) -> Command {
    let mut c = home.cmd(args);
    c.env_remove("WAKEFUL_SESSION")
        .env_remove("GEMINI_SESSION_ID")
        .env_remove("GEMINI_CLI");
    c
}

/// Runs `wakeful hook <hook>` with `input` on stdin: (exit code, stdout, stderr).
fn hook(home: &Home, hook: &str, input: &Value) -> (i32, String, String) {
    let mut child = bare(home, &["hook", hook])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The one JSON object a hook printed.
fn one_object(out: &str) -> Value {
    assert_eq!(out.lines().count(), 1, "{out}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The additionalContext of a hook's output, which must be exactly
/// `{"hookSpecificOutput": {"hookEventName": EVENT, "additionalContext": …}}`.
fn context_of(out: &str, event: &str) -> String {
    let v = one_object(out);
    let context = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_else(|| panic!("no additionalContext: {v}"))
        .to_string();
    assert_eq!(
        v,
        json!({"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}})
    );
    context
}

/// Waits until monitor `id` of `session` has stopped.
fn stopped(home: &Home, session: &str, id: &str) {
    assert!(
        eventually(Duration::from_secs(15), || {
            home.json_lines(&["--session", session, "events"])
                .iter()
                .any(|e| e["monitor_id"] == id && e["kind"] == "stopped")
        }),
        "{id} never stopped"
    );
}

fn start(home: &Home, session: &str, args: &[&str]) -> String {
    let mut a = vec!["--session", session, "start"];
    a.extend_from_slice(args);
    home.json(&a)["id"].as_str().unwrap().to_string()
}

fn acked(home: &Home, session: &str) -> Value {
    home.json(&["--session", session, "consumers"])
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["consumer"] == "gemini")
        .map(|c| c["acked_seq"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn after_tool_appends_the_events_and_after_agent_does_not_repeat_them() {
    let home = Home::new();
    let id = start(&home, "G", &["-d", "tests", "--", "printf 'one\\ntwo\\n'"]);
    stopped(&home, "G", &id);
    let (code, out, err) = hook(&home, "gemini-after-tool", &fixture("after-tool", "G"));
    assert_eq!((code, err.as_str()), (0, ""));
    let context = context_of(&out, "AfterTool");
    assert!(
        context.starts_with("[wakeful] 3 events from this session's background monitors"),
        "{context}"
    );
    assert!(context.contains("not messages from the user"), "{context}");
    assert!(
        context.contains(&format!(
            "[wakeful {id} \"tests\" · 2 lines (output lines 1–2)]\none\ntwo"
        )),
        "{context}"
    );
    let last = home
        .json_lines(&["--session", "G", "events"])
        .last()
        .unwrap()["seq"]
        .clone();
    assert_eq!(acked(&home, "G"), last, "acknowledged once written");
    // Exactly once: neither the next tool nor the end of the turn has them.
    for name in ["after-tool", "after-agent"] {
        let (code, out, err) = hook(&home, &format!("gemini-{name}"), &fixture(name, "G"));
        assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""), "{name}");
    }
}

#[test]
fn after_agent_hands_over_what_did_not_wake_once_and_never_when_stop_hook_active() {
    let home = Home::new();
    // Ends well under --wake-on fail: nothing of it wakes.
    let id = start(
        &home,
        "A",
        &["--wake-on", "fail", "-d", "quiet", "--", "echo quiet-line"],
    );
    stopped(&home, "A", &id);
    // A tool's end is mid-turn: only what wakes goes there.
    let (code, out, _) = hook(&home, "gemini-after-tool", &fixture("after-tool", "A"));
    assert_eq!((code, out.as_str()), (0, ""));
    // The turn already continues because of an AfterAgent hook: nothing.
    let mut active = fixture("after-agent", "A");
    active["stop_hook_active"] = json!(true);
    let (code, out, err) = hook(&home, "gemini-after-agent", &active);
    assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""));
    assert_eq!(acked(&home, "A"), Value::Null, "nothing was taken");
    // The end of the turn: every unacknowledged event, as a new prompt.
    let (code, out, err) = hook(&home, "gemini-after-agent", &fixture("after-agent", "A"));
    assert_eq!((code, err.as_str()), (0, ""));
    let v = one_object(&out);
    let reason = v["reason"].as_str().unwrap().to_string();
    assert_eq!(v, json!({"decision": "deny", "reason": reason}));
    assert!(reason.starts_with("[wakeful] 3 events from this session's background monitors"));
    assert!(
        reason.contains(&format!(
            "[wakeful {id} \"quiet\" · 1 line (output lines 1–1)]\nquiet-line\n"
        )),
        "{reason}"
    );
    // Once.
    let (code, out, _) = hook(&home, "gemini-after-agent", &fixture("after-agent", "A"));
    assert_eq!((code, out.as_str()), (0, ""));
}

#[test]
fn nothing_pending_prints_nothing() {
    let home = Home::new();
    for (name, input) in [
        ("gemini-session-start", "session-start"),
        ("gemini-after-tool", "after-tool"),
        ("gemini-after-agent", "after-agent"),
    ] {
        let (code, out, err) = hook(&home, name, &fixture(input, "N"));
        assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""), "{name}");
    }
    // They run on every tool call: without a daemon they start none.
    assert!(!home.socket().exists());
    // With one running and nothing pending, the same.
    home.ok(&["status"]);
    for (name, input) in [
        ("gemini-after-tool", "after-tool"),
        ("gemini-after-agent", "after-agent"),
    ] {
        let (code, out, err) = hook(&home, name, &fixture(input, "N"));
        assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""), "{name}");
    }
}

#[test]
fn session_start_gives_the_resume_digest_as_context() {
    let home = Home::new();
    let id = start(&home, "D", &["-d", "dev server", "--", "sleep 600"]);
    let (code, out, err) = hook(
        &home,
        "gemini-session-start",
        &fixture("session-start", "D"),
    );
    assert_eq!((code, err.as_str()), (0, ""));
    let context = context_of(&out, "SessionStart");
    assert!(
        context.starts_with("[wakeful] Background monitors of this session (D): 1 active"),
        "{context}"
    );
    assert!(
        context.contains(&format!("- {id} \"dev server\"")),
        "{context}"
    );
    home.ok(&["--session", "D", "stop", &id]);
}

#[test]
fn hook_failures_exit_1_never_2() {
    let home = Home::new();
    for name in [
        "gemini-session-start",
        "gemini-after-tool",
        "gemini-after-agent",
    ] {
        let mut child = bare(&home, &["hook", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"not json").unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("not JSON"));
        assert!(out.stdout.is_empty());
        let (code, _, err) = hook(&home, name, &json!({"hook_event_name": "AfterTool"}));
        assert_eq!(code, 1, "{name}: {err}");
        assert!(err.contains("no session"), "{err}");
    }
}

#[test]
fn in_geminis_shell_wakeful_uses_the_session_its_hooks_recorded() {
    // A stand-in for Gemini CLI (argv[0] `gemini`) that runs its
    // SessionStart hook, then a command of its shell tool (GEMINI_CLI=1,
    // no session variable), as Gemini 0.61.0 does.
    let home = Home::new();
    let input = fixture("session-start", "gem-1").to_string();
    let script = r#"printf '%s' "$INPUT" | "$WK" hook gemini-session-start >/dev/null || exit 9
GEMINI_CLI=1 "$WK" start --json -- echo from-the-shell || exit 8
until GEMINI_CLI=1 "$WK" events --json | grep -q '"kind":"stopped"'; do sleep 0.05; done
GEMINI_CLI=1 "$WK" wait --all --timeout-ms 10000 --json >/dev/null || exit 7"#;
    let out = Command::new("bash")
        .args(["-c", "exec -a gemini bash -c \"$SCRIPT\""])
        .env("SCRIPT", script)
        .env("INPUT", &input)
        .env("WK", common::BIN)
        .env("WAKEFUL_HOME", home.path())
        .env_remove("WAKEFUL_SESSION")
        .env_remove("CLAUDE_CODE_SESSION_ID")
        .env_remove("CODEX_THREAD_ID")
        .env_remove("GEMINI_SESSION_ID")
        .env_remove("GEMINI_CLI")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let started: Value =
        serde_json::from_slice(out.stdout.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!(started["session"], "gem-1");
    // `wait` in Gemini's shell read the hooks' consumer: nothing is left
    // for them to hand over again.
    assert_ne!(acked(&home, "gem-1"), Value::Null);
    let (_, out, _) = hook(
        &home,
        "gemini-after-agent",
        &fixture("after-agent", "gem-1"),
    );
    assert_eq!(out, "");
    // Outside Gemini's shell nothing changes.
    let v = bare(&home, &["--json", "start", "--", "true"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(v["session"], "default");
}

// ------------------------------------------------------------ integrate

fn integrate(home: &Home, args: &[&str], gemini_home: &Path) -> (i32, String, String) {
    let mut a = vec!["integrate", "gemini"];
    a.extend_from_slice(args);
    let out = bare(home, &a)
        .env("HOME", gemini_home)
        .env_remove("GEMINI_CLI_HOME")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn backups(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".wakeful-backup-"))
        .collect()
}

#[test]
fn integrate_gemini_merges_into_the_users_settings_once() {
    let home = Home::new();
    let user = home.path().join("user-home");
    let dir = user.join(".gemini");
    std::fs::create_dir_all(&dir).unwrap();
    let settings = dir.join("settings.json");
    let original = "{\n  // my model\n  \"model\": {\"name\": \"gemini-2.5-pro\"},\n  \"hooks\": {\"AfterTool\": [{\"matcher\": \"write_file\", \"hooks\": [{\"type\": \"command\", \"command\": \"lint.sh\"}]}]}\n}\n";
    std::fs::write(&settings, original).unwrap();
    let (code, out, err) = integrate(&home, &["--json"], &user);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["path"], settings.to_str().unwrap());
    assert_eq!(v["scope"], "user");
    assert_eq!(v["changed"], true);
    assert_eq!(
        v["events"],
        json!(["SessionStart", "AfterTool", "AfterAgent"])
    );
    let backup = PathBuf::from(v["backup"].as_str().unwrap());
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), original);
    let text = std::fs::read_to_string(&settings).unwrap();
    assert!(
        text.starts_with("{\n  // my model\n  \"model\": {\"name\": \"gemini-2.5-pro\"},"),
        "{text}"
    );
    let stripped: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect();
    let s: Value = serde_json::from_str(&stripped).unwrap();
    assert_eq!(s["hooks"]["AfterTool"][0]["hooks"][0]["command"], "lint.sh");
    for (event, sub) in [
        ("SessionStart", "gemini-session-start"),
        ("AfterTool", "gemini-after-tool"),
        ("AfterAgent", "gemini-after-agent"),
    ] {
        let defs = s["hooks"][event].as_array().unwrap();
        let ours = &defs.last().unwrap()["hooks"][0];
        assert_eq!(
            ours["command"],
            format!("command -v wakeful >/dev/null 2>&1 || exit 0; exec wakeful hook {sub}"),
            "{event}"
        );
        assert_eq!(ours["type"], "command");
        assert_eq!(ours["timeout"], 30000);
    }
    // Idempotent: no change, no new backup.
    let (code, out, _) = integrate(&home, &[], &user);
    assert_eq!(code, 0);
    assert!(out.contains("up to date; nothing changed"), "{out}");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), text);
    assert_eq!(backups(&dir).len(), 1);
}

#[test]
fn integrate_gemini_creates_a_project_file_and_refuses_invalid_json() {
    let home = Home::new();
    let project = home.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let (code, out, err) = integrate(
        &home,
        &["--project", project.to_str().unwrap()],
        home.path(),
    );
    assert_eq!(code, 0, "{err}");
    let settings = project.join(".gemini/settings.json");
    assert!(
        out.starts_with(&format!("Created {}", settings.display())),
        "{out}"
    );
    assert!(out.contains("trusts"), "{out}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(
        v["hooks"]["AfterAgent"][0]["hooks"][0]["name"],
        "wakeful-after-agent"
    );
    assert!(backups(&project.join(".gemini")).is_empty());
    // Not valid JSON: not changed, told what to add by hand.
    let broken = "{\"model\": {\"name\": \"x\"},}\n";
    std::fs::write(&settings, broken).unwrap();
    let (code, out, err) = integrate(
        &home,
        &["--project", project.to_str().unwrap()],
        home.path(),
    );
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.contains("not changing") && err.contains("not valid JSON"),
        "{err}"
    );
    assert!(
        err.contains("exec wakeful hook gemini-after-agent"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), broken);
    assert!(backups(&project.join(".gemini")).is_empty());
}
