//! # wakeful-cluster
//!
//! wakeful beyond one machine, through NATS JetStream (docs/CLUSTER.md).
//! Each host's SQLite log stays its source of truth; JetStream is the
//! transport between hosts and the buffer while one is away.
//!
//! - **Shipping** ([`ship`]): one task reads this host's committed events
//!   after the *shipped mark* (a store cursor) and publishes them, in seq
//!   order, to the stream [`subject::STREAM`] on
//!   `wakeful.ev.<session>.<host>.<monitor>` with `Nats-Msg-Id:
//!   <host>/<seq>`; the mark moves over the acknowledged prefix. It wakes on
//!   the event hub's commits, never polls.
//! - **Importing** ([`import`]): a durable pull consumer per host hands the
//!   other hosts' events to the daemon's import path (new local seq, origin
//!   kept and unique, `host` set) and acknowledges them after the local
//!   commit.
//! - **Directory** ([`directory`]): each host's monitors and heartbeat in
//!   two key-value buckets, for `list --all-hosts` and `cluster status`.
//! - **Remote control** ([`control`]): `start --host` and `stop` as NATS
//!   requests to the host's daemon, which accepts them only with
//!   `accept_remote = true`.
//!
//! The daemon starts a [`Link`] only when `config.toml` has `[cluster]`
//! ([`ClusterConfig`]); without it nothing of this crate runs.

#![forbid(unsafe_code)]

pub mod config;
pub mod control;
pub mod diagnose;
pub mod directory;
pub mod import;
mod link;
mod shared;
pub mod ship;
pub mod subject;

pub use config::{ClusterConfig, TlsConfig};
pub use link::Link;
pub use shared::{BoxFuture, LinkError, Node, NodeImportError};

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
