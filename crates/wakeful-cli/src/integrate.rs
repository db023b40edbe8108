//! `wakeful integrate claude-code`: writes the Claude Code plugin shipped in
//! the repository (`integrations/claude-code/`, embedded in the binary, so a
//! `cargo install`ed wakeful has it too; this package reaches it through its
//! `integrations` link to the repository's folder, which `cargo package`
//! follows, so the published crate holds the files) to
//! `<state dir>/integrations/claude-code/`, with a local marketplace next to
//! it, and says how to load or install it. `wakeful integrate gemini`:
//! wakeful's hooks in Gemini CLI's settings ([`crate::gemini::settings`]).

use std::path::{Path, PathBuf};

use serde_json::json;
use wakeful_client::Paths;

use crate::{exit, Failure};

/// The plugin's files, relative to `integrations/claude-code/`.
pub const PLUGIN_FILES: &[(&str, &str)] = &[
    (
        ".claude-plugin/plugin.json",
        include_str!("../integrations/claude-code/.claude-plugin/plugin.json"),
    ),
    (
        "monitors/monitors.json",
        include_str!("../integrations/claude-code/monitors/monitors.json"),
    ),
    (
        "hooks/hooks.json",
        include_str!("../integrations/claude-code/hooks/hooks.json"),
    ),
    (
        ".mcp.json",
        include_str!("../integrations/claude-code/.mcp.json"),
    ),
    (
        "skills/wakeful/SKILL.md",
        include_str!("../integrations/claude-code/skills/wakeful/SKILL.md"),
    ),
    (
        "README.md",
        include_str!("../integrations/claude-code/README.md"),
    ),
];

/// The marketplace that lists the plugin, relative to `integrations/`.
pub const MARKETPLACE_FILE: (&str, &str) = (
    ".claude-plugin/marketplace.json",
    include_str!("../integrations/.claude-plugin/marketplace.json"),
);

/// Writes every file under `root` (overwriting), creating directories.
fn write_all(root: &Path, files: &[(&str, &str)]) -> Result<Vec<PathBuf>, Failure> {
    let mut written = Vec::new();
    for (rel, text) in files {
        let path = root.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| {
                Failure::new(
                    exit::FAILURE,
                    format!("cannot create {}: {e}", dir.display()),
                )
            })?;
        }
        std::fs::write(&path, text).map_err(|e| {
            Failure::new(
                exit::FAILURE,
                format!("cannot write {}: {e}", path.display()),
            )
        })?;
        written.push(path);
    }
    Ok(written)
}

/// The `wakeful` that `PATH` finds, if any.
fn wakeful_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("wakeful"))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// `wakeful integrate claude-code`.
pub fn claude_code(paths: &Paths, json: bool) -> Result<u8, Failure> {
    paths
        .prepare()
        .map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?;
    let marketplace = paths.state_dir.join("integrations");
    let plugin = marketplace.join("claude-code");
    let mut files = write_all(&plugin, PLUGIN_FILES)?;
    files.extend(write_all(&marketplace, &[MARKETPLACE_FILE])?);
    let on_path = wakeful_on_path();
    let this = std::env::current_exe()
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok());
    let same = match (&on_path, &this) {
        (Some(p), Some(t)) => std::fs::canonicalize(p)
            .ok()
            .is_some_and(|p| p == *t || npm_launcher_of(&p, t)),
        _ => false,
    };
    let plugin_dir_cmd = format!("claude --plugin-dir {}", shell_quote(&plugin));
    let marketplace_cmds = [
        format!(
            "claude plugin marketplace add {}",
            shell_quote(&marketplace)
        ),
        "claude plugin install wakeful@wakeful".to_string(),
    ];
    if json {
        let v = json!({
            "path": plugin,
            "marketplace": marketplace,
            "files": files,
            "wakeful_on_path": on_path,
            "wakeful_on_path_is_this": same,
            "load": plugin_dir_cmd,
            "install": marketplace_cmds,
        });
        outln!("{v}")?;
        return Ok(0);
    }
    outln!(
        "Wrote the wakeful Claude Code plugin to {}",
        plugin.display()
    )?;
    outln!()?;
    outln!("Load it for one session:")?;
    outln!("  {plugin_dir_cmd}")?;
    outln!()?;
    outln!("or install it for every session (a local marketplace next to it):")?;
    for c in &marketplace_cmds {
        outln!("  {c}")?;
    }
    outln!()?;
    outln!("What it does: a monitor (`wakeful hook monitor`) brings every event of the")?;
    outln!("session's wakeful monitors to Claude as a notification, also while the session")?;
    outln!("is idle; asyncRewake and Stop hooks (`wakeful hook rewake`, `wakeful hook stop`)")?;
    outln!("deliver what the monitor did not; `.mcp.json` adds the `wakeful mcp` tools and a")?;
    outln!("skill says when to use them. Each event reaches Claude once (consumer `claude`).")?;
    outln!()?;
    match (&on_path, same) {
        (None, _) => {
            outln!("Warning: `wakeful` is not on PATH, and the plugin runs `wakeful` from PATH.")?;
            outln!("  Install it: npm install -g wakeful (or a release archive, or cargo install")?;
            outln!(
                "  --locked wakeful-cli), or put {} on PATH.",
                display_dir(this.as_deref())
            )?;
            outln!()?;
        }
        (Some(p), false) => {
            outln!(
                "Note: the plugin will run {} (from PATH), not this binary ({}).",
                p.display(),
                this.as_deref()
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
    use crate::gemini::settings;
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
    for w in &done.warnings {
        outln!()?;
        outln!("Warning: {w}")?;
    }
    if on_path.is_none() {
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

/// Whether `integrate claude-code` wrote the plugin to the state directory
/// (`None`: not written) and whether that copy is this version's.
pub(crate) fn written_plugin_is_current(paths: &Paths) -> Option<bool> {
    let plugin = paths.state_dir.join("integrations").join("claude-code");
    if !plugin.is_dir() {
        return None;
    }
    Some(PLUGIN_FILES.iter().all(|(rel, text)| {
        std::fs::read_to_string(plugin.join(rel)).is_ok_and(|on_disk| on_disk == *text)
    }))
}

/// Whether `on_path` (resolved) is the launcher of the npm package `wakeful`
/// (`<root>/bin/wakeful`) and `this` the binary it runs: the platform
/// package's, installed under `<root>/node_modules/` or next to `<root>`
/// (`node_modules/@wakeful/…`, where npm hoists it).
fn npm_launcher_of(on_path: &Path, this: &Path) -> bool {
    let Some(root) = on_path.parent().and_then(Path::parent) else {
        return false;
    };
    let platform_package = |p: &Path| {
        p.ends_with("bin/wakeful")
            && p.parent()
                .and_then(Path::parent)
                .and_then(Path::parent)
                .is_some_and(|scope| scope.ends_with("@wakeful"))
    };
    on_path.ends_with("wakeful/bin/wakeful")
        && platform_package(this)
        && (this.starts_with(root.join("node_modules"))
            || root
                .parent()
                .is_some_and(|up| this.starts_with(up.join("@wakeful"))))
}

fn display_dir(exe: Option<&Path>) -> String {
    exe.and_then(|e| e.parent())
        .map(|d| d.display().to_string())
        .unwrap_or_else(|| "the directory of this binary".into())
}

/// `p` as one shell word.
fn shell_quote(p: &Path) -> String {
    let s = p.display().to_string();
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,".contains(c))
    {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_paths_for_the_shell() {
        assert_eq!(shell_quote(Path::new("/a/b-c_d.e")), "/a/b-c_d.e");
        assert_eq!(shell_quote(Path::new("/a b/c")), "'/a b/c'");
        assert_eq!(shell_quote(Path::new("/it's")), "'/it'\\''s'");
    }

    #[test]
    fn knows_the_npm_launcher_of_this_binary() {
        let yes = [
            // npm install -g: the platform package inside the package.
            (
                "/p/lib/node_modules/wakeful/bin/wakeful",
                "/p/lib/node_modules/wakeful/node_modules/@wakeful/linux-x64-gnu/bin/wakeful",
            ),
            // A project install: hoisted next to it.
            (
                "/w/node_modules/wakeful/bin/wakeful",
                "/w/node_modules/@wakeful/linux-x64-gnu/bin/wakeful",
            ),
        ];
        for (on_path, this) in yes {
            assert!(
                npm_launcher_of(Path::new(on_path), Path::new(this)),
                "{on_path}"
            );
        }
        let no = [
            // Another installation's binary.
            (
                "/p/lib/node_modules/wakeful/bin/wakeful",
                "/q/lib/node_modules/wakeful/node_modules/@wakeful/linux-x64-gnu/bin/wakeful",
            ),
            // Not a platform package.
            (
                "/p/lib/node_modules/wakeful/bin/wakeful",
                "/p/lib/node_modules/wakeful/node_modules/other/bin/wakeful",
            ),
            ("/usr/local/bin/wakeful", "/home/u/.cargo/bin/wakeful"),
        ];
        for (on_path, this) in no {
            assert!(
                !npm_launcher_of(Path::new(on_path), Path::new(this)),
                "{this}"
            );
        }
    }

    #[test]
    fn embedded_files_are_the_plugin() {
        let names: Vec<&str> = PLUGIN_FILES.iter().map(|(n, _)| *n).collect();
        assert!(names.contains(&"monitors/monitors.json"));
        assert!(names.contains(&"hooks/hooks.json"));
        for (name, text) in PLUGIN_FILES.iter().chain([&MARKETPLACE_FILE]) {
            if name.ends_with(".json") {
                assert!(
                    serde_json::from_str::<serde_json::Value>(text).is_ok(),
                    "{name} is not JSON"
                );
            }
        }
    }
}
