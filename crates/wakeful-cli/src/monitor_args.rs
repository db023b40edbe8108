//! The monitor parameters of docs/CONTRACT.md §3 as command-line flags, shared by
//! `start`, `watch` and `run`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use wakeful_core::{MonitorSpec, Source, StderrMode, Until, WakeOn};

/// Flags that shape a monitor (docs/CONTRACT.md §3).
#[derive(Debug, Clone, Args)]
pub struct MonitorArgs {
    /// What the monitor watches, shown with every event (1–200 characters).
    /// Default: the command text, cut to 200 characters.
    #[arg(long, short = 'd')]
    pub description: Option<String>,
    /// Stop after this many milliseconds (default 300000; 1000–3600000).
    #[arg(long, value_name = "MS", value_parser = non_negative, allow_negative_numbers = true)]
    pub timeout_ms: Option<u64>,
    /// No timeout; re-armed when the daemon restarts.
    #[arg(long)]
    pub persistent: bool,
    /// Stop when the source printed nothing for this long (≥ 1000).
    #[arg(long, value_name = "MS", value_parser = non_negative, allow_negative_numbers = true)]
    pub idle_timeout_ms: Option<u64>,
    /// Stop after this many `lines` events (1–1000000).
    #[arg(long, value_name = "N", value_parser = non_negative, allow_negative_numbers = true)]
    pub max_events: Option<u64>,
    /// Only lines matching this regex become events (the output file gets all).
    #[arg(long, value_name = "REGEX")]
    pub filter: Option<String>,
    /// `exit` (one event at the end, with the last lines), `match:REGEX`
    /// (stop after the first matching line) or `after:MS`.
    #[arg(long, value_name = "exit|match:RE|after:MS")]
    pub until: Option<Until>,
    /// Idempotency key: a start with a key an active monitor of the session
    /// holds returns that monitor instead of starting another.
    #[arg(long)]
    pub key: Option<String>,
    /// `file`: stderr only to the output file; `events`: also as events.
    #[arg(long, value_name = "file|events", default_value = "file")]
    pub stderr: StderrMode,
    /// Lines within this window after the first form one event (0–5000).
    #[arg(long, value_name = "MS", value_parser = non_negative, allow_negative_numbers = true)]
    pub batch_ms: Option<u64>,
    /// Working directory of the command (default: the current one).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Extra environment variable for the command; repeat for more.
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    /// Which events wake the agent: `any` (default), `exit` (the final
    /// event), `fail` (failures: non-zero exit, signal, timeout, `failed`,
    /// `silent`) or `match:REGEX` (matching lines, and failures). Every
    /// event is still recorded; the others go with the next that wakes.
    /// [env: WAKEFUL_WAKE_ON, which `wakeful acp-proxy --wake-on` sets]
    #[arg(
        long,
        value_name = "any|exit|fail|match:RE",
        env = "WAKEFUL_WAKE_ON",
        hide_env = true
    )]
    pub wake_on: Option<WakeOn>,
    /// After this long without output, one `silent` event (the monitor keeps
    /// running), and `resumed` when output comes again (≥ 1000).
    #[arg(long = "expect-within", value_name = "MS", value_parser = non_negative, allow_negative_numbers = true)]
    pub expect_within_ms: Option<u64>,
}

/// A numeric flag's value: a non-negative whole number. Flags that take one
/// also accept a leading `-` while parsing, so that `--timeout-ms -5` is
/// refused by this message naming the flag, not taken for a flag of its own.
pub fn non_negative(s: &str) -> Result<u64, NumberArgError> {
    match s.parse::<u64>() {
        Ok(n) => Ok(n),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
            Err(NumberArgError::TooLarge {
                text: s.to_string(),
            })
        }
        Err(_) if s.starts_with('-') => Err(NumberArgError::Negative),
        Err(_) => Err(NumberArgError::NotANumber),
    }
}

/// An exit code of a wake command that means "busy": 1–255.
pub fn busy_exit_code(s: &str) -> Result<i32, NumberArgError> {
    match non_negative(s)? {
        n @ 1..=255 => Ok(n as i32),
        _ => Err(NumberArgError::BusyExitCode),
    }
}

/// Why a numeric flag's value is refused ([`non_negative`],
/// [`busy_exit_code`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumberArgError {
    /// Above `u64::MAX`.
    #[error("{text} is too large (at most {})", u64::MAX)]
    TooLarge {
        /// The value given.
        text: String,
    },
    /// Negative.
    #[error("the value must be a non-negative number; negative values are not accepted")]
    Negative,
    /// Not a whole number.
    #[error("the value must be a non-negative whole number")]
    NotANumber,
    /// A busy exit code outside 1–255.
    #[error("an exit code that means busy is a number from 1 to 255 (0 means accepted)")]
    BusyExitCode,
}

/// An `--env` value that is not `NAME=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not NAME=VALUE")]
pub struct EnvArgError {
    /// The value given.
    pub text: String,
}

fn parse_env(s: &str) -> Result<(String, String), EnvArgError> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(EnvArgError {
            text: s.to_string(),
        }),
    }
}

/// Why the source flags and command words name no source
/// ([`SourceArgs::to_source`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceArgError {
    /// Command words with a flag that takes none.
    #[error("{flag} takes no command; remove the words after `--`")]
    CommandWithFlag {
        /// The flag (`--ws` …).
        flag: &'static str,
    },
    /// No command and no source flag.
    #[error("give the command to watch after `--` (or --ws, --file, --terminal)")]
    NoCommand,
    /// A timer flag that does not read.
    #[error(transparent)]
    Timer(#[from] wakeful_core::timer::TimerError),
    /// A timer with another source's flag.
    #[error("a timer (--in, --at, --cron) watches nothing else: drop --ws, --file or --every")]
    TimerWithSource,
    /// `--pid` with another source's flag.
    #[error("--pid watches one process and nothing else: drop --ws, --file, --every, --terminal, --in, --at or --cron")]
    PidWithSource,
}

impl MonitorArgs {
    /// The spec for `source`.
    pub fn to_spec(&self, source: Source) -> MonitorSpec {
        let description = self
            .description
            .clone()
            .unwrap_or_else(|| source.default_description());
        MonitorSpec {
            source,
            description,
            timeout_ms: self.timeout_ms,
            persistent: self.persistent,
            idle_timeout_ms: self.idle_timeout_ms,
            max_events: self.max_events,
            filter: self.filter.clone(),
            until: self.until.clone(),
            key: self.key.clone(),
            stderr: self.stderr,
            batch_ms: self.batch_ms,
            cwd: self.cwd.clone(),
            env: self.env.iter().cloned().collect::<BTreeMap<_, _>>(),
            wake_on: self.wake_on.clone().unwrap_or_default(),
            expect_within_ms: self.expect_within_ms,
        }
    }
}

/// Which source a monitor watches: a command (the default), or one of these.
#[derive(Debug, Clone, Args)]
pub struct SourceArgs {
    /// Watch a WebSocket (ws:// or wss://): each text frame is a line.
    #[arg(long, value_name = "URL", conflicts_with_all = ["file", "every", "terminal"])]
    pub ws: Option<String>,
    /// A WebSocket subprotocol to offer; repeat for more.
    #[arg(long = "protocol", value_name = "P", requires = "ws")]
    pub protocols: Vec<String>,
    /// Follow a file like `tail -F`: from its end, across rotation,
    /// truncation and late creation.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["every", "terminal"])]
    pub file: Option<PathBuf>,
    /// Run COMMAND every MS milliseconds (≥ 1000); its output becomes an
    /// event only when it differs from the previous run's.
    #[arg(long, value_name = "MS", conflicts_with = "terminal", value_parser = non_negative, allow_negative_numbers = true)]
    pub every: Option<u64>,
    /// Attach to a terminal started with `wakeful run` (at most 4 monitors
    /// per terminal; stopping the monitor leaves the command running).
    #[arg(long, value_name = "ID")]
    pub terminal: Option<String>,
    /// A timer instead of a source: --in, --at, --cron, --say.
    #[command(flatten)]
    pub timer: crate::timer_args::TimerArgs,
    /// Watch a process wakeful did not start (its pid, as `ps` shows it):
    /// one event when it exits, then the monitor ends. Its exit status
    /// when the system can tell, else "status unknown". Survives a daemon
    /// restart; a pid given to another process meanwhile is never taken
    /// for the one watched.
    #[arg(long, value_name = "PID", value_parser = parse_pid, allow_negative_numbers = true)]
    pub pid: Option<i32>,
}

/// `--pid`'s value: a process id (docs/CONTRACT.md §3, "A process").
fn parse_pid(s: &str) -> Result<i32, wakeful_core::pid::PidError> {
    wakeful_core::pid::parse_pid(s)
}

impl SourceArgs {
    /// The source these flags and the trailing command words name.
    pub fn to_source(&self, command: Vec<String>) -> Result<Source, SourceArgError> {
        let command = command.join(" ");
        let no_command = |flag: &'static str| {
            if command.is_empty() {
                Ok(())
            } else {
                Err(SourceArgError::CommandWithFlag { flag })
            }
        };
        if let Some(pid) = self.pid {
            no_command("--pid")?;
            if self.ws.is_some()
                || self.file.is_some()
                || self.every.is_some()
                || self.terminal.is_some()
                || self.timer.names_a_timer()
            {
                return Err(SourceArgError::PidWithSource);
            }
            return Ok(Source::Pid {
                pid,
                start_time: None,
                backend: None,
                cmdline: None,
            });
        }
        if let Some(url) = &self.ws {
            no_command("--ws")?;
            return Ok(Source::Ws {
                url: url.clone(),
                protocols: self.protocols.clone(),
            });
        }
        if let Some(path) = &self.file {
            no_command("--file")?;
            let path = std::env::current_dir()
                .map(|cwd| cwd.join(path))
                .unwrap_or_else(|_| path.clone());
            return Ok(Source::File { path });
        }
        if let Some(timer) = self.timer.to_source()? {
            no_command("--in, --at or --cron")?;
            if self.ws.is_some() || self.file.is_some() || self.every.is_some() {
                return Err(SourceArgError::TimerWithSource);
            }
            return Ok(timer);
        }
        if let Some(terminal_id) = &self.terminal {
            no_command("--terminal")?;
            return Ok(Source::Terminal {
                terminal_id: terminal_id.clone(),
            });
        }
        if command.trim().is_empty() {
            return Err(SourceArgError::NoCommand);
        }
        Ok(match self.every {
            Some(every_ms) => Source::Poll { command, every_ms },
            None => Source::Command { command },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_values() {
        assert_eq!(non_negative("0"), Ok(0));
        assert_eq!(non_negative("300000"), Ok(300_000));
        assert!(non_negative("-5")
            .unwrap_err()
            .to_string()
            .contains("non-negative"));
        assert!(non_negative("5ms")
            .unwrap_err()
            .to_string()
            .contains("non-negative"));
        assert!(non_negative("99999999999999999999")
            .unwrap_err()
            .to_string()
            .contains("too large"));
        assert_eq!(busy_exit_code("75"), Ok(75));
        assert!(busy_exit_code("0").is_err());
        assert!(busy_exit_code("256").is_err());
        assert!(busy_exit_code("-1")
            .unwrap_err()
            .to_string()
            .contains("non-negative"));
    }
}
