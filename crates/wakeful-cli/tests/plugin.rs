//! `wakeful validate` and `wakeful plugin start|skill` end to end.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::{eventually, live_of, Home};
use serde_json::Value;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn plugin(dir: &Path, name: &str, monitors: &str) {
    write(
        &dir.join(".claude-plugin/plugin.json"),
        &format!(r#"{{"name": "{name}", "version": "1.0.0"}}"#),
    );
    write(&dir.join("monitors/monitors.json"), monitors);
}

fn output_of(home: &Home, id: &str) -> String {
    home.ok(&["output", id])
}

#[test]
fn validate_exit_codes_and_json() {
    let home = Home::new();
    let good = home.path().join("good");
    plugin(
        &good,
        "good",
        r#"[{"name": "log", "command": "tail -F app.log | grep --line-buffered -E 'ERROR|FAIL'", "description": "app errors"}]"#,
    );
    let (code, out, _) = home.run(&["validate", good.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let bad = home.path().join("bad");
    plugin(
        &bad,
        "bad",
        r#"[{"name": "x", "command": "tail -f a | grep ok", "descripton": "typo"}]"#,
    );
    let (code, out, _) = home.run(&["validate", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        out.contains("error[unknown-key]") && out.contains("monitors/monitors.json:"),
        "{out}"
    );
    let (code, out, _) = home.run(&["--json", "validate", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["errors"].as_u64().unwrap() >= 1);
    assert!(v["warnings"].as_u64().unwrap() >= 1);
    let d = &v["diagnostics"][0];
    for k in [
        "severity", "code", "message", "file", "line", "column", "help",
    ] {
        assert!(d.get(k).is_some(), "diagnostic lacks {k}: {d}");
    }
    // A broken plugin is never started.
    let (code, _, err) = home.run(&["plugin", "start", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(home.json(&["list"]), Value::Array(vec![]));
}

#[test]
fn plugin_start_twice_runs_one_process_per_monitor() {
    let home = Home::new();
    let dir = home.path().join("p");
    plugin(
        &dir,
        "ticker",
        r#"[
  {"name": "a", "command": "echo a-up; exec sleep 600", "description": "a"},
  {"name": "b", "command": "echo b-up; exec sleep 600", "description": "b", "when": "always"},
  {"name": "s", "command": "echo skill-up; exec sleep 600", "description": "s", "when": "on-skill-invoke:ticker:debug"}
]"#,
    );
    write(
        &dir.join("skills/debug/SKILL.md"),
        "---\nname: debug\ndescription: d\n---\nbody\n",
    );
    let first = home.json(&["plugin", "start", dir.to_str().unwrap()]);
    let second = home.json(&["plugin", "start", dir.to_str().unwrap()]);
    assert_eq!(first.as_array().unwrap().len(), 2, "{first}");
    for (a, b) in first
        .as_array()
        .unwrap()
        .iter()
        .zip(second.as_array().unwrap())
    {
        assert_eq!(a["id"], b["id"]);
        assert_eq!(a["already_running"], false);
        assert_eq!(b["already_running"], true);
        let id = a["id"].as_str().unwrap();
        assert!(
            eventually(Duration::from_secs(5), || live_of(id) == 1),
            "{id}: {}",
            live_of(id)
        );
    }
    let list = home.json(&["list"]);
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert!(list
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["persistent"] == true));
    // Skill monitors: by bare name or with the namespace; idempotent too.
    let s1 = home.json(&["plugin", "skill", dir.to_str().unwrap(), "debug"]);
    let s2 = home.json(&["plugin", "skill", dir.to_str().unwrap(), "ticker:debug"]);
    assert_eq!(s1[0]["id"], s2[0]["id"]);
    assert_eq!(s2[0]["already_running"], true);
    assert_eq!(
        home.run(&["plugin", "skill", dir.to_str().unwrap(), "nope"])
            .0,
        3
    );
}

#[test]
fn variables_are_environment_never_command_text() {
    let home = Home::new();
    // A plugin in a directory with a space, whose script is run through the
    // quoted root variable.
    let dir = home.path().join("my plugin");
    plugin(
        &dir,
        "spaced",
        r#"[
  {"name": "script", "command": "\"${CLAUDE_PLUGIN_ROOT}\"/scripts/x.sh", "description": "script"},
  {"name": "vars", "command": "echo \"evil=${EVIL}\"; echo \"project=${CLAUDE_PROJECT_DIR}\"; echo \"data=$CLAUDE_PLUGIN_DATA\"; exec sleep 600", "description": "vars"}
]"#,
    );
    write(
        &dir.join("scripts/x.sh"),
        "#!/bin/sh\necho \"script ran in $CLAUDE_PLUGIN_ROOT\"\nexec sleep 600\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        dir.join("scripts/x.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    // Hostile values: an environment variable and the project directory.
    let pwned = home.path().join("pwned");
    let pwned2 = home.path().join("pwned2");
    let project = home
        .path()
        .join(format!("proj $(touch {})", pwned2.display()));
    std::fs::create_dir_all(&project).unwrap();
    let out = home
        .cmd(&["--json", "plugin", "start", dir.to_str().unwrap()])
        .env("EVIL", format!("$(touch {})", pwned.display()))
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let started: Value = serde_json::from_slice(&out.stdout).unwrap();
    let script = started[0]["id"].as_str().unwrap().to_string();
    let vars = started[1]["id"].as_str().unwrap().to_string();
    let mut text = String::new();
    assert!(
        eventually(Duration::from_secs(5), || {
            text = output_of(&home, &script);
            text.contains("script ran")
        }),
        "{text}"
    );
    assert_eq!(
        text,
        format!("script ran in {}\n", dir.canonicalize().unwrap().display())
    );
    assert!(
        eventually(Duration::from_secs(5), || {
            text = output_of(&home, &vars);
            text.lines().count() >= 3
        }),
        "{text}"
    );
    assert!(
        text.contains(&format!("evil=$(touch {})", pwned.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("project={}", project.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "data={}",
            home.path().join("plugin-data/spaced").display()
        )),
        "{text}"
    );
    assert!(home.path().join("plugin-data/spaced").is_dir());
    assert!(!pwned.exists(), "a variable's value ran as code");
    assert!(!pwned2.exists(), "the project directory's name ran as code");
}
