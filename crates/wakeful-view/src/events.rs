//! The events pane as a state machine: a bounded list of rows (one a line
//! of a `lines` event, one a line of any other event's text), a monitor
//! filter, following new rows or paused at a place with a count of what
//! came since, search and error jumps. Pure: no IO, no clock.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};
use regex::Regex;
use wakeful_core::text::sanitize_for_model;
use wakeful_core::{Event, EventBody, EventKind};

/// How many rows the pane keeps (older ones are forgotten; the output file
/// keeps everything: `o`).
pub const DEFAULT_CAPACITY: usize = 10_000;

/// One line of the pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Unique and increasing within the pane.
    pub id: u64,
    /// The event's seq.
    pub seq: u64,
    /// The event's session.
    pub session: String,
    /// The event's monitor.
    pub monitor_id: String,
    /// When the event was written.
    pub ts: DateTime<Utc>,
    /// The event's kind.
    pub kind: EventKind,
    /// The text: sanitized ([`sanitize_for_model`]), one line, tabs as
    /// spaces; a continuation of the previous row when `continued`.
    pub text: String,
    /// A second or later line of a non-`lines` event.
    pub continued: bool,
}

/// Following the newest rows, or paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// The newest rows are shown as they come.
    Following,
    /// The view stays where it is.
    Paused {
        /// The first row shown (or the first after it, once it is gone).
        top: u64,
        /// The newest row when the pause began: rows after it are new.
        seen: u64,
    },
}

/// What the pane shows in a window of `height` rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window<'a> {
    /// The rows, top first.
    pub rows: Vec<&'a Row>,
    /// Rows (of the filter) that came since the pause: "↓ N new".
    pub new_rows: usize,
    /// Whether the view is paused.
    pub paused: bool,
    /// Index of the first shown row among the filtered rows, and their count.
    pub position: (usize, usize),
}

/// The pane's state.
#[derive(Debug, Clone)]
pub struct EventPane {
    rows: VecDeque<Row>,
    capacity: usize,
    next_id: u64,
    last_seq: u64,
    filter: Option<String>,
    follow: Follow,
    search: Option<Regex>,
    search_text: String,
    cursor: Option<u64>,
    error_regex: Regex,
}

impl EventPane {
    /// An empty pane that keeps `capacity` rows and takes lines matching
    /// `error_regex` for errors.
    pub fn new(capacity: usize, error_regex: Regex) -> Self {
        EventPane {
            rows: VecDeque::new(),
            capacity: capacity.max(1),
            next_id: 1,
            last_seq: 0,
            filter: None,
            follow: Follow::Following,
            search: None,
            search_text: String::new(),
            cursor: None,
            error_regex,
        }
    }

    /// The seq of the last event taken.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Takes one event. An event at or before the last seq taken is ignored
    /// (a reconnect never shows one twice).
    pub fn push(&mut self, e: &Event) {
        if e.seq <= self.last_seq {
            return;
        }
        self.last_seq = e.seq;
        let mut add = |text: &str, continued: bool| {
            let row = Row {
                id: self.next_id,
                seq: e.seq,
                session: e.session.clone(),
                monitor_id: e.monitor_id.clone(),
                ts: e.ts,
                kind: e.kind(),
                text: one_line(text),
                continued,
            };
            self.next_id += 1;
            self.rows.push_back(row);
        };
        match &e.body {
            EventBody::MonitorEvent { lines, .. } => {
                for l in lines {
                    add(l, false);
                }
            }
            _ => {
                let text = sanitize_for_model(&e.text);
                for (i, l) in text.split('\n').enumerate() {
                    add(l, i > 0);
                }
            }
        }
        while self.rows.len() > self.capacity {
            self.rows.pop_front();
        }
    }

    /// Shows only `monitor`'s rows (or all); follows again.
    pub fn set_filter(&mut self, monitor: Option<String>) {
        if self.filter != monitor {
            self.filter = monitor;
            self.follow = Follow::Following;
            self.cursor = None;
        }
    }

    /// The monitor shown, or `None` for all.
    pub fn filter(&self) -> Option<&str> {
        self.filter.as_deref()
    }

    /// Following or paused.
    pub fn follow(&self) -> Follow {
        self.follow
    }

    /// The row marked by the last search or error jump.
    pub fn cursor(&self) -> Option<u64> {
        self.cursor
    }

    /// The current search, if any.
    pub fn search(&self) -> Option<&Regex> {
        self.search.as_ref()
    }

    /// The text of the current search.
    pub fn search_text(&self) -> &str {
        &self.search_text
    }

    /// The regex for lines that look like an error.
    pub fn error_regex(&self) -> &Regex {
        &self.error_regex
    }

    fn visible_rows(&self) -> Vec<&Row> {
        self.rows
            .iter()
            .filter(|r| self.filter.as_ref().is_none_or(|f| &r.monitor_id == f))
            .collect()
    }

    /// Index of the first row of a window of `height` among `rows`.
    fn top_index(&self, rows: &[&Row], height: usize) -> usize {
        match self.follow {
            Follow::Following => rows.len().saturating_sub(height),
            Follow::Paused { top, .. } => rows.partition_point(|r| r.id < top),
        }
    }

    /// What a window of `height` rows shows.
    pub fn window(&self, height: usize) -> Window<'_> {
        let rows = self.visible_rows();
        let top = self.top_index(&rows, height);
        let (new_rows, paused) = match self.follow {
            Follow::Following => (0, false),
            Follow::Paused { seen, .. } => (rows.iter().filter(|r| r.id > seen).count(), true),
        };
        let count = rows.len();
        let shown = rows.into_iter().skip(top).take(height).collect();
        Window {
            rows: shown,
            new_rows,
            paused,
            position: (top, count),
        }
    }

    /// Scrolls up `n` rows (pausing the follow).
    pub fn scroll_up(&mut self, n: usize, height: usize) {
        let rows = self.visible_rows();
        if rows.len() <= height && self.follow == Follow::Following {
            return;
        }
        let top = self.top_index(&rows, height).saturating_sub(n);
        let ids = ids_of(&rows);
        self.pause_at_ids(&ids, top, height);
    }

    /// Scrolls down `n` rows; reaching the end follows again.
    pub fn scroll_down(&mut self, n: usize, height: usize) {
        if self.follow == Follow::Following {
            return;
        }
        let rows = self.visible_rows();
        let top = self.top_index(&rows, height) + n;
        if top + height >= rows.len() {
            self.follow = Follow::Following;
            return;
        }
        let ids = ids_of(&rows);
        self.pause_at_ids(&ids, top, height);
    }

    /// Goes to the first row (pausing).
    pub fn home(&mut self, height: usize) {
        let rows = self.visible_rows();
        if rows.len() <= height {
            return;
        }
        let ids = ids_of(&rows);
        self.pause_at_ids(&ids, 0, height);
    }

    /// Follows the newest rows again (`End`).
    pub fn end(&mut self) {
        self.follow = Follow::Following;
    }

    fn pause_at_ids(&mut self, ids: &[u64], top: usize, _height: usize) {
        if ids.is_empty() {
            return;
        }
        let top = top.min(ids.len() - 1);
        let seen = match self.follow {
            Follow::Paused { seen, .. } => seen,
            Follow::Following => ids[ids.len() - 1],
        };
        self.follow = Follow::Paused {
            top: ids[top],
            seen,
        };
    }

    /// Sets the search (a regex; text that is not one is searched as it
    /// is); an empty text clears it. Returns whether it matched anything.
    pub fn set_search(&mut self, text: &str, height: usize) -> bool {
        self.search_text = text.to_string();
        if text.is_empty() {
            self.search = None;
            self.cursor = None;
            return false;
        }
        let re = Regex::new(text).or_else(|_| Regex::new(&regex::escape(text)));
        self.search = re.ok();
        self.cursor = None;
        self.next_match(true, height)
    }

    /// Moves to the next (or previous) row matching the search; returns
    /// whether one was found.
    pub fn next_match(&mut self, forward: bool, height: usize) -> bool {
        let Some(re) = self.search.clone() else {
            return false;
        };
        self.jump(forward, height, |r| re.is_match(&r.text))
    }

    /// Moves to the next row that looks like an error (the error regex);
    /// returns whether one was found.
    pub fn next_error(&mut self, height: usize) -> bool {
        let re = self.error_regex.clone();
        self.jump(true, height, |r| re.is_match(&r.text))
    }

    fn jump(&mut self, forward: bool, height: usize, hit: impl Fn(&Row) -> bool) -> bool {
        let rows = self.visible_rows();
        if rows.is_empty() {
            return false;
        }
        let n = rows.len();
        let top = self.top_index(&rows, height);
        // Start after the cursor when it is shown, else from the window.
        let cursor = self
            .cursor
            .and_then(|c| rows.iter().position(|r| r.id == c))
            .filter(|i| (top..top + height).contains(i));
        let order: Vec<usize> = if forward {
            let start = cursor.map(|c| c + 1).unwrap_or(top);
            (0..n).map(|k| (start + k) % n).collect()
        } else {
            let start = cursor.unwrap_or((top + height).min(n));
            (1..=n).map(|k| (start + n - k) % n).collect()
        };
        let Some(found) = order.into_iter().find(|&i| hit(rows[i])) else {
            return false;
        };
        let ids = ids_of(&rows);
        self.cursor = Some(ids[found]);
        // Keep the window when the row is in it; else put the row a third
        // of the way down.
        if !(top..top + height).contains(&found) || self.follow == Follow::Following {
            let new_top = if (top..top + height).contains(&found) {
                top
            } else {
                found.saturating_sub(height / 3)
            };
            self.pause_at_ids(&ids, new_top, height);
        }
        true
    }
}

fn ids_of(rows: &[&Row]) -> Vec<u64> {
    rows.iter().map(|r| r.id).collect()
}

/// `text` as one line that cannot act on a terminal: sanitized, newlines
/// and tabs as spaces.
pub fn one_line(text: &str) -> String {
    sanitize_for_model(text).replace(['\n', '\t'], " ")
}

/// Splits `text` into (piece, is_match) for highlighting `re`'s matches.
pub fn highlight<'a>(text: &'a str, re: Option<&Regex>) -> Vec<(&'a str, bool)> {
    let Some(re) = re else {
        return vec![(text, false)];
    };
    let mut out = vec![];
    let mut at = 0;
    for m in re.find_iter(text) {
        if m.start() == m.end() {
            continue;
        }
        if m.start() > at {
            out.push((&text[at..m.start()], false));
        }
        out.push((m.as_str(), true));
        at = m.end();
    }
    if at < text.len() || out.is_empty() {
        out.push((&text[at..], false));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::{event, lines};
    use wakeful_core::MonitorStopReason;

    fn pane() -> EventPane {
        EventPane::new(
            100,
            Regex::new(wakeful_protocol::view::DEFAULT_ERROR_REGEX).unwrap(),
        )
    }

    fn texts(w: &Window<'_>) -> Vec<String> {
        w.rows.iter().map(|r| r.text.clone()).collect()
    }

    fn numbered(seq: u64, id: &str, from: usize, n: usize) -> Event {
        let mut e = event(seq, id, seq as i64, lines(0));
        e.body = EventBody::MonitorEvent {
            lines: (from..from + n).map(|i| format!("l{i}")).collect(),
            from_line: from as u64,
            to_line: (from + n - 1) as u64,
        };
        e
    }

    #[test]
    fn follows_pauses_counts_new_and_resumes() {
        let mut p = pane();
        p.push(&numbered(1, "mon-a", 0, 10));
        let w = p.window(4);
        assert_eq!(texts(&w), ["l6", "l7", "l8", "l9"]);
        assert!(!w.paused);
        p.scroll_up(2, 4);
        let w = p.window(4);
        assert_eq!(texts(&w), ["l4", "l5", "l6", "l7"]);
        assert!(w.paused);
        assert_eq!(w.new_rows, 0);
        // New rows do not move a paused view; they are counted.
        p.push(&numbered(2, "mon-a", 10, 3));
        let w = p.window(4);
        assert_eq!(texts(&w), ["l4", "l5", "l6", "l7"]);
        assert_eq!(w.new_rows, 3);
        // Duplicates (a reconnect) are ignored.
        p.push(&numbered(2, "mon-a", 10, 3));
        assert_eq!(p.window(4).new_rows, 3);
        // Scrolling down to the end follows again.
        p.scroll_down(100, 4);
        let w = p.window(4);
        assert!(!w.paused);
        assert_eq!(texts(&w), ["l9", "l10", "l11", "l12"]);
        p.home(4);
        assert_eq!(texts(&p.window(4))[0], "l0");
        p.end();
        assert_eq!(p.follow(), Follow::Following);
    }

    #[test]
    fn filter_search_and_error_jumps() {
        let mut p = pane();
        p.push(&numbered(1, "mon-a", 0, 5));
        let mut e = numbered(2, "mon-b", 0, 3);
        e.body = EventBody::MonitorEvent {
            lines: vec!["ok".into(), "Error: disk full".into(), "fine".into()],
            from_line: 1,
            to_line: 3,
        };
        p.push(&e);
        p.push(&numbered(3, "mon-a", 5, 20));
        p.set_filter(Some("mon-b".into()));
        assert_eq!(texts(&p.window(10)), ["ok", "Error: disk full", "fine"]);
        p.set_filter(None);
        assert!(p.next_error(5));
        let w = p.window(5);
        assert!(w.paused);
        assert!(w
            .rows
            .iter()
            .any(|r| Some(r.id) == p.cursor() && r.text.starts_with("Error")));
        // Search: next and previous wrap around.
        assert!(p.set_search("l1[0-9]", 5));
        let first = p.cursor().unwrap();
        assert!(p.next_match(true, 5));
        let second = p.cursor().unwrap();
        assert!(second > first);
        assert!(p.next_match(false, 5));
        assert_eq!(p.cursor(), Some(first));
        // An invalid regex is searched as text.
        assert!(!p.set_search("(unclosed", 5));
        assert!(p.search().is_some());
        assert!(!p.set_search("", 5));
        assert!(p.search().is_none());
    }

    #[test]
    fn other_events_are_sanitized_lines() {
        let mut p = pane();
        let mut e = event(
            1,
            "mon-a",
            0,
            EventBody::MonitorStopped {
                reason: MonitorStopReason::ExitCode { code: 1 },
                last_lines: vec![],
                survivors: vec![],
                unverified: None,
            },
        );
        e.text = "ended\x1b[31m red\x07\nsecond\tline".into();
        p.push(&e);
        let w = p.window(5);
        assert_eq!(texts(&w), ["ended red", "second line"]);
        assert!(w.rows[1].continued);
        let mut e = numbered(2, "mon-a", 0, 1);
        e.body = EventBody::MonitorEvent {
            lines: vec!["\x1b]0;title\x07x\x1b[2Jy\r".into()],
            from_line: 1,
            to_line: 1,
        };
        p.push(&e);
        assert_eq!(p.window(5).rows[2].text, "xy");
    }

    #[test]
    fn capacity_forgets_the_oldest() {
        let mut p = EventPane::new(5, Regex::new("x").unwrap());
        p.push(&numbered(1, "mon-a", 0, 3));
        p.scroll_up(1, 2);
        p.push(&numbered(2, "mon-a", 3, 10));
        let w = p.window(2);
        assert_eq!(
            texts(&w),
            ["l8", "l9"],
            "the paused top was forgotten: the first kept row"
        );
        assert_eq!(w.position, (0, 5));
    }

    #[test]
    fn highlight_splits_matches() {
        let re = Regex::new("ab").unwrap();
        assert_eq!(
            highlight("xabyab", Some(&re)),
            [("x", false), ("ab", true), ("y", false), ("ab", true)]
        );
        assert_eq!(highlight("", Some(&re)), [("", false)]);
        assert_eq!(highlight("q", None), [("q", false)]);
    }
}
