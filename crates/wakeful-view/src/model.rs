//! The monitors a view shows: what `list` said, kept current by the event
//! stream, with an activity history (lines per minute over the last hour)
//! for the sparkline. Pure: the clock is passed in.

use std::collections::{BTreeMap, VecDeque};

use chrono::{DateTime, Utc};
use wakeful_core::{Event, EventBody, MonitorInfo, MonitorState, MonitorStopReason};

/// How many minutes the activity history covers.
pub const ACTIVITY_MINUTES: usize = 60;

/// Monitors that ended longer ago than this are not shown (as `list`).
pub const ENDED_SHOWN_FOR_SECS: i64 = 3600;

/// One minute of a monitor's activity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bucket {
    /// Lines delivered in events.
    pub lines: u64,
    /// Lines counted by `suppressed` events.
    pub suppressed: u64,
}

/// A monitor's lines per minute over the last [`ACTIVITY_MINUTES`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Activity {
    /// (minute since the epoch, bucket), oldest first.
    minutes: VecDeque<(i64, Bucket)>,
}

fn minute_of(ts: &DateTime<Utc>) -> i64 {
    ts.timestamp().div_euclid(60)
}

impl Activity {
    /// Counts `lines` delivered and `suppressed` lines at `ts`.
    pub fn record(&mut self, ts: &DateTime<Utc>, lines: u64, suppressed: u64) {
        let minute = minute_of(ts);
        match self.minutes.iter_mut().rev().find(|(m, _)| *m == minute) {
            Some((_, b)) => {
                b.lines += lines;
                b.suppressed += suppressed;
            }
            None => {
                let bucket = Bucket { lines, suppressed };
                // Events come in seq order, which is nearly time order; keep
                // the deque sorted anyway.
                let at = self.minutes.partition_point(|(m, _)| *m < minute);
                self.minutes.insert(at, (minute, bucket));
            }
        }
        let newest = self.minutes.back().map(|(m, _)| *m).unwrap_or(minute);
        while self
            .minutes
            .front()
            .is_some_and(|(m, _)| *m <= newest - ACTIVITY_MINUTES as i64)
        {
            self.minutes.pop_front();
        }
    }

    /// The last [`ACTIVITY_MINUTES`] minutes up to `now`, oldest first.
    pub fn series(&self, now: &DateTime<Utc>) -> [Bucket; ACTIVITY_MINUTES] {
        let mut out = [Bucket::default(); ACTIVITY_MINUTES];
        let last = minute_of(now);
        let first = last - ACTIVITY_MINUTES as i64 + 1;
        for (m, b) in &self.minutes {
            if (first..=last).contains(m) {
                out[(m - first) as usize] = *b;
            }
        }
        out
    }
}

/// One monitor as the view knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorRow {
    /// What the daemon's `list` said last (updated by events since).
    pub info: MonitorInfo,
    /// When its last event was written.
    pub last_event: Option<DateTime<Utc>>,
    /// Lines per minute.
    pub activity: Activity,
    /// Whether a `list` named it (else it is known from events only).
    pub listed: bool,
}

/// The monitors of one session (or of all): the table's rows.
#[derive(Debug, Clone, Default)]
pub struct Monitors {
    rows: BTreeMap<String, MonitorRow>,
    /// An event named a monitor that `list` has not shown yet, or a
    /// monitor ended: the next `list` should come soon.
    stale: bool,
}

impl Monitors {
    /// Takes a `list` result: monitors it no longer names are dropped
    /// (ended more than an hour ago), new ones added, the others updated
    /// (keeping their activity).
    pub fn apply_list(&mut self, list: Vec<MonitorInfo>) {
        let mut rows = BTreeMap::new();
        for info in list {
            let (last_event, activity) = match self.rows.remove(&info.id) {
                Some(old) => (old.last_event, old.activity),
                None => (None, Activity::default()),
            };
            // An ending seen in the stream stays, even if the list was
            // taken a moment before it.
            rows.insert(
                info.id.clone(),
                MonitorRow {
                    info,
                    last_event,
                    activity,
                    listed: true,
                },
            );
        }
        // Monitors known from events but not listed yet (the list was
        // taken before they started) stay until a list names them.
        for (id, row) in std::mem::take(&mut self.rows) {
            if !row.listed {
                rows.entry(id).or_insert(row);
            }
        }
        self.rows = rows;
        self.stale = false;
    }

    /// Takes one event: activity, last event time, and the ending.
    pub fn apply_event(&mut self, e: &Event) {
        let Some(row) = self.rows.get_mut(&e.monitor_id) else {
            self.stale = true;
            // Keep the activity of monitors not listed yet: a row that the
            // next list fills in.
            let mut row = placeholder(e);
            record(&mut row, e);
            self.rows.insert(e.monitor_id.clone(), row);
            return;
        };
        record(row, e);
        if let Some(reason) = e.stop_reason() {
            row.info.state = MonitorState::Ended;
            row.info.survivors = e.body.survivors().to_vec();
            row.info.stop_reason = Some(reason);
            row.info.ended_at = Some(e.ts);
            self.stale = true;
        } else if e.kind() == wakeful_core::EventKind::Rearmed {
            row.info.state = MonitorState::Running;
            row.info.stop_reason = None;
            row.info.ended_at = None;
        }
    }

    /// Whether a `list` should be asked for soon.
    pub fn is_stale(&self) -> bool {
        self.stale
    }

    /// The rows as the table shows them at `now`: active first (oldest
    /// start first), then those ended within the last hour (latest end
    /// first).
    pub fn sorted(&self, now: &DateTime<Utc>) -> Vec<&MonitorRow> {
        let mut active: Vec<&MonitorRow> = vec![];
        let mut ended: Vec<&MonitorRow> = vec![];
        for row in self.rows.values() {
            match (row.info.state, row.info.ended_at) {
                (MonitorState::Running, _) => active.push(row),
                (MonitorState::Ended, Some(at))
                    if (*now - at).num_seconds() <= ENDED_SHOWN_FOR_SECS =>
                {
                    ended.push(row)
                }
                _ => {}
            }
        }
        active
            .sort_by(|a, b| (a.info.started_at, &a.info.id).cmp(&(b.info.started_at, &b.info.id)));
        ended.sort_by(|a, b| (b.info.ended_at, &b.info.id).cmp(&(a.info.ended_at, &a.info.id)));
        active.extend(ended);
        active
    }

    /// One monitor.
    pub fn get(&self, id: &str) -> Option<&MonitorRow> {
        self.rows.get(id)
    }

    /// Sessions that have monitors, sorted.
    pub fn sessions(&self) -> Vec<String> {
        let mut s: Vec<String> = self.rows.values().map(|r| r.info.session.clone()).collect();
        s.sort();
        s.dedup();
        s
    }

    /// How many monitors are known.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no monitor is known.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

fn record(row: &mut MonitorRow, e: &Event) {
    row.last_event = Some(e.ts);
    match &e.body {
        EventBody::MonitorEvent { lines, .. } => {
            row.activity.record(&e.ts, lines.len() as u64, 0);
        }
        EventBody::MonitorSuppressed { count, .. } => {
            row.activity.record(&e.ts, 0, *count);
        }
        _ => {}
    }
}

/// A row for a monitor known only from an event so far.
fn placeholder(e: &Event) -> MonitorRow {
    let ended = e.kind().is_terminal();
    MonitorRow {
        info: MonitorInfo {
            id: e.monitor_id.clone(),
            session: e.session.clone(),
            description: String::new(),
            source: wakeful_core::Source::Command {
                command: String::new(),
            },
            persistent: false,
            timeout_ms: None,
            key: None,
            state: if ended {
                MonitorState::Ended
            } else {
                MonitorState::Running
            },
            stop_reason: e.stop_reason(),
            started_at: e.ts,
            ended_at: ended.then_some(e.ts),
            events: 0,
            lines: 0,
            suppressed_lines: 0,
            output_path: Default::default(),
            survivors: e.body.survivors().to_vec(),
            unverified: e.body.unverified().cloned(),
        },
        last_event: None,
        activity: Activity::default(),
        listed: false,
    }
}

/// How a monitor ended, in words a table cell holds: the exit code, the
/// signal or the stop reason, and survivors when there were any.
pub fn ending(info: &MonitorInfo) -> String {
    let Some(reason) = &info.stop_reason else {
        return String::new();
    };
    let mut s = match reason {
        MonitorStopReason::ExitCode { code } => format!("exit {code}"),
        MonitorStopReason::Signal { signal } => format!("signal {signal}"),
        MonitorStopReason::Failed { error } => format!("failed: {error}"),
        MonitorStopReason::WsClosed { code } => format!("ws closed {code}"),
        other => other.kind().replace('_', " "),
    };
    if !info.survivors.is_empty() {
        s.push_str(&format!(" ({} survivors)", info.survivors.len()));
    }
    s
}

/// The kind of a monitor's source: `command`, `ws`, `file`, `poll`,
/// `terminal`, `replay`, `timer`, `pid`.
pub fn source_kind(info: &MonitorInfo) -> &'static str {
    match &info.source {
        wakeful_core::Source::Command { .. } => "command",
        wakeful_core::Source::Ws { .. } => "ws",
        wakeful_core::Source::File { .. } => "file",
        wakeful_core::Source::Poll { .. } => "poll",
        wakeful_core::Source::Terminal { .. } => "terminal",
        wakeful_core::Source::Replay { .. } => "replay",
        wakeful_core::Source::Timer { .. } => "timer",
        wakeful_core::Source::Pid { .. } => "pid",
    }
}

/// A short age: `42s`, `5m`, `3h`, `2d`.
pub fn age(from: &DateTime<Utc>, now: &DateTime<Utc>) -> String {
    let s = (*now - *from).num_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use chrono::TimeZone;

    pub fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
    }

    pub fn info(id: &str, started: i64) -> MonitorInfo {
        MonitorInfo {
            id: id.into(),
            session: "t".into(),
            description: format!("desc {id}"),
            source: wakeful_core::Source::Command {
                command: format!("run {id}"),
            },
            persistent: false,
            timeout_ms: Some(300_000),
            key: None,
            state: MonitorState::Running,
            stop_reason: None,
            started_at: at(started),
            ended_at: None,
            events: 0,
            lines: 0,
            suppressed_lines: 0,
            output_path: format!("/tmp/{id}.log").into(),
            survivors: vec![],
            unverified: None,
        }
    }

    pub fn event(seq: u64, id: &str, secs: i64, body: EventBody) -> Event {
        let text = match &body {
            EventBody::MonitorEvent { lines, .. } => lines.join("\n"),
            EventBody::MonitorStopped { reason, .. } => format!("{id}: {reason}"),
            other => format!("{:?}", other.kind()),
        };
        Event {
            seq,
            session: "t".into(),
            monitor_id: id.into(),
            ts: at(secs),
            text,
            body,
            wakes: true,
            replayed: false,
            host: None,
        }
    }

    pub fn lines(n: usize) -> EventBody {
        EventBody::MonitorEvent {
            lines: (0..n).map(|i| format!("line {i}")).collect(),
            from_line: 1,
            to_line: n as u64,
        }
    }

    #[test]
    fn activity_counts_minutes_and_forgets_the_old_hour() {
        let mut a = Activity::default();
        a.record(&at(0), 3, 0);
        a.record(&at(30), 2, 0);
        a.record(&at(61), 0, 100);
        let s = a.series(&at(61));
        assert_eq!(
            s[ACTIVITY_MINUTES - 1],
            Bucket {
                lines: 0,
                suppressed: 100
            }
        );
        assert_eq!(
            s[ACTIVITY_MINUTES - 2],
            Bucket {
                lines: 5,
                suppressed: 0
            }
        );
        // An hour later the first minute is gone from the series and the store.
        let later = at(60 * 60 + 1);
        let s = a.series(&later);
        assert_eq!(
            s[0],
            Bucket {
                lines: 0,
                suppressed: 100
            }
        );
        assert_eq!(s.iter().map(|b| b.lines).sum::<u64>(), 0);
        a.record(&later, 1, 0);
        assert_eq!(a.minutes.len(), 2);
        // A late event for an earlier minute lands in its minute.
        a.record(&at(62), 4, 0);
        assert_eq!(a.series(&later)[0].lines, 4);
    }

    #[test]
    fn events_update_rows_and_list_sorts_active_first() {
        let mut m = Monitors::default();
        m.apply_list(vec![info("mon-a", 0), info("mon-b", 10)]);
        m.apply_event(&event(1, "mon-a", 20, lines(2)));
        m.apply_event(&event(
            2,
            "mon-a",
            30,
            EventBody::MonitorStopped {
                reason: MonitorStopReason::ExitCode { code: 2 },
                last_lines: vec![],
                survivors: vec![77],
                unverified: None,
            },
        ));
        assert!(m.is_stale());
        let rows = m.sorted(&at(40));
        assert_eq!(rows[0].info.id, "mon-b");
        assert_eq!(rows[1].info.id, "mon-a");
        assert_eq!(ending(&rows[1].info), "exit 2 (1 survivors)");
        assert_eq!(
            rows[1]
                .activity
                .series(&at(40))
                .iter()
                .map(|b| b.lines)
                .sum::<u64>(),
            2
        );
        // An unknown monitor's event makes a placeholder and asks for a list.
        m.apply_list(vec![info("mon-b", 10)]);
        assert!(!m.is_stale());
        m.apply_event(&event(3, "mon-c", 41, EventBody::MonitorStarted));
        assert!(m.is_stale());
        assert_eq!(m.len(), 2, "mon-a left the list, mon-c is added");
        m.apply_list(vec![info("mon-b", 10)]);
        assert_eq!(m.len(), 2, "mon-c stays until a list names it");
        // An hour after its end, an ended monitor is not shown.
        let mut ended = info("mon-d", 0);
        ended.state = MonitorState::Ended;
        ended.ended_at = Some(at(30));
        m.apply_list(vec![ended]);
        assert_eq!(m.sorted(&at(60)).len(), 2);
        assert_eq!(m.sorted(&at(30 + 3601)).len(), 1);
        assert_eq!(m.sessions(), vec!["t".to_string()]);
    }

    #[test]
    fn ages_are_short() {
        assert_eq!(age(&at(0), &at(42)), "42s");
        assert_eq!(age(&at(0), &at(300)), "5m");
        assert_eq!(age(&at(0), &at(3 * 3600)), "3h");
        assert_eq!(age(&at(0), &at(2 * 86400)), "2d");
        assert_eq!(age(&at(10), &at(0)), "0s");
    }
}
