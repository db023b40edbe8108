//! Wake adapters end to end: Codex through a fake of its app-server control
//! socket and, without it, through a fake `codex` that records its arguments
//! and can answer busy; a fake OpenCode server that can be busy, exec and
//! webhook adapters, and a daemon restart in the middle of a retry. The real
//! Codex is exercised by `codex_e2e.rs`.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/codex_app.rs"]
mod codex_app;
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codex_app::{FakeAppServer, ThreadSpec};
use common::{eventually, Home};
use serde_json::Value;

/// A fake `codex` in `dir`: each call's arguments go NUL-separated into
/// `dir/calls/<n>`; while `dir/busy` holds a number > 0 it is decremented and
/// the call exits 1 ("busy").
fn fake_codex(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("calls")).unwrap();
    let script = dir.join("codex");
    std::fs::write(
        &script,
        r#"#!/bin/sh
d=$(dirname "$0")
n=$(ls "$d/calls" | grep -c '^[0-9]*$')
printf '%s\0' "$@" > "$d/calls/$n.tmp"
busy=$(cat "$d/busy" 2>/dev/null || echo 0)
if [ "$busy" -gt 0 ]; then
  echo $((busy - 1)) > "$d/busy"
  echo "refused" > "$d/calls/$n.refused"
  mv "$d/calls/$n.tmp" "$d/calls/$n"
  echo "thread is busy" >&2
  exit 1
fi
mv "$d/calls/$n.tmp" "$d/calls/$n"
exit 0
"#,
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// The recorded calls: (args, refused).
fn calls(dir: &Path) -> Vec<(Vec<String>, bool)> {
    let mut n = 0;
    let mut out = vec![];
    while let Ok(raw) = std::fs::read(dir.join(format!("calls/{n}"))) {
        let args = raw
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        out.push((args, dir.join(format!("calls/{n}.refused")).exists()));
        n += 1;
    }
    out
}

fn message(args: &[String]) -> &str {
    let i = args.iter().position(|a| a == "--message").unwrap();
    &args[i + 1]
}

fn accepted(dir: &Path) -> Vec<Vec<String>> {
    calls(dir)
        .into_iter()
        .filter(|(_, r)| !r)
        .map(|(a, _)| a)
        .collect()
}

/// The wake id at the start of a wake's text.
fn wake_id_of(text: &str) -> &str {
    text.split(']').next().unwrap()
}

/// The texts of the turns the fake app-server ran, joined.
fn turn_texts(app: &FakeAppServer) -> String {
    app.turns().iter().map(|t| t.text.clone()).collect()
}

fn last_seq(home: &Home) -> u64 {
    home.json_lines(&["events"]).last().unwrap()["seq"]
        .as_u64()
        .unwrap()
}

#[test]
fn codex_without_its_app_server_is_queued_once_then_confirmed_when_it_comes_up() {
    let home = Home::new();
    let fake = home.path().join("fake");
    let codex = fake_codex(&fake);
    let codex_home = home.path().join("codexhome");
    std::fs::create_dir_all(&codex_home).unwrap();
    // `codex queue` refuses twice (busy), then queues.
    std::fs::write(fake.join("busy"), "2").unwrap();
    home.json(&[
        "wake",
        "set",
        "codex",
        "--thread",
        "thr-1",
        "--binary",
        codex.to_str().unwrap(),
        "--codex-home",
        codex_home.to_str().unwrap(),
    ]);
    home.ok(&[
        "start",
        "-d",
        "build",
        "--",
        "printf 'comp%s\\n' iled; echo tests passed",
    ]);
    assert!(eventually(Duration::from_secs(15), || accepted(&fake)
        .len()
        == 1));
    // Retried after 1 s and 2 s with the same wake, then queued.
    let tries = calls(&fake);
    assert_eq!(tries.len(), 3, "{tries:?}");
    assert!(tries[0].1 && tries[1].1 && !tries[2].1);
    let ids: Vec<&str> = tries.iter().map(|(a, _)| wake_id_of(message(a))).collect();
    assert!(ids[0] == ids[1] && ids[1] == ids[2], "{ids:?}");
    let first = &tries[2].0;
    assert_eq!(&first[..3], ["queue", "--thread", "thr-1"]);
    assert_eq!(first.last().map(String::as_str), Some("--resume"));
    let text = message(first);
    assert!(text.starts_with("[wakeful wake-"), "{text}");
    assert!(text.contains("not messages from the user"), "{text}");
    // Codex's app-server is not running: queued, not acknowledged.
    let show = home.json(&["wake", "show"]);
    assert_eq!(show["state"], "queued", "{show}");
    assert_eq!(show["wake_id"], ids[0].trim_start_matches("[wakeful "));
    let detail = show["detail"].as_str().unwrap();
    assert!(detail.contains("codex queue"), "{detail}");
    assert!(detail.contains("not running"), "{detail}");
    assert_eq!(show["acked_seq"], 0);
    assert!(home.ok(&["wake", "show"]).contains("state:    queued"));
    // Checks never queue it again.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(calls(&fake).len(), 3);

    // Codex comes up: resuming the thread runs the queued message, which
    // confirms the wake; the rest of the events go through the socket.
    let app = FakeAppServer::start(&codex_home, Some(&fake.join("calls")));
    app.thread("thr-1", ThreadSpec::default());
    assert!(
        eventually(Duration::from_secs(60), || {
            let show = home.json(&["wake", "show"]);
            show["state"] == "idle" && show["acked_seq"].as_u64() == Some(last_seq(&home))
        }),
        "{}",
        home.json(&["wake", "show"])
    );
    let turns = app.turns();
    assert_eq!(turns[0].text, text, "the queued message ran first");
    assert!(turns[1..]
        .iter()
        .all(|t| t.client_id.starts_with("wakeful:wake-") && t.client_id.ends_with(":t")));
    // One wake per batch; every event went out once.
    let joined = turn_texts(&app);
    assert_eq!(joined.matches("compiled").count(), 1, "{joined}");
    assert_eq!(joined.matches("· stopped]").count(), 1, "{joined}");
    assert_eq!(calls(&fake).len(), 3, "no more `codex queue`");
    let adds = app
        .requests()
        .iter()
        .filter(|(m, _)| m == "thread/queue/add")
        .count();
    assert_eq!(adds, turns.len() - 1, "the queued wake was not added again");
}

#[test]
fn codex_wakes_start_turns_on_idle_busy_and_unloaded_threads() {
    let home = Home::new();
    let codex_home = home.path().join("codexhome");
    let app = FakeAppServer::start(&codex_home, None);
    let loaded = ThreadSpec {
        loaded: true,
        ..ThreadSpec::default()
    };
    app.thread("thr-idle", loaded);
    app.thread(
        "thr-busy",
        ThreadSpec {
            busy: true,
            ..loaded
        },
    );
    app.thread("thr-unloaded", ThreadSpec::default());
    // `codex` (for when the socket is absent) is not called here.
    let codex = fake_codex(&home.path().join("fake"));
    for (session, thread) in [
        ("s-idle", "thr-idle"),
        ("s-busy", "thr-busy"),
        ("s-unloaded", "thr-unloaded"),
    ] {
        home.json(&[
            "--session",
            session,
            "wake",
            "set",
            "codex",
            "--thread",
            thread,
            "--binary",
            codex.to_str().unwrap(),
            "--codex-home",
            codex_home.to_str().unwrap(),
        ]);
        home.ok(&[
            "--session",
            session,
            "start",
            "--",
            &format!("echo ping-{session}"),
        ]);
    }
    let ran = |thread: &str, what: &str| {
        app.turns()
            .iter()
            .any(|t| t.thread == thread && t.text.contains(what))
    };
    assert!(eventually(Duration::from_secs(20), || ran(
        "thr-idle",
        "ping-s-idle"
    )));
    assert!(eventually(Duration::from_secs(20), || ran(
        "thr-unloaded",
        "ping-s-unloaded"
    )));
    // The unloaded thread was resumed before anything was queued for it.
    let requests = app.requests();
    let on = |thread: &str| -> Vec<String> {
        requests
            .iter()
            .filter(|(_, p)| p["threadId"] == thread)
            .map(|(m, _)| m.clone())
            .collect()
    };
    let unloaded = on("thr-unloaded");
    assert_eq!(
        &unloaded[..5],
        [
            "thread/read",
            "thread/resume",
            "thread/queue/list",
            "thread/turns/list",
            "thread/queue/add"
        ],
        "{unloaded:?}"
    );
    let add = requests
        .iter()
        .find(|(m, p)| m == "thread/queue/add" && p["threadId"] == "thr-idle")
        .unwrap();
    let client_id = add.1["clientUserMessageId"].as_str().unwrap();
    assert!(
        client_id.starts_with("wakeful:wake-") && client_id.ends_with(":s-idle"),
        "{client_id}"
    );
    // Busy: queued behind the running turn, delivering until it ends.
    assert!(eventually(Duration::from_secs(10), || app
        .queued("thr-busy")
        >= 1));
    std::thread::sleep(Duration::from_secs(1));
    assert!(!ran("thr-busy", "ping-s-busy"));
    let show = home.json(&["--session", "s-busy", "wake", "show"]);
    assert_eq!(show["state"], "delivering", "{show}");
    assert_eq!(show["acked_seq"], 0);
    app.free("thr-busy");
    for session in ["s-idle", "s-busy", "s-unloaded"] {
        assert!(
            eventually(Duration::from_secs(20), || {
                let show = home.json(&["--session", session, "wake", "show"]);
                show["state"] == "idle" && show["acked_seq"].as_u64().unwrap() > 0
            }),
            "{session}: {}",
            home.json(&["--session", session, "wake", "show"])
        );
    }
    assert!(ran("thr-busy", "ping-s-busy"));
}

#[test]
fn a_thread_run_by_codex_exec_is_never_queued_into() {
    use std::os::unix::process::CommandExt;
    let home = Home::new();
    let fake = home.path().join("fake");
    let codex = fake_codex(&fake);

    // With Codex's app-server: it cannot resume the thread, which an exec
    // run writes.
    let codex_home = home.path().join("codexhome");
    let app = FakeAppServer::start(&codex_home, None);
    app.thread(
        "thr-exec",
        ThreadSpec {
            exec: true,
            ..ThreadSpec::default()
        },
    );
    home.json(&[
        "--session",
        "s1",
        "wake",
        "set",
        "codex",
        "--thread",
        "thr-exec",
        "--binary",
        codex.to_str().unwrap(),
        "--codex-home",
        codex_home.to_str().unwrap(),
    ]);
    home.ok(&["--session", "s1", "start", "--", "echo for-exec"]);
    assert!(eventually(Duration::from_secs(10), || home.json(&[
        "--session",
        "s1",
        "wake",
        "show"
    ])["state"]
        == "undelivered"));
    let show = home.json(&["--session", "s1", "wake", "show"]);
    let reason = show["reason"].as_str().unwrap();
    assert!(reason.contains("is run by `codex exec`"), "{reason}");
    assert!(!app
        .requests()
        .iter()
        .any(|(m, _)| m.starts_with("thread/queue/")));

    // Without it: the exec run holds the thread's writer lock, so
    // `codex queue` is not run either.
    let other_home = home.path().join("codexhome2");
    let locks = other_home.join("thread-writer-locks");
    std::fs::create_dir_all(&locks).unwrap();
    let lock = std::ffi::CString::new(
        locks
            .join("thr-exec2.lock")
            .to_str()
            .unwrap()
            .as_bytes()
            .to_vec(),
    )
    .unwrap();
    // A process whose command line reads `codex -c … exec …` (as `codex
    // exec` runs would) holds the lock; `; :` keeps sh from exec'ing sleep.
    let mut holder = std::process::Command::new("/bin/sh");
    holder
        .arg0("codex")
        .args(["-c", "sleep 30; :", "exec", "now"])
        .process_group(0);
    // SAFETY: only async-signal-safe calls (open, flock) between fork and exec.
    unsafe {
        holder.pre_exec(move || {
            let fd = libc::open(lock.as_ptr(), libc::O_CREAT | libc::O_RDWR, 0o644);
            if fd < 0 || libc::flock(fd, libc::LOCK_EX) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut holder = holder.spawn().unwrap();
    home.json(&[
        "--session",
        "s2",
        "wake",
        "set",
        "codex",
        "--thread",
        "thr-exec2",
        "--binary",
        codex.to_str().unwrap(),
        "--codex-home",
        other_home.to_str().unwrap(),
    ]);
    home.ok(&["--session", "s2", "start", "--", "echo for-exec2"]);
    let undelivered = eventually(Duration::from_secs(10), || {
        home.json(&["--session", "s2", "wake", "show"])["state"] == "undelivered"
    });
    let show = home.json(&["--session", "s2", "wake", "show"]);
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(holder.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = holder.wait();
    assert!(undelivered, "{show}");
    let reason = show["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("is run by `codex exec` (pid {}", holder.id())),
        "{reason}"
    );
    assert!(calls(&fake).is_empty(), "{:?}", calls(&fake));
}

#[test]
fn a_monitor_started_inside_codex_routes_its_session_automatically() {
    let home = Home::new();
    let fake = home.path().join("fake");
    fake_codex(&fake);
    let codex_home = home.path().join("codexhome");
    std::fs::create_dir_all(&codex_home).unwrap();
    let path = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = home
        .cmd(&["start", "--", "echo from-codex"])
        .env("CODEX_THREAD_ID", "019a-thread")
        .env("CODEX_HOME", &codex_home)
        .env_remove("WAKEFUL_SESSION")
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(eventually(Duration::from_secs(10), || accepted(&fake)
        .iter()
        .any(|a| message(a).contains("from-codex"))));
    let first = &accepted(&fake)[0];
    assert_eq!(&first[..3], ["queue", "--thread", "019a-thread"]);
    let show = home.json(&["--session", "019a-thread", "wake", "show"]);
    assert_eq!(show["source"], "auto");
    assert_eq!(show["route"]["codex_home"], codex_home.to_str().unwrap());
}

#[test]
fn exec_adapter_substitutes_arguments_without_a_shell() {
    let home = Home::new();
    let out = home.path().join("exec-out");
    home.json(&[
        "wake",
        "set",
        "exec",
        "--",
        "/bin/sh",
        "-c",
        "printf '%s\\n' \"$1\" \"$2\" >> \"$0\"; printf '%s\\n---\\n' \"$3\" >> \"$0\"",
        out.to_str().unwrap(),
        "{session}",
        "{wake_id}",
        "{text}",
    ]);
    home.ok(&["start", "--", "echo 'hello $(touch /tmp/never)'"]);
    let mut text = String::new();
    assert!(
        eventually(Duration::from_secs(10), || {
            text = std::fs::read_to_string(&out).unwrap_or_default();
            text.contains("· stopped]")
        }),
        "{text}"
    );
    assert!(text.starts_with("t\nwake-"), "{text}");
    assert!(text.contains("hello $(touch /tmp/never)"));
    // A program that is gone when a wake comes (`wake set` refuses one that
    // is missing): undelivered at once, shown by show/status/list.
    let agent = home.path().join("agent");
    std::fs::write(&agent, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.json(&[
        "wake",
        "set",
        "exec",
        "--",
        agent.to_str().unwrap(),
        "{text}",
    ]);
    std::fs::remove_file(&agent).unwrap();
    home.ok(&["start", "--", "echo lost-for-now"]);
    assert!(eventually(Duration::from_secs(10), || home
        .json(&["wake", "show"])["state"]
        == "undelivered"));
    // Later events of the monitor may start another attempt: wait for its end.
    assert!(eventually(Duration::from_secs(10), || home
        .json(&["status"])["wakes_undelivered"]
        == 1));
    assert!(eventually(Duration::from_secs(10), || home
        .ok(&["list"])
        .contains("wake undelivered")));
    home.ok(&["wake", "clear"]);
    assert_eq!(home.json(&["wake", "show"]), Value::Null);
}

/// What the fake HTTP server saw: (method, path, body).
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

/// A tiny HTTP server: answers each request from `answer(method, path, body)`
/// and records (method, path, body).
fn http_server(
    answer: impl Fn(&str, &str, &str) -> (u16, String) + Send + Sync + 'static,
) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(vec![]));
    let seen = log.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let mut parts = line.split_whitespace();
            let (method, path) = (
                parts.next().unwrap_or("").to_string(),
                parts.next().unwrap_or("").to_string(),
            );
            let mut len = 0usize;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; len];
            let _ = reader.read_exact(&mut body);
            let body = String::from_utf8_lossy(&body).into_owned();
            let (status, reply) = answer(&method, &path, &body);
            seen.lock().unwrap().push((method, path, body));
            // A redirect's reply is where it points.
            let _ = if (300..400).contains(&status) {
                write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nlocation: {reply}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                )
            } else {
                write!(
                    stream,
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                    reply.len()
                )
            };
        }
    });
    (url, log)
}

#[test]
fn opencode_route_posts_prompts_and_retries_while_refused() {
    let home = Home::new();
    let posts = Arc::new(Mutex::new(0));
    let counter = posts.clone();
    let (url, log) = http_server(move |method, path, _| {
        if method == "GET" && path == "/session/status" {
            return (200, r#"{"ses_1":{"type":"busy"}}"#.into());
        }
        let mut n = counter.lock().unwrap();
        *n += 1;
        // The first prompt is refused (overloaded), the next accepted.
        if *n == 1 {
            (503, "overloaded".into())
        } else {
            (204, String::new())
        }
    });
    home.json(&[
        "wake",
        "set",
        "opencode",
        "--url",
        &url,
        "--opencode-session",
        "ses_1",
        "--directory",
        "/work/p q",
    ]);
    home.ok(&["start", "--", "echo opencode-ping"]);
    let prompts = || -> Vec<(String, String, String)> {
        log.lock()
            .unwrap()
            .iter()
            .filter(|(m, _, _)| m == "POST")
            .cloned()
            .collect()
    };
    assert!(
        eventually(Duration::from_secs(15), || prompts().len() >= 2),
        "{:?}",
        log.lock().unwrap()
    );
    let p = prompts();
    assert_eq!(p[0].1, "/session/ses_1/prompt_async?directory=/work/p%20q");
    let body: Value = serde_json::from_str(&p[1].2).unwrap();
    let text = body["parts"][0]["text"].as_str().unwrap();
    assert!(text.contains("opencode-ping"), "{text}");
    assert_eq!(p[0].2, p[1].2, "a retry carries the same wake");
    assert!(eventually(Duration::from_secs(5), || home
        .json(&["wake", "show"])["state"]
        == "idle"));
}

#[test]
fn webhook_route_respects_the_network_policy() {
    let home = Home::new();
    let (url, log) = http_server(|_, _, _| (200, "{}".into()));
    home.json(&["wake", "set", "webhook", "--url", &format!("{url}/hook")]);
    home.ok(&["start", "--", "echo hook-ping"]);
    // Loopback is refused by default: undelivered, nothing sent.
    assert!(eventually(Duration::from_secs(10), || home
        .json(&["wake", "show"])["state"]
        == "undelivered"));
    let reason = home.json(&["wake", "show"])["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains("loopback"), "{reason}");
    assert!(log.lock().unwrap().is_empty());
    // Once a person allows it, the next events carry the old ones too.
    std::fs::write(
        home.path().join("config.toml"),
        "[network]\nallow = [\"127.0.0.0/8\"]\n",
    )
    .unwrap();
    home.ok(&["daemon", "stop"]);
    home.ok(&["start", "--", "echo hook-pong"]);
    let texts = || -> String {
        log.lock()
            .unwrap()
            .iter()
            .map(|(_, _, b)| {
                serde_json::from_str::<Value>(b).unwrap()["text"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    assert!(
        eventually(Duration::from_secs(10), || texts().contains("hook-pong")),
        "{}",
        texts()
    );
    let (_, path, body) = log.lock().unwrap()[0].clone();
    assert_eq!(path, "/hook");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["wake_id"].as_str().unwrap().starts_with("wake-"));
    assert_eq!(v["session"], "t");
    assert!(!v["events"].as_array().unwrap().is_empty());
    // The undelivered events went out after all, each once.
    assert_eq!(texts().matches(")]\nhook-ping\n").count(), 1, "{}", texts());
}

#[test]
fn a_daemon_restart_during_a_retry_loses_nothing_and_duplicates_nothing() {
    let home = Home::new();
    let fake = home.path().join("fake");
    let codex = fake_codex(&fake);
    let codex_home = home.path().join("codexhome");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(fake.join("busy"), "1000").unwrap();
    home.json(&[
        "wake",
        "set",
        "codex",
        "--thread",
        "thr-r",
        "--binary",
        codex.to_str().unwrap(),
        "--codex-home",
        codex_home.to_str().unwrap(),
    ]);
    home.ok(&["start", "--", "echo before-restart"]);
    // Refused at least twice: the daemon is retrying.
    assert!(eventually(Duration::from_secs(10), || calls(&fake).len() >= 2));
    assert_eq!(home.json(&["wake", "show"])["state"], "retrying");
    home.kill_daemon();
    // Codex's app-server is up now; a new daemon picks the route and the
    // cursor up and goes through it.
    let app = FakeAppServer::start(&codex_home, Some(&fake.join("calls")));
    app.thread(
        "thr-r",
        ThreadSpec {
            loaded: true,
            ..ThreadSpec::default()
        },
    );
    home.ok(&["start", "--", "echo after-restart"]);
    assert!(
        eventually(Duration::from_secs(20), || {
            let joined = turn_texts(&app);
            joined.contains("after-restart") && joined.matches("· stopped]").count() >= 2
        }),
        "{:?}",
        app.turns()
    );
    let joined = turn_texts(&app);
    assert_eq!(joined.matches(")]\nbefore-restart").count(), 1, "{joined}");
    assert_eq!(joined.matches(")]\nafter-restart").count(), 1, "{joined}");
    // The monitor that ran across the crash ended with daemon_stopped or its
    // exit; either way each event was delivered exactly once.
    let seqs: Vec<&str> = joined
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let mut unique = seqs.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        seqs.len(),
        "an event went out twice: {seqs:?}"
    );
    assert!(accepted(&fake).is_empty(), "`codex queue` only refused");
}

/// Issue #31, point 5: a session id that begins with `-` never reaches an
/// exec route's program where it reads options (`wake set` and a
/// `[[wake]]` table refuse it, and nothing runs); elsewhere in an argument
/// it is only data.
#[test]
fn an_exec_route_never_hands_its_program_an_option() {
    let home = Home::new();
    let out = home.path().join("argv");
    let script = format!("printf '%s\\n' \"$@\" >> '{}'", out.display());
    let set = |session: &str, arg: &str| {
        home.cmd(&[
            "wake", "set", "exec", "--", "/bin/sh", "-c", &script, "sh", arg, "{text}",
        ])
        .env("WAKEFUL_SESSION", session)
        .output()
        .unwrap()
    };
    for session in ["--dangerously-skip-permissions", "-h"] {
        let o = set(session, "{session}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{session}: {err}");
        assert!(err.contains("begins with `-`"), "{session}: {err}");
        let show = home
            .cmd(&["--json", "wake", "show"])
            .env("WAKEFUL_SESSION", session)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&show.stdout).trim(), "null");
    }
    // The same session inside an argument, after a prefix: only data.
    let session = "--dangerously-skip-permissions";
    let o = set(session, "session={session}");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let started = home
        .cmd(&["start", "--", "echo option-free"])
        .env("WAKEFUL_SESSION", session)
        .output()
        .unwrap();
    assert!(started.status.success());
    let mut argv = String::new();
    assert!(
        eventually(Duration::from_secs(10), || {
            argv = std::fs::read_to_string(&out).unwrap_or_default();
            argv.contains("option-free")
        }),
        "{argv}"
    );
    assert!(
        argv.starts_with("session=--dangerously-skip-permissions\n[wakeful wake-"),
        "{argv}"
    );
    assert!(!argv.lines().any(|l| l.starts_with('-')), "{argv}");

    // A [[wake]] table with such a session: the daemon does not start.
    let other = Home::new();
    std::fs::write(
        other.path().join("config.toml"),
        "[[wake]]\nsession = \"-x\"\nadapter = \"exec\"\nargv = [\"true\", \"{session}\"]\n",
    )
    .unwrap();
    let (code, _, err) = other.run(&["status"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("session `-x` begins with `-`"), "{err}");
}

/// Issue #31, point 5: a webhook's redirect is never followed; one to a
/// loopback or link-local address (where cloud metadata answers) is named
/// as refused, and the address it points at gets nothing.
#[test]
fn a_webhook_redirect_is_never_followed_and_loopback_ones_are_refused() {
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[network]\nallow = [\"127.0.0.0/8\"]\n",
    )
    .unwrap();
    let (inner, inner_log) = http_server(|_, _, _| (200, "{}".into()));
    for (target, names) in [
        (format!("{inner}/steal"), "127.0.0.1"),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "169.254.169.254",
        ),
    ] {
        let to = target.clone();
        let (hook, hook_log) = http_server(move |_, _, _| (307, to.clone()));
        home.json(&["wake", "set", "webhook", "--url", &format!("{hook}/hook")]);
        home.ok(&["start", "--", "echo redirected"]);
        let mut reason = String::new();
        assert!(
            eventually(Duration::from_secs(10), || {
                let show = home.json(&["wake", "show"]);
                reason = show["reason"].as_str().unwrap_or("").to_string();
                show["state"] == "undelivered"
            }),
            "{reason}"
        );
        assert!(
            !hook_log.lock().unwrap().is_empty(),
            "the webhook was asked"
        );
        assert!(
            reason.contains(&format!("redirect to {target}"))
                && reason.contains(names)
                && reason.contains("loopback or link-local")
                && reason.contains("refused"),
            "{reason}"
        );
        home.ok(&["wake", "clear"]);
    }
    assert!(
        inner_log.lock().unwrap().is_empty(),
        "{:?}",
        inner_log.lock().unwrap()
    );
}
