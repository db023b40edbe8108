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
//! - [`process`]: process groups and the process table.
//! - [`output`]: output files.

mod monitor;
pub mod output;
pub mod process;
pub mod registry;

pub use monitor::Launch;
pub use registry::{
    new_id, new_monitor_id, MonitorRegistry, RecvError, Registry, RegistryConfig, StartError,
    StartOptions, Started, StopError, Subscription,
};
pub use wakeful_core::journal::{Journal, JournalEntry, JournalError, MemoryJournal};
