//! The pid source (`--pid`): a process wakeful did not start, watched until
//! it exits; its one event is the monitor's final one (`stopped`, stop
//! reason `exited`).
//!
//! - A process is named by its pid and its start time
//!   ([`wakeful_core::pid`]). A fresh start reads them ([`identify`]) and
//!   keeps them in the monitor's source, so a monitor re-armed after a
//!   daemon restart checks that the pid still names the process it watched:
//!   a process that is gone, or whose pid now names another process, is
//!   reported at once as having exited while the daemon was down, and the
//!   later process is never waited on.
//! - Linux: a pidfd, readable once the process exited, read in the
//!   monitor's own task (no polling). The pidfd is opened before the
//!   process table is read and checked after, so the start time read is
//!   the watched process's, even if its pid is given away meanwhile.
//! - A process that is not the daemon's child cannot be waited for, so its
//!   exit status is in general unknown. Linux 6.15 and later keep it for a
//!   pidfd once the process's parent has collected it: the source waits up
//!   to [`wakeful_core::pid::REAP_WAIT`] for that and then gives the status,
//!   or says `status unknown`.
//! - The portable (`posix`) backend has no exit notification: it asks
//!   `kill(pid, 0)` every [`wakeful_core::pid::POLL_EVERY`] and reads the
//!   start time and state (`ps`) every
//!   [`wakeful_core::pid::FULL_CHECK_EVERY`] ticks, so a zombie or a pid
//!   given to another process is noticed within 2 s. So does Linux on a
//!   kernel without `pidfd_open` (before 5.3).

use std::os::fd::{AsFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

use wakeful_core::machine::SourceEnd;
use wakeful_core::pid::{self, PidError, Seen, Status};
use wakeful_core::{MonitorStopReason, ProcessExit, Source};
use wakeful_platform::tree::{self, ExitInfo};

use crate::source::{Input, InputSource};

/// Why a pid monitor cannot watch (its `failed` reason).
#[derive(Debug, thiserror::Error)]
pub(crate) enum WatchPidError {
    /// The source has no start time: it was never identified.
    #[error("no start time was recorded for process {0}, so it cannot be told from a later process given the same pid; start the monitor again with --pid {0}")]
    NoIdentity(i32),
    /// The start time was read under another platform backend.
    #[error("the start time of process {pid} was read under the {recorded} platform backend and the daemon now uses {now}: it cannot tell whether pid {pid} still names the process it watched; start the monitor again with --pid {pid}")]
    Backend {
        /// The pid.
        pid: i32,
        /// The backend that read the start time.
        recorded: String,
        /// The backend in use now.
        now: &'static str,
    },
    /// The system would not give an exit descriptor.
    #[error("cannot watch process {pid}: {source}")]
    Watch {
        /// The pid.
        pid: i32,
        /// What `pidfd_open` said.
        source: std::io::Error,
    },
}

/// How a pid names no process any more (`pidfd_open`'s errors): gone
/// (`ESRCH`), or now a thread of another process (`EINVAL`, `ENOENT`).
fn names_no_process(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ESRCH | libc::EINVAL | libc::ENOENT)
    )
}

/// What the process table shows at `pid` (a `ps` run under the posix
/// backend: call it off the runtime's threads).
fn observe(pid: i32) -> Seen {
    match tree::proc_info(pid) {
        None => Seen::Gone,
        Some(p) => Seen::Process {
            start_time: p.start_ticks,
            live: p.is_live(),
        },
    }
}

/// [`observe`] on a blocking thread.
async fn observe_off_thread(pid: i32) -> Seen {
    tokio::task::spawn_blocking(move || observe(pid))
        .await
        .unwrap_or(Seen::Gone)
}

/// Fills in which process a pid source names, at a fresh start (never at a
/// re-arm, which must not take a later process for the one it watched):
/// its start time, the platform backend that read it, its command line.
/// Refuses a pid that cannot be watched: pid 1, this process, no process,
/// a process that has already exited, a thread, another user's process
/// the process table hides, or a start time given that is not the
/// process's. Any other source is left as it is.
pub(crate) async fn identify(source: &mut Source) -> Result<(), PidError> {
    let Source::Pid {
        pid,
        start_time,
        backend,
        cmdline,
    } = source
    else {
        return Ok(());
    };
    let pid = *pid;
    pid::check_pid(pid, i32::try_from(std::process::id()).ok())?;
    let (found, command) = tokio::task::spawn_blocking(move || look(pid))
        .await
        .map_err(|e| PidError::Unwatchable {
            pid,
            why: e.to_string(),
        })??;
    let now = wakeful_platform::backend().name();
    if let Some(given) = *start_time {
        if backend.as_deref().is_some_and(|b| b != now) || given != found {
            return Err(PidError::Changed(pid));
        }
    }
    *start_time = Some(found);
    *backend = Some(now.to_string());
    *cmdline = command;
    Ok(())
}

/// The start time and command line of live process `pid`, or why it
/// cannot be watched (blocking: the posix backend runs `ps`).
fn look(pid: i32) -> Result<(u64, Option<String>), PidError> {
    let not_running = || PidError::NoProcess {
        pid,
        why: format!(
            "it is not running (`ps -p {pid}` shows nothing); give the pid of a running process"
        ),
    };
    let watch = match tree::open_exit_watch(pid) {
        Ok(watch) => watch,
        Err(e) => match e.raw_os_error() {
            Some(libc::ESRCH) => return Err(not_running()),
            Some(libc::EINVAL | libc::ENOENT) => return Err(PidError::Thread(pid)),
            // A kernel without pidfd_open: polled.
            Some(libc::ENOSYS) => None,
            _ => {
                return Err(PidError::Unwatchable {
                    pid,
                    why: e.to_string(),
                })
            }
        },
    };
    let Some(info) = tree::proc_info(pid) else {
        return Err(if tree::is_others(pid) {
            PidError::Hidden(pid)
        } else {
            not_running()
        });
    };
    // Checked after the table was read: the process read is the one the
    // watch names, unless it exited meanwhile.
    let exited = watch.as_ref().is_some_and(|w| tree::has_exited(w.as_fd()));
    if !info.is_live() || exited {
        return Err(PidError::NoProcess {
            pid,
            why: "it has already exited (its parent has not collected it yet)".to_string(),
        });
    }
    let command = tree::cmdline(pid).and_then(|argv| pid::command_text(&argv));
    Ok((info.start_ticks, command))
}

/// How the source learns of the exit.
enum Watching {
    /// It had exited when the source was set up.
    Exited,
    /// A pidfd: readable once the process exited; then, until `reap_by`,
    /// waiting for its parent to collect it (for the status).
    Pidfd {
        fd: AsyncFd<OwnedFd>,
        reap_by: Option<Instant>,
    },
    /// Asked every [`pid::POLL_EVERY`].
    Polled {
        /// Ticks so far.
        tick: u64,
        /// When to ask next.
        next: Instant,
    },
}

/// A watched process; see the module docs.
pub(crate) struct PidSource {
    pid: i32,
    start_time: u64,
    cmdline: Option<String>,
    /// Set up by a re-arm: an exit found then happened while no daemon ran.
    rearmed: bool,
    watching: Watching,
}

impl PidSource {
    /// Watches the process `source` names (an identified [`Source::Pid`]).
    /// `rearm`: after a daemon restart, when a process found gone exited
    /// while the daemon was down.
    pub(crate) async fn watch(source: &Source, rearm: bool) -> Result<Self, WatchPidError> {
        let Source::Pid {
            pid,
            start_time,
            backend,
            cmdline,
        } = source
        else {
            return Err(WatchPidError::NoIdentity(0));
        };
        let pid = *pid;
        let (Some(start_time), Some(backend)) = (*start_time, backend.as_deref()) else {
            return Err(WatchPidError::NoIdentity(pid));
        };
        let now = wakeful_platform::backend().name();
        if backend != now {
            return Err(WatchPidError::Backend {
                pid,
                recorded: backend.to_string(),
                now,
            });
        }
        let mut src = PidSource {
            pid,
            start_time,
            cmdline: cmdline.clone(),
            rearmed: rearm,
            watching: Watching::Exited,
        };
        let fd = match tree::open_exit_watch(pid) {
            Ok(fd) => fd,
            Err(e) if names_no_process(&e) => return Ok(src),
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => None,
            Err(source) => return Err(WatchPidError::Watch { pid, source }),
        };
        let seen = observe_off_thread(pid).await;
        // After the table was read: it showed the process the pidfd names,
        // unless that one exited meanwhile (then it has exited either way).
        let exited = fd.as_ref().is_some_and(|fd| tree::has_exited(fd.as_fd()));
        if exited || pid::judge(start_time, seen).exited() {
            return Ok(src);
        }
        let registered = fd.map(|fd| {
            // SAFETY: the AsyncFd owns the descriptor, which stays open
            // until the AsyncFd (and with it the registration) is dropped.
            unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        });
        src.watching = match registered {
            Some(Ok(fd)) => Watching::Pidfd { fd, reap_by: None },
            // No pidfd (posix, an old kernel), or one the runtime cannot
            // register: asked.
            Some(Err(_)) | None => Watching::Polled {
                tick: 0,
                next: Instant::now() + pid::POLL_EVERY,
            },
        };
        Ok(src)
    }

    /// The final input: the process exited, with `status` if known.
    fn exited(&self, status: Option<Status>) -> Input<'static> {
        let (code, signal) = match status {
            Some(Status::Code(c)) => (Some(c), None),
            Some(Status::Signal(s)) => (None, Some(s)),
            None => (None, None),
        };
        let while_down = self.rearmed && matches!(self.watching, Watching::Exited);
        Input::End(
            SourceEnd::Ended(MonitorStopReason::Exited(Box::new(ProcessExit {
                pid: self.pid,
                cmdline: self.cmdline.clone(),
                code,
                signal,
                while_down,
            })))
            .into(),
        )
    }
}

impl InputSource for PidSource {
    async fn next(&mut self) -> Input<'_> {
        loop {
            match &mut self.watching {
                Watching::Exited => return self.exited(None),
                Watching::Pidfd { fd, reap_by } => {
                    let deadline = match *reap_by {
                        Some(d) => d,
                        None => {
                            // Readable: the process has exited.
                            if let Ok(mut ready) = fd.readable().await {
                                ready.clear_ready();
                            }
                            let d = Instant::now() + pid::REAP_WAIT;
                            *reap_by = Some(d);
                            d
                        }
                    };
                    match tree::exit_info(fd.get_ref().as_fd()) {
                        ExitInfo::Status(raw) => {
                            return self.exited(Some(Status::from_wait_status(raw)))
                        }
                        ExitInfo::Unknown => return self.exited(None),
                        ExitInfo::NotReaped if Instant::now() >= deadline => {
                            return self.exited(None)
                        }
                        // A zombie: its parent collects it soon (the pidfd
                        // is woken then), or the deadline gives up.
                        ExitInfo::NotReaped => {
                            tokio::select! {
                                ready = fd.readable() => {
                                    if let Ok(mut ready) = ready {
                                        ready.clear_ready();
                                    }
                                }
                                _ = tokio::time::sleep_until(deadline) => {}
                            }
                        }
                    }
                }
                Watching::Polled { tick, next } => {
                    tokio::time::sleep_until(*next).await;
                    let (pid, start_time) = (self.pid, self.start_time);
                    let gone = !tree::is_alive(pid)
                        || (pid::full_check(*tick + 1)
                            && pid::judge(start_time, observe_off_thread(pid).await).exited());
                    if let Watching::Polled { tick, next } = &mut self.watching {
                        *tick += 1;
                        *next = Instant::now() + pid::POLL_EVERY;
                    }
                    if gone {
                        return self.exited(None);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn identified(pid: i32) -> Source {
        Source::Pid {
            pid,
            start_time: None,
            backend: None,
            cmdline: None,
        }
    }

    async fn end_of(src: &mut PidSource) -> MonitorStopReason {
        let input = tokio::time::timeout(Duration::from_secs(20), src.next())
            .await
            .expect("the exit is seen");
        match input {
            Input::End(ended) => match ended.end {
                SourceEnd::Ended(reason) => reason,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn identify_reads_the_start_time_and_command_line() {
        let mut child = std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut source = identified(pid);
        identify(&mut source).await.unwrap();
        let Source::Pid {
            start_time,
            backend,
            cmdline,
            ..
        } = &source
        else {
            unreachable!()
        };
        assert_eq!(*start_time, tree::start_time(pid));
        assert_eq!(backend.as_deref(), Some(wakeful_platform::backend().name()));
        assert_eq!(cmdline.as_deref(), Some("sleep 1000"));
        // Identified again, with the same start time: the same process.
        identify(&mut source).await.unwrap();
        // Another start time given: another process.
        if let Source::Pid { start_time, .. } = &mut source {
            *start_time = start_time.map(|s| s + 1);
        }
        assert_eq!(identify(&mut source).await, Err(PidError::Changed(pid)));
        child.kill().unwrap();
        child.wait().unwrap();
        let err = identify(&mut identified(pid)).await.unwrap_err();
        assert!(
            err.to_string().starts_with(&format!("no process {pid}: ")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn identify_refuses_init_this_process_and_a_zombie() {
        assert_eq!(identify(&mut identified(1)).await, Err(PidError::Init));
        let me = std::process::id() as i32;
        assert_eq!(
            identify(&mut identified(me)).await,
            Err(PidError::Daemon(me))
        );
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        // Not collected: a zombie.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while tree::proc_info(pid).is_some_and(|p| p.is_live()) {
            assert!(std::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let err = identify(&mut identified(pid)).await.unwrap_err();
        assert!(err.to_string().contains("already exited"), "{err}");
        child.wait().unwrap();
    }

    #[tokio::test]
    async fn a_killed_process_ends_the_source_once_with_its_status_if_known() {
        let mut child = std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut source = identified(pid);
        identify(&mut source).await.unwrap();
        let mut src = PidSource::watch(&source, false).await.unwrap();
        match wakeful_platform::backend() {
            wakeful_platform::Backend::Linux => {
                assert!(matches!(src.watching, Watching::Pidfd { .. }))
            }
            wakeful_platform::Backend::Posix => {
                assert!(matches!(src.watching, Watching::Polled { .. }))
            }
        }
        // Nothing while it runs.
        assert!(tokio::time::timeout(Duration::from_millis(200), src.next())
            .await
            .is_err());
        child.kill().unwrap();
        child.wait().unwrap();
        let MonitorStopReason::Exited(e) = end_of(&mut src).await else {
            panic!()
        };
        let ProcessExit {
            pid: p,
            cmdline,
            code,
            signal,
            while_down,
        } = *e;
        assert_eq!(p, pid);
        assert_eq!(cmdline.as_deref(), Some("sleep 1000"));
        assert_eq!(code, None);
        // Linux 6.15 and later keep the status of a reaped process.
        assert!(matches!(signal, None | Some(9)), "{signal:?}");
        assert!(!while_down);
    }

    #[tokio::test]
    async fn a_zombie_is_waited_for_until_its_parent_collects_it() {
        if wakeful_platform::backend() != wakeful_platform::Backend::Linux {
            return; // no pidfd: no status to wait for
        }
        let mut child = std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut source = identified(pid);
        identify(&mut source).await.unwrap();
        let mut src = PidSource::watch(&source, false).await.unwrap();
        child.kill().unwrap();
        // Until the source has seen the exit of the zombie and waits for
        // its parent (this test) to collect it.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !matches!(
            src.watching,
            Watching::Pidfd {
                reap_by: Some(_),
                ..
            }
        ) {
            assert!(
                std::time::Instant::now() < deadline,
                "the exit was not seen"
            );
            let _ = tokio::time::timeout(Duration::from_millis(10), src.next()).await;
        }
        let t0 = Instant::now();
        // The source waits first, then the child is collected: the pidfd
        // wakes it, well before REAP_WAIT gives up.
        let (input, _) = tokio::join!(src.next(), async { child.wait().unwrap() });
        let Input::End(ended) = input else { panic!() };
        let SourceEnd::Ended(MonitorStopReason::Exited(e)) = ended.end else {
            panic!()
        };
        let signal = e.signal;
        match signal {
            None => eprintln!("this kernel keeps no exit status for pidfds (before 6.15)"),
            Some(signal) => {
                assert_eq!(signal, 9);
                assert!(t0.elapsed() < pid::REAP_WAIT / 2, "{:?}", t0.elapsed());
            }
        }
    }

    #[tokio::test]
    async fn a_rearm_finds_a_gone_or_replaced_process_exited_while_down_and_never_waits_on_it() {
        // A live process under a start time that is not its own: its pid
        // names another process now.
        let mut child = std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut source = identified(pid);
        identify(&mut source).await.unwrap();
        let mut replaced = source.clone();
        if let Source::Pid { start_time, .. } = &mut replaced {
            *start_time = start_time.map(|s| s.saturating_sub(1));
        }
        let mut src = PidSource::watch(&replaced, true).await.unwrap();
        let MonitorStopReason::Exited(e) = end_of(&mut src).await else {
            panic!()
        };
        assert!(e.while_down);
        // The live process is still watchable under its own start time.
        let src = PidSource::watch(&source, true).await.unwrap();
        assert!(!matches!(src.watching, Watching::Exited));
        child.kill().unwrap();
        child.wait().unwrap();
        // Gone.
        let mut src = PidSource::watch(&source, true).await.unwrap();
        let reason = end_of(&mut src).await;
        assert!(
            reason
                .to_string()
                .contains("exited while the daemon was down"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn a_start_time_of_another_backend_is_refused() {
        let source = Source::Pid {
            pid: std::process::id() as i32,
            start_time: Some(1),
            backend: Some("elsewhere".into()),
            cmdline: None,
        };
        let err = PidSource::watch(&source, true).await.err().unwrap();
        assert!(
            err.to_string().contains("elsewhere platform backend"),
            "{err}"
        );
        let err = PidSource::watch(&identified(77), true).await.err().unwrap();
        assert!(err.to_string().contains("no start time"), "{err}");
    }
}
