//! Upgrades (`wakeful daemon upgrade`): the daemon replaces its program
//! with another build, and the new program goes on with everything that
//! runs — as systemd's `daemon-reexec` does, in the same process.
//!
//! 1. **Check.** The new binary is run as `BINARY daemon handover-check`
//!    and must answer, within [`CHECK_TIMEOUT`], the [`HANDOVER_FORMAT`]
//!    this daemon writes ([`BinaryCheck`]). Anything else (it does not
//!    start, exits at once, is another program, an older build without
//!    upgrades) refuses the upgrade, and nothing changes.
//! 2. **Quiesce.** Waits end with a `resume` end (after the batch they
//!    hold is acknowledged); every monitor stops reading and emits what it
//!    held, leaving its command running with its pipes open
//!    ([`wakeful_engine::MonitorRegistry::hand_over`]); the hub closes and
//!    every event stream ends with a `resume` end after its last event.
//! 3. **Exec.** A [`Handover`] is written to a file in memory, whose
//!    descriptor [`HANDOVER_ENV`] names, and the program is replaced from the thread that
//!    started every command ([`wakeful_engine::process::spawner`]), keeping
//!    the socket, the daemon lock and every command's pipes open. The
//!    process id stays: every command is still its child.
//! 4. **Adopt.** The new program ([`take`]) takes the lock and the socket
//!    as they are, ends nothing the store lists as running that was handed
//!    over, and goes on with each handed monitor: same id, same process,
//!    its output in the same file, its counters and deadlines going on.
//!    Background tasks keep their ids; one whose outcome its client was not
//!    handed yet runs its wait again (nothing of it was acknowledged).
//!    Clients that were streaming reconnect by themselves.
//!
//! Should the exec of the new binary fail after the check passed, the
//! daemon execs its own program again with the same handover: nothing is
//! lost either way.

use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use wakeful_engine::HandedMonitor;

/// The handover this build writes and reads.
pub const HANDOVER_FORMAT: u32 = 1;
/// The environment variable naming the handover file of a new program.
pub const HANDOVER_ENV: &str = "WAKEFUL_HANDOVER";
/// How long the new binary has to answer its check.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long each drain before the handover may take: waits holding a batch
/// get this long to have it acknowledged (else the batch is handed out
/// again), and then idle connections this long to close.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(3);

/// What `wakeful daemon handover-check` prints: what the build is and
/// which handover it reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinaryCheck {
    /// Its version.
    pub version: String,
    /// Its socket protocol.
    pub protocol: u32,
    /// The handover format it reads.
    pub handover: u32,
}

impl BinaryCheck {
    /// This build's.
    pub fn this_build() -> Self {
        BinaryCheck {
            version: env!("CARGO_PKG_VERSION").to_string(),
            protocol: wakeful_protocol::PROTOCOL_VERSION,
            handover: HANDOVER_FORMAT,
        }
    }
}

/// What a daemon hands to the program that replaces it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Handover {
    /// [`HANDOVER_FORMAT`].
    pub format: u32,
    /// The process (the same before and after the exec).
    pub pid: u32,
    /// The version that handed over.
    pub from: String,
    /// Upgrades this process went through, this one included.
    pub upgrades: u32,
    /// The listening socket's descriptor.
    pub listener: RawFd,
    /// The daemon lock's descriptor (locked).
    pub lock: RawFd,
    /// The running monitors.
    pub monitors: Vec<HandedMonitor>,
    /// The background tasks (MCP tasks): their clients fetch them by id
    /// from the next program.
    #[serde(default)]
    pub tasks: Vec<HandedTask>,
}

/// A task the program before this one handed over (an upgrade).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandedTask {
    /// Its id, as its client knows it.
    pub id: String,
    /// What it was created with.
    pub request: wakeful_protocol::CreateTask,
    /// When it was created (ms since the epoch).
    pub created_ms: i64,
    /// When its status last changed.
    pub updated_ms: i64,
    /// Its outcome, when it stays as it is; `None`: its wait runs again.
    pub kept: Option<Kept>,
}

/// The outcome of a task handed over that stays as it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Kept {
    /// Completed with these events, already handed to its client.
    Events(Vec<wakeful_core::Event>),
    /// Completed without an event within this many ms, handed over.
    TimedOut(u64),
    /// Failed.
    Failed(String),
    /// Cancelled.
    Cancelled,
}

/// Why an upgrade did not happen (nothing changed) or failed.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// The path is not absolute.
    #[error("the new binary must be given as an absolute path, not {0}")]
    NotAbsolute(PathBuf),
    /// The binary failed its check.
    #[error("{} failed its check (`{} daemon handover-check`): {detail}; the daemon keeps running as it was", binary.display(), binary.display())]
    Check {
        /// The binary.
        binary: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The binary reads another handover.
    #[error("{} (version {version}) reads handover format {theirs}, this daemon writes {ours}: it cannot go on with the running monitors; stop the daemon instead (`wakeful daemon stop`: running monitors stop, persistent ones are re-armed)", binary.display())]
    Format {
        /// The binary.
        binary: PathBuf,
        /// Its version.
        version: String,
        /// The format it reads.
        theirs: u32,
        /// The format this daemon writes.
        ours: u32,
    },
    /// Writing the handover or replacing the program failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Runs `binary daemon handover-check` and reads its answer.
pub async fn check_binary(binary: &Path) -> Result<BinaryCheck, UpgradeError> {
    if !binary.is_absolute() {
        return Err(UpgradeError::NotAbsolute(binary.to_path_buf()));
    }
    let failed = |detail: String| UpgradeError::Check {
        binary: binary.to_path_buf(),
        detail,
    };
    let mut cmd = tokio::process::Command::new(binary);
    cmd.args(["daemon", "handover-check"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // Registered: the daemon's reaper must leave its status to us.
    let (child, _managed) = wakeful_engine::process::spawn(&mut cmd)
        .map_err(|e| failed(format!("cannot run it: {e}")))?;
    let out = match tokio::time::timeout(CHECK_TIMEOUT, child.wait_with_output()).await {
        Err(_) => {
            return Err(failed(format!(
                "no answer within {} s",
                CHECK_TIMEOUT.as_secs()
            )))
        }
        Ok(Err(e)) => return Err(failed(format!("cannot run it: {e}"))),
        Ok(Ok(out)) => out,
    };
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err.trim();
        return Err(failed(format!(
            "it exited with {}{}",
            out.status,
            if err.is_empty() {
                String::new()
            } else {
                format!(": {}", err.lines().last().unwrap_or(err))
            }
        )));
    }
    let check: BinaryCheck = serde_json::from_slice(out.stdout.trim_ascii()).map_err(|e| {
        failed(format!(
            "its answer is not a handover check ({e}); is it a wakeful build with upgrades?"
        ))
    })?;
    if check.handover != HANDOVER_FORMAT {
        return Err(UpgradeError::Format {
            binary: binary.to_path_buf(),
            version: check.version,
            theirs: check.handover,
            ours: HANDOVER_FORMAT,
        });
    }
    Ok(check)
}

/// The handover left for this process by the program it replaced, if
/// any: read once from the in-memory file [`HANDOVER_ENV`] names, which is
/// then closed. A handover of another process (a `wakeful daemon` started
/// by a command that inherited the variable) is ignored.
pub fn take() -> Option<Handover> {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let named = std::env::var(HANDOVER_ENV).ok()?;
    let fd: RawFd = named.strip_prefix("fd:")?.parse().ok()?;
    // Only a descriptor that is open and a regular (memory) file is read.
    let stat = nix::sys::stat::fstat(fd).ok()?;
    if nix::sys::stat::SFlag::from_bits_truncate(stat.st_mode) & nix::sys::stat::SFlag::S_IFMT
        != nix::sys::stat::SFlag::S_IFREG
    {
        return None;
    }
    // SAFETY: the program before this one left this descriptor open for
    // this process to read once; it is closed when read.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut bytes = Vec::new();
    if let Err(e) = file.read_to_end(&mut bytes) {
        tracing::error!("cannot read the handover (descriptor {fd}): {e}");
        return None;
    }
    match serde_json::from_slice::<Handover>(&bytes) {
        Ok(h) if h.pid == std::process::id() && h.format == HANDOVER_FORMAT => Some(h),
        Ok(h) => {
            tracing::warn!(
                "ignored a handover of process {} (format {}): not this process's",
                h.pid,
                h.format
            );
            None
        }
        Err(e) => {
            tracing::error!("cannot read the handover (descriptor {fd}): {e}");
            None
        }
    }
}

/// Writes `handover` and replaces the program with `binary`, then, if that
/// fails, with this program again. Returns only when both failed.
pub fn exec(binary: &Path, handover: &Handover) -> UpgradeError {
    let file = match write_handover(handover) {
        Ok(f) => f,
        Err(source) => {
            return UpgradeError::Io {
                what: "cannot write the handover".into(),
                source,
            }
        }
    };
    let mut keep = vec![handover.listener, handover.lock, file.as_raw_fd()];
    for m in &handover.monitors {
        if let Some(p) = &m.process {
            keep.extend(p.stdout);
            keep.extend(p.stderr);
        }
    }
    let argv = vec![
        "wakeful".to_string(),
        "daemon".to_string(),
        "--foreground".to_string(),
    ];
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k != HANDOVER_ENV)
        .collect();
    env.push((HANDOVER_ENV.into(), format!("fd:{}", file.as_raw_fd())));
    tracing::info!(
        "handing {} monitors over to {}",
        handover.monitors.len(),
        binary.display()
    );
    let err = wakeful_engine::process::spawner::replace_program(
        binary,
        argv.clone(),
        env.clone(),
        keep.clone(),
    );
    tracing::error!(
        "cannot run {}: {err}; going on with this daemon's own program",
        binary.display()
    );
    let own = own_program();
    let again = wakeful_engine::process::spawner::replace_program(&own, argv, env, keep);
    UpgradeError::Io {
        what: format!(
            "cannot run {} ({err}) nor this daemon's own program {}",
            binary.display(),
            own.display()
        ),
        source: again,
    }
}

/// This process's program, even when its file was replaced meanwhile (an
/// `npm install` over it): on Linux, the program as the kernel holds it.
fn own_program() -> PathBuf {
    let proc_exe = PathBuf::from("/proc/self/exe");
    if proc_exe.exists() {
        return proc_exe;
    }
    std::env::current_exe().unwrap_or(proc_exe)
}

/// The handover, in an in-memory file read from its start.
fn write_handover(handover: &Handover) -> std::io::Result<std::fs::File> {
    use std::io::{Seek, Write};
    let bytes = serde_json::to_vec(handover).map_err(std::io::Error::other)?;
    let mut file = wakeful_platform::fd::anonymous_file(c"wakeful-handover")?;
    file.write_all(&bytes)?;
    file.rewind()?;
    Ok(file)
}

/// The descriptor of a listener or lock kept across the exec.
pub(crate) fn raw(fd: &impl AsRawFd) -> RawFd {
    fd.as_raw_fd()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handover_reads_back_as_written() {
        let h = Handover {
            format: HANDOVER_FORMAT,
            pid: 42,
            from: "0.1.0".into(),
            upgrades: 2,
            listener: 7,
            lock: 8,
            monitors: vec![HandedMonitor {
                id: "mon-1".into(),
                started_at: chrono::Utc::now(),
                counters: Default::default(),
                process: Some(wakeful_engine::process::HandedProcess {
                    pid: 100,
                    start_ticks: 5,
                    stdout: Some(9),
                    stderr: None,
                    exit: None,
                }),
            }],
            tasks: vec![],
        };
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(serde_json::from_str::<Handover>(&json).unwrap(), h);
    }

    #[tokio::test]
    async fn a_binary_that_is_not_a_wakeful_build_fails_its_check_and_says_why() {
        let e = check_binary(Path::new("wakeful")).await.unwrap_err();
        assert!(e.to_string().contains("absolute path"), "{e}");
        let e = check_binary(Path::new("/bin/false")).await.unwrap_err();
        assert!(e.to_string().contains("exited with"), "{e}");
        assert!(e.to_string().contains("keeps running"), "{e}");
        let e = check_binary(Path::new("/bin/echo")).await.unwrap_err();
        assert!(e.to_string().contains("not a handover check"), "{e}");
        let e = check_binary(Path::new("/nonexistent/wakeful"))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("cannot run it"), "{e}");
    }
}
