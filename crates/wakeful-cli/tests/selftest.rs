//! `wakeful doctor --selftest`: it passes (or reports limits) on this
//! machine under both backends, leaves the user's state alone, and each
//! check fails when the scratch setup breaks its guarantee
//! (`WAKEFUL_SELFTEST_BREAK`, honoured by debug builds only).
// The shared helpers in tests/common unwrap too (clippy.toml allows it only
// inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Home;
use serde_json::Value;

/// Runs the self-test with `WAKEFUL_HOME` at `home` (which it must not
/// touch); returns the exit code and the JSON report.
fn selftest(home: &Home, backend: &str, brk: Option<&str>) -> (i32, Value) {
    let mut c = home.cmd(&["--json", "doctor", "--selftest"]);
    c.env("WAKEFUL_PLATFORM", backend);
    match brk {
        Some(b) => c.env("WAKEFUL_SELFTEST_BREAK", b),
        None => c.env_remove("WAKEFUL_SELFTEST_BREAK"),
    };
    let out = c.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}: {text}{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), v)
}

fn outcome<'a>(v: &'a Value, name: &str) -> &'a str {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {v}"))["outcome"]
        .as_str()
        .unwrap()
}

#[test]
fn every_guarantee_holds_or_is_a_limit_and_nothing_is_left() {
    for backend in ["linux", "posix"] {
        let home = Home::new();
        let (code, v) = selftest(&home, backend, None);
        assert_eq!(v["selftest"]["backend"], backend, "{v}");
        for c in v["checks"].as_array().unwrap() {
            assert_ne!(c["outcome"], "failed", "{backend}: {c}");
        }
        for name in [
            "stop", "follow", "latency", "space", "crash", "upgrade", "cleanup",
        ] {
            assert_eq!(outcome(&v, name), "ok", "{backend}: {v}");
        }
        let (handover, lock) = (outcome(&v, "handover"), outcome(&v, "framelock"));
        if backend == "linux" {
            assert_eq!((handover, lock), ("ok", "ok"), "{v}");
        } else {
            assert!(handover == "ok" || handover == "limit", "{v}");
            assert!(lock == "ok" || lock == "limit", "{v}");
        }
        assert!(code == 0 || code == 3, "{backend}: exit {code}: {v}");
        assert_eq!(code, v["exit"].as_i64().unwrap() as i32);
        // The user's state directory was not touched.
        assert_eq!(
            std::fs::read_dir(home.path()).unwrap().count(),
            0,
            "{backend}"
        );
    }
}

/// Each break must turn its check into a failure (exit 1, named).
fn breaks(name: &str, backends: &[&str]) {
    for backend in backends {
        let home = Home::new();
        let (code, v) = selftest(&home, backend, Some(name));
        assert_eq!(outcome(&v, name), "failed", "{backend}: {v}");
        assert_eq!(code, 1, "{backend}: {v}");
        assert_eq!(outcome(&v, "cleanup"), "ok", "{backend}: {v}");
    }
}

#[test]
fn a_survivor_fails_the_stop_check() {
    breaks("stop", &["linux", "posix"]);
}

#[test]
fn an_escapee_left_fails_the_escapee_check_on_linux() {
    breaks("escapee", &["linux"]);
}

#[test]
fn a_line_lost_at_rotation_fails_the_follow_check() {
    breaks("follow", &["linux", "posix"]);
}

#[test]
fn lines_that_never_arrive_fail_the_latency_check() {
    breaks("latency", &["linux", "posix"]);
}

#[test]
fn another_keep_free_mark_fails_the_space_check() {
    breaks("space", &["linux", "posix"]);
}

#[test]
fn a_repeated_line_fails_the_crash_check() {
    breaks("crash", &["linux", "posix"]);
}

#[test]
fn a_survivor_of_the_next_daemon_fails_the_die_check() {
    breaks("die", &["linux", "posix"]);
}

#[test]
fn a_command_that_does_not_outlive_the_upgrade_fails_the_upgrade_check() {
    breaks("upgrade", &["linux", "posix"]);
}

#[test]
fn a_client_that_relays_fails_the_handover_check_on_linux() {
    breaks("handover", &["linux"]);
}

#[test]
fn a_writer_that_never_locks_fails_the_framelock_check_on_linux() {
    breaks("framelock", &["linux"]);
}

/// No scratch directory can be made: nothing is claimed (exit 3).
#[test]
fn without_a_scratch_directory_nothing_is_checked() {
    let home = Home::new();
    let out = home
        .cmd(&["--json", "doctor", "--selftest"])
        .env("TMPDIR", home.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome(&v, "scratch"), "not_checked", "{v}");
    assert!(
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["outcome"] != "ok"),
        "{v}"
    );
}
