//! Running one monitor: the IO edge around [`MonitorMachine`].
//!
//! [`Driver`] owns what every source shares (the machine, the output file,
//! one line splitter per stream, the journal channel); [`run`] drives a
//! command source: `sh -c COMMAND` in its own process group, stdout and stderr
//! read concurrently, timers from the machine's deadlines, and the stop
//! sequence (SIGTERM to the group, grace, SIGKILL).

use std::collections::BTreeMap;
use std::os::unix::process::{CommandExt as _, ExitStatusExt};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, watch};

use wakeful_core::lines::{LineSplitter, Piece};
use wakeful_core::machine::{Emit, SourceEnd, Step};
use wakeful_core::{
    EventBody, Line, MonitorInfo, MonitorMachine, MonitorSpec, MonitorState, MonitorStopReason,
    PendingEvent, Source, Stream,
};

use crate::output::OutputFile;
use crate::process::{self, GroupGuard};
use wakeful_core::journal::JournalEntry;

/// Read size per pipe read: "whatever is already readable", up to this much.
const READ_CHUNK: usize = 64 * 1024;
/// Counters are sent to the journal at most this often while running.
const COUNTERS_EVERY: Duration = Duration::from_secs(1);

/// How a monitor's process is launched and stopped.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The caller's environment; `None` inherits this process's.
    pub base_env: Option<BTreeMap<String, String>>,
    /// The caller's working directory; `None` uses this process's.
    pub base_cwd: Option<PathBuf>,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// How long to keep reading after the main process exited while a
    /// grandchild still holds the pipes.
    pub drain: Duration,
    /// Make `sh` die (SIGKILL) when the thread that started it dies; for the
    /// daemon, so a crash does not leave commands running.
    pub die_with_parent: bool,
}

impl Default for Launch {
    fn default() -> Self {
        Launch {
            base_env: None,
            base_cwd: None,
            grace: Duration::from_secs(2),
            drain: Duration::from_millis(100),
            die_with_parent: false,
        }
    }
}

/// What a monitor's owner can ask of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// End the monitor for this reason (its final event says so).
    Stop(MonitorStopReason),
    /// Stop its processes but do not end it: no final event, so that the
    /// next owner can re-arm it.
    Suspend,
}

/// Everything a monitor task needs.
pub(crate) struct MonitorTask {
    pub spec: MonitorSpec,
    pub launch: Launch,
    pub rearm: bool,
    pub status: Arc<Mutex<MonitorInfo>>,
    pub stop_rx: watch::Receiver<Option<Control>>,
    pub sink: mpsc::Sender<JournalEntry>,
}

/// The parts every source shares.
pub(crate) struct Driver {
    id: String,
    session: String,
    machine: MonitorMachine,
    file: OutputFile,
    splitters: [LineSplitter; 2],
    sink: mpsc::Sender<JournalEntry>,
    status: Arc<Mutex<MonitorInfo>>,
    counters_sent: Instant,
}

fn idx(stream: Stream) -> usize {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
    }
}

impl Driver {
    /// Feeds a chunk of `stream`: file first, then the machine.
    fn feed(&mut self, now: Instant, stream: Stream, chunk: &[u8]) -> std::io::Result<Step> {
        let Driver {
            machine,
            file,
            splitters,
            ..
        } = self;
        let mut step = Step::default();
        let mut err = None;
        splitters[idx(stream)].push(chunk, &mut |piece| {
            Self::take(machine, file, now, stream, piece, &mut step, &mut err)
        });
        if let Some(e) = err {
            return Err(e);
        }
        file.flush()?;
        merge(&mut step, machine.drained(now));
        Ok(step)
    }

    /// The stream ended: its last line without newline is still a line.
    fn end_stream(&mut self, now: Instant, stream: Stream) -> std::io::Result<Step> {
        let Driver {
            machine,
            file,
            splitters,
            ..
        } = self;
        let mut step = Step::default();
        let mut err = None;
        splitters[idx(stream)].finish(&mut |piece| {
            Self::take(machine, file, now, stream, piece, &mut step, &mut err)
        });
        if let Some(e) = err {
            return Err(e);
        }
        file.flush()?;
        merge(&mut step, machine.drained(now));
        Ok(step)
    }

    fn take(
        machine: &mut MonitorMachine,
        file: &mut OutputFile,
        now: Instant,
        stream: Stream,
        piece: Piece<'_>,
        step: &mut Step,
        err: &mut Option<std::io::Error>,
    ) {
        if err.is_some() {
            return;
        }
        match file.write(stream, &piece) {
            Ok(Some(file_line)) => {
                if let Piece::Line { text, .. } = piece {
                    let s = machine.on_line(
                        now,
                        Line {
                            stream,
                            text,
                            file_line,
                        },
                    );
                    merge(step, s);
                }
            }
            Ok(None) => {}
            Err(e) => *err = Some(e),
        }
    }

    async fn emit(&mut self, emits: Vec<Emit>) {
        for e in emits {
            let pending = PendingEvent {
                session: self.session.clone(),
                monitor_id: self.id.clone(),
                ts: Utc::now(),
                text: e.text,
                body: e.body,
            };
            // The journal outlives every monitor; a closed channel means the
            // owner is gone and there is nobody left to tell.
            let _ = self.sink.send(JournalEntry::Event(pending)).await;
        }
        self.sync_counters(false).await;
    }

    async fn sync_counters(&mut self, force: bool) {
        let c = self.machine.counters();
        if let Ok(mut info) = self.status.lock() {
            info.events = c.events;
            info.lines = c.lines;
            info.suppressed_lines = c.suppressed_lines;
        }
        if force || self.counters_sent.elapsed() >= COUNTERS_EVERY {
            self.counters_sent = Instant::now();
            let _ = self
                .sink
                .send(JournalEntry::Counters {
                    monitor_id: self.id.clone(),
                    events: c.events,
                    lines: c.lines,
                    suppressed_lines: c.suppressed_lines,
                })
                .await;
        }
    }

    async fn finish(&mut self, end: SourceEnd) {
        let emits = self.machine.finish(Instant::now(), end);
        let reason = emits.last().and_then(|e| match &e.body {
            EventBody::MonitorStopped { reason, .. } => Some(reason.clone()),
            _ => None,
        });
        if let Ok(mut info) = self.status.lock() {
            info.state = MonitorState::Ended;
            info.stop_reason = reason;
            info.ended_at = Some(Utc::now());
        }
        self.emit(emits).await;
        self.sync_counters(true).await;
    }
}

fn merge(into: &mut Step, from: Step) {
    into.emits.extend(from.emits);
    if into.stop.is_none() {
        into.stop = from.stop;
    }
}

/// Runs a monitor to its end. Emits exactly one `started` (or `rearmed`) and
/// exactly one `stopped` or `failed` event.
pub(crate) async fn run(task: MonitorTask) {
    let MonitorTask {
        spec,
        launch,
        rearm,
        status,
        mut stop_rx,
        sink,
    } = task;
    let (id, session, output_path) = match status.lock() {
        Ok(i) => (i.id.clone(), i.session.clone(), i.output_path.clone()),
        Err(_) => return,
    };
    let now = Instant::now();
    let machine = match MonitorMachine::new(id.clone(), &spec, now) {
        Ok(m) => m,
        Err(_) => return, // validated before the task was spawned
    };
    let file = OutputFile::open(&output_path);
    let mut driver = match file {
        Ok(file) => Driver {
            id: id.clone(),
            session,
            machine,
            file,
            splitters: [LineSplitter::new(), LineSplitter::new()],
            sink,
            status,
            counters_sent: now,
        },
        Err(e) => {
            let text = format!(
                "{}: failed: cannot open output file {}: {e}",
                spec.description,
                output_path.display()
            );
            let failed = Emit {
                body: EventBody::MonitorFailed {
                    error: text.clone(),
                    last_lines: vec![],
                },
                text,
            };
            let started = machine.started(&spec.source.summary());
            if let Ok(mut info) = status.lock() {
                info.state = MonitorState::Ended;
                info.ended_at = Some(Utc::now());
            }
            let mut d = DriverLite { id, session, sink };
            d.emit(vec![started, failed]).await;
            return;
        }
    };
    let first = if rearm {
        Emit {
            body: EventBody::MonitorRearmed,
            text: format!(
                "rearmed: {} ({}) restarted after a daemon restart",
                spec.description,
                spec.source.summary()
            ),
        }
    } else {
        driver.machine.started(&spec.source.summary())
    };
    driver.emit(vec![first]).await;
    // A stop requested before the process even started.
    let early = stop_rx.borrow().clone();
    match early {
        Some(Control::Stop(reason)) => {
            driver.machine.request_stop(reason);
            driver.finish(SourceEnd::Exited(0)).await;
            return;
        }
        Some(Control::Suspend) => return,
        None => {}
    }
    match &spec.source {
        Source::Command { command } => {
            run_command(&mut driver, &spec, command, &launch, &mut stop_rx).await
        }
    }
}

/// Emits without a driver (when the output file could not be opened).
struct DriverLite {
    id: String,
    session: String,
    sink: mpsc::Sender<JournalEntry>,
}

impl DriverLite {
    async fn emit(&mut self, emits: Vec<Emit>) {
        for e in emits {
            let _ = self
                .sink
                .send(JournalEntry::Event(PendingEvent {
                    session: self.session.clone(),
                    monitor_id: self.id.clone(),
                    ts: Utc::now(),
                    text: e.text,
                    body: e.body,
                }))
                .await;
        }
    }
}

fn build_command(
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
    let cwd = match (&spec.cwd, &launch.base_cwd) {
        (Some(c), Some(base)) => Some(base.join(c)),
        (Some(c), None) => Some(c.clone()),
        (None, base) => base.clone(),
    };
    if let Some(cwd) = cwd {
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

async fn run_command(
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
                    Ok(n) => driver.feed(now, Stream::Stdout, &obuf[..n]),
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
                    Ok(n) => driver.feed(now, Stream::Stderr, &ebuf[..n]),
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
    process::reap_group_zombies(pid, None);
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

async fn read_opt<R: tokio::io::AsyncRead + Unpin>(
    r: &mut Option<R>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    match r {
        Some(r) => r.read(buf).await,
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
