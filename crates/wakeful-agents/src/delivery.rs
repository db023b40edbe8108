//! What every wake adapter shares: the wake to hand over ([`Wake`]), running
//! a delivery command ([`run`]) and reading an HTTP refusal.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use wakeful_core::wake_machine::Outcome;
use wakeful_engine::net::http;

/// How long a delivery command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// One wake to hand over.
pub struct Wake<'a> {
    /// The wakeful session.
    pub session: &'a str,
    /// `wake-<from>-<to>`.
    pub wake_id: &'a str,
    /// The message, framed as monitor output.
    pub text: &'a str,
    /// The events, as wire JSON.
    pub events: &'a [serde_json::Value],
}

/// 408, 429 and 5xx are worth a retry; other statuses are a failure.
pub(crate) fn http_refusal(what: &str, r: http::Response) -> Outcome {
    let body: String = r.body.chars().take(300).collect();
    let msg = format!("{what} answered HTTP {}: {body}", r.status);
    if r.status == 408 || r.status == 429 || r.status >= 500 {
        Outcome::Refused(msg)
    } else {
        Outcome::Failed(msg)
    }
}

/// Why a wake's program did not run to its end ([`run`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    /// It could not be started.
    #[error("cannot run {}: {source}", program.display())]
    Start {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It ran longer than [`COMMAND_TIMEOUT`].
    #[error("{} did not finish within {}s", program.display(), COMMAND_TIMEOUT.as_secs())]
    Timeout {
        /// The program.
        program: PathBuf,
    },
    /// Its exit could not be waited for.
    #[error("waiting for {}: {source}", program.display())]
    Wait {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Runs a program (no shell) with stdin closed; returns its exit code and
/// the tail of its stderr.
pub(crate) async fn run(
    program: &std::path::Path,
    args: &[String],
    env: &BTreeMap<String, String>,
) -> Result<(i32, String), RunError> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Registered, so that the daemon's reaper leaves its exit status to us.
    let (mut child, _managed) =
        wakeful_engine::process::spawn(&mut cmd).map_err(|source| RunError::Start {
            program: program.to_path_buf(),
            source,
        })?;
    let mut stderr = child.stderr.take();
    let work = async {
        let mut err = Vec::new();
        if let Some(s) = stderr.as_mut() {
            let _ = s.take(64 * 1024).read_to_end(&mut err).await;
        }
        let status = child.wait().await;
        (status, err)
    };
    let (status, err) = tokio::time::timeout(COMMAND_TIMEOUT, work)
        .await
        .map_err(|_| RunError::Timeout {
            program: program.to_path_buf(),
        })?;
    let status = status.map_err(|source| RunError::Wait {
        program: program.to_path_buf(),
        source,
    })?;
    let err = String::from_utf8_lossy(&err);
    let tail: String = err
        .trim()
        .chars()
        .rev()
        .take(300)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Ok((status.code().unwrap_or(128), tail))
}
