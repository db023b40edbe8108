//! # wakeful-protocol
//!
//! The contract between wakeful's daemon and its clients (the CLI, the MCP
//! server, the Claude Code bridge, anything that embeds a client), and
//! nothing else: no daemon, no client logic, and no IO but the
//! [`frame_lock`] both writers of a shared output take.
//!
//! - [`request`]: what a client asks ([`Request`], in an [`Envelope`] with
//!   the [`PROTOCOL_VERSION`]): one struct per request, each naming the
//!   type of its result ([`Call`]) or of the `ok` that ends its stream
//!   ([`Stream`]).
//! - [`consumer`]: who reads a session's events with a cursor of its own
//!   ([`Consumer`]).
//! - [`cluster`]: what the cluster link shows (`status`'s `cluster`,
//!   `cluster_status`, `cluster_monitors`).
//! - [`reply`]: what the daemon answers ([`Reply`] lines, [`ErrorKind`]s
//!   with their exit codes, and one typed result per request).
//! - [`frame`]: cutting the socket's bytes into request lines, and reading
//!   a request line ([`frame::Framer`], [`frame::parse_request`]).
//! - [`frame_lock`]: the lock around each frame when `wakeful mcp` and the
//!   daemon write to one stdout.
//! - [`stream`]: the event lines of a stream, with each monitor's
//!   description the first time ([`Descriptions`]).
//! - [`paths`]: where state, socket and configuration live.
//! - [`view`]: the `[view]` table of `config.toml` (the live views' settings).
//! - Events travel in their wire shape, defined with the model in
//!   [`wakeful_core::event`].
//!
//! The wire format is one JSON object a line in each direction over a Unix
//! stream socket; `docs/PROTOCOL.md` documents every message with examples.

#![forbid(unsafe_code)]

pub mod cluster;
pub mod consumer;
pub mod frame;
pub mod frame_lock;
pub mod liveness;
pub mod paths;
pub mod reply;
pub mod request;
pub mod route;
pub mod stream;
pub mod view;

pub use cluster::{ClusterStatus, HostMonitor, HostStatus, LinkState, LinkStatus};
pub use consumer::Consumer;
pub use frame_lock::FrameLock;
pub use liveness::{WakeInfo, WakePath, WakeReport, WakeVia};
pub use paths::{Paths, PathsError};
pub use reply::{
    Acked, ConsumerInfo, DaemonInfo, DeliveryAttempt, ErrorKind, EventSubscriptionInfo,
    ImportResult, PruneResult, PrunedMonitor, Reply, RouteSource, RunResult, SessionEndResult,
    ShutdownResult, StartResult, Status, StorageStatus, StreamEnd, TaskInfo, UpgradeResult,
    WakeClearResult, WakeDelivery, WakeStatus,
};
pub use request::{
    decode_ok, Ack, Batch, Call, CancelTask, CheckWake, ClearWake, CreateTask, EndSession,
    Envelope, GetClusterStatus, GetDigest, GetMonitor, GetStatus, GetTask, GetTerminal, HandTask,
    Import, ImportedEvent, KillTerminal, ListClusterMonitors, ListConsumers, ListMonitors,
    ListPrunes, ListTerminals, OutputForm, Prune, ReadAllEvents, ReadEvents, ReplyError, Request,
    RunRequest, SetWake, ShowWake, Shutdown, StartMonitor, StopMonitor, Stream, SubscribeEvents,
    UnsubscribeEvents, Upgrade, WaitEvents, WaitTerminal, WakeAdapter,
};
pub use stream::{described_event_reply_line, event_of_line, Descriptions, MAX_DESCRIBED};
pub use wakeful_core::digest::Digest;
pub use wakeful_core::{Event, MonitorInfo};

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// The socket line of an event reply for an event already encoded as JSON
/// (`{"type":"event","event":…}` and a newline): the daemon encodes each
/// event once and sends the same bytes to every reader.
pub fn event_reply_line(event_json: &str) -> Vec<u8> {
    let mut line = Vec::with_capacity(event_json.len() + 26);
    line.extend_from_slice(EVENT_REPLY_PREFIX.as_bytes());
    line.extend_from_slice(event_json.as_bytes());
    line.extend_from_slice(b"}\n");
    line
}

/// What every event reply line starts with.
pub const EVENT_REPLY_PREFIX: &str = r#"{"type":"event","event":"#;

/// The event JSON inside an event reply line written by
/// [`event_reply_line`], without decoding it (a `--json` reader passes it
/// through as it is); `None` for any other line.
pub fn event_json_of_line(line: &str) -> Option<&str> {
    line.strip_prefix(EVENT_REPLY_PREFIX)?.strip_suffix('}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_is_flat_and_versioned() {
        let e = Envelope {
            v: 1,
            request: StopMonitor { id: "mon-1".into() }.into(),
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"v":1,"op":"stop","id":"mon-1"}"#
        );
        let back: Envelope = serde_json::from_str(r#"{"v":1,"op":"status"}"#).unwrap();
        assert_eq!(back.request, Request::Status(GetStatus {}));
        // `op()` names the variant as the wire does.
        let stop = serde_json::to_value(&e.request).unwrap();
        assert_eq!(stop["op"], e.request.op());
    }

    #[test]
    fn run_is_flat_and_strict() {
        let line = r#"{"op":"run","session":"s","command":"make","env":{},"cwd":"/"}"#;
        let r: Request = serde_json::from_str(line).unwrap();
        assert!(matches!(&r, Request::Run(run) if run.command == "make"));
        assert_eq!(serde_json::to_string(&r).unwrap(), line);
        let bogus = r#"{"op":"run","session":"s","command":"make","env":{},"cwd":"/","x":1}"#;
        assert!(serde_json::from_str::<Request>(bogus).is_err());
    }

    #[test]
    fn replies_are_tagged() {
        let r = Reply::Error {
            kind: ErrorKind::NotFound,
            message: "monitor mon-x not found".into(),
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"type":"error","kind":"not_found","message":"monitor mon-x not found"}"#
        );
        assert_eq!(ErrorKind::Timeout.exit_code(), 124);
        assert_eq!(ErrorKind::Busy.exit_code(), 1);
    }

    #[test]
    fn an_encoded_event_line_is_a_reply_and_passes_through() {
        let json = r#"{"seq":3,"session":"s","monitor_id":"mon-a","kind":"started","ts":"2026-01-01T00:00:00.000Z","text":"x}"}"#;
        let line = event_reply_line(json);
        let text = std::str::from_utf8(&line).unwrap();
        let reply: Reply = serde_json::from_str(text).unwrap();
        assert!(matches!(reply, Reply::Event { event, .. } if event.seq == 3));
        assert_eq!(event_json_of_line(text.trim_end()), Some(json));
        assert_eq!(event_json_of_line(r#"{"type":"ok","result":{}}"#), None);
    }

    #[test]
    fn an_import_carries_events_in_their_wire_shape() {
        let line = r#"{"v":1,"op":"import","events":[{"origin":"h/41","event":{"seq":41,"session":"s","monitor_id":"mon-a","kind":"lines","ts":"2026-11-30T12:00:00.000Z","text":"x","lines":["x"],"count":1,"from_line":1,"to_line":1,"replayed":true}}]}"#;
        let e: Envelope = serde_json::from_str(line).unwrap();
        let Request::Import(Import { events, monitors }) = &e.request else {
            panic!("{e:?}")
        };
        assert!(monitors.is_empty());
        assert_eq!(events[0].origin, "h/41");
        assert!(events[0].event.replayed);
        assert_eq!(serde_json::to_string(&e).unwrap(), line);
        assert_eq!(e.request.op(), "import");
    }

    #[test]
    fn wake_status_is_flat() {
        let w = WakeStatus {
            session: "s".into(),
            route: WakeAdapter::Webhook {
                url: "http://x".into(),
            },
            source: RouteSource::Set,
            delivery: WakeDelivery::Retrying {
                wake_id: "w-1".into(),
                attempts: 2,
                next_attempt_in_ms: 900,
            },
            acked_seq: 4,
            wakes_delivered: 1,
            last_error: Some("busy".into()),
            recent: vec![],
        };
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["state"], "retrying");
        assert_eq!(v["attempts"], 2);
        assert_eq!(v["last_error"], "busy");
        assert_eq!(v["route"]["adapter"], "webhook");
        let back: WakeStatus = serde_json::from_value(v).unwrap();
        assert_eq!(back, w);
    }
}

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
