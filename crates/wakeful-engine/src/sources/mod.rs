//! The sources a monitor can watch, each an [`crate::source::InputSource`]
//! that the monitor loop drives: commands (through the process driver),
//! files (`tail -F`), polls (edge-triggered) and WebSockets. Terminals'
//! attached monitors are in [`crate::terminal`].

pub(crate) mod command;
pub(crate) mod file;
pub(crate) mod poll;
pub(crate) mod ws;
