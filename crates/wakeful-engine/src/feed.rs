//! A monitor's feed: what every source's bytes go through. [`Feed`] owns
//! the monitor's [`MonitorMachine`], its output file, one line splitter per
//! stream and the way to the journal: bytes go to the file first, then,
//! as lines, to the machine; the events the machine decides on go to the
//! journal, stamped with session, monitor and time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use wakeful_core::journal::JournalEntry;
use wakeful_core::lines::{LineSplitter, Piece};
use wakeful_core::machine::{Emit, SourceEnd, Step};
use wakeful_core::{Line, MonitorInfo, MonitorMachine, MonitorState, PendingEvent, Stream};

use crate::hub::Hub;
use crate::output_writer::OutputFile;

/// Counters are sent to the journal at most this often while running.
const COUNTERS_EVERY: Duration = Duration::from_secs(1);

/// The parts every source shares; see the module docs.
pub(crate) struct Feed {
    pub(crate) id: String,
    pub(crate) session: String,
    pub(crate) machine: MonitorMachine,
    file: OutputFile,
    splitters: [LineSplitter; 2],
    pub(crate) hub: Hub,
    status: Arc<Mutex<MonitorInfo>>,
    /// Told once the listing says the monitor ended (before its final
    /// event is recorded).
    pub(crate) ended: tokio::sync::watch::Sender<bool>,
    counters_sent: Instant,
    /// Its events are re-emitted from a recording (a replay monitor).
    pub(crate) replayed: bool,
}

impl Feed {
    /// The feed of monitor `id` of `session`, whose listing is `status`.
    pub(crate) fn new(
        id: String,
        session: String,
        machine: MonitorMachine,
        file: OutputFile,
        hub: Hub,
        status: Arc<Mutex<MonitorInfo>>,
        ended: tokio::sync::watch::Sender<bool>,
    ) -> Self {
        Feed {
            ended,
            id,
            session,
            machine,
            file,
            splitters: [LineSplitter::new(), LineSplitter::new()],
            hub,
            status,
            counters_sent: Instant::now(),
            replayed: false,
        }
    }
}

fn idx(stream: Stream) -> usize {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
    }
}

impl Feed {
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
                    self.dropped(now, &mut step);
                    return Ok(step);
                }
            }
        }
        let mut step = self.feed_lines(now, stream, chunk)?;
        self.file.flush()?;
        merge(&mut step, self.machine.drained(now));
        self.dropped(now, &mut step);
        Ok(step)
    }

    /// Adds the reports of output the file did not keep that are due.
    fn dropped(&mut self, now: Instant, step: &mut Step) {
        for d in self.file.take_reports(now) {
            let detail = self.file.detail(d.reason);
            step.emits.push(self.machine.output_dropped(&d, &detail));
        }
    }

    /// The machine's next deadline, or the next report of dropped output.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        match (self.machine.next_deadline(), self.file.next_report()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Time passed: the machine's decisions, and reports that came due.
    pub(crate) fn on_tick(&mut self, now: Instant) -> Step {
        let mut step = self.machine.on_tick(now);
        self.dropped(now, &mut step);
        step
    }

    /// Splits a chunk into lines, writes them, feeds them to the machine.
    fn feed_lines(&mut self, now: Instant, stream: Stream, chunk: &[u8]) -> std::io::Result<Step> {
        let Feed {
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
        let Feed {
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
        self.dropped(now, &mut step);
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

    /// Commits `emits` (and the counters, when they are due) in one
    /// append; returns once they are in the log.
    pub(crate) async fn emit(&mut self, emits: Vec<Emit>) {
        self.emit_with(emits, false).await;
    }

    /// When the monitor started, as its listing says.
    pub(crate) fn started_at(&self) -> chrono::DateTime<Utc> {
        self.status
            .lock()
            .map(|i| i.started_at)
            .unwrap_or_else(|_| Utc::now())
    }

    /// Like [`Feed::emit`], with the counters always recorded.
    pub(crate) async fn emit_counted(&mut self, emits: Vec<Emit>) {
        self.emit_with(emits, true).await;
    }

    async fn emit_with(&mut self, emits: Vec<Emit>, force_counters: bool) {
        // Listings agree with the events by the time anyone receives them.
        let c = self.machine.counters();
        if let Ok(mut info) = self.status.lock() {
            info.events = c.events;
            info.lines = c.lines;
            info.suppressed_lines = c.suppressed_lines;
        }
        let mut entries = stamp(&self.session, &self.id, emits, self.replayed);
        if force_counters || (!entries.is_empty() && self.counters_sent.elapsed() >= COUNTERS_EVERY)
        {
            self.counters_sent = Instant::now();
            entries.push(JournalEntry::Counters {
                monitor_id: self.id.clone(),
                events: c.events,
                lines: c.lines,
                suppressed_lines: c.suppressed_lines,
            });
        }
        if entries.is_empty() {
            return;
        }
        // The hub outlives every monitor; a closed hub means the owner is
        // gone and there is nobody left to tell.
        let _ = self.hub.append(entries).await;
    }

    pub(crate) async fn finish(&mut self, end: SourceEnd) {
        self.finish_with(end, Vec::new(), None).await
    }

    /// Ends the monitor: its last lines, its final event (saying which
    /// processes survived the stop, if any did).
    pub(crate) async fn finish_with(
        &mut self,
        end: SourceEnd,
        survivors: Vec<i32>,
        unverified: Option<wakeful_core::Unverified>,
    ) {
        // What the output file did not keep is told before the end.
        let _ = self.file.flush();
        let mut emits = Vec::new();
        for d in self.file.finish_reports() {
            let detail = self.file.detail(d.reason);
            emits.push(self.machine.output_dropped(&d, &detail));
        }
        let last = self
            .machine
            .finish_with(Instant::now(), end, survivors, unverified);
        if let Ok(mut info) = self.status.lock() {
            if let Some(last) = last.last() {
                info.stop_reason = last.body.stop_reason();
                info.survivors = last.body.survivors().to_vec();
                info.unverified = last.body.unverified().cloned();
            }
            info.state = MonitorState::Ended;
            info.ended_at = Some(Utc::now());
        }
        // Ended before its final event is recorded: a store that cannot
        // write now (a full disk) keeps no `stop` waiting.
        self.ended.send_replace(true);
        emits.extend(last);
        self.emit_with(emits, true).await;
    }
}

pub(crate) fn merge(into: &mut Step, from: Step) {
    into.emits.extend(from.emits);
    if into.stop.is_none() {
        into.stop = from.stop;
    }
}

/// Journal entries for `emits`, stamped with session, monitor and time
/// (and marked `replayed` for a replay monitor).
pub(crate) fn stamp(
    session: &str,
    id: &str,
    emits: Vec<Emit>,
    replayed: bool,
) -> Vec<JournalEntry> {
    let ts = Utc::now();
    emits
        .into_iter()
        .map(|e| {
            JournalEntry::Event(PendingEvent {
                session: session.to_string(),
                monitor_id: id.to_string(),
                ts,
                text: e.text,
                body: e.body,
                wakes: e.wakes,
                replayed,
                host: None,
            })
        })
        .collect()
}
