//! The real Codex, offline: `tests/e2e/codex/run.py` drives Codex's
//! app-server (and `codex exec`, `codex queue`) against a fake Responses API
//! with this build's `wakeful` as the wake route, through five scenarios
//! (idle, busy, unloaded, exec, fallback; see run.py and
//! docs/INTEGRATIONS.md).
//!
//! Runs when `WAKEFUL_CODEX_BIN` names a Codex 0.171 executable (CI sets it
//! after `npm install @openai/codex@0.171.0`); then any failure, Codex not
//! working included, fails the test. Without the variable it is skipped
//! with a message. Needs python3 (standard library only).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(600);

#[test]
fn real_codex_wakes_idle_busy_and_unloaded_threads_and_refuses_exec_ones() {
    let Some(codex) = std::env::var_os("WAKEFUL_CODEX_BIN").filter(|v| !v.is_empty()) else {
        eprintln!("skipped: set WAKEFUL_CODEX_BIN to a Codex 0.171 executable to run it");
        return;
    };
    let codex = PathBuf::from(codex);
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = repo.join("tests/e2e/codex/run.py");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("codex-e2e-{}", std::process::id()));
    let mut child = Command::new("python3")
        .arg(&script)
        .arg("--codex")
        .arg(&codex)
        .arg("--wakeful")
        .arg(env!("CARGO_BIN_EXE_wakeful"))
        .arg("--out")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run python3 {}: {e}", script.display()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > LIMIT {
            // The harness runs in its own process group, with what it started.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
            panic!("the Codex end-to-end run took more than {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    // Shown with --nocapture (and on failure).
    println!("{stdout}");
    assert!(
        status.success(),
        "the Codex end-to-end run failed ({status}); logs in {}\n{stdout}\n{stderr}",
        out.display()
    );
    for scenario in ["idle", "busy", "unloaded", "exec", "fallback"] {
        assert!(
            stdout.contains(&format!("PASS {scenario} ")),
            "{scenario} did not pass:\n{stdout}"
        );
    }
    assert!(stdout.contains("codex-cli 0.171.0"), "{stdout}");
    let _ = std::fs::remove_dir_all(&out);
}
