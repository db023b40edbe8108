//! `wakeful doctor --selftest`: wakeful's guarantees proved on this machine,
//! against a scratch daemon of its own (docs/PLATFORMS.md, "Self-test").
//!
//! The verdict and the table are pure ([`exit_code`], [`render`]); each
//! check is a function of its own module that drives the real `wakeful`
//! binary ([`scratch::Scratch`]) in a temporary `WAKEFUL_HOME`.

mod crash;
mod die;
mod follow;
mod handover;
mod scratch;
mod space;
mod stop;
mod upgrade;

use serde::Serialize;

/// What a check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The guarantee held.
    Ok,
    /// The guarantee was broken.
    Failed,
    /// The guarantee does not hold here, as documented, and what happens
    /// instead was seen.
    Limit,
    /// The check could not run; nothing is claimed.
    NotChecked,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "FAILED",
            Outcome::Limit => "limit",
            Outcome::NotChecked => "not checked",
        }
    }
}

/// One guarantee and what the self-test found about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Short name (what `WAKEFUL_SELFTEST_BREAK` names in debug builds).
    pub name: &'static str,
    /// The guarantee, in a few words.
    pub guarantee: &'static str,
    /// What was found.
    pub outcome: Outcome,
    /// How it was checked, and what was measured or seen.
    pub how: String,
    /// What to do, when it failed or is a limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    /// A check with no fix.
    pub fn new(
        name: &'static str,
        guarantee: &'static str,
        outcome: Outcome,
        how: impl Into<String>,
    ) -> Self {
        Check {
            name,
            guarantee,
            outcome,
            how: how.into(),
            fix: None,
        }
    }

    /// The same, with what to do.
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// Exit code: 1 when a guarantee failed, else 3 when one is only a limit
/// or was not checked (nothing proved it here), else 0.
pub fn exit_code(checks: &[Check]) -> u8 {
    if checks.iter().any(|c| c.outcome == Outcome::Failed) {
        1
    } else if checks
        .iter()
        .any(|c| matches!(c.outcome, Outcome::Limit | Outcome::NotChecked))
    {
        3
    } else {
        0
    }
}

/// Where the self-test ran: backend, kernel, the features it found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Setting {
    /// The platform backend (`linux`, `posix`).
    pub backend: String,
    /// `uname -sr`.
    pub kernel: String,
    /// Features found, each `name: yes/no (why)`.
    pub features: Vec<String>,
}

/// The table a person reads.
pub fn render(setting: &Setting, checks: &[Check]) -> String {
    let mut out = format!(
        "wakeful doctor --selftest · backend {} · {}\n  features: {}\n",
        setting.backend,
        setting.kernel,
        setting.features.join(", ")
    );
    let width = checks.iter().map(|c| c.guarantee.len()).max().unwrap_or(0);
    for c in checks {
        out.push_str(&format!(
            "  {:<11}  {:<width$}  {}\n",
            c.outcome.label(),
            c.guarantee,
            c.how
        ));
        if let Some(fix) = &c.fix {
            out.push_str(&format!(
                "  {:<11}  {:<width$}  what to do: {fix}\n",
                "", ""
            ));
        }
    }
    let failed: Vec<&str> = checks
        .iter()
        .filter(|c| c.outcome == Outcome::Failed)
        .map(|c| c.name)
        .collect();
    let other: Vec<&str> = checks
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Limit | Outcome::NotChecked))
        .map(|c| c.name)
        .collect();
    out.push_str(&match exit_code(checks) {
        0 => "Every guarantee held on this machine (exit 0).\n".to_string(),
        1 => format!("FAILED: {} (exit 1).\n", failed.join(", ")),
        _ => format!(
            "No guarantee failed; limits or unchecked: {} (exit 3).\n",
            other.join(", ")
        ),
    });
    out
}

/// The same for a bug report.
pub fn to_json(setting: &Setting, checks: &[Check]) -> serde_json::Value {
    serde_json::json!({
        "selftest": setting,
        "exit": exit_code(checks),
        "checks": checks,
    })
}

/// Which check's guarantee the scratch setup breaks, to prove the check
/// fails (`WAKEFUL_SELFTEST_BREAK`, honoured only in debug builds).
fn broken() -> Option<String> {
    if cfg!(debug_assertions) {
        std::env::var("WAKEFUL_SELFTEST_BREAK").ok()
    } else {
        None
    }
}

/// Runs every check against a scratch daemon started from `exe`; returns
/// where it ran and what it found. Blocking: run it off the async runtime.
pub fn run(exe: &std::path::Path) -> (Setting, Vec<Check>) {
    let backend = wakeful_platform::backend();
    let setting = Setting {
        backend: backend.name().to_string(),
        kernel: kernel(),
        features: features(backend),
    };
    let brk = broken();
    let brk = brk.as_deref();
    const SCRATCH: &str = "a scratch daemon runs here";
    let scratch = match scratch::Scratch::new(exe) {
        Ok(s) => s,
        Err(e) => {
            let why = format!(
                "no scratch state directory in {}: {e}; no guarantee was checked",
                std::env::temp_dir().display()
            );
            return (
                setting,
                vec![Check::new("scratch", SCRATCH, Outcome::NotChecked, why)
                    .fix("point TMPDIR at a directory you can write (and execute in)")],
            );
        }
    };
    if brk == Some("space") {
        // The break: a keep-free mark that is not the default.
        let _ = std::fs::write(
            scratch.dir().join("config.toml"),
            "[store]\nkeep_free = 12345\n",
        );
    }
    if let Err(e) = scratch.daemon_pid() {
        let log = std::fs::read_to_string(scratch.dir().join("daemon.log")).unwrap_or_default();
        let last: Vec<&str> = log.lines().rev().take(3).collect();
        let why = format!(
            "the scratch daemon did not answer: {e}; its log ends: {}; no guarantee was checked",
            last.into_iter().rev().collect::<Vec<_>>().join(" / ")
        );
        let first = Check::new("scratch", SCRATCH, Outcome::NotChecked, why).fix(
            "`wakeful daemon --foreground` with WAKEFUL_HOME set to an empty directory shows why a daemon cannot run here",
        );
        return (setting, vec![first, scratch.finish()]);
    }
    let checks = vec![
        stop::pipeline(&scratch, brk, backend),
        stop::escapee(&scratch, brk, backend),
        follow::rotation(&scratch, brk),
        follow::latency(&scratch, brk),
        handover::stdout(&scratch, brk, backend),
        handover::frame_lock(brk, backend),
        upgrade::keeps_running(&scratch, exe, brk),
        space::free(&scratch),
        crash::no_loss(&scratch, brk),
        die::with_daemon(&scratch, brk, backend),
        scratch.finish(),
    ];
    (setting, checks)
}

fn kernel() -> String {
    std::process::Command::new("uname")
        .arg("-sr")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| std::env::consts::OS.to_string())
}

fn features(backend: wakeful_platform::Backend) -> Vec<String> {
    let me = std::process::id() as i32;
    let pidfd = match wakeful_platform::tree::open_exit_watch(me) {
        Ok(Some(_)) => "pidfd: yes".to_string(),
        Ok(None) => "pidfd: no (this backend polls)".to_string(),
        Err(e) => format!("pidfd: no ({e})"),
    };
    let cgroup = if wakeful_platform::tree::detect_containers(true).is_some() {
        "cgroup delegation: yes".to_string()
    } else {
        "cgroup delegation: no (stops track groups, trees and markers)".to_string()
    };
    let follow = if backend.name() == "linux" {
        "file following: inotify"
    } else {
        "file following: stat() polled every 100 ms"
    };
    let mut f = vec![pidfd, cgroup, follow.to_string()];
    if !backend.limits().is_empty() {
        f.push(format!("limits: {}", backend.limits().join("; ")));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &'static str, outcome: Outcome) -> Check {
        Check::new(name, "a guarantee", outcome, "how")
    }

    fn setting() -> Setting {
        Setting {
            backend: "linux".into(),
            kernel: "Linux 6.1".into(),
            features: vec!["pidfd: yes".into()],
        }
    }

    #[test]
    fn every_ok_is_exit_0() {
        assert_eq!(exit_code(&[c("a", Outcome::Ok), c("b", Outcome::Ok)]), 0);
        assert_eq!(exit_code(&[]), 0);
    }

    #[test]
    fn a_failure_is_exit_1_whatever_else() {
        let checks = [
            c("a", Outcome::Limit),
            c("b", Outcome::Failed),
            c("d", Outcome::NotChecked),
        ];
        assert_eq!(exit_code(&checks), 1);
        let text = render(&setting(), &checks);
        assert!(text.contains("FAILED: b (exit 1)"), "{text}");
    }

    #[test]
    fn a_limit_or_an_unchecked_guarantee_is_exit_3_never_0() {
        assert_eq!(exit_code(&[c("a", Outcome::Ok), c("b", Outcome::Limit)]), 3);
        assert_eq!(
            exit_code(&[c("a", Outcome::Ok), c("b", Outcome::NotChecked)]),
            3
        );
        let text = render(&setting(), &[c("b", Outcome::NotChecked)]);
        assert!(text.contains("not checked"), "{text}");
        assert!(text.contains("unchecked: b (exit 3)"), "{text}");
    }

    #[test]
    fn the_table_names_backend_features_and_fixes() {
        let checks = [c("a", Outcome::Failed).fix("do this")];
        let text = render(&setting(), &checks);
        assert!(text.contains("backend linux · Linux 6.1"), "{text}");
        assert!(text.contains("features: pidfd: yes"), "{text}");
        assert!(text.contains("what to do: do this"), "{text}");
        let v = to_json(&setting(), &checks);
        assert_eq!(v["exit"], 1);
        assert_eq!(v["checks"][0]["outcome"], "failed");
        assert_eq!(v["checks"][0]["fix"], "do this");
        assert_eq!(v["selftest"]["backend"], "linux");
    }
}
