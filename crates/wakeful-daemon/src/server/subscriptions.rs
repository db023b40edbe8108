//! Webhook subscriptions of MCP Events: `event_subscribe`,
//! `event_unsubscribe`, and the deliveries.
//!
//! A subscription is kept in `event-webhooks.json` in the state directory
//! (written whole, to a temporary file renamed over it: a crash leaves the
//! old file or the new one), with its secret, lifetime and position (the
//! last seq delivered or passed over). The file is private (the daemon's
//! umask) and nothing else shows the secret: `status` shows
//! [`EventSubscriptionInfo`](wakeful_protocol::EventSubscriptionInfo), logs name the id and the URL.
//!
//! Each active subscription has one delivery task: a follower of the
//! session's events from its position. Each occurrence is POSTed, signed
//! (`wakeful_mcp::events::webhook`), until it is answered 2xx; failures are
//! retried with the backoff of [`Backoff`], and after its limit (or a 410,
//! a redirect, a refusal by the network policy) the subscription is given
//! up: its state says so with the reason, `status` and `doctor` show it,
//! and a refresh (`event_subscribe` of the same id) resumes it. The
//! position moves, and is written, only after a delivery was answered, so
//! a daemon that dies mid-delivery sends it again after its restart: at
//! least once, with the same `eventId`.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wakeful_engine::hub::{Filter, FollowError};
use wakeful_engine::net::http::{self, Reach};
use wakeful_mcp::events::webhook::{
    self, Attempt, Backoff, Next, Secret, Target, SUBSCRIPTION_HEADER,
};
use wakeful_protocol::{ErrorKind, SubscribeEvents, UnsubscribeEvents};

use super::conn::Handled;
use crate::state::{Failure, State};
use crate::webhook_book::{Entry, File, Record, Subscriptions, ACTIVE, GIVEN_UP};

pub use crate::webhook_book::FILE;

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn path(state: &State) -> PathBuf {
    state.paths.state_dir.join(FILE)
}

fn invalid(message: impl Into<String>) -> Failure {
    (ErrorKind::Invalid, message.into())
}

/// At start: reads the file and starts a delivery for each active
/// subscription that has not expired (expired ones are dropped).
pub(crate) fn resume(state: &Arc<State>) {
    let file = path(state);
    let mut text = String::new();
    match std::fs::File::open(&file).and_then(|mut f| f.read_to_string(&mut text)) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            tracing::warn!("cannot read {}: {e}", file.display());
            return;
        }
    }
    let kept: File = match serde_json::from_str(&text) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(
                "{} is not valid ({e}); no webhook subscription resumed",
                file.display()
            );
            return;
        }
    };
    let now = now_ms();
    let mut book = state.subscriptions.book();
    for record in kept.subscriptions {
        if record.expires_ms <= now {
            continue;
        }
        let active = record.state == ACTIVE;
        let id = record.id.clone();
        book.insert(id.clone(), Entry { record, task: None });
        if active {
            let task = tokio::spawn(deliver(state.clone(), id.clone()));
            if let Some(e) = book.get_mut(&id) {
                e.task = Some(task.abort_handle());
            }
        }
    }
    Subscriptions::save_logged(&book, &file);
}

/// `event_subscribe`: see [`SubscribeEvents`].
pub(crate) async fn subscribe(state: &Arc<State>, r: SubscribeEvents) -> Handled<SubscribeEvents> {
    let secret = Secret::parse(&r.secret).map_err(|e| invalid(e.to_string()))?;
    if Target::new(
        &state.paths.state_dir,
        &r.session,
        &r.name,
        r.monitor.clone(),
        r.wake_on.clone(),
    )
    .is_none()
    {
        return Err(invalid(format!(
            "unknown event type `{}`, or a wake_on rule that cannot be read",
            r.name
        )));
    }
    if r.ttl_ms == 0 || r.ttl_ms > webhook::MAX_TTL_MS {
        return Err(invalid(format!(
            "ttl_ms {} is out of range: give 1 to {} (7 days)",
            r.ttl_ms,
            webhook::MAX_TTL_MS
        )));
    }
    if r.url.contains('#') {
        return Err(invalid(format!("{}: a webhook URL has no fragment", r.url)));
    }
    let policy = state.wakes.policy();
    http::check(&r.url, policy, Reach::Policy)
        .await
        .map_err(|e| invalid(format!("webhook URL refused: {e}")))?;
    {
        let mut book = state.subscriptions.book();
        // Expired subscriptions (given up, so no task forgot them) go now.
        let now = now_ms();
        book.retain(|_, e| e.record.expires_ms > now);
        let held = book
            .values()
            .filter(|e| e.record.session == r.session && e.record.id != r.id)
            .count();
        if held >= webhook::MAX_PER_SESSION {
            return Err((
                ErrorKind::Limit,
                format!(
                    "session {} holds {held} webhook subscriptions, the limit ({}); unsubscribe one first",
                    r.session,
                    webhook::MAX_PER_SESSION
                ),
            ));
        }
    }
    verify(&r.url, &r.id, &secret, policy).await?;
    let now = now_ms();
    let expires_ms = now.saturating_add(i64::try_from(r.ttl_ms).unwrap_or(i64::MAX));
    let latest = state.registry.hub().latest();
    let file = path(state);
    let mut book = state.subscriptions.book();
    let record = match book.remove(&r.id) {
        Some(old) => {
            if let Some(t) = old.task {
                t.abort();
            }
            Record {
                url: r.url,
                secret: r.secret,
                wake_on: r.wake_on,
                expires_ms,
                state: ACTIVE.into(),
                failures: 0,
                ..old.record
            }
        }
        None => Record {
            id: r.id.clone(),
            session: r.session,
            name: r.name,
            monitor: r.monitor,
            wake_on: r.wake_on,
            url: r.url,
            secret: r.secret,
            expires_ms,
            position: r.after.unwrap_or(latest).min(latest),
            state: ACTIVE.into(),
            delivered: 0,
            failures: 0,
            last_error: None,
        },
    };
    let info = record.info();
    tracing::info!(
        "webhook subscription {} of session {} to {} ({}), from seq {}",
        record.id,
        record.session,
        record.name,
        record.url,
        record.position
    );
    book.insert(r.id.clone(), Entry { record, task: None });
    Subscriptions::save(&book, &file).map_err(|e| {
        (
            ErrorKind::Internal,
            format!("cannot write {}: {e}", file.display()),
        )
    })?;
    let task = tokio::spawn(deliver(state.clone(), r.id.clone()));
    if let Some(e) = book.get_mut(&r.id) {
        e.task = Some(task.abort_handle());
    }
    Ok(info)
}

/// `event_unsubscribe`: see [`UnsubscribeEvents`].
pub(crate) fn unsubscribe(state: &State, r: UnsubscribeEvents) -> Handled<UnsubscribeEvents> {
    let file = path(state);
    let mut book = state.subscriptions.book();
    let mine = book
        .get(&r.id)
        .is_some_and(|e| e.record.session == r.session);
    let found = if mine { book.remove(&r.id) } else { None };
    let Some(entry) = found else { return Ok(None) };
    if let Some(t) = entry.task {
        t.abort();
    }
    tracing::info!("webhook subscription {} ended by its client", r.id);
    Subscriptions::save(&book, &file).map_err(|e| {
        (
            ErrorKind::Internal,
            format!("cannot write {}: {e}", file.display()),
        )
    })?;
    Ok(Some(entry.record.info()))
}

/// The verification request: the receiver must return the challenge.
async fn verify(
    url: &str,
    id: &str,
    secret: &Secret,
    policy: &wakeful_engine::NetPolicy,
) -> Result<(), Failure> {
    let challenge =
        random_hex().map_err(|e| (ErrorKind::Internal, format!("cannot draw a challenge: {e}")))?;
    let message_id = format!("verify-{challenge}");
    let body = webhook::verification_body(&challenge);
    let refused = |why: String| {
        invalid(format!(
            "the webhook URL did not pass verification ({why}); it must answer a signed {{\"type\":\"verification\",\"challenge\":…}} with 2xx and {{\"challenge\":…}}"
        ))
    };
    let response = post(url, id, &message_id, &body, secret, policy)
        .await
        .map_err(|e| refused(e.to_string()))?;
    if !(200..300).contains(&response.status) {
        return Err(refused(format!("HTTP {}", response.status)));
    }
    if !webhook::verification_answered(&response.body, &challenge) {
        return Err(refused("the answer does not hold the challenge".into()));
    }
    Ok(())
}

fn random_hex() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// POSTs `body`, signed now.
async fn post(
    url: &str,
    id: &str,
    message_id: &str,
    body: &str,
    secret: &Secret,
    policy: &wakeful_engine::NetPolicy,
) -> Result<http::Response, http::HttpError> {
    let ts = chrono::Utc::now().timestamp();
    let signature = secret.sign(message_id, ts, body);
    let ts = ts.to_string();
    let headers = [
        ("webhook-id", message_id),
        ("webhook-timestamp", ts.as_str()),
        ("webhook-signature", signature.as_str()),
        (SUBSCRIPTION_HEADER, id),
    ];
    http::post_json(url, body.to_string(), &headers, policy, Reach::Policy).await
}

/// Updates the record of `id` with `f` and writes the file; `false` when
/// the subscription is gone (unsubscribed or replaced by a refresh whose
/// own task delivers now).
fn update(state: &State, id: &str, task: &tokio::task::Id, f: impl FnOnce(&mut Record)) -> bool {
    let file = path(state);
    let mut book = state.subscriptions.book();
    let Some(entry) = book.get_mut(id) else {
        return false;
    };
    if entry.task.as_ref().is_some_and(|t| t.id() != *task) {
        return false;
    }
    f(&mut entry.record);
    Subscriptions::save_logged(&book, &file);
    true
}

/// Delivers subscription `id`'s occurrences until it expires, is given up
/// or ended, or the daemon stops.
async fn deliver(state: Arc<State>, id: String) {
    // The handle is stored right after the spawn, under the book's lock.
    let me = tokio::task::id();
    let Some(record) = state
        .subscriptions
        .book()
        .get(&id)
        .map(|e| e.record.clone())
    else {
        return;
    };
    let Some(target) = Target::new(
        &state.paths.state_dir,
        &record.session,
        &record.name,
        record.monitor.clone(),
        record.wake_on.clone(),
    ) else {
        return;
    };
    let Ok(secret) = Secret::parse(&record.secret) else {
        return;
    };
    let policy = state.wakes.policy().clone();
    let mut stopping = state.stopping();
    let expires = Duration::from_millis(u64::try_from(record.expires_ms - now_ms()).unwrap_or(0));
    let deadline = tokio::time::Instant::now() + expires;
    let filter = Filter {
        session: Some(record.session.clone()),
        monitor: record.monitor.clone(),
    };
    let mut follow = state.registry.hub().follow(filter, record.position);
    loop {
        let next = tokio::select! {
            n = follow.next() => n,
            _ = tokio::time::sleep_until(deadline) => {
                tracing::info!("webhook subscription {id} expired (not refreshed)");
                let file = path(&state);
                let mut book = state.subscriptions.book();
                if book.get(&id).and_then(|e| e.task.as_ref()).is_some_and(|t| t.id() == me) {
                    book.remove(&id);
                    Subscriptions::save_logged(&book, &file);
                }
                return;
            }
            _ = stopping.wait_for(|s| *s) => return,
        };
        let committed = match next {
            Ok(c) => c,
            Err(FollowError::Lagged(_)) => continue,
            Err(FollowError::Closed) => return,
        };
        let seq = committed.seq();
        let Some((event_id, body)) = target.body(&committed.event) else {
            // Passed over: the position moves with the next write.
            continue;
        };
        let mut backoff = Backoff::new();
        loop {
            let attempt = match post(&record.url, &id, &event_id, &body, &secret, &policy).await {
                Ok(r) => Attempt::of_status(r.status),
                Err(e) if e.is_retryable() => Attempt::Failed(e.to_string()),
                Err(e) => Attempt::Refused(e.to_string()),
            };
            match backoff.after(&attempt, now_ms()) {
                Next::Done => {
                    if !update(&state, &id, &me, |r| {
                        r.position = r.position.max(seq);
                        r.delivered += 1;
                        r.failures = 0;
                    }) {
                        return;
                    }
                    break;
                }
                Next::RetryAt(at) => {
                    let why = match &attempt {
                        Attempt::Failed(w) | Attempt::Refused(w) => w.clone(),
                        Attempt::Delivered => String::new(),
                    };
                    tracing::debug!(
                        "webhook {id}: delivery of {event_id} failed ({why}); retrying"
                    );
                    let failures = backoff.failures();
                    if !update(&state, &id, &me, |r| {
                        r.failures = failures;
                        r.last_error = Some(why);
                    }) {
                        return;
                    }
                    let wait = Duration::from_millis(u64::try_from(at - now_ms()).unwrap_or(0));
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = stopping.wait_for(|s| *s) => return,
                    }
                }
                Next::GiveUp(why) => {
                    tracing::warn!("webhook subscription {id} ({}) given up: {why}", record.url);
                    update(&state, &id, &me, |r| {
                        r.state = GIVEN_UP.into();
                        r.failures = backoff.failures();
                        r.last_error = Some(why);
                    });
                    return;
                }
            }
        }
    }
}
