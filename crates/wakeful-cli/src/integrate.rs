//! `wakeful integrate claude-code`, `gemini` and `codex --hooks`: what the
//! installers of `wakeful-agents` wrote, said to the user.

use std::path::Path;

use serde_json::json;
use wakeful_agents::claude_code::plugin::{self, Installed};
use wakeful_agents::codex::config as codex_config;
use wakeful_agents::gemini::settings;
use wakeful_agents::install::wakeful_on_path;
use wakeful_client::Paths;

use crate::Failure;

/// `wakeful integrate claude-code`.
pub fn claude_code(paths: &Paths, json: bool) -> Result<u8, Failure> {
    let done: Installed = plugin::install(paths)?;
    if json {
        let v = json!({
            "path": done.plugin,
            "marketplace": done.marketplace,
            "files": done.files,
            "wakeful_on_path": done.on_path,
            "wakeful_on_path_is_this": done.on_path_is_this,
            "load": done.load,
            "install": done.install,
        });
        outln!("{v}")?;
        return Ok(0);
    }
    outln!(
        "Wrote the wakeful Claude Code plugin to {}",
        done.plugin.display()
    )?;
    outln!()?;
    outln!("Load it for one session:")?;
    outln!("  {}", done.load)?;
    outln!()?;
    outln!("or install it for every session (a local marketplace next to it):")?;
    for c in &done.install {
        outln!("  {c}")?;
    }
    outln!()?;
    outln!("What it does: a monitor (`wakeful hook monitor`) brings every event of the")?;
    outln!("session's wakeful monitors to Claude as a notification, also while the session")?;
    outln!("is idle; asyncRewake and Stop hooks (`wakeful hook rewake`, `wakeful hook stop`)")?;
    outln!("deliver what the monitor did not; `.mcp.json` adds the `wakeful mcp` tools and a")?;
    outln!("skill says when to use them. Each event reaches Claude once (consumer `claude`).")?;
    outln!()?;
    match (&done.on_path, done.on_path_is_this) {
        (None, _) => {
            outln!("Warning: `wakeful` is not on PATH, and the plugin runs `wakeful` from PATH.")?;
            outln!("  Install it: npm install -g wakeful (or a release archive, or cargo install")?;
            outln!(
                "  --locked wakeful-cli), or put {} on PATH.",
                display_dir(done.this.as_deref())
            )?;
            outln!()?;
        }
        (Some(p), false) => {
            outln!(
                "Note: the plugin will run {} (from PATH), not this binary ({}).",
                p.display(),
                done.this
                    .as_deref()
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|| "unknown".into())
            )?;
            outln!()?;
        }
        (Some(_), true) => {}
    }
    outln!("Channels (research preview): `claude --dangerously-load-development-channels server:wakeful`")?;
    outln!("  pushes events through the MCP server of a `.mcp.json`/`claude mcp add` setup. Not")?;
    outln!("  needed with this plugin, whose monitor already delivers every event; enabling")?;
    outln!("  both shows each event twice. Run this command again after upgrading wakeful.")?;
    Ok(0)
}

/// `wakeful integrate gemini`: wakeful's hooks in Gemini CLI's settings.
pub fn gemini(project: Option<&Path>, json: bool) -> Result<u8, Failure> {
    let path = settings::settings_path(project)?;
    let done = settings::install(&path)?;
    let on_path = wakeful_on_path();
    if json {
        let v = json!({
            "path": done.path,
            "scope": if project.is_some() { "project" } else { "user" },
            "created": done.created,
            "changed": !done.changed.is_empty(),
            "events": done.changed,
            "backup": done.backup,
            "warnings": done.warnings,
            "wakeful_on_path": on_path,
        });
        outln!("{v}")?;
        return Ok(0);
    }
    if done.changed.is_empty() {
        outln!(
            "The wakeful hooks in {} are up to date; nothing changed.",
            done.path.display()
        )?;
    } else {
        let verb = if done.created { "Created" } else { "Updated" };
        outln!(
            "{verb} {} ({} wakeful hook{}):",
            done.path.display(),
            done.changed.len(),
            if done.changed.len() == 1 { "" } else { "s" }
        )?;
        if let Some(b) = &done.backup {
            outln!("  backup of the previous file: {}", b.display())?;
        }
    }
    outln!()?;
    for (event, name, sub, _) in settings::HOOKS {
        outln!("  {event:<13} {name:<22} wakeful hook {sub}")?;
    }
    outln!()?;
    outln!("What they do, each event reaching Gemini once (consumer `gemini`):")?;
    outln!(
        "  SessionStart  the resume digest (running monitors, those that ended unseen) as context"
    )?;
    outln!("  AfterTool     events that arrived during the turn, appended to the tool's result")?;
    outln!("  AfterAgent    events still unread when a turn ends, sent back as a new prompt")?;
    outln!("Nothing wakes an idle Gemini session: to wait for a monitor, the agent runs")?;
    outln!(
        "`wakeful wait` (in Gemini's shell it reads the hooks' consumer, so nothing comes twice)."
    )?;
    if project.is_some() {
        outln!()?;
        outln!("Project hooks run only in folders Gemini trusts, and Gemini asks before running")?;
        outln!("project hooks it has not seen.")?;
    }
    hook_warnings(&done.warnings, on_path.is_some())
}

/// `wakeful integrate codex --hooks [--remove]`: wakeful's hooks in Codex's
/// config.toml.
pub fn codex(hooks: bool, project: Option<&Path>, remove: bool, json: bool) -> Result<u8, Failure> {
    if !hooks {
        return Err(wakeful_agents::Error::usage(
            "say what to install: `wakeful integrate codex --hooks` adds wakeful's SessionStart and Stop hooks to Codex's config.toml (the MCP server and the wake route need no installer: docs/agents/codex.md)",
        )
        .into());
    }
    let path = codex_config::config_path(project)?;
    let done = codex_config::install(&path, remove)?;
    let on_path = wakeful_on_path();
    if json {
        let v = json!({
            "path": done.path,
            "scope": if project.is_some() { "project" } else { "user" },
            "removed": remove,
            "created": done.created,
            "changed": done.changed,
            "backup": done.backup,
            "warnings": done.warnings,
            "wakeful_on_path": on_path,
        });
        outln!("{v}")?;
        return Ok(0);
    }
    match (remove, done.changed) {
        (true, false) => outln!(
            "No wakeful hooks in {}; nothing changed.",
            done.path.display()
        )?,
        (true, true) => outln!("Removed wakeful's hooks from {}.", done.path.display())?,
        (false, false) => outln!(
            "The wakeful hooks in {} are up to date; nothing changed.",
            done.path.display()
        )?,
        (false, true) => outln!(
            "{} {} (2 wakeful hooks):",
            if done.created { "Created" } else { "Updated" },
            done.path.display()
        )?,
    }
    if let Some(b) = &done.backup {
        outln!("  backup of the previous file: {}", b.display())?;
    }
    if remove {
        return Ok(0);
    }
    outln!()?;
    for (event, sub, _) in codex_config::HOOKS {
        outln!("  {event:<13} wakeful hook {sub}")?;
    }
    outln!()?;
    outln!("What they do, each event reaching the thread once (consumer `codex`):")?;
    outln!(
        "  SessionStart  the resume digest (running monitors, those that ended unseen) as context"
    )?;
    outln!("  Stop          events that came during the turn: the turn goes on with them instead")?;
    outln!("                of ending (never twice in a row: Codex's stop_hook_active)")?;
    outln!("An idle thread is woken by the `codex` wake route (automatic for monitors started")?;
    outln!("inside Codex); the Stop hook leaves it the events it already delivers or holds.")?;
    outln!()?;
    outln!("Codex runs new hooks only once you trusted them: it says \"hooks need review\" at")?;
    outln!("start (review them there), or run it with --dangerously-bypass-hook-trust.")?;
    hook_warnings(&done.warnings, on_path.is_some())
}

/// The installer's warnings, and one when `wakeful` is not on PATH (the
/// hooks run it from there); what an `integrate … --hooks` ends with.
fn hook_warnings(warnings: &[String], on_path: bool) -> Result<u8, Failure> {
    for w in warnings {
        outln!()?;
        outln!("Warning: {w}")?;
    }
    if !on_path {
        outln!()?;
        outln!(
            "Warning: `wakeful` is not on PATH, and the hooks run `wakeful` from PATH (they do"
        )?;
        outln!(
            "  nothing without it). Install it: npm install -g wakeful (or cargo install --locked wakeful-cli)"
        )?;
    }
    Ok(0)
}

fn display_dir(exe: Option<&Path>) -> String {
    exe.and_then(|e| e.parent())
        .map(|d| d.display().to_string())
        .unwrap_or_else(|| "the directory of this binary".into())
}
