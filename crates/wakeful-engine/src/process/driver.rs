//! One process driver for every command wakeful runs for a long time:
//! command monitors and terminals.
//!
//! [`ProcessDriver::spawn`] starts `sh -c COMMAND` in a process group of its
//! own (and a container of its own, where one can be made), with stdin closed
//! and stdout/stderr piped; [`ProcessDriver::next`] hands out what happens,
//! in order: chunks of either stream as they are read, the end of each
//! stream, and the end of the process; [`ProcessDriver::stop`] starts the
//! stop (SIGTERM to everything the command started, grace, SIGKILL);
//! [`ProcessDriver::finish`] ends what is left and says how the command
//! ended and which processes, if any, survived.
//!
//! When the main process exits while a grandchild still holds the pipes
//! (`echo done; sleep 600 &`), the pipes are read for a bounded moment
//! ([`SpawnRequest::drain`]) and then closed: the command has ended.

use std::collections::BTreeMap;
use std::os::unix::process::{CommandExt as _, ExitStatusExt};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::Child;
use wakeful_core::machine::SourceEnd;
use wakeful_core::Stream;

use super::group::GroupGuard;
use super::reaper::{spawn, Managed};
use super::target::Target;
use crate::source::{Alarm, HandedProcess};
use wakeful_platform::tree::{self as platform, ContainerRoot};

/// Read size per pipe read: "whatever is already readable", up to this much.
pub(crate) const READ_CHUNK: usize = 64 * 1024;
/// Read size once a stream has filled a whole [`READ_CHUNK`] read (a flood):
/// as large as the widened pipe, so one read takes all that is waiting.
/// Only streams that flooded get this buffer.
const FLOOD_READ_CHUNK: usize = 1024 * 1024;
/// A pipe's capacity while a command floods its output: with 1 MiB instead
/// of Linux's 64 KiB default, the writer and the reader swap places far less
/// often. The kernel allocates pipe pages only for data actually waiting, so
/// an idle pipe costs nothing more.
const PIPE_CAPACITY: i32 = 1024 * 1024;

/// What to run and how.
#[derive(Debug, Clone)]
pub(crate) struct SpawnRequest<'a> {
    /// The text given to `sh -c`.
    pub command: &'a str,
    /// The environment: `None` inherits this process's; `Some` replaces it.
    pub base_env: Option<&'a BTreeMap<String, String>>,
    /// Variables added on top.
    pub extra_env: &'a BTreeMap<String, String>,
    /// The working directory (`None`: this process's).
    pub cwd: Option<PathBuf>,
    /// The monitor or terminal id: the [`super::target::MARKER`] value,
    /// and the name of its container.
    pub id: &'a str,
    /// The session (`WAKEFUL_SESSION` in the command's environment).
    pub session: &'a str,
    /// Make `sh` die (SIGKILL) when its parent dies.
    pub die_with_parent: bool,
    /// Where to make the command's container, if anywhere.
    pub containers: Option<&'a ContainerRoot>,
    /// Widen the stdout pipe for floods.
    pub wide_stdout: bool,
    /// SIGTERM → SIGKILL.
    pub grace: Duration,
    /// How long to keep reading after the main process exited.
    pub drain: Duration,
}

/// What [`ProcessDriver::next`] hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcEvent {
    /// This many bytes were read from a stream ([`ProcessDriver::data`]
    /// gives them until the next call of `next`).
    Data(Stream, usize),
    /// A stream ended (end of file, or closed after the drain).
    Eof(Stream),
    /// The main process exited; its pipes are drained for a moment.
    Exited,
}

/// How a command ended.
#[derive(Debug)]
pub(crate) struct ProcEnd {
    /// Its exit, as the state machines see it.
    pub end: SourceEnd,
    /// Processes still alive after SIGKILL (normally none).
    pub survivors: Vec<i32>,
    /// The platform backend could not look for every process: what the
    /// stop found.
    pub unverified: Option<wakeful_core::Unverified>,
}

struct Pipe<R> {
    reader: Option<R>,
    buf: Vec<u8>,
}

impl<R: tokio::io::AsyncRead + Unpin> Pipe<R> {
    fn new(reader: Option<R>) -> Self {
        Pipe {
            reader,
            buf: Vec::with_capacity(READ_CHUNK),
        }
    }

    /// Reads what is readable into the buffer (which then holds just that);
    /// `None` at end of stream (or on error). The read goes into the
    /// buffer's spare capacity: its memory is never zeroed, and a pipe that
    /// only ever carries short lines touches one page of it, not sixteen.
    async fn read(&mut self) -> Option<usize> {
        let r = self.reader.as_mut()?;
        self.buf.clear();
        match r.read_buf(&mut self.buf).await {
            Ok(0) | Err(_) => {
                self.reader = None;
                None
            }
            Ok(n) => Some(n),
        }
    }

    /// After a read of `n` bytes: a read that filled the buffer means a
    /// flood; take the next ones in larger pieces.
    fn grow_on_flood(&mut self, n: usize) {
        if n >= READ_CHUNK && self.buf.capacity() < FLOOD_READ_CHUNK {
            self.buf = Vec::with_capacity(FLOOD_READ_CHUNK);
        }
    }
}

/// The command's `sh`: a child this process started, or one a program
/// before it in this process started and handed over (an upgrade), whose
/// exit is read with `waitpid` on each SIGCHLD.
enum Leader {
    Spawned(Child),
    Adopted {
        pid: i32,
        sigchld: Option<tokio::signal::unix::Signal>,
    },
}

impl Leader {
    /// Waits for the `sh` to exit and collects its status.
    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Leader::Spawned(child) => child.wait().await,
            Leader::Adopted { pid, sigchld } => {
                use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
                let pid = nix::unistd::Pid::from_raw(*pid);
                loop {
                    match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
                        Ok(WaitStatus::Exited(_, code)) => {
                            return Ok(ExitStatus::from_raw(code << 8))
                        }
                        Ok(WaitStatus::Signaled(_, sig, _)) => {
                            return Ok(ExitStatus::from_raw(sig as i32))
                        }
                        Ok(_) => {}
                        Err(e) => return Err(e.into()),
                    }
                    match sigchld {
                        Some(s) => {
                            s.recv().await;
                        }
                        // No SIGCHLD stream: look again in a while.
                        None => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                }
            }
        }
    }
}

/// A running command; see the module docs.
pub(crate) struct ProcessDriver {
    child: Leader,
    managed: Option<Managed>,
    target: std::sync::Arc<Target>,
    guard: GroupGuard,
    out: Pipe<pipe::Receiver>,
    err: Pipe<pipe::Receiver>,
    /// Grow the buffer of this stream after the last read handed out.
    grow: Option<(Stream, usize)>,
    exit: Option<ExitStatus>,
    drain: Duration,
    /// Set once the command exited: when its pipes stop being read.
    drain_until: Alarm,
    grace: Duration,
    stopping: Option<tokio::task::JoinHandle<Vec<i32>>>,
}

impl ProcessDriver {
    /// Starts the command; see the module docs.
    pub(crate) fn spawn(req: SpawnRequest<'_>) -> std::io::Result<Self> {
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(req.command);
        if let Some(env) = req.base_env {
            cmd.env_clear();
            cmd.envs(env);
        }
        cmd.envs(req.extra_env);
        cmd.env(super::target::MARKER, req.id);
        cmd.env(wakeful_core::session::WAKEFUL_SESSION, req.session);
        if let Some(cwd) = &req.cwd {
            cmd.current_dir(cwd);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let container = req.containers.and_then(|root| match root.create(req.id) {
            Ok(cg) => Some(cg),
            Err(e) => {
                tracing::debug!("no container for {}: {e}", req.id);
                None
            }
        });
        let procs_fd = container.as_ref().and_then(|c| c.procs_fd());
        let die_with_parent = req.die_with_parent;
        // SAFETY: the closure runs in the child between fork and exec and
        // only makes async-signal-safe system calls (the platform's
        // `enter_container` and `die_with_parent`); it allocates nothing
        // and takes no lock.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(fd) = procs_fd {
                    platform::enter_container(fd);
                }
                if die_with_parent {
                    platform::die_with_parent()?;
                }
                Ok(())
            });
        }
        let mut cmd = tokio::process::Command::from(cmd);
        // From the thread that starts every command (`spawner`): the
        // parent-death signal is tied to it.
        let (mut child, managed) = super::spawner::on_spawner(move || spawn(&mut cmd))?;
        let pid = managed.pid();
        let leader_start = wakeful_platform::tree::proc_info(pid).map_or(0, |p| p.start_ticks);
        let out = child
            .stdout
            .take()
            .map(|o| o.into_owned_fd().and_then(pipe::Receiver::from_owned_fd))
            .transpose()?;
        if req.wide_stdout {
            if let Some(o) = &out {
                widen_pipe(o);
            }
        }
        let err = child
            .stderr
            .take()
            .map(|e| e.into_owned_fd().and_then(pipe::Receiver::from_owned_fd))
            .transpose()?;
        Ok(ProcessDriver {
            child: Leader::Spawned(child),
            managed: Some(managed),
            target: std::sync::Arc::new(Target {
                leader: pid,
                leader_start,
                marker: req.id.to_string(),
                container,
                seen: Default::default(),
            }),
            guard: GroupGuard::new(pid),
            out: Pipe::new(out),
            err: Pipe::new(err),
            grow: None,
            exit: None,
            drain: req.drain,
            drain_until: Alarm::new(),
            grace: req.grace,
            stopping: None,
        })
    }

    /// Takes over a command that the program this process ran before
    /// started and handed over (`handed`): the same process, its pipes,
    /// read from where that program stopped. The descriptors named in
    /// `handed` must be open in this process and used by nothing else.
    pub(crate) fn adopt(
        handed: &HandedProcess,
        id: &str,
        grace: Duration,
        drain: Duration,
        containers: Option<&ContainerRoot>,
    ) -> std::io::Result<Self> {
        use std::os::fd::FromRawFd;
        let open = |fd: Option<i32>| {
            fd.map(|fd| {
                // SAFETY: the handover names descriptors this process
                // inherited for exactly this command and nobody else owns.
                let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
                pipe::Receiver::from_owned_fd(owned)
            })
            .transpose()
        };
        let out = open(handed.stdout)?;
        let err = open(handed.stderr)?;
        let managed = super::reaper::adopt(handed.pid);
        let sigchld = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child()).ok();
        let exit = handed.exit.map(ExitStatus::from_raw);
        let mut drain_until = Alarm::new();
        if exit.is_some() {
            drain_until.set(Some(tokio::time::Instant::now() + drain));
        }
        Ok(ProcessDriver {
            child: Leader::Adopted {
                pid: handed.pid,
                sigchld,
            },
            managed: Some(managed),
            target: std::sync::Arc::new(Target {
                leader: handed.pid,
                leader_start: handed.start_ticks,
                marker: id.to_string(),
                container: containers.and_then(|root| root.create(id).ok()),
                seen: Default::default(),
            }),
            guard: GroupGuard::new(handed.pid),
            out: Pipe::new(out),
            err: Pipe::new(err),
            grow: None,
            exit,
            drain,
            drain_until,
            grace,
            stopping: None,
        })
    }

    /// What the program that replaces this one needs to go on with the
    /// command: its process, its pipes (still open here; they stay open
    /// across the exec), its exit if it already exited. `None` while it is
    /// being stopped: a stop is finished, not handed over.
    pub(crate) fn hand_over(&self) -> Option<HandedProcess> {
        use std::os::fd::AsRawFd;
        if self.stopping.is_some() {
            return None;
        }
        Some(HandedProcess {
            pid: self.target.leader,
            start_ticks: self.target.leader_start,
            stdout: self.out.reader.as_ref().map(|r| r.as_raw_fd()),
            stderr: self.err.reader.as_ref().map(|r| r.as_raw_fd()),
            exit: self.exit.map(|s| s.into_raw()),
        })
    }

    /// The `sh` process's id (also its process group's).
    pub(crate) fn pid(&self) -> i32 {
        self.target.leader
    }

    /// Its start time, in clock ticks after boot.
    pub(crate) fn start_ticks(&self) -> u64 {
        self.target.leader_start
    }

    /// The bytes of the last [`ProcEvent::Data`] of `stream`.
    pub(crate) fn data(&self, stream: Stream, n: usize) -> &[u8] {
        match stream {
            Stream::Stdout => &self.out.buf[..n],
            Stream::Stderr => &self.err.buf[..n],
        }
    }

    /// The next thing that happened; `None` once the process exited and
    /// both streams ended. Cancel-safe: dropping the future loses nothing.
    pub(crate) async fn next(&mut self) -> Option<ProcEvent> {
        if let Some((stream, n)) = self.grow.take() {
            match stream {
                Stream::Stdout => self.out.grow_on_flood(n),
                Stream::Stderr => self.err.grow_on_flood(n),
            }
        }
        loop {
            if self.exit.is_some() && self.out.reader.is_none() && self.err.reader.is_none() {
                return None;
            }
            tokio::select! {
                r = self.out.read(), if self.out.reader.is_some() => {
                    return Some(match r {
                        Some(n) => {
                            self.grow = Some((Stream::Stdout, n));
                            ProcEvent::Data(Stream::Stdout, n)
                        }
                        None => ProcEvent::Eof(Stream::Stdout),
                    });
                }
                r = self.err.read(), if self.err.reader.is_some() => {
                    return Some(match r {
                        Some(n) => {
                            self.grow = Some((Stream::Stderr, n));
                            ProcEvent::Data(Stream::Stderr, n)
                        }
                        None => ProcEvent::Eof(Stream::Stderr),
                    });
                }
                status = self.child.wait(), if self.exit.is_none() => {
                    self.exit = Some(status.unwrap_or_else(|_| ExitStatus::from_raw(0)));
                    self.drain_until
                        .set(Some(tokio::time::Instant::now() + self.drain));
                    return Some(ProcEvent::Exited);
                }
                _ = self.drain_until.ring(), if self.drain_until.is_set() => {
                    // A grandchild still holds a pipe: the command is over.
                    if self.out.reader.take().is_some() {
                        return Some(ProcEvent::Eof(Stream::Stdout));
                    }
                    if self.err.reader.take().is_some() {
                        return Some(ProcEvent::Eof(Stream::Stderr));
                    }
                }
            }
        }
    }

    /// Starts stopping the command (idempotent); [`ProcessDriver::next`]
    /// goes on handing out what it still prints.
    pub(crate) fn stop(&mut self) {
        if self.stopping.is_none() {
            let target = self.target.clone();
            let grace = self.grace;
            self.stopping = Some(tokio::spawn(async move { target.terminate(grace).await }));
        }
    }

    /// Whether a stop was started.
    pub(crate) fn stopping(&self) -> bool {
        self.stopping.is_some()
    }

    /// Ends whatever is left of the command (after a stop, or when its main
    /// process exited and the pipes were drained) and says how it ended.
    pub(crate) async fn finish(mut self) -> ProcEnd {
        // Our pipe ends first: a grandchild blocked on a full pipe must not
        // keep the command alive.
        self.out.reader = None;
        self.err.reader = None;
        if let Some(t) = self.stopping.take() {
            let _ = t.await;
        }
        // Whatever is left (a `sleep 600 &` holding no pipe, a child ignoring
        // SIGTERM, an orphan in a session of its own) goes now. Returns at
        // once when nothing is.
        let survivors = self.target.terminate(self.grace).await;
        if self.exit.is_none() {
            // Stopped before it exited by itself: collect its status.
            self.exit = self.child.wait().await.ok();
        }
        self.guard.disarm();
        drop(self.managed.take());
        let end = match self.exit {
            Some(s) => match (s.code(), s.signal()) {
                (Some(code), _) => SourceEnd::Exited(code),
                (None, Some(sig)) => SourceEnd::Signaled(sig),
                (None, None) => SourceEnd::Exited(0),
            },
            None => SourceEnd::Exited(0),
        };
        if !survivors.is_empty() {
            tracing::warn!(
                "{}: {} process(es) survived SIGKILL: {survivors:?}",
                self.target.marker,
                survivors.len()
            );
        }
        let backend = wakeful_platform::backend();
        let unverified = (!backend.finds_every_process()).then(|| wakeful_core::Unverified {
            backend: backend.name().to_string(),
            seen: self.target.seen(),
        });
        ProcEnd {
            end,
            survivors,
            unverified,
        }
    }
}

/// Widens a pipe to [`PIPE_CAPACITY`] where the platform can; when the
/// system refuses, the default capacity stays.
fn widen_pipe(pipe: &impl std::os::fd::AsRawFd) {
    wakeful_platform::fd::widen_pipe(pipe.as_raw_fd(), PIPE_CAPACITY);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_pipe_read_holds_exactly_what_was_read_and_grows_only_on_a_full_read() {
        let short: &[u8] = b"one line\n";
        let mut pipe = Pipe::new(Some(short));
        assert_eq!(pipe.read().await, Some(9));
        assert_eq!(pipe.buf, b"one line\n");
        pipe.grow_on_flood(9);
        assert!(
            pipe.buf.capacity() < FLOOD_READ_CHUNK,
            "a short read is no flood"
        );
        assert_eq!(pipe.read().await, None, "end of stream");
        assert_eq!(pipe.read().await, None, "and it stays ended");

        let flood: Vec<u8> = (0..READ_CHUNK * 3).map(|i| (i % 251) as u8).collect();
        let mut pipe = Pipe::new(Some(&flood[..]));
        assert_eq!(
            pipe.read().await,
            Some(READ_CHUNK),
            "one read takes a whole chunk"
        );
        assert_eq!(pipe.buf, flood[..READ_CHUNK]);
        pipe.grow_on_flood(READ_CHUNK);
        assert!(
            pipe.buf.capacity() >= FLOOD_READ_CHUNK,
            "a full read means a flood"
        );
        assert_eq!(
            pipe.read().await,
            Some(READ_CHUNK * 2),
            "the rest in one read"
        );
        assert_eq!(pipe.buf, flood[READ_CHUNK..]);
        assert_eq!(pipe.read().await, None);
    }
}
