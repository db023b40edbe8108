//! # wakeful-agents
//!
//! Everything wakeful knows of the agents it wakes, one module per agent:
//!
//! - [`claude_code`]: the hooks and plugin monitor behind the Claude Code
//!   plugin, the probe that tells a print run from an interactive session,
//!   and the plugin's files (embedded) and monitors;
//! - [`gemini`]: the Gemini CLI hooks and their installer into Gemini's
//!   `settings.json`;
//! - [`codex`]: the wake adapter that starts a turn in a Codex thread, and a
//!   probe of Codex's app-server and thread locks;
//! - [`opencode`]: the wake adapter that posts a prompt to OpenCode.
//!
//! What the agents share: [`hook`] (hook input, the session's order, taking
//! a batch of events), [`agent_process`] (finding an agent's process),
//! [`process_record`] (one session per agent process),
//! [`install`], [`doctor_check`] (the findings of `wakeful doctor`),
//! [`route_probe`] (doctor's probe of a wake route's target) and, for the
//! daemon, [`wake_adapters`] (the adapters behind a wake route, exec and webhook
//! among them).
//!
//! Two features, as the two sides that use them: `hooks` (the client side:
//! hooks, probes and installers, run by the `wakeful` command) and `daemon`
//! (the wake adapters, run by the daemon). Both are on by default.

#[cfg(feature = "hooks")]
pub mod agent_process;
#[cfg(feature = "hooks")]
pub mod claude_code;
pub mod codex;
#[cfg(feature = "daemon")]
mod delivery;
pub mod doctor_check;
#[cfg(feature = "hooks")]
mod error;
#[cfg(feature = "hooks")]
pub mod gemini;
#[cfg(feature = "hooks")]
pub mod hook;
#[cfg(feature = "hooks")]
pub mod install;
#[cfg(feature = "daemon")]
pub mod opencode;
#[cfg(feature = "hooks")]
pub mod process_record;
pub mod route_probe;
#[cfg(feature = "daemon")]
pub mod wake_adapters;

#[cfg(feature = "daemon")]
pub use delivery::Wake;
#[cfg(feature = "hooks")]
pub use error::Error;

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
