//! Shipping: this host's committed events to the stream, in seq order.
//!
//! One task. It reads the events recorded here (no origin: imported events
//! are not shipped again) after the shipped mark, at most [`WINDOW`] at a
//! time, publishes them all without waiting (JetStream async publish), then
//! takes the acknowledgements in order: the mark moves over the
//! acknowledged prefix only, and is committed through the event hub
//! ([`JournalEntry::Shipped`]). A failed publication (NATS away, a
//! timeout) stops the window there; the next round starts again from the
//! first unacknowledged event once the link is up. `Nats-Msg-Id:
//! <host>/<seq>` makes the stream drop what it already has (within its
//! two-minute duplicate window; past that, importers still store each
//! origin once). With nothing to ship the task sleeps until the hub commits
//! again: no polling.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, context::PublishAckFuture};
use wakeful_core::journal::JournalEntry;
use wakeful_engine::Hub;

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

/// Ships until the hub closes; see the module docs.
pub(crate) async fn run(shared: Arc<Shared>, js: jetstream::Context, hub: Hub, setup: Setup) {
    let mut latest = hub.latest_watch();
    let mut backoff = Backoff::new();
    setup.get().await;
    loop {
        shared.wait_up().await;
        let mark = shared.shipped_seq.load(Ordering::SeqCst);
        // Marked as seen before reading: a commit after the read wakes us.
        latest.borrow_and_update();
        let rows = match shared.reader.local_events_after(mark, WINDOW) {
            Ok(rows) => rows,
            Err(e) => {
                shared.error(format!("cannot read events to ship: {e}"));
                backoff.wait().await;
                continue;
            }
        };
        if rows.is_empty() {
            if latest.changed().await.is_err() {
                return;
            }
            continue;
        }
        let mut pending: Vec<(u64, Result<PublishAckFuture, String>)> =
            Vec::with_capacity(rows.len());
        for row in rows {
            let subject = subject::event_subject(&row.session, &shared.host, &row.monitor_id);
            let publish = PublishMessage::build()
                .payload(row.json.into_bytes().into())
                .message_id(wakeful_core::export::origin(&shared.host, row.seq));
            let sent = js
                .send_publish(subject, publish)
                .await
                .map_err(|e| e.to_string());
            let stop = sent.is_err();
            pending.push((row.seq, sent));
            if stop {
                break;
            }
        }
        let mut results = Vec::with_capacity(pending.len());
        let mut first_error = None;
        for (seq, sent) in pending {
            let acked = match sent {
                Ok(fut) => fut.await.map_err(|e| e.to_string()),
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
            shared.publish_failures.fetch_add(1, Ordering::SeqCst);
            shared.error(format!(
                "publishing to stream {}: {}; retrying from seq {}",
                subject::STREAM,
                first_error.unwrap_or_default(),
                outcome.acked_upto.unwrap_or(mark) + 1
            ));
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
