//! MCP Events (SEP-3415, extension `io.modelcontextprotocol/events`):
//! the session's log as a standard event source.
//!
//! - `events/list`: wakeful's event types ([`types`]), each served by poll
//!   and push.
//! - `events/poll`: the occurrences after a cursor ([`cursor`]: opaque,
//!   bound to this wakeful home and the session, valid across daemon
//!   restarts), read from the daemon with `ReadEvents`.
//! - `events/stream`: a long request that pushes each occurrence as the
//!   daemon commits it (`notifications/events/event`), with
//!   `notifications/events/active` first and
//!   `notifications/events/heartbeat` (carrying the cursor) in quiet
//!   periods; `notifications/cancelled` ends it (the `stream` module).
//!
//! - `events/subscribe`, `events/unsubscribe`: webhook delivery, kept and
//!   sent by the daemon ([`webhook`] has its pure parts: secret, signature,
//!   bodies, backoff).
//!
//! Payloads are the events as `monitor_events` gives them
//! (`server::event_for_model`, then `present::sanitize_json`).

pub mod cursor;
pub mod declared;
mod stream;
pub mod types;
pub mod webhook;
pub mod wire;

use std::time::Duration;

use rmcp::model::{CustomRequest, CustomResult, ErrorCode, JsonObject};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ErrorData;
use serde::de::DeserializeOwned;
use serde_json::Value;
use wakeful_client::ClientError;
use wakeful_core::Event;

use crate::server::WakefulServer;
use cursor::{BadCursor, Cursors};
use types::{Arguments, BadArguments};
use wire::{
    ListParams, ListResult, Occurrence, PollResult, SubscribeResult, SubscriptionParams,
    WebhookParams,
};

/// The extension's identifier, the key of `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/events";

/// `events/list`.
pub const LIST: &str = "events/list";
/// `events/poll`.
pub const POLL: &str = "events/poll";
/// `events/stream`.
pub const STREAM: &str = "events/stream";
/// `events/subscribe` (webhook delivery).
pub const SUBSCRIBE: &str = "events/subscribe";
/// `events/unsubscribe` (webhook delivery).
pub const UNSUBSCRIBE: &str = "events/unsubscribe";

/// The JSON-RPC error codes of the extension as wakeful uses them.
pub mod code {
    /// The request names no event type this server has.
    pub const UNKNOWN_EVENT: i32 = -32011;
    /// The cursor is malformed, or of another server or session.
    pub const INVALID_CURSOR: i32 = -32012;
    /// The event type is not served by the delivery mode asked for.
    pub const DELIVERY_NOT_OFFERED: i32 = -32013;
    /// Too many open streams on this connection ([`super::MAX_STREAMS`]),
    /// or webhook subscriptions of the session
    /// ([`super::webhook::MAX_PER_SESSION`]).
    pub const TOO_MANY_SUBSCRIPTIONS: i32 = -32015;
}

/// Events one poll returns when the request names no `maxEvents`.
pub const DEFAULT_MAX_EVENTS: u64 = 100;
/// The largest `maxEvents` accepted (a larger one is an error, never
/// clamped).
pub const MAX_MAX_EVENTS: u64 = 1000;
/// Events of the log one poll reads past before it answers with what it
/// has (`hasMore: true`), so that a type whose events are rare never makes
/// one poll read the whole log.
pub const MAX_SCANNED: usize = 10_000;
/// `nextPollMs` when more events wait: poll again at once.
pub const NEXT_POLL_MORE_MS: u64 = 0;
/// `nextPollMs` after a poll that returned events (a monitor that just
/// spoke often says more soon).
pub const NEXT_POLL_BUSY_MS: u64 = 1_000;
/// `nextPollMs` after a poll that found nothing.
pub const NEXT_POLL_IDLE_MS: u64 = 5_000;
/// Open `events/stream` requests one connection may hold.
pub const MAX_STREAMS: usize = 16;
/// How often a quiet stream sends `notifications/events/heartbeat`.
pub const HEARTBEAT: Duration = Duration::from_secs(15);
/// Overrides [`HEARTBEAT`], in milliseconds (for tests and for clients
/// with short idle timeouts).
pub const HEARTBEAT_ENV: &str = "WAKEFUL_MCP_EVENTS_HEARTBEAT_MS";

/// Why an events request failed.
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    /// No event type of that name.
    #[error("unknown event type `{0}`; events/list lists them ({names})", names = types::NAMES.join(", "))]
    UnknownEvent(String),
    /// The cursor was refused.
    #[error(transparent)]
    Cursor(#[from] BadCursor),
    /// The subscription arguments were refused.
    #[error(transparent)]
    Arguments(#[from] BadArguments),
    /// The params were refused.
    #[error("invalid params for {method}: {reason}")]
    Params {
        /// The method.
        method: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// The delivery mode is not served.
    #[error("{0}")]
    NotOffered(String),
    /// Too many streams are open.
    #[error("too many open events/stream requests on this connection (at most {MAX_STREAMS}); cancel one first")]
    TooManyStreams,
    /// Too many webhook subscriptions, or another refusal of the daemon
    /// that names what was wrong.
    #[error("{0}")]
    Refused(String),
    /// The daemon could not be asked.
    #[error("the wakeful daemon could not be asked: {0}")]
    Daemon(String),
}

impl From<EventsError> for ErrorData {
    fn from(e: EventsError) -> Self {
        let code = match &e {
            EventsError::UnknownEvent(_) => code::UNKNOWN_EVENT,
            EventsError::Cursor(_) => code::INVALID_CURSOR,
            EventsError::NotOffered(_) => code::DELIVERY_NOT_OFFERED,
            EventsError::TooManyStreams => code::TOO_MANY_SUBSCRIPTIONS,
            EventsError::Refused(_) => code::TOO_MANY_SUBSCRIPTIONS,
            EventsError::Arguments(_) | EventsError::Params { .. } => ErrorCode::INVALID_PARAMS.0,
            EventsError::Daemon(_) => ErrorCode::INTERNAL_ERROR.0,
        };
        ErrorData::new(
            ErrorCode(code),
            wakeful_core::present::sanitize_for_model(&e.to_string()),
            None,
        )
    }
}

impl From<ClientError> for EventsError {
    fn from(e: ClientError) -> Self {
        EventsError::Daemon(e.to_string())
    }
}

impl From<crate::server::ToolError> for EventsError {
    fn from(e: crate::server::ToolError) -> Self {
        EventsError::Daemon(e.to_string())
    }
}

/// What `capabilities.extensions` holds for this extension (no settings).
pub fn capability() -> (String, JsonObject) {
    (EXTENSION.to_string(), JsonObject::new())
}

/// Answers a custom request: the extension's methods, or method not found.
pub(crate) async fn handle(
    server: &WakefulServer,
    request: CustomRequest,
    context: RequestContext<RoleServer>,
) -> Result<CustomResult, ErrorData> {
    let session = server.session_for(&context.meta.0 .0);
    let value = match request.method.as_str() {
        LIST => {
            let _: ListParams = params(LIST, request.params)?;
            to_value(&ListResult {
                events: types::catalogue(),
                next_cursor: None,
            })
        }
        POLL => {
            let p: SubscriptionParams = params(POLL, request.params)?;
            to_value(&poll(server, p, &session).await?)
        }
        STREAM => {
            let p: SubscriptionParams = params(STREAM, request.params)?;
            let open = stream::open(server, p, &session).await?;
            stream::run(server, open, &context).await?;
            Value::Object(Default::default())
        }
        SUBSCRIBE => {
            let p: WebhookParams = params(SUBSCRIBE, request.params)?;
            to_value(&subscribe(server, p, &session).await?)
        }
        UNSUBSCRIBE => {
            let p: WebhookParams = params(UNSUBSCRIBE, request.params)?;
            unsubscribe(server, p, &session).await?;
            Value::Object(Default::default())
        }
        other => {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("Method not found: {other}"),
                None,
            ))
        }
    };
    Ok(CustomResult(value))
}

fn params<T: DeserializeOwned>(
    method: &'static str,
    params: Option<Value>,
) -> Result<T, EventsError> {
    let v = match params {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(v) => v,
    };
    serde_json::from_value(v).map_err(|e| EventsError::Params {
        method,
        reason: e.to_string(),
    })
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}

/// A subscription checked: its type, arguments, session and cursors.
pub(crate) struct Subscription {
    /// The event type.
    pub name: &'static str,
    /// Its arguments.
    pub args: Arguments,
    /// The session read.
    pub session: String,
    /// Its cursors.
    pub cursors: Cursors,
    /// The seq the request's cursor stands after (`None`: from now).
    pub after: Option<u64>,
    /// The oldest event time replayed, if the request limits it.
    pub max_age: Option<chrono::Duration>,
    /// The prefix of every `eventId`.
    pub home: String,
}

impl Subscription {
    /// Checks `p` for `method`, the session being `session` unless its
    /// arguments name one.
    pub(crate) fn check(
        server: &WakefulServer,
        method: &'static str,
        p: SubscriptionParams,
        session: &str,
    ) -> Result<Self, EventsError> {
        let name =
            types::known(&p.name).ok_or_else(|| EventsError::UnknownEvent(p.name.clone()))?;
        let args = Arguments::parse(name, p.arguments)?;
        let session = args.session.clone().unwrap_or_else(|| session.to_string());
        let state_dir = &server.paths().state_dir;
        let cursors = Cursors::new(state_dir, &session);
        let after = p.cursor.as_deref().map(|c| cursors.decode(c)).transpose()?;
        let max_age = p
            .max_age_ms
            .map(|ms| {
                i64::try_from(ms)
                    .ok()
                    .and_then(chrono::Duration::try_milliseconds)
                    .ok_or_else(|| EventsError::Params {
                        method,
                        reason: format!("maxAgeMs {ms} is too large"),
                    })
            })
            .transpose()?;
        Ok(Subscription {
            name,
            args,
            session,
            cursors,
            after,
            max_age,
            home: cursor::home_id(state_dir),
        })
    }

    /// Whether `event` is an occurrence for this subscription at `now`.
    pub(crate) fn wants(&self, event: &Event, now: chrono::DateTime<chrono::Utc>) -> bool {
        types::matches(self.name, &self.args, event)
            && self.max_age.is_none_or(|age| event.ts >= now - age)
    }

    /// `event` as an occurrence of this subscription.
    pub(crate) fn occurrence(&self, event: &Event) -> Occurrence {
        Occurrence {
            event_id: event_id(&self.home, event.seq),
            name: self.name,
            timestamp: event
                .ts
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            data: wakeful_core::present::sanitize_json(crate::server::event_for_model(event)),
            cursor: self.cursors.encode(event.seq),
        }
    }
}

fn webhook_subscription(
    server: &WakefulServer,
    method: &'static str,
    p: &WebhookParams,
    session: &str,
) -> Result<(&'static str, Arguments, String, String), EventsError> {
    let name = types::known(&p.name).ok_or_else(|| EventsError::UnknownEvent(p.name.clone()))?;
    if p.delivery.mode != "webhook" {
        return Err(EventsError::NotOffered(format!(
            "{method}: delivery mode `{}` is not served by {method}; use events/poll or events/stream, or mode `webhook`",
            p.delivery.mode
        )));
    }
    let args = Arguments::parse(name, p.arguments.clone())?;
    let session = args.session.clone().unwrap_or_else(|| session.to_string());
    let id = webhook::subscription_id(
        &server.paths().state_dir,
        &session,
        name,
        args.monitor.as_deref(),
        &p.delivery.url,
    );
    Ok((name, args, session, id))
}

fn refused(method: &'static str, e: ClientError) -> EventsError {
    match e {
        ClientError::Refused {
            kind: wakeful_protocol::ErrorKind::Limit,
            message,
        } => EventsError::Refused(message),
        ClientError::Refused { message, .. } => EventsError::Params {
            method,
            reason: message,
        },
        other => other.into(),
    }
}

async fn subscribe(
    server: &WakefulServer,
    p: WebhookParams,
    session: &str,
) -> Result<SubscribeResult, EventsError> {
    let (name, args, session, id) = webhook_subscription(server, SUBSCRIBE, &p, session)?;
    let bad = |reason: String| EventsError::Params {
        method: SUBSCRIBE,
        reason,
    };
    let secret = p.delivery.secret.clone().ok_or_else(|| {
        bad("delivery.secret is missing (whsec_ and 24 to 64 bytes in base64)".into())
    })?;
    webhook::Secret::parse(&secret).map_err(|e| bad(e.to_string()))?;
    let ttl_ms = p.ttl_ms.unwrap_or(webhook::DEFAULT_TTL_MS);
    if ttl_ms == 0 || ttl_ms > webhook::MAX_TTL_MS {
        return Err(bad(format!(
            "ttlMs {ttl_ms} is out of range: 1 to {} (7 days)",
            webhook::MAX_TTL_MS
        )));
    }
    let target = webhook::Target::new(
        &server.paths().state_dir,
        &session,
        name,
        args.monitor.clone(),
        args.wake_on.clone(),
    )
    .ok_or_else(|| EventsError::UnknownEvent(name.to_string()))?;
    let after = p.cursor.as_deref().map(|c| target.decode(c)).transpose()?;
    let mut conn = server.connect().await?;
    let status = conn.call(wakeful_protocol::GetStatus {}).await?;
    let info = conn
        .call(wakeful_protocol::SubscribeEvents {
            session,
            id,
            name: name.to_string(),
            monitor: args.monitor,
            wake_on: args.wake_on,
            url: p.delivery.url,
            secret,
            after,
            ttl_ms,
        })
        .await
        .map_err(|e| refused(SUBSCRIBE, e))?;
    let refresh_before = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(info.expires_ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    Ok(SubscribeResult {
        id: info.id,
        refresh_before,
        cursor: target.cursor(info.position),
        truncated: after.is_some_and(|a| truncated(a, status.storage.and_then(|s| s.oldest_seq))),
    })
}

async fn unsubscribe(
    server: &WakefulServer,
    p: WebhookParams,
    session: &str,
) -> Result<(), EventsError> {
    let (_, _, session, id) = webhook_subscription(server, UNSUBSCRIBE, &p, session)?;
    let mut conn = server.connect().await?;
    conn.call(wakeful_protocol::UnsubscribeEvents { session, id })
        .await
        .map_err(|e| refused(UNSUBSCRIBE, e))?;
    Ok(())
}

/// The stable id of the event `seq` of the home `home`: the same event has
/// the same id in every poll, stream and restart.
pub fn event_id(home: &str, seq: u64) -> String {
    format!("wakeful-{home}-{seq}")
}

/// The pure part of a poll: what it returns once the daemon's events are
/// read, one by one, into it.
pub(crate) struct PollPage {
    max: usize,
    bytes: usize,
    /// The occurrences so far.
    pub events: Vec<Occurrence>,
    /// The last seq read past (returned or not wanted).
    pub last: u64,
    /// Stopped with a wanted event left for the next poll.
    pub more: bool,
    scanned: usize,
}

impl PollPage {
    /// A page of at most `max` occurrences, after `after`.
    pub(crate) fn new(max: usize, after: u64) -> Self {
        PollPage {
            max,
            bytes: 0,
            events: Vec::new(),
            last: after,
            more: false,
            scanned: 0,
        }
    }

    /// Offers the next event of the log (`Some` occurrence when the
    /// subscription wants it); false once the page is full.
    pub(crate) fn offer(&mut self, seq: u64, occurrence: Option<Occurrence>) -> bool {
        if let Some(o) = occurrence {
            let size = o.data["text"].as_str().map_or(0, str::len);
            let full = self.events.len() >= self.max
                || (!self.events.is_empty()
                    && self.bytes + size > crate::server::MAX_RESULT_TEXT_BYTES);
            if full {
                self.more = true;
                return false;
            }
            self.bytes += size;
            self.events.push(o);
        }
        self.last = seq;
        self.scanned += 1;
        if self.scanned >= MAX_SCANNED {
            self.more = true;
            return false;
        }
        true
    }

    /// `nextPollMs` for this page.
    pub(crate) fn next_poll_ms(&self) -> u64 {
        if self.more {
            NEXT_POLL_MORE_MS
        } else if !self.events.is_empty() {
            NEXT_POLL_BUSY_MS
        } else {
            NEXT_POLL_IDLE_MS
        }
    }
}

/// Whether a read after `after` misses events the store pruned: the oldest
/// event it keeps comes later than the one after `after`.
pub fn truncated(after: u64, oldest_kept: Option<u64>) -> bool {
    oldest_kept.is_some_and(|oldest| after.saturating_add(1) < oldest)
}

async fn poll(
    server: &WakefulServer,
    p: SubscriptionParams,
    session: &str,
) -> Result<PollResult, EventsError> {
    let max = match p.max_events {
        None => DEFAULT_MAX_EVENTS,
        Some(n) if (1..=MAX_MAX_EVENTS).contains(&n) => n,
        Some(n) => {
            return Err(EventsError::Params {
                method: POLL,
                reason: format!("maxEvents {n} is out of range: 1 to {MAX_MAX_EVENTS}"),
            })
        }
    };
    let sub = Subscription::check(server, POLL, p, session)?;
    let mut conn = server.connect().await?;
    let status = conn.call(wakeful_protocol::GetStatus {}).await?;
    let Some(after) = sub.after else {
        // No cursor: from now, nothing returned.
        return Ok(PollResult {
            events: Vec::new(),
            cursor: sub.cursors.encode(status.last_seq),
            truncated: false,
            has_more: false,
            next_poll_ms: NEXT_POLL_IDLE_MS,
        });
    };
    let truncated = truncated(after, status.storage.and_then(|s| s.oldest_seq));
    let request = wakeful_protocol::ReadEvents {
        session: sub.session.clone(),
        after,
        monitor: sub.args.monitor.clone(),
        ..Default::default()
    };
    let mut events = conn.events(request).await?;
    let now = chrono::Utc::now();
    let mut page = PollPage::new(usize::try_from(max).unwrap_or(usize::MAX), after);
    while let Some(e) = events.next().await? {
        let event = e.decode()?;
        let occurrence = sub.wants(&event, now).then(|| sub.occurrence(&event));
        if !page.offer(event.seq, occurrence) {
            // The rest stays for the next poll; dropping the connection
            // ends the daemon's stream.
            break;
        }
    }
    Ok(PollResult {
        cursor: sub.cursors.encode(page.last),
        truncated,
        has_more: page.more,
        next_poll_ms: page.next_poll_ms(),
        events: page.events,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn occ(seq: u64, text: &str) -> Occurrence {
        Occurrence {
            event_id: event_id("h", seq),
            name: types::LINES,
            timestamp: String::new(),
            data: json!({ "text": text }),
            cursor: String::new(),
        }
    }

    #[test]
    fn a_page_stops_before_the_first_wanted_event_it_cannot_take() {
        let mut page = PollPage::new(2, 10);
        assert!(page.offer(11, Some(occ(11, "a"))));
        assert!(page.offer(12, None));
        assert!(page.offer(13, Some(occ(13, "b"))));
        // Full: 14 is left for the next poll, the cursor stays after 13.
        assert!(!page.offer(14, Some(occ(14, "c"))));
        assert_eq!(page.last, 13);
        assert!(page.more);
        assert_eq!(page.next_poll_ms(), NEXT_POLL_MORE_MS);
    }

    #[test]
    fn unwanted_events_move_the_cursor_and_an_idle_poll_waits_longer() {
        let mut page = PollPage::new(5, 3);
        assert!(page.offer(4, None));
        assert!(page.offer(9, None));
        assert_eq!(page.last, 9);
        assert!(!page.more);
        assert!(page.events.is_empty());
        assert_eq!(page.next_poll_ms(), NEXT_POLL_IDLE_MS);
        assert!(page.offer(10, Some(occ(10, "x"))));
        assert_eq!(page.next_poll_ms(), NEXT_POLL_BUSY_MS);
    }

    #[test]
    fn a_page_keeps_to_the_text_budget_but_always_takes_one() {
        let big = "x".repeat(crate::server::MAX_RESULT_TEXT_BYTES);
        let mut page = PollPage::new(100, 0);
        assert!(page.offer(1, Some(occ(1, &big))));
        assert!(!page.offer(2, Some(occ(2, "y"))));
        assert_eq!(page.events.len(), 1);
        assert!(page.more);
    }

    #[test]
    fn a_cursor_before_the_oldest_kept_event_is_truncated() {
        assert!(!truncated(0, None));
        assert!(!truncated(0, Some(1)));
        assert!(!truncated(4, Some(5)));
        assert!(truncated(3, Some(5)));
        assert!(!truncated(9, Some(5)));
        assert!(!truncated(u64::MAX, Some(5)));
    }

    #[test]
    fn errors_carry_the_extension_codes() {
        let e: ErrorData = EventsError::UnknownEvent("x".into()).into();
        assert_eq!(e.code.0, code::UNKNOWN_EVENT);
        assert!(e.message.contains("monitor.lines"), "{}", e.message);
        let e: ErrorData = EventsError::Cursor(BadCursor).into();
        assert_eq!(e.code.0, code::INVALID_CURSOR);
        let e: ErrorData = EventsError::TooManyStreams.into();
        assert_eq!(e.code.0, code::TOO_MANY_SUBSCRIPTIONS);
        assert_eq!(event_id("abc", 7), "wakeful-abc-7");
    }
}
