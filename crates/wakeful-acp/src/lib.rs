//! # wakeful-acp
//!
//! `wakeful acp-proxy -- AGENT…`: the command an editor that speaks the
//! Agent Client Protocol (Zed, JetBrains) launches as its agent. It starts
//! the real agent in a process group of its own, forwards every JSON-RPC
//! message both ways unchanged, and, when the editor's session is idle and
//! wakeful has events that wake, prompts the agent with them as a turn of
//! that session, which the editor shows (docs/agents/acp.md).
//!
//! - [`state`]: the pure machine (sessions, prompts in flight, the queue
//!   behind a wake turn, ids), unit-tested without processes;
//! - the IO around it (the agent's process, the two streams, the waiter
//!   that takes events from the daemon as consumer [`CONSUMER`]) is private.
//!
//! One wakeful session per proxy: `--session`, else `acp-<random>`. The
//! agent gets it as `WAKEFUL_SESSION`, so monitors its shell tool starts
//! (`wakeful start`, `wakeful run`) land in it, and `WAKEFUL_ACP_PROXY`
//! (the proxy's pid) marks its processes.

pub mod state;

mod proxy;

use wakeful_client::Paths;

/// The consumer whose cursor the proxy's deliveries move.
pub const CONSUMER: &str = wakeful_protocol::consumer::ACP;
/// Set in the agent's environment to the proxy's pid.
pub const PROXY_ENV: &str = "WAKEFUL_ACP_PROXY";
/// Set in the agent's environment to `--wake-on`'s rule, which `wakeful
/// start`/`watch`/`run` take as their default `--wake-on`.
pub const WAKE_ON_ENV: &str = "WAKEFUL_WAKE_ON";

/// How to run the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The agent's command line (program first).
    pub agent: Vec<String>,
    /// The wakeful session of this proxy.
    pub session: String,
    /// The default `wake_on` rule of the monitors the agent starts.
    pub wake_on: Option<String>,
}

/// A session name of its own for one proxy: `acp-` and 12 random letters
/// and digits.
pub fn new_session_name() -> String {
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let tail: String = (0..12)
        .map(|_| char::from(ALPHABET[fastrand::usize(..ALPHABET.len())]))
        .collect();
    format!("acp-{tail}")
}

/// Why the proxy could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Invalid usage (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The agent could not be started.
    #[error("cannot start the agent {0}: {1}")]
    Spawn(String, std::io::Error),
}

impl Error {
    /// The exit code this error means (docs/CONTRACT.md §7).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => 2,
            Error::Spawn(..) => 1,
        }
    }
}

/// Runs the proxy on this process's stdin and stdout until the editor
/// closes stdin (exit 0, the agent's group ended) or the agent ends (its
/// exit code).
pub async fn run(paths: Paths, opts: Options) -> Result<u8, Error> {
    proxy::run(paths, opts).await
}

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
