//! Events (docs/CONTRACT.md §2, §4, §7): the entries of a session's ordered log.
//!
//! In Rust an [`Event`] carries a typed [`EventBody`]; on the wire it is one flat
//! JSON object:
//! `{"seq","session","monitor_id","kind","ts","text","lines"?,"count"?,"from_line"?,"to_line"?,"stop_reason"?,"error"?,"survivors"?,"unverified"?,"quiet_ms"?,"bytes"?,"reason"?,"replayed"?}`.
//!
//! `replayed: true` marks an event of a replay monitor (`wakeful replay`):
//! re-emitted from a recording, not something that happened now. The field
//! is left out when false, so live events look as they always did.
//!
//! `host` names the host an event was recorded on when it came from another
//! host through the cluster link (docs/CLUSTER.md); it is left out for this
//! host's own events.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// A stop that could not look for every process of its command: the
/// platform backend (the portable `posix` one) cannot find a process that
/// left the command's process group and whose parent exited (`setsid`, a
/// double fork). `seen`: the processes the stop found and signalled; none
/// of them is alive (those would be `survivors`), but others may be.
/// (`"unverified":{"backend":"posix","seen":[…]}` on a final event and in
/// `list`; absent when the stop could look everywhere.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unverified {
    /// The platform backend that ran the stop.
    pub backend: String,
    /// The processes the stop found, in pid order.
    pub seen: Vec<i32>,
}

/// How a watched process (`--pid`) exited, as far as it could be known
/// (`{"kind": "exited", "pid", "cmdline"?, "code"?, "signal"?,
/// "while_down"?}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessExit {
    /// Its pid.
    pub pid: i32,
    /// Its command line when the monitor started, when it was readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<String>,
    /// Its exit code, when it could be known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// The signal that killed it, when it could be known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// It was found gone (or its pid given to another process) when the
    /// daemon started again: it exited while no daemon watched.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub while_down: bool,
}

impl ProcessExit {
    /// Its status, when known.
    pub fn status(&self) -> Option<crate::pid::Status> {
        match (self.code, self.signal) {
            (Some(c), _) => Some(crate::pid::Status::Code(c)),
            (None, Some(s)) => Some(crate::pid::Status::Signal(s)),
            (None, None) => None,
        }
    }
}

/// Why a monitor ended (`stop_reason` on the wire, tagged by `kind`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MonitorStopReason {
    /// The source process exited with this code.
    #[serde(rename = "exit")]
    ExitCode {
        /// The exit code.
        code: i32,
    },
    /// The source process was killed by this signal (not by wakeful).
    Signal {
        /// The signal number.
        signal: i32,
    },
    /// `timeout_ms` elapsed.
    Timeout,
    /// `idle_timeout_ms` elapsed without output.
    IdleTimeout,
    /// `max_events` lines events were delivered.
    MaxEvents,
    /// The `until` condition was met.
    Until,
    /// A user or agent stopped it.
    #[serde(rename = "stopped")]
    UserStopped,
    /// Its session ended (or the embedding registry was dropped).
    SessionEnded,
    /// The daemon stopped (or died) while it ran.
    DaemonStopped,
    /// A WebSocket source was closed by its server.
    WsClosed {
        /// The close code (1005 when the server gave none).
        code: u16,
    },
    /// A WebSocket frame exceeded 1 MiB.
    WsFrameTooLarge,
    /// A one-shot timer fell due (its one event is this final one).
    Fired {
        /// Its deadline.
        due: DateTime<Utc>,
        /// How long after the deadline it fired (a daemon that was not
        /// running, a machine asleep).
        late_ms: u64,
    },
    /// A watched process (`--pid`) exited: the one event of its monitor
    /// (boxed: rare, and it would make every event larger).
    Exited(Box<ProcessExit>),
    /// The source could not run or broke (spawn error, refused connection,
    /// unwritable output file). The event's kind is `failed`.
    Failed {
        /// What went wrong.
        error: String,
    },
}

impl MonitorStopReason {
    /// The `kind` on the wire (`"exit"`, `"stopped"`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            MonitorStopReason::ExitCode { .. } => "exit",
            MonitorStopReason::Signal { .. } => "signal",
            MonitorStopReason::Timeout => "timeout",
            MonitorStopReason::IdleTimeout => "idle_timeout",
            MonitorStopReason::MaxEvents => "max_events",
            MonitorStopReason::Until => "until",
            MonitorStopReason::UserStopped => "stopped",
            MonitorStopReason::SessionEnded => "session_ended",
            MonitorStopReason::DaemonStopped => "daemon_stopped",
            MonitorStopReason::WsClosed { .. } => "ws_closed",
            MonitorStopReason::WsFrameTooLarge => "ws_frame_too_large",
            MonitorStopReason::Fired { .. } => "fired",
            MonitorStopReason::Exited { .. } => "exited",
            MonitorStopReason::Failed { .. } => "failed",
        }
    }

    /// Whether this ending is a failure of the watched thing (a non-zero exit
    /// or a signal the monitor did not send), so the event should carry the
    /// last lines.
    pub fn is_abnormal(&self) -> bool {
        matches!(
            self,
            MonitorStopReason::ExitCode { code } if *code != 0
        ) || matches!(
            self,
            MonitorStopReason::Signal { .. } | MonitorStopReason::Failed { .. }
        )
    }
}

impl fmt::Display for MonitorStopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MonitorStopReason::ExitCode { code } => write!(f, "exited with code {code}"),
            MonitorStopReason::Signal { signal } => write!(f, "killed by signal {signal}"),
            MonitorStopReason::Timeout => f.write_str("timed out"),
            MonitorStopReason::IdleTimeout => f.write_str("idle timeout (no output)"),
            MonitorStopReason::MaxEvents => f.write_str("max_events reached"),
            MonitorStopReason::Until => f.write_str("until condition met"),
            MonitorStopReason::UserStopped => f.write_str("stopped"),
            MonitorStopReason::SessionEnded => f.write_str("session ended"),
            MonitorStopReason::DaemonStopped => f.write_str("daemon stopped"),
            MonitorStopReason::WsClosed { code } => write!(f, "WebSocket closed with code {code}"),
            MonitorStopReason::WsFrameTooLarge => f.write_str("WebSocket frame over 1 MiB"),
            MonitorStopReason::Fired { due, late_ms } => f.write_str(
                &crate::timer::Fire {
                    due: *due,
                    late: std::time::Duration::from_millis(*late_ms),
                    missed: 0,
                    last: true,
                }
                .text(),
            ),
            MonitorStopReason::Exited(e) => f.write_str(&crate::pid::exit_text(
                e.pid,
                e.cmdline.as_deref(),
                e.status(),
                e.while_down,
            )),
            MonitorStopReason::Failed { error } => write!(f, "failed: {error}"),
        }
    }
}

/// The `kind` of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A monitor began.
    Started,
    /// A batch of lines.
    Lines,
    /// Lines were counted but not delivered (rate limit).
    Suppressed,
    /// A monitor ended.
    Stopped,
    /// A monitor could not run.
    Failed,
    /// A persistent monitor was restarted after a daemon restart.
    Rearmed,
    /// A monitor with `expect_within_ms` printed nothing for that long.
    Silent,
    /// A silent monitor printed again.
    Resumed,
    /// Output lines are in no file: past the output file's cap, or not
    /// written while the disk was low (docs/STORAGE.md).
    OutputDropped,
}

impl EventKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Started => "started",
            EventKind::Lines => "lines",
            EventKind::Suppressed => "suppressed",
            EventKind::Stopped => "stopped",
            EventKind::Failed => "failed",
            EventKind::Rearmed => "rearmed",
            EventKind::Silent => "silent",
            EventKind::Resumed => "resumed",
            EventKind::OutputDropped => "output_dropped",
        }
    }

    /// Whether events of this kind end their monitor.
    pub fn is_terminal(self) -> bool {
        matches!(self, EventKind::Stopped | EventKind::Failed)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an event says, by kind. The variant names are the vocabulary agent
/// authors already use (`MonitorStarted`, `MonitorEvent`, `MonitorStopped`,
/// `MonitorFailed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventBody {
    /// `started`: every monitor begins with exactly one.
    MonitorStarted,
    /// `lines`: one or more lines (at most 50 and 32 KiB, or a single longer line).
    MonitorEvent {
        /// The lines, without their newline; invalid UTF-8 replaced.
        lines: Vec<String>,
        /// Output-file line number of the first line (1-based).
        from_line: u64,
        /// Output-file line number of the last line.
        to_line: u64,
    },
    /// `suppressed`: lines counted over the rate limit.
    MonitorSuppressed {
        /// Exact number of lines not delivered.
        count: u64,
        /// First suppressed output-file line.
        from_line: u64,
        /// Last suppressed output-file line.
        to_line: u64,
    },
    /// `stopped`: the monitor ended; exactly one of `stopped`/`failed` per monitor.
    MonitorStopped {
        /// Why.
        reason: MonitorStopReason,
        /// The last lines (up to 20) when the ending calls for them.
        last_lines: Vec<String>,
        /// Processes of the monitor that were still alive after SIGKILL
        /// (normally none).
        survivors: Vec<i32>,
        /// The stop could not look for every process ([`Unverified`]).
        unverified: Option<Box<Unverified>>,
    },
    /// `failed`: the monitor could not run (spawn error, connection refused…).
    MonitorFailed {
        /// What went wrong.
        error: String,
        /// The last lines, if any were read.
        last_lines: Vec<String>,
        /// Processes of the monitor that were still alive after SIGKILL
        /// (normally none).
        survivors: Vec<i32>,
        /// The stop could not look for every process ([`Unverified`]).
        unverified: Option<Box<Unverified>>,
    },
    /// `rearmed`: a persistent monitor was restarted after a daemon restart.
    MonitorRearmed,
    /// `silent`: no output for `quiet_ms` (`expect_within_ms`); the monitor
    /// keeps running. Once per quiet period.
    MonitorSilent {
        /// How long it has been quiet.
        quiet_ms: u64,
    },
    /// `resumed`: output came again after a `silent` event.
    MonitorResumed {
        /// How long it was quiet.
        quiet_ms: u64,
    },
    /// `output_dropped`: a range of output lines is in no file (the
    /// output file's cap, or a disk low on space); `wakeful output` says
    /// so in their place.
    OutputDropped {
        /// Why.
        reason: crate::outlog::DropReason,
        /// How many lines.
        count: u64,
        /// The first of them.
        from_line: u64,
        /// The last of them.
        to_line: u64,
        /// Their bytes.
        bytes: u64,
    },
}

impl EventBody {
    /// Why the monitor ended, for a final body (`stopped` or `failed`).
    pub fn stop_reason(&self) -> Option<MonitorStopReason> {
        match self {
            EventBody::MonitorStopped { reason, .. } => Some(reason.clone()),
            EventBody::MonitorFailed { error, .. } => Some(MonitorStopReason::Failed {
                error: error.clone(),
            }),
            _ => None,
        }
    }

    /// Processes that survived the monitor's stop, for a final body.
    pub fn survivors(&self) -> &[i32] {
        match self {
            EventBody::MonitorStopped { survivors, .. }
            | EventBody::MonitorFailed { survivors, .. } => survivors,
            _ => &[],
        }
    }

    /// Whether the stop could not look for every process, for a final body.
    pub fn unverified(&self) -> Option<&Unverified> {
        match self {
            EventBody::MonitorStopped { unverified, .. }
            | EventBody::MonitorFailed { unverified, .. } => unverified.as_deref(),
            _ => None,
        }
    }

    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        match self {
            EventBody::MonitorStarted => EventKind::Started,
            EventBody::MonitorEvent { .. } => EventKind::Lines,
            EventBody::MonitorSuppressed { .. } => EventKind::Suppressed,
            EventBody::MonitorStopped { .. } => EventKind::Stopped,
            EventBody::MonitorFailed { .. } => EventKind::Failed,
            EventBody::MonitorRearmed => EventKind::Rearmed,
            EventBody::MonitorSilent { .. } => EventKind::Silent,
            EventBody::MonitorResumed { .. } => EventKind::Resumed,
            EventBody::OutputDropped { .. } => EventKind::OutputDropped,
        }
    }
}

/// An event that has not yet been given its place in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEvent {
    /// The owning session.
    pub session: String,
    /// The monitor that produced it.
    pub monitor_id: String,
    /// When it was produced.
    pub ts: DateTime<Utc>,
    /// What an agent should read.
    pub text: String,
    /// Typed content.
    pub body: EventBody,
    /// Whether it wakes the agent (the monitor's `wake_on`); events that do
    /// not are delivered with the next one that does.
    pub wakes: bool,
    /// Re-emitted from a recording by a replay monitor.
    pub replayed: bool,
    /// The host it was recorded on, for an event of another host (the
    /// cluster link); `None` for this host's own.
    pub host: Option<String>,
}

impl PendingEvent {
    /// Gives the event its place in the log.
    pub fn with_seq(self, seq: u64) -> Event {
        Event {
            seq,
            session: self.session,
            monitor_id: self.monitor_id,
            ts: self.ts,
            text: self.text,
            body: self.body,
            wakes: self.wakes,
            replayed: self.replayed,
            host: self.host,
        }
    }
}

/// One entry of the durable, totally ordered event log.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "WireEvent")]
pub struct Event {
    /// Global, strictly increasing, never reused.
    pub seq: u64,
    /// The owning session.
    pub session: String,
    /// The monitor that produced it.
    pub monitor_id: String,
    /// When it was produced (RFC 3339 with milliseconds on the wire).
    pub ts: DateTime<Utc>,
    /// What an agent should read: one human sentence, or the lines.
    pub text: String,
    /// Typed content.
    pub body: EventBody,
    /// Whether it wakes the agent (`"wake": false` on the wire when not;
    /// see [`crate::params::WakeOn`]).
    pub wakes: bool,
    /// Re-emitted from a recording by a replay monitor (`replayed: true`
    /// on the wire; left out when false).
    pub replayed: bool,
    /// The host it was recorded on, for an event that came from another
    /// host (`host` on the wire; left out for this host's own events).
    pub host: Option<String>,
}

impl Event {
    /// Takes its place in the log back: the event as it was before
    /// [`PendingEvent::with_seq`] (for a journal that gives back a batch it
    /// could not keep).
    pub fn into_pending(self) -> PendingEvent {
        PendingEvent {
            session: self.session,
            monitor_id: self.monitor_id,
            ts: self.ts,
            text: self.text,
            body: self.body,
            wakes: self.wakes,
            replayed: self.replayed,
            host: self.host,
        }
    }

    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        self.body.kind()
    }

    /// Why the monitor ended, for a final event (`stopped` or `failed`).
    pub fn stop_reason(&self) -> Option<MonitorStopReason> {
        self.body.stop_reason()
    }
}

/// Formats a timestamp as the wire does: RFC 3339, milliseconds, `Z`.
pub fn format_ts(ts: &DateTime<Utc>) -> String {
    ts.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The wire form of an event, as read.
#[derive(Deserialize)]
struct WireEvent {
    seq: u64,
    session: String,
    monitor_id: String,
    kind: EventKind,
    ts: String,
    text: String,
    #[serde(default)]
    lines: Option<Vec<String>>,
    #[serde(default)]
    count: Option<u64>,
    #[serde(default)]
    from_line: Option<u64>,
    #[serde(default)]
    to_line: Option<u64>,
    #[serde(default)]
    stop_reason: Option<MonitorStopReason>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    survivors: Vec<i32>,
    #[serde(default)]
    unverified: Option<Unverified>,
    #[serde(default)]
    quiet_ms: Option<u64>,
    #[serde(default)]
    bytes: Option<u64>,
    #[serde(default)]
    reason: Option<crate::outlog::DropReason>,
    #[serde(default = "yes")]
    wake: bool,
    #[serde(default)]
    replayed: bool,
    #[serde(default)]
    host: Option<String>,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// The wire form of an event, borrowed from it: encoding an event copies
/// nothing but its timestamp's text (it is encoded for every event the
/// daemon commits). The same fields, in the same order, as [`WireEvent`].
#[derive(Serialize)]
struct WireRef<'a> {
    seq: u64,
    session: &'a str,
    monitor_id: &'a str,
    kind: EventKind,
    ts: String,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    lines: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    from_line: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    to_line: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_reason: Option<std::borrow::Cow<'a, MonitorStopReason>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "<[i32]>::is_empty")]
    survivors: &'a [i32],
    #[serde(skip_serializing_if = "Option::is_none")]
    unverified: Option<&'a Unverified>,
    #[serde(skip_serializing_if = "Option::is_none")]
    quiet_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<crate::outlog::DropReason>,
    #[serde(skip_serializing_if = "is_true")]
    wake: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    replayed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<&'a str>,
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use std::borrow::Cow;
        let mut w = WireRef {
            seq: self.seq,
            session: &self.session,
            monitor_id: &self.monitor_id,
            kind: self.kind(),
            ts: format_ts(&self.ts),
            text: &self.text,
            lines: None,
            count: None,
            from_line: None,
            to_line: None,
            stop_reason: None,
            error: None,
            survivors: &[],
            unverified: None,
            quiet_ms: None,
            bytes: None,
            reason: None,
            wake: self.wakes,
            replayed: self.replayed,
            host: self.host.as_deref(),
        };
        match &self.body {
            EventBody::MonitorStarted | EventBody::MonitorRearmed => {}
            EventBody::MonitorSilent { quiet_ms } | EventBody::MonitorResumed { quiet_ms } => {
                w.quiet_ms = Some(*quiet_ms);
            }
            EventBody::MonitorEvent {
                lines,
                from_line,
                to_line,
            } => {
                w.count = Some(lines.len() as u64);
                w.lines = Some(lines);
                w.from_line = Some(*from_line);
                w.to_line = Some(*to_line);
            }
            EventBody::MonitorSuppressed {
                count,
                from_line,
                to_line,
            } => {
                w.count = Some(*count);
                w.from_line = Some(*from_line);
                w.to_line = Some(*to_line);
            }
            EventBody::OutputDropped {
                reason,
                count,
                from_line,
                to_line,
                bytes,
            } => {
                w.reason = Some(*reason);
                w.count = Some(*count);
                w.from_line = Some(*from_line);
                w.to_line = Some(*to_line);
                w.bytes = Some(*bytes);
            }
            EventBody::MonitorStopped {
                reason,
                last_lines,
                survivors,
                unverified,
            } => {
                w.stop_reason = Some(Cow::Borrowed(reason));
                w.lines = (!last_lines.is_empty()).then_some(last_lines.as_slice());
                w.survivors = survivors;
                w.unverified = unverified.as_deref();
            }
            EventBody::MonitorFailed {
                error,
                last_lines,
                survivors,
                unverified,
            } => {
                w.unverified = unverified.as_deref();
                w.stop_reason = Some(Cow::Owned(MonitorStopReason::Failed {
                    error: error.clone(),
                }));
                w.error = Some(error);
                w.lines = (!last_lines.is_empty()).then_some(last_lines.as_slice());
                w.survivors = survivors;
            }
        }
        w.serialize(serializer)
    }
}

/// Why a wire object is not a valid event.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// `ts` is not RFC 3339.
    #[error("event ts `{0}` is not an RFC 3339 timestamp")]
    Timestamp(String),
    /// A field the kind requires is absent.
    #[error("a `{kind}` event needs the field `{field}`")]
    Missing {
        /// The event kind.
        kind: EventKind,
        /// The missing field.
        field: &'static str,
    },
}

impl TryFrom<WireEvent> for Event {
    type Error = WireError;
    fn try_from(w: WireEvent) -> Result<Self, Self::Error> {
        let ts = DateTime::parse_from_rfc3339(&w.ts)
            .map_err(|_| WireError::Timestamp(w.ts.clone()))?
            .with_timezone(&Utc);
        let need = |field: &'static str| WireError::Missing {
            kind: w.kind,
            field,
        };
        let body = match w.kind {
            EventKind::Started => EventBody::MonitorStarted,
            EventKind::Rearmed => EventBody::MonitorRearmed,
            EventKind::Silent => EventBody::MonitorSilent {
                quiet_ms: w.quiet_ms.ok_or_else(|| need("quiet_ms"))?,
            },
            EventKind::Resumed => EventBody::MonitorResumed {
                quiet_ms: w.quiet_ms.ok_or_else(|| need("quiet_ms"))?,
            },
            EventKind::Lines => EventBody::MonitorEvent {
                lines: w.lines.clone().ok_or_else(|| need("lines"))?,
                from_line: w.from_line.unwrap_or(0),
                to_line: w.to_line.unwrap_or(0),
            },
            EventKind::Suppressed => EventBody::MonitorSuppressed {
                count: w.count.ok_or_else(|| need("count"))?,
                from_line: w.from_line.ok_or_else(|| need("from_line"))?,
                to_line: w.to_line.ok_or_else(|| need("to_line"))?,
            },
            EventKind::OutputDropped => EventBody::OutputDropped {
                reason: w.reason.ok_or_else(|| need("reason"))?,
                count: w.count.ok_or_else(|| need("count"))?,
                from_line: w.from_line.ok_or_else(|| need("from_line"))?,
                to_line: w.to_line.ok_or_else(|| need("to_line"))?,
                bytes: w.bytes.unwrap_or(0),
            },
            EventKind::Stopped => EventBody::MonitorStopped {
                reason: w.stop_reason.clone().ok_or_else(|| need("stop_reason"))?,
                last_lines: w.lines.clone().unwrap_or_default(),
                survivors: w.survivors.clone(),
                unverified: w.unverified.clone().map(Box::new),
            },
            EventKind::Failed => EventBody::MonitorFailed {
                error: w
                    .error
                    .clone()
                    .or_else(|| match &w.stop_reason {
                        Some(MonitorStopReason::Failed { error }) => Some(error.clone()),
                        _ => None,
                    })
                    .unwrap_or_default(),
                last_lines: w.lines.clone().unwrap_or_default(),
                survivors: w.survivors.clone(),
                unverified: w.unverified.clone().map(Box::new),
            },
        };
        Ok(Event {
            seq: w.seq,
            session: w.session,
            monitor_id: w.monitor_id,
            ts,
            text: w.text,
            body,
            wakes: w.wake,
            replayed: w.replayed,
            host: w.host,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn ev(body: EventBody, text: &str) -> Event {
        Event {
            seq: 7,
            session: "s1".into(),
            monitor_id: "mon-abc".into(),
            ts: Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap(),
            text: text.into(),
            body,
            wakes: true,
            replayed: false,
            host: None,
        }
    }

    /// The wire shapes of every kind, pinned by golden fixtures.
    #[test]
    fn wire_shapes_match_golden_fixture() {
        let events = vec![
            ev(EventBody::MonitorStarted, "started: build (command: make)"),
            ev(
                EventBody::MonitorEvent {
                    lines: vec!["a".into(), "b".into()],
                    from_line: 3,
                    to_line: 4,
                },
                "a\nb",
            ),
            ev(
                EventBody::MonitorSuppressed {
                    count: 100,
                    from_line: 5,
                    to_line: 104,
                },
                "[100 lines suppressed]",
            ),
            ev(
                EventBody::MonitorStopped {
                    reason: MonitorStopReason::ExitCode { code: 7 },
                    last_lines: vec!["boom".into()],
                    survivors: vec![],
                    unverified: None,
                },
                "exited with code 7",
            ),
            ev(
                EventBody::MonitorStopped {
                    reason: MonitorStopReason::WsClosed { code: 1000 },
                    last_lines: vec![],
                    survivors: vec![],
                    unverified: None,
                },
                "closed",
            ),
            ev(
                EventBody::MonitorFailed {
                    error: "spawn failed".into(),
                    last_lines: vec![],
                    survivors: vec![],
                    unverified: None,
                },
                "failed",
            ),
            ev(
                EventBody::MonitorStopped {
                    reason: MonitorStopReason::UserStopped,
                    last_lines: vec![],
                    survivors: vec![4242],
                    unverified: None,
                },
                "stopped; 1 process survived (pid 4242)",
            ),
            ev(EventBody::MonitorRearmed, "rearmed"),
            Event {
                replayed: true,
                ..ev(
                    EventBody::MonitorEvent {
                        lines: vec!["error: disk full".into()],
                        from_line: 9,
                        to_line: 9,
                    },
                    "error: disk full",
                )
            },
            ev(
                EventBody::MonitorSilent { quiet_ms: 60_000 },
                "tests: no output for 60000 ms",
            ),
            Event {
                wakes: false,
                ..ev(
                    EventBody::MonitorResumed { quiet_ms: 61_500 },
                    "tests: output resumed",
                )
            },
            Event {
                wakes: false,
                replayed: true,
                ..ev(
                    EventBody::MonitorEvent {
                        lines: vec!["ok 12".into()],
                        from_line: 10,
                        to_line: 10,
                    },
                    "ok 12",
                )
            },
            ev(
                EventBody::OutputDropped {
                    reason: crate::outlog::DropReason::DiskLow,
                    count: 120,
                    from_line: 500,
                    to_line: 619,
                    bytes: 49_152,
                },
                "build: 120 output lines (48 KiB) not written: the disk is low",
            ),
        ];
        let got: Vec<String> = events
            .iter()
            .map(|e| serde_json::to_string(e).unwrap())
            .collect();
        let golden = include_str!("../tests/fixtures/events.jsonl");
        let want: Vec<&str> = golden.lines().collect();
        assert_eq!(got, want);
        for (line, event) in want.iter().zip(&events) {
            let back: Event = serde_json::from_str(line).unwrap();
            assert_eq!(&back, event);
        }
    }

    #[test]
    fn stop_reasons_use_spec_kinds() {
        let cases = [
            (
                MonitorStopReason::ExitCode { code: 1 },
                r#"{"kind":"exit","code":1}"#,
            ),
            (
                MonitorStopReason::Signal { signal: 9 },
                r#"{"kind":"signal","signal":9}"#,
            ),
            (MonitorStopReason::Timeout, r#"{"kind":"timeout"}"#),
            (MonitorStopReason::IdleTimeout, r#"{"kind":"idle_timeout"}"#),
            (MonitorStopReason::MaxEvents, r#"{"kind":"max_events"}"#),
            (MonitorStopReason::Until, r#"{"kind":"until"}"#),
            (MonitorStopReason::UserStopped, r#"{"kind":"stopped"}"#),
            (
                MonitorStopReason::SessionEnded,
                r#"{"kind":"session_ended"}"#,
            ),
            (
                MonitorStopReason::DaemonStopped,
                r#"{"kind":"daemon_stopped"}"#,
            ),
            (
                MonitorStopReason::WsClosed { code: 1001 },
                r#"{"kind":"ws_closed","code":1001}"#,
            ),
            (
                MonitorStopReason::WsFrameTooLarge,
                r#"{"kind":"ws_frame_too_large"}"#,
            ),
            (
                MonitorStopReason::Failed {
                    error: "boom".into(),
                },
                r#"{"kind":"failed","error":"boom"}"#,
            ),
            (
                MonitorStopReason::Exited(Box::new(ProcessExit {
                    pid: 4242,
                    cmdline: Some("sleep 1000".into()),
                    code: None,
                    signal: None,
                    while_down: false,
                })),
                r#"{"kind":"exited","pid":4242,"cmdline":"sleep 1000"}"#,
            ),
            (
                MonitorStopReason::Exited(Box::new(ProcessExit {
                    pid: 4242,
                    cmdline: None,
                    code: None,
                    signal: Some(9),
                    while_down: true,
                })),
                r#"{"kind":"exited","pid":4242,"signal":9,"while_down":true}"#,
            ),
        ];
        for (reason, json) in cases {
            assert_eq!(serde_json::to_string(&reason).unwrap(), json);
            assert_eq!(
                serde_json::from_str::<MonitorStopReason>(json).unwrap(),
                reason
            );
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            assert_eq!(v["kind"], reason.kind());
        }
    }
}
