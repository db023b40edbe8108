//! Wake adapters end to end: a fake `codex` on PATH that records its
//! arguments and can answer busy, a fake OpenCode server that can be busy,
//! exec and webhook adapters, and a daemon restart in the middle of a retry.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

#[test]
fn codex_route_delivers_one_wake_per_batch_and_retries_when_busy() {
    let home = Home::new();
    let fake = home.path().join("fake");
    let codex = fake_codex(&fake);
    home.json(&[
        "wake",
        "set",
        "codex",
        "--thread",
        "thr-1",
        "--binary",
        codex.to_str().unwrap(),
    ]);
    home.ok(&[
        "start",
        "-d",
        "build",
        "--",
        "printf 'comp%s\\n' iled; echo tests passed",
    ]);
    assert!(eventually(Duration::from_secs(10), || accepted(&fake)
        .iter()
        .any(|a| message(a).contains("stopped"))));
    let all = accepted(&fake);
    let first = &all[0];
    assert_eq!(&first[..3], ["queue", "--thread", "thr-1"]);
    let text = message(first);
    assert!(text.starts_with("[wakeful wake-"), "{text}");
    assert!(text.contains("not messages from the user"), "{text}");
    // Every event went out, none twice.
    let joined: String = all.iter().map(|a| message(a).to_string()).collect();
    assert_eq!(joined.matches("compiled").count(), 1, "{joined}");
    assert_eq!(joined.matches("· stopped]").count(), 1, "{joined}");
    assert!(eventually(Duration::from_secs(5), || home
        .json(&["wake", "show"])["state"]
        == "idle"));
    let show = home.json(&["wake", "show"]);
    assert_eq!(show["route"]["adapter"], "codex");
    let last_seq = home.json_lines(&["events"]).last().unwrap()["seq"]
        .as_u64()
        .unwrap();
    assert_eq!(
        show["acked_seq"].as_u64().unwrap(),
        last_seq,
        "the wake consumer moved to the end"
    );

    // Busy twice: retried with the same wake id (after 1 s, then 2 s), then accepted.
    std::fs::write(fake.join("busy"), "2").unwrap();
    let before = calls(&fake).len();
    home.ok(&["start", "-d", "later", "--", "echo second-batch"]);
    assert!(eventually(Duration::from_secs(15), || {
        calls(&fake)[before..]
            .iter()
            .filter(|(_, refused)| !refused)
            .count()
            >= 1
    }));
    let tries = &calls(&fake)[before..];
    assert_eq!(tries.iter().filter(|(_, r)| *r).count(), 2);
    // The two refusals and the acceptance that follows carry the same wake;
    // events that came meanwhile (if any) go in the next one.
    let ids: Vec<&str> = tries
        .iter()
        .map(|(a, _)| message(a).split(']').next().unwrap())
        .collect();
    assert!(
        !tries[2].1 && ids[0] == ids[1] && ids[1] == ids[2],
        "{ids:?}"
    );
}

#[test]
fn a_monitor_started_inside_codex_routes_its_session_automatically() {
    let home = Home::new();
    let fake = home.path().join("fake");
    fake_codex(&fake);
    let path = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = home
        .cmd(&["start", "--", "echo from-codex"])
        .env("CODEX_THREAD_ID", "019a-thread")
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
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
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
    std::fs::write(fake.join("busy"), "1000").unwrap();
    home.json(&[
        "wake",
        "set",
        "codex",
        "--thread",
        "thr-r",
        "--binary",
        codex.to_str().unwrap(),
    ]);
    home.ok(&["start", "--", "echo before-restart"]);
    // Refused at least twice: the daemon is retrying.
    assert!(eventually(Duration::from_secs(10), || calls(&fake).len() >= 2));
    assert_eq!(home.json(&["wake", "show"])["state"], "retrying");
    let pid = home.daemon_pid().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(eventually(Duration::from_secs(5), || {
        wakeful_engine::process::proc_info(pid).is_none_or(|p| !p.is_live())
    }));
    // The agent is free now; a new daemon picks the route and the cursor up.
    std::fs::write(fake.join("busy"), "0").unwrap();
    home.ok(&["start", "--", "echo after-restart"]);
    assert!(
        eventually(Duration::from_secs(15), || {
            let joined: String = accepted(&fake)
                .iter()
                .map(|a| message(a).to_string())
                .collect();
            joined.contains("after-restart") && joined.matches("· stopped]").count() >= 2
        }),
        "{:?}",
        accepted(&fake)
    );
    let joined: String = accepted(&fake)
        .iter()
        .map(|a| message(a).to_string())
        .collect();
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
}
