//! Codex: the wake adapter that starts a turn in a Codex thread through its
//! app-server ([`wake_adapter`], the daemon's side), and what can be told of Codex
//! from outside ([`probe`]), what `wakeful doctor` reports of a Codex
//! route ([`route_check`]), when a session is routed to its Codex thread
//! without being asked ([`auto_route`]), and Codex's own hooks: the
//! SessionStart and Stop hooks ([`hooks`]) and their installer into
//! Codex's `config.toml` ([`config`]).

use std::path::{Path, PathBuf};

pub mod auto_route;
#[cfg(feature = "hooks")]
pub mod config;
#[cfg(feature = "hooks")]
pub mod hooks;
pub mod probe;
pub mod route_check;
#[cfg(feature = "daemon")]
pub mod wake_adapter;

/// The `codex` executable a route runs: its `binary`, else `codex` on
/// `PATH`.
pub fn program(binary: Option<&Path>) -> PathBuf {
    binary.map_or_else(|| PathBuf::from("codex"), Path::to_path_buf)
}
