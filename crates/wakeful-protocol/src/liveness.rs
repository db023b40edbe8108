//! Whether a wake will come: what the daemon tells an agent that starts a
//! monitor (`wake` in [`crate::StartResult`] and [`crate::RunResult`]) and
//! what `wakeful doctor` reports ([`WakeReport`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::consumer::Consumer;

/// A path that delivers a session's events to its agent ([`WakeInfo::route`],
/// [`WakePath::path`]). On the wire it is its name: `claude-code`,
/// `monitor_wait`, `mcp-channel`, `wait:<consumer>`, a wake route's adapter
/// (`codex`, `opencode`, `exec`, `webhook`), or `none`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum WakeVia {
    /// The Claude Code plugin: its monitor bridge or rewake hook (waiters
    /// of consumer `claude`).
    ClaudeCode,
    /// A `monitor_wait` call (waiters of consumer `mcp`).
    MonitorWait,
    /// An MCP client that shows channel notifications.
    McpChannel,
    /// Waiters of any other consumer (`wakeful wait --consumer NAME`).
    Wait(Consumer),
    /// The session's wake route, by its adapter's name
    /// ([`crate::WakeAdapter::name`]).
    Route(String),
    /// Nothing.
    None,
}

impl WakeVia {
    /// The name on the wire.
    pub fn name(&self) -> String {
        match self {
            WakeVia::ClaudeCode => "claude-code".into(),
            WakeVia::MonitorWait => "monitor_wait".into(),
            WakeVia::McpChannel => "mcp-channel".into(),
            WakeVia::Wait(consumer) => format!("wait:{consumer}"),
            WakeVia::Route(adapter) => adapter.clone(),
            WakeVia::None => "none".into(),
        }
    }
}

impl From<String> for WakeVia {
    /// What a name on the wire means; a name this version does not know is
    /// taken as a wake route's.
    fn from(name: String) -> Self {
        match name.as_str() {
            "claude-code" => WakeVia::ClaudeCode,
            "monitor_wait" => WakeVia::MonitorWait,
            "mcp-channel" => WakeVia::McpChannel,
            "none" => WakeVia::None,
            _ => match name.strip_prefix("wait:") {
                Some(consumer) => WakeVia::Wait(Consumer::from_name(consumer)),
                None => WakeVia::Route(name),
            },
        }
    }
}

impl From<WakeVia> for String {
    fn from(via: WakeVia) -> Self {
        via.name()
    }
}

impl fmt::Display for WakeVia {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Whether something will deliver the session's events to its agent now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WakeInfo {
    /// The path that delivers (or, when nothing does, the first one looked
    /// at, else [`WakeVia::None`]).
    pub route: WakeVia,
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
    /// The path.
    pub path: WakeVia,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_is_its_name_on_the_wire_and_back() {
        for (via, name) in [
            (WakeVia::ClaudeCode, "claude-code"),
            (WakeVia::MonitorWait, "monitor_wait"),
            (WakeVia::McpChannel, "mcp-channel"),
            (WakeVia::Wait(Consumer::Named("ci".into())), "wait:ci"),
            (WakeVia::Wait(Consumer::Gemini), "wait:gemini"),
            (WakeVia::Route("codex".into()), "codex"),
            (WakeVia::None, "none"),
        ] {
            let json = serde_json::to_string(&via).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<WakeVia>(&json).unwrap(), via);
            assert_eq!(via.to_string(), name);
        }
    }
}
