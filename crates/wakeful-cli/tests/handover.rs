//! `wakeful events` hands its stdout to the daemon when it is a pipe or a
//! stream socket: the daemon writes every event to the reader itself. These
//! tests prove it with the real binary: the events keep coming while the
//! CLI process is stopped (SIGSTOP), the daemon holds the descriptor
//! non-blocking and close-on-exec, lets go of it when the CLI dies, and the
//! output is the same as the CLI's own on a file.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::Home;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const LIMIT: Duration = Duration::from_secs(20);

/// A home with one file monitor (`--batch-ms 0`); returns the file.
fn file_monitor(home: &Home) -> std::fs::File {
    let log = home.path().join("app.log");
    std::fs::write(&log, "").unwrap();
    let args = ["--file", log.to_str().unwrap(), "--batch-ms", "0"];
    home.json(&[&["start", "-d", "handed over"], &args[..]].concat());
    std::fs::OpenOptions::new().append(true).open(&log).unwrap()
}

/// Lines read from `from` by a thread, as they come.
fn lines_of(from: impl Read + Send + 'static) -> mpsc::Receiver<Option<String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            if tx.send(Some(line.unwrap())).is_err() {
                return;
            }
        }
        let _ = tx.send(None);
    });
    rx
}

/// Reads lines until one contains `text` (`None` at end of file), within
/// the deadline.
fn until(rx: &mpsc::Receiver<Option<String>>, text: &str, deadline: Instant) -> Option<String> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Some(l)) if l.contains(text) => return Some(l),
            Ok(Some(_)) => {}
            Ok(None) => return None,
            Err(e) => panic!("no line with {text:?} in time: {e}"),
        }
    }
}

/// Device and inode of an open pipe or socket.
type Object = (u64, u64);

fn object_of(fd: &impl AsRawFd) -> Object {
    let st = nix::sys::stat::fstat(fd.as_raw_fd()).unwrap();
    (st.st_dev, st.st_ino)
}

/// The daemon's descriptors for `object` (the CLI's stdout: a pipe, whose
/// two ends are one inode, or the CLI's end of a socket pair), with their
/// `fdinfo` flags.
fn daemon_fds_of(daemon: i32, object: Object) -> Vec<u32> {
    let mut flags = Vec::new();
    // `metadata` follows the link to the object itself; fdinfo has the
    // flags of the daemon's own description. The daemon opens and closes
    // descriptors meanwhile: one that is gone by the time it is looked at
    // is not held.
    for entry in std::fs::read_dir(format!("/proc/{daemon}/fd")).unwrap() {
        let Ok(entry) = entry else {
            continue;
        };
        let Ok(meta) = std::fs::metadata(entry.path()) else {
            continue;
        };
        if (meta.dev(), meta.ino()) != object {
            continue;
        }
        let fdinfo = format!(
            "/proc/{daemon}/fdinfo/{}",
            entry.file_name().to_string_lossy()
        );
        let Ok(info) = std::fs::read_to_string(fdinfo) else {
            continue;
        };
        let line = info.lines().find(|l| l.starts_with("flags:")).unwrap();
        flags.push(u32::from_str_radix(line["flags:".len()..].trim(), 8).unwrap());
    }
    flags
}

fn signal(child: &Child, s: Signal) {
    kill(Pid::from_raw(child.id() as i32), s).unwrap();
}

/// Kills a child that a failing test may leave stopped (SIGSTOP), which
/// would otherwise hold the test's output open forever; disarmed once the
/// test has reaped it.
struct Reaper(Option<i32>);

impl Reaper {
    fn of(child: &Child) -> Self {
        Reaper(Some(child.id() as i32))
    }

    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// One reader kind: what the CLI's stdout is, and our end of it.
fn follow_into(home: &Home, socket: bool) -> (Child, Box<dyn Read + Send>, Object) {
    follow_into_cmd(home.cmd(&["--json", "events", "--follow"]), socket)
}

fn follow_into_cmd(mut cmd: Command, socket: bool) -> (Child, Box<dyn Read + Send>, Object) {
    if socket {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let object = object_of(&theirs);
        let child = cmd
            .stdout(Stdio::from(OwnedFd::from(theirs)))
            .spawn()
            .unwrap();
        (child, Box::new(ours), object)
    } else {
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let object = object_of(&out);
        (child, Box::new(out), object)
    }
}

fn the_daemon_writes_to_the_reader_itself(socket: bool) {
    let home = Home::new();
    let mut file = file_monitor(&home);
    let daemon = home.daemon_pid().unwrap();
    let (mut cli, out, object) = follow_into(&home, socket);
    let mut reaper = Reaper::of(&cli);
    let rx = lines_of(out);
    let deadline = Instant::now() + LIMIT;
    until(&rx, "\"started\"", deadline).expect("the started event");

    // The daemon holds the reader's pipe or socket: non-blocking, and
    // close-on-exec (no monitor's command inherits it).
    let flags = daemon_fds_of(daemon, object);
    assert_eq!(flags.len(), 1, "the daemon holds it once: {flags:?}");
    if !socket {
        assert_ne!(flags[0] & libc::O_NONBLOCK as u32, 0, "{:o}", flags[0]);
    }
    assert_ne!(flags[0] & libc::O_CLOEXEC as u32, 0, "{:o}", flags[0]);

    // With the CLI stopped, lines still reach the reader: nobody but the
    // daemon writes them.
    signal(&cli, Signal::SIGSTOP);
    for i in 0..3 {
        writeln!(file, "while-stopped-{i}").unwrap();
        let line = until(&rx, &format!("while-stopped-{i}"), deadline).expect("a line");
        let event: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(event["kind"], "lines", "{line}");
    }
    signal(&cli, Signal::SIGCONT);

    // The CLI killed: the daemon sees its connection close and lets go of
    // the descriptor — the reader gets its end of file.
    cli.kill().unwrap();
    cli.wait().unwrap();
    reaper.disarm();
    assert_eq!(until(&rx, "never", deadline), None, "end of file");
    assert!(
        common::eventually(LIMIT, || daemon_fds_of(daemon, object).is_empty()),
        "the daemon still holds the reader's descriptor"
    );
}

#[test]
fn the_daemon_writes_events_to_a_pipe_itself_and_lets_go_of_it() {
    the_daemon_writes_to_the_reader_itself(false);
}

#[test]
fn the_daemon_writes_events_to_a_stream_socket_itself_and_lets_go_of_it() {
    the_daemon_writes_to_the_reader_itself(true);
}

/// The reader goes away after the first line, and nothing more happens:
/// `events --follow` ends at once, quietly, with 141 (the relay could only
/// notice at its next write, at the next event).
fn a_reader_gone_ends_events_at_once(socket: bool) {
    let home = Home::new();
    let _file = file_monitor(&home);
    let mut cmd = home.cmd(&["--json", "events", "--follow"]);
    cmd.stderr(Stdio::piped());
    let (mut cli, out, _) = follow_into_cmd(cmd, socket);
    let mut out = BufReader::new(out);
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.contains("\"started\""), "{first}");
    drop(out);
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(s) = cli.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "events did not end (socket: {socket})"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(141));
    let mut err = String::new();
    cli.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(err, "", "a closed stdout ends quietly");
}

#[test]
fn a_reader_that_closed_the_pipe_ends_events_at_once_with_141() {
    a_reader_gone_ends_events_at_once(false);
}

#[test]
fn a_reader_that_closed_the_socket_ends_events_at_once_with_141() {
    a_reader_gone_ends_events_at_once(true);
}

#[test]
fn a_pipe_a_socket_and_a_file_get_the_same_lines() {
    let home = Home::new();
    let mut file = file_monitor(&home);
    // One write: read at once, one event (50 writes could meet the rate
    // limit one by one and see the last lines only counted).
    let lines: String = (0..50)
        .map(|i| format!("line {i} with \u{1b}[31mcolour\u{1b}[0m and ünïcode\n"))
        .collect();
    file.write_all(lines.as_bytes()).unwrap();
    assert!(common::eventually(LIMIT, || {
        home.ok(&["events"]).contains("line 49 ")
    }));
    for json in [false, true] {
        let args: &[&str] = if json {
            &["--json", "events"]
        } else {
            &["events"]
        };
        // A file: the CLI writes it itself.
        let path = home.path().join(format!("out-{json}"));
        let status = home
            .cmd(args)
            .stdout(std::fs::File::create(&path).unwrap())
            .status()
            .unwrap();
        assert!(status.success());
        let by_cli = std::fs::read_to_string(&path).unwrap();
        assert!(by_cli.contains("line 49 "), "{by_cli}");
        // A pipe: the daemon writes it.
        let by_pipe = home.cmd(args).output().unwrap();
        assert!(by_pipe.status.success());
        assert_eq!(String::from_utf8(by_pipe.stdout).unwrap(), by_cli);
        // A stream socket: the daemon writes it.
        let (mut ours, theirs) = UnixStream::pair().unwrap();
        let mut child = home
            .cmd(args)
            .stdout(Stdio::from(OwnedFd::from(theirs)))
            .spawn()
            .unwrap();
        assert!(child.wait().unwrap().success());
        let mut by_socket = String::new();
        ours.read_to_string(&mut by_socket).unwrap();
        assert_eq!(by_socket, by_cli);
    }
}

#[test]
fn a_client_killed_while_its_reader_does_not_read_lets_the_daemon_go() {
    let home = Home::new();
    let mut file = file_monitor(&home);
    // One write, so that it is read at once and becomes one event of 12 KiB
    // (40 writes could meet the rate limit one by one).
    let long = "x".repeat(300);
    let lines: String = (0..40).map(|i| format!("{i} {long}\n")).collect();
    file.write_all(lines.as_bytes()).unwrap();
    assert!(common::eventually(LIMIT, || home
        .ok(&["events"])
        .contains(&format!("39 {long}"))));
    let daemon = home.daemon_pid().unwrap();
    // A pipe of one page that nobody reads: the daemon fills it and waits
    // for room, with more than 12 KiB of events still to write.
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    nix::fcntl::fcntl(read.as_raw_fd(), nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096)).unwrap();
    let object = object_of(&read);
    for follow in [false, true] {
        let args: &[&str] = if follow {
            &["--json", "events", "--follow"]
        } else {
            &["--json", "events"]
        };
        let mut cli = home
            .cmd(args)
            .stdout(Stdio::from(write.try_clone().unwrap()))
            .spawn()
            .unwrap();
        assert!(
            common::eventually(LIMIT, || !daemon_fds_of(daemon, object).is_empty()),
            "the daemon did not take the pipe"
        );
        cli.kill().unwrap();
        cli.wait().unwrap();
        assert!(
            common::eventually(LIMIT, || daemon_fds_of(daemon, object).is_empty()),
            "the daemon still waits to write to a pipe for a client that is gone (follow: {follow})"
        );
    }
    drop(read);
}

#[test]
fn watch_hands_its_stdout_over_and_still_exits_with_the_commands_code() {
    let home = Home::new();
    let fifo = home.path().join("feed");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let command = format!("cat {}; exit 3", fifo.display());
    let (mut cli, out, _) = follow_into_cmd(
        home.cmd(&[
            "watch",
            "--batch-ms",
            "0",
            "-d",
            "handed watch",
            "--",
            &command,
        ]),
        false,
    );
    let mut reaper = Reaper::of(&cli);
    let rx = lines_of(out);
    let deadline = Instant::now() + LIMIT;
    let mut feed = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    writeln!(feed, "first line").unwrap();
    assert_eq!(
        until(&rx, "first line", deadline).as_deref(),
        Some("first line")
    );
    // `watch` stopped: the daemon still writes the monitor's lines.
    signal(&cli, Signal::SIGSTOP);
    writeln!(feed, "while watch is stopped").unwrap();
    assert_eq!(
        until(&rx, "while watch is stopped", deadline).as_deref(),
        Some("while watch is stopped")
    );
    signal(&cli, Signal::SIGCONT);
    drop(feed);
    let end = until(&rx, "exited with code 3", deadline).expect("the end");
    assert!(end.starts_with("[wakeful] "), "{end}");
    assert_eq!(until(&rx, "never", deadline), None, "end of file");
    assert_eq!(cli.wait().unwrap().code(), Some(3));
    reaper.disarm();
}

/// Starts a command monitor that prints `n` lines of about 200 bytes, one
/// write each.
fn printing_monitor(home: &Home, name: &str, n: usize) {
    let pad = "p".repeat(200);
    let command = format!("for i in $(seq {n}); do echo {name}-$i-{pad}; done");
    home.json(&["start", "-d", name, "--batch-ms", "0", "--", &command]);
}

/// How many monitors of the home have ended, by their final events.
fn ended(home: &Home) -> usize {
    home.json_lines(&["events"])
        .iter()
        .filter(|e| e["kind"] == "stopped")
        .count()
}

#[test]
fn a_pipe_that_fills_and_drains_gets_every_event_once_in_the_logs_order() {
    let home = Home::new();
    // A small pipe, not read at first: the daemon fills it, then waits for
    // room while more events come; read again, it catches up, and later
    // events are written to it as they are committed.
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    nix::fcntl::fcntl(read.as_raw_fd(), nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096)).unwrap();
    let mut cli = home
        .cmd(&["--json", "events", "--follow"])
        .stdout(Stdio::from(write))
        .spawn()
        .unwrap();
    let mut reaper = Reaper::of(&cli);
    for i in 0..6 {
        printing_monitor(&home, &format!("before-{i}"), 15);
    }
    assert!(
        common::eventually(LIMIT, || ended(&home) == 6),
        "the first monitors did not end"
    );
    let rx = lines_of(std::fs::File::from(read));
    let deadline = Instant::now() + LIMIT;
    let mut got = Vec::new();
    let mut stopped = 0;
    let mut take = |until_stopped: usize, got: &mut Vec<String>| {
        while stopped < until_stopped {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .expect("the next event")
                .expect("no end yet");
            let event: serde_json::Value = serde_json::from_str(&line).unwrap();
            if event["kind"] == "stopped" {
                stopped += 1;
            }
            got.push(line);
        }
    };
    take(6, &mut got);
    // Caught up: these go to the pipe as the reader reads.
    for i in 0..6 {
        printing_monitor(&home, &format!("after-{i}"), 15);
    }
    take(12, &mut got);
    cli.kill().unwrap();
    cli.wait().unwrap();
    reaper.disarm();
    // Exactly the log: every event once, in its order, the same bytes.
    let logged: Vec<String> = home
        .ok(&["--json", "events"])
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(got.len(), logged.len());
    for (i, (g, l)) in got.iter().zip(&logged).enumerate() {
        assert_eq!(g, l, "event {i} differs");
    }
}
