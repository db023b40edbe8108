//! # wakeful-engine
//!
//! Runs monitors: the IO edge around the pure state machines of
//! [`wakeful_core`]. It starts each command in a process group of its own,
//! reads its stdout and stderr concurrently, writes every line to the
//! monitor's output file, turns lines into events, and stops the whole group
//! (SIGTERM, grace, SIGKILL) when the monitor ends.
//!
//! - [`MonitorRegistry`]: the embeddable entry point (start, list, stop,
//!   subscribe); see [`registry`] for an example.
//! - [`hub`]: where events are committed (group commit) and followed by
//!   every reader.
//! - [`process`]: process groups, process trees, containers, the reaper, and
//!   stopping everything a command started.
//! - [`terminal`]: managed commands that monitors attach to.
//! - [`net`]: which addresses network sources may reach, and an HTTP
//!   client that keeps to it.
//! - sources: command, file (`tail -F`), poll (edge-triggered), WebSocket, terminal.
//! - [`output_writer`]: output files written, bounded by their caps and the disk.
//! - [`disk`]: the free space of the state directory's filesystem.

pub mod disk;
mod feed;
pub mod hub;
mod id;
mod monitor;
pub mod net;
pub mod output_writer;
pub mod process;
pub mod registry;
mod source;
mod sources;
pub mod terminal;

pub use disk::{DiskGuard, DiskReading};
pub use hub::{
    AppendError, Committed, Filter, Follow, FollowError, Hub, InlineWriter, Replay, ReplayError,
    DEFAULT_FOLD_DELAY,
};
pub use id::{new_id, new_monitor_id};
pub use net::NetPolicy;
pub use output_writer::OutputBudget;
pub use registry::{
    HandedMonitor, MonitorRegistry, RecvError, Registry, RegistryConfig, StartError, StartOptions,
    Started, StopError, Subscription,
};
pub use source::Launch;
pub use terminal::{TerminalError, Terminals};
pub use wakeful_core::journal::{Journal, JournalEntry, JournalError, MemoryJournal, Recorded};

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
