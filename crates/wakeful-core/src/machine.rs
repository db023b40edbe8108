//! One monitor's event logic as a pure state machine.
//!
//! [`MonitorMachine`] takes the lines a source produced and the passing of
//! time, and decides which events to emit and when the monitor must stop. It
//! combines the `filter`, the `until` modes, the `stderr` routing, the
//! [`Batcher`], the [`RateGate`], `max_events`, `timeout_ms`,
//! `idle_timeout_ms` and the tail of the last 20 lines. The IO edge (a
//! process supervisor) feeds it and executes its decisions; it never sleeps or
//! reads a clock here.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use regex::Regex;

use crate::batch::Batcher;
use crate::event::{EventBody, MonitorStopReason};
use crate::lines::{Line, Stream};
use crate::params::{MonitorSpec, ParamError, StderrMode, Until, WakeOn};
use crate::rate::{Admit, RateGate, Suppressed};

/// How many lines the tail keeps for endings that report them.
pub const TAIL_LINES: usize = 20;
/// Longest tail line, in bytes, before it is cut.
pub const TAIL_LINE_BYTES: usize = 1_000;
/// The sentence agents already know from Claude Code's Monitor tool.
pub const TIMEOUT_TEXT: &str = "[Monitor timed out — re-arm if needed.]";

/// An event body with its text, ready to be stamped with session, id and time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emit {
    /// The typed content.
    pub body: EventBody,
    /// What an agent reads.
    pub text: String,
    /// Whether it wakes the agent (the monitor's `wake_on`).
    pub wakes: bool,
}

/// What a call into the machine produced.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Events to append, in order.
    pub emits: Vec<Emit>,
    /// Set once, when the machine decides the monitor must stop.
    pub stop: Option<MonitorStopReason>,
}

/// Counters a listing shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    /// Lines read from the source (every stream).
    pub lines: u64,
    /// `lines` events delivered.
    pub events: u64,
    /// Lines delivered in `lines` events.
    pub delivered_lines: u64,
    /// Lines counted by `suppressed` reports.
    pub suppressed_lines: u64,
}

/// How the source ended, as the IO edge observed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceEnd {
    /// The process exited with a code.
    Exited(i32),
    /// The process died of a signal.
    Signaled(i32),
    /// A non-process source ended for this reason (e.g. `ws_closed`).
    Ended(MonitorStopReason),
    /// The source could not run or broke; the monitor `failed`.
    Failed(String),
}

/// What a final event says when the stop could not look for every process
/// of the command ([`crate::event::Unverified`]).
pub fn unverified_text(u: &crate::event::Unverified) -> String {
    let list: Vec<String> = u.seen.iter().map(i32::to_string).collect();
    format!(
        "[the {} platform backend cannot find a process of this monitor that left its process group after its parent exited (setsid, a double fork): the stop found and ended {} (pid{} {}); others may survive]",
        u.backend,
        if u.seen.len() == 1 { "1 process".to_string() } else { format!("{} processes", u.seen.len()) },
        if u.seen.len() == 1 { "" } else { "s" },
        list.join(", "),
    )
}

/// What a final event says about processes that outlived the stop.
pub fn survivors_text(pids: &[i32]) -> String {
    let list: Vec<String> = pids.iter().map(i32::to_string).collect();
    format!(
        "[{} process{} of this monitor survived SIGKILL (pid{} {}): they could not be killed; check them with `ps -o pid,stat,cmd -p {}`]",
        pids.len(),
        if pids.len() == 1 { "" } else { "es" },
        if pids.len() == 1 { "" } else { "s" },
        list.join(", "),
        list.join(",")
    )
}

/// Whether an event with `body` wakes under `rule` (`matching`: the
/// compiled regex of a `match:` rule): what a monitor's `wake_on`
/// decides, and what an MCP Events subscription's `wake_on` argument
/// asks for.
pub fn wakes_under(rule: &WakeOn, matching: Option<&Regex>, body: &EventBody) -> bool {
    let failure = match body {
        EventBody::MonitorFailed { .. } | EventBody::MonitorSilent { .. } => true,
        EventBody::OutputDropped { reason, .. } => *reason == crate::outlog::DropReason::DiskLow,
        EventBody::MonitorStopped { reason, .. } => is_failure(reason),
        _ => false,
    };
    match rule {
        WakeOn::Any => true,
        WakeOn::Exit => matches!(
            body,
            EventBody::MonitorStopped { .. } | EventBody::MonitorFailed { .. }
        ),
        WakeOn::Fail => failure,
        WakeOn::Match(_) => {
            failure
                || match body {
                    EventBody::MonitorEvent { lines, .. } => {
                        matching.is_some_and(|re| lines.iter().any(|l| re.is_match(l)))
                    }
                    _ => false,
                }
        }
    }
}

/// Whether a monitor ending for `reason` is a failure for `wake_on: fail`.
fn is_failure(reason: &MonitorStopReason) -> bool {
    match reason {
        MonitorStopReason::WsClosed { code } => !matches!(code, 1000 | 1001),
        MonitorStopReason::Timeout
        | MonitorStopReason::IdleTimeout
        | MonitorStopReason::WsFrameTooLarge => true,
        // A watched process: a failure unless it is known to have exited
        // with 0 (an unknown status may well be one).
        MonitorStopReason::Exited(e) => e.code != Some(0),
        r => r.is_abnormal(),
    }
}

/// `1500 ms` as `1.5 s`, `120000 ms` as `2 min`.
fn human_ms(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 120_000 {
        let s = ms as f64 / 1000.0;
        if ms.is_multiple_of(1000) {
            format!("{} s", ms / 1000)
        } else {
            format!("{s:.1} s")
        }
    } else {
        format!("{} min", ms / 60_000)
    }
}

/// The per-monitor state machine; see the module docs.
#[derive(Debug)]
pub struct MonitorMachine {
    monitor_id: String,
    description: String,
    filter: Option<Regex>,
    until: Option<Until>,
    until_match: Option<Regex>,
    stderr: StderrMode,
    batcher: Batcher,
    gate: RateGate,
    tail: VecDeque<String>,
    max_events: Option<u64>,
    timeout_at: Option<Instant>,
    idle: Option<Duration>,
    last_activity: Instant,
    after_at: Option<Instant>,
    stop: Option<MonitorStopReason>,
    counters: Counters,
    wake_on: WakeOn,
    /// A timer's `started` and `rearmed` do not wake: only its fire does.
    quiet_start: bool,
    wake_match: Option<Regex>,
    expect_within: Option<Duration>,
    /// A `silent` event was emitted and no output came since.
    silent: bool,
}

impl MonitorMachine {
    /// A machine for `spec`, started at `now`.
    pub fn new(
        monitor_id: impl Into<String>,
        spec: &MonitorSpec,
        now: Instant,
    ) -> Result<Self, ParamError> {
        let compiled = spec.validate()?;
        let after_at = match spec.until {
            Some(Until::After(ms)) => Some(now + Duration::from_millis(ms)),
            _ => None,
        };
        Ok(MonitorMachine {
            monitor_id: monitor_id.into(),
            description: spec.description.clone(),
            filter: compiled.filter,
            until: spec.until.clone(),
            until_match: compiled.until_match,
            stderr: spec.stderr,
            batcher: Batcher::new(spec.effective_batch()),
            gate: RateGate::new(now),
            tail: VecDeque::with_capacity(TAIL_LINES),
            max_events: spec.max_events,
            timeout_at: spec.effective_timeout().map(|t| now + t),
            idle: spec.idle_timeout_ms.map(Duration::from_millis),
            last_activity: now,
            after_at,
            stop: None,
            counters: Counters::default(),
            wake_on: spec.wake_on.clone(),
            quiet_start: spec.source.is_durable(),
            wake_match: compiled.wake_match,
            expect_within: spec.expect_within_ms.map(Duration::from_millis),
            silent: false,
        })
    }

    /// Goes on with a monitor that already ran for `ran` under the
    /// program this one replaced (an upgrade): its counters go on from
    /// `counters`, and its `timeout` and `until after:` count from its real
    /// start. Call it right after [`MonitorMachine::new`].
    pub fn resume(&mut self, counters: Counters, ran: Duration) {
        self.counters = counters;
        let earlier = |t: Instant| t.checked_sub(ran).unwrap_or(t);
        self.timeout_at = self.timeout_at.map(earlier);
        self.after_at = self.after_at.map(earlier);
    }

    /// The monitor goes on in another program (an upgrade): what is held
    /// (a batch, a suppressed range) is emitted now, so that nothing is
    /// left behind in this one.
    pub fn hand_over(&mut self, now: Instant) -> Step {
        let mut step = Step::default();
        let mut out = Vec::new();
        self.batcher.flush(&mut out);
        self.deliver(now, out, &mut step);
        if let Some(r) = self.gate.finish(now) {
            step.emits.push(self.suppressed(r));
        }
        self.mark(step)
    }

    /// The counters so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The stop decided so far, if any.
    pub fn stop_decided(&self) -> Option<&MonitorStopReason> {
        self.stop.as_ref()
    }

    /// The `started` event.
    pub fn started(&self, source_summary: &str) -> Emit {
        let redundant = source_summary
            .split_once(": ")
            .is_some_and(|(_, what)| what == self.description);
        let text = if redundant {
            format!("started: {source_summary}")
        } else {
            format!("started: {} ({source_summary})", self.description)
        };
        let body = EventBody::MonitorStarted;
        Emit {
            wakes: self.wakes(&body),
            body,
            text,
        }
    }

    /// Whether an event with `body` wakes the agent under this monitor's
    /// `wake_on` (see [`WakeOn`]).
    pub fn wakes(&self, body: &EventBody) -> bool {
        if self.quiet_start && matches!(body, EventBody::MonitorStarted | EventBody::MonitorRearmed)
        {
            return false;
        }
        wakes_under(&self.wake_on, self.wake_match.as_ref(), body)
    }

    /// Sets `wakes` of each emit.
    fn mark(&self, mut step: Step) -> Step {
        for e in &mut step.emits {
            e.wakes = self.wakes(&e.body);
        }
        step
    }

    /// Output came: after a `silent` event, a `resumed` one.
    fn output(&mut self, now: Instant, step: &mut Step) {
        if self.silent && self.stop.is_none() {
            self.silent = false;
            let quiet = now.saturating_duration_since(self.last_activity);
            let quiet_ms = quiet.as_millis() as u64;
            step.emits.push(Emit {
                wakes: true,
                text: format!(
                    "{}: output again after {} of silence",
                    self.description,
                    human_ms(quiet_ms)
                ),
                body: EventBody::MonitorResumed { quiet_ms },
            });
        }
        self.last_activity = now;
    }

    /// Asks the monitor to stop for `reason` (user stop, session end, daemon
    /// stop). The first decision wins.
    pub fn request_stop(&mut self, reason: MonitorStopReason) {
        if self.stop.is_none() {
            self.stop = Some(reason);
        }
    }

    /// One complete line from the source.
    pub fn on_line(&mut self, now: Instant, line: Line) -> Step {
        let step = self.line(now, line);
        self.mark(step)
    }

    fn line(&mut self, now: Instant, line: Line) -> Step {
        self.counters.lines += 1;
        let mut step = Step::default();
        self.output(now, &mut step);
        self.push_tail(&line);
        if self.stop.is_some() {
            return step;
        }
        if line.stream == Stream::Stderr && self.stderr == StderrMode::File {
            return step;
        }
        match &self.until {
            Some(Until::Exit) | Some(Until::After(_)) => return step,
            Some(Until::Match(_)) => {
                let hit = self
                    .until_match
                    .as_ref()
                    .is_some_and(|re| re.is_match(&line.text));
                if hit {
                    // The matching line is always delivered, whatever the rate.
                    self.counters.events += 1;
                    self.counters.delivered_lines += 1;
                    step.emits.push(Emit {
                        wakes: true,
                        text: line.text.clone(),
                        body: EventBody::MonitorEvent {
                            lines: vec![line.text],
                            from_line: line.file_line,
                            to_line: line.file_line,
                        },
                    });
                    self.decide(&mut step, MonitorStopReason::Until);
                }
                return step;
            }
            None => {}
        }
        if let Some(f) = &self.filter {
            if !f.is_match(&line.text) {
                return step;
            }
        }
        let mut out = Vec::new();
        self.batcher.push(line, &mut out);
        self.deliver(now, out, &mut step);
        step
    }

    /// Whether stdout lines may be counted in bulk now instead of one by one:
    /// no filter or `until` needs their text, and the rate gate would
    /// suppress them anyway (a flood). See [`MonitorMachine::absorb`].
    pub fn can_absorb(&mut self, now: Instant) -> bool {
        self.stop.is_none()
            && self.until.is_none()
            && self.filter.is_none()
            && self.gate.would_suppress(now)
    }

    /// Counts `count` complete stdout lines, output-file lines
    /// `from_line..=to_line`, as suppressed, after whatever the batcher holds.
    /// `last` are the texts of the last of them (up to [`TAIL_LINES`]) for
    /// the tail. Call only right after [`MonitorMachine::can_absorb`] said yes.
    pub fn absorb(
        &mut self,
        now: Instant,
        count: u64,
        from_line: u64,
        to_line: u64,
        last: Vec<String>,
    ) -> Step {
        let step = self.absorb_inner(now, count, from_line, to_line, last);
        self.mark(step)
    }

    fn absorb_inner(
        &mut self,
        now: Instant,
        count: u64,
        from_line: u64,
        to_line: u64,
        last: Vec<String>,
    ) -> Step {
        self.counters.lines += count;
        let mut step = Step::default();
        self.output(now, &mut step);
        for text in last {
            self.push_tail(&Line {
                stream: Stream::Stdout,
                text,
                file_line: 0,
            });
        }
        let mut held = Vec::new();
        self.batcher.take_pending(&mut held);
        self.deliver(now, held, &mut step);
        match self.gate.admit(now, count, from_line, to_line) {
            Admit::Suppress(report) => {
                if let Some(r) = report {
                    step.emits.push(self.suppressed(r));
                }
            }
            // Cannot happen right after `can_absorb`; count them anyway.
            Admit::Deliver(report) => {
                if let Some(r) = report {
                    step.emits.push(self.suppressed(r));
                }
                step.emits.push(self.suppressed(crate::rate::Suppressed {
                    count,
                    from_line,
                    to_line,
                }));
            }
        }
        step
    }

    /// The source has nothing more readable right now (leading edge).
    pub fn drained(&mut self, now: Instant) -> Step {
        let mut step = Step::default();
        let mut out = Vec::new();
        self.batcher.drained(now, &mut out);
        self.deliver(now, out, &mut step);
        self.mark(step)
    }

    /// The earliest instant at which [`MonitorMachine::on_tick`] has work.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.stop.is_some() {
            return None;
        }
        [
            self.batcher.next_deadline(),
            self.gate.next_deadline(),
            self.timeout_at,
            self.idle.map(|d| self.last_activity + d),
            self.after_at,
            self.expect_within
                .filter(|_| !self.silent)
                .map(|d| self.last_activity + d),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Time has passed: close batch windows, emit held reports, decide
    /// timeouts.
    pub fn on_tick(&mut self, now: Instant) -> Step {
        let mut step = Step::default();
        if self.stop.is_some() {
            return step;
        }
        let mut out = Vec::new();
        self.batcher.on_deadline(now, &mut out);
        self.deliver(now, out, &mut step);
        if self.gate.next_deadline().is_some_and(|d| d <= now) {
            if let Some(r) = self.gate.on_deadline(now) {
                step.emits.push(self.suppressed(r));
            }
        }
        if self.timeout_at.is_some_and(|t| now >= t) {
            self.decide(&mut step, MonitorStopReason::Timeout);
        } else if self.after_at.is_some_and(|t| now >= t) {
            self.decide(&mut step, MonitorStopReason::Until);
        } else if self.idle.is_some_and(|d| now >= self.last_activity + d) {
            self.decide(&mut step, MonitorStopReason::IdleTimeout);
        }
        if let Some(expect) = self.expect_within {
            if self.stop.is_none() && !self.silent && now >= self.last_activity + expect {
                self.silent = true;
                let quiet_ms = now
                    .saturating_duration_since(self.last_activity)
                    .as_millis() as u64;
                step.emits.push(Emit {
                    wakes: true,
                    text: format!(
                        "{}: no output for {} (expected within {}); it keeps running",
                        self.description,
                        human_ms(quiet_ms),
                        human_ms(expect.as_millis() as u64)
                    ),
                    body: EventBody::MonitorSilent { quiet_ms },
                });
            }
        }
        self.mark(step)
    }

    /// The source ended (after any stop decision was carried out): flush what
    /// is held and produce the single `stopped` or `failed` event.
    pub fn finish(&mut self, now: Instant, end: SourceEnd) -> Vec<Emit> {
        self.finish_with(now, end, Vec::new(), None)
    }

    /// Like [`MonitorMachine::finish`], for a source whose stop left
    /// `survivors`: processes still alive after SIGKILL. The final event
    /// says so (how many, which pids) instead of claiming a clean stop; so
    /// does it when the stop could not look for every process
    /// (`unverified`: the processes it found).
    pub fn finish_with(
        &mut self,
        now: Instant,
        end: SourceEnd,
        survivors: Vec<i32>,
        unverified: Option<crate::event::Unverified>,
    ) -> Vec<Emit> {
        let mut step = Step::default();
        if self.stop.is_none() {
            let mut out = Vec::new();
            self.batcher.flush(&mut out);
            self.deliver(now, out, &mut step);
        }
        if let Some(r) = self.gate.finish(now) {
            step.emits.push(self.suppressed(r));
        }
        let last: Vec<String> = self.tail.iter().cloned().collect();
        let decided = self.stop.clone();
        let mut final_emit = match (decided, end) {
            (None, SourceEnd::Failed(error)) | (Some(_), SourceEnd::Failed(error)) => Emit {
                wakes: true,
                text: with_lines(format!("{}: failed: {error}", self.description), &last),
                body: EventBody::MonitorFailed {
                    error,
                    last_lines: last,
                    survivors: Vec::new(),
                    unverified: None,
                },
            },
            (Some(reason), _) => self.stopped(reason, last),
            (None, SourceEnd::Exited(code)) => {
                self.stopped(MonitorStopReason::ExitCode { code }, last)
            }
            (None, SourceEnd::Signaled(signal)) => {
                self.stopped(MonitorStopReason::Signal { signal }, last)
            }
            (None, SourceEnd::Ended(reason)) => self.stopped(reason, last),
        };
        if !survivors.is_empty() {
            final_emit.text = format!("{}\n{}", final_emit.text, survivors_text(&survivors));
            if let EventBody::MonitorStopped { survivors: s, .. }
            | EventBody::MonitorFailed { survivors: s, .. } = &mut final_emit.body
            {
                *s = survivors;
            }
        }
        if let Some(u) = unverified {
            final_emit.text = format!("{}\n{}", final_emit.text, unverified_text(&u));
            if let EventBody::MonitorStopped { unverified: v, .. }
            | EventBody::MonitorFailed { unverified: v, .. } = &mut final_emit.body
            {
                *v = Some(Box::new(u));
            }
        }
        step.emits.push(final_emit);
        self.mark(step).emits
    }

    fn stopped(&self, reason: MonitorStopReason, last: Vec<String>) -> Emit {
        let with_tail =
            reason.is_abnormal() || matches!(self.until, Some(Until::Exit) | Some(Until::After(_)));
        let last_lines = if with_tail { last } else { Vec::new() };
        let head = match &reason {
            MonitorStopReason::Timeout => format!("{TIMEOUT_TEXT} {}", self.description),
            MonitorStopReason::Until => match &self.until {
                Some(Until::Match(re)) => {
                    format!("{}: stopped: a line matched `{re}`", self.description)
                }
                Some(Until::After(ms)) => {
                    format!(
                        "{}: stopped after {ms} ms (until after:{ms})",
                        self.description
                    )
                }
                _ => format!("{}: {reason}", self.description),
            },
            _ => format!("{}: {reason}", self.description),
        };
        Emit {
            wakes: true,
            text: with_lines(head, &last_lines),
            body: EventBody::MonitorStopped {
                reason,
                last_lines,
                survivors: Vec::new(),
                unverified: None,
            },
        }
    }

    /// The `output_dropped` event for a range the output file did not
    /// keep; `detail` (e.g. ` (3 MiB free, 16 MiB kept free)`) follows the
    /// cause.
    pub fn output_dropped(&self, d: &crate::outlog::Dropped, detail: &str) -> Emit {
        use crate::outlog::DropReason;
        let size = crate::storage::ByteSize(d.bytes);
        let lines = if d.count == 1 { "line" } else { "lines" };
        let span = d.to_line - d.from_line + 1;
        let range = if span == d.count {
            format!("output lines {}–{}", d.from_line, d.to_line)
        } else {
            format!(
                "{} of output lines {}–{} (`wakeful output` marks each range)",
                d.count, d.from_line, d.to_line
            )
        };
        let text = match d.reason {
            DropReason::DiskLow => format!(
                "{}: {} output {lines} ({size}) not written to the output file: the disk is low on space{detail}; {range} are missing from `wakeful output {}` (the events still have them)",
                self.description, d.count, self.monitor_id
            ),
            DropReason::Cap | DropReason::Pruned => format!(
                "{}: the output file is over its cap{detail}: {} {lines} ({size}), output lines {}–{}, were dropped from it; its first lines and its newest are kept, and `wakeful output {}` marks the gap",
                self.description, d.count, d.from_line, d.to_line, self.monitor_id
            ),
        };
        let body = EventBody::OutputDropped {
            reason: d.reason,
            count: d.count,
            from_line: d.from_line,
            to_line: d.to_line,
            bytes: d.bytes,
        };
        Emit {
            wakes: self.wakes(&body),
            body,
            text,
        }
    }

    fn suppressed(&mut self, r: Suppressed) -> Emit {
        self.counters.suppressed_lines += r.count;
        Emit {
            wakes: true,
            text: format!(
                "[{} lines suppressed by the rate limit (output lines {}–{}); read them with: wakeful output {} --from-line {} --to-line {}]",
                r.count, r.from_line, r.to_line, self.monitor_id, r.from_line, r.to_line
            ),
            body: EventBody::MonitorSuppressed {
                count: r.count,
                from_line: r.from_line,
                to_line: r.to_line,
            },
        }
    }

    fn deliver(&mut self, now: Instant, batches: Vec<Vec<Line>>, step: &mut Step) {
        for batch in batches {
            if self.stop.is_some() {
                return;
            }
            let (Some(first), Some(last)) = (batch.first(), batch.last()) else {
                continue;
            };
            let (from, to) = (first.file_line, last.file_line);
            let n = batch.len() as u64;
            match self.gate.admit(now, n, from, to) {
                Admit::Deliver(report) => {
                    if let Some(r) = report {
                        step.emits.push(self.suppressed(r));
                    }
                    self.counters.events += 1;
                    self.counters.delivered_lines += n;
                    let lines: Vec<String> = batch.into_iter().map(|l| l.text).collect();
                    step.emits.push(Emit {
                        wakes: true,
                        text: lines.join("\n"),
                        body: EventBody::MonitorEvent {
                            lines,
                            from_line: from,
                            to_line: to,
                        },
                    });
                    if self.max_events.is_some_and(|m| self.counters.events >= m) {
                        self.decide(step, MonitorStopReason::MaxEvents);
                    }
                }
                Admit::Suppress(report) => {
                    if let Some(r) = report {
                        step.emits.push(self.suppressed(r));
                    }
                }
            }
        }
    }

    fn decide(&mut self, step: &mut Step, reason: MonitorStopReason) {
        if self.stop.is_none() {
            self.stop = Some(reason.clone());
            step.stop = Some(reason);
        }
    }

    fn push_tail(&mut self, line: &Line) {
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        let prefix = if line.stream == Stream::Stderr {
            "[stderr] "
        } else {
            ""
        };
        let mut text = format!("{prefix}{}", line.text);
        if text.len() > TAIL_LINE_BYTES {
            let mut cut = TAIL_LINE_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        self.tail.push_back(text);
    }
}

fn with_lines(head: String, lines: &[String]) -> String {
    if lines.is_empty() {
        head
    } else {
        format!("{head}\nlast lines:\n{}", lines.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;

    const MS: Duration = Duration::from_millis(1);

    fn line(n: u64, text: &str) -> Line {
        Line {
            stream: Stream::Stdout,
            text: text.into(),
            file_line: n,
        }
    }

    fn kinds(emits: &[Emit]) -> Vec<EventKind> {
        emits.iter().map(|e| e.body.kind()).collect()
    }

    fn machine(spec: &MonitorSpec, t0: Instant) -> MonitorMachine {
        MonitorMachine::new("mon-1", spec, t0).unwrap()
    }

    #[test]
    fn line_then_exit_zero() {
        let t0 = Instant::now();
        let mut m = machine(&MonitorSpec::command("x", "d"), t0);
        assert!(m.on_line(t0, line(1, "abc")).emits.is_empty());
        let s = m.drained(t0);
        assert_eq!(s.emits[0].text, "abc");
        let end = m.finish(t0, SourceEnd::Exited(0));
        assert_eq!(kinds(&end), [EventKind::Stopped]);
        assert_eq!(end[0].text, "d: exited with code 0");
    }

    #[test]
    fn a_hand_over_emits_what_is_held_and_the_next_machine_goes_on_from_it() {
        let t0 = Instant::now();
        let mut spec = MonitorSpec::command("x", "d");
        spec.timeout_ms = Some(10_000);
        let mut m = machine(&spec, t0);
        let mut s = m.on_line(t0, line(1, "one"));
        s.emits.extend(m.drained(t0).emits);
        assert_eq!(kinds(&s.emits), [EventKind::Lines], "leading edge");
        let t1 = t0 + 10 * MS;
        assert!(m.on_line(t1, line(2, "two")).emits.is_empty());
        assert!(m.drained(t1).emits.is_empty(), "held in the batch window");
        let handed = m.hand_over(t1);
        assert_eq!(kinds(&handed.emits), [EventKind::Lines]);
        assert_eq!(handed.emits[0].text, "two");
        assert!(m.hand_over(t1).emits.is_empty(), "nothing is handed twice");
        let counters = m.counters();
        assert_eq!((counters.lines, counters.events), (2, 2));

        // The next program's machine, 4 s into the monitor's life.
        let t4 = t0 + Duration::from_secs(4);
        let mut next = machine(&spec, t4);
        next.resume(counters, Duration::from_secs(4));
        assert_eq!(next.counters(), counters);
        assert_eq!(
            next.next_deadline(),
            Some(t0 + Duration::from_secs(10)),
            "the timeout counts from the real start"
        );
        let mut s = next.on_line(t4, line(3, "three"));
        s.emits.extend(next.drained(t4).emits);
        assert_eq!(s.emits[0].text, "three");
        assert_eq!(next.counters().lines, 3);
    }

    #[test]
    fn silence_is_an_event_once_per_quiet_period() {
        let t0 = Instant::now();
        let mut spec = MonitorSpec::command("x", "tests");
        spec.expect_within_ms = Some(2_000);
        spec.batch_ms = Some(0);
        let mut m = machine(&spec, t0);
        assert_eq!(m.next_deadline(), Some(t0 + Duration::from_secs(2)));
        assert!(m
            .on_tick(t0 + Duration::from_millis(1_999))
            .emits
            .is_empty());
        let quiet = m.on_tick(t0 + Duration::from_secs(2));
        assert_eq!(kinds(&quiet.emits), [EventKind::Silent]);
        assert_eq!(quiet.stop, None, "the monitor keeps running");
        assert_eq!(
            quiet.emits[0].text,
            "tests: no output for 2 s (expected within 2 s); it keeps running"
        );
        // Once per quiet period: no second `silent`, no busy deadline.
        assert!(m.on_tick(t0 + Duration::from_secs(9)).emits.is_empty());
        assert!(m
            .next_deadline()
            .is_none_or(|d| d > t0 + Duration::from_secs(60)));
        // Output again: `resumed`, then the line.
        let t10 = t0 + Duration::from_secs(10);
        let mut back = m.on_line(t10, line(1, "up"));
        back.emits.extend(m.drained(t10).emits);
        assert_eq!(kinds(&back.emits), [EventKind::Resumed, EventKind::Lines]);
        assert_eq!(
            back.emits[0].body,
            EventBody::MonitorResumed { quiet_ms: 10_000 }
        );
        // And the watch starts over from that line.
        assert_eq!(m.next_deadline(), Some(t0 + Duration::from_secs(12)));
        let again = m.on_tick(t0 + Duration::from_secs(12));
        assert_eq!(kinds(&again.emits), [EventKind::Silent]);
    }

    #[test]
    fn dropped_output_is_told_and_a_low_disk_wakes_as_a_failure() {
        use crate::outlog::{DropReason, Dropped};
        let t0 = Instant::now();
        let d = |reason| Dropped {
            reason,
            count: 120,
            from_line: 500,
            to_line: 619,
            bytes: 49_152,
        };
        let mut spec = MonitorSpec::command("x", "build");
        spec.wake_on = "fail".parse().unwrap();
        let m = MonitorMachine::new("mon-1", &spec, t0).unwrap();
        let low = m.output_dropped(&d(DropReason::DiskLow), " (3 MiB free, 16 MiB kept free)");
        assert!(low.wakes, "a hole in the log is a failure");
        assert_eq!(
            low.text,
            "build: 120 output lines (48 KiB) not written to the output file: the disk is low on space (3 MiB free, 16 MiB kept free); output lines 500–619 are missing from `wakeful output mon-1` (the events still have them)"
        );
        let cap = m.output_dropped(&d(DropReason::Cap), " (64 MiB)");
        assert!(!cap.wakes, "the cap is no failure");
        assert!(cap.text.contains("over its cap (64 MiB)"), "{}", cap.text);
        assert!(cap.text.contains("output lines 500–619"), "{}", cap.text);
        assert_eq!(
            cap.body,
            EventBody::OutputDropped {
                reason: DropReason::Cap,
                count: 120,
                from_line: 500,
                to_line: 619,
                bytes: 49_152
            }
        );
    }

    #[test]
    fn wake_on_decides_which_events_wake() {
        let t0 = Instant::now();
        let run = |wake_on: &str, end: SourceEnd| {
            let mut spec = MonitorSpec::command("x", "d");
            spec.wake_on = wake_on.parse().unwrap();
            spec.batch_ms = Some(0);
            let mut m = machine(&spec, t0);
            let mut emits = vec![m.started("command: x")];
            emits.extend(m.on_line(t0, line(1, "compiling")).emits);
            emits.extend(m.drained(t0).emits);
            let t1 = t0 + Duration::from_secs(1);
            emits.extend(m.on_line(t1, line(2, "error: boom")).emits);
            emits.extend(m.drained(t1).emits);
            emits.extend(m.finish(t0 + Duration::from_secs(2), end));
            emits
                .iter()
                .map(|e| (e.body.kind(), e.wakes))
                .collect::<Vec<_>>()
        };
        use EventKind::*;
        assert_eq!(
            run("any", SourceEnd::Exited(0)),
            [
                (Started, true),
                (Lines, true),
                (Lines, true),
                (Stopped, true)
            ]
        );
        assert_eq!(
            run("exit", SourceEnd::Exited(0)),
            [
                (Started, false),
                (Lines, false),
                (Lines, false),
                (Stopped, true)
            ]
        );
        assert_eq!(
            run("fail", SourceEnd::Exited(0)),
            [
                (Started, false),
                (Lines, false),
                (Lines, false),
                (Stopped, false)
            ]
        );
        assert_eq!(
            run("fail", SourceEnd::Exited(2)),
            [
                (Started, false),
                (Lines, false),
                (Lines, false),
                (Stopped, true)
            ]
        );
        assert_eq!(
            run("match:error", SourceEnd::Exited(0)),
            [
                (Started, false),
                (Lines, false),
                (Lines, true),
                (Stopped, false)
            ]
        );
        assert_eq!(
            run("match:error", SourceEnd::Failed("gone".into())),
            [
                (Started, false),
                (Lines, false),
                (Lines, true),
                (Failed, true)
            ]
        );
        // A watched process's exit is a failure for `fail` unless it is
        // known to have exited with 0.
        let exited = |code: Option<i32>, signal: Option<i32>| {
            let mut spec = MonitorSpec::command("x", "d");
            spec.source = crate::Source::Pid {
                pid: 4242,
                start_time: Some(1),
                backend: Some("linux".into()),
                cmdline: None,
            };
            spec.persistent = true;
            spec.timeout_ms = None;
            spec.wake_on = WakeOn::Fail;
            let mut m = machine(&spec, t0);
            let end = m.finish(
                t0,
                SourceEnd::Ended(MonitorStopReason::Exited(Box::new(
                    crate::event::ProcessExit {
                        pid: 4242,
                        cmdline: None,
                        code,
                        signal,
                        while_down: false,
                    },
                ))),
            );
            let last = end.last().unwrap();
            assert_eq!(
                last.text,
                format!("d: {}", last.body.stop_reason().unwrap())
            );
            last.wakes
        };
        assert!(!exited(Some(0), None));
        assert!(exited(Some(1), None));
        assert!(exited(None, Some(9)));
        assert!(exited(None, None), "an unknown status wakes `fail`");
        // Silence is a failure for `fail`; its end is not.
        let mut spec = MonitorSpec::command("x", "d");
        spec.wake_on = WakeOn::Fail;
        spec.expect_within_ms = Some(1_000);
        let mut m = machine(&spec, t0);
        let quiet = m.on_tick(t0 + Duration::from_secs(1));
        assert!(quiet.emits[0].wakes);
        let back = m.on_line(t0 + Duration::from_secs(2), line(1, "x"));
        assert!(!back.emits[0].wakes);
    }

    #[test]
    fn survivors_are_reported_not_hidden() {
        let t0 = Instant::now();
        let mut m = machine(&MonitorSpec::command("x", "d"), t0);
        m.request_stop(MonitorStopReason::UserStopped);
        let end = m.finish_with(t0, SourceEnd::Exited(0), vec![41, 42], None);
        let last = end.last().unwrap();
        assert_eq!(last.body.survivors(), [41, 42]);
        assert_eq!(
            last.body.stop_reason(),
            Some(MonitorStopReason::UserStopped)
        );
        assert!(
            last.text.starts_with(
                "d: stopped\n[2 processes of this monitor survived SIGKILL (pids 41, 42)"
            ),
            "{}",
            last.text
        );
    }

    #[test]
    fn a_failure_is_a_stop_reason_too() {
        let t0 = Instant::now();
        let mut m = machine(&MonitorSpec::command("x", "d"), t0);
        let end = m.finish(t0, SourceEnd::Failed("no such file".into()));
        assert_eq!(
            end.last().unwrap().body.stop_reason(),
            Some(MonitorStopReason::Failed {
                error: "no such file".into()
            })
        );
    }

    #[test]
    fn nonzero_exit_carries_last_20_lines() {
        let t0 = Instant::now();
        let mut m = machine(&MonitorSpec::command("x", "build"), t0);
        for i in 1..=30 {
            m.on_line(t0, line(i, &format!("l{i}")));
        }
        let end = m.finish(t0, SourceEnd::Exited(7));
        let last = end.last().unwrap();
        match &last.body {
            EventBody::MonitorStopped {
                reason, last_lines, ..
            } => {
                assert_eq!(reason, &MonitorStopReason::ExitCode { code: 7 });
                assert_eq!(last_lines.len(), 20);
                assert_eq!(last_lines[0], "l11");
                assert_eq!(last_lines[19], "l30");
            }
            other => panic!("{other:?}"),
        }
        assert!(last
            .text
            .starts_with("build: exited with code 7\nlast lines:\nl11"));
    }

    #[test]
    fn timeout_is_decided_at_its_deadline_with_the_known_text() {
        let t0 = Instant::now();
        let mut spec = MonitorSpec::command("x", "tail");
        spec.timeout_ms = Some(2_000);
        let mut m = machine(&spec, t0);
        assert_eq!(m.next_deadline(), Some(t0 + 2_000 * MS));
        assert_eq!(m.on_tick(t0 + 1_999 * MS).stop, None);
        assert_eq!(
            m.on_tick(t0 + 2_000 * MS).stop,
            Some(MonitorStopReason::Timeout)
        );
        assert_eq!(m.next_deadline(), None);
        // The process then dies of our SIGTERM: the reason stays `timeout`.
        let end = m.finish(t0 + 2_010 * MS, SourceEnd::Signaled(15));
        assert!(end[0].text.contains(TIMEOUT_TEXT));
        assert!(matches!(
            end[0].body,
            EventBody::MonitorStopped {
                reason: MonitorStopReason::Timeout,
                ..
            }
        ));
    }

    #[test]
    fn persistent_has_no_timeout_deadline() {
        let t0 = Instant::now();
        let mut spec = MonitorSpec::command("x", "d");
        spec.persistent = true;
        assert_eq!(machine(&spec, t0).next_deadline(), None);
    }

    #[test]
    fn idle_timeout_moves_with_activity() {
        let t0 = Instant::now();
        let mut spec = MonitorSpec::command("x", "d");
        spec.idle_timeout_ms = Some(1_000);
        spec.persistent = true;
        let mut m = machine(&spec, t0);
        m.on_line(t0 + 500 * MS, line(1, "a"));
        m.drained(t0 + 500 * MS);
        assert_eq!(m.next_deadline(), Some(t0 + 1_500 * MS));
        assert_eq!(m.on_tick(t0 + 1_499 * MS).stop, None);
        assert_eq!(
            m.on_tick(t0 + 1_500 * MS).stop,
            Some(MonitorStopReason::IdleTimeout)
        );
    }

    #[test]
    fn filter_selects_lines_and_stderr_defaults_to_file_only() {
        let t0 = Instant::now();
        let mut spec = MonitorSpec::command("x", "d");
        spec.filter = Some("ERROR|panic".into());
        let mut m = machine(&spec, t0);
        m.on_line(t0, line(1, "ok"));
        m.on_line(t0, line(2, "ERROR one"));
        m.on_line(
            t0,
            Line {
                stream: Stream::Stderr,
                text: "ERROR on stderr".into(),
                file_line: 3,
            },
        );
        let s = m.drained(t0);
        assert_eq!(s.emits.len(), 1);
        assert_eq!(s.emits[0].text, "ERROR one");

        spec.stderr = StderrMode::Events;
        let mut m = machine(&spec, t0);
        m.on_line(
            t0,
            Line {
                stream: Stream::Stderr,
                text: "ERROR on stderr".into(),
                file_line: 1,
            },
        );
        assert_eq!(m.drained(t0).emits[0].text, "ERROR on stderr");
    }

    #[test]
    fn until_match_delivers_the_match_and_stops() {
        let t0 = Instant::now();
        let mut spec = MonitorSpec::command("x", "server");
        spec.until = Some(Until::Match("listening on \\d+".into()));
        let mut m = machine(&spec, t0);
        assert!(m.on_line(t0, line(1, "booting")).emits.is_empty());
        let s = m.on_line(t0, line(2, "listening on 8080"));
        assert_eq!(s.stop, Some(MonitorStopReason::Until));
        assert_eq!(s.emits[0].text, "listening on 8080");
        let end = m.finish(t0, SourceEnd::Signaled(15));
        assert!(matches!(
            &end[0].body,
            EventBody::MonitorStopped { reason: MonitorStopReason::Until, last_lines, .. } if last_lines.is_empty()
        ));
    }

    #[test]
    fn until_exit_emits_no_lines_and_reports_the_tail() {
        let t0 = Instant::now();
        let mut spec = MonitorSpec::command("x", "make");
        spec.until = Some(Until::Exit);
        let mut m = machine(&spec, t0);
        for i in 1..=3 {
            assert!(m.on_line(t0, line(i, "out")).emits.is_empty());
        }
        assert!(m.drained(t0).emits.is_empty());
        let end = m.finish(t0, SourceEnd::Exited(0));
        assert_eq!(kinds(&end), [EventKind::Stopped]);
        assert!(
            matches!(&end[0].body, EventBody::MonitorStopped { last_lines, .. } if last_lines.len() == 3)
        );
    }

    #[test]
    fn until_after_stops_at_its_deadline() {
        let t0 = Instant::now();
        let mut spec = MonitorSpec::command("x", "d");
        spec.until = Some(Until::After(1_500));
        let mut m = machine(&spec, t0);
        assert_eq!(m.next_deadline(), Some(t0 + 1_500 * MS));
        assert_eq!(
            m.on_tick(t0 + 1_500 * MS).stop,
            Some(MonitorStopReason::Until)
        );
    }

    #[test]
    fn max_events_stops_after_the_nth_event() {
        let t0 = Instant::now();
        let mut spec = MonitorSpec::command("x", "d");
        spec.max_events = Some(2);
        spec.batch_ms = Some(0);
        let mut m = machine(&spec, t0);
        m.on_line(t0, line(1, "a"));
        assert_eq!(m.drained(t0).stop, None);
        m.on_line(t0, line(2, "b"));
        assert_eq!(m.drained(t0).stop, Some(MonitorStopReason::MaxEvents));
        m.on_line(t0, line(3, "c"));
        assert!(m.drained(t0).emits.is_empty());
        assert_eq!(m.counters().events, 2);
    }

    #[test]
    fn flood_is_accounted_exactly() {
        let t0 = Instant::now();
        let mut m = machine(&MonitorSpec::command("x", "d"), t0);
        let mut emits = Vec::new();
        let total = 100_000u64;
        for i in 1..=total {
            let now = t0 + Duration::from_millis(i / 1000); // 1000 lines per ms
            emits.extend(m.on_line(now, line(i, "x")).emits);
            if i % 500 == 0 {
                emits.extend(m.drained(now).emits);
                if m.next_deadline().is_some_and(|d| d <= now) {
                    emits.extend(m.on_tick(now).emits);
                }
            }
        }
        emits.extend(m.finish(t0 + 200 * MS, SourceEnd::Exited(0)));
        let delivered: u64 = emits
            .iter()
            .map(|e| match &e.body {
                EventBody::MonitorEvent { lines, .. } => lines.len() as u64,
                _ => 0,
            })
            .sum();
        let suppressed: u64 = emits
            .iter()
            .map(|e| match &e.body {
                EventBody::MonitorSuppressed { count, .. } => *count,
                _ => 0,
            })
            .sum();
        assert_eq!(delivered + suppressed, total);
        assert!(kinds(&emits).contains(&EventKind::Suppressed));
        assert_eq!(m.counters().delivered_lines, delivered);
        assert_eq!(m.counters().suppressed_lines, suppressed);
        assert_eq!(kinds(&emits).last(), Some(&EventKind::Stopped));
    }

    #[test]
    fn bulk_counting_during_a_flood_keeps_exact_accounting() {
        let t0 = Instant::now();
        let mut m = machine(&MonitorSpec::command("x", "d"), t0);
        let mut emits = Vec::new();
        let mut line = 0u64;
        // Use up the burst one line at a time.
        while !m.can_absorb(t0) {
            line += 1;
            emits.extend(m.on_line(t0, self::line(line, "x")).emits);
            emits.extend(m.drained(t0).emits);
            assert!(line < 10_000);
        }
        // One held line, then 1000 lines in bulk: the held one comes first.
        line += 1;
        emits.extend(m.on_line(t0, self::line(line, "held")).emits);
        let tail: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
        emits.extend(m.absorb(t0, 1000, line + 1, line + 1000, tail).emits);
        let total = line + 1000;
        emits.extend(m.finish(t0 + MS, SourceEnd::Exited(1)));
        let delivered: u64 = emits
            .iter()
            .map(|e| match &e.body {
                EventBody::MonitorEvent { lines, .. } => lines.len() as u64,
                _ => 0,
            })
            .sum();
        let suppressed: u64 = emits
            .iter()
            .map(|e| match &e.body {
                EventBody::MonitorSuppressed { count, .. } => *count,
                _ => 0,
            })
            .sum();
        assert_eq!(delivered + suppressed, total);
        assert_eq!(m.counters().lines, total);
        match &emits.last().unwrap().body {
            EventBody::MonitorStopped { last_lines, .. } => {
                assert_eq!(last_lines.first().unwrap(), "t0");
                assert_eq!(last_lines.len(), 20);
            }
            other => panic!("{other:?}"),
        }
        // A filter needs every line's text: no bulk counting.
        let mut spec = MonitorSpec::command("x", "d");
        spec.filter = Some("x".into());
        assert!(!machine(&spec, t0).can_absorb(t0));
    }

    #[test]
    fn user_stop_wins_over_the_exit_status() {
        let t0 = Instant::now();
        let mut m = machine(&MonitorSpec::command("x", "d"), t0);
        m.request_stop(MonitorStopReason::UserStopped);
        let end = m.finish(t0, SourceEnd::Signaled(15));
        assert!(matches!(
            end[0].body,
            EventBody::MonitorStopped {
                reason: MonitorStopReason::UserStopped,
                ..
            }
        ));
    }
}
