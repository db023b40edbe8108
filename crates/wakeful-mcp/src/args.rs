//! The arguments of each tool, with the snake_case names of docs/CONTRACT.md §3.
//!
//! Every struct rejects unknown fields (a misspelt parameter never silently
//! keeps its default) and documents its fields; the documentation becomes the
//! tool's JSON schema ([`crate::tools`]). Checks that need more than types
//! happen in [`MonitorStartArgs::to_spec`] and friends, before anything
//! reaches the daemon.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;
use wakeful_core::pid::PidError;
use wakeful_core::timer::TimerError;
use wakeful_core::{MonitorSpec, ParamError, Source, StderrMode, Until};

/// Default `monitor_wait` timeout: 50 s, under the 60 s tool-call timeout
/// some MCP clients (Codex) apply by default, and under the 120 s after
/// which Claude Code moves a running tool call to the background.
pub const DEFAULT_WAIT_TIMEOUT_MS: u64 = 50_000;
/// Largest `monitor_wait` timeout: 10 minutes.
pub const MAX_WAIT_TIMEOUT_MS: u64 = 600_000;
/// Default number of events `monitor_events` returns.
pub const DEFAULT_EVENTS_LIMIT: u64 = 100;
/// Largest `limit` of `monitor_events`.
pub const MAX_EVENTS_LIMIT: u64 = 1_000;

/// Why a tool's arguments were refused, before anything reached the
/// daemon. The message names the parameter, what was wrong and what is
/// accepted; the client gets it as the tool's error.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// `every_ms` without `command`.
    #[error("every_ms goes with command: the command to run every every_ms milliseconds")]
    EveryMsWithoutCommand,
    /// `protocols` without `ws`.
    #[error("protocols goes with ws")]
    ProtocolsWithoutWs,
    /// No source at all.
    #[error("give exactly one source: command (the shell command to watch, e.g. \"npm run dev\"), ws, file, terminal, a timer (in, at or cron), or a process (pid)")]
    NoSource,
    /// More than one source; the names of those given, joined by `and`.
    #[error("give exactly one source; got {0}")]
    TwoSources(String),
    /// The timer fields (`in`, `at`, `cron`, `say`) were refused.
    #[error(transparent)]
    Timer(#[from] TimerError),
    /// `pid` is no process number.
    #[error(transparent)]
    Pid(#[from] PidError),
    /// Neither `description` nor `say`.
    #[error("description is required: 1–200 characters saying what the monitor watches, e.g. \"test failures\"")]
    NoDescription,
    /// A parameter the monitor spec refused (`until`, `stderr`, `wake_on`,
    /// limits, regular expressions).
    #[error(transparent)]
    Spec(#[from] ParamError),
    /// `monitor_stop` without `id`.
    #[error("id is required: the monitor id (mon-…) from monitor_start or monitor_list")]
    NoId,
    /// `monitor_events`' `limit` out of range.
    #[error("limit must be between 1 and {MAX_EVENTS_LIMIT} (got {0})")]
    Limit(u64),
    /// `monitor_wait`'s `timeout_ms` out of range.
    #[error("timeout_ms must be between 0 and {MAX_WAIT_TIMEOUT_MS} (got {0}); call monitor_wait again to keep waiting")]
    WaitTimeout(u64),
    /// `terminal_run` without `command`.
    #[error("command is required: the long-running command to start, e.g. \"make release-check\"")]
    NoCommand,
}

/// Arguments of `monitor_start` (docs/CONTRACT.md §3). The source is one of several
/// alternative fields (`command`, `command` with `every_ms`, `ws`, `file`,
/// `terminal`), and exactly one must be given.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MonitorStartArgs {
    /// Source (one of command, ws, file, terminal): the shell command to watch, run with `sh -c` in its own process group, e.g. `cargo test 2>&1` or `tail -F logs/app.log`. Each stdout line is a candidate event. Put line selection in `filter`, not in a `| grep` pipeline.
    pub command: Option<String>,
    /// With `command`: run it every this many milliseconds (at least 1000) and emit its output only when it differs from the previous run's (an edge-triggered poll; a failing run is reported once per change). Use it for status checks instead of polling yourself.
    #[schemars(range(min = 1000))]
    pub every_ms: Option<u64>,
    /// Source (one of command, ws, file, terminal): a ws:// or wss:// URL; each text frame is a line. Private and loopback addresses are refused unless the user allowed them in config.toml.
    pub ws: Option<String>,
    /// With `ws`: WebSocket subprotocols to offer.
    pub protocols: Option<Vec<String>>,
    /// Source (one of command, ws, file, terminal): a file to follow like `tail -F` (from its end, across rotation and truncation), without a shell pipeline.
    pub file: Option<String>,
    /// Source (one of command, ws, file, terminal): the id of a terminal started with terminal_run (term-…); stopping the monitor leaves the command running.
    pub terminal: Option<String>,
    /// What the monitor watches, shown with every event (1–200 characters), e.g. "api server errors".
    pub description: Option<String>,
    /// Stop the monitor after this many milliseconds. Default 300000 (5 min); 1000–3600000. Out of range is an error. Leave it out with `persistent`.
    #[schemars(range(min = 1000, max = 3600000))]
    pub timeout_ms: Option<u64>,
    /// No timeout; the monitor is restarted (a `rearmed` event) when the wakeful daemon restarts. Default false.
    pub persistent: Option<bool>,
    /// Stop when the command printed nothing for this many milliseconds (at least 1000). Default: never.
    #[schemars(range(min = 1000))]
    pub idle_timeout_ms: Option<u64>,
    /// Stop after this many `lines` events (1–1000000). Default: no limit.
    #[schemars(range(min = 1, max = 1000000))]
    pub max_events: Option<u64>,
    /// Regular expression (Rust syntax); only matching lines become events, all lines still reach the output file. Match failures as well as success, e.g. "ready|listening|error|FAIL|panic|Traceback".
    pub filter: Option<String>,
    /// `exit`: no line events, one `stopped` event at the end with the exit status and the last 20 lines · `match:<regex>`: stop after the first matching line (it is delivered) · `after:<ms>`: stop after that long with the last 20 lines.
    pub until: Option<String>,
    /// Idempotency key (1–200 bytes). Starting with a key that an active monitor of this session holds returns that monitor (`already_running: true`) and starts nothing; use it to re-arm.
    pub key: Option<String>,
    /// `file` (default): stderr lines go only to the output file, prefixed `[stderr] ` · `events`: they also become events.
    #[schemars(extend("enum" = ["file", "events"]))]
    pub stderr: Option<String>,
    /// Lines arriving within this many milliseconds after the first one form one event. Default 200; 0–5000.
    #[schemars(range(max = 5000))]
    pub batch_ms: Option<u64>,
    /// Working directory of the command. Default: the directory the MCP server was started in.
    pub cwd: Option<String>,
    /// Extra environment variables for the command, e.g. {"RUST_LOG": "debug"}, on top of the MCP server's environment.
    pub env: Option<BTreeMap<String, String>>,
    /// Which events wake you: `any` (default), `exit` (only the final event), `fail` (only failures: non-zero exit, signal, timeout, `failed`, `silent`) or `match:<regex>` (matching lines, and failures). Every event is still recorded and readable; the others come with the next one that wakes. Use `fail` for a long build you only need to hear about when it breaks.
    pub wake_on: Option<String>,
    /// After this many milliseconds without output (at least 1000), one `silent` event (the monitor keeps running); `resumed` when output comes again. Use it to hear about a watch that went quiet.
    #[schemars(range(min = 1000))]
    pub expect_within_ms: Option<u64>,
    /// Source (a timer, instead of command, ws, file, terminal): one event after this long, e.g. "20m", "90s", "1h30m" (units ms, s, m, h, d; at most 366 days). Use it instead of ScheduleWakeup or a `sleep` command: the deadline survives a daemon restart, and a timer that fell due while no daemon ran fires at the next start, saying how late.
    pub r#in: Option<String>,
    /// Source (a timer): one event at this time: `HH:MM[:SS]` today or `YYYY-MM-DD HH:MM[:SS]` in local time, or RFC 3339 ("2026-12-06T15:00:00Z"). A time in the past is an error.
    pub at: Option<String>,
    /// Source (a recurring timer): an event at every occurrence of this cron expression (five fields, local time, e.g. "0 9 * * MON-FRI"), until monitor_stop.
    pub cron: Option<String>,
    /// With in, at, cron or pid: what the event says. Default: the description.
    pub say: Option<String>,
    /// Source (a process, instead of command, ws, file, terminal or a timer): the pid of a running process that wakeful did not start (a build in another terminal, a deploy script, a server). One event when it exits, with its exit status when the system can tell (else "status unknown"), then the monitor ends. Use it instead of polling `ps` or `kill -0`. Survives a daemon restart; a pid given to another process meanwhile is never taken for the one watched. Pid 1, the wakeful daemon's own pid, and a pid no process has are errors.
    #[schemars(range(min = 2, max = 2147483647))]
    pub pid: Option<i64>,
    /// Start it and wait for this session's next event that wakes (with `until: "exit"` or `wake_on: "fail"`, typically this monitor's end or failure), in one call: "run the build and tell me when it fails or ends". Where the client runs tool calls as MCP tasks (Claude Code), the call returns at once as a background task and its result comes when the event does (within 6 hours); elsewhere it blocks like monitor_wait (50 s). The result is monitor_wait's, with this monitor's start result under `monitor`. Default false.
    pub wait: Option<bool>,
}

impl MonitorStartArgs {
    /// The timer that `in`, `at` or `cron` name, read as of now in local
    /// time ([`wakeful_core::timer`]), if any; `say` without one (or with
    /// a `pid`) is an error.
    fn timer_source(&self) -> Result<Option<Source>, TimerError> {
        Source::timer_of(
            self.r#in.as_deref(),
            self.at.as_deref(),
            self.cron.as_deref(),
            self.say.is_some() && self.pid.is_none(),
            chrono::Utc::now(),
            &chrono::Local,
        )
    }

    /// The one source these arguments name.
    fn source(&self) -> Result<Source, ArgsError> {
        let mut sources: Vec<(&str, Source)> = Vec::new();
        if let Some(command) = &self.command {
            let source = match self.every_ms {
                Some(every_ms) => Source::Poll {
                    command: command.clone(),
                    every_ms,
                },
                None => Source::Command {
                    command: command.clone(),
                },
            };
            sources.push(("command", source));
        } else if self.every_ms.is_some() {
            return Err(ArgsError::EveryMsWithoutCommand);
        }
        if let Some(url) = &self.ws {
            sources.push((
                "ws",
                Source::Ws {
                    url: url.clone(),
                    protocols: self.protocols.clone().unwrap_or_default(),
                },
            ));
        } else if self.protocols.is_some() {
            return Err(ArgsError::ProtocolsWithoutWs);
        }
        if let Some(path) = &self.file {
            let path = std::path::PathBuf::from(path);
            let path = match (&self.cwd, path.is_relative()) {
                (Some(cwd), true) => std::path::PathBuf::from(cwd).join(path),
                _ => path,
            };
            sources.push(("file", Source::File { path }));
        }
        if let Some(timer) = self.timer_source()? {
            sources.push(("in, at or cron", timer));
        }
        if let Some(pid) = self.pid {
            let pid = wakeful_core::pid::check_number(pid)?;
            sources.push((
                "pid",
                Source::Pid {
                    pid,
                    start_time: None,
                    backend: None,
                    cmdline: None,
                },
            ));
        }
        if let Some(terminal_id) = &self.terminal {
            sources.push((
                "terminal",
                Source::Terminal {
                    terminal_id: terminal_id.clone(),
                },
            ));
        }
        match sources.len() {
            1 => Ok(sources.remove(0).1),
            0 => Err(ArgsError::NoSource),
            _ => Err(ArgsError::TwoSources(
                sources
                    .iter()
                    .map(|(name, _)| *name)
                    .collect::<Vec<_>>()
                    .join(" and "),
            )),
        }
    }

    /// The monitor spec these arguments describe, validated (docs/CONTRACT.md §3 limits,
    /// regular expressions compiled). The message of an error names the
    /// parameter, what was wrong and what is accepted.
    pub fn to_spec(&self) -> Result<MonitorSpec, ArgsError> {
        let source = self.source()?;
        let durable = source.is_durable();
        let description = self
            .say
            .clone()
            .or_else(|| self.description.clone())
            .ok_or(ArgsError::NoDescription)?;
        let until = self.until.as_deref().map(str::parse::<Until>).transpose()?;
        let stderr = self
            .stderr
            .as_deref()
            .map(str::parse::<StderrMode>)
            .transpose()?
            .unwrap_or_default();
        let spec = MonitorSpec {
            source,
            description,
            timeout_ms: self.timeout_ms,
            persistent: self.persistent.unwrap_or(false) || durable,
            idle_timeout_ms: self.idle_timeout_ms,
            max_events: self.max_events,
            filter: self.filter.clone(),
            until,
            key: self.key.clone(),
            stderr,
            batch_ms: self.batch_ms,
            cwd: self.cwd.as_ref().map(PathBuf::from),
            env: self.env.clone().unwrap_or_default(),
            wake_on: self
                .wake_on
                .as_deref()
                .map(str::parse::<wakeful_core::WakeOn>)
                .transpose()?
                .unwrap_or_default(),
            expect_within_ms: self.expect_within_ms,
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// Arguments of `monitor_list`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MonitorListArgs {
    /// List every session's monitors, not only this session's. Default false.
    pub all_sessions: Option<bool>,
}

/// Arguments of `monitor_stop`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MonitorStopArgs {
    /// The monitor id (`mon-…`), from monitor_start or monitor_list.
    pub id: Option<String>,
}

impl MonitorStopArgs {
    /// The id, which is required.
    pub fn id(&self) -> Result<String, ArgsError> {
        match self.id.as_deref().map(str::trim) {
            Some(id) if !id.is_empty() => Ok(id.to_string()),
            _ => Err(ArgsError::NoId),
        }
    }
}

/// Arguments of `monitor_events`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MonitorEventsArgs {
    /// Only events with a seq greater than this. Default 0 (from the beginning). Pass the `last_seq` of the previous result to continue.
    pub after: Option<u64>,
    /// Return at most this many events (1–1000). Default 100.
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u64>,
}

impl MonitorEventsArgs {
    /// `(after, limit)`, checked.
    pub fn checked(&self) -> Result<(u64, usize), ArgsError> {
        let limit = self.limit.unwrap_or(DEFAULT_EVENTS_LIMIT);
        if !(1..=MAX_EVENTS_LIMIT).contains(&limit) {
            return Err(ArgsError::Limit(limit));
        }
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        Ok((self.after.unwrap_or(0), limit))
    }
}

/// Arguments of `monitor_wait`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MonitorWaitArgs {
    /// Give up after this many milliseconds and return `timed_out: true`. Default 50000; 0–600000 (0: return at once). Keep it below your client's tool-call timeout.
    #[schemars(range(max = 600000))]
    pub timeout_ms: Option<u64>,
    /// Also return events that do not wake (of monitors started with `wake_on` other than `any`) at once, without waiting for one that wakes. Default false.
    pub all: Option<bool>,
}

impl MonitorWaitArgs {
    /// The timeout, checked (out of range is an error, never clamped).
    pub fn timeout_ms(&self) -> Result<u64, ArgsError> {
        let t = self.timeout_ms.unwrap_or(DEFAULT_WAIT_TIMEOUT_MS);
        if t > MAX_WAIT_TIMEOUT_MS {
            return Err(ArgsError::WaitTimeout(t));
        }
        Ok(t)
    }
}

/// Arguments of `terminal_run` (docs/CONTRACT.md §5).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalRunArgs {
    /// The long-running command to start (run with `sh -c`), e.g. "make release-check".
    pub command: Option<String>,
    /// What the command is, shown with its events (1–200 characters).
    pub description: Option<String>,
    /// Attach a monitor that ends as given: `exit`, `match:<regex>` or `after:<ms>`.
    pub until: Option<String>,
    /// Working directory of the command. Default: the directory the MCP server was started in.
    pub cwd: Option<String>,
    /// Extra environment variables for the command.
    pub env: Option<BTreeMap<String, String>>,
}

impl TerminalRunArgs {
    /// Checks the arguments as `monitor_start` would.
    pub fn check(&self) -> Result<(), ArgsError> {
        let command = self.command.clone().ok_or(ArgsError::NoCommand)?;
        let start = MonitorStartArgs {
            command: Some(command.clone()),
            description: Some(
                self.description
                    .clone()
                    .unwrap_or_else(|| command.chars().take(200).collect()),
            ),
            until: self.until.clone(),
            cwd: self.cwd.clone(),
            env: self.env.clone(),
            ..MonitorStartArgs::default()
        };
        start.to_spec().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(json: serde_json::Value) -> Result<MonitorSpec, Box<dyn std::error::Error>> {
        Ok(serde_json::from_value::<MonitorStartArgs>(json)?.to_spec()?)
    }

    #[test]
    fn a_pid_is_a_persistent_source_with_the_same_rules_as_the_command_line() {
        let spec = start(serde_json::json!({"pid": 4242, "say": "the deploy ended"})).unwrap();
        assert_eq!(
            spec.source,
            Source::Pid {
                pid: 4242,
                start_time: None,
                backend: None,
                cmdline: None
            }
        );
        assert!(spec.persistent);
        assert_eq!(spec.description, "the deploy ended");
        let err = |j| start(j).unwrap_err().to_string();
        assert!(err(serde_json::json!({"pid": 4242})).contains("description is required"));
        for bad in [0, -5, 4_294_967_296_i64] {
            assert!(
                err(serde_json::json!({"pid": bad, "say": "x"})).contains("a whole number from 1"),
                "{bad}"
            );
        }
        assert!(err(serde_json::json!({"pid": 1, "say": "x"})).contains("init"));
        assert!(err(serde_json::json!({"pid": "4242", "say": "x"})).contains("invalid type"));
        assert!(
            err(serde_json::json!({"pid": 4242, "command": "x", "say": "x"}))
                .contains("exactly one source; got command and pid")
        );
        assert!(
            err(serde_json::json!({"pid": 4242, "in": "1m", "say": "x"}))
                .contains("exactly one source")
        );
        assert!(
            err(serde_json::json!({"pid": 4242, "say": "x", "timeout_ms": 5000}))
                .contains("no timeout")
        );
    }

    #[test]
    fn start_builds_a_validated_spec() {
        let spec = start(serde_json::json!({
            "command": "cargo test", "description": "tests", "timeout_ms": 900000,
            "filter": "FAIL|panicked", "stderr": "events", "until": "exit", "key": "t",
            "batch_ms": 0, "env": {"RUST_LOG": "debug"}, "cwd": "/tmp"
        }))
        .unwrap();
        assert_eq!(spec.until, Some(Until::Exit));
        assert_eq!(spec.stderr, StderrMode::Events);
        assert_eq!(spec.env["RUST_LOG"], "debug");
        assert_eq!(spec.cwd, Some(PathBuf::from("/tmp")));
    }

    #[test]
    fn start_errors_name_the_parameter() {
        let cases = [
            (
                serde_json::json!({"command": "x"}),
                "description is required",
            ),
            (
                serde_json::json!({"description": "d"}),
                "give exactly one source",
            ),
            (
                serde_json::json!({"command": "x", "description": "d", "timeout_ms": 999}),
                "timeout_ms must be between 1000 and 3600000",
            ),
            (
                serde_json::json!({"command": "x", "description": "d", "until": "soon"}),
                "until must be",
            ),
            (
                serde_json::json!({"command": "x", "description": "d", "stderr": "both"}),
                "stderr must be",
            ),
            (
                serde_json::json!({"command": "x", "description": "d", "filter": "("}),
                "filter is not a valid regular expression",
            ),
            (
                serde_json::json!({"command": "x", "description": "d", "timout_ms": 5}),
                "unknown field `timout_ms`",
            ),
        ];
        for (json, want) in cases {
            let err = start(json.clone()).unwrap_err().to_string();
            assert!(err.contains(want), "{json}: {err}");
        }
    }

    #[test]
    fn wait_timeout_is_checked_not_clamped() {
        let w = |t| {
            MonitorWaitArgs {
                timeout_ms: t,
                all: None,
            }
            .timeout_ms()
            .map_err(|e| e.to_string())
        };
        assert_eq!(w(None), Ok(DEFAULT_WAIT_TIMEOUT_MS));
        assert_eq!(w(Some(0)), Ok(0));
        assert_eq!(w(Some(600_000)), Ok(600_000));
        assert!(w(Some(600_001))
            .unwrap_err()
            .contains("between 0 and 600000"));
    }

    #[test]
    fn terminal_run_checks_like_start() {
        let t = TerminalRunArgs {
            command: Some("make".into()),
            until: Some("soon".into()),
            ..TerminalRunArgs::default()
        };
        assert!(t.check().unwrap_err().to_string().contains("until must be"));
        assert!(TerminalRunArgs::default()
            .check()
            .unwrap_err()
            .to_string()
            .contains("command is required"));
    }

    fn args(json: serde_json::Value) -> MonitorStartArgs {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_timer_is_a_persistent_source_saying_say() {
        let spec = args(serde_json::json!({"in": "20m", "say": "check the deploy"}))
            .to_spec()
            .unwrap();
        assert!(matches!(spec.source, Source::Timer { cron: None, .. }));
        assert!(spec.persistent);
        assert_eq!(spec.description, "check the deploy");
        let spec = args(serde_json::json!({"cron": "0 9 * * *", "description": "standup"}))
            .to_spec()
            .unwrap();
        assert!(matches!(spec.source, Source::Timer { cron: Some(_), .. }));
    }

    #[test]
    fn bad_timers_are_refused_with_the_format() {
        let err = |j| args(j).to_spec().unwrap_err().to_string();
        assert!(err(serde_json::json!({"in": "0", "say": "x"})).contains("more than 0"));
        assert!(err(serde_json::json!({"at": "3pm", "say": "x"})).contains("HH:MM"));
        assert!(err(serde_json::json!({"cron": "often", "say": "x"})).contains("five fields"));
        assert!(
            err(serde_json::json!({"in": "1m", "command": "x", "say": "x"}))
                .contains("exactly one source")
        );
        assert!(err(serde_json::json!({"command": "x", "say": "x"})).contains("goes with a timer"));
        assert!(
            err(serde_json::json!({"in": "1m", "say": "x", "timeout_ms": 5000}))
                .contains("no timeout")
        );
    }
}
