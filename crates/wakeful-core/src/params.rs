//! Monitor parameters (docs/CONTRACT.md §3): what a monitor watches and how its output
//! becomes events, with the defaults and limits of the contract.
//!
//! A [`MonitorSpec`] is plain data, as it arrives from a flag, a socket message
//! or an MCP tool call. [`MonitorSpec::validate`] checks every limit (out of
//! range is an error, never clamped) and compiles the regular expressions into
//! a [`CompiledSpec`] that the state machines use.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// Default `timeout_ms`: five minutes.
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;
/// Smallest accepted `timeout_ms`.
pub const MIN_TIMEOUT_MS: u64 = 1_000;
/// Largest accepted `timeout_ms`: one hour.
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;
/// Smallest accepted `idle_timeout_ms`.
pub const MIN_IDLE_TIMEOUT_MS: u64 = 1_000;
/// Largest accepted `max_events`.
pub const MAX_MAX_EVENTS: u64 = 1_000_000;
/// Default `batch_ms`.
pub const DEFAULT_BATCH_MS: u64 = 200;
/// Largest accepted `batch_ms`.
pub const MAX_BATCH_MS: u64 = 5_000;
/// Longest accepted description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 200;
/// Longest accepted regular expression (filter or `until match:`), in bytes.
pub const MAX_REGEX_LEN: usize = 4_096;

/// Smallest accepted poll interval.
pub const MIN_EVERY_MS: u64 = 1_000;
/// Most WebSocket subprotocols a monitor may ask for.
pub const MAX_WS_PROTOCOLS: usize = 16;

/// What a monitor watches. Exactly one source per monitor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// A shell command, run as `sh -c COMMAND` in its own process group.
    Command {
        /// The command text given to `sh -c`.
        command: String,
    },
    /// A WebSocket: each text frame is a line (or several).
    Ws {
        /// `ws://` or `wss://` URL, ASCII, without credentials.
        url: String,
        /// Subprotocols to offer (`Sec-WebSocket-Protocol`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        protocols: Vec<String>,
    },
    /// A file followed like `tail -F`: from its end, across rotation,
    /// truncation, deletion and late creation.
    File {
        /// The file (absolute, or relative to the monitor's working directory).
        path: PathBuf,
    },
    /// A command run every `every_ms`; its output is an event only when it
    /// differs from the previous run's.
    Poll {
        /// The command text given to `sh -c`.
        command: String,
        /// Interval between the end of one run and the start of the next (≥ 1000).
        every_ms: u64,
    },
    /// The output of a terminal started with `wakeful run`.
    Terminal {
        /// `term-…`.
        terminal_id: String,
    },
    /// A monitor's recorded lines re-emitted from a `wakeful export`
    /// (jsonl) file, with their recorded timing divided by `speed`. Every
    /// event of such a monitor is marked `replayed`.
    Replay {
        /// The export file (absolute, or relative to the monitor's working
        /// directory).
        file: PathBuf,
        /// The id of the recorded monitor in that file.
        monitor: String,
        /// How much faster than recorded (1 = the original timing).
        speed: ReplaySpeed,
    },
    /// A timer (`--in`, `--at`, `--cron`): one event when it falls due
    /// ([`crate::timer`]). Always persistent: the deadline survives a
    /// daemon restart.
    Timer {
        /// When it falls due (RFC 3339, UTC): the deadline of a one-shot
        /// timer, the first occurrence of a cron timer.
        due: chrono::DateTime<chrono::Utc>,
        /// A cron expression (five fields, the daemon's local time): the
        /// timer fires at every occurrence from `due` on, until stopped.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cron: Option<String>,
    },
    /// A process wakeful did not start (`--pid`): one event when it exits
    /// ([`crate::pid`]). Always persistent. The engine fills in
    /// `start_time`, `backend` and `cmdline` when the monitor starts, so
    /// that a monitor re-armed after a daemon restart never takes a later
    /// process given the same pid for the one it watched.
    Pid {
        /// The process id.
        pid: i32,
        /// When the process started, in the unit of `backend` (Linux:
        /// clock ticks after boot; posix: seconds): with the pid, it names
        /// one process.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_time: Option<u64>,
        /// The platform backend that read `start_time` (`linux`, `posix`):
        /// start times of two backends cannot be compared.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        backend: Option<String>,
        /// Its command line when the monitor started (for the texts; cut at
        /// [`crate::pid::MAX_CMDLINE_CHARS`] characters), when readable.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cmdline: Option<String>,
    },
}

/// How fast a replay runs: the recorded time between two lines is divided
/// by it (1 keeps the original timing, 10 is ten times as fast). A finite
/// number from [`MIN_REPLAY_SPEED`] to [`MAX_REPLAY_SPEED`].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ReplaySpeed(pub f64);

// Validation admits only finite numbers, for which `==` is an equivalence.
impl Eq for ReplaySpeed {}

impl Default for ReplaySpeed {
    fn default() -> Self {
        ReplaySpeed(1.0)
    }
}

impl fmt::Display for ReplaySpeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Slowest accepted replay speed.
pub const MIN_REPLAY_SPEED: f64 = 0.01;
/// Fastest accepted replay speed.
pub const MAX_REPLAY_SPEED: f64 = 1000.0;

impl Source {
    /// The timer source that `--in`, `--at` or `--cron` names (see
    /// [`crate::timer::deadline_of`]), as of `now` in `tz`; `Ok(None)` when
    /// none is given. `say`: whether `--say` was given, which needs a timer.
    pub fn timer_of<Tz: chrono::TimeZone>(
        in_: Option<&str>,
        at: Option<&str>,
        cron: Option<&str>,
        say: bool,
        now: chrono::DateTime<chrono::Utc>,
        tz: &Tz,
    ) -> Result<Option<Source>, crate::timer::TimerError> {
        match crate::timer::deadline_of(in_, at, cron, now, tz)? {
            Some((due, cron)) => Ok(Some(Source::Timer { due, cron })),
            None if say => Err(crate::timer::TimerError::SayAlone),
            None => Ok(None),
        }
    }

    /// A one-line human summary, used in `started` events and listings.
    pub fn summary(&self) -> String {
        match self {
            Source::Command { command } => format!("command: {command}"),
            Source::Ws { url, .. } => format!("ws: {url}"),
            Source::File { path } => format!("file: {}", path.display()),
            Source::Poll { command, every_ms } => format!("poll every {every_ms} ms: {command}"),
            Source::Terminal { terminal_id } => format!("terminal: {terminal_id}"),
            Source::Replay {
                file,
                monitor,
                speed,
            } => format!("replay of {monitor} from {} at {speed}x", file.display()),
            Source::Timer { due, cron: None } => {
                format!("timer due {}", due.format("%Y-%m-%d %H:%M:%S UTC"))
            }
            Source::Timer {
                due,
                cron: Some(cron),
            } => format!(
                "timer on cron `{cron}` (local time), first due {}",
                due.format("%Y-%m-%d %H:%M:%S UTC")
            ),
            Source::Pid {
                pid,
                cmdline: Some(c),
                ..
            } => format!("process {pid} `{c}`"),
            Source::Pid { pid, .. } => format!("process {pid}"),
        }
    }

    /// Whether this source lives across daemon restarts by nature (a
    /// timer's deadline, a process that runs without the daemon): its
    /// monitor must be persistent, without a timeout.
    pub fn is_durable(&self) -> bool {
        matches!(self, Source::Timer { .. } | Source::Pid { .. })
    }

    /// The source kind as it appears on the wire (`"command"`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Command { .. } => "command",
            Source::Ws { .. } => "ws",
            Source::File { .. } => "file",
            Source::Poll { .. } => "poll",
            Source::Terminal { .. } => "terminal",
            Source::Replay { .. } => "replay",
            Source::Timer { .. } => "timer",
            Source::Pid { .. } => "pid",
        }
    }

    /// The text a default description is made of.
    pub fn default_description(&self) -> String {
        let text = match self {
            Source::Command { command } | Source::Poll { command, .. } => command.clone(),
            Source::Ws { url, .. } => url.clone(),
            Source::File { path } => path.display().to_string(),
            Source::Terminal { terminal_id } => terminal_id.clone(),
            Source::Replay { monitor, .. } => format!("replay of {monitor}"),
            Source::Timer { cron: None, .. } => "timer".to_string(),
            Source::Timer { cron: Some(c), .. } => format!("timer on cron `{c}`"),
            Source::Pid { pid, .. } => format!("pid {pid}"),
        };
        text.chars().take(MAX_DESCRIPTION_CHARS).collect()
    }

    fn validate(&self) -> Result<(), ParamError> {
        let command_ok = |command: &str| {
            if command.trim().is_empty() {
                Err(ParamError::EmptyCommand)
            } else if command.contains('\0') {
                Err(ParamError::NulInCommand)
            } else {
                Ok(())
            }
        };
        match self {
            Source::Command { command } => command_ok(command),
            Source::Poll { command, every_ms } => {
                command_ok(command)?;
                if *every_ms < MIN_EVERY_MS {
                    return Err(ParamError::Every(*every_ms));
                }
                Ok(())
            }
            Source::Ws { url, protocols } => {
                validate_ws_url(url)?;
                if protocols.len() > MAX_WS_PROTOCOLS
                    || protocols.iter().any(|p| {
                        p.is_empty() || !p.bytes().all(|b| b.is_ascii_graphic() && b != b',')
                    })
                {
                    return Err(ParamError::WsProtocol);
                }
                Ok(())
            }
            Source::File { path } => {
                if path.as_os_str().is_empty() {
                    return Err(ParamError::FilePath);
                }
                Ok(())
            }
            Source::Terminal { terminal_id } => {
                if !terminal_id.starts_with("term-") {
                    return Err(ParamError::TerminalId(terminal_id.clone()));
                }
                Ok(())
            }
            Source::Replay {
                file,
                monitor,
                speed,
            } => {
                if file.as_os_str().is_empty() {
                    return Err(ParamError::ReplayFile);
                }
                if monitor.trim().is_empty() {
                    return Err(ParamError::ReplayMonitor);
                }
                if !speed.0.is_finite() || !(MIN_REPLAY_SPEED..=MAX_REPLAY_SPEED).contains(&speed.0)
                {
                    return Err(ParamError::ReplaySpeed(speed.0.to_string()));
                }
                Ok(())
            }
            Source::Timer { cron, .. } => {
                if let Some(c) = cron {
                    crate::timer::parse_cron(c)?;
                }
                Ok(())
            }
            Source::Pid { pid, .. } => Ok(crate::pid::check_pid(*pid, None)?),
        }
    }
}

/// Checks a WebSocket URL: `ws://` or `wss://`, ASCII only, a host, no
/// credentials. Which addresses it may reach is decided at connect time.
pub fn validate_ws_url(url: &str) -> Result<(), ParamError> {
    let bad = |why: &str| Err(ParamError::WsUrl(url.to_string(), why.to_string()));
    if !url.is_ascii() {
        return bad("only ASCII URLs are accepted (write international names in punycode)");
    }
    if url.chars().any(|c| c.is_ascii_control() || c == ' ') {
        return bad("it contains spaces or control characters");
    }
    let rest = if let Some(r) = url.strip_prefix("ws://") {
        r
    } else if let Some(r) = url.strip_prefix("wss://") {
        r
    } else {
        return bad("only ws:// and wss:// URLs are accepted");
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return bad("credentials in the URL are not accepted");
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    if host.is_empty() {
        return bad("it has no host");
    }
    Ok(())
}

/// Where a command's stderr lines go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StderrMode {
    /// Only to the output file, prefixed `[stderr] ` (the default).
    #[default]
    File,
    /// To the output file and, like stdout lines, into events.
    Events,
}

impl FromStr for StderrMode {
    type Err = ParamError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "file" => Ok(StderrMode::File),
            "events" => Ok(StderrMode::Events),
            other => Err(ParamError::Stderr(other.to_string())),
        }
    }
}

impl fmt::Display for StderrMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StderrMode::File => "file",
            StderrMode::Events => "events",
        })
    }
}

/// When a monitor stops by itself, besides its source ending.
///
/// Written as `exit`, `match:<regex>` or `after:<ms>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Until {
    /// No line events; one `stopped` event when the source ends, with the
    /// exit status and the last 20 lines.
    Exit,
    /// Stop after the first line matching the regex; that line is delivered.
    Match(String),
    /// Stop after this many milliseconds, with the last 20 lines.
    After(u64),
}

impl FromStr for Until {
    type Err = ParamError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "exit" {
            return Ok(Until::Exit);
        }
        if let Some(re) = s.strip_prefix("match:") {
            if re.is_empty() {
                return Err(ParamError::Until(s.to_string()));
            }
            return Ok(Until::Match(re.to_string()));
        }
        if let Some(ms) = s.strip_prefix("after:") {
            return match ms.parse::<u64>() {
                Ok(ms) if ms >= 1 => Ok(Until::After(ms)),
                _ => Err(ParamError::Until(s.to_string())),
            };
        }
        Err(ParamError::Until(s.to_string()))
    }
}

impl fmt::Display for Until {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Until::Exit => f.write_str("exit"),
            Until::Match(re) => write!(f, "match:{re}"),
            Until::After(ms) => write!(f, "after:{ms}"),
        }
    }
}

impl Serialize for Until {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Until {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Which of a monitor's events wake the agent (all are recorded and
/// readable either way). Written as `any`, `exit`, `fail` or
/// `match:<regex>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum WakeOn {
    /// Every event (the default).
    #[default]
    Any,
    /// The monitor's final event (`stopped` or `failed`).
    Exit,
    /// Failures: `failed`, a `stopped` that is not a success (non-zero
    /// exit, signal, timeout, idle timeout, abnormal WebSocket close), and
    /// `silent`.
    Fail,
    /// `lines` events with a line matching the regex, and failures.
    Match(String),
}

impl WakeOn {
    /// Whether this is the default (`any`).
    pub fn is_any(&self) -> bool {
        *self == WakeOn::Any
    }
}

impl FromStr for WakeOn {
    type Err = ParamError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "any" => Ok(WakeOn::Any),
            "exit" => Ok(WakeOn::Exit),
            "fail" => Ok(WakeOn::Fail),
            _ => match s.strip_prefix("match:") {
                Some(re) if !re.is_empty() => Ok(WakeOn::Match(re.to_string())),
                _ => Err(ParamError::WakeOn(s.to_string())),
            },
        }
    }
}

impl fmt::Display for WakeOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WakeOn::Any => f.write_str("any"),
            WakeOn::Exit => f.write_str("exit"),
            WakeOn::Fail => f.write_str("fail"),
            WakeOn::Match(re) => write!(f, "match:{re}"),
        }
    }
}

impl Serialize for WakeOn {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for WakeOn {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Smallest accepted `expect_within_ms`.
pub const MIN_EXPECT_WITHIN_MS: u64 = 1_000;

/// Everything a monitor is asked to do (docs/CONTRACT.md §3). Plain data; see
/// [`MonitorSpec::validate`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorSpec {
    /// What to watch.
    pub source: Source,
    /// Shown with every event; 1–200 characters.
    pub description: String,
    /// Stop after this long (default 300000, 1000–3600000). Must be unset for
    /// persistent monitors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// No timeout; restarted (`rearmed`) when the daemon restarts.
    #[serde(default)]
    pub persistent: bool,
    /// Stop when the source produced nothing for this long (≥ 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
    /// Stop after this many `lines` events (1–1000000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_events: Option<u64>,
    /// Only lines matching this regex become events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// `exit`, `match:<regex>` or `after:<ms>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Until>,
    /// Idempotency key within the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Where stderr lines go (`file` or `events`).
    #[serde(default)]
    pub stderr: StderrMode,
    /// Coalescing window after a leading-edge event (default 200, 0–5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_ms: Option<u64>,
    /// Working directory (default: the caller's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Extra environment for the command, on top of the caller's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Which events wake the agent (default `any`).
    #[serde(default, skip_serializing_if = "WakeOn::is_any")]
    pub wake_on: WakeOn,
    /// After this long without output, one `silent` event (the monitor
    /// keeps running); `resumed` when output comes again (≥ 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_within_ms: Option<u64>,
}

impl MonitorSpec {
    /// A command monitor with every other parameter at its default.
    pub fn command(command: impl Into<String>, description: impl Into<String>) -> Self {
        MonitorSpec {
            source: Source::Command {
                command: command.into(),
            },
            description: description.into(),
            timeout_ms: None,
            persistent: false,
            idle_timeout_ms: None,
            max_events: None,
            filter: None,
            until: None,
            key: None,
            stderr: StderrMode::File,
            batch_ms: None,
            cwd: None,
            env: BTreeMap::new(),
            wake_on: WakeOn::Any,
            expect_within_ms: None,
        }
    }

    /// The effective timeout: `None` for persistent monitors.
    pub fn effective_timeout(&self) -> Option<Duration> {
        if self.persistent {
            None
        } else {
            Some(Duration::from_millis(
                self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
            ))
        }
    }

    /// The effective batching window.
    pub fn effective_batch(&self) -> Duration {
        Duration::from_millis(self.batch_ms.unwrap_or(DEFAULT_BATCH_MS))
    }

    /// Checks every limit of docs/CONTRACT.md §3 and compiles the regular expressions.
    /// Nothing is clamped: a value out of range is an error that says which
    /// parameter, what was given and what is accepted.
    pub fn validate(&self) -> Result<CompiledSpec, ParamError> {
        let chars = self.description.chars().count();
        if self.description.trim().is_empty() || chars > MAX_DESCRIPTION_CHARS {
            return Err(ParamError::Description(chars));
        }
        self.source.validate()?;
        if self.source.is_durable() && (!self.persistent || self.timeout_ms.is_some()) {
            return Err(ParamError::Durable(self.source.kind()));
        }
        if self.persistent && self.timeout_ms.is_some() {
            return Err(ParamError::PersistentWithTimeout);
        }
        if let Some(t) = self.timeout_ms {
            if !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&t) {
                return Err(ParamError::Timeout(t));
            }
        }
        if let Some(t) = self.idle_timeout_ms {
            if t < MIN_IDLE_TIMEOUT_MS {
                return Err(ParamError::IdleTimeout(t));
            }
        }
        if let Some(n) = self.max_events {
            if !(1..=MAX_MAX_EVENTS).contains(&n) {
                return Err(ParamError::MaxEvents(n));
            }
        }
        if let Some(b) = self.batch_ms {
            if b > MAX_BATCH_MS {
                return Err(ParamError::BatchMs(b));
            }
        }
        if let Some(k) = &self.key {
            if k.is_empty() || k.len() > 200 {
                return Err(ParamError::Key);
            }
        }
        if let Some(t) = self.expect_within_ms {
            if t < MIN_EXPECT_WITHIN_MS {
                return Err(ParamError::ExpectWithin(t));
            }
        }
        for name in self.env.keys() {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(ParamError::EnvName(name.clone()));
            }
        }
        let filter = self
            .filter
            .as_deref()
            .map(|re| compile("filter", re))
            .transpose()?;
        let until_match = match &self.until {
            Some(Until::Match(re)) => Some(compile("until", re)?),
            _ => None,
        };
        let wake_match = match &self.wake_on {
            WakeOn::Match(re) => Some(compile("wake_on (--wake-on)", re)?),
            _ => None,
        };
        Ok(CompiledSpec {
            filter,
            until_match,
            wake_match,
        })
    }
}

fn compile(param: &'static str, re: &str) -> Result<Regex, ParamError> {
    if re.len() > MAX_REGEX_LEN {
        return Err(ParamError::Regex {
            param,
            message: format!(
                "the expression is {} bytes long; at most {MAX_REGEX_LEN} are accepted",
                re.len()
            ),
        });
    }
    Regex::new(re).map_err(|e| ParamError::Regex {
        param,
        message: e.to_string(),
    })
}

/// The regular expressions of a validated [`MonitorSpec`].
#[derive(Debug, Clone)]
pub struct CompiledSpec {
    /// Compiled `filter`.
    pub filter: Option<Regex>,
    /// Compiled `until match:` expression.
    pub until_match: Option<Regex>,
    /// Compiled `wake_on match:` expression.
    pub wake_match: Option<Regex>,
}

/// A parameter that breaks the contract. Each message names the parameter,
/// what was wrong and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// `wake_on` is not one of its forms.
    #[error("wake_on (--wake-on) must be `any`, `exit`, `fail` or `match:<regex>` (got `{0}`)")]
    WakeOn(String),
    /// `expect_within_ms` too small.
    #[error("expect_within_ms (--expect-within) must be at least {MIN_EXPECT_WITHIN_MS} ms (got {0}); it is the longest quiet time before a `silent` event")]
    ExpectWithin(u64),
    /// `description` empty or too long.
    #[error("description must be 1–{MAX_DESCRIPTION_CHARS} characters and not blank (got {0}); say what the monitor watches, e.g. \"cargo build errors\"")]
    Description(usize),
    /// Empty command text.
    #[error("the command is empty; give the shell command to watch after `--`")]
    EmptyCommand,
    /// A NUL byte in the command text.
    #[error("the command contains a NUL byte, which no shell command can")]
    NulInCommand,
    /// `timeout_ms` out of range.
    #[error("timeout_ms must be between {MIN_TIMEOUT_MS} and {MAX_TIMEOUT_MS} (got {0}); use persistent for a monitor without a timeout")]
    Timeout(u64),
    /// `timeout_ms` given for a persistent monitor.
    #[error("a persistent monitor has no timeout; drop timeout_ms or persistent")]
    PersistentWithTimeout,
    /// `idle_timeout_ms` too small.
    #[error("idle_timeout_ms must be at least {MIN_IDLE_TIMEOUT_MS} (got {0})")]
    IdleTimeout(u64),
    /// `max_events` out of range.
    #[error("max_events must be between 1 and {MAX_MAX_EVENTS} (got {0})")]
    MaxEvents(u64),
    /// `batch_ms` out of range.
    #[error("batch_ms must be between 0 and {MAX_BATCH_MS} (got {0})")]
    BatchMs(u64),
    /// `stderr` not `file` or `events`.
    #[error("stderr must be `file` or `events` (got `{0}`)")]
    Stderr(String),
    /// `until` not one of its three forms.
    #[error("until must be `exit`, `match:<regex>` or `after:<ms>` with ms ≥ 1 (got `{0}`)")]
    Until(String),
    /// A regex that does not compile.
    #[error("{param} is not a valid regular expression: {message}")]
    Regex {
        /// Which parameter (`filter` or `until`).
        param: &'static str,
        /// What the regex compiler said.
        message: String,
    },
    /// An empty or over-long key.
    #[error("key must be 1–200 bytes")]
    Key,
    /// `every_ms` too small.
    #[error("every_ms must be at least {MIN_EVERY_MS} (got {0}); a poll runs a command, so it cannot run more often than once a second")]
    Every(u64),
    /// A WebSocket URL that is not accepted.
    #[error("WebSocket URL `{0}` is not accepted: {1}")]
    WsUrl(String, String),
    /// A malformed WebSocket subprotocol list.
    #[error("WebSocket subprotocols must be 1–{MAX_WS_PROTOCOLS} non-empty tokens without spaces or commas")]
    WsProtocol,
    /// An empty file path.
    #[error("the file path is empty; give the file to follow with --file PATH")]
    FilePath,
    /// A terminal id that is not one.
    #[error(
        "`{0}` is not a terminal id (they look like term-…); `wakeful terminal list` shows them"
    )]
    TerminalId(String),
    /// An empty replay file path.
    #[error("the replay file path is empty; give the file `wakeful export --format jsonl` wrote")]
    ReplayFile,
    /// An empty replay monitor id.
    #[error("the replay needs the id of a monitor recorded in the file (mon-…)")]
    ReplayMonitor,
    /// A replay speed out of range.
    #[error("the replay speed must be a number from {MIN_REPLAY_SPEED} to {MAX_REPLAY_SPEED} (got {0}); 1 keeps the recorded timing, 10 is ten times as fast")]
    ReplaySpeed(String),
    /// A timer that cannot be.
    #[error(transparent)]
    Timer(#[from] crate::timer::TimerError),
    /// A process that cannot be watched (`--pid`).
    #[error(transparent)]
    Pid(#[from] crate::pid::PidError),
    /// A durable source (a timer, a process) that is not persistent, or has
    /// a timeout.
    #[error("a {0} monitor is persistent and has no timeout (it ends by itself, or when stopped): set persistent, leave timeout_ms out")]
    Durable(&'static str),
    /// A malformed environment variable name.
    #[error(
        "environment variable name `{0}` is invalid; use --env NAME=VALUE with a name without `=`"
    )]
    EnvName(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> MonitorSpec {
        MonitorSpec::command("echo hi", "greeting")
    }

    #[test]
    fn defaults_validate() {
        let s = spec();
        assert!(s.validate().is_ok());
        assert_eq!(s.effective_timeout(), Some(Duration::from_millis(300_000)));
        assert_eq!(s.effective_batch(), Duration::from_millis(200));
    }

    #[test]
    fn a_pid_source_is_durable_and_names_one_process() {
        let mut s = spec();
        s.source = Source::Pid {
            pid: 4242,
            start_time: None,
            backend: None,
            cmdline: None,
        };
        assert!(matches!(s.validate(), Err(ParamError::Durable("pid"))));
        s.persistent = true;
        assert!(s.validate().is_ok());
        assert_eq!(s.source.default_description(), "pid 4242");
        assert_eq!(s.source.summary(), "process 4242");
        let json = serde_json::to_value(&s.source).unwrap();
        assert_eq!(json, serde_json::json!({"kind": "pid", "pid": 4242}));
        s.source = serde_json::from_value(serde_json::json!({
            "kind": "pid", "pid": 4242, "start_time": 77, "backend": "linux",
            "cmdline": "sleep 1000"
        }))
        .unwrap();
        assert_eq!(s.source.summary(), "process 4242 `sleep 1000`");
        for bad in [0, -3, 1] {
            s.source = Source::Pid {
                pid: bad,
                start_time: None,
                backend: None,
                cmdline: None,
            };
            assert!(
                matches!(s.validate(), Err(ParamError::Pid(_))),
                "{bad}: {:?}",
                s.validate()
            );
        }
    }

    #[test]
    fn timeout_out_of_range_is_rejected_not_clamped() {
        for bad in [0, 999, 3_600_001] {
            let mut s = spec();
            s.timeout_ms = Some(bad);
            assert_eq!(s.validate().unwrap_err(), ParamError::Timeout(bad));
        }
        for good in [1_000, 3_600_000] {
            let mut s = spec();
            s.timeout_ms = Some(good);
            assert!(s.validate().is_ok());
        }
    }

    #[test]
    fn every_limit_is_checked() {
        let mut s = spec();
        s.description = String::new();
        assert!(matches!(s.validate(), Err(ParamError::Description(0))));
        s.description = "x".repeat(201);
        assert!(matches!(s.validate(), Err(ParamError::Description(201))));
        let mut s = spec();
        s.idle_timeout_ms = Some(999);
        assert!(matches!(s.validate(), Err(ParamError::IdleTimeout(999))));
        let mut s = spec();
        s.max_events = Some(0);
        assert!(matches!(s.validate(), Err(ParamError::MaxEvents(0))));
        let mut s = spec();
        s.batch_ms = Some(5_001);
        assert!(matches!(s.validate(), Err(ParamError::BatchMs(5_001))));
        let mut s = spec();
        s.filter = Some("(".into());
        assert!(matches!(
            s.validate(),
            Err(ParamError::Regex {
                param: "filter",
                ..
            })
        ));
        let mut s = spec();
        s.persistent = true;
        assert_eq!(s.effective_timeout(), None);
        s.timeout_ms = Some(5_000);
        assert_eq!(s.validate().unwrap_err(), ParamError::PersistentWithTimeout);
        let mut s = spec();
        s.source = Source::Command {
            command: "  ".into(),
        };
        assert_eq!(s.validate().unwrap_err(), ParamError::EmptyCommand);
    }

    #[test]
    fn sources_are_validated() {
        let ws = |url: &str| {
            Source::Ws {
                url: url.into(),
                protocols: vec![],
            }
            .validate()
        };
        assert!(ws("ws://example.com/feed").is_ok());
        assert!(ws("wss://[::1]:8443/x").is_ok());
        for bad in [
            "http://x",
            "ws://user:pw@x/",
            "ws://",
            "wss://é.com",
            "ws://a b",
        ] {
            assert!(matches!(ws(bad), Err(ParamError::WsUrl(..))), "{bad}");
        }
        let poll = Source::Poll {
            command: "date".into(),
            every_ms: 999,
        };
        assert_eq!(poll.validate(), Err(ParamError::Every(999)));
        assert!(Source::Terminal {
            terminal_id: "x".into()
        }
        .validate()
        .is_err());
        assert!(Source::File { path: "".into() }.validate().is_err());
        let replay = |speed: f64| Source::Replay {
            file: "x.jsonl".into(),
            monitor: "mon-a".into(),
            speed: ReplaySpeed(speed),
        };
        assert!(replay(1.0).validate().is_ok());
        assert!(replay(1000.0).validate().is_ok());
        for bad in [0.0, -1.0, 0.001, 1000.5, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(replay(bad).validate(), Err(ParamError::ReplaySpeed(_))),
                "{bad}"
            );
        }
        assert_eq!(
            serde_json::to_string(&replay(2.5)).unwrap(),
            r#"{"kind":"replay","file":"x.jsonl","monitor":"mon-a","speed":2.5}"#
        );
        let json = serde_json::to_string(&Source::Poll {
            command: "c".into(),
            every_ms: 1000,
        })
        .unwrap();
        assert_eq!(json, r#"{"kind":"poll","command":"c","every_ms":1000}"#);
    }

    #[test]
    fn until_parses_and_round_trips() {
        assert_eq!("exit".parse::<Until>().unwrap(), Until::Exit);
        assert_eq!(
            "match:ready.*".parse::<Until>().unwrap(),
            Until::Match("ready.*".into())
        );
        assert_eq!("after:1500".parse::<Until>().unwrap(), Until::After(1500));
        for bad in ["", "match:", "after:", "after:x", "after:0", "soon"] {
            assert!(bad.parse::<Until>().is_err(), "{bad}");
        }
        let json = serde_json::to_string(&Until::After(5)).unwrap();
        assert_eq!(json, "\"after:5\"");
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = serde_json::from_str::<MonitorSpec>(
            r#"{"source":{"kind":"command","command":"x"},"description":"d","timout_ms":5}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("timout_ms"), "{err}");
    }
}
