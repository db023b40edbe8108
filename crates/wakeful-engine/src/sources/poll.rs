//! The poll source: an edge-triggered watcher.
//!
//! The command runs every `every_ms` (measured from the end of one run to the
//! start of the next), each run in a process group of its own. Its stdout is
//! compared with the previous successful run's; only a difference (the first
//! run counts as one) becomes an event, with the whole new output. A failing
//! run (non-zero exit) is reported once per change from success to failure,
//! with its exit code and the tail of its stderr; the next successful run is
//! reported as a change. Content is compared, never timestamps, so an mtime
//! change alone triggers nothing. Only what is reported goes to the output
//! file.

use std::collections::VecDeque;
use std::time::Duration;

use wakeful_core::machine::SourceEnd;
use wakeful_core::{MonitorSpec, Stream};

use crate::process::driver::{ProcEvent, ProcessDriver};
use crate::source::{Input, InputSource, Launch};
use crate::sources::command::spawn_request;

/// Most stdout bytes kept from one run (more is cut, and says so).
const MAX_OUTPUT: usize = 1024 * 1024;
/// Stderr lines reported with a failure.
const STDERR_TAIL: usize = 20;

/// A poll source; see the module docs.
pub(crate) struct Poller {
    spec: MonitorSpec,
    command: String,
    every: Duration,
    launch: Launch,
    id: String,
    session: String,
    next_run: tokio::time::Instant,
    last_output: Option<Vec<u8>>,
    failing: bool,
    pending: VecDeque<Report>,
    /// The report handed out last.
    current: Vec<u8>,
}

/// What a run gives the monitor: its output (or a failure report), then
/// the end of that record.
enum Report {
    Chunk(Vec<u8>),
    Flush,
}

struct Run {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl Poller {
    /// A poller whose first run is now.
    pub(crate) fn new(
        spec: MonitorSpec,
        command: String,
        every: Duration,
        launch: Launch,
        id: String,
        session: String,
    ) -> Self {
        Poller {
            spec,
            command,
            every,
            launch,
            id,
            session,
            next_run: tokio::time::Instant::now(),
            last_output: None,
            failing: false,
            pending: VecDeque::new(),
            current: Vec::new(),
        }
    }

    /// One run. Dropping this future (a stop) kills the run's group.
    async fn run_once(&self) -> std::io::Result<Run> {
        let mut req = spawn_request(
            &self.spec,
            &self.command,
            &self.launch,
            &self.id,
            &self.session,
        );
        req.wide_stdout = false;
        let mut proc = ProcessDriver::spawn(req)?;
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        while let Some(ev) = proc.next().await {
            if let ProcEvent::Data(stream, n) = ev {
                let bytes = proc.data(stream, n);
                let (buf, max) = match stream {
                    Stream::Stdout => (&mut stdout, MAX_OUTPUT + 1),
                    Stream::Stderr => (&mut stderr, MAX_OUTPUT),
                };
                let room = max.saturating_sub(buf.len());
                buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
        }
        // Whatever the run left behind goes with it.
        let ended = proc.finish().await;
        if stdout.len() > MAX_OUTPUT {
            stdout.truncate(MAX_OUTPUT);
            stdout.extend_from_slice(b"\n[output cut at 1 MiB]\n");
        }
        let code = match ended.end {
            SourceEnd::Exited(c) => Some(c),
            _ => None,
        };
        Ok(Run {
            code,
            stdout,
            stderr,
        })
    }

    fn failure_report(&self, run: &Run) -> Vec<u8> {
        let how = match run.code {
            Some(c) => format!("exit code {c}"),
            None => "a signal".to_string(),
        };
        let mut text = format!("[poll failed with {how}: {}]\n", self.command);
        let stderr = String::from_utf8_lossy(&run.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        for l in &lines[lines.len().saturating_sub(STDERR_TAIL)..] {
            text.push_str("[stderr] ");
            text.push_str(l);
            text.push('\n');
        }
        text.into_bytes()
    }
}

impl InputSource for Poller {
    async fn next(&mut self) -> Input<'_> {
        loop {
            match self.pending.pop_front() {
                Some(Report::Chunk(bytes)) => {
                    self.current = bytes;
                    return Input::Chunk(Stream::Stdout, &self.current);
                }
                Some(Report::Flush) => return Input::Flush(Stream::Stdout),
                None => {}
            }
            tokio::time::sleep_until(self.next_run).await;
            let run = self.run_once().await;
            self.next_run = tokio::time::Instant::now() + self.every;
            let run = match run {
                Ok(r) => r,
                Err(e) => {
                    return Input::End(
                        wakeful_core::machine::SourceEnd::Failed(format!(
                            "could not run the poll command: {e}"
                        ))
                        .into(),
                    )
                }
            };
            if run.code == Some(0) {
                let changed = self.failing || self.last_output.as_deref() != Some(&run.stdout[..]);
                self.failing = false;
                if changed {
                    if !run.stdout.is_empty() {
                        self.pending.push_back(Report::Chunk(run.stdout.clone()));
                    } else {
                        self.pending
                            .push_back(Report::Chunk(b"[poll output is now empty]\n".to_vec()));
                    }
                    self.pending.push_back(Report::Flush);
                }
                self.last_output = Some(run.stdout);
            } else if !self.failing {
                self.failing = true;
                let report = self.failure_report(&run);
                self.pending.push_back(Report::Chunk(report));
                self.pending.push_back(Report::Flush);
            }
        }
    }
}
