//! The self-test's own installation: a temporary `WAKEFUL_HOME`, its own
//! daemon started from the running binary, and a tag in the command line
//! of every process a check starts, so survivors can be counted and
//! nothing is left behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use wakeful_core::session;
use wakeful_platform::tree::{self, ProcInfo};

use super::{Check, Outcome};

/// Why a step of a check could not be done in the scratch installation;
/// the check reports it as its finding.
#[derive(Debug, thiserror::Error)]
pub enum ScratchError {
    /// The `wakeful` command could not be run.
    #[error("wakeful {args}: {source}")]
    Run {
        /// Its arguments.
        args: String,
        /// Why it could not run.
        source: std::io::Error,
    },
    /// The `wakeful` command failed; its stderr.
    #[error("wakeful {args} failed: {stderr}")]
    Failed {
        /// Its arguments.
        args: String,
        /// What it said.
        stderr: String,
    },
    /// A line of its `--json` output is not JSON.
    #[error("{source}: {line}")]
    Json {
        /// The line.
        line: String,
        /// Why it is not JSON.
        source: serde_json::Error,
    },
    /// Its `--json` output is not one value.
    #[error("wakeful {args}: {count} JSON values")]
    NotOne {
        /// Its arguments.
        args: String,
        /// How many values it printed.
        count: usize,
    },
    /// A reply lacks the field it always has (`start` an id, `status` a pid).
    #[error("{command} gave no {field}: {reply}")]
    Missing {
        /// The command.
        command: &'static str,
        /// The field.
        field: &'static str,
        /// The reply.
        reply: Value,
    },
    /// The monitor has no final event yet.
    #[error("monitor {id} did not end within {limit:?}")]
    NotEnded {
        /// The monitor.
        id: String,
        /// How long it was given.
        limit: Duration,
    },
    /// The scratch home names no usable paths.
    #[error(transparent)]
    Paths(#[from] wakeful_protocol::PathsError),
    /// The killed daemon did not let go of its lock.
    #[error("the killed daemon {pid}: {source}")]
    NotGone {
        /// Its pid.
        pid: i32,
        /// What waiting for it found.
        source: wakeful_client::ClientError,
    },
    /// A file or a runtime of the check could not be made.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The session every scratch monitor runs in.
pub const SESSION: &str = "selftest";

/// A scratch installation; [`Scratch::finish`] stops its daemon, ends what
/// is left and removes its directory.
pub struct Scratch {
    exe: PathBuf,
    dir: PathBuf,
    tag: String,
}

impl Scratch {
    /// Makes the directory under the system's temporary directory.
    pub fn new(exe: &Path) -> std::io::Result<Scratch> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        // Digits only: it goes into `sleep 600.TAG`.
        let tag = format!("{}{:06}", std::process::id(), nanos / 1000);
        // The socket's path must fit in a sockaddr_un (104 bytes on macOS,
        // whose $TMPDIR is long): /tmp when $TMPDIR is too long for it.
        let mut base = std::env::temp_dir();
        if base.as_os_str().len() > 64 && Path::new("/tmp").is_dir() {
            base = PathBuf::from("/tmp");
        }
        let dir = base.join(format!("wakeful-st-{tag}"));
        std::fs::create_dir(&dir)?;
        Ok(Scratch {
            exe: exe.to_path_buf(),
            dir,
            tag,
        })
    }

    /// The scratch state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Digits unique to this run, put in the command line of every process
    /// a check starts.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// `wakeful ARGS` in the scratch home.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(args)
            .env("WAKEFUL_HOME", &self.dir)
            .env(session::WAKEFUL_SESSION, SESSION)
            .env_remove(session::CLAUDE_CODE_SESSION_ID)
            .env_remove(session::CODEX_THREAD_ID)
            .env_remove("WAKEFUL_SELFTEST_BREAK")
            .stdin(Stdio::null());
        c
    }

    /// `wakeful --json ARGS`, its stdout as JSON lines.
    pub fn json_lines(&self, args: &[&str]) -> Result<Vec<Value>, ScratchError> {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = self
            .cmd(&a)
            .stderr(Stdio::piped())
            .output()
            .map_err(|source| ScratchError::Run {
                args: args.join(" "),
                source,
            })?;
        if !out.status.success() {
            return Err(ScratchError::Failed {
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                serde_json::from_str(l).map_err(|source| ScratchError::Json {
                    line: l.to_string(),
                    source,
                })
            })
            .collect()
    }

    /// `wakeful --json ARGS`, one JSON value.
    pub fn json(&self, args: &[&str]) -> Result<Value, ScratchError> {
        let mut v = self.json_lines(args)?;
        match v.len() {
            1 => Ok(v.remove(0)),
            count => Err(ScratchError::NotOne {
                args: args.join(" "),
                count,
            }),
        }
    }

    /// Starts a command monitor; returns its id.
    pub fn start(&self, command: &str) -> Result<String, ScratchError> {
        let v = self.json(&["start", "--batch-ms", "0", "--", command])?;
        v["id"]
            .as_str()
            .map(str::to_string)
            .ok_or(ScratchError::Missing {
                command: "start",
                field: "id",
                reply: v,
            })
    }

    /// The events of monitor `id`, in seq order.
    pub fn events_of(&self, id: &str) -> Result<Vec<Value>, ScratchError> {
        Ok(self
            .json_lines(&["events"])?
            .into_iter()
            .filter(|e| e["monitor_id"] == id)
            .collect())
    }

    /// The final event of monitor `id`, once it has one (within `limit`).
    pub fn ended(&self, id: &str, limit: Duration) -> Result<Value, ScratchError> {
        let mut last = None;
        until(limit, || {
            last = self.events_of(id).ok().and_then(|e| {
                e.into_iter()
                    .find(|e| matches!(e["kind"].as_str(), Some("stopped" | "exited" | "failed")))
            });
            last.is_some()
        });
        last.ok_or_else(|| ScratchError::NotEnded {
            id: id.to_string(),
            limit,
        })
    }

    /// The scratch daemon's pid.
    pub fn daemon_pid(&self) -> Result<i32, ScratchError> {
        let v = self.json(&["status"])?;
        v["pid"]
            .as_i64()
            .map(|p| p as i32)
            .ok_or(ScratchError::Missing {
                command: "status",
                field: "pid",
                reply: v,
            })
    }

    /// SIGKILLs the scratch daemon and waits until it is gone entirely (its
    /// lock let go), at most 10 s.
    pub fn kill_daemon(&self) -> Result<(), ScratchError> {
        let pid = self.daemon_pid()?;
        kill9(pid);
        let paths =
            wakeful_client::Paths::from_vars(|k| (k == "WAKEFUL_HOME").then(|| self.dir.clone()))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(wakeful_client::wait_gone(&paths, Duration::from_secs(10)))
            .map_err(|source| ScratchError::NotGone { pid, source })
    }

    /// Processes whose command line carries `word` (this run's tag and
    /// more), zombies included.
    pub fn tagged(&self, word: &str) -> Vec<ProcInfo> {
        let me = std::process::id() as i32;
        tree::all_processes()
            .into_iter()
            .filter(|p| p.pid != me)
            .filter(|p| tree::cmdline(p.pid).is_some_and(|c| c.iter().any(|a| a.contains(word))))
            .collect()
    }

    /// Stops the daemon, SIGKILLs whatever carries the tag, removes the
    /// directory: the last check, "leaves nothing behind".
    pub fn finish(self) -> Check {
        let _ = self
            .cmd(&["daemon", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let left = self.tagged(&self.tag);
        for p in &left {
            kill9(p.pid);
        }
        let gone = until(Duration::from_secs(3), || {
            self.tagged(&self.tag).iter().all(|p| !p.is_live())
        });
        let removed = std::fs::remove_dir_all(&self.dir);
        let (outcome, how) = match (gone, removed) {
            (true, Ok(())) => (
                Outcome::Ok,
                format!(
                    "scratch daemon stopped, {} removed, no process of the self-test left ({} killed after the checks)",
                    self.dir.display(),
                    left.len()
                ),
            ),
            (false, _) => (
                Outcome::Failed,
                format!("processes of the self-test outlive SIGKILL: {:?}", pids(&self.tagged(&self.tag))),
            ),
            (true, Err(e)) => (
                Outcome::Failed,
                format!("{} could not be removed: {e}", self.dir.display()),
            ),
        };
        Check::new(
            "cleanup",
            "the self-test leaves nothing behind",
            outcome,
            how,
        )
    }
}

/// The first of `tools` this machine does not have (`command -v`).
pub fn missing(tools: &[&str]) -> Option<String> {
    tools
        .iter()
        .find(|t| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|st| st.success())
        })
        .map(|t| format!("no `{t}` on this machine"))
}

/// SIGKILL to `pid` (through kill(1): no unsafe code here).
pub fn kill9(pid: i32) {
    let _ = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The pids of `procs`.
pub fn pids(procs: &[ProcInfo]) -> Vec<i32> {
    procs.iter().map(|p| p.pid).collect()
}

/// Waits until `cond` holds, up to `limit` (one deadline); whether it did.
pub fn until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
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
