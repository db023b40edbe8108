#![warn(missing_docs)]
//! # wakeful-view
//!
//! The live view of wakeful for people: what runs, its latest lines, the
//! command; stop one in place; keep watching after everything ended.
//!
//! - [`model`]: the monitors (from `list`, kept current by events) and their
//!   activity per minute, pure.
//! - [`events`]: the events pane as a state machine (follow, pause, search,
//!   error jumps), pure.
//! - [`app`]: the terminal view's state and keys, pure.
//! - [`feed`]: the daemon's read-only stream with reconnection (IO).
//! - [`output`]: an output file by line numbers (IO).
//! - [`tui`]: `wakeful tui` (ratatui + crossterm).
//! - [`web`]: `wakeful web` (axum, server-sent events).
//!
//! Everything reaches the daemon read-only (`list`, `events`/`events_all`
//! with `follow`, `consumers`, `wake_show`), except the stop action (`stop`).
//! Nothing is ever acknowledged, so a view never takes an event from an
//! agent. Every string that came from a monitor is drawn through
//! [`wakeful_core::text::sanitize_for_model`].

pub mod app;
pub mod events;
pub mod model;
