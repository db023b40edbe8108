//! `wakeful`: the command line. Parsing and printing only; the work is done
//! by the library crates.

mod monitor_args;
mod render;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use wakeful_core::{MonitorSpec, Source};
use wakeful_engine::{MonitorRegistry, RegistryConfig, StartError, StartOptions};

use monitor_args::MonitorArgs;

/// Exit codes of SPEC §7.
mod exit {
    pub const FAILURE: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const LIMIT: u8 = 4;
}

#[derive(Debug, Parser)]
#[command(
    name = "wakeful",
    version,
    about = "Monitors for AI coding agents: background watchers whose output lines become events that wake the agent."
)]
struct Cli {
    /// Machine-readable output (one JSON object a line for event streams).
    #[arg(long, global = true)]
    json: bool,
    /// The session (default: $WAKEFUL_SESSION, $CLAUDE_CODE_SESSION_ID, $CODEX_THREAD_ID, "default").
    #[arg(long, global = true)]
    session: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start a command monitor and print its events until it ends.
    #[command(
        after_help = "Examples:\n  wakeful watch -d 'build errors' --filter 'error|warning' -- cargo build\n  wakeful watch --until exit -- make test\n  wakeful watch --json --timeout-ms 60000 -- tail -F /var/log/app.log"
    )]
    Watch {
        #[command(flatten)]
        monitor: MonitorArgs,
        /// The shell command (run with `sh -c`).
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
}

struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("wakeful: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("wakeful: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

async fn run(cli: Cli) -> Result<u8, Failure> {
    let session =
        wakeful_core::session::resolve_session(cli.session.as_deref(), |k| std::env::var(k).ok());
    match cli.command {
        Command::Watch { monitor, command } => {
            let spec = monitor.to_spec(Source::Command {
                command: command.join(" "),
            });
            watch_local(spec, session, cli.json).await
        }
    }
}

fn start_failure(e: StartError) -> Failure {
    match e {
        StartError::Invalid(_) | StartError::Cwd(_) => Failure::new(exit::USAGE, e.to_string()),
        StartError::Limit { .. } => Failure::new(exit::LIMIT, e.to_string()),
        StartError::Closed => Failure::new(exit::FAILURE, e.to_string()),
    }
}

async fn watch_local(spec: MonitorSpec, session: String, json: bool) -> Result<u8, Failure> {
    spec.validate()
        .map_err(|e| Failure::new(exit::USAGE, e.to_string()))?;
    let mut config = RegistryConfig::default();
    if let Some(home) = std::env::var_os("WAKEFUL_HOME") {
        config.output_dir = std::path::PathBuf::from(home).join("output");
    }
    config.session = session;
    let registry = MonitorRegistry::new(config);
    let mut events = registry.subscribe();
    let started = registry
        .start_with(spec, StartOptions::default())
        .await
        .map_err(start_failure)?;
    let id = started.info.id;
    let stdout = std::io::stdout();
    loop {
        tokio::select! {
            ev = events.recv() => {
                let ev = match ev {
                    Ok(ev) => ev,
                    Err(e) => return Err(Failure::new(exit::FAILURE, format!("event stream: {e}"))),
                };
                if ev.monitor_id != id {
                    continue;
                }
                let mut out = stdout.lock();
                let res = if json { render::json_line(&mut out, &ev) } else { render::watch_plain(&mut out, &ev) };
                let _ = out.flush();
                if res.is_err() {
                    // stdout closed: the reader is gone; stop the monitor.
                    let _ = registry.stop(&id).await;
                    return Ok(exit::FAILURE);
                }
                if ev.kind().is_terminal() {
                    return Ok(render::watch_exit_code(&ev));
                }
            }
            _ = tokio::signal::ctrl_c() => {
                let _ = registry.stop(&id).await;
            }
        }
    }
}
