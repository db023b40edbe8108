//! Names on the NATS side: subjects, the stream, buckets, consumers.
//!
//! Session ids and host names are chosen by users and agents: they may hold
//! `.` (a subject's token separator), `*` and `>` (wildcards), spaces or
//! anything else. [`encode`] makes any string one safe token, reversibly
//! ([`decode`]): ASCII letters, digits, `_` and `-` stay as they are, every
//! other byte becomes `=XX` (upper-case hex), and the empty string is `=`.
//! The result is also a valid JetStream key-value key and consumer name.

/// The stream every host ships to.
pub const STREAM: &str = "WAKEFUL";
/// Subjects of shipped events: `wakeful.ev.<session>.<host>.<monitor>`.
pub const EVENTS_PREFIX: &str = "wakeful.ev";
/// Every shipped event (the stream's subjects, the importers' filter).
pub const EVENTS_ALL: &str = "wakeful.ev.>";
/// Subjects of remote control: `wakeful.ctl.<host>`.
pub const CONTROL_PREFIX: &str = "wakeful.ctl";
/// The key-value bucket of heartbeats, one key per host.
pub const HOSTS_BUCKET: &str = "wakeful_hosts";
/// The key-value bucket of monitors, one key per host.
pub const MONITORS_BUCKET: &str = "wakeful_monitors";

fn keeps(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// `text` as one safe subject token (see the module docs).
pub fn encode(text: &str) -> String {
    if text.is_empty() {
        return "=".into();
    }
    let mut out = String::with_capacity(text.len());
    for &b in text.as_bytes() {
        if keeps(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("={b:02X}"));
        }
    }
    out
}

/// The text [`encode`] made `token` from; `None` when no text encodes to it.
pub fn decode(token: &str) -> Option<String> {
    if token == "=" {
        return Some(String::new());
    }
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'=' {
            let hex = token.get(i + 1..i + 3)?;
            let v = u8::from_str_radix(hex, 16).ok()?;
            // Only the encoder's form: upper-case hex of a byte it escapes.
            if keeps(v) || hex.bytes().any(|h| h.is_ascii_lowercase()) {
                return None;
            }
            out.push(v);
            i += 3;
        } else if keeps(b) {
            out.push(b);
            i += 1;
        } else {
            return None;
        }
    }
    if out.is_empty() {
        return None;
    }
    String::from_utf8(out).ok()
}

/// The subject an event of `session`, `host` and `monitor` is shipped on.
pub fn event_subject(session: &str, host: &str, monitor: &str) -> String {
    format!(
        "{EVENTS_PREFIX}.{}.{}.{}",
        encode(session),
        encode(host),
        encode(monitor)
    )
}

/// Session, host and monitor of an event subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSubject {
    /// The session.
    pub session: String,
    /// The host that recorded it.
    pub host: String,
    /// The monitor.
    pub monitor: String,
}

/// Reads an event subject back; `None` for anything else.
pub fn parse_event_subject(subject: &str) -> Option<EventSubject> {
    let rest = subject.strip_prefix(EVENTS_PREFIX)?.strip_prefix('.')?;
    let mut tokens = rest.split('.');
    let session = decode(tokens.next()?)?;
    let host = decode(tokens.next()?)?;
    let monitor = decode(tokens.next()?)?;
    if tokens.next().is_some() {
        return None;
    }
    Some(EventSubject {
        session,
        host,
        monitor,
    })
}

/// The subject host `host`'s daemon answers remote control on.
pub fn control_subject(host: &str) -> String {
    format!("{CONTROL_PREFIX}.{}", encode(host))
}

/// The durable consumer that imports into `host` (one per host).
pub fn consumer_name(host: &str) -> String {
    format!("wakeful-import-{}", encode(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_safe_and_reversible() {
        for s in [
            "",
            "s",
            "a.b",
            "*",
            ">",
            "with space",
            "tab\there",
            "=",
            "=41",
            "ünï/cödé",
            "x.*.>",
            "CLAUDE-1234_ab",
        ] {
            let t = encode(s);
            assert!(!t.is_empty());
            assert!(t.bytes().all(|b| keeps(b) || b == b'='), "{s:?} gave {t:?}");
            assert_eq!(decode(&t).as_deref(), Some(s), "{s:?} via {t:?}");
        }
        assert_eq!(encode("a.b c"), "a=2Eb=20c");
        assert_eq!(encode("CLAUDE-1234_ab"), "CLAUDE-1234_ab");
        // Only what the encoder makes is read back.
        for bad in ["", "a.b", "=4", "=2e", "=41", "a b", "=ZZ", "=FF"] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn event_subjects_round_trip() {
        let s = event_subject("my.session >", "build host", "mon-abc");
        assert_eq!(s, "wakeful.ev.my=2Esession=20=3E.build=20host.mon-abc");
        assert_eq!(
            parse_event_subject(&s),
            Some(EventSubject {
                session: "my.session >".into(),
                host: "build host".into(),
                monitor: "mon-abc".into(),
            })
        );
        assert_eq!(parse_event_subject("wakeful.ev.a.b"), None);
        assert_eq!(parse_event_subject("wakeful.ev.a.b.c.d"), None);
        assert_eq!(parse_event_subject("other.a.b.c"), None);
        assert_eq!(control_subject("a.b"), "wakeful.ctl.a=2Eb");
        assert_eq!(consumer_name("laptop"), "wakeful-import-laptop");
    }
}
