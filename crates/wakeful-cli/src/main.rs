//! `wakeful`: the command line. Parsing, talking to the daemon and printing;
//! the work is done by the library crates.

mod claude_mode;
mod cli;
mod commands;
mod hook;
mod integrate;
mod monitor_args;
mod output;
mod plugin_cmd;
mod render;

use std::process::ExitCode;

use clap::Parser;

/// A failure with its exit code (SPEC §7).
pub struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    /// A failure with exit `code`.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl From<wakeful_client::ClientError> for Failure {
    fn from(e: wakeful_client::ClientError) -> Self {
        Failure::new(e.exit_code(), e.to_string())
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::new(1, e.to_string())
    }
}

/// Exit codes of SPEC §7.
pub mod exit {
    /// Something failed.
    pub const FAILURE: u8 = 1;
    /// Invalid input or usage.
    pub const USAGE: u8 = 2;
}

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
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
    let result = runtime.block_on(commands::run(cli));
    // Do not wait for blocking reads of stdin or files still in flight.
    runtime.shutdown_background();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("wakeful: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}
