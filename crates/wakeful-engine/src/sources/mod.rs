//! The sources a monitor can watch. Commands have their own loop (process
//! groups, two pipes, drain on exit); the others produce [`crate::monitor::Input`]s
//! for the shared loop [`crate::monitor::drive`].

pub(crate) mod command;
pub(crate) mod file;
pub(crate) mod poll;
pub(crate) mod ws;
