//! # wakeful-client
//!
//! A program's side of talking to the wakeful daemon: a [`Connection`] that
//! starts the daemon on demand ([`connect`]) and speaks the protocol of
//! [`wakeful_protocol`], the typed [`stream`]s (events, a `wait`'s batches,
//! a follower that outlives the daemon), [`handover`]: a stdout made ready
//! for the daemon to write events to, and [`output_file`]: a monitor's
//! output file read by line numbers, across its segments and dropped
//! ranges. The messages themselves are in `wakeful-protocol`, which the
//! daemon shares; this crate knows nothing of the daemon's insides.

pub mod client;
pub mod handover;
pub mod output_file;
pub mod stream;

pub use client::{
    connect, connect_existing, digest, stop_daemon, wait_gone, ClientError, Connection, VERSION,
};
pub use stream::{EventStream, Followed, Follower, StreamEvent, Waiter};
pub use wakeful_protocol::{self as protocol, ErrorKind, Paths, Reply, Request, PROTOCOL_VERSION};

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
