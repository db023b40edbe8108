//! `events/stream`: a long request that pushes each occurrence as the
//! daemon commits it.
//!
//! A reader task follows the session's events in the daemon (reconnecting
//! after a daemon restart, resuming after the last seq read: no gap, no
//! duplicate) into a bounded queue of [`QUEUE`] events; the request's own
//! loop takes them, sends `notifications/events/event` for each one the
//! subscription wants, `notifications/events/heartbeat` with the cursor
//! after a quiet [`super::HEARTBEAT`], and ends when the client cancels
//! the request (`notifications/cancelled`) or goes away.
//!
//! A slow reader loses nothing: each notification is written before the
//! next event is taken, the full queue makes the reader task wait, and the
//! daemon's follower queue (4,096 events) behind it catches up from the
//! store by seq when it overflows. Nothing is dropped, so there is nothing
//! to count; how far a reader lags shows as the distance between its
//! cursor and the daemon's last seq.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{CustomNotification, ServerNotification};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{json, Value};
use wakeful_client::{Followed, Follower};
use wakeful_core::Event;

use super::wire::{SubscriptionParams, SUBSCRIPTION_META};
use super::{EventsError, Subscription, HEARTBEAT, HEARTBEAT_ENV, MAX_STREAMS, STREAM};
use crate::server::WakefulServer;

/// Events read ahead of the notifications written.
pub const QUEUE: usize = 64;

/// `notifications/events/active`.
pub const ACTIVE: &str = "notifications/events/active";
/// `notifications/events/event`.
pub const EVENT: &str = "notifications/events/event";
/// `notifications/events/heartbeat`.
pub const HEARTBEAT_METHOD: &str = "notifications/events/heartbeat";

/// Streams open in this process (one `wakeful mcp` serves one connection).
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// A stream's place among [`OPEN`], given back when it ends.
pub(super) struct Open {
    sub: Subscription,
    after: u64,
}

impl Drop for Open {
    fn drop(&mut self) {
        OPEN.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Checks a stream request and takes a place for it.
pub(super) async fn open(
    server: &WakefulServer,
    p: SubscriptionParams,
    session: &str,
) -> Result<Open, EventsError> {
    let sub = Subscription::check(server, STREAM, p, session)?;
    let taken = OPEN.fetch_add(1, Ordering::SeqCst);
    // From here on, dropping `Open` gives the place back.
    let mut open = Open { sub, after: 0 };
    if taken >= MAX_STREAMS {
        return Err(EventsError::TooManyStreams);
    }
    open.after = match open.sub.after {
        Some(after) => after,
        None => {
            let mut conn = server.connect().await?;
            conn.call(wakeful_protocol::GetStatus {}).await?.last_seq
        }
    };
    Ok(open)
}

fn heartbeat_every() -> Duration {
    std::env::var(HEARTBEAT_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map_or(HEARTBEAT, Duration::from_millis)
}

/// Serves the stream until the client cancels it or goes away.
pub(super) async fn run(
    server: &WakefulServer,
    open: Open,
    context: &RequestContext<RoleServer>,
) -> Result<(), EventsError> {
    let sub = &open.sub;
    let id = match &context.id {
        rmcp::model::NumberOrString::Number(n) => n.to_string(),
        rmcp::model::NumberOrString::String(s) => s.to_string(),
    };
    let peer = context.peer.clone();
    let send = |method: &'static str, mut params: Value| {
        if let Value::Object(o) = &mut params {
            o.insert("_meta".into(), json!({ SUBSCRIPTION_META: id }));
        }
        let n = CustomNotification::new(method, Some(params));
        let peer = peer.clone();
        async move {
            peer.send_notification(ServerNotification::CustomNotification(n))
                .await
                .is_ok()
        }
    };
    let mut cursor = open.after;
    if !send(ACTIVE, json!({ "cursor": sub.cursors.encode(cursor) })).await {
        return Ok(());
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Event>(QUEUE);
    let paths = server.paths().clone();
    let session = sub.session.clone();
    let reader = tokio::spawn(async move {
        let mut follower = Follower::new(paths, Some(cursor), 0)
            .retry(Duration::from_millis(50), Duration::from_secs(1));
        loop {
            let request = |after| wakeful_protocol::ReadEvents {
                session: session.clone(),
                after,
                follow: true,
                ..Default::default()
            };
            match follower.next(request, &[]).await {
                Followed::Event(event, _) => {
                    let seq = event.seq;
                    if tx.send(event).await.is_err() {
                        return;
                    }
                    follower.resume_after(seq);
                }
                Followed::Live { .. } | Followed::Lost(_) => {}
            }
        }
    });
    let every = heartbeat_every();
    let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = context.ct.cancelled() => break,
            got = rx.recv() => {
                let Some(event) = got else { break };
                cursor = event.seq;
                if sub.wants(&event, chrono::Utc::now()) {
                    let o = sub.occurrence(&event);
                    let frame = json!({ "event": o, "cursor": o.cursor });
                    if !send(EVENT, frame).await {
                        break;
                    }
                    beat.reset();
                }
            }
            _ = beat.tick() => {
                if !send(HEARTBEAT_METHOD, json!({ "cursor": sub.cursors.encode(cursor) })).await {
                    break;
                }
            }
        }
    }
    reader.abort();
    drop(open);
    Ok(())
}
