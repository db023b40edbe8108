//! The event hub: where an event gets its place in the log and goes to
//! every reader, with as few hand-overs as possible.
//!
//! **Committing.** The task that produced entries (a monitor, a client's
//! acknowledgement) commits them itself: [`Hub::append`] queues them, and if
//! no commit is running, the caller becomes the committer and hands the
//! whole queue — everything other tasks queued meanwhile too: a group commit
//! — to the [`Journal`] (in the daemon: one write to the store's redo log,
//! where the events are durable), then fans the numbered events out.
//! Callers whose entries were taken by another committer wait until that
//! commit is done. Every append returns once its entries are in the log, so
//! a monitor never runs ahead of its journal (backpressure), and nothing is
//! dropped. A failing journal is retried with backoff by a task of its own,
//! and counted. What a journal does after that — the store puts its events
//! into its tables — waits for [`Hub::flush`], which a monitor calls a
//! moment later ([`Hub::claim_flush`]), once the readers have had their
//! turn.
//!
//! **Reading.** [`Hub::follow`] gives a [`Follow`]: the events matching a
//! [`Filter`] with a seq above `after`, in order, each once — first those
//! already committed (from a ring of recent events in memory, else from the
//! [`Replay`] of the store), then new ones as they are committed, pushed to
//! the follower's own bounded queue (it is woken, nothing else runs). A
//! follower that falls behind loses nothing: it is marked lagged and catches
//! up from the ring or the store. Every reader — `events --follow`, `wait`,
//! `watch`, the MCP push, the Claude Code bridge, wake routes, the live
//! view — reads through a `Follow`. Each event is encoded once, by the
//! journal that stored it ([`Committed::json`]).
//!
//! **Writing inline.** A follower whose reader can be written without
//! waiting (a pipe a client handed over) may give the hub an
//! [`InlineWriter`] ([`Follow::write_inline`]). While that follower waits,
//! caught up, in [`Follow::next`], the committer writes its events itself,
//! right after the commit, instead of queueing them and waking the
//! follower's task: the line reaches its reader with one task switch fewer.
//! The first event the writer cannot take whole at once (a full pipe) goes
//! to the queue, and so does everything after it until the follower waits
//! again; so the order stays the log's, and each event is written once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use wakeful_core::journal::{Flusher, Journal, JournalEntry, Recorded};
use wakeful_core::Event;

/// Events kept in memory for followers that catch up.
const RING_EVENTS: usize = 1024;
/// Bytes of event text kept in memory for followers that catch up.
const RING_BYTES: usize = 8 * 1024 * 1024;
/// How long after handing out events the journal is flushed (the store:
/// folds its redo log into its tables, one transaction for everything
/// waiting). A line's reader is often woken on the daemon's processor:
/// flushing at once would make it wait for the transaction; and a
/// transaction for every line cost as much as the rest of the line's way.
/// Once a second: a fold is a burst of work beside the lines that come
/// meanwhile, and at 50 ms those bursts were the slowest 1–2 % of a line's
/// ways (p99 1.3–2.0× `tail -F | grep`, against 1.0–1.1× at 1 s;
/// the history of docs/BENCHMARKS.md). Nothing is at risk meanwhile: the events are
/// durable, and every read of the store flushes first.
pub const DEFAULT_FOLD_DELAY: Duration = Duration::from_millis(1000);
/// How long [`Hub::close`] waits for a failing journal to take what is
/// queued.
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// Events a follower may have waiting before it is marked lagged.
const FOLLOWER_QUEUE: usize = 4096;
/// Events read from the ring or the store at a time while catching up.
const PAGE: usize = 1000;

/// Sets a watch's value, waking its receivers only when it changed and
/// there are any (waking none still costs a watch eight locks; the hub sets
/// two with every commit). A receiver that subscribes meanwhile misses
/// nothing: it reads the value after subscribing, and the value is set under
/// the lock that read takes.
fn publish(tx: &watch::Sender<u64>, value: u64) {
    tx.send_if_modified(|v| {
        let changed = *v != value;
        *v = value;
        changed && tx.receiver_count() > 0
    });
}

/// A committed event: its place in the log and its JSON, made once.
#[derive(Debug)]
pub struct Committed {
    /// The event.
    pub event: Arc<Event>,
    json: OnceLock<Arc<str>>,
}

impl Committed {
    /// Wraps a recorded event.
    pub fn new(r: Recorded) -> Self {
        let json = OnceLock::new();
        if let Some(j) = r.json {
            let _ = json.set(j);
        }
        Committed {
            event: r.event,
            json,
        }
    }

    /// Its seq.
    pub fn seq(&self) -> u64 {
        self.event.seq
    }

    /// Its wire JSON (`events --json`), encoded at most once.
    pub fn json(&self) -> &str {
        self.json.get_or_init(|| {
            serde_json::to_string(&*self.event)
                .map(Arc::from)
                .unwrap_or_else(|_| Arc::from("{}"))
        })
    }

    fn size(&self) -> usize {
        self.event.text.len() + 128
    }
}

/// Which events a follower wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only this session's (all sessions for `None`).
    pub session: Option<String>,
    /// Only this monitor's.
    pub monitor: Option<String>,
}

impl Filter {
    /// Every event of `session`.
    pub fn session(session: impl Into<String>) -> Self {
        Filter {
            session: Some(session.into()),
            monitor: None,
        }
    }

    /// Whether `e` passes.
    pub fn matches(&self, e: &Event) -> bool {
        self.session.as_deref().is_none_or(|s| e.session == s)
            && self.monitor.as_deref().is_none_or(|m| e.monitor_id == m)
    }
}

/// Reads committed events back from a store (for followers that start
/// behind the ring, or fell behind).
pub trait Replay: Send + Sync + 'static {
    /// Events matching `filter` with a seq above `after`, in order, at most
    /// `limit`.
    fn after(
        &self,
        filter: &Filter,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Recorded>, ReplayError>;
}

/// Why a [`Replay`] could not read events back: the store's own error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReplayError(#[source] pub Box<dyn std::error::Error + Send + Sync>);

/// Why a follower got no event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FollowError {
    /// Events were committed that can no longer be read (no store behind
    /// this hub, and they left the ring); this many were missed. Reading
    /// goes on after them.
    #[error("fell behind and missed {0} events")]
    Lagged(u64),
    /// The hub is gone.
    #[error("the event hub is closed")]
    Closed,
}

/// Writes a follower's events itself, from the task that committed them,
/// while the follower waits caught up; see the module docs.
pub trait InlineWriter: Send + Sync + 'static {
    /// Writes `e` now, whole, without waiting, and returns `true`; or
    /// writes nothing and returns `false`, leaving `e` and every event
    /// after it to the follower's own task.
    fn try_write(&self, e: &Committed) -> bool;
}

#[derive(Default)]
struct FollowerQueue {
    events: VecDeque<Arc<Committed>>,
    /// Events were dropped: the follower must catch up.
    lagged: bool,
    closed: bool,
    /// Writes the follower's events while it waits.
    inline: Option<Arc<dyn InlineWriter>>,
    /// The follower waits in [`Follow::next`], caught up, its queue empty:
    /// its events may be written inline.
    waiting: bool,
    /// The seq of the last event written inline.
    written: u64,
}

struct FollowerShared {
    filter: Filter,
    queue: Mutex<FollowerQueue>,
    notify: Notify,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct State {
    queue: Vec<JournalEntry>,
    /// Tickets handed to appends so far.
    tickets: u64,
    committing: bool,
    latest: u64,
    ring: VecDeque<Arc<Committed>>,
    ring_bytes: usize,
    followers: Vec<Arc<FollowerShared>>,
    closed: bool,
}

struct Inner {
    journal: Mutex<Box<dyn Journal>>,
    /// Flushes without the journal's lock, when the journal has one
    /// ([`Journal::flusher`]): appends go on during a flush.
    flusher: Option<Arc<dyn Flusher>>,
    state: Mutex<State>,
    /// The last ticket whose entries are committed.
    committed: watch::Sender<u64>,
    /// The last event's seq.
    latest: watch::Sender<u64>,
    replay: Option<Arc<dyn Replay>>,
    failures: AtomicU64,
    /// The journal's last attempt failed: a batch waits to be retried.
    failing: watch::Sender<bool>,
    /// Follower tasks woken by fan-outs so far.
    woken: AtomicU64,
    /// A flush runs on a blocking thread ([`Hub::flush_in_background`]),
    /// and whether another was asked for meanwhile.
    background: Mutex<(bool, bool)>,
    /// A caller of [`Hub::claim_flush`] will flush.
    flush_claimed: AtomicBool,
    fold_delay_ms: AtomicU64,
}

/// The event hub; see the module docs. Cloning gives another handle.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

/// Why an append was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the event hub is closed")]
pub struct Closed;

/// Why [`Hub::append_within`] returned without its entries in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    /// The hub is closed.
    #[error("the event hub is closed")]
    Closed,
    /// The journal did not take them in time (it is failing: a full
    /// disk); they stay queued.
    #[error("the event store did not take the entries in time (is the disk full?)")]
    TimedOut,
}

impl Hub {
    /// A hub over `journal`, whose last event has seq `latest`, reading
    /// back through `replay` when there is a store.
    pub fn new(journal: impl Journal, latest: u64, replay: Option<Arc<dyn Replay>>) -> Self {
        let flusher = journal.flusher();
        Hub {
            inner: Arc::new(Inner {
                journal: Mutex::new(Box::new(journal)),
                flusher,
                state: Mutex::new(State {
                    queue: Vec::new(),
                    tickets: 0,
                    committing: false,
                    latest,
                    ring: VecDeque::new(),
                    ring_bytes: 0,
                    followers: Vec::new(),
                    closed: false,
                }),
                committed: watch::channel(0).0,
                latest: watch::channel(latest).0,
                replay,
                failures: AtomicU64::new(0),
                failing: watch::channel(false).0,
                woken: AtomicU64::new(0),
                background: Mutex::new((false, false)),
                flush_claimed: AtomicBool::new(false),
                fold_delay_ms: AtomicU64::new(DEFAULT_FOLD_DELAY.as_millis() as u64),
            }),
        }
    }

    /// The last event's seq.
    pub fn latest(&self) -> u64 {
        lock(&self.inner.state).latest
    }

    /// The last event's seq, as a watch that changes with every commit.
    pub fn latest_watch(&self) -> watch::Receiver<u64> {
        self.inner.latest.subscribe()
    }

    /// How many times the journal failed to take a batch (each retried until
    /// it took it).
    pub fn failures(&self) -> u64 {
        self.inner.failures.load(Ordering::SeqCst)
    }

    /// Whether the journal's last attempt to take a batch failed (it is
    /// retried; appends wait meanwhile): a full disk, a locked database.
    pub fn is_failing(&self) -> bool {
        *self.inner.failing.borrow()
    }

    /// Completes once the journal is failing (at once if it is).
    pub async fn failing(&self) {
        let mut rx = self.inner.failing.subscribe();
        let _ = rx.wait_for(|f| *f).await;
    }

    /// How many times a fan-out woke a follower's task (rather than
    /// writing its events inline); a producer that sees this unchanged
    /// across its append woke no reader's task.
    pub fn followers_woken(&self) -> u64 {
        self.inner.woken.load(Ordering::Relaxed)
    }

    /// When the caller should call [`Hub::flush`], from now: `Some` when
    /// the journal holds appended entries that wait for it (see
    /// [`Journal::needs_flush`]) and no other caller has taken that on
    /// since the last flush. One flush at a time is scheduled, for all.
    pub fn claim_flush(&self) -> Option<Duration> {
        let needs = match &self.inner.flusher {
            Some(f) => f.needs_flush(),
            None => lock(&self.inner.journal).needs_flush(),
        };
        let due = needs && !self.inner.flush_claimed.swap(true, Ordering::SeqCst);
        due.then(|| Duration::from_millis(self.inner.fold_delay_ms.load(Ordering::Relaxed)))
    }

    /// How long after an append the journal is flushed (default
    /// [`DEFAULT_FOLD_DELAY`]).
    pub fn set_fold_delay(&self, delay: Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.inner.fold_delay_ms.store(ms, Ordering::Relaxed);
    }

    /// Lets the journal finish its appends (the store folds its redo log
    /// into its tables). Monitors call it a moment after their events were
    /// handed out (the delay [`Hub::claim_flush`] gives), so that the readers
    /// those events woke run first, and one transaction takes the events of
    /// many lines. A journal with a [`Flusher`] is flushed through it,
    /// while appends go on. A failure is counted and logged; the
    /// entries stay durable and wait for the next flush.
    pub fn flush(&self) {
        self.inner.flush_claimed.store(false, Ordering::SeqCst);
        let flushed = match &self.inner.flusher {
            Some(f) => f.flush(),
            None => lock(&self.inner.journal).flush(),
        };
        if let Err(e) = flushed {
            let n = self.inner.failures.fetch_add(1, Ordering::SeqCst) + 1;
            tracing::error!(
                "the event journal failed to finish its appends ({n} failures so far): {e}; \
                 they are safe and wait for the next try"
            );
        }
    }

    /// [`Hub::flush`] on a blocking thread of the runtime: the caller's
    /// task goes on at once, and no task of the runtime waits for a
    /// database transaction (the daemon runs its tasks on one thread). One
    /// at a time: asked for while one runs, that one flushes once more
    /// when it is done.
    pub fn flush_in_background(&self) {
        {
            let mut b = lock(&self.inner.background);
            if b.0 {
                b.1 = true;
                return;
            }
            *b = (true, false);
        }
        let hub = self.clone();
        tokio::task::spawn_blocking(move || loop {
            hub.flush();
            let mut b = lock(&hub.inner.background);
            if !std::mem::take(&mut b.1) {
                b.0 = false;
                return;
            }
        });
    }

    /// Commits `entries` (see the module docs) and returns once they are
    /// in the log.
    pub async fn append(&self, entries: Vec<JournalEntry>) -> Result<(), Closed> {
        let (ticket, lead) = {
            let mut st = lock(&self.inner.state);
            if st.closed {
                return Err(Closed);
            }
            st.queue.extend(entries);
            st.tickets += 1;
            let lead = !st.committing;
            st.committing = true;
            (st.tickets, lead)
        };
        if lead {
            self.commit();
        }
        // A committer has usually committed its own entries by now.
        if *self.inner.committed.borrow() >= ticket {
            return Ok(());
        }
        let mut committed = self.inner.committed.subscribe();
        committed
            .wait_for(|c| *c >= ticket)
            .await
            .map(|_| ())
            .map_err(|_| Closed)
    }

    /// Forgets the events of `monitors` kept in memory (a prune removed
    /// them from the store): readers that catch up no longer get them.
    pub fn forget(&self, monitors: &[String]) {
        if monitors.is_empty() {
            return;
        }
        let ids: std::collections::HashSet<&str> = monitors.iter().map(String::as_str).collect();
        let mut st = lock(&self.inner.state);
        let mut freed = 0;
        st.ring.retain(|c| {
            let keep = !ids.contains(c.event.monitor_id.as_str());
            if !keep {
                freed += c.size();
            }
            keep
        });
        st.ring_bytes -= freed;
    }

    /// [`Hub::append`], waiting at most `limit` for the entries to be in
    /// the log. On [`AppendError::TimedOut`] they are still queued, in
    /// order, and go in once the journal takes them again.
    pub async fn append_within(
        &self,
        entries: Vec<JournalEntry>,
        limit: Duration,
    ) -> Result<(), AppendError> {
        match tokio::time::timeout(limit, self.append(entries)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(Closed)) => Err(AppendError::Closed),
            Err(_) => Err(AppendError::TimedOut),
        }
    }

    /// Returns once everything appended before is in the log.
    pub async fn sync(&self) {
        let _ = self.append(Vec::new()).await;
    }

    /// Stops taking entries (what was appended is committed and flushed
    /// first); every follower ends with [`FollowError::Closed`] once it has
    /// read all.
    pub async fn close(&self) {
        // While the journal fails (a full disk) what waits cannot go in:
        // the hub closes anyway after a moment, rather than never (a
        // store that persists it finds those monitors running when it
        // opens, and ends or re-arms them).
        if self.is_failing() {
            let _ = tokio::time::timeout(CLOSE_WAIT, self.sync()).await;
        } else {
            self.sync().await;
        }
        self.flush();
        let followers = {
            let mut st = lock(&self.inner.state);
            st.closed = true;
            std::mem::take(&mut st.followers)
        };
        for f in followers {
            lock(&f.queue).closed = true;
            f.notify.notify_one();
        }
    }

    /// Commits the queue until it is empty. Only the committer calls this
    /// (the caller that found no commit running, or the retry task).
    fn commit(&self) {
        loop {
            let (mut batch, upto) = {
                let mut st = lock(&self.inner.state);
                if st.queue.is_empty() {
                    st.committing = false;
                    let upto = st.tickets;
                    drop(st);
                    publish(&self.inner.committed, upto);
                    return;
                }
                (std::mem::take(&mut st.queue), st.tickets)
            };
            let appended = lock(&self.inner.journal).append(&mut batch);
            let failed = appended.is_err();
            self.inner.failing.send_if_modified(|f| {
                let changed = *f != failed;
                *f = failed;
                changed
            });
            let recorded = match appended {
                Ok(r) => r,
                Err(e) => {
                    // Put the batch back in front and retry later, from a
                    // task of its own: nothing is skipped, appends wait.
                    let n = self.inner.failures.fetch_add(1, Ordering::SeqCst) + 1;
                    tracing::error!(
                        "the event journal failed ({n} failures so far): {e}; retrying"
                    );
                    {
                        let mut st = lock(&self.inner.state);
                        let later = std::mem::replace(&mut st.queue, batch);
                        st.queue.extend(later);
                    }
                    let hub = self.clone();
                    let pause = Duration::from_millis(100 * (1 << n.min(6)));
                    tokio::spawn(async move {
                        tokio::time::sleep(pause.min(Duration::from_secs(5))).await;
                        hub.commit();
                    });
                    return;
                }
            };
            let committed: Vec<Arc<Committed>> = recorded
                .into_iter()
                .map(|r| Arc::new(Committed::new(r)))
                .collect();
            self.fan_out(&committed);
            publish(&self.inner.committed, upto);
        }
    }

    /// Hands committed events to the ring and to every follower that wants
    /// them, and wakes those followers.
    fn fan_out(&self, committed: &[Arc<Committed>]) {
        let Some(last) = committed.last().map(|c| c.seq()) else {
            return;
        };
        let mut woken = Vec::new();
        {
            let mut st = lock(&self.inner.state);
            st.latest = last;
            for c in committed {
                st.ring_bytes += c.size();
                st.ring.push_back(c.clone());
            }
            while st.ring.len() > RING_EVENTS || st.ring_bytes > RING_BYTES {
                match st.ring.pop_front() {
                    Some(old) => st.ring_bytes -= old.size(),
                    None => break,
                }
            }
            for f in &st.followers {
                let mut wake = false;
                let mut guard = lock(&f.queue);
                let q = &mut *guard;
                for c in committed {
                    if !f.filter.matches(&c.event) {
                        continue;
                    }
                    if q.waiting {
                        if q.inline.as_ref().is_some_and(|w| w.try_write(c)) {
                            q.written = c.seq();
                            continue;
                        }
                        // This one and all after it go through the queue,
                        // until the follower waits again.
                        q.waiting = false;
                    }
                    wake = true;
                    if q.lagged {
                        continue;
                    }
                    if q.events.len() >= FOLLOWER_QUEUE {
                        q.lagged = true;
                        continue;
                    }
                    q.events.push_back(c.clone());
                }
                drop(guard);
                if wake {
                    woken.push(f.clone());
                }
            }
        }
        publish(&self.inner.latest, last);
        self.inner
            .woken
            .fetch_add(woken.len() as u64, Ordering::Relaxed);
        for f in woken {
            f.notify.notify_one();
        }
    }

    /// The events matching `filter` with a seq above `after`, from now on
    /// as they come; see the module docs.
    pub fn follow(&self, filter: Filter, after: u64) -> Follow {
        let shared = Arc::new(FollowerShared {
            filter,
            queue: Mutex::new(FollowerQueue::default()),
            notify: Notify::new(),
        });
        let latest = {
            let mut st = lock(&self.inner.state);
            if st.closed {
                lock(&shared.queue).closed = true;
            } else {
                st.followers.push(shared.clone());
            }
            st.latest
        };
        Follow {
            hub: self.clone(),
            shared,
            after,
            target: (after < latest).then_some(latest),
            backlog: VecDeque::new(),
        }
    }

    fn unfollow(&self, shared: &Arc<FollowerShared>) {
        lock(&self.inner.state)
            .followers
            .retain(|f| !Arc::ptr_eq(f, shared));
    }

    /// Committed events matching `filter` in `(after, upto]`, at most
    /// [`PAGE`]: from the ring when it still holds them, else from the store.
    fn read(
        &self,
        filter: &Filter,
        after: u64,
        upto: u64,
    ) -> Result<Vec<Arc<Committed>>, FollowError> {
        {
            let st = lock(&self.inner.state);
            let covered = st.ring.front().is_some_and(|f| f.seq() <= after + 1);
            if covered {
                return Ok(st
                    .ring
                    .iter()
                    .filter(|c| c.seq() > after && c.seq() <= upto && filter.matches(&c.event))
                    .take(PAGE)
                    .cloned()
                    .collect());
            }
            if self.inner.replay.is_none() {
                // No store: what left the ring is gone.
                let first = st.ring.front().map_or(upto + 1, |f| f.seq());
                let missed = first
                    .saturating_sub(after + 1)
                    .min(upto.saturating_sub(after));
                if missed > 0 {
                    return Err(FollowError::Lagged(missed));
                }
                return Ok(Vec::new());
            }
        }
        let replay = self.inner.replay.as_ref().ok_or(FollowError::Closed)?;
        match replay.after(filter, after, PAGE) {
            Ok(page) => Ok(page
                .into_iter()
                .filter(|r| r.event.seq <= upto)
                .map(|r| Arc::new(Committed::new(r)))
                .collect()),
            Err(e) => {
                tracing::error!("cannot read events back from the store: {e}");
                Err(FollowError::Closed)
            }
        }
    }
}

/// A reader of the hub; see the module docs. Dropping it stops the pushes.
pub struct Follow {
    hub: Hub,
    shared: Arc<FollowerShared>,
    /// The last seq handed out.
    after: u64,
    /// Catching up from the ring or store until this seq.
    target: Option<u64>,
    backlog: VecDeque<Arc<Committed>>,
}

impl Follow {
    /// The last seq handed out or written inline (or the `after` it
    /// started from).
    pub fn position(&self) -> u64 {
        self.after.max(lock(&self.shared.queue).written)
    }

    /// From now on, while this follower waits caught up in
    /// [`Follow::next`], the hub writes its events with `writer` instead of
    /// handing them out (see the module docs). `next` then returns only the
    /// events `writer` did not take.
    pub fn write_inline(&self, writer: Arc<dyn InlineWriter>) {
        lock(&self.shared.queue).inline = Some(writer);
    }

    /// No more inline writes; once this returns, none is under way, and the
    /// hub holds the writer no more.
    pub fn stop_inline(&self) {
        let mut q = lock(&self.shared.queue);
        q.inline = None;
        q.waiting = false;
    }

    /// The next event, waiting for it.
    pub async fn next(&mut self) -> Result<Arc<Committed>, FollowError> {
        let shared = self.shared.clone();
        loop {
            let notified = shared.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(e) = self.try_next()? {
                return Ok(e);
            }
            {
                let mut q = lock(&shared.queue);
                if q.closed {
                    return Err(FollowError::Closed);
                }
                if !q.events.is_empty() || q.lagged {
                    // Came after `try_next` looked.
                    continue;
                }
                q.waiting = q.inline.is_some();
            }
            // Inline writes only while this waits: not once it returns, nor
            // when a `select!` drops it.
            let _waiting = Waiting(&shared);
            notified.await;
        }
    }

    /// The next event if one is there now, without waiting.
    pub fn try_next(&mut self) -> Result<Option<Arc<Committed>>, FollowError> {
        loop {
            while let Some(e) = self.backlog.pop_front() {
                if e.seq() > self.after {
                    self.after = e.seq();
                    return Ok(Some(e));
                }
            }
            if let Some(target) = self.target {
                if self.after < target {
                    match self.hub.read(&self.shared.filter, self.after, target) {
                        Ok(page) if !page.is_empty() => {
                            self.backlog.extend(page);
                            continue;
                        }
                        Ok(_) => self.target = None,
                        Err(FollowError::Lagged(n)) => {
                            // Go on after what is gone.
                            let first = lock(&self.hub.inner.state)
                                .ring
                                .front()
                                .map_or(target, |f| f.seq().saturating_sub(1));
                            self.after = first.max(self.after);
                            return Err(FollowError::Lagged(n));
                        }
                        Err(e) => return Err(e),
                    }
                } else {
                    self.target = None;
                }
            }
            let mut q = lock(&self.shared.queue);
            // Events written inline count as handed out. (They are written
            // only while this follower waits, with nothing in its backlog
            // and nothing to catch up: what is read above is older.)
            self.after = self.after.max(q.written);
            if q.lagged {
                // Dropped pushes: read them back, after what is queued.
                q.lagged = false;
                self.target = Some(self.hub.latest());
            }
            if q.events.is_empty() {
                drop(q);
                if self.target.is_some_and(|t| t > self.after) {
                    continue;
                }
                return Ok(None);
            }
            self.backlog.extend(q.events.drain(..));
        }
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.hub.unfollow(&self.shared);
    }
}

/// Marks a follower as no longer waiting when [`Follow::next`] returns or
/// is dropped.
struct Waiting<'a>(&'a FollowerShared);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(&self.0.queue).waiting = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use wakeful_core::journal::{JournalError, MemoryJournal};
    use wakeful_core::{EventBody, PendingEvent};

    fn entry(session: &str, n: usize) -> JournalEntry {
        JournalEntry::Event(PendingEvent {
            wakes: true,
            session: session.into(),
            monitor_id: format!("mon-{session}"),
            ts: Utc::now(),
            text: format!("line {n}"),
            body: EventBody::MonitorEvent {
                lines: vec![format!("line {n}")],
                from_line: n as u64,
                to_line: n as u64,
            },
            replayed: false,
            host: None,
        })
    }

    fn hub() -> Hub {
        Hub::new(MemoryJournal::default(), 0, None)
    }

    #[tokio::test]
    async fn publish_sets_the_value_and_wakes_only_a_receiver_that_waits() {
        let (tx, rx) = watch::channel(0u64);
        drop(rx);
        // Nobody subscribed: the value is set all the same.
        publish(&tx, 3);
        assert_eq!(*tx.borrow(), 3);
        let mut rx = tx.subscribe();
        // The same value again is no change.
        publish(&tx, 3);
        assert!(!rx.has_changed().unwrap());
        // A receiver that waits is woken by a new value.
        let waiter = tokio::spawn(async move { *rx.wait_for(|v| *v >= 5).await.unwrap() });
        tokio::task::yield_now().await;
        publish(&tx, 4);
        publish(&tx, 5);
        let seen = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiting receiver was not woken")
            .unwrap();
        assert_eq!(seen, 5);
    }

    #[tokio::test]
    async fn a_follower_gets_what_was_there_then_what_comes_in_order() {
        let hub = hub();
        hub.append(vec![entry("a", 1), entry("b", 1), entry("a", 2)])
            .await
            .unwrap();
        let mut f = hub.follow(Filter::session("a"), 0);
        assert_eq!(f.next().await.unwrap().event.text, "line 1");
        assert_eq!(f.next().await.unwrap().event.text, "line 2");
        assert!(f.try_next().unwrap().is_none());
        hub.append(vec![entry("b", 2), entry("a", 3)])
            .await
            .unwrap();
        let e = f.next().await.unwrap();
        assert_eq!((e.seq(), e.event.text.as_str()), (5, "line 3"));
        // Encoded once, on demand, as the wire wants it.
        assert!(e.json().contains(r#""seq":5"#));
        assert!(std::ptr::eq(e.json(), e.json()));
    }

    /// The next event within 10 s: a follower that misses an event fails
    /// instead of hanging.
    async fn soon(
        next: impl std::future::Future<Output = Result<Arc<Committed>, FollowError>>,
    ) -> Arc<Committed> {
        tokio::time::timeout(Duration::from_secs(10), next)
            .await
            .expect("no event within 10 s")
            .unwrap()
    }

    /// Records what it writes; refuses while `full` (a full pipe).
    #[derive(Default)]
    struct Recording {
        full: AtomicBool,
        written: Mutex<Vec<u64>>,
    }

    impl InlineWriter for Recording {
        fn try_write(&self, e: &Committed) -> bool {
            if self.full.load(Ordering::SeqCst) {
                return false;
            }
            lock(&self.written).push(e.seq());
            true
        }
    }

    #[tokio::test]
    async fn a_waiting_follower_is_written_inline_in_order_and_each_event_once() {
        use futures_util::FutureExt;
        let hub = hub();
        let w = Arc::new(Recording::default());
        let mut f = hub.follow(Filter::session("a"), 0);
        f.write_inline(w.clone());
        // Not waiting: queued, as without a writer.
        hub.append(vec![entry("a", 1)]).await.unwrap();
        assert_eq!(soon(f.next()).await.seq(), 1);
        assert!(lock(&w.written).is_empty());
        {
            let mut next = std::pin::pin!(f.next());
            assert!((&mut next).now_or_never().is_none(), "nothing to read yet");
            // Waiting: written by the committer, nothing handed out; other
            // sessions' events are not written.
            hub.append(vec![entry("a", 2), entry("b", 1), entry("a", 3)])
                .await
                .unwrap();
            assert_eq!(*lock(&w.written), [2, 4]);
            assert!(
                (&mut next).now_or_never().is_none(),
                "written, not handed out"
            );
            // A full pipe: this event and the next go through the queue,
            // in order, even once the pipe has room again.
            w.full.store(true, Ordering::SeqCst);
            hub.append(vec![entry("a", 4)]).await.unwrap();
            w.full.store(false, Ordering::SeqCst);
            hub.append(vec![entry("a", 5)]).await.unwrap();
            assert_eq!(soon(next).await.seq(), 5);
        }
        assert_eq!(soon(f.next()).await.seq(), 6);
        assert_eq!(*lock(&w.written), [2, 4]);
        assert_eq!(f.position(), 6);
        // Not waiting (the `next` above returned, nothing waits now): queued.
        hub.append(vec![entry("a", 6)]).await.unwrap();
        assert_eq!(f.try_next().unwrap().unwrap().seq(), 7);
        // Waiting again, then dropped (as a `select!` drops it): written
        // while it waited, queued after.
        {
            let mut next = std::pin::pin!(f.next());
            assert!((&mut next).now_or_never().is_none());
            hub.append(vec![entry("a", 7)]).await.unwrap();
            assert_eq!(*lock(&w.written), [2, 4, 8]);
        }
        assert_eq!(f.position(), 8);
        hub.append(vec![entry("a", 8)]).await.unwrap();
        assert_eq!(f.try_next().unwrap().unwrap().seq(), 9);
        // Stopped: nothing more is written.
        f.stop_inline();
        assert_eq!(Arc::strong_count(&w), 1, "the hub holds the writer no more");
        let mut next = std::pin::pin!(f.next());
        assert!((&mut next).now_or_never().is_none());
        hub.append(vec![entry("a", 9)]).await.unwrap();
        assert_eq!(soon(next).await.seq(), 10);
        assert_eq!(*lock(&w.written), [2, 4, 8]);
    }

    #[tokio::test]
    async fn a_follower_starting_in_the_past_reads_only_after_its_seq() {
        let hub = hub();
        hub.append((1..=5).map(|n| entry("a", n)).collect())
            .await
            .unwrap();
        let mut f = hub.follow(Filter::default(), 3);
        assert_eq!(f.next().await.unwrap().seq(), 4);
        assert_eq!(f.next().await.unwrap().seq(), 5);
        assert_eq!(f.position(), 5);
    }

    #[tokio::test]
    async fn a_slow_follower_is_marked_lagged_and_catches_up_without_loss() {
        let hub = hub();
        let mut f = hub.follow(Filter::default(), 0);
        // More than its queue holds, all within the ring.
        let total = FOLLOWER_QUEUE + 500;
        for chunk in (1..=total).collect::<Vec<_>>().chunks(100) {
            hub.append(chunk.iter().map(|n| entry("a", *n)).collect())
                .await
                .unwrap();
        }
        let mut seqs = Vec::new();
        loop {
            match f.try_next() {
                Ok(Some(e)) => seqs.push(e.seq()),
                Ok(None) => break,
                Err(FollowError::Lagged(n)) => {
                    panic!("lost {n} although the ring is smaller: this hub has no store")
                }
                Err(e) => panic!("{e}"),
            }
        }
        // Without a store the ring (1024) is all that can be read back:
        // what the queue held, then a lag report, then the ring.
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order, once each");
    }

    /// A store behind the hub: every committed event can be read back.
    struct Log(Mutex<Vec<Recorded>>);

    impl Replay for Arc<Log> {
        fn after(
            &self,
            filter: &Filter,
            after: u64,
            limit: usize,
        ) -> Result<Vec<Recorded>, ReplayError> {
            Ok(lock(&self.0)
                .iter()
                .filter(|r| r.event.seq > after && filter.matches(&r.event))
                .take(limit)
                .cloned()
                .collect())
        }
    }

    struct Keeping {
        inner: MemoryJournal,
        log: Arc<Log>,
    }

    impl Journal for Keeping {
        fn append(&mut self, batch: &mut Vec<JournalEntry>) -> Result<Vec<Recorded>, JournalError> {
            let r = self.inner.append(batch)?;
            lock(&self.log.0).extend(r.iter().cloned());
            Ok(r)
        }
    }

    #[tokio::test]
    async fn with_a_store_a_far_behind_follower_loses_nothing() {
        let log = Arc::new(Log(Mutex::new(Vec::new())));
        let hub = Hub::new(
            Keeping {
                inner: MemoryJournal::default(),
                log: log.clone(),
            },
            0,
            Some(Arc::new(log.clone())),
        );
        let mut f = hub.follow(Filter::session("a"), 0);
        let total = FOLLOWER_QUEUE * 2 + 7;
        for chunk in (1..=total).collect::<Vec<_>>().chunks(250) {
            let mut entries = Vec::new();
            for n in chunk {
                entries.push(entry("a", *n));
                entries.push(entry("b", *n));
            }
            hub.append(entries).await.unwrap();
        }
        let mut got = Vec::new();
        while let Some(e) = f.try_next().unwrap() {
            got.push(e.event.text.clone());
        }
        let want: Vec<String> = (1..=total).map(|n| format!("line {n}")).collect();
        assert_eq!(got, want);
        // A follower created long after, from 0, reads the store.
        let mut late = hub.follow(Filter::session("b"), 0);
        let mut n = 0;
        while late.try_next().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, total);
    }

    #[tokio::test]
    async fn group_commit_numbers_concurrent_appends_once_and_in_order() {
        let hub = hub();
        let mut f = hub.follow(Filter::default(), 0);
        let mut tasks = Vec::new();
        for t in 0..8 {
            let hub = hub.clone();
            tasks.push(tokio::spawn(async move {
                for n in 0..100 {
                    hub.append(vec![entry(&format!("s{t}"), n)]).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let mut seqs = Vec::new();
        let mut per_session: std::collections::HashMap<String, Vec<u64>> = Default::default();
        while let Some(e) = f.try_next().unwrap() {
            seqs.push(e.seq());
            per_session
                .entry(e.event.session.clone())
                .or_default()
                .push(e.event.body_line());
        }
        assert_eq!(seqs, (1..=800).collect::<Vec<_>>());
        for lines in per_session.values() {
            assert_eq!(
                lines,
                &(0..100).collect::<Vec<u64>>(),
                "each producer's order kept"
            );
        }
        assert_eq!(hub.latest(), 800);
    }

    trait BodyLine {
        fn body_line(&self) -> u64;
    }

    impl BodyLine for Event {
        fn body_line(&self) -> u64 {
            match &self.body {
                EventBody::MonitorEvent { from_line, .. } => *from_line,
                _ => 0,
            }
        }
    }

    /// Fails its first batches, then numbers in memory.
    struct Flaky {
        fail: u32,
        inner: MemoryJournal,
    }

    impl Journal for Flaky {
        fn append(&mut self, batch: &mut Vec<JournalEntry>) -> Result<Vec<Recorded>, JournalError> {
            if self.fail > 0 {
                self.fail -= 1;
                return Err(JournalError::Store("disk full (test)".into()));
            }
            self.inner.append(batch)
        }
    }

    #[tokio::test]
    async fn a_failing_journal_is_retried_and_counted_never_skipped() {
        let hub = Hub::new(
            Flaky {
                fail: 2,
                inner: MemoryJournal::default(),
            },
            0,
            None,
        );
        let mut f = hub.follow(Filter::default(), 0);
        hub.append(vec![entry("a", 1)]).await.unwrap();
        hub.append(vec![entry("a", 2)]).await.unwrap();
        assert_eq!(f.next().await.unwrap().seq(), 1);
        assert_eq!(f.next().await.unwrap().seq(), 2);
        assert_eq!(hub.failures(), 2);
    }

    #[tokio::test]
    async fn closing_ends_followers_after_what_they_have() {
        let hub = hub();
        let mut f = hub.follow(Filter::default(), 0);
        hub.append(vec![entry("a", 1)]).await.unwrap();
        hub.close().await;
        assert_eq!(f.next().await.unwrap().seq(), 1);
        assert_eq!(f.next().await.unwrap_err(), FollowError::Closed);
        assert_eq!(hub.append(vec![entry("a", 2)]).await, Err(Closed));
    }

    /// A journal whose appends wait for a flush, counting flushes (and
    /// failing the first `fail` of them).
    struct TwoStep {
        waiting: usize,
        flushes: Arc<AtomicU64>,
        fail: u32,
        inner: MemoryJournal,
    }

    impl Journal for TwoStep {
        fn append(&mut self, batch: &mut Vec<JournalEntry>) -> Result<Vec<Recorded>, JournalError> {
            self.waiting += batch.len();
            self.inner.append(batch)
        }

        fn needs_flush(&self) -> bool {
            self.waiting > 0
        }

        fn flush(&mut self) -> Result<(), JournalError> {
            if self.fail > 0 {
                self.fail -= 1;
                return Err(JournalError::Store("disk full (test)".into()));
            }
            self.flushes.fetch_add(1, Ordering::SeqCst);
            self.waiting = 0;
            Ok(())
        }
    }

    #[tokio::test]
    async fn one_flush_at_a_time_is_claimed_and_closing_flushes() {
        let flushes = Arc::new(AtomicU64::new(0));
        let hub = Hub::new(
            TwoStep {
                waiting: 0,
                flushes: flushes.clone(),
                fail: 1,
                inner: MemoryJournal::default(),
            },
            0,
            None,
        );
        assert_eq!(hub.claim_flush(), None, "nothing waits");
        hub.append(vec![entry("a", 1)]).await.unwrap();
        assert_eq!(hub.claim_flush(), Some(DEFAULT_FOLD_DELAY));
        hub.append(vec![entry("a", 2)]).await.unwrap();
        assert_eq!(hub.claim_flush(), None, "claimed already");
        // A failed flush is counted; the entries wait, and can be claimed
        // again.
        hub.flush();
        assert_eq!(hub.failures(), 1);
        hub.set_fold_delay(Duration::from_millis(7));
        assert_eq!(hub.claim_flush(), Some(Duration::from_millis(7)));
        hub.flush();
        assert_eq!(flushes.load(Ordering::SeqCst), 1);
        assert_eq!(hub.claim_flush(), None);
        hub.append(vec![entry("a", 3)]).await.unwrap();
        hub.close().await;
        assert_eq!(flushes.load(Ordering::SeqCst), 2, "closing flushes");
    }

    /// A journal with a flusher whose flush waits until it is let go.
    struct SlowFlush {
        flusher: Arc<Gate>,
        inner: MemoryJournal,
    }

    /// A flush that signals it started, then waits for `open`.
    #[derive(Default)]
    struct Gate {
        started: std::sync::Mutex<bool>,
        open: std::sync::Mutex<bool>,
        changed: std::sync::Condvar,
        flushes: AtomicU64,
    }

    impl Flusher for Gate {
        fn needs_flush(&self) -> bool {
            true
        }

        fn flush(&self) -> Result<(), JournalError> {
            *lock(&self.started) = true;
            self.changed.notify_all();
            let mut open = lock(&self.open);
            while !*open {
                open = self.changed.wait(open).unwrap();
            }
            self.flushes.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    /// A hub whose flushes wait for their gate.
    fn slow_flushing_hub() -> (Hub, Arc<Gate>) {
        let gate = Arc::new(Gate::default());
        let journal = SlowFlush {
            flusher: gate.clone(),
            inner: MemoryJournal::default(),
        };
        (Hub::new(journal, 0, None), gate)
    }

    impl Gate {
        /// Returns once a flush has started.
        fn wait_started(&self) {
            let mut started = lock(&self.started);
            while !*started {
                started = self.changed.wait(started).unwrap();
            }
        }
    }

    impl Journal for SlowFlush {
        fn append(&mut self, batch: &mut Vec<JournalEntry>) -> Result<Vec<Recorded>, JournalError> {
            self.inner.append(batch)
        }

        fn flush(&mut self) -> Result<(), JournalError> {
            panic!("flushed through the journal, not its flusher");
        }

        fn flusher(&self) -> Option<Arc<dyn Flusher>> {
            Some(self.flusher.clone())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn appends_go_on_while_a_flusher_flushes() {
        let (hub, gate) = slow_flushing_hub();
        let mut f = hub.follow(Filter::session("a"), 0);
        let flushing = {
            let hub = hub.clone();
            std::thread::spawn(move || hub.flush())
        };
        gate.wait_started();
        // Lets the flush finish however this test ends (an append stuck
        // behind it holds a worker thread until then).
        let open = Opens(gate.clone());
        // The flush waits; an append is committed and handed out meanwhile.
        let append = tokio::spawn({
            let hub = hub.clone();
            async move { hub.append(vec![entry("a", 1)]).await }
        });
        tokio::time::timeout(Duration::from_secs(10), append)
            .await
            .expect("the append waited for the flush")
            .unwrap()
            .unwrap();
        assert_eq!(soon(f.next()).await.seq(), 1);
        drop(open);
        flushing.join().unwrap();
    }

    struct Opens(Arc<Gate>);

    impl Drop for Opens {
        fn drop(&mut self) {
            *lock(&self.0.open) = true;
            self.0.changed.notify_all();
        }
    }

    #[tokio::test]
    async fn background_flushes_run_one_at_a_time_and_coalesce() {
        let (hub, gate) = slow_flushing_hub();
        let open = Opens(gate.clone());
        hub.flush_in_background();
        gate.wait_started();
        // Asked for twice while one runs: that one goes once more.
        hub.flush_in_background();
        hub.flush_in_background();
        drop(open);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while *lock(&hub.inner.background) != (false, false) {
            assert!(std::time::Instant::now() < deadline, "still flushing");
            std::thread::yield_now();
        }
        assert_eq!(gate.flushes.load(Ordering::SeqCst), 2);
    }
}
