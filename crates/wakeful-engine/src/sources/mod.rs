//! The sources a monitor can watch, each an [`crate::source::InputSource`]
//! that the monitor loop drives: commands (through the process driver),
//! files (`tail -F`), polls (edge-triggered), WebSockets, replays of
//! recorded monitors, timers and processes wakeful did not start (`--pid`).
//! Terminals'
//! attached monitors are in [`crate::terminal`].

pub(crate) mod command;
pub(crate) mod file;
pub(crate) mod pid;
pub(crate) mod poll;
pub(crate) mod replay;
pub(crate) mod timer;
pub(crate) mod ws;
