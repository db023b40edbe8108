//! `wakeful web` over HTTP: who may ask (token, cookie, Host, Origin), and
//! the event stream (resume from Last-Event-ID, keep-alive, a dead client).
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod view_support;

use std::time::{Duration, Instant};

use common::{eventually, Home};
use serde_json::Value;
use view_support::{http, Item, Web};

fn seqs_of(home: &Home, after: u64) -> Vec<u64> {
    home.json_lines(&["events", "--after", &after.to_string()])
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect()
}

#[test]
fn web_refuses_without_token_foreign_host_and_cross_origin_post() {
    let home = Home::new();
    let id = home
        .ok(&["start", "-d", "sleeper", "--", "sleep 600"])
        .trim()
        .to_string();
    let web = Web::start(&home, &[]);
    let host = web.host();
    let path_with_token = format!("/?token={}", web.token);

    // No token, no cookie: 401, on the page and the API alike.
    for path in ["/", "/api/state", "/api/events", "/app.js"] {
        let r = http(web.port, "GET", path, &[("Host", &host)]);
        assert_eq!(r.status, 401, "{path}: {r:?}");
    }
    let r = http(web.port, "GET", "/?token=0000", &[("Host", &host)]);
    assert_eq!(r.status, 401);
    // The token is exchanged once for a separate session value, in an
    // HttpOnly, SameSite=Strict cookie named after the port; the tokened
    // URL redirects to `/`.
    let r = http(web.port, "GET", &path_with_token, &[("Host", &host)]);
    assert_eq!(r.status, 303, "{r:?}");
    assert_eq!(r.header("location").as_deref(), Some("/"));
    let cookie = r.header("set-cookie").unwrap();
    let (pair, attributes) = cookie.split_once(';').unwrap();
    assert_eq!(attributes, " HttpOnly; SameSite=Strict; Path=/");
    let (name, value) = pair.split_once('=').unwrap();
    assert_eq!(name, format!("wakeful_web_{}", web.port));
    assert_eq!(value.len(), 64);
    assert_ne!(value, web.token, "the cookie is not the launch token");
    web.adopt(value);
    // The token is good once: used again (without the cookie), 401; the
    // token as a cookie is no cookie.
    let r = http(web.port, "GET", &path_with_token, &[("Host", &host)]);
    assert_eq!(r.status, 401, "{r:?}");
    let token_cookie = format!("wakeful_web_{}={}", web.port, web.token);
    let r = http(
        web.port,
        "GET",
        "/api/state",
        &[("Host", &host), ("Cookie", &token_cookie)],
    );
    assert_eq!(r.status, 401, "{r:?}");
    // A foreign Host (DNS rebinding): 403, even with the token or cookie.
    for foreign in [
        format!("evil.example:{}", web.port),
        "127.0.0.1".into(),
        format!("localhost:{}", web.port + 1),
    ] {
        let r = http(web.port, "GET", &path_with_token, &[("Host", &foreign)]);
        assert_eq!(r.status, 403, "{foreign}: {r:?}");
        let r = http(
            web.port,
            "GET",
            "/api/state",
            &[("Host", &foreign), ("Cookie", &web.cookie())],
        );
        assert_eq!(r.status, 403, "{foreign}: {r:?}");
    }
    // With the cookie: the page, its assets and the API; localhost too.
    let page = web.get("/");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<script src=\"/app.js\""));
    assert!(
        !page.body.contains("http://") && !page.body.contains("https://"),
        "no CDN"
    );
    assert_eq!(web.get("/app.js").status, 200);
    // (The server reads the daemon's list as it starts.)
    assert!(eventually(Duration::from_secs(10), || web
        .get("/api/state")
        .json()["monitors"][0]["id"]
        == id.as_str()));
    let localhost = format!("localhost:{}", web.port);
    let r = http(
        web.port,
        "GET",
        "/api/state",
        &[("Host", &localhost), ("Cookie", &web.cookie())],
    );
    assert_eq!(r.status, 200);
    // A wrong cookie is no cookie.
    let wrong = format!("wakeful_web_{}={}", web.port, "f".repeat(64));
    let r = http(
        web.port,
        "GET",
        "/api/state",
        &[("Host", &host), ("Cookie", &wrong)],
    );
    assert_eq!(r.status, 401);

    // The stop action: a POST from another origin (or none) is refused.
    let stop = format!("/api/stop?id={id}");
    for origin in [
        Some("http://evil.example"),
        Some("null"),
        None,
        Some("http://127.0.0.1:1"),
    ] {
        let mut headers = vec![
            ("Host", host.as_str()),
            ("Cookie", web.cookie().leak() as &str),
        ];
        if let Some(o) = origin {
            headers.push(("Origin", o));
        }
        let r = http(web.port, "POST", &stop, &headers);
        assert_eq!(r.status, 403, "{origin:?}: {r:?}");
    }
    assert_eq!(home.json(&["list"])[0]["state"], "running");
    // A GET cannot stop.
    assert_eq!(web.get(&stop).status, 405);
    let origin = web.origin();
    let r = http(
        web.port,
        "POST",
        &stop,
        &[
            ("Host", &host),
            ("Cookie", &web.cookie()),
            ("Origin", &origin),
        ],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["state"], "ended");
    assert_eq!(home.json(&["list"])[0]["stop_reason"]["kind"], "stopped");
    // Stopping it again: not found.
    let r = http(
        web.port,
        "POST",
        &stop,
        &[
            ("Host", &host),
            ("Cookie", &web.cookie()),
            ("Origin", &origin),
        ],
    );
    assert_eq!(r.status, 404, "{r:?}");
    // Read-only otherwise: no consumer appeared.
    assert_eq!(
        home.json(&["consumers", "--all-sessions"]),
        Value::Array(vec![])
    );
}

#[test]
fn sse_resumes_from_last_event_id_with_exactly_the_missed_events() {
    let home = Home::new();
    home.ok(&[
        "start",
        "-d",
        "first",
        "--",
        "for i in 1 2 3 4 5; do echo first-$i; done",
    ]);
    // A small ring, so that a resume far back is read from the daemon.
    let web = Web::start(&home, &["--ring", "3"]);
    let mut all = vec![];
    assert!(eventually(Duration::from_secs(10), || {
        all = seqs_of(&home, 0);
        all.len() >= 3
    }));
    // A fresh stream starts with the recent events, in order, each once.
    let mut sse = web.sse("/api/events?session=t", None);
    assert_eq!(sse.status, 200);
    let (first_id, first) = sse.next_event().unwrap();
    assert_eq!(first["seq"], first_id);
    drop(sse);

    // Events come while nobody listens.
    home.ok(&[
        "start",
        "-d",
        "second",
        "--",
        "for i in 1 2 3; do echo second-$i; done",
    ]);
    home.ok(&["--session", "other", "start", "--", "echo other-session"]);
    assert!(eventually(Duration::from_secs(10), || seqs_of(&home, 0)
        .len()
        >= all.len() + 3));
    let expected_all = loop {
        let s = seqs_of(&home, 0);
        // Both monitors of session t ended (3 events each at least).
        if home
            .json_lines(&["events"])
            .iter()
            .filter(|e| e["kind"] == "stopped")
            .count()
            == 2
        {
            break s;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Resume from every point: exactly the missed events of the session,
    // from the ring or (before it) from the daemon.
    for resume in [
        0,
        expected_all[0],
        expected_all[2],
        expected_all[expected_all.len() - 2],
    ] {
        let expected: Vec<u64> = expected_all
            .iter()
            .copied()
            .filter(|s| *s > resume)
            .collect();
        let mut sse = web.sse("/api/events?session=t", Some(resume));
        let mut got = vec![];
        while got.len() < expected.len() {
            let (id, data) = sse
                .next_event()
                .unwrap_or_else(|| panic!("after {resume}: got {got:?}, expected {expected:?}"));
            assert_eq!(data["session"], "t");
            assert_eq!(data["seq"], id);
            got.push(id);
        }
        assert_eq!(got, expected, "after {resume}");
        // And nothing more (the next item, if any, is not an event).
        sse.set_timeout(Duration::from_millis(300));
        assert!(
            !matches!(sse.next(), Some(Item::Event { .. })),
            "after {resume}: an extra event"
        );
    }
    // Without a session: every session's events, in seq order.
    let mut sse = web.sse("/api/events", Some(0));
    let mut sessions = vec![];
    let mut last = 0;
    for _ in 0..expected_all.len() + 3 {
        let (id, data) = sse.next_event().unwrap();
        assert!(id > last);
        last = id;
        sessions.push(data["session"].as_str().unwrap().to_string());
    }
    assert!(sessions.iter().any(|s| s == "other"));
    // Live: a new event arrives on an open stream.
    let mut sse = web.sse("/api/events?session=t", Some(*expected_all.last().unwrap()));
    home.ok(&["start", "--", "echo live-line"]);
    let (_, data) = sse.next_event().unwrap();
    assert_eq!(data["kind"], "started");
}

#[test]
fn sse_sends_keep_alive_comments() {
    let home = Home::new();
    let web = Web::start(&home, &["--keep-alive-ms", "200"]);
    let mut sse = web.sse("/api/events?session=nobody", None);
    let started = Instant::now();
    assert_eq!(sse.next(), Some(Item::Comment("keep-alive".into())));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_dead_sse_client_is_dropped_and_does_not_block_others() {
    use std::os::fd::AsRawFd;
    let home = Home::new();
    // About 13 MB of events: more than the kernel buffers between the
    // server and a client that reads nothing (4 MiB send buffer at most).
    let line = "x".repeat(640);
    for i in 0..20 {
        let command = format!("for i in $(seq 1 1100); do echo {i}-$i-{line}; done");
        home.ok(&[
            "--session",
            &format!("s{i}"),
            "start",
            "--batch-ms",
            "0",
            "--",
            &command,
        ]);
    }
    let web = Web::start(&home, &["--write-deadline-ms", "1000"]);
    let total = || {
        (0..20)
            .map(|i| {
                home.json_lines(&["--session", &format!("s{i}"), "events"])
                    .len()
            })
            .sum::<usize>()
    };
    assert!(eventually(Duration::from_secs(60), || {
        let l = home.json(&["list", "--all-sessions"]);
        l.as_array().unwrap().iter().all(|m| m["state"] == "ended")
    }));
    let n = total();
    assert!(n > 400, "{n} events");

    // The dead client asks for everything and never reads.
    let host = web.host();
    let cookie = web.cookie();
    let dead = std::net::TcpStream::connect(("127.0.0.1", web.port)).unwrap();
    let small: libc::c_int = 4096;
    // SAFETY: setsockopt on an open socket with a c_int option value.
    unsafe {
        libc::setsockopt(
            dead.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &small as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    use std::io::Write;
    (&dead)
        .write_all(
            format!("GET /api/events HTTP/1.1\r\nHost: {host}\r\nCookie: {cookie}\r\nLast-Event-ID: 0\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();

    // Another browser is served at once (once the server has taken every
    // event, a stream from the last one).
    let last = home.json(&["status"])["last_seq"].as_u64().unwrap();
    assert!(eventually(Duration::from_secs(20), || web
        .get("/api/state")
        .json()["last_seq"]
        == last));
    let mut live = web.sse("/api/events", Some(last));
    let before = Instant::now();
    home.ok(&["--session", "probe", "start", "--", "echo alive-probe"]);
    let (_, data) = live.next_event().unwrap();
    assert_eq!(data["session"], "probe");
    assert!(
        before.elapsed() < Duration::from_secs(2),
        "{:?}",
        before.elapsed()
    );
    let r = web.get("/api/state");
    assert_eq!(r.status, 200);

    // The dead client is closed by the server once its writes made no
    // progress for the deadline: the server's end of that connection
    // leaves ESTABLISHED (FIN_WAIT1 while its unread bytes are still
    // queued), while the client still has read nothing.
    let client_port = dead.local_addr().unwrap().port();
    assert!(
        server_side_state(web.port, client_port).is_some(),
        "the connection is listed"
    );
    assert!(
        eventually(Duration::from_secs(10), || server_side_state(
            web.port,
            client_port
        ) != Some(1)),
        "the server never closed the dead client's connection"
    );
    // The live client is still served.
    home.ok(&["--session", "probe", "start", "--", "echo alive-again"]);
    let (_, data) = live.next_event().unwrap();
    assert_eq!(data["session"], "probe");
}

/// The TCP state (as in /proc/net/tcp: 1 = ESTABLISHED) of the server's
/// end of the loopback connection between the two ports.
fn server_side_state(server_port: u16, client_port: u16) -> Option<u8> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!("0100007F:{server_port:04X}");
    let remote = format!("0100007F:{client_port:04X}");
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1) == Some(&local.as_str()) && f.get(2) == Some(&remote.as_str()))
            .then(|| u8::from_str_radix(f[3], 16).unwrap())
    })
}

#[test]
fn web_streams_on_across_a_daemon_restart() {
    let home = Home::new();
    home.ok(&["start", "--", "echo before-restart"]);
    let web = Web::start(&home, &[]);
    let mut last = 0;
    assert!(eventually(Duration::from_secs(10), || {
        last = web.get("/api/state").json()["last_seq"].as_u64().unwrap();
        last >= 3
    }));
    let mut sse = web.sse("/api/events?session=t", Some(last));
    home.ok(&["daemon", "stop"]);
    // The next command starts a new daemon; the server reconnects to it
    // and goes on after the last seq it had: the same open stream gets the
    // new events, none twice.
    home.ok(&["start", "--", "echo after-restart"]);
    let mut seen = vec![];
    let mut texts = vec![];
    while !texts.iter().any(|t: &String| t.contains("after-restart")) {
        let (id, data) = sse
            .next_event()
            .unwrap_or_else(|| panic!("the stream stopped after {seen:?}"));
        assert!(
            id > last && seen.last().is_none_or(|s| id > *s),
            "{id} after {seen:?}"
        );
        seen.push(id);
        texts.push(data["lines"].to_string());
    }
    assert!(eventually(Duration::from_secs(10), || web
        .get("/api/state")
        .json()["link"]
        == "live"));
}

/// Issue #31, points 3 and 4, over raw HTTP: every Host but the two exact
/// ones is refused (a rebinding name, a trailing dot, uppercase, `[::1]`,
/// `0.0.0.0`, another port, two Host headers, an absolute-form request
/// line); a request from another origin (`http://localhost:OTHER` is the
/// same site), `null` or none cannot stop a monitor, nor read the API; a
/// session cookie of another port's server is no cookie; and no response
/// carries CORS headers.
#[test]
fn web_answers_only_its_own_origin_on_its_own_port() {
    let home = Home::new();
    let id = home
        .ok(&["start", "-d", "sleeper", "--", "sleep 600"])
        .trim()
        .to_string();
    let web = Web::start(&home, &[]);
    let other = Web::start(&home, &[]);
    let p = web.port;
    let host = web.host();
    let cookie = web.cookie();
    let mut answers = Vec::new();
    let mut ask = |method: &str, path: &str, headers: &[(&str, &str)]| {
        let r = http(p, method, path, headers);
        answers.push(r.head.clone());
        r
    };

    for bad in [
        format!("attacker.example:{p}"),
        format!("localhost.:{p}"),
        format!("127.0.0.1.:{p}"),
        format!("LOCALHOST:{p}"),
        format!("Localhost:{p}"),
        format!("[::1]:{p}"),
        format!("0.0.0.0:{p}"),
        format!("127.0.0.1:{}", other.port),
        format!("localhost:{}", p as u32 + 1),
        "localhost".into(),
        String::new(),
    ] {
        for path in ["/", "/api/state", "/api/events"] {
            let r = ask("GET", path, &[("Host", &bad), ("Cookie", &cookie)]);
            assert!([400, 403].contains(&r.status), "Host {bad:?} {path}: {r:?}");
        }
    }
    for hosts in [
        [host.as_str(), "attacker.example"],
        ["attacker.example", host.as_str()],
        [host.as_str(), host.as_str()],
    ] {
        let r = ask(
            "GET",
            "/api/state",
            &[("Host", hosts[0]), ("Host", hosts[1]), ("Cookie", &cookie)],
        );
        assert!(
            [400, 403].contains(&r.status),
            "two Host headers {hosts:?}: {r:?}"
        );
    }
    for absolute in [
        format!("http://attacker.example:{p}/api/state"),
        format!("http://{host}/api/state"),
    ] {
        let r = ask("GET", &absolute, &[("Host", &host), ("Cookie", &cookie)]);
        assert!([400, 403].contains(&r.status), "{absolute}: {r:?}");
    }

    // The stop action: only from this very origin.
    let stop = format!("/api/stop?id={id}");
    let other_origin = format!("http://localhost:{}", other.port);
    let other_ip_origin = format!("http://127.0.0.1:{}", other.port);
    let localhost_origin = format!("http://localhost:{p}");
    let upper = format!("http://LOCALHOST:{p}");
    for origin in [
        Some(other_origin.as_str()),
        Some(other_ip_origin.as_str()),
        Some("null"),
        None,
        Some(localhost_origin.as_str()), // the page is at 127.0.0.1
        Some(upper.as_str()),
    ] {
        let mut headers = vec![("Host", host.as_str()), ("Cookie", cookie.as_str())];
        if let Some(o) = origin {
            headers.push(("Origin", o));
        }
        let r = ask("POST", &stop, &headers);
        assert_eq!(r.status, 403, "Origin {origin:?}: {r:?}");
    }
    assert_eq!(home.json(&["list"])[0]["state"], "running");

    // Reading the API from another origin, or from a page of the same site.
    for path in [
        "/api/state".to_string(),
        "/api/events".to_string(),
        format!("/api/output?id={id}"),
        "/api/wake?session=t".to_string(),
        "/api/consumers".to_string(),
    ] {
        for (name, value) in [
            ("Origin", other_origin.as_str()),
            ("Origin", "null"),
            ("Sec-Fetch-Site", "same-site"),
            ("Sec-Fetch-Site", "cross-site"),
        ] {
            let r = ask(
                "GET",
                &path,
                &[("Host", &host), ("Cookie", &cookie), (name, value)],
            );
            assert_eq!(r.status, 403, "{path} with {name}: {value}: {r:?}");
        }
    }
    // The page itself, as a browser reads it (same origin: no Origin on a
    // GET, Sec-Fetch-Site same-origin).
    let own = web.origin();
    for headers in [
        vec![("Host", host.as_str()), ("Cookie", cookie.as_str())],
        vec![
            ("Host", host.as_str()),
            ("Cookie", cookie.as_str()),
            ("Sec-Fetch-Site", "same-origin"),
            ("Origin", own.as_str()),
        ],
    ] {
        let r = ask("GET", "/api/state", &headers);
        assert_eq!(r.status, 200, "{headers:?}: {r:?}");
    }

    // A cookie of the server on the other port is no cookie here, under
    // its own name or under this server's.
    let theirs = other.cookie();
    let (_, their_value) = theirs.split_once('=').unwrap();
    let renamed = format!("wakeful_web_{p}={their_value}");
    for c in [theirs.as_str(), renamed.as_str()] {
        let r = ask("GET", "/api/state", &[("Host", &host), ("Cookie", c)]);
        assert_eq!(r.status, 401, "{c}: {r:?}");
    }
    // Both, as a browser sends every cookie of 127.0.0.1: this one counts.
    let both = format!("{theirs}; {cookie}");
    let r = ask("GET", "/api/state", &[("Host", &host), ("Cookie", &both)]);
    assert_eq!(r.status, 200, "{r:?}");

    // A preflight, private network access included: no CORS answer.
    let r = ask(
        "OPTIONS",
        "/api/stop",
        &[
            ("Host", &host),
            ("Origin", &other_origin),
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Private-Network", "true"),
        ],
    );
    assert!(r.status >= 400, "{r:?}");

    // From the page's own origin, it stops.
    let r = ask(
        "POST",
        &stop,
        &[("Host", &host), ("Cookie", &cookie), ("Origin", &own)],
    );
    assert_eq!(r.status, 200, "{r:?}");
    for head in &answers {
        let lower = head.to_ascii_lowercase();
        assert!(!lower.contains("access-control-allow"), "{head}");
    }
}
