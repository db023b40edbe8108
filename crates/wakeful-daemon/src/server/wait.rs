//! `wait`: the consumer's unacknowledged events in batches, each
//! acknowledged by the client before the cursor moves; and `consumers`.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use wakeful_core::journal::JournalEntry;
use wakeful_engine::{Committed, Filter, FollowError};
use wakeful_protocol::{Ack, Acked, ErrorKind, ListConsumers, Reply, Request, WaitEvents};

use super::conn::{Conn, Handled};
use super::events::follow_error;
use super::monitors::{find, not_found};
use crate::state::{FirstWaiter, Following, State};

/// Events read from the store per query.
const PAGE: usize = 1000;

fn store_error(e: wakeful_store::StoreError) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// `consumers`: the store's cursors and the waiters attached now.
pub(crate) fn consumers(state: &State, r: ListConsumers) -> Handled<ListConsumers> {
    state
        .consumers(r.session.as_deref())
        .map_err(|e| (ErrorKind::Internal, e.to_string()))
}

/// `wait`: see [`WaitEvents`].
pub(crate) async fn wait(conn: &mut Conn, state: &State, r: WaitEvents) -> std::io::Result<()> {
    if let Some(id) = &r.monitor {
        if find(state, id).is_none_or(|m| m.session != r.session) {
            let (kind, message) = not_found(id);
            return conn.error(kind, message).await;
        }
    }
    let opts = WaitOpts {
        session: &r.session,
        consumer: &r.consumer,
        timeout_ms: r.timeout_ms,
        follow: r.follow,
        exclusive: r.exclusive,
        all: r.all,
        fallback: r.fallback,
        monitor: r.monitor.as_deref(),
    };
    wait_batches(conn, state, opts).await
}

/// Hands the consumer's unacknowledged events over in batches; the cursor
/// moves only when the client acknowledges a batch.
struct WaitOpts<'a> {
    session: &'a str,
    consumer: &'a str,
    timeout_ms: Option<u64>,
    follow: bool,
    exclusive: bool,
    /// Hand out events that do not wake without waiting for one that does.
    all: bool,
    /// Stand by while a waiter that does not is attached.
    fallback: bool,
    /// Only this monitor's events.
    monitor: Option<&'a str>,
}

/// What a wait read from the hub and has not handed out yet.
///
/// At most [`PAGE`] events are kept. Past that, events that do not wake are
/// only counted as skipped; once one that wakes turns up, the wait reads
/// again from the cursor (the hub catches up from the store), so a long run
/// of quiet events costs no memory and none is lost.
#[derive(Default)]
struct Unhanded {
    events: std::collections::VecDeque<Arc<Committed>>,
    /// The last event that wakes, read but not yet acknowledged.
    wake_at: Option<u64>,
    /// Events were read past the page and not kept.
    skipped: bool,
}

impl Unhanded {
    fn take(&mut self, e: Arc<Committed>) {
        if e.event.wakes {
            self.wake_at = Some(e.seq());
        }
        if self.events.len() < PAGE && !self.skipped {
            self.events.push_back(e);
        } else {
            self.skipped = true;
        }
    }

    /// Forgets what was acknowledged (up to `seq`).
    fn acked(&mut self, seq: u64) {
        while self.events.front().is_some_and(|e| e.seq() <= seq) {
            self.events.pop_front();
        }
        if self.wake_at.is_some_and(|w| w <= seq) {
            self.wake_at = None;
        }
    }

    /// Something to hand out now.
    fn ready(&self, all: bool) -> bool {
        !self.events.is_empty() && (all || self.wake_at.is_some())
    }
}

async fn wait_batches(conn: &mut Conn, state: &State, opts: WaitOpts<'_>) -> std::io::Result<()> {
    let WaitOpts {
        session,
        consumer,
        timeout_ms,
        follow,
        exclusive,
        all,
        fallback,
        monitor,
    } = opts;
    let _following = Following::stream(state);
    let slot = state.consumer(session, consumer);
    let _attached = Following::new(&slot.waiters);
    let _standing_by = fallback.then(|| Following::new(&slot.fallbacks));
    let _first = (!fallback).then(|| FirstWaiter::new(&slot.first));
    // A waiter that stands by yields while this counts others.
    let mut first = slot.first.subscribe();
    let mut generation = slot.exclusive.subscribe();
    let mine = if exclusive {
        slot.exclusive.send_modify(|g| *g += 1);
        Some(*generation.borrow_and_update())
    } else {
        None
    };
    let deadline = timeout_ms.map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
    let filter = Filter {
        session: Some(session.to_string()),
        monitor: monitor.map(String::from),
    };
    let follow_from = |after: u64| state.registry.hub().follow(filter.clone(), after);
    let cursor = state
        .reader
        .cursor(session, consumer)
        .map_err(store_error)?;
    let mut events = follow_from(cursor);
    let mut pending = Unhanded::default();
    loop {
        if mine.is_some_and(|m| *generation.borrow() != m) {
            return superseded(conn, session, consumer).await;
        }
        while let Some(e) = events.try_next().map_err(follow_error)? {
            pending.take(e);
            if pending.skipped && pending.wake_at.is_some() {
                break;
            }
        }
        if pending.skipped && (pending.wake_at.is_some() || pending.events.is_empty()) {
            // Read again from the cursor: the events not kept come back
            // from the store, page by page.
            let acked = state
                .reader
                .cursor(session, consumer)
                .map_err(store_error)?;
            let wake_at = pending.wake_at;
            events = follow_from(acked);
            pending = Unhanded::default();
            while pending.events.len() < PAGE {
                match events.try_next().map_err(follow_error)? {
                    Some(e) => pending.take(e),
                    None => break,
                }
            }
            pending.wake_at = pending.wake_at.max(wake_at);
        }
        let yielding = fallback && *first.borrow_and_update() > 0;
        if !pending.ready(all) || yielding {
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                next = events.next() => match next {
                    Ok(e) => pending.take(e),
                    Err(FollowError::Closed) => return Ok(()),
                    Err(e) => return Err(follow_error(e)),
                },
                _ = sleep => {
                    let quiet = if pending.events.is_empty() { "" } else { " that wake (events that do not wake wait for one that does, or for `wait --all`)" };
                    return conn
                        .error(
                            ErrorKind::Timeout,
                            format!("no new events{quiet} for session `{session}` within {} ms", timeout_ms.unwrap_or(0)),
                        )
                        .await;
                }
                line = conn.lines.next_line() => {
                    if line?.is_none() {
                        return Ok(());
                    }
                }
                _ = generation.changed(), if mine.is_some() => {}
                _ = first.changed(), if fallback => {
                    // What a waiter that went first acknowledged is gone.
                    let acked = state
                        .reader
                        .cursor(session, consumer)
                        .map_err(store_error)?;
                    pending.acked(acked);
                }
            }
            continue;
        }
        // One batch of this consumer at a time: read, hand out, acknowledge.
        let _handing_out = slot.handing_out.lock().await;
        if mine.is_some_and(|m| *generation.borrow() != m) {
            return superseded(conn, session, consumer).await;
        }
        if fallback && *first.borrow() > 0 {
            continue;
        }
        // Another waiter may have acknowledged some meanwhile.
        let acked = state
            .reader
            .cursor(session, consumer)
            .map_err(store_error)?;
        pending.acked(acked);
        if !pending.ready(all) {
            continue;
        }
        // Up to the last event that wakes; the quiet ones after it wait.
        let n = match (all, pending.wake_at) {
            (false, Some(w)) => pending.events.iter().take_while(|e| e.seq() <= w).count(),
            _ => pending.events.len(),
        };
        let Some(last) = pending.events.get(n.wrapping_sub(1)).map(|e| e.seq()) else {
            continue;
        };
        let wakes = pending.events.iter().take(n).any(|e| e.event.wakes);
        let mut buf = Vec::new();
        for e in pending.events.iter().take(n) {
            buf.extend_from_slice(&wakeful_protocol::event_reply_line(e.json()));
        }
        conn.out.write_all(&buf).await?;
        conn.reply(&Reply::Batch { last_seq: last }).await?;
        match conn.request().await? {
            Some(Ok(Request::Ack(Ack { seq }))) if seq <= last && seq > acked => {
                let ack = JournalEntry::Ack {
                    session: session.to_string(),
                    consumer: consumer.to_string(),
                    seq,
                };
                match state
                    .registry
                    .hub()
                    .append_within(vec![ack], wakeful_engine::registry::REGISTER_WAIT)
                    .await
                {
                    Ok(()) => {}
                    Err(wakeful_engine::AppendError::Closed) => {
                        return conn
                            .error(ErrorKind::Internal, "the daemon is stopping")
                            .await;
                    }
                    Err(wakeful_engine::AppendError::TimedOut) => {
                        // The acknowledgement waits in the hub and is
                        // recorded once the store can write; until then a
                        // new wait may hand these events out again.
                        let m = state
                            .storage
                            .writable("record the acknowledgement")
                            .err()
                            .map(|e| e.to_string())
                            .unwrap_or_else(|| "cannot record the acknowledgement in time: the event store is failing (see `wakeful status`)".into());
                        return conn.error(ErrorKind::DiskFull, m).await;
                    }
                }
                pending.acked(seq);
            }
            Some(Ok(_)) | Some(Err(_)) => {
                return conn
                    .error(ErrorKind::Invalid, format!("expected an ack of seq {last}"))
                    .await;
            }
            None => return Ok(()),
        }
        // Without follow, one batch ends the wait, unless the event that
        // wakes is still ahead (more than a page of quiet events before it).
        if !follow && (all || wakes) {
            return conn.ok(&Acked { acked: last }).await;
        }
    }
}

async fn superseded(conn: &mut Conn, session: &str, consumer: &str) -> std::io::Result<()> {
    conn.error(
        ErrorKind::Superseded,
        format!(
            "a newer exclusive waiter of session `{session}` (consumer `{consumer}`) took over"
        ),
    )
    .await
}
