//! Test support: a temporary `WAKEFUL_HOME` and the real `wakeful` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_wakeful");

/// A temporary installation; its daemon is stopped (or killed) on drop.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Self {
        Home {
            dir: tempfile::Builder::new()
                .prefix("wk")
                .tempdir_in("/tmp")
                .unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A `wakeful` command in this home, session "t" unless overridden.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("WAKEFUL_HOME", self.path())
            .env("WAKEFUL_SESSION", "t")
            .env_remove("CLAUDE_CODE_SESSION_ID")
            .env_remove("CODEX_THREAD_ID")
            .stdin(Stdio::null());
        c
    }

    /// Runs `wakeful ARGS`; returns (exit code, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out: Output = self.cmd(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs and asserts exit 0; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args);
        assert_eq!(code, 0, "wakeful {args:?} failed: {err}{out}");
        out
    }

    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = self.ok(&a);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    pub fn json_lines(&self, args: &[&str]) -> Vec<serde_json::Value> {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        self.ok(&a)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub fn daemon_pid(&self) -> Option<i32> {
        let (code, out, _) = self.run(&["--json", "status"]);
        (code == 0).then(|| {
            serde_json::from_str::<serde_json::Value>(&out).unwrap()["pid"]
                .as_i64()
                .unwrap() as i32
        })
    }

    pub fn socket(&self) -> PathBuf {
        self.path().join("wakeful.sock")
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        if self.socket().exists() {
            let _ = self.cmd(&["daemon", "stop"]).output();
        }
    }
}

/// Waits until `cond` holds, up to `limit`.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Live processes of a monitor (environment marker).
pub fn live_of(id: &str) -> usize {
    wakeful_engine::process::live_of_monitor(id).len()
}

/// Whether an outside tool the tests check with is there (`check` runs
/// it); `.ci/run` installs them, so in CI (`CI` set) a missing one is a
/// failure, elsewhere the caller says it skipped.
pub fn have(what: &str, check: &mut Command) -> bool {
    let ok = check
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} is missing in CI: .ci/run installs it"
        );
        eprintln!("skipped: {what} is not installed (see .ci/run for how to install it)");
    }
    ok
}
