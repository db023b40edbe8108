//! Doctor's checks of the Claude Code plugin: whether the copy in the state
//! directory is current, which of its paths (the rewake hook, the monitor
//! bridge) serves the session, and what a project-scope install changes.

use std::path::Path;

use wakeful_client::Paths;
use wakeful_protocol::ConsumerInfo;

use crate::doctor_check::{Check, Level};

/// The Claude Code plugin: written by `integrate claude-code`, current,
/// and which of its paths serves this session (`claude` is the session's
/// consumer `claude`, as the daemon reports it).
pub fn checks(paths: &Paths, session: &str, claude: Option<&ConsumerInfo>) -> Vec<Check> {
    let mut out = Vec::new();
    let name = "claude code plugin";
    match super::plugin::written_plugin_is_current(paths) {
        None => out.push(Check::new(
            name,
            Level::Info,
            "not written to the state directory (`wakeful integrate claude-code` writes it; `claude --plugin-dir integrations/claude-code` loads it from a checkout)",
        )),
        Some(false) => out.push(Check::problem(
            name,
            "the copy in the state directory is older than this wakeful",
            "run `wakeful integrate claude-code` again (and restart Claude Code)",
        )),
        Some(true) => out.push(Check::new(name, Level::Ok, "written and current")),
    }
    let bridge = super::bridge_alive(paths, session, super::CONSUMER);
    // Waiters of consumer `claude` that do not stand by: rewake hooks.
    let hooks = claude.map_or(0, |c| c.waiters.saturating_sub(c.fallback_waiters));
    let active = match (bridge, hooks > 0) {
        (true, true) => Some("the rewake hook waits (it wakes an idle session) and the plugin's monitor bridge stands by (it delivers during a turn)"),
        (true, false) => Some("only the plugin's monitor bridge waits: during a turn (the rewake hook starts again at its end), or where Claude Code runs no asyncRewake hooks"),
        (false, true) => Some("the rewake hook waits and no plugin monitor runs (a project-scope install, Bedrock/Vertex/Foundry, or a Claude Code without monitors): the hooks wake the session"),
        (false, false) => None,
    };
    if let Some(active) = active {
        out.push(Check::new("claude code path", Level::Info, active));
    }
    if let Ok(cwd) = std::env::current_dir() {
        out.extend(project_scope(&cwd));
    }
    out
}

/// The plugin installed at project scope (`.claude/skills/<name>/` with a
/// `.claude-plugin/` of the wakeful plugin) in the project at `cwd`: Claude
/// Code then runs its hooks and MCP server but arms no plugin monitor, and
/// asks once at startup to approve the MCP server.
fn project_scope(cwd: &Path) -> Vec<Check> {
    let claude = cwd.join(".claude");
    let Ok(skills) = std::fs::read_dir(claude.join("skills")) else {
        return vec![];
    };
    let installed = skills.flatten().any(|d| {
        std::fs::read_to_string(d.path().join(".claude-plugin/plugin.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|v| v["name"] == "wakeful")
    });
    if !installed {
        return vec![];
    }
    let mut out = vec![Check::new(
        "claude code scope",
        Level::Info,
        format!(
            "installed at project scope in {}: Claude Code arms no plugin monitor there, the rewake and Stop hooks deliver",
            claude.join("skills").display()
        ),
    )];
    let answered = ["settings.local.json", "settings.json"].iter().any(|f| {
        std::fs::read_to_string(claude.join(f))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|v| {
                ["enabledMcpjsonServers", "disabledMcpjsonServers"]
                    .iter()
                    .any(|k| {
                        v[*k]
                            .as_array()
                            .is_some_and(|a| a.iter().any(|s| s == "plugin:wakeful:wakeful"))
                    })
            })
    });
    if !answered {
        out.push(Check::new(
            "claude code mcp",
            Level::Info,
            "Claude Code will ask once at startup whether to use the project's MCP server plugin:wakeful:wakeful; no hook runs until it is answered (add it to enabledMcpjsonServers in .claude/settings.local.json to answer ahead)",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A project with the wakeful plugin under `.claude/skills/wakeful/`.
    fn project_with_plugin() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let meta = dir.path().join(".claude/skills/wakeful/.claude-plugin");
        std::fs::create_dir_all(&meta).unwrap();
        std::fs::write(meta.join("plugin.json"), r#"{"name":"wakeful"}"#).unwrap();
        dir
    }

    fn names(checks: &[Check]) -> Vec<&str> {
        checks.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn no_project_install_says_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(project_scope(dir.path()).is_empty());
        // Another plugin under skills/ is not wakeful's.
        let meta = dir.path().join(".claude/skills/other/.claude-plugin");
        std::fs::create_dir_all(&meta).unwrap();
        std::fs::write(meta.join("plugin.json"), r#"{"name":"other"}"#).unwrap();
        assert!(project_scope(dir.path()).is_empty());
    }

    #[test]
    fn a_project_install_tells_of_the_scope_and_the_unanswered_mcp_question() {
        let dir = project_with_plugin();
        let checks = project_scope(dir.path());
        assert_eq!(
            names(&checks),
            ["claude code scope", "claude code mcp"],
            "{checks:?}"
        );
        assert!(checks.iter().all(|c| c.level == Level::Info));
    }

    #[test]
    fn an_answered_mcp_question_is_not_repeated() {
        let dir = project_with_plugin();
        std::fs::write(
            dir.path().join(".claude/settings.local.json"),
            r#"{"enabledMcpjsonServers":["plugin:wakeful:wakeful"]}"#,
        )
        .unwrap();
        let checks = project_scope(dir.path());
        assert_eq!(names(&checks), ["claude code scope"], "{checks:?}");
    }
}
