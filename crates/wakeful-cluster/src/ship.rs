//! Shipping: this host's committed events to the stream, in seq order.
//!
//! One task, a follower of the event hub like every other reader
//! ([`Hub::follow`]): from the shipped mark on, it takes what was committed
//! before from the hub's ring or the store, then each commit as it comes.
//! It ships the events recorded here (imported events, which carry their
//! host, are not shipped again), at most [`WINDOW`] at a time: it
//! publishes them all without waiting (JetStream async publish), then
//! takes the acknowledgements in order: the mark moves over the
//! acknowledged prefix only, and is committed through the event hub
//! ([`JournalEntry::Shipped`]). A failed publication (NATS away, a
//! timeout) stops the window there; the next round starts again from the
//! first unacknowledged event (a new follower from there) once the link is
//! up. `Nats-Msg-Id:
//! <host>/<seq>` makes the stream drop what it already has (within its
//! two-minute duplicate window; past that, importers still store each
//! origin once). With nothing to ship the task waits in its follower until
//! the hub hands it an event: no polling, no query per commit. While the
//! link is down the follower's bounded queue may overflow; it then reads
//! what it missed back from the store, in order.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{
    self,
    context::{PublishAckFuture, PublishError},
};
use wakeful_core::journal::JournalEntry;
use wakeful_engine::{Committed, Filter, Follow, FollowError, Hub};

use crate::directory::Setup;
use crate::shared::{Backoff, Shared};
use crate::subject;

/// Events published before their acknowledgements are awaited.
pub const WINDOW: usize = 512;

/// What came of one window.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct WindowOutcome {
    /// The last seq of the acknowledged prefix.
    pub acked_upto: Option<u64>,
    /// Events in that prefix.
    pub acked: u64,
    /// Whether a publication failed (the rest is published again).
    pub failed: bool,
    /// Events after the failure that the stream took anyway, as new: they
    /// are in the stream before the failed one.
    pub reordered: u64,
}

/// Folds the publications' outcomes, in seq order, into a window's
/// outcome: `(seq, Ok(duplicate))` for an acknowledged one, `(seq, Err)`
/// for a failed one.
pub fn fold_window(results: impl IntoIterator<Item = (u64, Result<bool, ()>)>) -> WindowOutcome {
    let mut out = WindowOutcome::default();
    for (seq, r) in results {
        match (r, out.failed) {
            (Ok(_), false) => {
                out.acked_upto = Some(seq);
                out.acked += 1;
            }
            (Ok(duplicate), true) => {
                if !duplicate {
                    out.reordered += 1;
                }
            }
            (Err(()), _) => out.failed = true,
        }
    }
    out
}

/// Whether `e` was recorded here: imported events (another host's, or a
/// file's) always carry the host they came from, this host's never (the
/// store's `origin IS NULL`).
fn recorded_here(e: &Committed) -> bool {
    e.event.host.is_none()
}

/// The next event recorded here, waiting for a commit when there is none;
/// `None` once the hub is closed.
async fn next_here(follow: &mut Follow) -> Option<Arc<Committed>> {
    loop {
        match follow.next().await {
            Ok(e) if recorded_here(&e) => return Some(e),
            Ok(_) => {}
            Err(FollowError::Closed) => return None,
            Err(e @ FollowError::Lagged(_)) => {
                // Only a hub without a store loses events; the daemon's
                // reads them back.
                tracing::warn!("cluster: shipping {e}");
            }
        }
    }
}

/// The hub's follower of this host's events after `mark`.
fn follow_after(hub: &Hub, mark: u64) -> Follow {
    hub.follow(Filter::default(), mark)
}

/// Ships until the hub closes; see the module docs.
pub(crate) async fn run(shared: Arc<Shared>, js: jetstream::Context, hub: Hub, setup: Setup) {
    let mut backoff = Backoff::new();
    setup.get().await;
    let mut follow = follow_after(&hub, shared.shipped_seq.load(Ordering::SeqCst));
    loop {
        shared.wait_up().await;
        let mark = shared.shipped_seq.load(Ordering::SeqCst);
        // A window: the first event (waited for), then whatever else the
        // follower has now.
        let Some(first) = next_here(&mut follow).await else {
            return;
        };
        let mut window = vec![first];
        while window.len() < WINDOW {
            match follow.try_next() {
                Ok(Some(e)) if recorded_here(&e) => window.push(e),
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(FollowError::Closed) => break,
                Err(e @ FollowError::Lagged(_)) => tracing::warn!("cluster: shipping {e}"),
            }
        }
        let mut pending: Vec<(u64, Result<PublishAckFuture, PublishError>)> =
            Vec::with_capacity(window.len());
        for e in window {
            let subject =
                subject::event_subject(&e.event.session, &shared.host, &e.event.monitor_id);
            let publish = PublishMessage::build()
                .payload(e.json().as_bytes().to_vec().into())
                .message_id(wakeful_core::export::origin(&shared.host, e.seq()));
            let sent = js.send_publish(subject, publish).await;
            let stop = sent.is_err();
            pending.push((e.seq(), sent));
            if stop {
                break;
            }
        }
        let mut results = Vec::with_capacity(pending.len());
        let mut first_error = None;
        for (seq, sent) in pending {
            let acked = match sent {
                Ok(fut) => fut.await,
                Err(e) => Err(e),
            };
            results.push((
                seq,
                acked.map(|a| a.duplicate).map_err(|e| {
                    first_error.get_or_insert(e);
                }),
            ));
        }
        let outcome = fold_window(results);
        if let Some(upto) = outcome.acked_upto {
            if hub
                .append(vec![JournalEntry::Shipped { seq: upto }])
                .await
                .is_err()
            {
                return;
            }
            shared.shipped_seq.store(upto, Ordering::SeqCst);
            shared.shipped.fetch_add(outcome.acked, Ordering::SeqCst);
        }
        if outcome.reordered > 0 {
            shared
                .reordered
                .fetch_add(outcome.reordered, Ordering::SeqCst);
            tracing::warn!(
                "cluster: {} events reached the stream before an earlier one that failed; importers see them out of order",
                outcome.reordered
            );
        }
        if outcome.failed {
            let from = outcome.acked_upto.unwrap_or(mark);
            shared.publish_failures.fetch_add(1, Ordering::SeqCst);
            shared.error(format!(
                "publishing to stream {}: {}; retrying from seq {}",
                subject::STREAM,
                first_error.map(|e| e.to_string()).unwrap_or_default(),
                from + 1
            ));
            // Again from the first unacknowledged event: a new follower
            // reads it back (from the ring or the store).
            follow = follow_after(&hub, from);
            backoff.wait().await;
            if shared.up() {
                // The server may have lost its store: make the stream again.
                if let Err(e) = setup.ensure_stream().await {
                    shared.error(format!("stream {}: {e}", subject::STREAM));
                }
            }
        } else {
            backoff.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_moves_over_the_acknowledged_prefix_only() {
        let all_ok = fold_window([(3, Ok(false)), (5, Ok(true)), (6, Ok(false))]);
        assert_eq!(
            all_ok,
            WindowOutcome {
                acked_upto: Some(6),
                acked: 3,
                failed: false,
                reordered: 0
            }
        );
        let gap = fold_window([(3, Ok(false)), (5, Err(())), (6, Ok(false)), (7, Ok(true))]);
        assert_eq!(
            gap,
            WindowOutcome {
                acked_upto: Some(3),
                acked: 1,
                failed: true,
                reordered: 1
            }
        );
        let first = fold_window([(3, Err(())), (4, Err(()))]);
        assert_eq!(first.acked_upto, None);
        assert!(first.failed);
        assert_eq!(fold_window([]), WindowOutcome::default());
    }
}
