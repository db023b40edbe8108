//! Export, import and replay, end to end: the real `wakeful` binary and
//! daemons in temporary WAKEFUL_HOMEs; the OTLP output checked with the
//! official `opentelemetry-proto` Python package and posted to a collector
//! written here; the asciicast checked with `asciinema cat` (pip
//! `asciinema` 2.4). `.ci/run` installs those tools; elsewhere a test that
//! lacks one says so and passes, unless `CI` is set.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::{eventually, have, Home};
use serde_json::Value;

/// Events of `session` in `home` once monitor `id` has ended.
fn ended_events(home: &Home, session: &str, id: &str) -> Vec<Value> {
    let mut events = vec![];
    assert!(
        eventually(Duration::from_secs(30), || {
            events = home.json_lines(&["events", "--session", session]);
            events
                .iter()
                .any(|e| e["monitor_id"] == id && (e["kind"] == "stopped" || e["kind"] == "failed"))
        }),
        "monitor {id} did not end: {events:?}"
    );
    events
}

fn without_seq(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .map(|e| {
            let mut e = e.clone();
            e.as_object_mut().unwrap().remove("seq");
            e
        })
        .collect()
}

/// Runs `watch --json` of a command to its end; returns the monitor id.
fn watched(home: &Home, description: &str, command: &str) -> String {
    let out = home
        .cmd(&["--json", "watch", "-d", description, "--", command])
        .output()
        .unwrap();
    let first: Value = serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    first["monitor_id"].as_str().unwrap().to_string()
}

#[test]
fn jsonl_round_trip_imports_identical_events_once_and_followers_see_them() {
    let a = Home::new();
    let first = watched(
        &a,
        "build",
        "echo one; echo two; echo 'three \u{1b}[31mred'; exit 2",
    );
    let second = watched(&a, "tests", "echo ok");
    let source = ended_events(&a, "t", &second);
    assert!(source.len() >= 6, "{source:?}");
    let file = a.path().join("session.jsonl");
    a.ok(&["export", "--format", "jsonl", "-o", file.to_str().unwrap()]);

    // The file: header, the events exactly as `events --json` printed them,
    // then the monitors' records.
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let header: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(header["wakeful_export"], 1);
    assert_eq!(header["session"], "t");
    for k in ["wakeful_version", "host", "exported_at"] {
        assert!(header[k].is_string(), "header lacks {k}: {header}");
    }
    let printed = a.ok(&["--json", "events"]);
    let printed: Vec<&str> = printed.lines().collect();
    assert_eq!(&lines[1..=printed.len()], &printed[..]);
    let records: Vec<Value> = lines[printed.len() + 1..]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&str> = records
        .iter()
        .map(|r| r["monitor"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [first.as_str(), second.as_str()]);

    // Another home, with a follower attached before the import.
    let b = Home::new();
    b.ok(&["status"]);
    let mut follower = b
        .cmd(&["--json", "events", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let out = follower.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    assert!(eventually(Duration::from_secs(10), || b.json(&["status"])
        ["followers"]
        == 1));
    let r = b.json(&["import", file.to_str().unwrap()]);
    assert_eq!(r["imported"], source.len());
    assert_eq!(r["skipped"], 0);
    assert_eq!(r["monitors"], 2);

    // `events --json` there prints the same events, numbered by its own log
    // and marked as imported from the exporting host (they never read as
    // events that host's cluster link brought, nor as local ones).
    let imported = b.json_lines(&["events"]);
    let host = format!("{} (imported)", header["host"].as_str().unwrap());
    for e in &imported {
        assert_eq!(e["host"], host.as_str(), "{e}");
    }
    let unmarked: Vec<Value> = imported
        .iter()
        .map(|e| {
            let mut e = e.clone();
            e.as_object_mut().unwrap().remove("host");
            e
        })
        .collect();
    assert_eq!(without_seq(&unmarked), without_seq(&source));
    let seqs: Vec<u64> = imported
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    // The follower got them as they were committed, like local events.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut followed = Vec::new();
    while followed.len() < source.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => followed.push(serde_json::from_str::<Value>(&l).unwrap()),
            Err(_) => panic!(
                "the follower got {} of {} events",
                followed.len(),
                source.len()
            ),
        }
    }
    assert_eq!(followed, imported);
    let _ = follower.kill();
    let _ = follower.wait();

    // Twice: nothing stored twice.
    let r = b.json(&["import", file.to_str().unwrap()]);
    assert_eq!(
        (r["imported"].as_u64(), r["skipped"].as_u64()),
        (Some(0), Some(source.len() as u64))
    );
    assert_eq!(b.json_lines(&["events"]), imported);
    // Imported monitors are ended, with their stop reason.
    let list = b.json(&["list"]);
    let m = list
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == first.as_str())
        .unwrap_or_else(|| panic!("{first} not listed: {list}"));
    assert_eq!(m["state"], "ended");
    assert_eq!(
        m["stop_reason"],
        serde_json::json!({"kind": "exit", "code": 2})
    );
    assert_eq!(b.json(&["list"]).as_array().unwrap().len(), 2);

    // Into the home it came from: its own events are never doubled.
    let r = a.json(&["import", file.to_str().unwrap()]);
    assert_eq!(r["imported"], 0);
    assert_eq!(a.json_lines(&["events"]).len(), source.len());

    // Not an export: exit 2, naming what is wrong.
    let bogus = a.path().join("bogus.jsonl");
    std::fs::write(&bogus, "{\"resourceSpans\": []}\n").unwrap();
    let (code, _, err) = b.run(&["import", bogus.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a wakeful export header"), "{err}");
}

/// Checks an OTLP/JSON file with the official protobuf classes: OTLP/JSON
/// writes trace and span ids in hex where the generic protobuf mapping
/// expects base64, so they are turned into base64 first (and must decode
/// to 16 and 8 bytes).
const CHECK_OTLP: &str = r#"
import base64, json, sys
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

def ids(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("traceId", "spanId"):
                node[k] = base64.b64encode(bytes.fromhex(v)).decode()
            else:
                ids(v)
    elif isinstance(node, list):
        for v in node:
            ids(v)

lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 2, lines
t, l = (json.loads(x) for x in lines)
ids(t); ids(l)
traces = json_format.Parse(json.dumps(t), ExportTraceServiceRequest())
logs = json_format.Parse(json.dumps(l), ExportLogsServiceRequest())
def attrs(kvs):
    return {a.key: json_format.MessageToDict(a.value) for a in kvs}
rs = traces.resource_spans[0]
res = attrs(rs.resource.attributes)
spans = rs.scope_spans[0].spans
records = logs.resource_logs[0].scope_logs[0].log_records
out = {
    "resource": res,
    "log_resource": attrs(logs.resource_logs[0].resource.attributes),
    "spans": [{
        "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(), "name": s.name,
        "start": s.start_time_unix_nano, "end": s.end_time_unix_nano,
        "status": s.status.code, "attributes": attrs(s.attributes),
    } for s in spans],
    "logs": [{
        "trace_id": r.trace_id.hex(), "span_id": r.span_id.hex(), "time": r.time_unix_nano,
        "body": r.body.string_value, "severity": r.severity_number, "attributes": attrs(r.attributes),
    } for r in records],
}
assert all(len(s["trace_id"]) == 32 and len(s["span_id"]) == 16 for s in out["spans"] + out["logs"])
print(json.dumps(out))
"#;

/// What the collector got: (request line, content type, body) each.
type Received = Arc<Mutex<Vec<(String, String, String)>>>;

/// A collector on 127.0.0.1: answers `{}` to every request and keeps it.
fn collector() -> (u16, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            reader.read_line(&mut request).unwrap();
            let (mut length, mut kind) = (0, String::new());
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                let h = h.trim_end().to_ascii_lowercase();
                if h.is_empty() {
                    break;
                }
                if let Some(v) = h.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                if let Some(v) = h.strip_prefix("content-type:") {
                    kind = v.trim().to_string();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            keep.lock().unwrap().push((
                request.trim_end().to_string(),
                kind,
                String::from_utf8(body).unwrap(),
            ));
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            );
        }
    });
    (port, got)
}

#[test]
fn otlp_parses_with_the_official_proto_and_posts_to_a_collector() {
    let home = Home::new();
    let failing = watched(&home, "deploy", "echo starting; echo 'error: boom'; exit 3");
    let fine = watched(&home, "lint", "echo clean");
    let events = ended_events(&home, "t", &fine);
    let file = home.path().join("otlp.jsonl");
    home.ok(&["export", "--format", "otlp", "-o", file.to_str().unwrap()]);

    if have(
        "python3 with opentelemetry-proto",
        Command::new("python3").args(["-c", "import opentelemetry.proto, google.protobuf"]),
    ) {
        let out = Command::new("python3")
            .args(["-c", CHECK_OTLP, file.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the official parser refused the export: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let host = String::from_utf8(Command::new("hostname").output().unwrap().stdout)
            .unwrap_or_default();
        for res in [&v["resource"], &v["log_resource"]] {
            assert_eq!(res["service.name"]["stringValue"], "wakeful");
            let h = res["host.name"]["stringValue"].as_str().unwrap();
            assert!(
                !h.is_empty() && (host.trim().is_empty() || h == host.trim()),
                "{h}"
            );
        }
        let spans = v["spans"].as_array().unwrap();
        assert_eq!(spans.len(), 2);
        let span = |id: &str| {
            spans
                .iter()
                .find(|s| s["attributes"]["wakeful.monitor.id"]["stringValue"] == id)
                .unwrap()
        };
        let (bad, good) = (span(&failing), span(&fine));
        assert_eq!(bad["name"], "deploy");
        assert_eq!(bad["status"], 2, "ERROR for exit 3");
        assert_eq!(good["status"], 1, "OK for exit 0");
        assert_eq!(bad["attributes"]["process.exit.code"]["intValue"], "3");
        assert_eq!(
            bad["attributes"]["wakeful.monitor.source.kind"]["stringValue"],
            "command"
        );
        assert_eq!(
            bad["attributes"]["wakeful.monitor.description"]["stringValue"],
            "deploy"
        );
        assert_eq!(
            bad["attributes"]["gen_ai.conversation.id"]["stringValue"],
            "t"
        );
        assert!(bad["start"].as_u64() <= bad["end"].as_u64());
        assert_eq!(bad["trace_id"], good["trace_id"], "one trace per session");
        // One log record per event, in its monitor's span, with its text.
        let logs = v["logs"].as_array().unwrap();
        assert_eq!(logs.len(), events.len());
        for (log, event) in logs.iter().zip(&events) {
            let owner = span(event["monitor_id"].as_str().unwrap());
            assert_eq!(log["span_id"], owner["span_id"]);
            assert_eq!(log["trace_id"], owner["trace_id"]);
            assert_eq!(log["body"], event["text"]);
            assert_eq!(
                log["attributes"]["gen_ai.conversation.id"]["stringValue"],
                "t"
            );
            assert_eq!(
                log["attributes"]["wakeful.event.seq"]["intValue"],
                event["seq"].to_string()
            );
        }
    }

    // Posting: a loopback collector is refused until a person allows it.
    let (port, got) = collector();
    let url = format!("http://127.0.0.1:{port}");
    let (code, _, err) = home.run(&["export", "--format", "otlp", "--otlp-endpoint", &url]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("[network] allow"), "{err}");
    assert!(got.lock().unwrap().is_empty());
    std::fs::write(
        home.path().join("config.toml"),
        "[network]\nallow = [\"127.0.0.0/8\"]\n",
    )
    .unwrap();
    let (code, out, err) = home.run(&["export", "--format", "otlp", "--otlp-endpoint", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "", "posted, not printed");
    let got = got.lock().unwrap().clone();
    let written = std::fs::read_to_string(&file).unwrap();
    let written: Vec<Value> = written
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].0, "POST /v1/traces HTTP/1.1");
    assert_eq!(got[1].0, "POST /v1/logs HTTP/1.1");
    for (i, (_, kind, body)) in got.iter().enumerate() {
        assert_eq!(kind, "application/json");
        let posted: Value = serde_json::from_str(body).unwrap();
        assert_eq!(posted, written[i], "the same requests as the file");
    }
}

#[test]
fn asciicast_plays_back_with_asciinema() {
    let home = Home::new();
    let id = watched(
        &home,
        "ticker",
        "echo one; sleep 0.3; printf 'two \\033[32mgreen\\033[0m \\033]0;title\\007\\n'; sleep 0.3; echo three",
    );
    let events = ended_events(&home, "t", &id);
    let cast = home.path().join("ticker.cast");
    home.ok(&[
        "export",
        "--format",
        "asciicast",
        "--monitor",
        &id,
        "-o",
        cast.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&cast).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let header = &lines[0];
    assert_eq!(header["version"], 2);
    assert!(header["width"].as_u64().unwrap() >= 80);
    assert!(header["height"].as_u64().unwrap() > 0);
    assert_eq!(header["title"], format!("ticker ({id})"));
    // Each output frame at its event's time after the first event.
    let t = |e: &Value| chrono::DateTime::parse_from_rfc3339(e["ts"].as_str().unwrap()).unwrap();
    let t0 = t(&events[0]);
    let line_events: Vec<&Value> = events.iter().filter(|e| e["kind"] == "lines").collect();
    assert_eq!(lines.len() - 1, line_events.len());
    for (frame, event) in lines[1..].iter().zip(&line_events) {
        let want = (t(event) - t0).num_milliseconds() as f64 / 1000.0;
        assert!(
            (frame[0].as_f64().unwrap() - want).abs() < 0.002,
            "{frame} vs {event}"
        );
        assert_eq!(frame[1], "o");
    }
    if have(
        "asciinema 2.4 (pip install asciinema==2.4.0)",
        Command::new("asciinema").arg("--version"),
    ) {
        let out = Command::new("asciinema")
            .arg("cat")
            .arg(&cast)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "asciinema cat refused the recording: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Colours kept, the title-setting escape removed.
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "one\r\ntwo \u{1b}[32mgreen\u{1b}[0m \r\nthree\r\n"
        );
    }
    // Of a session with two monitors, asciicast wants one.
    watched(&home, "other", "echo x");
    let (code, _, err) = home.run(&["export", "--format", "asciicast"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--monitor"), "{err}");
}

/// The time from a session's first `lines` event to its last.
fn lines_span(events: &[Value]) -> f64 {
    let times: Vec<chrono::DateTime<chrono::FixedOffset>> = events
        .iter()
        .filter(|e| e["kind"] == "lines")
        .map(|e| chrono::DateTime::parse_from_rfc3339(e["ts"].as_str().unwrap()).unwrap())
        .collect();
    assert!(times.len() >= 3, "{events:?}");
    (times[times.len() - 1] - times[0]).num_milliseconds() as f64 / 1000.0
}

#[test]
fn replay_keeps_the_recorded_timing_within_ten_percent_at_speed_1_and_10() {
    let home = Home::new();
    let id = watched(
        &home,
        "incident",
        "echo 'disk 91%'; sleep 2.5; echo 'disk 97%'; sleep 2.5; echo 'error: disk full'; exit 4",
    );
    let recorded = ended_events(&home, "t", &id);
    let file = home.path().join("incident.jsonl");
    home.ok(&["export", "--monitor", &id, "-o", file.to_str().unwrap()]);
    let original = lines_span(&recorded);
    assert!(original >= 4.9, "{original}");

    // Both replays at once, each into a session of its own.
    let mut ids = Vec::new();
    for (session, speed) in [("r1", "1"), ("r10", "10")] {
        let v = home.json(&[
            "replay",
            file.to_str().unwrap(),
            "--speed",
            speed,
            "--session",
            session,
        ]);
        assert_eq!(v["session"], session);
        assert_eq!(v["replay_of"], id.as_str());
        ids.push(v["id"].as_str().unwrap().to_string());
    }
    for ((session, speed), replay) in [("r1", 1.0), ("r10", 10.0)].iter().zip(&ids) {
        let events = ended_events(&home, session, replay);
        let want = original / speed;
        let got = lines_span(&events);
        assert!(
            (got - want).abs() <= want * 0.10,
            "speed {speed}: the lines took {got:.3} s, the recording {original:.3} s"
        );
        // Every replayed event says so; it is a replay monitor of that
        // recording, and it ends as the recording ended.
        assert!(events.iter().all(|e| e["replayed"] == true), "{events:?}");
        let started = &events[0];
        assert_eq!(started["kind"], "started");
        let text = started["text"].as_str().unwrap();
        assert!(
            text.contains(&format!("replay of {id}")) && text.contains("which ran"),
            "{text}"
        );
        let lines: Vec<&Value> = events.iter().filter(|e| e["kind"] == "lines").collect();
        assert_eq!(lines[2]["lines"], serde_json::json!(["error: disk full"]));
        let last = events.last().unwrap();
        assert_eq!(
            last["stop_reason"],
            serde_json::json!({"kind": "exit", "code": 4})
        );
        let info = home.json(&["list", "--session", session]);
        assert_eq!(info[0]["source"]["kind"], "replay");
    }
    // Live events carry no `replayed` at all.
    assert!(recorded.iter().all(|e| e.get("replayed").is_none()));

    // A file of several monitors needs --monitor.
    watched(&home, "other", "echo x");
    let all = home.path().join("all.jsonl");
    home.ok(&["export", "-o", all.to_str().unwrap()]);
    let (code, _, err) = home.run(&["replay", all.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--monitor"), "{err}");
    let (code, _, err) = home.run(&["replay", file.to_str().unwrap(), "--speed", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("replay speed"), "{err}");
}

/// A small export of host `host`: monitor mon-aaa's three events with
/// seqs 1, 2, 3 (`lines` says what its `lines` event carries), then its
/// record.
fn forged_export(host: &str, lines: &str) -> String {
    let header = serde_json::json!({"wakeful_export": 1, "wakeful_version": "0.1.0", "host": host,
        "exported_at": "2026-11-30T12:00:05.000Z", "session": "t"});
    format!(
        "{header}\n\
{{\"seq\":1,\"session\":\"t\",\"monitor_id\":\"mon-aaa\",\"kind\":\"started\",\"ts\":\"2026-11-30T12:00:00.000Z\",\"text\":\"started: deploy (command: make deploy)\"}}\n\
{{\"seq\":2,\"session\":\"t\",\"monitor_id\":\"mon-aaa\",\"kind\":\"lines\",\"ts\":\"2026-11-30T12:00:01.000Z\",\"text\":\"{lines}\",\"lines\":[\"{lines}\"],\"count\":1,\"from_line\":1,\"to_line\":1}}\n\
{{\"seq\":3,\"session\":\"t\",\"monitor_id\":\"mon-aaa\",\"kind\":\"stopped\",\"ts\":\"2026-11-30T12:00:02.000Z\",\"text\":\"deploy: exited with code 0\",\"stop_reason\":{{\"kind\":\"exit\",\"code\":0}}}}\n\
{{\"monitor\":{{\"id\":\"mon-aaa\",\"session\":\"t\",\"description\":\"deploy\",\"source\":{{\"kind\":\"command\",\"command\":\"make deploy\"}},\"persistent\":false,\"timeout_ms\":300000,\"state\":\"ended\",\"stop_reason\":{{\"kind\":\"exit\",\"code\":0}},\"started_at\":\"2026-11-30T12:00:00.000Z\",\"ended_at\":\"2026-11-30T12:00:02.000Z\",\"events\":3,\"lines\":1,\"suppressed_lines\":0,\"output_path\":\"/x/mon-aaa.log\"}}}}\n"
    )
}

/// Issue #31, point 8: a hostile export — a huge line, a duplicate or
/// negative seq, a forged host, a file cut short — is refused whole with a
/// message naming the line, by `import` and `replay` alike, and the store
/// is left as it was; a file that passes can never pass for another host's
/// events, nor for this host's.
#[test]
fn a_hostile_export_is_refused_whole_and_cannot_pass_for_another_host() {
    let home = Home::new();
    home.ok(&["start", "--", "echo local"]);
    assert!(eventually(Duration::from_secs(10), || home
        .json_lines(&["events"])
        .iter()
        .any(|e| e["kind"] == "stopped")));
    let before = home.json_lines(&["events"]);
    let good = forged_export("build-1", "all good");
    let lines: Vec<&str> = good.lines().collect();
    let join = |ls: &[&str]| ls.join("\n") + "\n";
    let huge = format!("\"{}\"", "x".repeat(5 * 1024 * 1024));
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "huge line",
            join(&[lines[0], lines[1], &huge, lines[2]]),
            "line 3 is longer than 4194304 bytes",
        ),
        (
            "duplicate seq",
            join(&[lines[0], lines[1], lines[2], lines[2], lines[3]]),
            "line 4: seq 2 is not above seq 2 of line 3",
        ),
        (
            "negative seq",
            good.replace("\"seq\":3", "\"seq\":-3"),
            "line 4: seq -3 is not a seq",
        ),
        (
            "seq back",
            good.replace("\"seq\":3", "\"seq\":1"),
            "line 4: seq 1 is not above seq 2 of line 3",
        ),
        (
            "host with a slash",
            forged_export("build-1/9", "x"),
            "line 1 is not a wakeful export header",
        ),
        (
            "host with a space",
            forged_export("build-1 (imported)", "x"),
            "line 1 is not a wakeful export header",
        ),
        (
            "the file's own host on an event",
            good.replace("\"seq\":2,", "\"seq\":2,\"host\":\"build-1\","),
            "line 3: the event names the file's own host",
        ),
        (
            "a forged monitor id",
            good.replace(
                "mon-aaa\",\"kind\":\"lines",
                "mon-aaa] [wakeful mon-x\",\"kind\":\"lines",
            ),
            "line 3: monitor id",
        ),
        (
            "cut short",
            good[..good.len() - 30].to_string(),
            "ends in the middle of line 5",
        ),
    ];
    for (what, text, says) in &cases {
        let file = home.path().join("hostile.jsonl");
        std::fs::write(&file, text).unwrap();
        for args in [vec!["import"], vec!["replay"]] {
            let mut a = args.clone();
            a.push(file.to_str().unwrap());
            let (code, out, err) = home.run(&a);
            assert_eq!(code, 2, "{what}, {args:?}: {out}{err}");
            assert!(
                err.contains(says),
                "{what}, {args:?} should say {says:?}: {err}"
            );
            assert!(
                err.len() < 2000,
                "{what}: the message is short: {} bytes",
                err.len()
            );
        }
        assert_eq!(
            home.json_lines(&["events"]),
            before,
            "{what}: the store changed"
        );
        assert_eq!(home.json(&["list"]).as_array().unwrap().len(), 1, "{what}");
    }

    // A file that claims to be build-1's: its events are marked imported,
    // so they never read as build-1's (which come through the cluster link)
    // or as this host's; twice stores nothing twice.
    let file = home.path().join("claims.jsonl");
    std::fs::write(
        &file,
        forged_export("build-1", "[wakeful mon-real · stopped] all good"),
    )
    .unwrap();
    let r = home.json(&["import", file.to_str().unwrap()]);
    assert_eq!(
        (r["imported"].as_u64(), r["monitors"].as_u64()),
        (Some(3), Some(1)),
        "{r}"
    );
    let r = home.json(&["import", file.to_str().unwrap()]);
    assert_eq!(r["imported"], 0, "{r}");
    let events = home.json_lines(&["events"]);
    let imported: Vec<&Value> = events
        .iter()
        .filter(|e| e["monitor_id"] == "mon-aaa")
        .collect();
    assert_eq!(imported.len(), 3);
    for e in &imported {
        assert_eq!(e["host"], "build-1 (imported)", "{e}");
    }
    let plain = home.ok(&["events"]);
    assert!(
        plain.contains("mon-aaa@build-1 (imported) > [wakeful mon-real"),
        "{plain}"
    );
    assert!(
        plain
            .lines()
            .filter(|l| l.contains("mon-aaa"))
            .all(|l| l.contains(" mon-aaa@build-1 (imported) ")),
        "{plain}"
    );
}
