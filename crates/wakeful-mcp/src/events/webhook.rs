//! Webhook delivery of MCP Events, its pure parts: the signing secret, the
//! Standard Webhooks v1 signature, the request bodies, the subscription id
//! and the retry machine. The daemon keeps the subscriptions and sends the
//! requests (`wakeful_daemon::server::subscriptions`); `wakeful mcp`
//! answers `events/subscribe` and `events/unsubscribe` with these.
//!
//! A delivery is a POST of one occurrence (the same JSON `events/poll`
//! returns for it) with the headers `webhook-id` (the occurrence's
//! `eventId`), `webhook-timestamp` (seconds since the epoch, of this
//! attempt), `webhook-signature` (`v1,` and the base64 of HMAC-SHA256, keyed
//! by the secret's bytes, over `id.timestamp.body`) and
//! `X-MCP-Subscription-Id`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use wakeful_core::Event;

use super::cursor::{self, Cursors};
use super::types::{self, Arguments};
use super::Subscription;

/// What every signing secret starts with.
pub const SECRET_PREFIX: &str = "whsec_";
/// The fewest bytes a secret may hold (after base64 decoding).
pub const MIN_SECRET_BYTES: usize = 24;
/// The most bytes a secret may hold.
pub const MAX_SECRET_BYTES: usize = 64;
/// Subscriptions one session may hold (a refresh of one it holds does not
/// count again).
pub const MAX_PER_SESSION: usize = 16;
/// A subscription's lifetime when `events/subscribe` names no `ttlMs`.
pub const DEFAULT_TTL_MS: u64 = 24 * 3600 * 1000;
/// The longest lifetime accepted (a longer `ttlMs` is refused).
pub const MAX_TTL_MS: u64 = 7 * 24 * 3600 * 1000;
/// The header that names the subscription of a delivery.
pub const SUBSCRIPTION_HEADER: &str = "X-MCP-Subscription-Id";
/// Attempts at one delivery before the subscription is given up.
pub const MAX_ATTEMPTS: u32 = 12;
/// The wait after the first failed attempt; it doubles after each one.
pub const FIRST_RETRY_MS: u64 = 1_000;
/// The longest wait between two attempts.
pub const MAX_RETRY_MS: u64 = 300_000;

/// A signing secret that is not `whsec_` and the standard base64 of 24 to
/// 64 bytes. The message never repeats the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid webhook secret: {0}")]
pub struct BadSecret(&'static str);

/// A signing secret's key bytes. Its `Debug` shows no byte of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl Secret {
    /// Decodes `whsec_` followed by the standard base64 (padded) of 24 to
    /// 64 bytes.
    pub fn parse(secret: &str) -> Result<Secret, BadSecret> {
        let encoded = secret
            .strip_prefix(SECRET_PREFIX)
            .ok_or(BadSecret("it must start with whsec_"))?;
        let bytes = STANDARD
            .decode(encoded)
            .map_err(|_| BadSecret("the part after whsec_ must be standard base64"))?;
        if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&bytes.len()) {
            return Err(BadSecret("it must hold 24 to 64 bytes"));
        }
        Ok(Secret(bytes))
    }

    /// The `webhook-signature` header of the message `id` sent at
    /// `timestamp` (seconds since the epoch) with `body`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &str) -> String {
        // HMAC takes a key of any length: this cannot fail.
        let mut mac = match Hmac::<Sha256>::new_from_slice(&self.0) {
            Ok(m) => m,
            Err(_) => return String::new(),
        };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body.as_bytes());
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// The id of the subscription of `session` to `name` with `monitor`
/// delivered to `url` in the home of `state_dir`: the same for the same
/// four, so that a second `events/subscribe` of them refreshes it and
/// `events/unsubscribe` (which names them, not the id) finds it.
pub fn subscription_id(
    state_dir: &std::path::Path,
    session: &str,
    name: &str,
    monitor: Option<&str>,
    url: &str,
) -> String {
    let mut h = Sha256::new();
    h.update(b"wakeful mcp events webhook\0");
    h.update(state_dir.as_os_str().as_encoded_bytes());
    for part in [session, name, monitor.unwrap_or(""), url] {
        h.update(b"\0");
        h.update(part.as_bytes());
    }
    let hex: String = h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("whk_{hex}")
}

/// What the daemon delivers for one subscription: which events are
/// occurrences of it, and their bodies.
pub struct Target(Subscription);

impl Target {
    /// The subscription of `session` to the type `name` (`None` for a type
    /// this build does not know, or a `wake_on` rule that cannot be read),
    /// for one monitor's events or all, and those that wake under
    /// `wake_on`, when given.
    pub fn new(
        state_dir: &std::path::Path,
        session: &str,
        name: &str,
        monitor: Option<String>,
        wake_on: Option<String>,
    ) -> Option<Target> {
        let name = types::known(name)?;
        Some(Target(Subscription {
            name,
            args: Arguments::new(name, Some(session.to_string()), monitor, wake_on).ok()?,
            session: session.to_string(),
            cursors: Cursors::new(state_dir, session),
            after: None,
            max_age: None,
            home: cursor::home_id(state_dir),
        }))
    }

    /// `event` as a delivery: its `eventId` and the body to sign and send;
    /// `None` when it is no occurrence of this subscription.
    pub fn body(&self, event: &Event) -> Option<(String, String)> {
        if !types::matches(self.0.name, &self.0.args, event) {
            return None;
        }
        let occurrence = self.0.occurrence(event);
        let body = serde_json::to_string(&occurrence).ok()?;
        Some((occurrence.event_id, body))
    }

    /// The cursor after `seq` (what `events/subscribe` answers with).
    pub fn cursor(&self, seq: u64) -> String {
        self.0.cursors.encode(seq)
    }

    /// The seq `cursor` stands after, if it is one of this subscription's.
    pub fn decode(&self, cursor: &str) -> Result<u64, cursor::BadCursor> {
        self.0.cursors.decode(cursor)
    }
}

/// The body of the verification request sent before a subscription is
/// accepted: the receiver must answer 2xx with `{"challenge": challenge}`.
pub fn verification_body(challenge: &str) -> String {
    json!({"type": "verification", "challenge": challenge}).to_string()
}

/// Whether `response` (a verification request's response body) returns
/// `challenge`.
pub fn verification_answered(response: &str, challenge: &str) -> bool {
    serde_json::from_str::<Value>(response)
        .ok()
        .and_then(|v| {
            v.get("challenge")
                .and_then(Value::as_str)
                .map(|c| c == challenge)
        })
        .unwrap_or(false)
}

/// How one attempt at a delivery went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// A 2xx answer.
    Delivered,
    /// A failure that may pass (a 5xx or 4xx answer, a transport error).
    Failed(String),
    /// A failure that cannot pass: 410 Gone (the receiver dropped the
    /// subscription), a redirect (never followed), an address the network
    /// policy refuses.
    Refused(String),
}

impl Attempt {
    /// The attempt of an HTTP answer with `status`.
    pub fn of_status(status: u16) -> Attempt {
        match status {
            200..=299 => Attempt::Delivered,
            410 => Attempt::Refused("the receiver answered HTTP 410 Gone".into()),
            300..=399 => Attempt::Refused(format!(
                "the receiver answered HTTP {status}, a redirect; wakeful never follows a webhook's redirects"
            )),
            _ => Attempt::Failed(format!("the receiver answered HTTP {status}")),
        }
    }
}

/// What to do after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Delivered: on to the next occurrence.
    Done,
    /// Try again at this time (ms since the epoch).
    RetryAt(i64),
    /// Stop delivering: the subscription is given up, for this reason.
    GiveUp(String),
}

/// The retries of one delivery: after a failure wait [`FIRST_RETRY_MS`],
/// doubling up to [`MAX_RETRY_MS`]; after [`MAX_ATTEMPTS`] failed attempts
/// (waits of 1 s to 5 min, about 19 minutes in all) or one refused
/// attempt, give up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// A delivery not tried yet.
    pub fn new() -> Backoff {
        Backoff::default()
    }

    /// Failed attempts so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// What follows `attempt`, made at `now_ms`.
    pub fn after(&mut self, attempt: &Attempt, now_ms: i64) -> Next {
        match attempt {
            Attempt::Delivered => {
                self.failures = 0;
                Next::Done
            }
            Attempt::Refused(why) => Next::GiveUp(why.clone()),
            Attempt::Failed(why) => {
                self.failures += 1;
                if self.failures >= MAX_ATTEMPTS {
                    return Next::GiveUp(format!(
                        "{MAX_ATTEMPTS} attempts failed, the last: {why}"
                    ));
                }
                let delay = FIRST_RETRY_MS
                    .saturating_mul(1u64 << (self.failures - 1).min(20))
                    .min(MAX_RETRY_MS);
                Next::RetryAt(now_ms.saturating_add(i64::try_from(delay).unwrap_or(i64::MAX)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_matches_a_fixed_vector() {
        // 32 bytes 0x00..0x1f; the expected value computed independently
        // (Python: base64(hmac.new(key, b"msg_1.1700000000.{\"a\":1}",
        // sha256).digest())).
        let key: Vec<u8> = (0u8..32).collect();
        let secret = Secret::parse(&format!("whsec_{}", STANDARD.encode(&key))).unwrap();
        assert_eq!(
            secret.sign("msg_1", 1_700_000_000, r#"{"a":1}"#),
            "v1,AMaOha7DUT/0J0JMycRuYOBSvbx3WtwLd2khXXbaVj4="
        );
        assert_eq!(format!("{secret:?}"), "Secret(…)");
    }

    #[test]
    fn secrets_need_the_prefix_base64_and_24_to_64_bytes() {
        let ok = |n: usize| format!("whsec_{}", STANDARD.encode(vec![7u8; n]));
        assert!(Secret::parse(&ok(24)).is_ok());
        assert!(Secret::parse(&ok(64)).is_ok());
        assert!(Secret::parse(&ok(23)).is_err());
        assert!(Secret::parse(&ok(65)).is_err());
        assert!(Secret::parse(&ok(32)[6..]).is_err());
        assert!(Secret::parse("whsec_not*base64!").is_err());
        let e = Secret::parse("whsec_c2VjcmV0").unwrap_err().to_string();
        assert!(!e.contains("c2VjcmV0"), "{e}");
    }

    #[test]
    fn backoff_doubles_then_gives_up() {
        let mut b = Backoff::new();
        let fail = Attempt::Failed("HTTP 503".into());
        assert_eq!(b.after(&fail, 0), Next::RetryAt(1_000));
        assert_eq!(b.after(&fail, 10_000), Next::RetryAt(12_000));
        assert_eq!(b.after(&fail, 0), Next::RetryAt(4_000));
        assert_eq!(b.after(&Attempt::Delivered, 0), Next::Done);
        assert_eq!(b.failures(), 0);
        let mut waits = vec![];
        loop {
            match b.after(&fail, 0) {
                Next::RetryAt(t) => waits.push(t),
                Next::GiveUp(why) => {
                    assert!(
                        why.contains("12 attempts") && why.contains("HTTP 503"),
                        "{why}"
                    );
                    break;
                }
                Next::Done => unreachable!(),
            }
        }
        assert_eq!(waits.len(), MAX_ATTEMPTS as usize - 1);
        assert_eq!(waits.last(), Some(&(MAX_RETRY_MS as i64)));
        let total: i64 = waits.iter().sum();
        assert!(total < 20 * 60 * 1000, "{total}");
    }

    #[test]
    fn gone_and_redirects_give_up_at_once() {
        let mut b = Backoff::new();
        assert!(matches!(
            b.after(&Attempt::of_status(410), 0),
            Next::GiveUp(_)
        ));
        assert!(
            matches!(b.after(&Attempt::of_status(307), 0), Next::GiveUp(w) if w.contains("redirect"))
        );
        assert_eq!(Attempt::of_status(204), Attempt::Delivered);
        assert!(matches!(Attempt::of_status(503), Attempt::Failed(_)));
        assert!(matches!(Attempt::of_status(401), Attempt::Failed(_)));
    }

    #[test]
    fn ids_are_stable_and_distinct() {
        let d = std::path::Path::new("/h");
        let a = subscription_id(d, "s", "monitor.lines", None, "https://x/a");
        assert_eq!(
            a,
            subscription_id(d, "s", "monitor.lines", None, "https://x/a")
        );
        assert_ne!(
            a,
            subscription_id(d, "s", "monitor.lines", Some("mon-1"), "https://x/a")
        );
        assert_ne!(
            a,
            subscription_id(d, "t", "monitor.lines", None, "https://x/a")
        );
        assert!(a.starts_with("whk_") && a.len() == 36, "{a}");
    }

    #[test]
    fn verification_round_trip() {
        let body = verification_body("abc");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v, json!({"type": "verification", "challenge": "abc"}));
        assert!(verification_answered(r#"{"challenge":"abc"}"#, "abc"));
        assert!(!verification_answered(r#"{"challenge":"abd"}"#, "abc"));
        assert!(!verification_answered("", "abc"));
    }
}
