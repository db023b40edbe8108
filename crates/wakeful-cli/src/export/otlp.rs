//! `wakeful export --format otlp`: the exported monitors and events as
//! OpenTelemetry data, in the OTLP/JSON encoding (the protobuf JSON mapping
//! of `ExportTraceServiceRequest` and `ExportLogsServiceRequest`, with
//! trace and span ids in hex and times as unix nanoseconds in strings),
//! written with serde_json (docs/EXPORT.md has the mapping table).
//!
//! - One span per monitor: from its start to its end (or its last event),
//!   status from its stop reason, attributes for its id, source,
//!   description, counters and exit code.
//! - One log record per event, in its monitor's span: the event's text as
//!   the body, its time, a severity from its kind, its seq, kind and lines.
//! - The resource says `service.name = wakeful` and `host.name`; the
//!   session is `gen_ai.conversation.id` on every span and log record, so
//!   the monitors join the agent's own telemetry of that conversation.
//!
//! Ids are derived from the session (trace) and the monitor id (span), so
//! that exporting again gives the same ids.

use serde_json::{json, Value};
use wakeful_core::export::Export;
use wakeful_core::{Event, EventBody, EventKind, MonitorInfo, MonitorStopReason};

use crate::{exit, Failure};

/// The `wakeful` instrumentation scope.
fn scope() -> Value {
    json!({"name": "wakeful", "version": crate::VERSION})
}

fn resource(host: &str) -> Value {
    json!({"attributes": [
        kv("service.name", s("wakeful")),
        kv("service.version", s(crate::VERSION)),
        kv("host.name", s(host)),
    ]})
}

fn s(v: &str) -> Value {
    json!({"stringValue": v})
}

fn int(v: i64) -> Value {
    // int64 in the JSON mapping: a decimal string.
    json!({"intValue": v.to_string()})
}

fn boolean(v: bool) -> Value {
    json!({"boolValue": v})
}

fn kv(key: &str, value: Value) -> Value {
    json!({"key": key, "value": value})
}

fn nanos(t: &chrono::DateTime<chrono::Utc>) -> String {
    let n = t.timestamp_nanos_opt().unwrap_or_default().max(0);
    n.to_string()
}

/// 64-bit FNV-1a.
fn fnv(seed: u64, text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // An all-zero id is invalid in OTLP.
    h.max(1)
}

/// The trace of a session: 16 bytes, hex.
pub fn trace_id(session: &str) -> String {
    format!(
        "{:016x}{:016x}",
        fnv(1, &format!("wakeful/session/{session}")),
        fnv(2, &format!("wakeful/session/{session}"))
    )
}

/// The span of a monitor: 8 bytes, hex.
pub fn span_id(monitor: &str) -> String {
    format!("{:016x}", fnv(3, &format!("wakeful/monitor/{monitor}")))
}

/// Span status codes of OTLP.
const STATUS_UNSET: i64 = 0;
const STATUS_OK: i64 = 1;
const STATUS_ERROR: i64 = 2;

/// A span's status from how its monitor ended: OK when the watched thing
/// finished as asked, ERROR when it failed, unset when it was stopped
/// from outside or still runs.
pub fn status(reason: Option<&MonitorStopReason>) -> (i64, Option<String>) {
    use MonitorStopReason as R;
    match reason {
        None => (STATUS_UNSET, None),
        Some(r @ (R::ExitCode { code: 0 } | R::Until | R::MaxEvents)) => {
            (STATUS_OK, Some(r.to_string()))
        }
        Some(r @ R::WsClosed { code: 1000 | 1001 }) => (STATUS_OK, Some(r.to_string())),
        Some(r @ (R::UserStopped | R::SessionEnded | R::DaemonStopped)) => {
            (STATUS_UNSET, Some(r.to_string()))
        }
        Some(r) => (STATUS_ERROR, Some(r.to_string())),
    }
}

fn span(m: &MonitorInfo, events: &[&Event]) -> Value {
    let end = m
        .ended_at
        .or_else(|| events.last().map(|e| e.ts))
        .unwrap_or(m.started_at);
    let mut attributes = vec![
        kv("gen_ai.conversation.id", s(&m.session)),
        kv("wakeful.monitor.id", s(&m.id)),
        kv("wakeful.monitor.description", s(&m.description)),
        kv("wakeful.monitor.source.kind", s(m.source.kind())),
        kv("wakeful.monitor.source", s(&m.source.summary())),
        kv("wakeful.monitor.persistent", boolean(m.persistent)),
        kv("wakeful.monitor.events", int(m.events as i64)),
        kv("wakeful.monitor.lines", int(m.lines as i64)),
        kv(
            "wakeful.monitor.suppressed_lines",
            int(m.suppressed_lines as i64),
        ),
    ];
    if let Some(r) = &m.stop_reason {
        attributes.push(kv("wakeful.monitor.stop_reason", s(r.kind())));
        match r {
            MonitorStopReason::ExitCode { code } => {
                attributes.push(kv("process.exit.code", int(i64::from(*code))))
            }
            MonitorStopReason::Signal { signal } => {
                attributes.push(kv("wakeful.monitor.signal", int(i64::from(*signal))))
            }
            _ => {}
        }
    }
    let (code, message) = status(m.stop_reason.as_ref());
    if code == STATUS_ERROR {
        if let Some(r) = &m.stop_reason {
            attributes.push(kv("error.type", s(r.kind())));
        }
    }
    let mut status = json!({"code": code});
    if let Some(message) = message {
        status["message"] = json!(message);
    }
    json!({
        "traceId": trace_id(&m.session),
        "spanId": span_id(&m.id),
        "name": m.description,
        "kind": 1,
        "startTimeUnixNano": nanos(&m.started_at),
        "endTimeUnixNano": nanos(&end.max(m.started_at)),
        "attributes": attributes,
        "status": status,
    })
}

/// Severity number and text of an event (OTLP's scale: 9 INFO, 13 WARN,
/// 17 ERROR).
pub fn severity(e: &Event) -> (i64, &'static str) {
    match &e.body {
        EventBody::MonitorSuppressed { .. }
        | EventBody::MonitorSilent { .. }
        | EventBody::OutputDropped { .. } => (13, "WARN"),
        EventBody::MonitorFailed { .. } => (17, "ERROR"),
        EventBody::MonitorStopped { reason, .. } if status(Some(reason)).0 == STATUS_ERROR => {
            (17, "ERROR")
        }
        _ => (9, "INFO"),
    }
}

fn log_record(e: &Event) -> Value {
    let (number, text) = severity(e);
    let mut attributes = vec![
        kv("gen_ai.conversation.id", s(&e.session)),
        kv("wakeful.monitor.id", s(&e.monitor_id)),
        kv("wakeful.event.seq", int(e.seq as i64)),
        kv("wakeful.event.kind", s(e.kind().as_str())),
    ];
    match &e.body {
        EventBody::MonitorEvent {
            lines,
            from_line,
            to_line,
        } => {
            attributes.push(kv("wakeful.event.count", int(lines.len() as i64)));
            attributes.push(kv("wakeful.event.from_line", int(*from_line as i64)));
            attributes.push(kv("wakeful.event.to_line", int(*to_line as i64)));
        }
        EventBody::MonitorSuppressed {
            count,
            from_line,
            to_line,
        } => {
            attributes.push(kv("wakeful.event.count", int(*count as i64)));
            attributes.push(kv("wakeful.event.from_line", int(*from_line as i64)));
            attributes.push(kv("wakeful.event.to_line", int(*to_line as i64)));
        }
        EventBody::MonitorSilent { quiet_ms } | EventBody::MonitorResumed { quiet_ms } => {
            attributes.push(kv("wakeful.event.quiet_ms", int(*quiet_ms as i64)));
        }
        EventBody::OutputDropped {
            reason,
            count,
            from_line,
            to_line,
            bytes,
        } => {
            attributes.push(kv("wakeful.event.count", int(*count as i64)));
            attributes.push(kv("wakeful.event.from_line", int(*from_line as i64)));
            attributes.push(kv("wakeful.event.to_line", int(*to_line as i64)));
            attributes.push(kv("wakeful.output.dropped_bytes", int(*bytes as i64)));
            attributes.push(kv("wakeful.output.dropped_reason", s(reason.as_str())));
        }
        _ => {}
    }
    if let Some(r) = e.stop_reason() {
        attributes.push(kv("wakeful.monitor.stop_reason", s(r.kind())));
        if let MonitorStopReason::ExitCode { code } = r {
            attributes.push(kv("process.exit.code", int(i64::from(code))));
        }
    }
    if !e.wakes {
        attributes.push(kv("wakeful.event.wake", boolean(false)));
    }
    if e.replayed {
        attributes.push(kv("wakeful.event.replayed", boolean(true)));
    }
    let event_name = match e.kind() {
        EventKind::Started => "wakeful.monitor.started",
        EventKind::Lines => "wakeful.monitor.lines",
        EventKind::Suppressed => "wakeful.monitor.suppressed",
        EventKind::Stopped => "wakeful.monitor.stopped",
        EventKind::Failed => "wakeful.monitor.failed",
        EventKind::Rearmed => "wakeful.monitor.rearmed",
        EventKind::Silent => "wakeful.monitor.silent",
        EventKind::Resumed => "wakeful.monitor.resumed",
        EventKind::OutputDropped => "wakeful.monitor.output_dropped",
    };
    json!({
        "timeUnixNano": nanos(&e.ts),
        "observedTimeUnixNano": nanos(&e.ts),
        "severityNumber": number,
        "severityText": text,
        "eventName": event_name,
        "body": s(&e.text),
        "attributes": attributes,
        "traceId": trace_id(&e.session),
        "spanId": span_id(&e.monitor_id),
    })
}

/// The `ExportTraceServiceRequest` and the `ExportLogsServiceRequest` of
/// an export.
pub fn requests(x: &Export) -> (Value, Value) {
    let spans: Vec<Value> = x
        .monitors
        .iter()
        .map(|m| {
            let events: Vec<&Event> = x.events.iter().filter(|e| e.monitor_id == m.id).collect();
            span(m, &events)
        })
        .collect();
    let records: Vec<Value> = x.events.iter().map(log_record).collect();
    let traces = json!({"resourceSpans": [{
        "resource": resource(&x.header.host),
        "scopeSpans": [{"scope": scope(), "spans": spans}],
    }]});
    let logs = json!({"resourceLogs": [{
        "resource": resource(&x.header.host),
        "scopeLogs": [{"scope": scope(), "logRecords": records}],
    }]});
    (traces, logs)
}

/// Posts both requests to a collector (OTLP/HTTP, JSON): `URL/v1/traces`
/// and `URL/v1/logs`, reaching only what `[network]` allows.
pub async fn post(
    paths: &wakeful_client::Paths,
    url: &str,
    traces: &Value,
    logs: &Value,
) -> Result<(), Failure> {
    use wakeful_engine::net::http::{request, Reach};
    let config = wakeful_daemon::config::Config::load(&paths.config_file)
        .map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?;
    let policy = wakeful_engine::NetPolicy::new(&config.network.allow)
        .map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?;
    let base = url.trim_end_matches('/');
    for (signal, body, rejected) in [
        ("traces", traces, "rejectedSpans"),
        ("logs", logs, "rejectedLogRecords"),
    ] {
        let target = format!("{base}/v1/{signal}");
        let r = request("POST", &target, Some(body), &policy, Reach::Policy)
            .await
            .map_err(|e| {
                Failure::new(
                    exit::FAILURE,
                    format!("cannot post the {signal} to {target}: {e}"),
                )
            })?;
        if !(200..300).contains(&r.status) {
            return Err(Failure::new(
                exit::FAILURE,
                format!(
                    "the collector at {target} answered {} to the {signal}: {}",
                    r.status,
                    wakeful_core::present::one_line(r.body.trim())
                ),
            ));
        }
        // A collector may take part and say so.
        let n = serde_json::from_str::<Value>(&r.body)
            .ok()
            .and_then(|v| {
                let n = &v["partialSuccess"][rejected];
                n.as_i64().or_else(|| n.as_str()?.parse().ok())
            })
            .unwrap_or(0);
        if n > 0 {
            return Err(Failure::new(
                exit::FAILURE,
                format!(
                    "the collector at {target} rejected {n} of the {signal}: {}",
                    wakeful_core::present::one_line(r.body.trim())
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_hex_of_the_right_size_and_stable() {
        let t = trace_id("s1");
        assert_eq!(t.len(), 32);
        assert!(t.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(t, trace_id("s1"));
        assert_ne!(t, trace_id("s2"));
        assert_eq!(span_id("mon-a").len(), 16);
        assert_ne!(span_id("mon-a"), span_id("mon-b"));
    }

    #[test]
    fn status_follows_the_stop_reason() {
        use MonitorStopReason as R;
        assert_eq!(status(Some(&R::ExitCode { code: 0 })).0, STATUS_OK);
        assert_eq!(status(Some(&R::ExitCode { code: 2 })).0, STATUS_ERROR);
        assert_eq!(status(Some(&R::Timeout)).0, STATUS_ERROR);
        assert_eq!(status(Some(&R::UserStopped)).0, STATUS_UNSET);
        assert_eq!(status(None), (STATUS_UNSET, None));
    }

    #[test]
    fn silence_and_quiet_replayed_events_keep_their_marks() {
        use chrono::TimeZone;
        let ev = |body: EventBody| Event {
            seq: 3,
            session: "s1".into(),
            monitor_id: "mon-a".into(),
            ts: chrono::Utc
                .with_ymd_and_hms(2026, 11, 30, 12, 0, 0)
                .unwrap(),
            text: "t".into(),
            body,
            wakes: false,
            replayed: true,
            host: None,
        };
        let silent = ev(EventBody::MonitorSilent { quiet_ms: 60_000 });
        assert_eq!(severity(&silent), (13, "WARN"));
        let r = log_record(&silent);
        assert_eq!(r["eventName"], "wakeful.monitor.silent");
        let attrs = r["attributes"].as_array().unwrap();
        let attr = |key: &str| attrs.iter().find(|a| a["key"] == key).map(|a| &a["value"]);
        assert_eq!(attr("wakeful.event.quiet_ms"), Some(&int(60_000)));
        assert_eq!(attr("wakeful.event.wake"), Some(&boolean(false)));
        assert_eq!(attr("wakeful.event.replayed"), Some(&boolean(true)));
        let resumed = ev(EventBody::MonitorResumed { quiet_ms: 61_500 });
        assert_eq!(severity(&resumed), (9, "INFO"));
        assert_eq!(log_record(&resumed)["eventName"], "wakeful.monitor.resumed");
    }
}
