//! The wire of MCP Events (SEP-3415, `io.modelcontextprotocol/events`):
//! the params and results of `events/list`, `events/poll` and
//! `events/stream`, an occurrence, and the `notifications/events/*`
//! frames. rmcp has no types for them: each request arrives as a custom
//! request and is decoded here.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How an event type can be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Delivery {
    /// `events/poll`.
    Poll,
    /// `events/stream`.
    Push,
    /// `events/subscribe` with a callback URL.
    Webhook,
}

/// One event type, as `events/list` lists it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventType {
    /// What a client subscribes to.
    pub name: &'static str,
    /// What it means and when it happens.
    pub description: &'static str,
    /// The delivery modes it is served by.
    pub delivery: Vec<Delivery>,
    /// JSON Schema of the subscription arguments.
    pub input_schema: Value,
    /// JSON Schema of an occurrence's `data`.
    pub payload_schema: Value,
}

/// Params of `events/list`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListParams {
    /// A page's cursor (wakeful lists every type on one page).
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Result of `events/list`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResult {
    /// Every event type.
    pub events: Vec<EventType>,
    /// Always absent: one page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Params of `events/poll` and `events/stream`: one subscription.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionParams {
    /// The event type.
    pub name: String,
    /// The subscription arguments ([`super::types::Arguments`]).
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
    /// Where to resume; absent or null starts from now.
    #[serde(default)]
    pub cursor: Option<String>,
    /// At most this many events (poll only).
    #[serde(default)]
    pub max_events: Option<u64>,
    /// Do not replay events older than this many milliseconds.
    #[serde(default)]
    pub max_age_ms: Option<u64>,
}

/// One occurrence of an event type.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Occurrence {
    /// Stable: the same event always has the same id (dedup key).
    pub event_id: String,
    /// The event type.
    pub name: &'static str,
    /// When the event was made (RFC 3339).
    pub timestamp: String,
    /// The payload (its `payloadSchema` in `events/list`).
    pub data: Value,
    /// The position after this event.
    pub cursor: String,
}

/// Result of `events/poll`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PollResult {
    /// The occurrences, oldest first.
    pub events: Vec<Occurrence>,
    /// Where the next poll starts.
    pub cursor: String,
    /// Events between the request's cursor and these were lost (pruned).
    pub truncated: bool,
    /// More events wait: poll again at once.
    pub has_more: bool,
    /// When to poll next, in milliseconds.
    pub next_poll_ms: u64,
}

/// The `_meta` key that names the stream a frame belongs to.
pub const SUBSCRIPTION_META: &str = "io.modelcontextprotocol/subscriptionId";

/// `delivery` of `events/subscribe` and `events/unsubscribe`.
#[derive(Debug, Clone, Deserialize)]
pub struct DeliveryParams {
    /// `webhook` (the one mode these methods serve).
    pub mode: String,
    /// Where deliveries are POSTed.
    pub url: String,
    /// The signing secret (`whsec_…`; subscribe only).
    #[serde(default)]
    pub secret: Option<String>,
}

/// Params of `events/subscribe` and `events/unsubscribe`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookParams {
    /// The event type.
    pub name: String,
    /// The subscription arguments ([`super::types::Arguments`]).
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
    /// How occurrences are delivered.
    pub delivery: DeliveryParams,
    /// Where to start; absent or null starts from now (subscribe only).
    #[serde(default)]
    pub cursor: Option<String>,
    /// The subscription's lifetime (subscribe only).
    #[serde(default)]
    pub ttl_ms: Option<u64>,
    /// Accepted and not used: a subscription delivers every event after its
    /// cursor.
    #[serde(default)]
    pub max_age_ms: Option<u64>,
}

/// Result of `events/subscribe`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeResult {
    /// The subscription's id (`X-MCP-Subscription-Id` of its deliveries).
    pub id: String,
    /// Subscribe again (a refresh) before this time (RFC 3339), or the
    /// deliveries stop.
    pub refresh_before: String,
    /// The position deliveries start after.
    pub cursor: String,
    /// Events between the request's cursor and the oldest kept were lost.
    pub truncated: bool,
}
