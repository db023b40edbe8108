//! Running one monitor: set its source up, announce it (`started` or
//! `rearmed`), then one loop for every kind of source — its inputs, stop
//! requests and the machine's deadlines — until it ends with exactly one
//! `stopped` or `failed` event.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::watch;

use wakeful_core::journal::JournalEntry;
use wakeful_core::machine::{Emit, SourceEnd, Step};
use wakeful_core::{
    EventBody, MonitorInfo, MonitorMachine, MonitorSpec, MonitorState, Source, Stream,
};

use crate::feed::{stamp, Feed};
use crate::hub::Hub;
use crate::output_writer::OutputFile;
use crate::source::{resolve, Alarm, Control, Ended, HandedMonitor, Input, InputSource, Launch};
use crate::sources;

/// Everything a monitor task needs.
pub(crate) struct MonitorTask {
    /// Told once the source is set up and the first event is sent (or the
    /// monitor failed); dropping it says the same.
    pub ready: tokio::sync::oneshot::Sender<()>,
    pub output: Arc<crate::output_writer::OutputBudget>,
    pub terminals: crate::terminal::Terminals,
    pub spec: MonitorSpec,
    pub launch: Launch,
    pub rearm: bool,
    pub status: Arc<Mutex<MonitorInfo>>,
    pub ended: watch::Sender<bool>,
    pub stop_rx: watch::Receiver<Option<Control>>,
    pub hub: Hub,
    /// Go on with a monitor handed over by the program this process ran
    /// before (an upgrade): no `started` event, the same process.
    pub adopt: Option<HandedMonitor>,
    /// Where this monitor puts what the next program needs, when it is
    /// handed over ([`Control::HandOver`]).
    pub handed: Arc<Mutex<Vec<HandedMonitor>>>,
}

/// A source, set up and ready to be read.
enum Prepared {
    Command(Box<sources::command::CommandSource>),
    File(sources::file::Follower),
    Poll(Box<sources::poll::Poller>),
    Ws(Box<sources::ws::WsSource>),
    Terminal(crate::terminal::TerminalSource),
    Replay(Box<sources::replay::Replayer>),
    Timer(Box<sources::timer::TimerSource>),
    Pid(Box<sources::pid::PidSource>),
    Failed(String),
}

/// Runs a monitor to its end. Emits exactly one `started` (or `rearmed`) and
/// exactly one `stopped` or `failed` event.
pub(crate) async fn run(task: MonitorTask) {
    let MonitorTask {
        ready,
        output,
        terminals,
        spec,
        launch,
        rearm,
        status,
        ended,
        mut stop_rx,
        hub,
        adopt,
        handed,
    } = task;
    let (id, session, output_path, started_at) = match status.lock() {
        Ok(i) => (
            i.id.clone(),
            i.session.clone(),
            i.output_path.clone(),
            i.started_at,
        ),
        Err(_) => return,
    };
    let Ok(mut machine) = MonitorMachine::new(id.clone(), &spec, Instant::now()) else {
        return; // validated before the task was spawned
    };
    if let Some(a) = &adopt {
        let ran = (Utc::now() - started_at).to_std().unwrap_or_default();
        machine.resume(a.counters, ran);
    }
    let replayed = matches!(spec.source, Source::Replay { .. });
    let mut feed = match OutputFile::open(&output_path, &output) {
        Ok(file) => {
            let mut feed = Feed::new(id.clone(), session, machine, file, hub, status, ended);
            feed.replayed = replayed;
            feed
        }
        Err(e) => {
            let text = format!(
                "{}: failed: cannot open output file {}: {e}",
                spec.description,
                output_path.display()
            );
            let failed = Emit {
                wakes: true,
                body: EventBody::MonitorFailed {
                    error: text.clone(),
                    last_lines: vec![],
                    survivors: vec![],
                    unverified: None,
                },
                text,
            };
            let started = machine.started(&spec.source.summary());
            if let Ok(mut info) = status.lock() {
                info.state = MonitorState::Ended;
                info.stop_reason = failed.body.stop_reason();
                info.ended_at = Some(Utc::now());
            }
            ended.send_replace(true);
            let _ = hub
                .append(stamp(&session, &id, vec![started, failed], replayed))
                .await;
            return;
        }
    };
    // Set the source up before announcing it: a line written right after
    // the `started` event must be seen.
    let prepared = match adopt.as_ref() {
        Some(a) => adopt_source(&spec, &launch, &terminals, &feed, a).await,
        None => prepare(&spec, &launch, &terminals, &feed, rearm).await,
    };
    if let Some(a) = &adopt {
        tracing::info!("went on with monitor {} ({})", a.id, spec.description);
        let _ = ready.send(());
        match prepared {
            Prepared::Failed(e) => feed.finish(SourceEnd::Failed(e)).await,
            other => drive_prepared(&mut feed, &mut stop_rx, other, &handed).await,
        }
        return;
    }
    if let Prepared::Command(c) = &prepared {
        let _ = feed
            .hub
            .append(vec![JournalEntry::Spawned {
                monitor_id: feed.id.clone(),
                pid: c.pid(),
                start_ticks: c.start_ticks(),
            }])
            .await;
    }
    let first = if rearm {
        Emit {
            wakes: feed.machine.wakes(&EventBody::MonitorRearmed),
            body: EventBody::MonitorRearmed,
            text: format!(
                "rearmed: {} ({}) restarted after a daemon restart",
                spec.description,
                spec.source.summary()
            ),
        }
    } else if let Prepared::Replay(r) = &prepared {
        feed.machine.started(r.summary())
    } else {
        feed.machine.started(&spec.source.summary())
    };
    feed.emit(vec![first]).await;
    let _ = ready.send(());
    drive_prepared(&mut feed, &mut stop_rx, prepared, &handed).await;
}

async fn drive_prepared(
    feed: &mut Feed,
    stop_rx: &mut watch::Receiver<Option<Control>>,
    prepared: Prepared,
    handed: &Mutex<Vec<HandedMonitor>>,
) {
    match prepared {
        Prepared::Command(src) => drive(feed, stop_rx, *src, handed).await,
        Prepared::File(src) => drive(feed, stop_rx, src, handed).await,
        Prepared::Poll(src) => drive(feed, stop_rx, *src, handed).await,
        Prepared::Ws(src) => drive(feed, stop_rx, *src, handed).await,
        Prepared::Terminal(src) => drive(feed, stop_rx, src, handed).await,
        Prepared::Replay(src) => drive(feed, stop_rx, *src, handed).await,
        Prepared::Timer(src) => drive(feed, stop_rx, *src, handed).await,
        Prepared::Pid(src) => drive(feed, stop_rx, *src, handed).await,
        Prepared::Failed(e) => feed.finish(SourceEnd::Failed(e)).await,
    }
}

/// The source of a monitor handed over by the program before this one: a
/// command's own process and pipes; any other source made again from its
/// spec, as a re-arm would (a pid's identity is checked, not read again).
async fn adopt_source(
    spec: &MonitorSpec,
    launch: &Launch,
    terminals: &crate::terminal::Terminals,
    feed: &Feed,
    adopt: &HandedMonitor,
) -> Prepared {
    match (&spec.source, &adopt.process) {
        (Source::Command { .. }, Some(handed)) => {
            match sources::command::CommandSource::adopt(handed, launch, &feed.id) {
                Ok(src) => Prepared::Command(Box::new(src)),
                Err(e) => Prepared::Failed(format!(
                    "could not go on with the command handed over by the previous daemon: {e}"
                )),
            }
        }
        (Source::Command { .. }, None) => {
            Prepared::Failed("the previous daemon handed over no process for this command".into())
        }
        _ => prepare(spec, launch, terminals, feed, true).await,
    }
}

async fn prepare(
    spec: &MonitorSpec,
    launch: &Launch,
    terminals: &crate::terminal::Terminals,
    feed: &Feed,
    rearm: bool,
) -> Prepared {
    match &spec.source {
        Source::Command { command } => {
            match sources::command::CommandSource::spawn(
                spec,
                command,
                launch,
                &feed.id,
                &feed.session,
            ) {
                Ok(src) => Prepared::Command(Box::new(src)),
                Err(e) => Prepared::Failed(format!("could not start `sh -c`: {e}")),
            }
        }
        Source::File { path } => match sources::file::Follower::new(resolve(spec, launch, path)) {
            Ok(src) => Prepared::File(src),
            Err(e) => Prepared::Failed(e.to_string()),
        },
        Source::Poll { command, every_ms } => Prepared::Poll(Box::new(sources::poll::Poller::new(
            spec.clone(),
            command.clone(),
            Duration::from_millis(*every_ms),
            launch.clone(),
            feed.id.clone(),
            feed.session.clone(),
        ))),
        Source::Ws { url, protocols } => {
            match sources::ws::WsSource::connect(url, protocols, &launch.net).await {
                Ok(src) => Prepared::Ws(Box::new(src)),
                Err(e) => Prepared::Failed(e.to_string()),
            }
        }
        Source::Terminal { terminal_id } => match terminals.attach(terminal_id) {
            Ok(src) => Prepared::Terminal(src),
            Err(e) => Prepared::Failed(e.to_string()),
        },
        Source::Replay {
            file,
            monitor,
            speed,
        } => {
            let file = resolve(spec, launch, file);
            match sources::replay::Replayer::open(&file, monitor, speed.0).await {
                Ok(src) => Prepared::Replay(Box::new(src)),
                Err(e) => Prepared::Failed(e.to_string()),
            }
        }
        Source::Timer { due, cron } => {
            match sources::timer::TimerSource::new(*due, cron.as_deref()) {
                Ok(src) => Prepared::Timer(Box::new(src)),
                Err(e) => Prepared::Failed(e.to_string()),
            }
        }
        Source::Pid { .. } => match sources::pid::PidSource::watch(&spec.source, rearm).await {
            Ok(src) => Prepared::Pid(Box::new(src)),
            Err(e) => Prepared::Failed(e.to_string()),
        },
    }
}

/// The loop of every source: inputs, stop requests and the machine's
/// deadlines, until the source ends or a stop is decided (and, for a source
/// that ends after a stop, until it has).
async fn drive<S: InputSource>(
    feed: &mut Feed,
    stop_rx: &mut watch::Receiver<Option<Control>>,
    mut src: S,
    handed: &Mutex<Vec<HandedMonitor>>,
) {
    let mut ended: Option<Ended> = None;
    let mut suspended = false;
    let mut handing = false;
    let mut stopping = false;
    let mut failure: Option<String> = None;
    // When the journal should finish what this monitor's events began.
    let mut fold_at: Option<tokio::time::Instant> = None;
    // Timers kept across turns: one for the fold, one for the machine's
    // deadlines (batch windows, the rate gate, timeouts).
    let mut fold_alarm = Alarm::new();
    let mut tick_alarm = Alarm::new();
    // A stop requested before the source even started.
    let early = stop_rx.borrow_and_update().clone();
    let mut control = early;
    loop {
        if let Some(c) = control.take() {
            let reason = match c {
                Control::Stop(reason) => Some(reason),
                Control::Suspend => {
                    suspended = true;
                    Some(wakeful_core::MonitorStopReason::DaemonStopped)
                }
                // A monitor being stopped, or whose source ended, ends
                // here; any other goes on in the next program.
                Control::HandOver => {
                    if !stopping && ended.is_none() && feed.machine.stop_decided().is_none() {
                        handing = true;
                        break;
                    }
                    None
                }
            };
            if let Some(reason) = reason {
                feed.machine.request_stop(reason);
            }
        }
        let decided = feed.machine.stop_decided().is_some() || failure.is_some();
        if decided && !stopping {
            stopping = true;
            if !src.stop() {
                break;
            }
        }
        if ended.is_some() {
            break;
        }
        tick_alarm.set(feed.next_deadline().map(tokio::time::Instant::from_std));
        fold_alarm.set(fold_at);
        let mut step = Step::default();
        tokio::select! {
            _ = fold_alarm.ring(), if fold_alarm.is_set() => {
                fold_at = None;
                feed.hub.flush_in_background();
                continue;
            }
            changed = stop_rx.changed(), if !stopping => {
                control = if changed.is_ok() {
                    stop_rx.borrow().clone()
                } else {
                    Some(Control::Stop(wakeful_core::MonitorStopReason::SessionEnded))
                };
            }
            input = src.next() => {
                let now = Instant::now();
                let res = match input {
                    Input::Chunk(stream, bytes) => feed.feed(now, stream, bytes),
                    Input::Flush(stream) => feed.end_stream(now, stream),
                    Input::Nothing => Ok(Step::default()),
                    Input::End(e) => {
                        ended = Some(e);
                        Ok(Step::default())
                    }
                };
                match res {
                    Ok(s) => step = s,
                    Err(e) => {
                        failure = Some(format!("cannot write the output file: {e}"));
                    }
                }
            }
            _ = tick_alarm.ring(), if tick_alarm.is_set() => {
                step = feed.on_tick(Instant::now());
            }
        }
        let emitted = !step.emits.is_empty();
        let woken = feed.hub.followers_woken();
        feed.emit(step.emits).await;
        if emitted {
            // Readers' tasks this emit woke write first. What this task
            // does next — arming the fold's timer, polling its source and
            // deadlines again (a new timer for each) — can wake the
            // runtime's driver (an eventfd write) and, on two workers, the
            // other worker, which then competed with the reader for a
            // processor: a followed file's line took 1.5–1.65× `tail -F |
            // grep` that way, 1.1–1.3× with this yield (the history of
            // docs/BENCHMARKS.md).
            // Readers written inline have their line already; the yield
            // would only add work between their wake-up and this thread's
            // sleep.
            if feed.hub.followers_woken() != woken {
                tokio::task::yield_now().await;
            }
            if fold_at.is_none() {
                fold_at = feed
                    .hub
                    .claim_flush()
                    .map(|delay| tokio::time::Instant::now() + delay);
            }
        }
    }
    if handing {
        hand_over(feed, src, handed).await;
        if fold_at.is_some() || feed.hub.claim_flush().is_some() {
            feed.hub.flush();
        }
        return;
    }
    src.close().await;
    if !suspended {
        let now = Instant::now();
        for stream in [Stream::Stdout, Stream::Stderr] {
            if let Ok(step) = feed.end_stream(now, stream) {
                feed.emit(step.emits).await;
            }
        }
        // A decided stop (user, timeout, until…) wins over how the source ended.
        let Ended {
            end,
            survivors,
            unverified,
        } = ended.unwrap_or_else(|| SourceEnd::Exited(0).into());
        let end = match failure {
            Some(f) => SourceEnd::Failed(f),
            None => end,
        };
        feed.finish_with(end, survivors, unverified).await;
    }
    // A flush this monitor took on must not end with it; its last events
    // are in the tables when it is gone.
    if fold_at.is_some() || feed.hub.claim_flush().is_some() {
        feed.hub.flush();
    }
}

/// Hands the monitor to the program that replaces this one: what the
/// machine holds is emitted, an unfinished line ends here (the rest of it
/// is a line of its own in the next program), and the source's process,
/// if it has one, is left running with its pipes open: the source is
/// never dropped (its drop would stop the process) but forgotten, and the
/// program is replaced before anything else reads it.
async fn hand_over<S: InputSource>(
    feed: &mut Feed,
    mut src: S,
    handed: &Mutex<Vec<HandedMonitor>>,
) {
    let now = Instant::now();
    let mut emits = feed.machine.hand_over(now).emits;
    for stream in [Stream::Stdout, Stream::Stderr] {
        if let Ok(step) = feed.end_stream(now, stream) {
            emits.extend(step.emits);
        }
    }
    feed.emit_counted(emits).await;
    let process = src.hand_over();
    let entry = HandedMonitor {
        id: feed.id.clone(),
        started_at: feed.started_at(),
        counters: feed.machine.counters(),
        process: process.clone(),
    };
    if let Ok(mut h) = handed.lock() {
        h.push(entry);
    }
    if process.is_some() {
        std::mem::forget(src);
    } else {
        src.close().await;
    }
}
