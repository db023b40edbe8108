//! Claude Code channel notifications: what `notifications/claude/channel`
//! carries for an event, and which events are held back for the next one.
//!
//! Claude Code shows such a notification to the model as
//! `<channel source="wakeful" monitor_id="…" seq="…" kind="…">content</channel>`
//! and wakes an idle session with it. `meta` carries identifier keys only,
//! with string values (they become the tag's attributes); `content` is the
//! event text framed by the presenter ([`crate::present`]).
//!
//! Events that do not wake (their monitor was started with `wake_on` other
//! than `any`) are held back and sent in one notification together with the
//! next event that wakes; at most [`MAX_HELD`] are quoted, the text points
//! to the rest ([`Held`]).
//!
//! Both writers of these notifications use this module: `wakeful mcp` when
//! it relays events itself, and the daemon when `wakeful mcp` handed it its
//! stdout ([`Notification::frame`] is the whole JSON-RPC line).

use serde::Serialize;
use serde_json::Value;

use crate::Event;

/// The notification method Claude Code channels listen to.
pub const METHOD: &str = "notifications/claude/channel";
/// The experimental capability that makes Claude Code register the channel.
pub const CAPABILITY: &str = "claude/channel";
/// Largest `content` body, in bytes; longer text is cut with a note.
pub const MAX_CONTENT_BYTES: usize = 16 * 1024;
/// Most events that do not wake quoted in the notification of the next one
/// that does.
pub const MAX_HELD: usize = 50;

/// The text the model reads: the event framed by the presenter (which
/// monitor, that it is monitor output and not user input, the text
/// sanitized and capped with a pointer to the output file).
pub fn content(event: &Event, description: Option<&str>) -> String {
    crate::present::single(event, description, MAX_CONTENT_BYTES)
}

/// The `params` of one notification: `content` and `meta`. Serialized as
/// the same JSON as a `serde_json::Value` of it (keys in sorted order), but
/// straight to text ([`Notification::frame`]), without building that value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notification {
    /// The presenter's text of the events it carries.
    pub content: String,
    /// Identifier keys, string values.
    pub meta: Meta,
}

/// The `meta` of a [`Notification`] (fields in the order JSON shows them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Meta {
    /// The first event the text covers, when events held back come first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_seq: Option<String>,
    /// The kind of the event that woke.
    pub kind: &'static str,
    /// Its monitor.
    pub monitor_id: String,
    /// Its seq.
    pub seq: String,
}

impl Notification {
    /// For `event` alone; `description` is the monitor's, when known.
    pub fn single(event: &Event, description: Option<&str>) -> Self {
        Notification {
            content: content(event, description),
            meta: Meta::of(event, None),
        }
    }

    /// For `held` events that did not wake followed by `event`, which
    /// does: `content` frames them all (the events past those quoted, and
    /// `more` others, are counted with a pointer to read them), `meta`
    /// names the event that woke, and `from_seq` the first one the text
    /// covers.
    pub fn with_held(
        held: &[(Event, Option<String>)],
        more: u64,
        event: &Event,
        description: Option<&str>,
    ) -> Self {
        let mut all: Vec<(Event, Option<String>)> = held.to_vec();
        all.push((event.clone(), description.map(str::to_string)));
        let (mut content, n) =
            crate::present::batch(&all, MAX_CONTENT_BYTES, MAX_CONTENT_BYTES / 4, None);
        let from_seq = held.first().map_or(event.seq, |(e, _)| e.seq);
        let left = (all.len() - n) as u64 + more;
        if left > 0 {
            content.push_str(&format!(
                "\n({left} more events that did not wake: `wakeful events --session {} --after {}`)",
                event.session,
                from_seq.saturating_sub(1)
            ));
        }
        Notification {
            content,
            meta: Meta::of(event, Some(from_seq)),
        }
    }

    /// As a JSON value (what an MCP library sends as `params`).
    pub fn params(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The whole JSON-RPC line, newline included: what goes to the
    /// client's stdin (`{"jsonrpc":"2.0","method":METHOD,"params":…}`).
    pub fn frame(&self) -> String {
        #[derive(Serialize)]
        struct Frame<'a> {
            jsonrpc: &'static str,
            method: &'static str,
            params: &'a Notification,
        }
        let frame = Frame {
            jsonrpc: "2.0",
            method: METHOD,
            params: self,
        };
        let mut line = serde_json::to_string(&frame).unwrap_or_default();
        line.push('\n');
        line
    }
}

impl Meta {
    fn of(event: &Event, from_seq: Option<u64>) -> Self {
        Meta {
            from_seq: from_seq.map(|s| s.to_string()),
            kind: event.kind().as_str(),
            monitor_id: event.monitor_id.clone(),
            seq: event.seq.to_string(),
        }
    }
}

/// The events read since the last notification that did not wake: a pure
/// state machine fed every event of the stream in seq order.
#[derive(Debug, Default, Clone)]
pub struct Held {
    /// Quoted in the next notification, with their monitors' descriptions.
    events: Vec<(Event, Option<String>)>,
    /// Held past [`MAX_HELD`]: only counted.
    more: u64,
}

impl Held {
    /// Takes the next event of the stream: the notification to send now
    /// when it wakes (with every event held before it), `None`
    /// when it is held back.
    pub fn offer(&mut self, event: &Event, description: Option<&str>) -> Option<Notification> {
        if !event.wakes {
            if self.events.len() < MAX_HELD {
                self.events
                    .push((event.clone(), description.map(str::to_string)));
            } else {
                self.more += 1;
            }
            return None;
        }
        let n = if self.events.is_empty() {
            Notification::single(event, description)
        } else {
            Notification::with_held(&self.events, self.more, event, description)
        };
        self.events.clear();
        self.more = 0;
        Some(n)
    }

    /// Whether events are waiting for the next one that wakes.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.more == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventBody;
    use chrono::TimeZone;
    use serde_json::json;

    /// The frame built from a `serde_json::Value`, to hold the typed one to.
    fn frame(params: &Value) -> String {
        let mut line = json!({ "jsonrpc": "2.0", "method": METHOD, "params": params }).to_string();
        line.push('\n');
        line
    }

    fn event(seq: u64, wakes: bool, text: &str) -> Event {
        Event {
            wakes,
            seq,
            session: "s".into(),
            monitor_id: "mon-abc".into(),
            ts: chrono::Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
            text: text.into(),
            body: EventBody::MonitorEvent {
                lines: text.lines().map(String::from).collect(),
                from_line: 3,
                to_line: 3 + text.lines().count() as u64 - 1,
            },
            replayed: false,
            host: None,
        }
    }

    #[test]
    fn params_frame_sanitize_and_identify() {
        let e = event(42, true, "\u{1b}[31merror\u{1b}[0m: x\nok");
        let p = Notification::single(&e, Some("build\u{7}")).params();
        assert_eq!(
            p,
            json!({
                "content": format!("[wakeful mon-abc \"build\" · 2 lines (output lines 3–4)] {}\nerror: x\nok", crate::present::NOT_USER_INPUT),
                "meta": {"monitor_id": "mon-abc", "seq": "42", "kind": "lines"},
            })
        );
    }

    #[test]
    fn long_text_is_capped_with_a_pointer_to_the_output_file() {
        let long = "x".repeat(MAX_CONTENT_BYTES + 10);
        let c = content(&event(1, true, &long), None);
        assert!(c.len() < MAX_CONTENT_BYTES + 400, "{}", c.len());
        assert!(c.contains("…[10 more bytes cut]"), "{c}");
        assert!(c.contains("wakeful output mon-abc --from-line 3 --to-line 3"));
    }

    #[test]
    fn a_frame_is_one_json_rpc_notification_line() {
        let p = Notification::single(&event(7, true, "a\nb"), None).params();
        let line = frame(&p);
        assert!(line.ends_with('\n'));
        assert_eq!(line.matches('\n').count(), 1, "{line}");
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v, json!({"jsonrpc": "2.0", "method": METHOD, "params": p}));
    }

    #[test]
    fn the_typed_frame_is_the_same_text_as_the_value_frame() {
        let quiet = (event(1, false, "quiet \"one\""), Some("d\u{7}".to_string()));
        for n in [
            Notification::single(&event(7, true, "a\nb"), Some("desc")),
            Notification::single(&event(8, true, "c"), None),
            Notification::with_held(&[quiet], 2, &event(9, true, "loud"), None),
        ] {
            assert_eq!(n.frame(), frame(&n.params()));
        }
    }

    #[test]
    fn events_that_do_not_wake_ride_with_the_next_that_does() {
        let mut held = Held::default();
        assert!(held.offer(&event(1, false, "quiet one"), None).is_none());
        assert!(held
            .offer(&event(2, false, "quiet two"), Some("d"))
            .is_none());
        assert!(!held.is_empty());
        let p = held
            .offer(&event(3, true, "loud"), None)
            .expect("wakes")
            .params();
        assert_eq!(p["meta"]["seq"], "3");
        assert_eq!(p["meta"]["from_seq"], "1");
        let text = p["content"].as_str().unwrap();
        let (one, two, three) = (
            text.find("quiet one").unwrap(),
            text.find("quiet two").unwrap(),
            text.find("loud").unwrap(),
        );
        assert!(one < two && two < three, "{text}");
        assert!(held.is_empty());
        // The next waking event stands alone again.
        let p = held.offer(&event(4, true, "alone"), None).unwrap().params();
        assert!(p["meta"].get("from_seq").is_none());
    }

    #[test]
    fn past_the_most_held_the_rest_are_counted_with_a_pointer() {
        let mut held = Held::default();
        for seq in 1..=(MAX_HELD as u64 + 5) {
            assert!(held.offer(&event(seq, false, "q"), None).is_none());
        }
        let p = held
            .offer(&event(MAX_HELD as u64 + 6, true, "loud"), None)
            .unwrap()
            .params();
        let text = p["content"].as_str().unwrap();
        assert!(
            text.contains(
                "(5 more events that did not wake: `wakeful events --session s --after 0`)"
            ),
            "{text}"
        );
        assert_eq!(p["meta"]["from_seq"], "1");
    }
}
