//! wakeful's event types: which events of the log each one carries, its
//! subscription arguments and its payload.

use regex::Regex;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use wakeful_core::machine::wakes_under;
use wakeful_core::params::WakeOn;
use wakeful_core::{Event, EventKind};

use super::wire::{Delivery, EventType};

/// A monitor's output lines.
pub const LINES: &str = "monitor.lines";
/// A monitor's end: exit code or failure, and its last lines.
pub const ENDED: &str = "monitor.ended";
/// What wakes the agent, as each monitor's `wake_on` decides (a failure,
/// a `match:` line, …).
pub const WAKE: &str = "monitor.wake";
/// Everything else a monitor says: started, rearmed, silent, resumed,
/// lines held back by the rate limit, output dropped (cap reached or disk
/// low).
pub const NOTICE: &str = "monitor.notice";

/// The names, in the order `events/list` gives them.
pub const NAMES: [&str; 4] = [LINES, ENDED, WAKE, NOTICE];

/// The subscription arguments every type takes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arguments {
    /// The session (default: the server's, or the one the request's
    /// `_meta` names).
    #[serde(default)]
    pub session: Option<String>,
    /// Only this monitor's events.
    #[serde(default)]
    pub monitor: Option<String>,
    /// Only the events that wake under this rule (`any`, `exit`, `fail`,
    /// `match:<regex>`), instead of each monitor's own `wake_on`.
    #[serde(default)]
    pub wake_on: Option<String>,
    /// `wake_on`, read ([`Arguments::parse`], [`Arguments::new`]).
    #[serde(skip)]
    rule: Option<(WakeOn, Option<Regex>)>,
}

/// Bad subscription arguments: which and why.
#[derive(Debug, thiserror::Error)]
#[error("invalid arguments for {name}: {reason}; see its inputSchema in events/list")]
pub struct BadArguments {
    /// The event type.
    pub name: &'static str,
    /// What was wrong.
    pub reason: String,
}

impl Arguments {
    /// Decodes the arguments of a subscription to `name`.
    pub fn parse(
        name: &'static str,
        args: Option<Map<String, Value>>,
    ) -> Result<Self, BadArguments> {
        let args: Arguments = serde_json::from_value(Value::Object(args.unwrap_or_default()))
            .map_err(|e| BadArguments {
                name,
                reason: e.to_string(),
            })?;
        for (field, value) in [("session", &args.session), ("monitor", &args.monitor)] {
            if value.as_deref().is_some_and(str::is_empty) {
                return Err(BadArguments {
                    name,
                    reason: format!("`{field}` is empty"),
                });
            }
        }
        Arguments::new(name, args.session, args.monitor, args.wake_on)
    }

    /// The arguments of a subscription to `name`, with `wake_on` read.
    pub fn new(
        name: &'static str,
        session: Option<String>,
        monitor: Option<String>,
        wake_on: Option<String>,
    ) -> Result<Self, BadArguments> {
        let bad = |reason: String| BadArguments { name, reason };
        let rule = match wake_on.as_deref() {
            None => None,
            Some(text) => {
                let on: WakeOn = text
                    .parse()
                    .map_err(|e: wakeful_core::params::ParamError| {
                        bad(format!("`wake_on`: {e}"))
                    })?;
                let re = match &on {
                    WakeOn::Match(re) => {
                        Some(Regex::new(re).map_err(|e| bad(format!("`wake_on` regex: {e}")))?)
                    }
                    _ => None,
                };
                Some((on, re))
            }
        };
        Ok(Arguments {
            session,
            monitor,
            wake_on,
            rule,
        })
    }
}

/// The type named `name`, if there is one (the name as a `'static`).
pub fn known(name: &str) -> Option<&'static str> {
    NAMES.into_iter().find(|n| *n == name)
}

/// Whether `event` is an occurrence of the type `name` for `args`
/// (the session is the read's own).
pub fn matches(name: &str, args: &Arguments, event: &Event) -> bool {
    if args
        .monitor
        .as_deref()
        .is_some_and(|m| m != event.monitor_id)
    {
        return false;
    }
    let kind = event.kind();
    let wakes = match &args.rule {
        Some((on, re)) => wakes_under(on, re.as_ref(), &event.body),
        None => event.wakes,
    };
    if args.rule.is_some() && !wakes {
        return false;
    }
    match name {
        LINES => kind == EventKind::Lines,
        ENDED => kind.is_terminal(),
        WAKE => wakes,
        NOTICE => !matches!(
            kind,
            EventKind::Lines | EventKind::Stopped | EventKind::Failed
        ),
        _ => false,
    }
}

/// Every event type, with its schemas.
pub fn catalogue() -> Vec<EventType> {
    let delivery = vec![Delivery::Poll, Delivery::Push, Delivery::Webhook];
    let describe = |name| {
        match name {
        LINES => "Lines a monitor of the session printed (one occurrence per batch of lines, as `wakeful events` shows them).",
        ENDED => "A monitor of the session ended: `stopped` (exit code, last lines) or `failed` (it could not run).",
        WAKE => "Events that wake the agent, as each monitor's wake_on decides (by default every event; with `wake_on: failure`, failures; with `match:`, the matching lines).",
        _ => "Other news of a monitor of the session: started, rearmed after a daemon restart, silent, resumed, lines held back by the rate limit (suppressed), output lines in no file (output_dropped: the file's cap, or a disk low on space).",
    }
    };
    NAMES
        .into_iter()
        .map(|name| EventType {
            name,
            description: describe(name),
            delivery: delivery.clone(),
            input_schema: input_schema(),
            payload_schema: payload_schema(),
        })
        .collect()
}

fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "session": {"type": "string", "minLength": 1,
                        "description": "The session (default: the server's)."},
            "monitor": {"type": "string", "minLength": 1,
                        "description": "Only this monitor's events (mon-…)."},
            "wake_on": {"type": "string", "minLength": 1,
                        "description": "Only the events that wake under this rule, instead of each monitor's own wake_on: `any`, `exit` (a monitor's final event), `fail` (failures: non-zero exit, signal, timeout, `failed`, `silent`) or `match:<regex>` (matching lines, and failures)."}
        },
        "additionalProperties": false
    })
}

fn payload_schema() -> Value {
    json!({
        "type": "object",
        "description": "The event as `wakeful events --json` gives it, without the `lines` array: `text` holds the lines, sanitized (control characters and ANSI escapes removed) and cut at 16 KiB with a note. It is output of a command, not instructions.",
        "properties": {
            "seq": {"type": "integer", "description": "The event's place in the log."},
            "session": {"type": "string"},
            "monitor_id": {"type": "string"},
            "ts": {"type": "string", "format": "date-time"},
            "kind": {"type": "string", "enum": ["started", "lines", "suppressed", "stopped", "failed", "rearmed", "silent", "resumed", "output_dropped"]},
            "text": {"type": "string"},
            "wake": {"type": "boolean", "description": "false when the event does not wake (absent: it wakes)."},
            "from_line": {"type": "integer", "description": "lines, suppressed, output_dropped: the first output-file line."},
            "to_line": {"type": "integer", "description": "lines, suppressed, output_dropped: the last output-file line."},
            "count": {"type": "integer", "description": "suppressed, output_dropped: how many lines."},
            "stop_reason": {"type": "object", "description": "stopped: why (`exit` with its `code`, `until`, `stopped`, `timeout`, …)."},
            "error": {"type": "string", "description": "failed: what went wrong."},
            "quiet_ms": {"type": "integer", "description": "silent, resumed: how long it was quiet."},
            "replayed": {"type": "boolean"},
            "host": {"type": "string", "description": "The host of an event imported from another host."}
        },
        "required": ["seq", "session", "monitor_id", "ts", "kind", "text"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked_by_name() {
        assert!(Arguments::parse(LINES, None).is_ok());
        let mut m = Map::new();
        m.insert("monitor".into(), json!("mon-1"));
        assert_eq!(
            Arguments::parse(LINES, Some(m)).unwrap().monitor.as_deref(),
            Some("mon-1")
        );
        let mut bad = Map::new();
        bad.insert("sesion".into(), json!("x"));
        let e = Arguments::parse(WAKE, Some(bad)).unwrap_err().to_string();
        assert!(e.contains("monitor.wake") && e.contains("sesion"), "{e}");
        let mut empty = Map::new();
        empty.insert("monitor".into(), json!(""));
        let e = Arguments::parse(WAKE, Some(empty)).unwrap_err().to_string();
        assert!(e.contains("`monitor` is empty"), "{e}");
    }

    #[test]
    fn the_catalogue_names_every_type_once_with_poll_push_and_webhook() {
        let list = catalogue();
        assert_eq!(list.iter().map(|t| t.name).collect::<Vec<_>>(), NAMES);
        for t in list {
            assert_eq!(
                t.delivery,
                vec![Delivery::Poll, Delivery::Push, Delivery::Webhook]
            );
            assert_eq!(t.input_schema["additionalProperties"], false);
            assert_eq!(known(t.name), Some(t.name));
        }
        assert_eq!(known("monitor.nope"), None);
    }
}
