//! `wakeful daemon`: run it in the foreground, stop it, install its service
//! file, or (no action) its status.

use wakeful_client::Paths;

use super::status::status;
use crate::cli::{DaemonAction, DaemonArgs};
use crate::render::print_json;
use crate::{exit, Failure};

pub(super) async fn daemon(paths: Paths, args: DaemonArgs, json: bool) -> Result<u8, Failure> {
    match args.action {
        Some(DaemonAction::Stop) => match wakeful_client::stop_daemon(&paths).await? {
            None => {
                outln!(
                    "no wakeful daemon is running for {}",
                    paths.runtime_dir.display()
                )?;
                Ok(0)
            }
            Some(v) if json => {
                print_json(&v)?;
                Ok(0)
            }
            Some(v) => {
                outln!("stopped the wakeful daemon (pid {})", v.pid)?;
                Ok(0)
            }
        },
        Some(DaemonAction::Install { dir, format, print }) => {
            crate::package::daemon_install(format, dir, print, json)
        }
        Some(DaemonAction::Upgrade { binary }) => crate::upgrade::run(&paths, binary, json).await,
        Some(DaemonAction::HandoverCheck) => crate::upgrade::check(),
        None if args.foreground => serve_daemon(paths, args.ready_fd).await,
        None => status(&paths, json).await,
    }
}

/// `wakeful daemon --foreground`: runs the daemon in this process.
pub(crate) async fn serve_daemon(paths: Paths, ready_fd: Option<i32>) -> Result<u8, Failure> {
    {
        {
            // Started by a client: the log file only (stdio is /dev/null).
            // Run by a person: the log file and this terminal.
            let by_client = ready_fd.is_some();
            if let Err(e) = paths
                .prepare()
                .map_err(std::io::Error::other)
                .and_then(|()| wakeful_daemon::log::init(&paths.daemon_log(), !by_client))
            {
                eprintln!(
                    "wakeful: cannot open the daemon log {}: {e}",
                    paths.daemon_log().display()
                );
            }
            let ready = ready_fd
                .map(wakeful_daemon::Readiness::from_fd)
                .unwrap_or_default();
            match wakeful_daemon::run(paths, ready).await {
                Ok(()) => Ok(0),
                Err(wakeful_daemon::DaemonError::AlreadyRunning(socket)) => {
                    eprintln!("wakeful: a daemon is already running (socket {socket})");
                    Ok(0)
                }
                Err(e) => Err(Failure::new(exit::FAILURE, e.to_string())),
            }
        }
    }
}
