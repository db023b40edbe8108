//! What a package needs, checked with the tools people use: the bash
//! completion loaded in bash, the man pages rendered by `man -l`, the
//! systemd unit verified by `systemd-analyze verify`, the version string.
//! `.ci/run` installs man-db and systemd; elsewhere a test that lacks one
//! says so and passes, unless `CI` is set.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::{have, Home};

/// What bash completes after `wakeful WORDS…` (the last word being typed).
fn complete(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let line = format!("wakeful {}", words.join(" "));
    let words_array: Vec<String> = std::iter::once("wakeful")
        .chain(words.iter().copied())
        .map(|w| format!("'{w}'"))
        .collect();
    let cur = words.last().copied().unwrap_or("");
    let prev = if words.len() >= 2 {
        words[words.len() - 2]
    } else {
        "wakeful"
    };
    let program = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_LINE='{line}'\nCOMP_POINT=${{#COMP_LINE}}\n_wakeful wakeful '{cur}' '{prev}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        words_array.join(" "),
        words.len(),
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &program])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bash: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_bash_completion_completes_subcommands_and_flags() {
    let home = Home::new();
    let script = home.path().join("wakeful.bash");
    let out = home.cmd(&["completions", "bash"]).output().unwrap();
    assert!(out.status.success());
    std::fs::write(&script, &out.stdout).unwrap();
    assert_eq!(complete(&script, &["exp"]), ["export"]);
    let st = complete(&script, &["st"]);
    assert!(
        st.contains(&"start".to_string()) && st.contains(&"status".to_string()),
        "{st:?}"
    );
    let flags = complete(&script, &["export", "--for"]);
    assert_eq!(flags, ["--format"]);
    let formats = complete(&script, &["export", "--format", ""]);
    assert_eq!(formats, ["jsonl", "otlp", "asciicast"]);
    // The other shells get a script too.
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = home.cmd(&["completions", shell]).output().unwrap();
        assert!(out.status.success() && !out.stdout.is_empty(), "{shell}");
    }
    let (code, _, err) = home.run(&["completions", "tcsh"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn man_pages_one_per_command_render_with_man() {
    let home = Home::new();
    let dir = home.path().join("man").join("man1");
    let listed = home.ok(&["man", "--dir", dir.to_str().unwrap()]);
    for page in [
        "wakeful.1",
        "wakeful-start.1",
        "wakeful-export.1",
        "wakeful-replay.1",
        "wakeful-daemon-install.1",
        "wakeful-wake-set-exec.1",
    ] {
        assert!(dir.join(page).is_file(), "{page} missing; wrote:\n{listed}");
    }
    // Without --dir: the main page on stdout.
    let main = home.ok(&["man"]);
    assert!(
        main.starts_with(".ie") || main.contains(".TH wakeful"),
        "{main}"
    );
    if !have("man (man-db)", Command::new("man").arg("--version")) {
        return;
    }
    let render = |page: &str| {
        let out = Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(dir.join(page))
            .env("MANWIDTH", "120")
            .env("LC_ALL", "C.UTF-8")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "man -l {page}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let export = render("wakeful-export.1");
    assert!(
        export.contains("NAME") && export.contains("wakeful-export"),
        "{export}"
    );
    assert!(
        export.contains("--otlp-endpoint") || export.contains("‐‐otlp‐endpoint"),
        "{export}"
    );
    let top = render("wakeful.1");
    assert!(
        top.contains("wakeful-replay(1)") || top.contains("replay"),
        "{top}"
    );
}

#[test]
fn daemon_install_writes_a_user_unit_systemd_accepts() {
    let home = Home::new();
    let dir = home.path().join("units");
    let v = home.json(&["daemon", "install", "--dir", dir.to_str().unwrap()]);
    let unit = dir.join("wakeful.service");
    assert_eq!(v["unit"], unit.to_str().unwrap());
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(
        text.contains(&format!("ExecStart={} daemon --foreground\n", common::BIN)),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "Environment=\"WAKEFUL_HOME={}\"",
            home.path().display()
        )),
        "{text}"
    );
    assert!(text.contains("Restart=on-failure") && text.contains("WantedBy=default.target"));
    // Nothing was started: the unit is for those who want it.
    assert!(!home.socket().exists());
    if !have(
        "systemd-analyze (systemd)",
        Command::new("systemd-analyze").arg("--version"),
    ) {
        return;
    }
    // Issue #31, point 10: where the man pages are not installed (after
    // `cargo install`), the unit cites none and passes `systemd-analyze
    // verify`; once they are where man looks, it cites them and passes too.
    let man = home.path().join("man");
    std::fs::create_dir_all(&man).unwrap();
    let verify = |unit: &std::path::Path| {
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(unit)
            .env("MANPATH", &man)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "systemd-analyze verify: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(unit).unwrap()
        );
    };
    let install = || {
        let out = home
            .cmd(&[
                "--json",
                "daemon",
                "install",
                "--dir",
                dir.to_str().unwrap(),
            ])
            .env("MANPATH", &man)
            .output()
            .unwrap();
        assert!(out.status.success());
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let v = install();
    assert_eq!(v["man_pages"], serde_json::json!([]), "{v}");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(!text.contains("Documentation="), "{text}");
    verify(&unit);
    home.ok(&["man", "--dir", man.join("man1").to_str().unwrap()]);
    let v = install();
    assert_eq!(
        v["man_pages"],
        serde_json::json!(["wakeful", "wakeful-daemon"]),
        "{v}"
    );
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(
        text.contains("Documentation=man:wakeful(1) man:wakeful-daemon(1)\n"),
        "{text}"
    );
    verify(&unit);
}

#[test]
fn the_version_carries_the_git_revision_of_a_checkout() {
    let home = Home::new();
    let version = home.ok(&["--version"]);
    let package = env!("CARGO_PKG_VERSION");
    let rev = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match rev {
        Some(rev) => assert_eq!(version.trim(), format!("wakeful {package} ({rev})")),
        None => assert_eq!(version.trim(), format!("wakeful {package}")),
    }
}

/// Issue #30, point 4: the launchd agent `wakeful daemon install` writes on
/// macOS, checked here with a plist parser (Python's plistlib, what
/// `plutil -lint` checks: well-formed XML of the plist DTD's types).
#[test]
fn the_launchd_agent_is_a_plist_that_keeps_the_daemon_up() {
    let home = Home::new();
    // A home whose path needs XML escaping.
    let odd = home.path().join("a&b <c>");
    std::fs::create_dir_all(&odd).unwrap();
    let out = home
        .cmd(&["daemon", "install", "--format", "launchd", "--print"])
        .env("WAKEFUL_HOME", &odd)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script =
        "import json, plistlib, sys\nprint(json.dumps(plistlib.loads(sys.stdin.buffer.read())))";
    let mut py = Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 (the plist parser)");
    use std::io::Write;
    py.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let parsed = py.wait_with_output().unwrap();
    assert!(
        parsed.status.success(),
        "not a plist:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&parsed.stdout).unwrap();
    let log = odd.join("launchd.log");
    assert_eq!(
        v,
        serde_json::json!({
            "Label": "dev.wakeful.daemon",
            "ProgramArguments": [common::BIN, "daemon", "--foreground"],
            "EnvironmentVariables": {"WAKEFUL_HOME": odd},
            "RunAtLoad": true,
            "KeepAlive": {"SuccessfulExit": false},
            "ThrottleInterval": 2,
            "ExitTimeOut": 30,
            "ProcessType": "Background",
            "StandardOutPath": log,
            "StandardErrorPath": log,
        })
    );
    // Written where --dir says (~/Library/LaunchAgents by default), and
    // nothing started.
    let dir = home.path().join("LaunchAgents");
    let out = home
        .cmd(&[
            "--json",
            "daemon",
            "install",
            "--format",
            "launchd",
            "--dir",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let path = dir.join("dev.wakeful.daemon.plist");
    assert_eq!(v["agent"], serde_json::json!(path));
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains("<key>RunAtLoad</key>"));
    assert!(!home.socket().exists());
}
