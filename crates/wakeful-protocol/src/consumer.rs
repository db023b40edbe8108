//! Who reads a session's events with a cursor of its own: the consumers
//! wakeful itself names, in one place.
//!
//! A consumer is a name on the wire (`wait`'s `consumer`, `consumers`'
//! rows); [`Consumer`] is what the name means. Each of wakeful's clients
//! reads as one consumer of its own, so that one never takes another's
//! events: the Claude Code plugin as `claude`, the Gemini hooks as `gemini`,
//! the Codex hooks as `codex`,
//! `wakeful mcp`'s `monitor_wait` as `mcp`, the ACP proxy as `acp`, the
//! daemon's wake route as `wake`, and `wakeful wait` as `default` or the
//! name its `--consumer` gives.
//!
//! ```
//! use wakeful_protocol::Consumer;
//!
//! assert_eq!(Consumer::Mcp.name(), "mcp");
//! assert_eq!(Consumer::from_name("claude"), Consumer::Claude);
//! assert_eq!(Consumer::from_name("mon-1a2b"), Consumer::Monitor("mon-1a2b".into()));
//! assert_eq!(Consumer::from_name("ci").to_string(), "ci");
//! ```

use std::fmt;

/// [`Consumer::Default`]'s name.
pub const DEFAULT: &str = "default";
/// [`Consumer::Claude`]'s name.
pub const CLAUDE: &str = "claude";
/// [`Consumer::Gemini`]'s name.
pub const GEMINI: &str = "gemini";
/// [`Consumer::Codex`]'s name.
pub const CODEX: &str = "codex";
/// [`Consumer::Mcp`]'s name.
pub const MCP: &str = "mcp";
/// [`Consumer::Acp`]'s name.
pub const ACP: &str = "acp";
/// [`Consumer::Wake`]'s name.
pub const WAKE: &str = "wake";

/// A consumer of a session's events.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Consumer {
    /// `wakeful wait` without `--consumer` (`default`).
    Default,
    /// The Claude Code plugin's hooks and monitor bridge (`claude`).
    Claude,
    /// The Gemini CLI hooks (`gemini`).
    Gemini,
    /// The Codex hooks (`codex`).
    Codex,
    /// `wakeful mcp`'s `monitor_wait` (`mcp`).
    Mcp,
    /// `wakeful acp-proxy` (`acp`).
    Acp,
    /// The daemon's wake route (`wake`).
    Wake,
    /// A wait for one monitor (`wait --monitor ID`): the monitor's id.
    Monitor(String),
    /// Any other name (`wait --consumer NAME`).
    Named(String),
}

impl Consumer {
    /// The name on the wire.
    pub fn name(&self) -> &str {
        match self {
            Consumer::Default => DEFAULT,
            Consumer::Claude => CLAUDE,
            Consumer::Gemini => GEMINI,
            Consumer::Codex => CODEX,
            Consumer::Mcp => MCP,
            Consumer::Acp => ACP,
            Consumer::Wake => WAKE,
            Consumer::Monitor(id) | Consumer::Named(id) => id,
        }
    }

    /// What a name on the wire means.
    pub fn from_name(name: &str) -> Consumer {
        match name {
            DEFAULT => Consumer::Default,
            CLAUDE => Consumer::Claude,
            GEMINI => Consumer::Gemini,
            CODEX => Consumer::Codex,
            MCP => Consumer::Mcp,
            ACP => Consumer::Acp,
            WAKE => Consumer::Wake,
            id if id.starts_with("mon-") => Consumer::Monitor(id.to_string()),
            other => Consumer::Named(other.to_string()),
        }
    }

    /// Whether it waits for one monitor only (and so delivers nothing else
    /// of its session).
    pub fn is_one_monitor(&self) -> bool {
        matches!(self, Consumer::Monitor(_))
    }
}

impl fmt::Display for Consumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<&str> for Consumer {
    fn from(name: &str) -> Self {
        Consumer::from_name(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_means_itself_again() {
        for c in [
            Consumer::Default,
            Consumer::Claude,
            Consumer::Gemini,
            Consumer::Codex,
            Consumer::Mcp,
            Consumer::Acp,
            Consumer::Wake,
            Consumer::Monitor("mon-x".into()),
            Consumer::Named("ci".into()),
        ] {
            assert_eq!(Consumer::from_name(c.name()), c);
        }
        assert!(Consumer::from_name("mon-1").is_one_monitor());
        assert!(!Consumer::Mcp.is_one_monitor());
    }
}
