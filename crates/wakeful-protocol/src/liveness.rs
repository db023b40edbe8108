//! Whether a wake will come: what the daemon tells an agent that starts a
//! monitor (`wake` in [`crate::StartResult`] and [`crate::RunResult`]) and
//! what `wakeful doctor` reports ([`WakeReport`]).

use serde::{Deserialize, Serialize};

/// Whether something will deliver the session's events to its agent now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WakeInfo {
    /// The path that delivers: `claude-code` (the plugin's bridge or rewake
    /// hook), `gemini`, `monitor_wait`, `wait:<consumer>`, `mcp-channel`, a
    /// wake route (`codex`, `opencode`, `exec`, `webhook`), or `none`.
    pub route: String,
    /// True only when that path is attached and working now.
    pub live: bool,
    /// Why, in one or two sentences; when `live` is false it says what to
    /// do (call `wakeful wait` or `monitor_wait` before ending the turn).
    pub reason: String,
}

/// One way a session's events could reach its agent (an element of
/// [`WakeReport::paths`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WakePath {
    /// As [`WakeInfo::route`].
    pub path: String,
    /// Attached and working now.
    pub live: bool,
    /// What was found.
    pub detail: String,
}

/// Result of [`crate::Request::WakeCheck`]: the verdict and every path
/// that was looked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WakeReport {
    /// The session.
    pub session: String,
    /// The verdict, as `start` reports it.
    pub wake: WakeInfo,
    /// Every path with something attached or configured, live or not.
    pub paths: Vec<WakePath>,
}
