//! `wait`: the consumer's unacknowledged events in batches, each
//! acknowledged by the client before the cursor moves; and `consumers`.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use wakeful_core::journal::JournalEntry;
use wakeful_core::wait::{self, Pending, WaitItem};
use wakeful_engine::{Committed, Filter, FollowError};
use wakeful_protocol::{
    described_event_reply_line, Ack, Acked, Descriptions, ErrorKind, ListConsumers, Reply, Request,
    WaitEvents,
};

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
        describe: r.describe,
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
    /// Send each monitor's description with its first event.
    describe: bool,
}

/// An event a wait read from the hub.
struct Read(Arc<Committed>);

impl WaitItem for Read {
    fn seq(&self) -> u64 {
        self.0.seq()
    }
    fn wakes(&self) -> bool {
        self.0.event.wakes
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
        describe,
    } = opts;
    let mut described = describe.then(Descriptions::default);
    let _following = Following::stream(state);
    let _waiting = Following::wait(state);
    let mut upgrading = state.upgrading.subscribe();
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
    let mut pending = Pending::new(PAGE);
    loop {
        if mine.is_some_and(|m| *generation.borrow() != m) {
            return superseded(conn, session, consumer).await;
        }
        let handing_over = *upgrading.borrow_and_update();
        if handing_over {
            // The daemon hands over: ask the new one (nothing is held).
            let acked = state
                .reader
                .cursor(session, consumer)
                .map_err(store_error)?;
            return conn
                .ok(&Acked {
                    acked,
                    resume: true,
                })
                .await;
        }
        while let Some(e) = events.try_next().map_err(follow_error)? {
            pending.take(Read(e));
            if pending.stop_reading() {
                break;
            }
        }
        if pending.needs_reread() {
            // Read again from the cursor: the events not kept come back
            // from the store, page by page.
            let acked = state
                .reader
                .cursor(session, consumer)
                .map_err(store_error)?;
            events = follow_from(acked);
            pending.restart();
            while !pending.full() {
                match events.try_next().map_err(follow_error)? {
                    Some(e) => pending.take(Read(e)),
                    None => break,
                }
            }
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
                    Ok(e) => pending.take(Read(e)),
                    Err(FollowError::Closed) => return Ok(()),
                    Err(e) => return Err(follow_error(e)),
                },
                _ = sleep => {
                    let quiet = if pending.is_empty() { "" } else { " that wake (events that do not wake wait for one that does, or for `wait --all`)" };
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
                _ = upgrading.changed() => {}
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
        // Up to the last event that wakes; the quiet ones after it wait.
        let Some(batch) = pending.batch(all) else {
            continue;
        };
        let last = batch.last_seq;
        let mut buf = Vec::new();
        for Read(e) in pending.events().take(batch.len) {
            let id = &e.event.monitor_id;
            match described
                .as_mut()
                .and_then(|d| d.first(id, || find(state, id).map(|i| i.description)))
            {
                Some(d) => buf.extend_from_slice(&described_event_reply_line(e.json(), &d)),
                None => buf.extend_from_slice(&wakeful_protocol::event_reply_line(e.json())),
            }
        }
        conn.out.write_all(&buf).await?;
        conn.reply(&Reply::Batch { last_seq: last }).await?;
        match conn.request().await? {
            Some(Ok(Request::Ack(Ack { seq }))) if wait::ack_fits(seq, last, acked) => {
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
        if wait::ends_after(&batch, follow, all) {
            return conn
                .ok(&Acked {
                    acked: last,
                    resume: false,
                })
                .await;
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
