//! The terminal view's state and what each key does, as a state machine:
//! keys in, [`Action`]s (IO for the caller to do) out. Pure: no IO, the
//! clock passed in.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use regex::Regex;
use wakeful_core::{Event, MonitorInfo};
use wakeful_protocol::{ConsumerInfo, WakeStatus};

use crate::events::{EventPane, DEFAULT_CAPACITY};
use crate::model::Monitors;

/// Which events the view reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One session's.
    Session(String),
    /// Every session's.
    All,
}

impl Scope {
    /// The session, for one session.
    pub fn session(&self) -> Option<&str> {
        match self {
            Scope::Session(s) => Some(s),
            Scope::All => None,
        }
    }
}

/// A key, as the view reads it (independent of the terminal library).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A character.
    Char(char),
    /// Control and a character (Ctrl-C).
    Ctrl(char),
    /// ↑.
    Up,
    /// ↓.
    Down,
    /// Page up.
    PageUp,
    /// Page down.
    PageDown,
    /// Home.
    Home,
    /// End.
    End,
    /// Tab.
    Tab,
    /// Enter.
    Enter,
    /// Escape.
    Esc,
    /// Backspace.
    Backspace,
}

/// Which pane has the keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    /// The monitors table.
    Table,
    /// The events pane.
    Events,
}

/// The output file shown by `o`, a window of it at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputView {
    /// The monitor.
    pub monitor_id: String,
    /// Its output file.
    pub path: PathBuf,
    /// Lines in the file when last read.
    pub total: u64,
    /// The first line shown (1-based).
    pub top: u64,
    /// The lines read: (number, sanitized text).
    pub lines: Vec<(u64, String)>,
    /// Why the file could not be read, if it could not.
    pub error: Option<String>,
}

/// A full-screen panel over the view.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    /// The keys (`?`).
    Help,
    /// The output file (`o`).
    Output(OutputView),
    /// The session's wake route (`w`); `None` while loading.
    Wake {
        /// The session.
        session: String,
        /// What `wake_show` said (`Ok(None)`: no route).
        status: Option<Result<Option<WakeStatus>, CallError>>,
        /// Deliveries seen while the view was open: (when, acked seq,
        /// wakes delivered).
        history: Vec<(DateTime<Utc>, u64, u64)>,
    },
    /// Consumers and their unacknowledged events (`c`); `None` while
    /// loading.
    Consumers(Option<Result<Vec<ConsumerInfo>, CallError>>),
}

/// Why a call the view made to the daemon failed, as a panel keeps it to
/// show (the client's error, shared so that the view's state can be
/// cloned; two are equal when they read the same).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct CallError(#[source] pub std::sync::Arc<wakeful_client::ClientError>);

impl From<wakeful_client::ClientError> for CallError {
    fn from(e: wakeful_client::ClientError) -> Self {
        CallError(std::sync::Arc::new(e))
    }
}

impl PartialEq for CallError {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

/// What the keys are doing.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // one value per view
pub enum Mode {
    /// Browsing.
    Normal,
    /// Typing a search after `/`.
    Search(String),
    /// `s` asked: stop this monitor? (`y` to confirm).
    ConfirmStop {
        /// The monitor.
        id: String,
        /// Its description (sanitized when drawn).
        description: String,
    },
    /// An overlay has the keys.
    Overlay(Overlay),
}

/// IO the caller does for the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// End the view.
    Quit,
    /// Stop a monitor (`stop`).
    Stop {
        /// The monitor.
        id: String,
    },
    /// Read lines `from..from+count` of an output file, then
    /// [`App::set_output`].
    ReadOutput {
        /// The monitor.
        monitor_id: String,
        /// Its output file.
        path: PathBuf,
        /// First line (1-based); `u64::MAX` for the last page.
        from: u64,
        /// How many.
        count: u64,
    },
    /// Ask `wake_show` for a session, then [`App::set_wake`].
    LoadWake {
        /// The session.
        session: String,
    },
    /// Ask `consumers`, then [`App::set_consumers`].
    LoadConsumers {
        /// Only this session's (`None`: all).
        session: Option<String>,
    },
}

/// The daemon connection as the footer tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// Not connected yet.
    Connecting,
    /// Streaming.
    Live,
    /// Lost; reconnecting.
    Lost(String),
}

/// The whole terminal view.
#[derive(Debug, Clone)]
pub struct App {
    /// Which events.
    pub scope: Scope,
    /// The monitors.
    pub monitors: Monitors,
    /// The events pane.
    pub pane: EventPane,
    /// The selected monitor (its events are shown), or none (all).
    pub selected: Option<String>,
    /// Which pane has the keys.
    pub focus: Focus,
    /// What the keys do.
    pub mode: Mode,
    /// The daemon connection.
    pub link: Link,
    /// A message for the footer, until the given time.
    pub status: Option<(String, Instant)>,
    /// Rows of the events pane at the last draw (for paging).
    pub events_height: usize,
    /// Rows of the output overlay at the last draw.
    pub output_height: usize,
    /// The store's share of the disk, as the daemon last said.
    pub storage: Option<wakeful_protocol::StorageStatus>,
}

/// How long a footer message stays.
const STATUS_FOR: Duration = Duration::from_secs(5);

impl App {
    /// A view of `scope` that takes lines matching `error_regex` for errors.
    pub fn new(scope: Scope, error_regex: Regex) -> Self {
        App {
            scope,
            monitors: Monitors::default(),
            pane: EventPane::new(DEFAULT_CAPACITY, error_regex),
            selected: None,
            focus: Focus::Table,
            mode: Mode::Normal,
            link: Link::Connecting,
            status: None,
            events_height: 10,
            output_height: 10,
            storage: None,
        }
    }

    /// Takes a `list` result.
    pub fn apply_list(&mut self, list: Vec<MonitorInfo>) {
        self.monitors.apply_list(list);
    }

    /// Takes events from the stream.
    pub fn apply_events(&mut self, events: &[Event]) {
        for e in events {
            if e.seq <= self.pane.last_seq() {
                continue;
            }
            self.monitors.apply_event(e);
            self.pane.push(e);
        }
    }

    /// Shows `message` in the footer for a while.
    pub fn say(&mut self, message: impl Into<String>, now: Instant) {
        self.status = Some((message.into(), now + STATUS_FOR));
    }

    /// The footer message, if still due at `now`.
    pub fn status_at(&self, now: Instant) -> Option<&str> {
        self.status
            .as_ref()
            .filter(|(_, until)| *until > now)
            .map(|(m, _)| m.as_str())
    }

    /// The table's rows at `now` (what the selection moves over).
    fn row_ids(&self, now: &DateTime<Utc>) -> Vec<String> {
        self.monitors
            .sorted(now)
            .into_iter()
            .map(|r| r.info.id.clone())
            .collect()
    }

    fn select(&mut self, id: Option<String>) {
        self.selected = id;
        self.pane.set_filter(self.selected.clone());
    }

    fn move_selection(&mut self, down: bool, wall: &DateTime<Utc>) {
        let ids = self.row_ids(wall);
        if ids.is_empty() {
            return;
        }
        let at = self
            .selected
            .as_ref()
            .and_then(|s| ids.iter().position(|i| i == s));
        let next = match (at, down) {
            (None, true) => Some(0),
            (None, false) => Some(ids.len() - 1),
            (Some(i), true) if i + 1 < ids.len() => Some(i + 1),
            (Some(i), false) if i > 0 => Some(i - 1),
            (Some(_), false) => None,
            (Some(i), true) => Some(i),
        };
        self.select(next.map(|i| ids[i].clone()));
    }

    /// Takes a key at `now` (`wall`: the same moment as a date); returns
    /// what to do.
    pub fn key(&mut self, key: Key, now: Instant, wall: &DateTime<Utc>) -> Vec<Action> {
        if key == Key::Ctrl('c') {
            return vec![Action::Quit];
        }
        match std::mem::replace(&mut self.mode, Mode::Normal) {
            Mode::Normal => self.normal_key(key, now, wall),
            Mode::Search(mut text) => {
                match key {
                    Key::Enter => {
                        let h = self.events_height;
                        if !self.pane.set_search(&text, h) && !text.is_empty() {
                            self.say(
                                format!("no match for /{}", crate::events::one_line(&text)),
                                now,
                            );
                        }
                    }
                    Key::Esc => {}
                    Key::Backspace => {
                        text.pop();
                        self.mode = Mode::Search(text);
                    }
                    Key::Char(c) => {
                        text.push(c);
                        self.mode = Mode::Search(text);
                    }
                    _ => self.mode = Mode::Search(text),
                }
                vec![]
            }
            Mode::ConfirmStop { id, .. } => match key {
                Key::Char('y' | 'Y') | Key::Enter => {
                    self.say(format!("stopping {id}…"), now);
                    vec![Action::Stop { id }]
                }
                _ => {
                    self.say("not stopped", now);
                    vec![]
                }
            },
            Mode::Overlay(overlay) => self.overlay_key(overlay, key),
        }
    }

    fn normal_key(&mut self, key: Key, now: Instant, wall: &DateTime<Utc>) -> Vec<Action> {
        let h = self.events_height.max(1);
        match key {
            Key::Char('q') => return vec![Action::Quit],
            Key::Char('?') => self.mode = Mode::Overlay(Overlay::Help),
            Key::Tab => {
                self.focus = match self.focus {
                    Focus::Table => Focus::Events,
                    Focus::Events => Focus::Table,
                }
            }
            Key::Char('/') => self.mode = Mode::Search(String::new()),
            Key::Char('n') => {
                if self.pane.search().is_none() {
                    self.say("no search yet: / to search", now);
                } else if !self.pane.next_match(true, h) {
                    self.say("no match", now);
                }
            }
            Key::Char('N') => {
                if self.pane.search().is_none() {
                    self.say("no search yet: / to search", now);
                } else if !self.pane.next_match(false, h) {
                    self.say("no match", now);
                }
            }
            Key::Char('e') if !self.pane.next_error(h) => {
                self.say("no line looks like an error ([view] error_regex)", now);
            }
            Key::Char('s') => match self.selected_info() {
                Some(info) if info.is_active() => {
                    self.mode = Mode::ConfirmStop {
                        id: info.id.clone(),
                        description: info.description.clone(),
                    }
                }
                Some(info) => {
                    let id = info.id.clone();
                    self.say(format!("{id} already ended"), now)
                }
                None => self.say("select a monitor first (↑/↓ in the table)", now),
            },
            Key::Char('o') => match self.selected_info() {
                Some(info) => {
                    let (id, path) = (info.id.clone(), info.output_path.clone());
                    return vec![Action::ReadOutput {
                        monitor_id: id,
                        path,
                        from: u64::MAX,
                        count: self.output_height.max(1) as u64,
                    }];
                }
                None => self.say("select a monitor first (↑/↓ in the table)", now),
            },
            Key::Char('w') => {
                let session = self
                    .selected_info()
                    .map(|i| i.session.clone())
                    .or_else(|| self.scope.session().map(String::from));
                match session {
                    Some(session) => {
                        self.mode = Mode::Overlay(Overlay::Wake {
                            session: session.clone(),
                            status: None,
                            history: vec![],
                        });
                        return vec![Action::LoadWake { session }];
                    }
                    None => self.say("select a monitor first: its session's route is shown", now),
                }
            }
            Key::Char('c') => {
                self.mode = Mode::Overlay(Overlay::Consumers(None));
                return vec![Action::LoadConsumers {
                    session: self.scope.session().map(String::from),
                }];
            }
            Key::Up | Key::Char('k') => match self.focus {
                Focus::Table => self.move_selection(false, wall),
                Focus::Events => self.pane.scroll_up(1, h),
            },
            Key::Down | Key::Char('j') => match self.focus {
                Focus::Table => self.move_selection(true, wall),
                Focus::Events => self.pane.scroll_down(1, h),
            },
            Key::PageUp => self.pane.scroll_up(h.saturating_sub(1).max(1), h),
            Key::PageDown => self.pane.scroll_down(h.saturating_sub(1).max(1), h),
            Key::Home | Key::Char('g') => self.pane.home(h),
            Key::End | Key::Char('G') => self.pane.end(),
            Key::Esc if self.focus == Focus::Table => self.select(None),
            Key::Enter if self.focus == Focus::Table => self.focus = Focus::Events,
            _ => {}
        }
        vec![]
    }

    fn overlay_key(&mut self, overlay: Overlay, key: Key) -> Vec<Action> {
        let close = matches!(key, Key::Esc | Key::Char('q'));
        match overlay {
            Overlay::Output(view) if !close && key != Key::Char('o') => {
                let page = self.output_height.max(1) as u64;
                let last_top = view.total.saturating_sub(page) + 1;
                let top = match key {
                    Key::Up | Key::Char('k') => view.top.saturating_sub(1).max(1),
                    Key::Down | Key::Char('j') => (view.top + 1).min(last_top),
                    Key::PageUp => view.top.saturating_sub(page).max(1),
                    Key::PageDown | Key::Char(' ') => (view.top + page).min(last_top),
                    Key::Home | Key::Char('g') => 1,
                    Key::End | Key::Char('G') => u64::MAX,
                    _ => view.top,
                };
                let action = ReadOutputOf(&view).at(top, page);
                self.mode = Mode::Overlay(Overlay::Output(view));
                vec![action]
            }
            Overlay::Wake { session, .. } if key == Key::Char('r') => {
                self.mode = Mode::Overlay(overlay_wake_loading(session.clone()));
                vec![Action::LoadWake { session }]
            }
            Overlay::Consumers(_) if key == Key::Char('r') => {
                self.mode = Mode::Overlay(Overlay::Consumers(None));
                vec![Action::LoadConsumers {
                    session: self.scope.session().map(String::from),
                }]
            }
            other if !close && !matches!(other, Overlay::Help | Overlay::Output(_)) => {
                self.mode = Mode::Overlay(other);
                vec![]
            }
            _ => vec![],
        }
    }

    /// The selected monitor's info.
    pub fn selected_info(&self) -> Option<&MonitorInfo> {
        self.selected
            .as_ref()
            .and_then(|id| self.monitors.get(id))
            .map(|r| &r.info)
    }

    /// Shows a window of an output file (the answer to
    /// [`Action::ReadOutput`]).
    pub fn set_output(&mut self, view: OutputView) {
        match &self.mode {
            Mode::Overlay(Overlay::Output(old)) if old.monitor_id != view.monitor_id => {}
            Mode::Normal | Mode::Overlay(Overlay::Output(_)) => {
                self.mode = Mode::Overlay(Overlay::Output(view))
            }
            _ => {}
        }
    }

    /// The answer to [`Action::LoadWake`].
    pub fn set_wake(&mut self, got: Result<Option<WakeStatus>, CallError>, wall: DateTime<Utc>) {
        if let Mode::Overlay(Overlay::Wake {
            status, history, ..
        }) = &mut self.mode
        {
            if let Ok(Some(w)) = &got {
                let changed = history
                    .last()
                    .is_none_or(|(_, acked, n)| (*acked, *n) != (w.acked_seq, w.wakes_delivered));
                if changed {
                    history.push((wall, w.acked_seq, w.wakes_delivered));
                    if history.len() > 50 {
                        history.remove(0);
                    }
                }
            }
            *status = Some(got);
        }
    }

    /// The answer to [`Action::LoadConsumers`].
    pub fn set_consumers(&mut self, got: Result<Vec<ConsumerInfo>, CallError>) {
        if let Mode::Overlay(Overlay::Consumers(c)) = &mut self.mode {
            *c = Some(got);
        }
    }

    /// What to ask again periodically while an overlay is open.
    pub fn refresh(&self) -> Option<Action> {
        match &self.mode {
            Mode::Overlay(Overlay::Wake { session, .. }) => Some(Action::LoadWake {
                session: session.clone(),
            }),
            Mode::Overlay(Overlay::Consumers(_)) => Some(Action::LoadConsumers {
                session: self.scope.session().map(String::from),
            }),
            _ => None,
        }
    }
}

fn overlay_wake_loading(session: String) -> Overlay {
    Overlay::Wake {
        session,
        status: None,
        history: vec![],
    }
}

struct ReadOutputOf<'a>(&'a OutputView);

impl ReadOutputOf<'_> {
    fn at(&self, top: u64, count: u64) -> Action {
        Action::ReadOutput {
            monitor_id: self.0.monitor_id.clone(),
            path: self.0.path.clone(),
            from: top,
            count,
        }
    }
}

/// Decides when to draw: at most once per `interval`, and only when
/// something changed. Pure: the clock is passed in.
#[derive(Debug, Clone)]
pub struct Redraw {
    interval: Duration,
    last: Option<Instant>,
    dirty: bool,
}

impl Redraw {
    /// At most one draw per `interval` (33 ms: ~30 a second).
    pub fn new(interval: Duration) -> Self {
        Redraw {
            interval,
            last: None,
            dirty: true,
        }
    }

    /// Something changed.
    pub fn mark(&mut self) {
        self.dirty = true;
    }

    /// When the next draw is due, if one is.
    pub fn due(&self) -> Option<Instant> {
        if !self.dirty {
            return None;
        }
        Some(match self.last {
            Some(last) => last + self.interval,
            None => Instant::now(),
        })
    }

    /// Whether to draw at `now`.
    pub fn should_draw(&self, now: Instant) -> bool {
        self.dirty && self.last.is_none_or(|l| now >= l + self.interval)
    }

    /// A draw happened at `now`.
    pub fn drawn(&mut self, now: Instant) {
        self.last = Some(now);
        self.dirty = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::{at, event, info, lines};

    fn app() -> App {
        let mut a = App::new(
            Scope::Session("t".into()),
            Regex::new(wakeful_protocol::view::DEFAULT_ERROR_REGEX).unwrap(),
        );
        a.apply_list(vec![info("mon-a", 0), info("mon-b", 5)]);
        a
    }

    #[test]
    fn stop_needs_a_selection_and_a_confirmation() {
        let mut a = app();
        let now = Instant::now();
        let wall = at(10);
        assert!(a.key(Key::Char('s'), now, &wall).is_empty());
        assert!(a.status_at(now).unwrap().contains("select a monitor"));
        a.key(Key::Down, now, &wall);
        assert_eq!(a.selected.as_deref(), Some("mon-a"));
        assert_eq!(a.pane.filter(), Some("mon-a"));
        a.key(Key::Char('s'), now, &wall);
        assert!(matches!(a.mode, Mode::ConfirmStop { ref id, .. } if id == "mon-a"));
        // Anything but y cancels.
        assert!(a.key(Key::Char('x'), now, &wall).is_empty());
        assert_eq!(a.mode, Mode::Normal);
        a.key(Key::Char('s'), now, &wall);
        assert_eq!(
            a.key(Key::Char('y'), now, &wall),
            [Action::Stop { id: "mon-a".into() }]
        );
        // Esc in the table shows all again.
        a.key(Key::Esc, now, &wall);
        assert_eq!(a.pane.filter(), None);
        assert_eq!(a.key(Key::Char('q'), now, &wall), [Action::Quit]);
        assert_eq!(a.key(Key::Ctrl('c'), now, &wall), [Action::Quit]);
    }

    #[test]
    fn search_mode_types_and_applies() {
        let mut a = app();
        let now = Instant::now();
        let wall = at(10);
        a.apply_events(&[event(1, "mon-a", 1, lines(30))]);
        a.key(Key::Char('/'), now, &wall);
        for c in "line 1x".chars() {
            a.key(Key::Char(c), now, &wall);
        }
        a.key(Key::Backspace, now, &wall);
        assert_eq!(a.mode, Mode::Search("line 1".into()));
        a.key(Key::Enter, now, &wall);
        assert_eq!(a.mode, Mode::Normal);
        assert!(a.pane.cursor().is_some());
        a.key(Key::Char('n'), now, &wall);
        a.key(Key::Char('N'), now, &wall);
        a.key(Key::Char('/'), now, &wall);
        a.key(Key::Char('z'), now, &wall);
        a.key(Key::Char('z'), now, &wall);
        a.key(Key::Enter, now, &wall);
        assert!(a.status_at(now).unwrap().contains("no match for /zz"));
        assert!(a.status_at(now + Duration::from_secs(6)).is_none());
    }

    #[test]
    fn overlays_open_load_and_close() {
        let mut a = app();
        let now = Instant::now();
        let wall = at(10);
        a.key(Key::Char('?'), now, &wall);
        assert_eq!(a.mode, Mode::Overlay(Overlay::Help));
        a.key(Key::Char('x'), now, &wall);
        assert_eq!(a.mode, Mode::Normal);
        assert_eq!(
            a.key(Key::Char('c'), now, &wall),
            [Action::LoadConsumers {
                session: Some("t".into())
            }]
        );
        a.set_consumers(Ok(vec![]));
        assert_eq!(a.mode, Mode::Overlay(Overlay::Consumers(Some(Ok(vec![])))));
        assert!(a.refresh().is_some());
        a.key(Key::Esc, now, &wall);
        assert_eq!(a.key(Key::Char('w'), now, &wall).len(), 1);
        a.set_wake(Ok(None), at(11));
        a.key(Key::Char('q'), now, &wall);
        assert_eq!(a.mode, Mode::Normal);
        // o: the output file, from its last page; scrolling asks for windows.
        a.key(Key::Down, now, &wall);
        a.output_height = 10;
        let actions = a.key(Key::Char('o'), now, &wall);
        assert!(matches!(
            &actions[..],
            [Action::ReadOutput {
                from: u64::MAX,
                count: 10,
                ..
            }]
        ));
        a.set_output(OutputView {
            monitor_id: "mon-a".into(),
            path: "/tmp/mon-a.log".into(),
            total: 100,
            top: 91,
            lines: vec![],
            error: None,
        });
        let actions = a.key(Key::PageUp, now, &wall);
        assert!(matches!(
            &actions[..],
            [Action::ReadOutput { from: 81, .. }]
        ));
        let actions = a.key(Key::Home, now, &wall);
        assert!(matches!(&actions[..], [Action::ReadOutput { from: 1, .. }]));
        a.key(Key::Esc, now, &wall);
        assert_eq!(a.mode, Mode::Normal);
    }

    #[test]
    fn redraws_at_most_once_an_interval() {
        let t0 = Instant::now();
        let mut r = Redraw::new(Duration::from_millis(33));
        assert!(r.should_draw(t0));
        r.drawn(t0);
        assert!(
            !r.should_draw(t0 + Duration::from_millis(50)),
            "nothing changed"
        );
        r.mark();
        assert!(!r.should_draw(t0 + Duration::from_millis(10)));
        assert_eq!(r.due(), Some(t0 + Duration::from_millis(33)));
        assert!(r.should_draw(t0 + Duration::from_millis(33)));
    }
}
