#![warn(missing_docs)]
//! # wakeful-client
//!
//! Everything a program needs to talk to the wakeful daemon, and nothing of
//! the daemon itself:
//! - [`paths`]: where state, socket and configuration live;
//! - [`protocol`]: the versioned JSON messages on the socket;
//! - [`client`]: a connection that starts the daemon on demand.
//! - [`describe`]: monitor descriptions by id, cached.

pub mod client;
pub mod describe;
pub mod paths;
pub mod protocol;

pub use client::{connect, connect_existing, ClientError, Connection};
pub use paths::Paths;
pub use protocol::{ErrorKind, Reply, Request, RunResult, StartResult, Status, PROTOCOL_VERSION};
