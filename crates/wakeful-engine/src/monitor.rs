//! Running one monitor: the IO edge around [`MonitorMachine`].
//!
//! [`Driver`] owns what every source shares (the machine, the output file,
//! one line splitter per stream, the journal channel); [`run`] drives a
//! command source: `sh -c COMMAND` in its own process group, stdout and stderr
//! read concurrently, timers from the machine's deadlines, and the stop
//! sequence (SIGTERM to the group, grace, SIGKILL).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::{mpsc, watch};

use wakeful_core::lines::{LineSplitter, Piece};
use wakeful_core::machine::{Emit, SourceEnd, Step};
use wakeful_core::{
    EventBody, Line, MonitorInfo, MonitorMachine, MonitorSpec, MonitorState, MonitorStopReason,
    PendingEvent, Source, Stream,
};

use crate::net_policy::NetPolicy;
use crate::output::OutputFile;
use crate::sources;
use wakeful_core::journal::JournalEntry;

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
    /// Which non-public addresses network sources may reach.
    pub net: NetPolicy,
    /// Where commands get a cgroup of their own, if anywhere.
    pub cgroups: Option<crate::process::cgroup::CgroupRoot>,
}

impl Default for Launch {
    fn default() -> Self {
        Launch {
            base_env: None,
            base_cwd: None,
            grace: Duration::from_secs(2),
            drain: Duration::from_millis(100),
            die_with_parent: false,
            net: NetPolicy::default(),
            cgroups: None,
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
    /// Told once the source is set up and the first event is sent (or the
    /// monitor failed); dropping it says the same.
    pub ready: tokio::sync::oneshot::Sender<()>,
    pub terminals: crate::terminal::Terminals,
    pub spec: MonitorSpec,
    pub launch: Launch,
    pub rearm: bool,
    pub status: Arc<Mutex<MonitorInfo>>,
    pub stop_rx: watch::Receiver<Option<Control>>,
    pub sink: mpsc::Sender<JournalEntry>,
}

/// The parts every source shares.
pub(crate) struct Driver {
    pub(crate) id: String,
    pub(crate) session: String,
    pub(crate) machine: MonitorMachine,
    file: OutputFile,
    splitters: [LineSplitter; 2],
    pub(crate) sink: mpsc::Sender<JournalEntry>,
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
    ///
    /// During a stdout flood that the rate gate suppresses anyway (and no
    /// filter or `until` needs each line's text), the complete lines in the
    /// middle of the chunk are written to the file in one piece and counted
    /// in bulk; only the line the chunk completes, the unfinished line it
    /// ends with and the tail's last lines are looked at one by one.
    pub(crate) fn feed(
        &mut self,
        now: Instant,
        stream: Stream,
        chunk: &[u8],
    ) -> std::io::Result<Step> {
        if stream == Stream::Stdout && self.machine.can_absorb(now) {
            if let (Some(first), Some(last)) =
                (memchr::memchr(b'\n', chunk), memchr::memrchr(b'\n', chunk))
            {
                if first < last {
                    let mut step = self.feed_lines(now, stream, &chunk[..=first])?;
                    let body = &chunk[first + 1..=last];
                    if !self.file.mid_line()
                        && !self.splitters[idx(stream)].has_partial()
                        && self.machine.can_absorb(now)
                    {
                        let count = memchr::memchr_iter(b'\n', body).count() as u64;
                        let (from, to) = self.file.write_stdout_lines(body, count)?;
                        let tail = body[..body.len() - 1]
                            .rsplit(|b| *b == b'\n')
                            .take(wakeful_core::machine::TAIL_LINES)
                            .map(wakeful_core::lines::text_of)
                            .collect::<Vec<_>>()
                            .into_iter()
                            .rev()
                            .collect();
                        merge(&mut step, self.machine.absorb(now, count, from, to, tail));
                    } else {
                        merge(&mut step, self.feed_lines(now, stream, body)?);
                    }
                    merge(&mut step, self.feed_lines(now, stream, &chunk[last + 1..])?);
                    self.file.flush()?;
                    merge(&mut step, self.machine.drained(now));
                    return Ok(step);
                }
            }
        }
        let mut step = self.feed_lines(now, stream, chunk)?;
        self.file.flush()?;
        merge(&mut step, self.machine.drained(now));
        Ok(step)
    }

    /// Splits a chunk into lines, writes them, feeds them to the machine.
    fn feed_lines(&mut self, now: Instant, stream: Stream, chunk: &[u8]) -> std::io::Result<Step> {
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
        match err {
            Some(e) => Err(e),
            None => Ok(step),
        }
    }

    /// The stream ended: its last line without newline is still a line.
    pub(crate) fn end_stream(&mut self, now: Instant, stream: Stream) -> std::io::Result<Step> {
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

    pub(crate) async fn emit(&mut self, emits: Vec<Emit>) {
        // Listings agree with the events by the time anyone receives them.
        let c = self.machine.counters();
        if let Ok(mut info) = self.status.lock() {
            info.events = c.events;
            info.lines = c.lines;
            info.suppressed_lines = c.suppressed_lines;
        }
        send_events(&self.sink, &self.session, &self.id, emits).await;
        self.sync_counters(false).await;
    }

    async fn sync_counters(&mut self, force: bool) {
        let c = self.machine.counters();
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

    pub(crate) async fn finish(&mut self, end: SourceEnd) {
        self.finish_with(end, Vec::new()).await
    }

    /// Ends the monitor: its last lines, its final event (saying which
    /// processes survived the stop, if any did).
    pub(crate) async fn finish_with(&mut self, end: SourceEnd, survivors: Vec<i32>) {
        let emits = self.machine.finish_with(Instant::now(), end, survivors);
        if let Ok(mut info) = self.status.lock() {
            if let Some(last) = emits.last() {
                info.stop_reason = last.body.stop_reason();
                info.survivors = last.body.survivors().to_vec();
            }
            info.state = MonitorState::Ended;
            info.ended_at = Some(Utc::now());
        }
        self.emit(emits).await;
        self.sync_counters(true).await;
    }
}

pub(crate) fn merge(into: &mut Step, from: Step) {
    into.emits.extend(from.emits);
    if into.stop.is_none() {
        into.stop = from.stop;
    }
}

/// Runs a monitor to its end. Emits exactly one `started` (or `rearmed`) and
/// exactly one `stopped` or `failed` event.
pub(crate) async fn run(task: MonitorTask) {
    let MonitorTask {
        ready,
        terminals,
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
                    survivors: vec![],
                },
                text,
            };
            let started = machine.started(&spec.source.summary());
            if let Ok(mut info) = status.lock() {
                info.state = MonitorState::Ended;
                info.stop_reason = failed.body.stop_reason();
                info.ended_at = Some(Utc::now());
            }
            send_events(&sink, &session, &id, vec![started, failed]).await;
            return;
        }
    };
    // Set the source up before announcing it: a line written right after
    // the `started` event must be seen.
    let prepared = match &spec.source {
        Source::Command { command } => Prepared::Command(command.clone()),
        Source::File { path } => {
            match sources::file::Follower::new(resolve(&spec, &launch, path)) {
                Ok(src) => Prepared::File(src),
                Err(e) => Prepared::Failed(e),
            }
        }
        Source::Poll { command, every_ms } => Prepared::Poll(Box::new(sources::poll::Poller::new(
            spec.clone(),
            command.clone(),
            Duration::from_millis(*every_ms),
            launch.clone(),
            driver.id.clone(),
            driver.session.clone(),
        ))),
        Source::Ws { url, protocols } => {
            match sources::ws::WsSource::connect(url, protocols, &launch.net).await {
                Ok(src) => Prepared::Ws(Box::new(src)),
                Err(e) => Prepared::Failed(e),
            }
        }
        Source::Terminal { terminal_id } => match terminals.attach(terminal_id) {
            Ok(src) => Prepared::Terminal(src),
            Err(e) => Prepared::Failed(e),
        },
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
    let _ = ready.send(());
    // A stop requested before the source even started.
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
    match prepared {
        Prepared::Command(command) => {
            sources::command::run(&mut driver, &spec, &command, &launch, &mut stop_rx).await
        }
        Prepared::File(src) => drive(&mut driver, &mut stop_rx, src).await,
        Prepared::Poll(src) => drive(&mut driver, &mut stop_rx, *src).await,
        Prepared::Ws(src) => drive(&mut driver, &mut stop_rx, *src).await,
        Prepared::Terminal(src) => drive(&mut driver, &mut stop_rx, src).await,
        Prepared::Failed(e) => driver.finish(SourceEnd::Failed(e)).await,
    }
}

/// A source, set up and ready to be read.
enum Prepared {
    Command(String),
    File(sources::file::Follower),
    Poll(Box<sources::poll::Poller>),
    Ws(Box<sources::ws::WsSource>),
    Terminal(crate::terminal::TerminalSource),
    Failed(String),
}

/// Sends events to the journal, stamped with session, monitor and time.
async fn send_events(sink: &mpsc::Sender<JournalEntry>, session: &str, id: &str, emits: Vec<Emit>) {
    for e in emits {
        let pending = PendingEvent {
            session: session.to_string(),
            monitor_id: id.to_string(),
            ts: Utc::now(),
            text: e.text,
            body: e.body,
        };
        // The journal outlives every monitor; a closed channel means the
        // owner is gone and there is nobody left to tell.
        let _ = sink.send(JournalEntry::Event(pending)).await;
    }
}

/// Sleeps until `deadline`, or forever without one.
pub(crate) async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// The working directory a monitor's source is resolved against.
pub(crate) fn monitor_cwd(spec: &MonitorSpec, launch: &Launch) -> Option<PathBuf> {
    match (&spec.cwd, &launch.base_cwd) {
        (Some(c), Some(base)) => Some(base.join(c)),
        (Some(c), None) => Some(c.clone()),
        (None, base) => base.clone(),
    }
}

fn resolve(spec: &MonitorSpec, launch: &Launch, path: &std::path::Path) -> PathBuf {
    match monitor_cwd(spec, launch) {
        Some(cwd) if path.is_relative() => cwd.join(path),
        _ => path.to_path_buf(),
    }
}

/// What a non-process source produces.
pub(crate) enum Input {
    /// Bytes of a stream.
    Chunk(Stream, Vec<u8>),
    /// A record of the stream is complete: its last line counts even without
    /// a newline (a poll run's output).
    Flush(Stream),
    /// The source ended by itself.
    End(SourceEnd),
}

/// A source read by [`drive`]. `next` must be cancel-safe: it is dropped
/// when a stop or a timer comes first.
pub(crate) trait InputSource {
    /// The next input.
    async fn next(&mut self) -> Input;
    /// The monitor is ending: release what the source holds.
    async fn close(&mut self) {}
}

/// The loop shared by every source but commands: inputs, stop requests and
/// the machine's deadlines, until the source ends or a stop is decided.
pub(crate) async fn drive<S: InputSource>(
    driver: &mut Driver,
    stop_rx: &mut watch::Receiver<Option<Control>>,
    mut src: S,
) {
    let mut end = None;
    let mut suspended = false;
    loop {
        let deadline = driver
            .machine
            .next_deadline()
            .map(tokio::time::Instant::from_std);
        let mut step = Step::default();
        let mut failure = None;
        tokio::select! {
            changed = stop_rx.changed() => {
                let control = if changed.is_ok() {
                    stop_rx.borrow().clone()
                } else {
                    Some(Control::Stop(MonitorStopReason::SessionEnded))
                };
                match control {
                    Some(Control::Stop(reason)) => driver.machine.request_stop(reason),
                    Some(Control::Suspend) => {
                        suspended = true;
                        driver.machine.request_stop(MonitorStopReason::DaemonStopped);
                    }
                    None => {}
                }
            }
            input = src.next() => {
                let now = Instant::now();
                let res = match input {
                    Input::Chunk(stream, bytes) => driver.feed(now, stream, &bytes),
                    Input::Flush(stream) => driver.end_stream(now, stream),
                    Input::End(e) => {
                        end = Some(e);
                        Ok(Step::default())
                    }
                };
                match res {
                    Ok(s) => step = s,
                    Err(e) => failure = Some(format!("cannot write the output file: {e}")),
                }
            }
            _ = sleep_until_opt(deadline), if deadline.is_some() => {
                step = driver.machine.on_tick(Instant::now());
            }
        }
        driver.emit(step.emits).await;
        if let Some(f) = failure {
            end = Some(SourceEnd::Failed(f));
        }
        if end.is_some() || driver.machine.stop_decided().is_some() {
            break;
        }
    }
    src.close().await;
    if suspended {
        return;
    }
    let now = Instant::now();
    for stream in [Stream::Stdout, Stream::Stderr] {
        if let Ok(step) = driver.end_stream(now, stream) {
            driver.emit(step.emits).await;
        }
    }
    // A decided stop (user, timeout, until…) wins over how the source ended.
    let end = end.unwrap_or(SourceEnd::Exited(0));
    driver.finish(end).await;
}
