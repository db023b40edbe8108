//! # wakeful-core
//!
//! The vocabulary of wakeful and the pure logic that turns a source's bytes into
//! events. Nothing in this crate performs IO or reads the clock: every state
//! machine takes the current [`std::time::Instant`] as an argument, so it can be
//! unit-tested deterministically.
//!
//! - [`params`]: what a monitor is asked to do ([`MonitorSpec`]) and its validation.
//! - [`event`]: the events a monitor produces ([`Event`], [`EventBody`],
//!   [`MonitorStopReason`]) and their JSON wire shape.
//! - [`export`]: the `wakeful export --format jsonl` file (read by import
//!   and replay).
//! - [`info`]: what a listing shows about a monitor ([`MonitorInfo`]).
//! - [`journal`]: the interface between the engine and a store ([`journal::Journal`]).
//! - [`lines`]: splitting a byte stream into lines ([`LineSplitter`]).
//! - [`batch`]: leading-edge batching of lines into events ([`Batcher`]).
//! - [`rate`]: the per-monitor token bucket and suppression reports ([`RateGate`]).
//! - [`machine`]: everything above combined with filters, `until`, limits and
//!   timeouts into one per-monitor state machine ([`MonitorMachine`]).
//! - [`terminal`]: managed commands monitors attach to ([`terminal::TerminalInfo`]).
//! - [`present`]: every text shown to a model or a person (sanitizing,
//!   cutting, labels, framing).
//! - [`channel`]: the Claude Code channel notification of an event, and
//!   which events wait for the next one that wakes ([`channel::Held`]).
//! - [`digest`]: what an agent coming back should know about its monitors
//!   ([`digest::Digest`]).
//! - [`wake_machine`]: delivering events to an agent as a new turn ([`wake_machine::WakeMachine`]).
//! - [`session`]: which session a client speaks for.
//! - [`stop`]: SIGTERM, grace, SIGKILL and the survivors report ([`stop::StopPlan`]).
//! - [`outlog`]: the layout of bounded output files (segments, dropped
//!   ranges, the manifest) and the reports of what was dropped.
//! - [`timer`]: `--in`, `--at` and `--cron` read into deadlines, and when a
//!   timer fires ([`timer::TimerMachine`]).
//! - [`task`]: the book of background tasks (a wait that an MCP client
//!   fetches later by id), with their statuses, time to live and limit.
//! - [`pid`]: `--pid`: which process a pid names (pid and start time), and
//!   when the watched one has exited ([`pid::judge`]).
//! - [`storage`]: sizes, ages, keep-free space, and which ended monitors a
//!   prune removes ([`storage::plan`]).

#![forbid(unsafe_code)]

pub mod batch;
pub mod channel;
pub mod digest;
pub mod event;
pub mod export;
pub mod info;
pub mod journal;
pub mod lines;
pub mod machine;
pub mod outlog;
pub mod params;
pub mod pid;
pub mod present;
pub mod rate;
pub mod session;
pub mod stop;
pub mod storage;
pub mod task;
pub mod terminal;
pub mod timer;
pub mod wait;
pub mod wake_machine;

/// The presenter under its former name.
pub use present as text;

pub use batch::Batcher;
pub use event::{
    Event, EventBody, EventKind, MonitorStopReason, PendingEvent, ProcessExit, Unverified,
};
pub use info::{MonitorInfo, MonitorState};
pub use lines::{Line, LineSplitter, Stream};
pub use machine::{MonitorMachine, Step};
pub use params::{MonitorSpec, ParamError, ReplaySpeed, Source, StderrMode, Until, WakeOn};
pub use rate::RateGate;

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
