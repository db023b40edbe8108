//! The command source: `sh -c COMMAND` in its own process group, stdout and
//! stderr read concurrently, and the stop sequence (SIGTERM to the group,
//! grace, SIGKILL). When the main process exits, the pipes are drained for a
//! bounded moment, then whatever is left of the group is terminated.

use std::os::unix::process::{CommandExt as _, ExitStatusExt};
use std::process::{ExitStatus, Stdio};
use std::time::Instant;

use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use wakeful_core::journal::JournalEntry;
use wakeful_core::machine::{SourceEnd, Step};
use wakeful_core::{MonitorSpec, MonitorStopReason, Stream};

use crate::monitor::{monitor_cwd, sleep_until_opt, Control, Driver, Launch};
use crate::process::{self, GroupGuard};

/// Read size per pipe read: "whatever is already readable", up to this much.
pub(crate) const READ_CHUNK: usize = 64 * 1024;
/// Read size once a stream has filled a whole [`READ_CHUNK`] read (a flood):
/// as large as the widened pipe, so one read takes all that is waiting.
/// Only streams that flooded get this buffer.
const FLOOD_READ_CHUNK: usize = 1024 * 1024;

/// Grows `buf` to [`FLOOD_READ_CHUNK`] after a read that filled it.
fn grow_on_flood(buf: &mut Vec<u8>, n: usize) {
    if n == buf.len() && buf.len() < FLOOD_READ_CHUNK {
        *buf = vec![0u8; FLOOD_READ_CHUNK];
    }
}

/// A pipe's capacity while a command floods its output: with 1 MiB instead
/// of Linux's 64 KiB default, the writer and the reader swap places far less
/// often. The kernel allocates pipe pages only for data actually waiting, so
/// an idle pipe costs nothing more.
const PIPE_CAPACITY: i32 = 1024 * 1024;

/// Widens a pipe to [`PIPE_CAPACITY`]; when the system refuses (a lower
/// `/proc/sys/fs/pipe-max-size`), the default capacity stays.
pub(crate) fn widen_pipe(pipe: &impl std::os::fd::AsRawFd) {
    let _ = nix::fcntl::fcntl(
        pipe.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_CAPACITY),
    );
}

/// `sh -c command` with the monitor's environment, cwd and process group.
pub(crate) fn build_command(
    spec: &MonitorSpec,
    command: &str,
    launch: &Launch,
    id: &str,
    session: &str,
) -> tokio::process::Command {
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c").arg(command);
    if let Some(env) = &launch.base_env {
        cmd.env_clear();
        cmd.envs(env);
    }
    cmd.envs(&spec.env);
    cmd.env("WAKEFUL_MONITOR_ID", id);
    cmd.env("WAKEFUL_SESSION", session);
    if let Some(cwd) = monitor_cwd(spec, launch) {
        cmd.current_dir(cwd);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if launch.die_with_parent {
        // SAFETY: prctl is async-signal-safe and only sets a flag of the child.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    tokio::process::Command::from(cmd)
}

pub(crate) async fn run(
    driver: &mut Driver,
    spec: &MonitorSpec,
    command: &str,
    launch: &Launch,
    stop_rx: &mut watch::Receiver<Option<Control>>,
) {
    let mut child = match build_command(spec, command, launch, &driver.id, &driver.session).spawn()
    {
        Ok(c) => c,
        Err(e) => {
            driver
                .finish(SourceEnd::Failed(format!("could not start `sh -c`: {e}")))
                .await;
            return;
        }
    };
    let Some(pid) = child.id().map(|p| p as i32) else {
        driver
            .finish(SourceEnd::Failed("the process vanished at start".into()))
            .await;
        return;
    };
    let mut guard = GroupGuard::new(pid);
    let start_ticks = process::proc_info(pid).map_or(0, |p| p.start_ticks);
    let _ = driver
        .sink
        .send(JournalEntry::Spawned {
            monitor_id: driver.id.clone(),
            pid,
            start_ticks,
        })
        .await;

    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    if let Some(o) = &out {
        widen_pipe(o);
    }
    let mut obuf = vec![0u8; READ_CHUNK];
    let mut ebuf = vec![0u8; READ_CHUNK];
    let mut exit: Option<ExitStatus> = None;
    let mut drain_until: Option<tokio::time::Instant> = None;
    let mut terminator: Option<tokio::task::JoinHandle<()>> = None;
    let mut failure: Option<String> = None;
    let mut suspended = false;

    loop {
        if exit.is_some() && out.is_none() && err.is_none() {
            break;
        }
        let machine_deadline = driver
            .machine
            .next_deadline()
            .map(tokio::time::Instant::from_std);
        let deadline = match (machine_deadline, drain_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut step = Step::default();
        tokio::select! {
            changed = stop_rx.changed(), if terminator.is_none() => {
                let control = if changed.is_ok() {
                    stop_rx.borrow().clone()
                } else {
                    Some(Control::Stop(MonitorStopReason::SessionEnded))
                };
                let reason = match control {
                    Some(Control::Stop(reason)) => Some(reason),
                    Some(Control::Suspend) => {
                        suspended = true;
                        Some(MonitorStopReason::DaemonStopped)
                    }
                    None => None,
                };
                if let Some(reason) = reason {
                    driver.machine.request_stop(reason);
                    terminator = Some(tokio::spawn(process::terminate_group(pid, launch.grace)));
                }
            }
            r = read_opt(&mut out, &mut obuf), if out.is_some() => {
                let now = Instant::now();
                let res = match r {
                    Ok(0) | Err(_) => {
                        out = None;
                        driver.end_stream(now, Stream::Stdout)
                    }
                    Ok(n) => {
                        let step = driver.feed(now, Stream::Stdout, &obuf[..n]);
                        grow_on_flood(&mut obuf, n);
                        step
                    }
                };
                match res {
                    Ok(s) => step = s,
                    Err(e) => failure = Some(format!("cannot write the output file: {e}")),
                }
            }
            r = read_opt(&mut err, &mut ebuf), if err.is_some() => {
                let now = Instant::now();
                let res = match r {
                    Ok(0) | Err(_) => {
                        err = None;
                        driver.end_stream(now, Stream::Stderr)
                    }
                    Ok(n) => {
                        let step = driver.feed(now, Stream::Stderr, &ebuf[..n]);
                        grow_on_flood(&mut ebuf, n);
                        step
                    }
                };
                match res {
                    Ok(s) => step = s,
                    Err(e) => failure = Some(format!("cannot write the output file: {e}")),
                }
            }
            status = child.wait(), if exit.is_none() => {
                exit = Some(status.unwrap_or_else(|_| ExitStatus::from_raw(0)));
                drain_until = Some(tokio::time::Instant::now() + launch.drain);
            }
            _ = sleep_until_opt(deadline), if deadline.is_some() => {
                if drain_until.is_some_and(|d| tokio::time::Instant::now() >= d) {
                    break;
                }
                step = driver.machine.on_tick(Instant::now());
            }
        }
        let stop = step.stop.take();
        driver.emit(step.emits).await;
        if failure.is_some() && terminator.is_none() {
            driver.machine.request_stop(MonitorStopReason::UserStopped);
            terminator = Some(tokio::spawn(process::terminate_group(pid, launch.grace)));
        }
        if stop.is_some() && terminator.is_none() {
            terminator = Some(tokio::spawn(process::terminate_group(pid, launch.grace)));
        }
    }
    // Close our pipe ends first: a grandchild blocked on a full pipe must not
    // keep the group alive.
    drop(out);
    drop(err);
    if let Some(t) = terminator {
        let _ = t.await;
    }
    // Whatever is left of the group (a `sleep 600 &` holding no pipe, a child
    // ignoring SIGTERM) goes now.
    process::terminate_group(pid, launch.grace).await;
    process::reap_group_zombies(pid);
    guard.disarm();
    if suspended {
        return;
    }

    let end = match failure {
        Some(f) => SourceEnd::Failed(f),
        None => match exit {
            Some(s) => match (s.code(), s.signal()) {
                (Some(code), _) => SourceEnd::Exited(code),
                (None, Some(sig)) => SourceEnd::Signaled(sig),
                (None, None) => SourceEnd::Exited(0),
            },
            None => SourceEnd::Exited(0),
        },
    };
    driver.finish(end).await;
}

pub(crate) async fn read_opt<R: tokio::io::AsyncRead + Unpin>(
    r: &mut Option<R>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    match r {
        Some(r) => r.read(buf).await,
        None => std::future::pending().await,
    }
}
