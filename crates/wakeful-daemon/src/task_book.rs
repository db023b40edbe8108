//! The daemon's background tasks as [`State`](crate::state::State) holds
//! them ([`Tasks`]): the pure book of [`wakeful_core::task`], what each
//! task was created with, and a line to each task's runner. The requests
//! that use it (`task_create`, `task_get`, …) are served by
//! `server::tasks`, which also runs the waits; an upgrade hands the book
//! over ([`Tasks::hand_over`]) and the next program restores it
//! ([`Tasks::restore`]).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::{oneshot, watch};
use wakeful_core::task::{Book, Entry, State as TaskState, TaskError};
use wakeful_core::Event;
use wakeful_protocol::{CreateTask, ErrorKind, TaskInfo};

use crate::upgrade::{HandedTask, Kept};

/// Live tasks one session may hold: working, or completed and not yet
/// handed over.
pub const PER_SESSION: usize = 16;

/// What a task's wait brought.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// A batch of events.
    Events(Vec<Event>),
    /// No event that wakes within this many ms.
    TimedOut(u64),
}

/// What the runner of a completed task is told.
pub(crate) enum Decision {
    /// Acknowledge the first `keep` events.
    Hand(usize),
}

/// A running task's controls.
pub(crate) struct Runner {
    /// Ends the wait (cancel): dropping it does the same.
    pub(crate) cancel: Option<oneshot::Sender<()>>,
    /// Tells a completed task's runner to acknowledge.
    pub(crate) decide: Option<oneshot::Sender<Decision>>,
}

/// The daemon's tasks: the book, and a line to each runner.
pub(crate) struct Tasks {
    book: Mutex<Book<Outcome>>,
    runners: Mutex<HashMap<String, Runner>>,
    /// What each task was created with (its wait, the client's note).
    specs: Mutex<HashMap<String, CreateTask>>,
    /// Bumped whenever a task changes: `task_get` with `wait_ms` waits on it.
    changed: watch::Sender<u64>,
}

impl Default for Tasks {
    fn default() -> Self {
        Tasks {
            book: Mutex::new(Book::new(PER_SESSION)),
            runners: Mutex::new(HashMap::new()),
            specs: Mutex::new(HashMap::new()),
            changed: watch::channel(0).0,
        }
    }
}

/// Why a task request failed: the kind (the client's exit code) and what
/// to say.
pub(crate) fn failure(e: TaskError) -> (ErrorKind, String) {
    let kind = match e {
        TaskError::TooMany { .. } => ErrorKind::Limit,
        TaskError::Unknown => ErrorKind::NotFound,
        TaskError::Ended(_) => ErrorKind::Invalid,
        TaskError::Taken => ErrorKind::Internal,
    };
    (kind, e.to_string())
}

impl Tasks {
    /// The book (a panic while holding this lock leaves consistent data
    /// behind).
    pub(crate) fn book(&self) -> MutexGuard<'_, Book<Outcome>> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The runners' controls, by task id.
    pub(crate) fn runners(&self) -> MutexGuard<'_, HashMap<String, Runner>> {
        self.runners.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What each task was created with, by task id.
    pub(crate) fn specs(&self) -> MutexGuard<'_, HashMap<String, CreateTask>> {
        self.specs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says that a task changed.
    pub(crate) fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that sees every [`Tasks::bump`].
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Task `id` of `session` as a reply shows it.
    pub(crate) fn info(
        &self,
        id: &str,
        session: &str,
        now: i64,
    ) -> Result<TaskInfo, (ErrorKind, String)> {
        let mut found = self
            .book()
            .get(id, session, now)
            .map(|t| info(id, t))
            .ok_or_else(|| failure(TaskError::Unknown))?;
        found.note = self.specs().get(id).and_then(|c| c.note.clone());
        Ok(found)
    }

    /// What the program that replaces this one needs to go on with every
    /// task (an upgrade): each task as its client sees it; one whose
    /// outcome was not handed over yet is run again there (what it held
    /// was not acknowledged, so its wait finds it again).
    pub(crate) fn hand_over(&self) -> Vec<HandedTask> {
        let book = self.book();
        let specs = self.specs();
        book.entries()
            .filter_map(|(id, t)| {
                let request = specs.get(id)?.clone();
                let kept = match &t.state {
                    TaskState::Working => None,
                    TaskState::Completed(_) if !t.handed => None,
                    TaskState::Completed(Outcome::Events(events)) => {
                        Some(Kept::Events(events.clone()))
                    }
                    TaskState::Completed(Outcome::TimedOut(ms)) => Some(Kept::TimedOut(*ms)),
                    TaskState::Failed(why) => Some(Kept::Failed(why.clone())),
                    TaskState::Cancelled => Some(Kept::Cancelled),
                };
                Some(HandedTask {
                    id: id.clone(),
                    request,
                    created_ms: t.created_ms,
                    updated_ms: t.updated_ms,
                    kept,
                })
            })
            .collect()
    }

    /// Puts back a task the program before this one handed over, as it
    /// was; one that was working (or had an outcome not handed yet) comes
    /// back working, and its request is returned with what is left of its
    /// time at `now`, for its wait to run again.
    pub(crate) fn restore(&self, t: HandedTask, now: i64) -> Option<CreateTask> {
        let HandedTask {
            id,
            mut request,
            created_ms,
            updated_ms,
            kept,
        } = t;
        let (task_state, handed) = match kept {
            None => (TaskState::Working, false),
            Some(Kept::Events(events)) => (TaskState::Completed(Outcome::Events(events)), true),
            Some(Kept::TimedOut(ms)) => (TaskState::Completed(Outcome::TimedOut(ms)), true),
            Some(Kept::Failed(why)) => (TaskState::Failed(why), false),
            Some(Kept::Cancelled) => (TaskState::Cancelled, false),
        };
        let working = matches!(task_state, TaskState::Working);
        self.book().restore(
            id.clone(),
            Entry {
                session: request.session.clone(),
                created_ms,
                updated_ms,
                ttl_ms: request.ttl_ms,
                state: task_state,
                handed,
            },
        );
        self.specs().insert(id, request.clone());
        if !working {
            return None;
        }
        let ran = u64::try_from(now.saturating_sub(created_ms)).unwrap_or(0);
        request.ttl_ms = request.ttl_ms.saturating_sub(ran).max(1);
        request.timeout_ms = request.timeout_ms.map(|t| t.saturating_sub(ran).max(1));
        Some(request)
    }

    /// Forgets expired tasks; their runners (if any still run) let go.
    pub(crate) fn expire(&self, now: i64) {
        let gone = self.book().expire(now);
        let mut runners = self.runners();
        let mut specs = self.specs();
        for id in gone {
            runners.remove(&id);
            specs.remove(&id);
        }
    }
}

fn info(id: &str, t: &Entry<Outcome>) -> TaskInfo {
    let (events, timed_out_ms, error) = match &t.state {
        TaskState::Completed(Outcome::Events(events)) => (events.clone(), None, None),
        TaskState::Completed(Outcome::TimedOut(ms)) => (Vec::new(), Some(*ms), None),
        TaskState::Failed(why) => (Vec::new(), None, Some(why.clone())),
        TaskState::Working | TaskState::Cancelled => (Vec::new(), None, None),
    };
    TaskInfo {
        id: id.to_string(),
        status: t.status().as_str().to_string(),
        created_ms: t.created_ms,
        updated_ms: t.updated_ms,
        ttl_ms: t.ttl_ms,
        events,
        timed_out_ms,
        error,
        handed: t.handed,
        note: None,
    }
}
