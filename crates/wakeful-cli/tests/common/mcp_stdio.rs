//! `wakeful mcp` spoken to over raw stdio, one JSON-RPC frame a line, for
//! the tests that need frames no SDK sends (probes, malformed requests,
//! extension methods) or that watch every frame. Included with
//! `#[path = "common/mcp_stdio.rs"] mod mcp_stdio;` beside `mod common;`.
// Each test binary that includes this uses a part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A running `wakeful mcp`; killed on drop.
pub struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    /// How long one frame the test waits for may take.
    deadline: Duration,
    /// Every frame read so far, in order.
    pub seen: Vec<Value>,
}

impl Raw {
    /// Runs `cmd` (a `wakeful mcp …` with its environment; its stderr as
    /// the caller set it) with piped stdin and stdout. Each frame the test
    /// waits for must come within `deadline`.
    pub fn spawn(cmd: &mut Command, deadline: Duration) -> Raw {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn wakeful mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not a JSON-RPC frame ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Raw {
            child,
            stdin,
            lines,
            deadline,
            seen: Vec::new(),
        }
    }

    /// [`Raw::spawn`], then `initialize` (2025-06-18) and
    /// `notifications/initialized`; the `initialize` response too.
    pub fn initialized(cmd: &mut Command, deadline: Duration) -> (Raw, Value) {
        let mut mcp = Raw::spawn(cmd, deadline);
        let init = mcp.request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}),
        );
        mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        (mcp, init)
    }

    /// Writes one frame.
    pub fn send(&mut self, frame: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{frame}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next frame that `pick` accepts, read within one deadline; every
    /// frame read is kept in `seen`.
    pub fn next_where(&mut self, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + self.deadline;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {what}: {:#?}", self.seen));
            self.seen.push(frame.clone());
            if pick(&frame) {
                return frame;
            }
        }
    }

    /// Reads every frame that comes within `period` (to see that something
    /// does not come); they are kept in `seen`.
    pub fn read_for(&mut self, period: Duration) {
        let until = Instant::now() + period;
        while let Ok(frame) = self
            .lines
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            self.seen.push(frame);
        }
    }

    /// The response to request `id`.
    pub fn response(&mut self, id: u64) -> Value {
        self.next_where(&format!("response to request {id}"), |f| {
            f["id"] == json!(id)
        })
    }

    /// The first notification `method` (seen before, or read now).
    pub fn notification(&mut self, method: &str) -> Value {
        if let Some(f) = self.seen.iter().find(|f| f["method"] == method) {
            return f.clone();
        }
        self.next_where(method, |f| f["method"] == method)
    }

    /// Sends request `id` and returns its response.
    pub fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.response(id)
    }

    /// Closes stdin; the exit status and stderr (when piped) of `wakeful
    /// mcp`.
    pub fn close(&mut self) -> (ExitStatus, String) {
        drop(self.stdin.take());
        let mut status = None;
        assert!(
            crate::common::eventually(self.deadline, || {
                status = self.child.try_wait().unwrap();
                status.is_some()
            }),
            "wakeful mcp did not exit"
        );
        let status = status.unwrap();
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            std::io::Read::read_to_string(&mut pipe, &mut stderr).unwrap();
        }
        (status, stderr)
    }

    /// The process, to signal or wait for.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
