//! `wakeful tui` end to end: the real binary in a real terminal (tmux),
//! typed at with `send-keys` and read with `capture-pane`.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;
use std::time::Duration;

use common::{eventually, Home, BIN};

/// A tmux server of its own (its own socket name), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// None (the test is skipped) when tmux is missing outside CI; in CI
    /// (`.ci/run` installs it) a missing tmux fails the test.
    fn new() -> Option<Tmux> {
        let found = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            assert!(
                std::env::var_os("CI").is_none(),
                "tmux is needed for this test (.ci/run installs it)"
            );
            eprintln!("skipped: tmux is not installed (apt-get install tmux)");
            return None;
        }
        Some(Tmux {
            socket: format!("wakeful-test-{}-{}", std::process::id(), fastrand::u32(..)),
        })
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "v"]).stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "v"];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).status.success());
    }

    /// Waits until the screen shows `text`; the screen otherwise.
    fn wait_for(&self, text: &str) -> Result<(), String> {
        let mut last = String::new();
        if eventually(Duration::from_secs(15), || {
            last = self.screen();
            last.contains(text)
        }) {
            Ok(())
        } else {
            Err(format!("the screen never showed {text:?}:\n{last}"))
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

#[test]
fn tui_shows_lines_stops_with_s_and_survives_a_daemon_restart() {
    let Some(tmux) = Tmux::new() else { return };
    let home = Home::new();
    let id = home
        .ok(&[
            "start",
            "-d",
            "counter",
            "--",
            "i=0; while true; do i=$((i+1)); echo \"count-$i\"; sleep 0.3; done",
        ])
        .trim()
        .to_string();
    let command = format!(
        "env WAKEFUL_HOME={} WAKEFUL_SESSION=t {BIN} tui",
        home.path().display()
    );
    assert!(tmux
        .tmux(&[
            "new-session",
            "-d",
            "-s",
            "v",
            "-x",
            "120",
            "-y",
            "30",
            &command
        ])
        .status
        .success());
    // Its lines appear as they are printed.
    tmux.wait_for("count-3").unwrap();
    tmux.wait_for(&id).unwrap();
    tmux.wait_for("running").unwrap();

    // Select it, press s, confirm: it ends.
    tmux.keys(&["Down"]);
    tmux.wait_for(&format!("events: {id}")).unwrap();
    tmux.keys(&["s"]);
    tmux.wait_for(&format!("Stop {id} (counter)?")).unwrap();
    tmux.keys(&["y"]);
    tmux.wait_for(&format!("stopped {id}")).unwrap();
    tmux.wait_for("[stopped] counter: stopped").unwrap();
    let list = home.json(&["list"]);
    assert_eq!(list[0]["state"], "ended", "{list}");
    assert_eq!(list[0]["stop_reason"]["kind"], "stopped");
    // The view stays open with everything ended.
    tmux.wait_for("0 running, 1 ended").unwrap();

    // The daemon goes away and comes back: the view reconnects and catches
    // up from its last seq.
    home.ok(&["daemon", "stop"]);
    tmux.wait_for("reconnecting").unwrap();
    home.ok(&["start", "-d", "after", "--", "echo after-restart; sleep 30"]);
    tmux.keys(&["Escape"]);
    tmux.wait_for("after-restart").unwrap();
    tmux.wait_for("● live").unwrap();
    let screen = tmux.screen();
    assert_eq!(
        screen.matches("[stopped] counter: stopped").count(),
        1,
        "no event shown twice:\n{screen}"
    );
    // The ? overlay, then q quits.
    tmux.keys(&["?"]);
    tmux.wait_for("any key closes this help").unwrap();
    tmux.keys(&["x", "q"]);
    assert!(
        eventually(Duration::from_secs(10), || !tmux
            .tmux(&["has-session", "-t", "v"])
            .status
            .success()),
        "q did not end the view:\n{}",
        tmux.screen()
    );
    // Read-only: no consumer was created by the view.
    assert_eq!(
        home.json(&["consumers", "--all-sessions"]),
        serde_json::Value::Array(vec![])
    );
}
