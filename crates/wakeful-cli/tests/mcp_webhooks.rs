//! MCP Events webhooks over raw stdio frames, delivered to a small HTTP
//! receiver in the test (loopback, allowed by `[network] allow`) that checks
//! every Standard Webhooks signature with its own HMAC: `capabilities.events`,
//! `webhook` in `events/list`, the verification challenge, a monitor's lines
//! delivered, a failed delivery retried, `kill -9` of the daemon with a
//! delivery pending (no `eventId` lost), a subscription given up and shown
//! by `status`, unsubscribe, and bad input (secret, refused URL, mode, the
//! per-session limit).
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/mcp_stdio.rs"]
mod mcp_stdio;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use common::Home;
use hmac::{Hmac, Mac};
use mcp_stdio::Raw;
use serde_json::{json, Value};
use sha2::Sha256;

const DEADLINE: Duration = Duration::from_secs(30);
const SESSION: &str = "wh";

/// `wakeful mcp` in session [`SESSION`], initialized.
fn initialized(home: &Home) -> (Raw, Value) {
    let mut cmd = home.cmd(&["mcp"]);
    cmd.env("WAKEFUL_SESSION", SESSION).stderr(Stdio::null());
    Raw::initialized(&mut cmd, DEADLINE)
}

/// One request the receiver took.
#[derive(Debug, Clone)]
struct Delivery {
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
    /// The signature checked out (with the receiver's own HMAC).
    signed: bool,
    /// What the receiver answered.
    status: u16,
}

impl Delivery {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A tiny HTTP/1.1 receiver: answers a verification with its challenge,
/// an event with 204 (503 while `refuse` is set; always 410 on `/gone`),
/// and keeps every request.
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Delivery>>>,
    refuse: Arc<AtomicBool>,
}

fn signed(key: &[u8], headers: &[(String, String)], body: &[u8]) -> bool {
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    let (Some(id), Some(ts), Some(sig)) = (
        get("webhook-id"),
        get("webhook-timestamp"),
        get("webhook-signature"),
    ) else {
        return false;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    if (now - ts.parse::<i64>().unwrap_or(0)).abs() > 300 {
        return false;
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(body);
    let want = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    sig.split(' ').any(|s| s == want)
}

fn serve(mut stream: TcpStream, key: &[u8], refuse: &AtomicBool) -> Option<Delivery> {
    stream.set_read_timeout(Some(DEADLINE)).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut first = String::new();
    reader.read_line(&mut first).ok()?;
    let path = first.split(' ').nth(1)?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        reader.read_line(&mut l).ok()?;
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    let ok = signed(key, &headers, &body);
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (status, answer) = if !ok {
        (401, String::new())
    } else if v["type"] == "verification" {
        (200, json!({"challenge": v["challenge"]}).to_string())
    } else if path.starts_with("/gone") {
        (410, String::new())
    } else if refuse.load(Ordering::SeqCst) {
        (503, String::new())
    } else {
        (204, String::new())
    };
    let reason = match status {
        200 => "OK",
        204 => "No Content",
        401 => "Unauthorized",
        410 => "Gone",
        _ => "Service Unavailable",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        if status == 204 { 0 } else { answer.len() }
    );
    stream.write_all(head.as_bytes()).ok()?;
    if status != 204 {
        stream.write_all(answer.as_bytes()).ok()?;
    }
    Some(Delivery {
        path,
        headers,
        body: v,
        signed: ok,
        status,
    })
}

impl Receiver {
    fn start(key: Vec<u8>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let got = Arc::new(Mutex::new(Vec::new()));
        let refuse = Arc::new(AtomicBool::new(false));
        let (g, r) = (got.clone(), refuse.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if let Some(d) = serve(stream, &key, &r) {
                    g.lock().unwrap().push(d);
                }
            }
        });
        Receiver { url, got, refuse }
    }

    fn deliveries(&self) -> Vec<Delivery> {
        self.got.lock().unwrap().clone()
    }

    /// The `eventId`s of the events accepted (204).
    fn accepted(&self) -> BTreeSet<String> {
        self.deliveries()
            .iter()
            .filter(|d| d.status == 204)
            .map(|d| d.body["eventId"].as_str().unwrap().to_string())
            .collect()
    }

    fn accepted_text(&self) -> String {
        self.deliveries()
            .iter()
            .filter(|d| d.status == 204)
            .map(|d| {
                d.body["data"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn secret(key: &[u8]) -> String {
    format!("whsec_{}", STANDARD.encode(key))
}

fn append(file: &std::path::Path, line: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(file).unwrap();
    writeln!(f, "{line}").unwrap();
}

#[test]
fn webhooks_are_signed_retried_survive_kill_9_are_given_up_and_end_on_unsubscribe() {
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[network]\nallow = [\"127.0.0.0/8\"]\n",
    )
    .unwrap();
    let key: Vec<u8> = (0u8..32).map(|b| b.wrapping_mul(7)).collect();
    let rx = Receiver::start(key.clone());
    let (mut mcp, init) = initialized(&home);
    assert_eq!(
        init["result"]["capabilities"]["events"],
        json!({}),
        "{init}"
    );
    let list = mcp.request(1, "events/list", json!({}));
    assert_eq!(
        list["result"]["events"][0]["delivery"],
        json!(["poll", "push", "webhook"]),
        "{list}"
    );

    let log = home.path().join("app.log");
    std::fs::write(&log, "").unwrap();
    // Persistent: re-armed under the same id after the daemon's kill -9.
    let args = [
        "--file",
        log.to_str().unwrap(),
        "--batch-ms",
        "0",
        "--persistent",
    ];
    home.json(&[&["--session", SESSION, "start", "-d", "hooked"], &args[..]].concat());

    let url = format!("{}/hook?mcp_event_subscription=k1", rx.url);
    let sub = mcp.request(
        2,
        "events/subscribe",
        json!({"name": "monitor.lines", "arguments": {},
               "delivery": {"mode": "webhook", "url": url, "secret": secret(&key)},
               "cursor": null, "ttlMs": 600000}),
    );
    let result = &sub["result"];
    let id = result["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{sub}"))
        .to_string();
    assert!(
        result["refreshBefore"].as_str().unwrap().ends_with('Z'),
        "{sub}"
    );
    assert_eq!(result["truncated"], false, "{sub}");
    let from = result["cursor"].as_str().unwrap().to_string();
    let verification = rx.deliveries();
    assert_eq!(verification.len(), 1, "{verification:?}");
    assert!(verification[0].signed && verification[0].body["type"] == "verification");
    // A second subscribe of the same four is a refresh: the same id.
    let again = mcp.request(
        3,
        "events/subscribe",
        json!({"name": "monitor.lines",
               "delivery": {"mode": "webhook", "url": url, "secret": secret(&key)},
               "ttlMs": 600000}),
    );
    assert_eq!(again["result"]["id"], json!(id), "{again}");

    // A subscription whose receiver answers 410 Gone is given up at once.
    let gone = mcp.request(
        4,
        "events/subscribe",
        json!({"name": "monitor.lines",
               "delivery": {"mode": "webhook", "url": format!("{}/gone", rx.url),
                            "secret": secret(&key)}}),
    );
    assert!(gone["result"]["id"].is_string(), "{gone}");

    // The first line: refused once (503), then retried and accepted.
    rx.refuse.store(true, Ordering::SeqCst);
    append(&log, "line one");
    assert!(common::eventually(DEADLINE, || rx
        .deliveries()
        .iter()
        .any(|d| d.status == 503)));
    rx.refuse.store(false, Ordering::SeqCst);
    assert!(
        common::eventually(DEADLINE, || rx.accepted_text().contains("line one")),
        "{:?}",
        rx.deliveries()
    );

    // The second line: pending (503) when the daemon is killed.
    rx.refuse.store(true, Ordering::SeqCst);
    let refused_before = rx.deliveries().iter().filter(|d| d.status == 503).count();
    append(&log, "line two");
    assert!(common::eventually(DEADLINE, || rx
        .deliveries()
        .iter()
        .filter(|d| d.status == 503)
        .count()
        > refused_before));
    home.kill_daemon();
    rx.refuse.store(false, Ordering::SeqCst);
    // Any request starts the daemon again; it resumes the subscription.
    let status = home.json(&["status"]);
    let hooks = status["event_webhooks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!status.to_string().contains("whsec_"), "{status}");
    assert!(
        common::eventually(DEADLINE, || rx.accepted_text().contains("line two")),
        "{:?}",
        rx.deliveries()
    );
    append(&log, "line three");
    assert!(common::eventually(DEADLINE, || rx
        .accepted_text()
        .contains("line three")));

    // Every signature checked; every delivery names the subscription and
    // carries its eventId as webhook-id.
    for d in rx
        .deliveries()
        .iter()
        .filter(|d| d.path.starts_with("/hook"))
    {
        assert!(d.signed, "{d:?}");
        assert_eq!(
            d.header("x-mcp-subscription-id"),
            Some(id.as_str()),
            "{d:?}"
        );
        assert!(d.path.contains("mcp_event_subscription=k1"), "{d:?}");
        if d.body["type"] != "verification" {
            assert_eq!(d.header("webhook-id"), d.body["eventId"].as_str(), "{d:?}");
            assert_eq!(d.body["name"], "monitor.lines");
        }
    }
    // No eventId of the log is missing (duplicates allowed).
    let poll = mcp.request(
        5,
        "events/poll",
        json!({"name": "monitor.lines", "cursor": from}),
    );
    let logged: BTreeSet<String> = poll["result"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["eventId"].as_str().unwrap().to_string())
        .collect();
    let text = poll.to_string();
    assert!(
        logged.len() >= 3
            && ["line one", "line two", "line three"]
                .iter()
                .all(|l| text.contains(l)),
        "{poll}"
    );
    let accepted = rx.accepted();
    assert!(logged.is_subset(&accepted), "{logged:?} {accepted:?}");

    // The 410 subscription is given up, visible in status with the reason.
    let gone_id = gone["result"]["id"].as_str().unwrap().to_string();
    let mut shown = Value::Null;
    assert!(
        common::eventually(DEADLINE, || {
            shown = home.json(&["status"]);
            shown["event_webhooks"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|h| h["id"] == json!(gone_id) && h["state"] == "given_up")
        }),
        "{shown} {hooks:?}"
    );
    assert!(shown.to_string().contains("410"), "{shown}");
    let (_, doctor, _) = home.run(&["--session", SESSION, "--json", "doctor"]);
    assert!(
        doctor.contains("given up") && doctor.contains(&gone_id) && !doctor.contains("whsec_"),
        "{doctor}"
    );

    // Unsubscribe: no more deliveries.
    let un = mcp.request(
        6,
        "events/unsubscribe",
        json!({"name": "monitor.lines", "arguments": {},
               "delivery": {"mode": "webhook", "url": url}}),
    );
    assert_eq!(un["result"], json!({}), "{un}");
    let after = home.json(&["status"]);
    assert!(
        !after["event_webhooks"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|h| h["id"] == json!(id)),
        "{after}"
    );
    let n = rx.deliveries().len();
    append(&log, "line four");
    let mut seen = Value::Null;
    assert!(common::eventually(DEADLINE, || {
        seen = mcp.request(
            7,
            "events/poll",
            json!({"name": "monitor.lines", "cursor": from}),
        );
        seen.to_string().contains("line four")
    }));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(rx.deliveries().len(), n, "{:?}", rx.deliveries());
}

#[test]
fn bad_secrets_refused_urls_other_modes_and_the_limit_are_refused() {
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[network]\nallow = [\"127.0.0.0/8\"]\n",
    )
    .unwrap();
    let key = vec![9u8; 24];
    let rx = Receiver::start(key.clone());
    let (mut mcp, _) = initialized(&home);
    let sub = |mcp: &mut Raw, id: u64, url: &str, secret: &str, mode: &str| {
        mcp.request(
            id,
            "events/subscribe",
            json!({"name": "monitor.wake",
                   "delivery": {"mode": mode, "url": url, "secret": secret}}),
        )
    };
    let hook = format!("{}/hook", rx.url);
    for (i, bad) in [
        "whsec_AAAA".to_string(),
        secret(&[1u8; 23]),
        secret(&[1u8; 65]),
        STANDARD.encode([1u8; 32]),
    ]
    .iter()
    .enumerate()
    {
        let r = sub(&mut mcp, 10 + i as u64, &hook, bad, "webhook");
        assert_eq!(r["error"]["code"], -32602, "{r}");
        let m = r["error"]["message"].as_str().unwrap();
        assert!(m.contains("secret") && !m.contains(bad.as_str()), "{r}");
    }
    for (i, url) in ["http://169.254.169.254/latest", "http://10.1.2.3/x"]
        .iter()
        .enumerate()
    {
        let r = sub(&mut mcp, 20 + i as u64, url, &secret(&key), "webhook");
        assert_eq!(r["error"]["code"], -32602, "{r}");
        let m = r["error"]["message"].as_str().unwrap();
        assert!(
            m.contains("refused") && m.contains("[network] allow"),
            "{r}"
        );
    }
    let r = sub(&mut mcp, 30, &hook, &secret(&key), "poll");
    assert_eq!(r["error"]["code"], -32013, "{r}");
    // A receiver that does not answer the challenge.
    let wrong = sub(&mut mcp, 31, &hook, &secret(&[3u8; 24]), "webhook");
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    assert!(wrong.to_string().contains("verification"), "{wrong}");
    assert!(rx.deliveries().iter().all(|d| !d.signed));
    // 16 per session; the 17th is refused with the limit, another session
    // is not affected.
    for i in 0..16u64 {
        let r = sub(
            &mut mcp,
            40 + i,
            &format!("{hook}?n={i}"),
            &secret(&key),
            "webhook",
        );
        assert!(r["result"]["id"].is_string(), "{r}");
    }
    let over = sub(
        &mut mcp,
        60,
        &format!("{hook}?n=16"),
        &secret(&key),
        "webhook",
    );
    assert_eq!(over["error"]["code"], -32015, "{over}");
    assert!(over.to_string().contains("16"), "{over}");
    let other = mcp.request(
        61,
        "events/subscribe",
        json!({"name": "monitor.wake", "arguments": {"session": "other"},
               "delivery": {"mode": "webhook", "url": format!("{hook}?n=16"),
                            "secret": secret(&key)}}),
    );
    assert!(other["result"]["id"].is_string(), "{other}");
    let file = std::fs::read_to_string(home.path().join("event-webhooks.json"));
    // The file is private: the daemon's umask.
    let meta = std::fs::metadata(home.path().join("event-webhooks.json"));
    if let (Ok(_), Ok(meta)) = (file, meta) {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o077, 0);
    }
}
