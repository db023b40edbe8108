//! # wakeful-mcp
//!
//! `wakeful mcp`: a Model Context Protocol server on stdin/stdout (docs/CONTRACT.md §8),
//! built on the official Rust SDK ([`rmcp`]). It talks to the wakeful daemon
//! (starting it on demand) and offers:
//!
//! - the tools `monitor_start`, `monitor_list`, `monitor_stop`,
//!   `monitor_events`, `monitor_wait` and `terminal_run`, with the parameter
//!   names of docs/CONTRACT.md §3 ([`tools`], [`args`]), answering with
//!   results built from the daemon's typed replies ([`results`]);
//! - Claude Code channel push: the server declares the experimental
//!   capability `claude/channel` and every new event of its session is sent
//!   as a `notifications/claude/channel` notification ([`channel`]), by the
//!   daemon itself when stdout could be handed to it ([`stdout`]).
//!
//! It speaks the MCP revisions that open with `initialize` and MCP
//! 2026-07-28; which one a dual-era client gets is chosen by
//! [`era::Protocol`] from what the client says about itself ([`era`]).
//! [`handler`] sends each request to the part of the server that answers it.
//!
//! [`serve_stdio`] runs the server until the client closes stdin.

#![forbid(unsafe_code)]

pub mod args;
pub mod channel;
pub mod era;
pub mod events;
pub mod handler;
mod listeners;
pub mod results;
pub mod server;
pub mod session;
pub mod stdout;
pub mod tasks;
pub mod tools;
pub mod written;

use rmcp::ServiceExt;
use wakeful_client::Paths;

pub use server::WakefulServer;
pub use session::SessionChoice;

/// The consumer whose cursor `monitor_wait` reads and moves.
pub const CONSUMER: &str = wakeful_protocol::consumer::MCP;

/// Why the MCP server could not run.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The server's working directory (passed to the monitors it starts)
    /// cannot be read.
    #[error("cannot read the working directory of `wakeful mcp`: {0}")]
    Cwd(#[source] std::io::Error),
    /// The client left or misbehaved before the MCP handshake completed.
    #[error("the MCP handshake on stdin/stdout failed: {0}; `wakeful mcp` is meant to be started by an MCP client (see docs/agents/mcp.md)")]
    Handshake(String),
    /// The server's task ended abnormally.
    #[error("the MCP server stopped unexpectedly: {0}")]
    Stopped(String),
}

/// Serves MCP on this process's stdin/stdout until the client closes the
/// connection, for the sessions `session` chooses, on the revisions of
/// `protocol` (`claude_channels`: the Claude Code that started this process
/// runs with channels on, see [`era::Protocol::modern_for`]). Monitors are
/// started in the daemon of `paths`, with this process's environment and
/// working directory as their base.
pub async fn serve_stdio(
    paths: Paths,
    session: SessionChoice,
    protocol: era::Protocol,
    claude_channels: bool,
) -> Result<(), McpError> {
    let cwd = std::env::current_dir().map_err(McpError::Cwd)?;
    // The frame lock lets the daemon write channel notifications to this
    // stdout between the frames this process writes; without it, events are
    // relayed.
    let handover = match wakeful_protocol::FrameLock::create() {
        Ok((mine, theirs)) => Some(channel::Handover {
            mine: std::sync::Arc::new(mine),
            theirs,
        }),
        Err(e) => {
            eprintln!("wakeful mcp: cannot create the frame lock ({e}); events will be relayed");
            None
        }
    };
    let lock = handover.as_ref().map(|h| h.mine.clone());
    let server = WakefulServer::new(paths, session, std::env::vars().collect(), cwd)
        .with_protocol(protocol)
        .with_claude_channels(claude_channels)
        .with_handover(handover);
    let (read, write) = rmcp::transport::stdio_pipes();
    let transport = written::Written::new(
        rmcp::transport::async_rw::AsyncRwTransport::new_server(
            read,
            events::declared::Declared::new(stdout::Locked::new(write, lock)),
        ),
        server.receipts(),
    );
    let running = match handler::Era(server.clone()).serve(transport).await {
        Ok(running) => running,
        // A 2026-07-28 client that probed with `server/discover` and left
        // (it may cache the answer) ended the connection normally.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) if server.discovered() => {
            return Ok(())
        }
        Err(e) => return Err(McpError::Handshake(e.to_string())),
    };
    let quit = running.waiting().await;
    server.shutdown();
    quit.map(|_| ())
        .map_err(|e| McpError::Stopped(e.to_string()))
}

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
