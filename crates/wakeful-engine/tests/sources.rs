//! File, poll, WebSocket and terminal sources against real files, processes
//! and a WebSocket server on loopback. No fixed sleeps: every wait is on a
//! condition with one deadline.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]
// tungstenite's handshake callback must return its (large) error response type.
#![allow(clippy::result_large_err)]

use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use wakeful_core::{Event, EventBody, EventKind, MonitorSpec, MonitorStopReason, Source};
use wakeful_engine::{Launch, MonitorRegistry, NetPolicy, RegistryConfig, Subscription};

fn registry(dir: &Path, allow_loopback: bool) -> MonitorRegistry {
    let net = if allow_loopback {
        NetPolicy::new(&["127.0.0.0/8".into(), "::1/128".into()]).unwrap()
    } else {
        NetPolicy::default()
    };
    MonitorRegistry::new(RegistryConfig {
        session: "t".into(),
        output_dir: dir.join("output"),
        launch: Launch {
            net,
            grace: Duration::from_millis(500),
            ..Launch::default()
        },
        ..RegistryConfig::default()
    })
}

fn spec(source: Source, description: &str) -> MonitorSpec {
    let mut s = MonitorSpec::command("x", description);
    s.source = source;
    s
}

/// A subscription that keeps other monitors' events for later.
struct Sub {
    sub: Subscription,
    held: Vec<Event>,
}

fn subscribe(reg: &MonitorRegistry) -> Sub {
    Sub {
        sub: reg.subscribe(),
        held: vec![],
    }
}

/// Next event of `id`, within 10 s.
async fn next_of(sub: &mut Sub, id: &str) -> Event {
    if let Some(i) = sub.held.iter().position(|e| e.monitor_id == id) {
        return sub.held.remove(i);
    }
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let e = sub.sub.recv().await.expect("stream");
            if e.monitor_id == id {
                return e;
            }
            sub.held.push(e);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no event of {id} within 10 s"))
}

/// Collects lines of `id` until `want` lines arrived.
async fn lines(sub: &mut Sub, id: &str, want: usize) -> Vec<String> {
    let mut got = vec![];
    while got.len() < want {
        let e = next_of(sub, id).await;
        match e.body {
            EventBody::MonitorEvent { lines, .. } => got.extend(lines),
            EventBody::MonitorStarted => {}
            other => panic!("unexpected {other:?} after {got:?}"),
        }
    }
    got
}

async fn final_event(sub: &mut Sub, id: &str) -> Event {
    loop {
        let e = next_of(sub, id).await;
        if e.kind().is_terminal() {
            return e;
        }
    }
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_follows_rotation_truncation_and_late_creation() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), false);
    let mut sub = subscribe(&reg);
    let log = dir.path().join("app.log");
    append(&log, "old line, before the monitor\n");
    let mut s = spec(Source::File { path: log.clone() }, "app log");
    s.batch_ms = Some(0);
    let id = reg.start(s).await.unwrap().info.id;
    assert_eq!(next_of(&mut sub, &id).await.kind(), EventKind::Started);

    // From the end: the old line is not delivered, new ones are.
    append(&log, "one\n");
    assert_eq!(lines(&mut sub, &id, 1).await, ["one"]);
    // A partial line waits for its newline.
    append(&log, "tw");
    append(&log, "o\n");
    assert_eq!(lines(&mut sub, &id, 1).await, ["two"]);

    // Rotation: rename, then a new file at the path.
    let rotated = dir.path().join("app.log.1");
    append(&log, "last of old\n");
    std::fs::rename(&log, &rotated).unwrap();
    append(&rotated, "written to the renamed file\n");
    append(&log, "first of new\n");
    let got = lines(&mut sub, &id, 3).await;
    assert!(got.contains(&"last of old".to_string()), "{got:?}");
    assert_eq!(got.last().unwrap(), "first of new");

    // Truncation in place (copytruncate): the file is now shorter than what
    // was read. (Like `tail -F`, a truncation that is followed by more
    // writes than the old size before the follower looks is not seen.)
    std::fs::write(&log, "").unwrap();
    append(&log, "trunc\n");
    assert_eq!(lines(&mut sub, &id, 1).await, ["trunc"]);

    // Deletion, then late creation.
    std::fs::remove_file(&log).unwrap();
    append(&log, "reborn\n");
    assert_eq!(lines(&mut sub, &id, 1).await, ["reborn"]);

    // A file that does not exist yet when the monitor starts.
    let late = dir.path().join("late.log");
    let mut s = spec(Source::File { path: late.clone() }, "late");
    s.batch_ms = Some(0);
    let id2 = reg.start(s).await.unwrap().info.id;
    assert_eq!(next_of(&mut sub, &id2).await.kind(), EventKind::Started);
    append(&late, "hello\n");
    assert_eq!(lines(&mut sub, &id2, 1).await, ["hello"]);

    let info = reg.stop(&id).await.unwrap();
    assert_eq!(info.stop_reason, Some(MonitorStopReason::UserStopped));
    // The output file has every line the monitor read.
    let out = std::fs::read_to_string(info.output_path).unwrap();
    assert!(out.starts_with("one\ntwo\n"), "{out}");
    assert!(out.ends_with("reborn\n"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_in_a_missing_directory_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), false);
    let mut sub = subscribe(&reg);
    let id = reg
        .start(spec(
            Source::File {
                path: dir.path().join("nope/x.log"),
            },
            "missing",
        ))
        .await
        .unwrap()
        .info
        .id;
    let end = final_event(&mut sub, &id).await;
    assert_eq!(end.kind(), EventKind::Failed);
    assert!(end.text.contains("does not exist"), "{}", end.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_reports_changes_and_failure_edges_only() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), false);
    let mut sub = subscribe(&reg);
    let state = dir.path().join("state");
    std::fs::write(&state, "v1\n").unwrap();
    // Prints the state file; a state of "fail" makes it fail with stderr.
    let cmd = format!(
        "s=$(cat {0}); if [ \"$s\" = fail ]; then echo broken-because >&2; exit 3; fi; echo \"$s\"; echo run >> {0}.runs",
        state.display()
    );
    let runs = dir.path().join("state.runs");
    let mut s = spec(
        Source::Poll {
            command: cmd,
            every_ms: 1000,
        },
        "poll state",
    );
    s.timeout_ms = Some(60_000);
    let id = reg.start(s).await.unwrap().info.id;
    assert_eq!(next_of(&mut sub, &id).await.kind(), EventKind::Started);
    // The first run is reported.
    assert_eq!(lines(&mut sub, &id, 1).await, ["v1"]);
    // Unchanged runs (and a touch: mtime only) report nothing; then a change.
    let count_runs = || {
        std::fs::read_to_string(&runs)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let wait_runs = |n: usize| async move {
        tokio::time::timeout(Duration::from_secs(10), async {
            while count_runs() < n {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .unwrap()
    };
    wait_runs(2).await;
    let f = std::fs::File::options().append(true).open(&state).unwrap();
    f.set_modified(std::time::SystemTime::now()).unwrap();
    wait_runs(3).await;
    std::fs::write(&state, "v2\n").unwrap();
    assert_eq!(lines(&mut sub, &id, 1).await, ["v2"]);
    // Failure: reported once with its stderr, not again while it fails.
    std::fs::write(&state, "fail\n").unwrap();
    let failed = lines(&mut sub, &id, 2).await;
    assert!(
        failed[0].contains("poll failed with exit code 3"),
        "{failed:?}"
    );
    assert_eq!(failed[1], "[stderr] broken-because");
    // Recovery is a change again, even with the same output as before.
    std::fs::write(&state, "v2\n").unwrap();
    assert_eq!(lines(&mut sub, &id, 1).await, ["v2"]);
    let info = reg.stop(&id).await.unwrap();
    // Between the reports, several runs happened and reported nothing.
    assert!(count_runs() >= 4);
    assert_eq!(info.events, 4);
}

/// A WebSocket server on loopback that plays `script` to each client.
async fn ws_server(script: Vec<Message>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let script = script.clone();
            tokio::spawn(async move {
                // Accept the first subprotocol the client offers, if any.
                let callback = |req: &tokio_tungstenite::tungstenite::handshake::server::Request,
                                mut resp: tokio_tungstenite::tungstenite::handshake::server::Response| {
                    if let Some(p) = req.headers().get("Sec-WebSocket-Protocol") {
                        let first = p.to_str().unwrap_or("").split(',').next().unwrap_or("").trim().to_string();
                        resp.headers_mut().insert("Sec-WebSocket-Protocol", first.parse().unwrap());
                    }
                    Ok(resp)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, callback).await else {
                    return;
                };
                for m in script {
                    if ws.send(m).await.is_err() {
                        return;
                    }
                }
                // Keep the connection open until the client leaves.
                while let Some(Ok(_)) = ws.next().await {}
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_frames_close_codes_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), true);
    let mut sub = subscribe(&reg);
    let addr = ws_server(vec![
        Message::text("hello"),
        Message::text("two\nlines"),
        Message::binary(vec![0u8; 5]),
        Message::Close(Some(CloseFrame {
            code: CloseCode::Away,
            reason: "bye".into(),
        })),
    ])
    .await;
    let mut s = spec(
        Source::Ws {
            url: format!("ws://{addr}/feed"),
            protocols: vec![],
        },
        "feed",
    );
    s.batch_ms = Some(0);
    let id = reg.start(s).await.unwrap().info.id;
    let got = lines(&mut sub, &id, 4).await;
    assert_eq!(got, ["hello", "two", "lines", "[binary frame: 5 bytes]"]);
    let end = final_event(&mut sub, &id).await;
    assert!(
        matches!(
            end.body,
            EventBody::MonitorStopped {
                reason: MonitorStopReason::WsClosed { code: 1001 },
                ..
            }
        ),
        "{end:?}"
    );

    // A frame over 1 MiB ends the monitor.
    let addr = ws_server(vec![Message::text("x".repeat(1024 * 1024 + 1))]).await;
    let id = reg
        .start(spec(
            Source::Ws {
                url: format!("ws://{addr}/"),
                protocols: vec![],
            },
            "big",
        ))
        .await
        .unwrap()
        .info
        .id;
    let end = final_event(&mut sub, &id).await;
    assert!(
        matches!(
            end.body,
            EventBody::MonitorStopped {
                reason: MonitorStopReason::WsFrameTooLarge,
                ..
            }
        ),
        "{end:?}"
    );

    // A refused connection fails with the reason.
    let free = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let id = reg
        .start(spec(
            Source::Ws {
                url: format!("ws://{free}/"),
                protocols: vec![],
            },
            "nobody",
        ))
        .await
        .unwrap()
        .info
        .id;
    let end = final_event(&mut sub, &id).await;
    assert_eq!(end.kind(), EventKind::Failed);
    assert!(end.text.contains("cannot connect"), "{}", end.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_to_loopback_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let addr = ws_server(vec![Message::text("secret")]).await;
    let url = format!("ws://{addr}/");
    let strict = registry(dir.path(), false);
    let mut sub = subscribe(&strict);
    let id = strict
        .start(spec(
            Source::Ws {
                url: url.clone(),
                protocols: vec![],
            },
            "ssrf",
        ))
        .await
        .unwrap()
        .info
        .id;
    let end = final_event(&mut sub, &id).await;
    assert_eq!(end.kind(), EventKind::Failed);
    assert!(
        end.text.contains("loopback") && end.text.contains("[network] allow"),
        "{}",
        end.text
    );
    // "localhost" resolves to loopback and is refused the same way.
    let id = strict
        .start(spec(
            Source::Ws {
                url: format!("ws://localhost:{}/", addr.port()),
                protocols: vec![],
            },
            "name",
        ))
        .await
        .unwrap()
        .info
        .id;
    assert_eq!(final_event(&mut sub, &id).await.kind(), EventKind::Failed);

    let open = registry(dir.path(), true);
    let mut sub = subscribe(&open);
    let id = open
        .start(spec(
            Source::Ws {
                url,
                protocols: vec!["chat".into()],
            },
            "allowed",
        ))
        .await
        .unwrap()
        .info
        .id;
    assert_eq!(lines(&mut sub, &id, 1).await, ["secret"]);
    open.stop(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_with_two_monitors_one_stopped_then_killed() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), false);
    let mut sub = subscribe(&reg);
    let fifo_dir = dir.path().to_path_buf();
    let trigger = fifo_dir.join("trigger");
    std::fs::write(&trigger, "").unwrap();
    let term = reg
        .terminals()
        .run(
            "t",
            &format!("echo booting; tail -F {}", trigger.display()),
            None,
            None,
        )
        .await
        .unwrap();
    // Attach once the command is up, so both monitors see the same lines.
    tokio::time::timeout(Duration::from_secs(10), async {
        while !std::fs::read_to_string(&term.output_path)
            .unwrap_or_default()
            .contains("booting")
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    let mut s = spec(
        Source::Terminal {
            terminal_id: term.id.clone(),
        },
        "watch a",
    );
    s.batch_ms = Some(0);
    let a = reg.start(s.clone()).await.unwrap().info.id;
    s.description = "watch b".into();
    let b = reg.start(s.clone()).await.unwrap().info.id;
    assert_eq!(next_of(&mut sub, &a).await.kind(), EventKind::Started);
    assert_eq!(next_of(&mut sub, &b).await.kind(), EventKind::Started);
    append(&trigger, "first\n");
    assert_eq!(lines(&mut sub, &a, 1).await, ["first"]);
    assert_eq!(lines(&mut sub, &b, 1).await, ["first"]);
    // At most 4 monitors per terminal.
    let c = reg.start(s.clone()).await.unwrap().info.id;
    let d = reg.start(s.clone()).await.unwrap().info.id;
    // Attached once started (attaching happens before the `started` event).
    assert_eq!(next_of(&mut sub, &c).await.kind(), EventKind::Started);
    assert_eq!(next_of(&mut sub, &d).await.kind(), EventKind::Started);
    let e = reg.start(s.clone()).await.unwrap().info.id;
    let refused = final_event(&mut sub, &e).await;
    assert_eq!(refused.kind(), EventKind::Failed);
    assert!(refused.text.contains("4 monitors"), "{}", refused.text);
    reg.stop(&c).await.unwrap();
    reg.stop(&d).await.unwrap();
    // Stopping a monitor leaves the command running.
    reg.stop(&a).await.unwrap();
    append(&trigger, "second\n");
    assert_eq!(lines(&mut sub, &b, 1).await, ["second"]);
    assert_eq!(
        reg.terminals().get(&term.id).unwrap().state,
        wakeful_core::MonitorState::Running
    );
    // Killing the command ends the remaining monitor with its status.
    let killed = reg.terminals().kill(&term.id).await.unwrap();
    assert_eq!(killed.exit, Some(MonitorStopReason::Signal { signal: 15 }));
    let end = final_event(&mut sub, &b).await;
    assert!(
        matches!(
            end.body,
            EventBody::MonitorStopped {
                reason: MonitorStopReason::Signal { signal: 15 },
                ..
            }
        ),
        "{end:?}"
    );
    assert!(wakeful_engine::process::live_of_monitor(&term.id).is_empty());
    let out = std::fs::read_to_string(killed.output_path).unwrap();
    assert_eq!(out, "booting\nfirst\nsecond\n");
}
