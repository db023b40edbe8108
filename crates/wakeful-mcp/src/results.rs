//! What the tools answer, typed: each tool's result is built from the
//! daemon's typed reply ([`wakeful_protocol::Call::Reply`]) and turned into
//! the JSON the client gets in one place ([`to_value`]).

use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;
use wakeful_core::MonitorInfo;
use wakeful_protocol::{RunResult, StartResult, WakeInfo};

/// `monitor_start`: the daemon's [`StartResult`] without its `after_seq`
/// (the tools read events by their own cursor).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Started {
    /// The monitor id.
    pub id: String,
    /// Its session.
    pub session: String,
    /// True when the key was held and nothing was started.
    pub already_running: bool,
    /// Its output file.
    pub output_path: PathBuf,
    /// Whether its events will wake the agent now.
    pub wake: WakeInfo,
}

impl From<StartResult> for Started {
    fn from(r: StartResult) -> Self {
        Started {
            id: r.id,
            session: r.session,
            already_running: r.already_running,
            output_path: r.output_path,
            wake: r.wake,
        }
    }
}

/// `terminal_run`: the daemon's [`RunResult`], with `monitor_id` always
/// there (`null` without `until`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ran {
    /// The terminal id.
    pub id: String,
    /// Its session.
    pub session: String,
    /// Its output file.
    pub output_path: PathBuf,
    /// The monitor attached with `until`, if any.
    pub monitor_id: Option<String>,
    /// Whether the session's events will wake the agent now.
    pub wake: WakeInfo,
}

impl From<RunResult> for Ran {
    fn from(r: RunResult) -> Self {
        Ran {
            id: r.id,
            session: r.session,
            output_path: r.output_path,
            monitor_id: r.monitor_id,
            wake: r.wake,
        }
    }
}

/// `monitor_list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Monitors {
    /// The daemon's list.
    pub monitors: Vec<MonitorInfo>,
}

/// `monitor_events`: one page of events.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventsPage {
    /// The events, as the daemon stored them.
    pub events: Vec<Value>,
    /// The seq to pass as `after` next.
    pub last_seq: u64,
    /// More events were there than the page holds.
    pub more: bool,
}

/// `monitor_wait`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Waited {
    /// A batch (acknowledged once this result was written).
    Batch {
        /// The events.
        events: Vec<Value>,
        /// The last seq acknowledged (`null` for an empty batch).
        acked: Option<u64>,
        /// Always false here.
        timed_out: bool,
        /// Events were left out (they stay for the next call).
        more: bool,
    },
    /// Nothing within the timeout.
    TimedOut {
        /// Always empty.
        events: [Value; 0],
        /// Always true here.
        timed_out: bool,
        /// Always false here.
        more: bool,
        /// What to do next.
        hint: String,
    },
}

impl Waited {
    /// A batch.
    pub fn batch(events: Vec<Value>, acked: Option<u64>, more: bool) -> Self {
        Waited::Batch {
            events,
            acked,
            timed_out: false,
            more,
        }
    }

    /// Nothing within `timeout_ms`.
    pub fn timed_out(timeout_ms: u64) -> Self {
        Waited::TimedOut {
            events: [],
            timed_out: true,
            more: false,
            hint: format!(
                "no new events within {timeout_ms} ms; call monitor_wait again to keep waiting"
            ),
        }
    }
}

/// A tool's result as the JSON the client gets.
pub fn to_value<T: Serialize>(result: &T) -> Result<Value, serde_json::Error> {
    serde_json::to_value(result)
}

/// A wait's result with the start result a `monitor_start` task kept
/// (`note`) under `monitor`.
pub(crate) fn with_monitor<E>(result: Result<Value, E>, note: Option<&str>) -> Result<Value, E> {
    let started = note.and_then(|n| serde_json::from_str::<Value>(n).ok());
    result.map(|mut value| {
        if let (Some(started), Some(obj)) = (started, value.as_object_mut()) {
            obj.insert("monitor".into(), started);
        }
        value
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wake() -> WakeInfo {
        WakeInfo {
            route: wakeful_protocol::WakeVia::None,
            live: false,
            reason: "r".into(),
        }
    }

    /// The shapes the tools always had (`json!` before these types).
    #[test]
    fn results_keep_their_shapes() {
        let started = Started::from(StartResult {
            id: "mon-1".into(),
            session: "s".into(),
            already_running: false,
            output_path: "/o/mon-1.log".into(),
            after_seq: 7,
            wake: wake(),
        });
        assert_eq!(
            to_value(&started).unwrap(),
            serde_json::json!({"id": "mon-1", "session": "s", "already_running": false,
                "output_path": "/o/mon-1.log",
                "wake": {"route": "none", "live": false, "reason": "r"}})
        );
        let ran = Ran::from(RunResult {
            id: "term-1".into(),
            session: "s".into(),
            output_path: "/o/term-1.log".into(),
            monitor_id: None,
            wake: wake(),
        });
        assert_eq!(to_value(&ran).unwrap()["monitor_id"], Value::Null);
        assert_eq!(
            to_value(&Waited::batch(vec![], None, false)).unwrap(),
            serde_json::json!({"events": [], "acked": null, "timed_out": false, "more": false})
        );
        assert_eq!(
            to_value(&Waited::timed_out(5)).unwrap(),
            serde_json::json!({"events": [], "timed_out": true, "more": false,
                "hint": "no new events within 5 ms; call monitor_wait again to keep waiting"})
        );
        assert_eq!(
            to_value(&EventsPage {
                events: vec![],
                last_seq: 3,
                more: true
            })
            .unwrap(),
            serde_json::json!({"events": [], "last_seq": 3, "more": true})
        );
    }

    #[test]
    fn a_wait_carries_the_start_result_it_kept_under_monitor() {
        let waited = || Ok::<_, ()>(serde_json::json!({"events": []}));
        assert_eq!(
            with_monitor(waited(), Some(r#"{"id": "mon-1"}"#)).unwrap(),
            serde_json::json!({"events": [], "monitor": {"id": "mon-1"}})
        );
        assert_eq!(
            with_monitor(waited(), Some("not JSON")).unwrap(),
            serde_json::json!({"events": []})
        );
        assert_eq!(with_monitor(Err::<Value, _>(()), Some("{}")), Err(()));
    }
}
