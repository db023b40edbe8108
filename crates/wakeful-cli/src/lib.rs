//! `wakeful`: the command line. Parsing, talking to the daemon and printing;
//! the work is done by the library crates. `main.rs` parses the command
//! line ([`Cli`]) and hands it to [`run`].
//!
//! Nothing prints to stdout with `println!` (which panics on a closed pipe):
//! `outln!` and `Write` on a locked stdout return the error instead.
#![deny(clippy::print_stdout)]

/// Writes one line to stdout, like `println!`, but returns the
/// `std::io::Result` instead of panicking: a closed stdout is a
/// `BrokenPipe` error, which [`Failure`] turns into a quiet exit 141.
macro_rules! outln {
    () => {
        $crate::stdout_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::stdout_line(format_args!($($arg)*))
    };
}

mod cli;
mod commands;
mod doctor_cmd;
mod export;
mod integrate;
mod monitor_args;
mod output_cmd;
mod package;
mod plugin_cmd;
mod render;
mod selftest;
mod storage;
mod timer_args;
mod upgrade;

pub use cli::Cli;

/// `wakeful --version`: the package version, with the git revision when
/// built from a checkout (`0.1.0 (abc1234)`; see build.rs).
pub const VERSION: &str = env!("WAKEFUL_VERSION");

use std::io::Write;
use std::process::ExitCode;

/// The body of [`outln!`]: one line to stdout, errors returned.
fn stdout_line(args: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)?;
    out.write_all(b"\n")
}

/// Connects to the daemon (starting it if needed) and asks one question.
async fn ask<C: wakeful_protocol::Call>(
    paths: &wakeful_client::Paths,
    request: C,
) -> Result<C::Reply, Failure> {
    Ok(wakeful_client::connect(paths).await?.call(request).await?)
}

/// A failure with its exit code (docs/CONTRACT.md §7) and what to tell the user.
pub struct Failure {
    code: u8,
    message: String,
    /// End without a word on stderr (a closed stdout).
    quiet: bool,
}

impl Failure {
    /// A failure with exit `code`.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
            quiet: false,
        }
    }

    /// Stdout was closed by its reader (`wakeful output ID | head -1`): end
    /// quietly with 128+SIGPIPE, as coreutils do.
    pub fn closed_stdout(e: &std::io::Error) -> Self {
        Failure {
            code: exit::CLOSED_STDOUT,
            message: e.to_string(),
            quiet: true,
        }
    }
}

impl From<wakeful_client::ClientError> for Failure {
    fn from(e: wakeful_client::ClientError) -> Self {
        Failure::new(e.exit_code(), e.to_string())
    }
}

impl From<wakeful_agents::Error> for Failure {
    fn from(e: wakeful_agents::Error) -> Self {
        match e {
            wakeful_agents::Error::Usage(m) => Failure::new(exit::USAGE, m),
            wakeful_agents::Error::Failed(m) => Failure::new(exit::FAILURE, m),
            wakeful_agents::Error::Io(e) => Failure::from(e),
            wakeful_agents::Error::Client(e) => Failure::from(e),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Failure::closed_stdout(&e);
        }
        Failure::new(exit::FAILURE, e.to_string())
    }
}

/// Exit codes of docs/CONTRACT.md §7.
pub mod exit {
    /// Something failed.
    pub const FAILURE: u8 = 1;
    /// Invalid input or usage.
    pub const USAGE: u8 = 2;
    /// `wait` timed out; `watch`: the monitor timed out.
    pub const TIMEOUT: u8 = 124;
    /// `watch` got SIGINT (128 + 2).
    pub const INTERRUPTED: u8 = 130;
    /// `watch` got SIGTERM, or its monitor was stopped (128 + 15).
    pub const TERMINATED: u8 = 143;
    /// Stdout was closed by its reader: 128 + SIGPIPE, said nothing.
    pub const CLOSED_STDOUT: u8 = 141;
}

/// Runs the parsed command line on the runtime it needs and says what it
/// failed at; returns the exit code.
pub fn run(cli: Cli) -> ExitCode {
    // The daemon runs its tasks on one worker thread: a line's way is one
    // task (the monitor's commits it and writes it to waiting readers), and
    // a second worker only added wake-ups of that worker on the line's way
    // (a followed file's line: 0.86–0.95× `tail -F | grep` on one, 0.88–1.12×
    // on two, docs/BENCHMARKS.md). What blocks — the store's folds, SQLite
    // writes of acknowledgements — runs on the runtime's blocking threads or
    // is short. The live views run many tasks at once: two worker threads. A
    // client (`events --follow`, `wait`, `list`, `wakeful mcp`, a hook …)
    // runs a few tasks that hand each event on: on one thread, each
    // hand-over is a plain task switch instead of a wake-up of another
    // thread, and no worker threads are started.
    let mut builder = match cli.command {
        cli::Command::Daemon(_) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(1);
            b
        }
        cli::Command::Tui { .. } | cli::Command::Web { .. } => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(2);
            b
        }
        _ => tokio::runtime::Builder::new_current_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("wakeful: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    // The daemon's main thread starts every command and alone may replace
    // the program (an upgrade keeps the commands running): the daemon
    // runs on the runtime's worker.
    let serves_commands = match &cli.command {
        cli::Command::Daemon(cli::DaemonArgs {
            foreground: true,
            action: None,
            ready_fd,
        }) => Some(*ready_fd),
        _ => None,
    };
    let result = if let Some(ready_fd) = serves_commands {
        let daemon = async move {
            let paths = wakeful_client::Paths::from_env()
                .map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?;
            commands::serve_daemon(paths, ready_fd).await
        };
        wakeful_engine::process::spawner::serve(&runtime, daemon).unwrap_or_else(|| {
            Err(Failure::new(
                exit::FAILURE,
                "the daemon ended unexpectedly (a panic: see its log)",
            ))
        })
    } else {
        runtime.block_on(commands::run(cli))
    };
    // Do not wait for blocking reads of stdin or files still in flight.
    runtime.shutdown_background();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            if !f.quiet {
                // Nothing more can be said when stderr is closed too.
                let _ = writeln!(std::io::stderr(), "wakeful: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
