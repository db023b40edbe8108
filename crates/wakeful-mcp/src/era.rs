//! Which MCP era `wakeful mcp` speaks: the legacy revisions that open with
//! `initialize` (2024-11-05 to 2025-11-25), MCP 2026-07-28 (no
//! `initialize`: every request carries its revision, client info and
//! capabilities in `_meta`; discovery is `server/discover`; push only inside
//! a `subscriptions/listen` stream), or, by default, whichever suits the
//! client ([`Protocol`]).
//!
//! Channel push, one way wakeful wakes an idle Claude Code session, is an
//! unsolicited notification of a session, so it needs a legacy connection:
//! Claude Code 2.1.332 skips channels on a modern one ("connection
//! negotiated a modern protocol revision with no unsolicited notification
//! path"), and its `server/discover` probe says nothing about whether
//! channels are on (docs/agents/mcp.md, "Protocol eras and tasks"); only
//! its command line does. The other way is a task: on 2026-07-28 a
//! `monitor_wait` runs in the background and wakes the session when it
//! ends ([`crate::tasks`]). Claude
//! Code, like the MCP Python SDK 2.3 client, is dual-era: it probes with
//! `server/discover` first, stays modern if the server answers with a
//! `DiscoverResult`, and falls back to `initialize` on an error that is not
//! a modern one (here `-32601`, method not found, whose message names the
//! revisions to use with `initialize`: [`crate::handler::discover_error`]).
//!
//! A probe without the `_meta` 2026-07-28 requires gets `-32602`; a request
//! that names a revision the mode does not serve gets `-32022` with the
//! supported revisions (both answered by [`rmcp`]).

use rmcp::model::{ProtocolVersion, RequestMetaObject};

/// The name Claude Code gives itself in `clientInfo`.
pub const CLAUDE_CODE: &str = "claude-code";

/// Which revisions `wakeful mcp` serves (`wakeful mcp --protocol`, or
/// `WAKEFUL_MCP_PROTOCOL`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// Both eras. A `server/discover` probe gets a `DiscoverResult` (the
    /// client stays on 2026-07-28) when the client declares the tasks
    /// extension and has no channel push to lose, and the legacy answer
    /// otherwise (see [`Protocol::modern_for`]); a request that names
    /// 2026-07-28 in its `_meta` without probing is served.
    #[default]
    Auto,
    /// Every revision up to 2026-07-28; the probe always gets a
    /// `DiscoverResult`. Claude Code then runs without channel push, even
    /// with channels on.
    Modern,
    /// Only the revisions with `initialize` (up to 2025-11-25), as before
    /// 2026-07-28 was served: the probe gets `-32601`.
    Legacy,
}

/// A `--protocol` value that is not one of `auto`, `2026-07-28`, `2025-11-25`.
#[derive(Debug, thiserror::Error)]
#[error("unknown MCP protocol mode `{0}`: use auto, 2026-07-28 or 2025-11-25")]
pub struct UnknownProtocol(pub String);

impl std::str::FromStr for Protocol {
    type Err = UnknownProtocol;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Protocol::Auto),
            "2026-07-28" => Ok(Protocol::Modern),
            "2025-11-25" => Ok(Protocol::Legacy),
            other => Err(UnknownProtocol(other.to_string())),
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protocol::Auto => "auto",
            Protocol::Modern => "2026-07-28",
            Protocol::Legacy => "2025-11-25",
        })
    }
}

impl Protocol {
    /// The revisions this mode serves.
    pub fn versions(self) -> &'static [ProtocolVersion] {
        match self {
            Protocol::Legacy => {
                ProtocolVersion::known_up_to(&ProtocolVersion::LATEST_WITH_INITIALIZE)
            }
            Protocol::Auto | Protocol::Modern => {
                ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28)
            }
        }
    }

    /// Whether a client whose probe carried `meta` stays on 2026-07-28;
    /// `channels` says whether the Claude Code above this process runs with
    /// channels on (its command line: `wakeful_agents`' `claude_code::channels`).
    ///
    /// `auto` serves 2026-07-28 to a client that declares the tasks
    /// extension (what it gives: `monitor_wait` as a background task that
    /// wakes the client when it ends), except where the legacy handshake
    /// keeps a push the client has: Claude Code with channels on (its
    /// channel exists only on the legacy handshake, and its probe does not
    /// say whether channels are on), and a client that declares
    /// `experimental["claude/channel"]`. A client without the extension
    /// gains nothing from 2026-07-28, and keeps the legacy handshake it
    /// already speaks.
    pub fn modern_for(self, meta: &RequestMetaObject, channels: bool) -> bool {
        match self {
            Protocol::Legacy => false,
            Protocol::Modern => true,
            Protocol::Auto => {
                let claude_code = meta
                    .client_info()
                    .is_some_and(|info| info.name == CLAUDE_CODE);
                let caps = meta.client_capabilities();
                let channel = caps
                    .as_ref()
                    .and_then(|c| c.experimental.as_ref())
                    .is_some_and(|e| e.contains_key(crate::channel::CAPABILITY));
                let tasks = caps.as_ref().is_some_and(|c| c.supports_tasks());
                tasks && !channel && !(claude_code && channels)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn meta(client: &str, capabilities: serde_json::Value) -> RequestMetaObject {
        serde_json::from_value(json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": client, "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        }))
        .unwrap()
    }

    #[test]
    fn the_modes_parse_and_print_as_the_flag_spells_them() {
        for mode in ["auto", "2026-07-28", "2025-11-25"] {
            assert_eq!(mode.parse::<Protocol>().unwrap().to_string(), mode);
        }
        let e = "2024-11-05".parse::<Protocol>().unwrap_err().to_string();
        assert!(e.contains("auto, 2026-07-28 or 2025-11-25"), "{e}");
        assert_eq!(Protocol::default(), Protocol::Auto);
    }

    #[test]
    fn auto_keeps_channel_users_and_clients_without_tasks_legacy() {
        let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
        let channel = json!({"experimental": {"claude/channel": {}},
                             "extensions": {"io.modelcontextprotocol/tasks": {}}});
        let auto = Protocol::Auto;
        assert!(auto.modern_for(&meta("claude-code", tasks.clone()), false));
        assert!(!auto.modern_for(&meta("claude-code", tasks.clone()), true));
        assert!(!auto.modern_for(&meta("claude-code", json!({})), false));
        assert!(!auto.modern_for(&meta("codex", channel), false));
        assert!(!auto.modern_for(&meta("codex", json!({})), false));
        assert!(auto.modern_for(&meta("codex", tasks.clone()), false));
        assert!(auto.modern_for(&meta("codex", tasks.clone()), true));
        assert!(Protocol::Modern.modern_for(&meta("claude-code", tasks.clone()), true));
        assert!(!Protocol::Legacy.modern_for(&meta("codex", tasks), false));
        assert_eq!(
            Protocol::Legacy.versions().last().unwrap().as_str(),
            "2025-11-25"
        );
        assert_eq!(
            Protocol::Auto.versions().last().unwrap().as_str(),
            "2026-07-28"
        );
    }
}
