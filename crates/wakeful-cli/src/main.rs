//! `wakeful`: parses the command line and runs it (the work is in the
//! library, `src/lib.rs`).
#![deny(clippy::print_stdout)]

use clap::Parser;

fn main() -> std::process::ExitCode {
    wakeful_cli::run(wakeful_cli::Cli::parse())
}
