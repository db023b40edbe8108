//! Background tasks: a wait that a client (an MCP client speaking the tasks
//! extension) hands to the daemon and fetches later, by an id. This module
//! is the book of them, a pure state machine with the clock passed in; the
//! daemon runs the waits and keeps the book.
//!
//! A task is `working` until its wait ends, then `completed` (with its
//! outcome), `failed`, or `cancelled`. A task lives for its time to live,
//! counted from its creation; after that it is forgotten, whatever its
//! status. Once its outcome was handed over, it is kept only a short while
//! longer (for a client that asks again), at most `keep_ms` of
//! [`Book::hand`]. Each session holds at most [`Book::per_session`] live
//! tasks: working, or completed and not yet handed over (the ones that hold
//! events back from the session's other readers).
//!
//! ```
//! use wakeful_core::task::{Book, Status};
//!
//! let mut book: Book<&str> = Book::new(2);
//! book.create("t1".into(), "s".into(), 1_000, 0).unwrap();
//! assert_eq!(book.get("t1", "s", 10).unwrap().status(), Status::Working);
//! assert!(book.get("t1", "other session", 10).is_none());
//! book.complete("t1", "the events", 20);
//! assert!(book.hand("t1", "s", 30, 100));   // the first hand-over acknowledges
//! assert!(!book.hand("t1", "s", 40, 100));  // later ones do not
//! assert!(book.get("t1", "s", 129).is_some());
//! assert!(book.get("t1", "s", 130).is_none()); // kept 100 ms after the hand-over
//! ```

use std::collections::HashMap;

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Its wait runs.
    Working,
    /// Its wait ended with an outcome.
    Completed,
    /// Its wait could not run (the message says why).
    Failed,
    /// The client cancelled it.
    Cancelled,
}

impl Status {
    /// Whether the task will not change any more.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Status::Working)
    }

    /// Its name on the wire (`working`, `completed`, `failed`, `cancelled`).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }
}

/// What a task holds in each status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State<R> {
    /// Its wait runs.
    Working,
    /// Its wait ended with this outcome.
    Completed(R),
    /// Its wait could not run, for this reason.
    Failed(String),
    /// The client cancelled it.
    Cancelled,
}

/// One task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<R> {
    /// The session it belongs to; only that session sees it.
    pub session: String,
    /// When it was created (ms since the epoch).
    pub created_ms: i64,
    /// When its status last changed (ms since the epoch).
    pub updated_ms: i64,
    /// How long it lives after its creation.
    pub ttl_ms: u64,
    /// Its status and outcome.
    pub state: State<R>,
    /// Its outcome was handed to the client (the first hand-over is the
    /// one that acknowledges).
    pub handed: bool,
}

impl<R> Entry<R> {
    /// Its status.
    pub fn status(&self) -> Status {
        match self.state {
            State::Working => Status::Working,
            State::Completed(_) => Status::Completed,
            State::Failed(_) => Status::Failed,
            State::Cancelled => Status::Cancelled,
        }
    }

    /// Whether it counts against its session's limit: working, or
    /// completed and not yet handed over.
    pub fn is_live(&self) -> bool {
        match self.state {
            State::Working => true,
            State::Completed(_) => !self.handed,
            State::Failed(_) | State::Cancelled => false,
        }
    }

    /// When it is forgotten (ms since the epoch).
    pub fn expires_ms(&self) -> i64 {
        self.created_ms
            .saturating_add(i64::try_from(self.ttl_ms).unwrap_or(i64::MAX))
    }
}

/// Why a task cannot be created or changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// The session holds its limit of live tasks.
    #[error("session `{session}` already has {limit} live background tasks (the limit); fetch or cancel one first, or wait for one to end")]
    TooMany {
        /// The session.
        session: String,
        /// The limit.
        limit: usize,
    },
    /// No such task for this session: unknown, expired, or another
    /// session's (the same answer for all three, so that it reveals
    /// nothing).
    #[error("unknown task id")]
    Unknown,
    /// The task already ended; it cannot be cancelled.
    #[error("the task is already {0}; only a working task can be cancelled")]
    Ended(&'static str),
    /// The id is in use (ids are random: this is a bug).
    #[error("task id already in use")]
    Taken,
}

/// The daemon's tasks.
#[derive(Debug)]
pub struct Book<R> {
    tasks: HashMap<String, Entry<R>>,
    per_session: usize,
}

impl<R> Book<R> {
    /// An empty book that holds at most `per_session` live tasks per
    /// session.
    pub fn new(per_session: usize) -> Self {
        Book {
            tasks: HashMap::new(),
            per_session,
        }
    }

    /// The limit of live tasks per session.
    pub fn per_session(&self) -> usize {
        self.per_session
    }

    /// Adds a working task `id` of `session`, created at `now_ms`.
    pub fn create(
        &mut self,
        id: String,
        session: String,
        ttl_ms: u64,
        now_ms: i64,
    ) -> Result<(), TaskError> {
        self.expire(now_ms);
        if self.tasks.contains_key(&id) {
            return Err(TaskError::Taken);
        }
        let live = self
            .tasks
            .values()
            .filter(|t| t.session == session && t.is_live())
            .count();
        if live >= self.per_session {
            return Err(TaskError::TooMany {
                session,
                limit: self.per_session,
            });
        }
        self.tasks.insert(
            id,
            Entry {
                session,
                created_ms: now_ms,
                updated_ms: now_ms,
                ttl_ms,
                state: State::Working,
                handed: false,
            },
        );
        Ok(())
    }

    /// Task `id` of `session`, unless it is unknown, another session's, or
    /// expired at `now_ms`.
    pub fn get(&self, id: &str, session: &str, now_ms: i64) -> Option<&Entry<R>> {
        self.tasks
            .get(id)
            .filter(|t| t.session == session && now_ms < t.expires_ms())
    }

    /// Ends working task `id` with `outcome`; `false` if it was not working
    /// (cancelled meanwhile, or forgotten).
    pub fn complete(&mut self, id: &str, outcome: R, now_ms: i64) -> bool {
        self.end(id, State::Completed(outcome), now_ms)
    }

    /// Ends working task `id` as failed; `false` if it was not working.
    pub fn fail(&mut self, id: &str, reason: String, now_ms: i64) -> bool {
        self.end(id, State::Failed(reason), now_ms)
    }

    fn end(&mut self, id: &str, state: State<R>, now_ms: i64) -> bool {
        match self.tasks.get_mut(id) {
            Some(t) if t.status() == Status::Working => {
                t.state = state;
                t.updated_ms = now_ms;
                true
            }
            _ => false,
        }
    }

    /// Cancels working task `id` of `session`.
    pub fn cancel(&mut self, id: &str, session: &str, now_ms: i64) -> Result<(), TaskError> {
        if self.get(id, session, now_ms).is_none() {
            return Err(TaskError::Unknown);
        }
        match self.tasks.get_mut(id) {
            Some(t) if t.status() == Status::Working => {
                t.state = State::Cancelled;
                t.updated_ms = now_ms;
                Ok(())
            }
            Some(t) => Err(TaskError::Ended(t.status().as_str())),
            None => Err(TaskError::Unknown),
        }
    }

    /// Notes that completed task `id`'s outcome reached its client: `true`
    /// the first time only (the time to acknowledge what it holds). The
    /// task is then kept at most `keep_ms` longer.
    pub fn hand(&mut self, id: &str, session: &str, now_ms: i64, keep_ms: u64) -> bool {
        if self.get(id, session, now_ms).is_none() {
            return false;
        }
        match self.tasks.get_mut(id) {
            Some(t) if t.status() == Status::Completed && !t.handed => {
                t.handed = true;
                let until = now_ms.saturating_add(i64::try_from(keep_ms).unwrap_or(i64::MAX));
                if until < t.expires_ms() {
                    t.ttl_ms = u64::try_from(until - t.created_ms).unwrap_or(0);
                }
                true
            }
            _ => false,
        }
    }

    /// Every task, expired ones included until the next [`Book::expire`].
    pub fn entries(&self) -> impl Iterator<Item = (&String, &Entry<R>)> {
        self.tasks.iter()
    }

    /// Puts task `id` back as it was (a new program going on with the
    /// tasks of the one it replaced), whatever the limit.
    pub fn restore(&mut self, id: String, entry: Entry<R>) {
        self.tasks.insert(id, entry);
    }

    /// Forgets task `id` (its wait let go of what it held).
    pub fn forget(&mut self, id: &str) {
        self.tasks.remove(id);
    }

    /// Forgets every task expired at `now_ms`; returns their ids.
    pub fn expire(&mut self, now_ms: i64) -> Vec<String> {
        let gone: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, t)| now_ms >= t.expires_ms())
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            self.tasks.remove(id);
        }
        gone
    }

    /// How many tasks the book holds (expired ones included until the next
    /// [`Book::expire`]).
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether the book holds no task.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_seen_only_by_its_session_and_only_within_its_ttl() {
        let mut book: Book<u8> = Book::new(4);
        book.create("a".into(), "s1".into(), 100, 1_000).unwrap();
        assert!(book.get("a", "s1", 1_099).is_some());
        assert!(book.get("a", "s2", 1_050).is_none());
        assert!(book.get("b", "s1", 1_050).is_none());
        assert!(book.get("a", "s1", 1_100).is_none());
        assert_eq!(book.expire(1_100), vec!["a".to_string()]);
        assert!(book.is_empty());
    }

    #[test]
    fn handed_cancelled_and_failed_tasks_free_their_room() {
        let mut book: Book<u8> = Book::new(2);
        book.create("a".into(), "s".into(), 1_000, 0).unwrap();
        book.create("b".into(), "s".into(), 1_000, 0).unwrap();
        assert!(book.create("c".into(), "s".into(), 1_000, 1).is_err());
        book.complete("a", 1, 2);
        assert!(
            book.create("c".into(), "s".into(), 1_000, 3).is_err(),
            "not handed yet"
        );
        assert!(book.hand("a", "s", 4, 50));
        book.create("c".into(), "s".into(), 1_000, 5).unwrap();
        book.cancel("b", "s", 6).unwrap();
        book.create("d".into(), "s".into(), 1_000, 7).unwrap();
        assert!(book.create("e".into(), "s".into(), 1_000, 8).is_err());
        // The handed task is kept 50 ms after its hand-over, not its full TTL.
        assert!(book.get("a", "s", 53).is_some());
        assert!(book.get("a", "s", 54).is_none());
    }

    #[test]
    fn the_limit_counts_live_tasks_of_one_session_and_expired_ones_free_room() {
        let mut book: Book<u8> = Book::new(2);
        book.create("a".into(), "s".into(), 100, 0).unwrap();
        book.create("b".into(), "s".into(), 1_000, 0).unwrap();
        let e = book.create("c".into(), "s".into(), 100, 10).unwrap_err();
        assert!(matches!(e, TaskError::TooMany { limit: 2, .. }), "{e}");
        assert!(e.to_string().contains("fetch or cancel one"), "{e}");
        book.create("x".into(), "other".into(), 100, 10).unwrap();
        // "a" expired at 100: its room is free again.
        book.create("c".into(), "s".into(), 100, 100).unwrap();
        assert_eq!(
            book.create("c".into(), "s2".into(), 100, 100),
            Err(TaskError::Taken)
        );
    }

    #[test]
    fn only_a_working_task_completes_fails_or_is_cancelled() {
        let mut book: Book<&str> = Book::new(8);
        for id in ["a", "b", "c"] {
            book.create(id.into(), "s".into(), 1_000, 0).unwrap();
        }
        assert!(book.complete("a", "out", 5));
        assert!(!book.complete("a", "again", 6));
        assert!(!book.fail("a", "late".into(), 6));
        assert_eq!(
            book.get("a", "s", 7).unwrap().state,
            State::Completed("out")
        );
        assert_eq!(book.get("a", "s", 7).unwrap().updated_ms, 5);
        assert_eq!(book.cancel("a", "s", 8), Err(TaskError::Ended("completed")));
        book.cancel("b", "s", 8).unwrap();
        assert!(!book.complete("b", "after cancel", 9));
        assert_eq!(book.get("b", "s", 9).unwrap().status(), Status::Cancelled);
        assert!(book.fail("c", "no daemon".into(), 9));
        assert_eq!(book.cancel("c", "other", 9), Err(TaskError::Unknown));
        assert_eq!(book.cancel("nope", "s", 9), Err(TaskError::Unknown));
        assert!(Status::Failed.is_terminal() && !Status::Working.is_terminal());
    }

    #[test]
    fn a_completed_task_is_handed_over_once_and_only_to_its_session() {
        let mut book: Book<u8> = Book::new(8);
        book.create("a".into(), "s".into(), 1_000, 0).unwrap();
        assert!(
            !book.hand("a", "s", 1, 10_000),
            "a working task has nothing to hand over"
        );
        book.complete("a", 7, 2);
        assert!(!book.hand("a", "other", 3, 10_000));
        assert!(book.hand("a", "s", 3, 10_000));
        assert!(!book.hand("a", "s", 4, 10_000));
        assert!(book.get("a", "s", 4).unwrap().handed);
        assert!(
            book.get("a", "s", 999).is_some(),
            "the TTL is the sooner end"
        );
        assert!(!book.hand("a", "s", 1_000, 10_000), "expired");
        book.forget("a");
        assert_eq!(book.len(), 0);
    }
}
