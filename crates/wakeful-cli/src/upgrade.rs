//! `wakeful daemon upgrade`: asks the running daemon to hand everything
//! over to this build (or `--binary`), then waits until the new program
//! answers, and says what runs now. The handover itself is the daemon's
//! (`wakeful_daemon::upgrade`).

use std::path::PathBuf;
use std::time::Duration;

use wakeful_client::{ClientError, Paths};
use wakeful_protocol::{GetStatus, Status, Upgrade, UpgradeResult};

use crate::render::print_json;
use crate::{exit, Failure};

/// How long the new program has to answer after the daemon handed over.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

/// `wakeful daemon handover-check`: which handover this build reads.
pub(crate) fn check() -> Result<u8, Failure> {
    print_json(&wakeful_daemon::upgrade::BinaryCheck::this_build())?;
    Ok(0)
}

/// `wakeful daemon upgrade [--binary PATH]`.
pub(crate) async fn run(paths: &Paths, binary: Option<PathBuf>, json: bool) -> Result<u8, Failure> {
    let binary = match binary {
        Some(b) => b,
        None => std::env::current_exe().map_err(|e| {
            Failure::new(
                exit::FAILURE,
                format!("cannot tell which program this is ({e}); name it with --binary"),
            )
        })?,
    };
    let binary = std::fs::canonicalize(&binary).map_err(|e| {
        Failure::new(
            exit::USAGE,
            format!("{}: {e}; nothing changed", binary.display()),
        )
    })?;
    let Ok(mut conn) = wakeful_client::connect_existing(paths).await else {
        outln!(
            "no wakeful daemon is running for {}: nothing to upgrade (the next command starts this version)",
            paths.runtime_dir.display()
        )?;
        return Ok(0);
    };
    let before = conn.call(GetStatus {}).await?;
    let handing: UpgradeResult = match conn.call(Upgrade { binary }).await {
        Ok(h) => h,
        // A daemon from before upgrades existed.
        Err(ClientError::Skew { daemon, .. }) => {
            return Err(Failure::new(
                exit::FAILURE,
                format!(
                    "the running daemon (version {daemon}) is older than `wakeful daemon upgrade`: it cannot hand its monitors over. Stop it (`wakeful daemon stop`: running monitors stop, persistent ones are re-armed by the new daemon) and run your command again; nothing changed"
                ),
            ))
        }
        Err(e) => return Err(e.into()),
    };
    drop(conn);
    let after = answered(paths, before.upgrades).await?;
    if after.version != handing.to || after.upgrades <= before.upgrades {
        return Err(Failure::new(
            exit::FAILURE,
            format!(
                "the daemon (pid {}) could not run {} and went on with version {}; every monitor kept running (see its log: {})",
                after.pid,
                handing.binary.display(),
                after.version,
                paths.daemon_log().display()
            ),
        ));
    }
    if json {
        print_json(&handing)?;
    } else {
        outln!(
            "upgraded the wakeful daemon (pid {}) from {} to {}: {} monitor{} went on running",
            after.pid,
            handing.from,
            after.version,
            handing.monitors,
            if handing.monitors == 1 { "" } else { "s" }
        )?;
    }
    Ok(0)
}

/// The status of the program that took over: asked until a daemon that
/// went through more than `upgrades` upgrades answers.
async fn answered(paths: &Paths, upgrades: u32) -> Result<Status, Failure> {
    let deadline = tokio::time::Instant::now() + ANSWER_WAIT;
    let mut last: Option<ClientError> = None;
    while tokio::time::Instant::now() < deadline {
        match wakeful_client::connect_existing(paths).await {
            Ok(mut c) => match c.call(GetStatus {}).await {
                Ok(s) if s.upgrades > upgrades => return Ok(s),
                Ok(_) => {}
                Err(e) => last = Some(e),
            },
            Err(e) => last = Some(e.into()),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(Failure::new(
        exit::FAILURE,
        format!(
            "the daemon did not answer within {} s after handing over ({}); see its log: {}",
            ANSWER_WAIT.as_secs(),
            last.map_or_else(|| "no answer".to_string(), |e| e.to_string()),
            paths.daemon_log().display()
        ),
    ))
}
