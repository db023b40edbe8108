//! The lines of an event stream as the daemon writes them and a client
//! reads them: an event reply, with its monitor's description the first
//! time the stream names that monitor ([`crate::ReadEvents::describe`]),
//! and the [`Descriptions`] both sides keep to agree on which time is the
//! first.

use std::collections::HashMap;

use crate::EVENT_REPLY_PREFIX;

/// Most descriptions one stream keeps; past this both sides start over
/// (the next event of each monitor carries its description again).
pub const MAX_DESCRIBED: usize = 512;

/// What comes between the event and the description in a described event
/// line.
const DESCRIPTION_KEY: &str = r#","description":"#;

/// The socket line of an event reply for an event already encoded as JSON,
/// with its monitor's description:
/// `{"type":"event","event":…,"description":"…"}` and a newline.
pub fn described_event_reply_line(event_json: &str, description: &str) -> Vec<u8> {
    let mut line = crate::event_reply_line(event_json);
    line.truncate(line.len() - 2);
    line.extend_from_slice(DESCRIPTION_KEY.as_bytes());
    // A string always encodes.
    line.extend_from_slice(
        serde_json::to_string(description)
            .unwrap_or_default()
            .as_bytes(),
    );
    line.extend_from_slice(b"}\n");
    line
}

/// The event JSON inside an event reply line (without decoding it: a
/// `--json` reader passes it through as it is) and the description the line
/// carried; `None` for any other line. A description is a JSON string, in
/// which every `"` is escaped, so the last `,"description":` of the line is
/// the reply's own.
pub fn event_of_line(line: &str) -> Option<(&str, Option<String>)> {
    let rest = line.strip_prefix(EVENT_REPLY_PREFIX)?.strip_suffix('}')?;
    if rest.ends_with('}') {
        return Some((rest, None));
    }
    let at = rest.rfind(DESCRIPTION_KEY)?;
    let description = serde_json::from_str(&rest[at + DESCRIPTION_KEY.len()..]).ok()?;
    Some((&rest[..at], Some(description)))
}

/// The monitor descriptions one stream carried, at most [`MAX_DESCRIBED`]:
/// the daemon keeps them to send each once ([`Descriptions::first`]), a
/// reader to know each event's ([`Descriptions::of`]). Both keep a
/// description exactly when a line carries one, so they start over at the
/// same line.
#[derive(Debug, Default, Clone)]
pub struct Descriptions {
    known: HashMap<String, String>,
}

impl Descriptions {
    /// The daemon's side: the description to send with an event of
    /// `monitor`, found by `lookup`, the first time only.
    pub fn first(
        &mut self,
        monitor: &str,
        lookup: impl FnOnce() -> Option<String>,
    ) -> Option<String> {
        if self.known.contains_key(monitor) {
            return None;
        }
        let description = lookup()?;
        self.keep(monitor, description.clone());
        Some(description)
    }

    /// The reader's side: the description of an event of `monitor` whose
    /// line carried `sent`.
    pub fn of(&mut self, monitor: &str, sent: Option<String>) -> Option<String> {
        match sent {
            Some(description) => {
                self.keep(monitor, description.clone());
                Some(description)
            }
            None => self.known.get(monitor).cloned(),
        }
    }

    fn keep(&mut self, monitor: &str, description: String) {
        if self.known.len() >= MAX_DESCRIBED {
            self.known.clear();
        }
        self.known.insert(monitor.to_string(), description);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_described_line_is_a_reply_and_splits_back() {
        let json = r#"{"seq":3,"session":"s","monitor_id":"mon-a","kind":"started","ts":"2026-01-01T00:00:00.000Z","text":"x}"}"#;
        let line = described_event_reply_line(json, r#"tests ,"description":"x" }"#);
        let text = std::str::from_utf8(&line).unwrap().trim_end();
        let reply: crate::Reply = serde_json::from_str(text).unwrap();
        assert!(
            matches!(&reply, crate::Reply::Event { event, description: Some(d) } if event.seq == 3 && d.ends_with("\" }"))
        );
        let (event, description) = event_of_line(text).unwrap();
        assert_eq!(event, json);
        assert_eq!(
            description.as_deref(),
            Some(r#"tests ,"description":"x" }"#)
        );
        let plain = crate::event_reply_line(json);
        let plain = std::str::from_utf8(&plain).unwrap().trim_end();
        assert_eq!(event_of_line(plain), Some((json, None)));
        assert_eq!(event_of_line(r#"{"type":"batch","last_seq":3}"#), None);
    }

    #[test]
    fn both_sides_start_over_at_the_same_line() {
        let (mut daemon, mut reader) = (Descriptions::default(), Descriptions::default());
        for i in 0..(MAX_DESCRIBED * 2 + 7) {
            for id in [format!("mon-{i}"), format!("mon-{}", i / 2)] {
                let sent = daemon.first(&id, || (i % 5 != 0).then(|| format!("d{id}")));
                let got = reader.of(&id, sent.clone());
                assert!(got.is_none() || got == Some(format!("d{id}")));
                assert_eq!(daemon.known.len(), reader.known.len());
            }
        }
        assert!(daemon.first("unknown", || None).is_none());
        assert!(reader.of("unknown", None).is_none());
    }
}
