//! The Claude Code plugin that wakeful ships (`integrations/claude-code/`,
//! embedded in the binary, so a `cargo install`ed wakeful has it too; this
//! package reaches it through its `integrations` link to the repository's
//! folder, which `cargo package` follows, so the published crate holds the
//! files): writing it to `<state dir>/integrations/claude-code/` with a local
//! marketplace next to it (`wakeful integrate claude-code`), and the plugin
//! monitors of any plugin as wakeful monitors (`wakeful plugin start|skill`).
//!
//! A plugin monitor becomes a persistent monitor keyed `<plugin>:<name>`, so
//! running the same command again never starts a duplicate. The command text
//! is passed to `sh -c` unchanged: `CLAUDE_PLUGIN_ROOT`, `CLAUDE_PLUGIN_DATA`
//! and `CLAUDE_PROJECT_DIR` are environment variables the shell expands, so no
//! value is ever spliced into the command and none can inject code.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use wakeful_client::Paths;
use wakeful_core::{MonitorSpec, Source};
use wakeful_plugin::{PluginMonitor, When};

use crate::install::{wakeful_on_path, write_all};
use crate::Error;

/// The plugin's files, relative to `integrations/claude-code/`.
pub const PLUGIN_FILES: &[(&str, &str)] = &[
    (
        ".claude-plugin/plugin.json",
        include_str!("../../integrations/claude-code/.claude-plugin/plugin.json"),
    ),
    (
        "monitors/monitors.json",
        include_str!("../../integrations/claude-code/monitors/monitors.json"),
    ),
    (
        "hooks/hooks.json",
        include_str!("../../integrations/claude-code/hooks/hooks.json"),
    ),
    (
        ".mcp.json",
        include_str!("../../integrations/claude-code/.mcp.json"),
    ),
    (
        "skills/wakeful/SKILL.md",
        include_str!("../../integrations/claude-code/skills/wakeful/SKILL.md"),
    ),
    (
        "README.md",
        include_str!("../../integrations/claude-code/README.md"),
    ),
];

/// The marketplace that lists the plugin, relative to `integrations/`.
pub const MARKETPLACE_FILE: (&str, &str) = (
    ".claude-plugin/marketplace.json",
    include_str!("../../integrations/.claude-plugin/marketplace.json"),
);

/// What `wakeful integrate claude-code` wrote and how to use it.
#[derive(Debug)]
pub struct Installed {
    /// The plugin's folder.
    pub plugin: PathBuf,
    /// The local marketplace that lists it.
    pub marketplace: PathBuf,
    /// Every file written.
    pub files: Vec<PathBuf>,
    /// The `wakeful` that `PATH` finds (the one the plugin runs).
    pub on_path: Option<PathBuf>,
    /// This binary, resolved.
    pub this: Option<PathBuf>,
    /// Whether `on_path` is this binary (or the npm launcher of it).
    pub on_path_is_this: bool,
    /// The command that loads the plugin for one session.
    pub load: String,
    /// The commands that install it for every session.
    pub install: [String; 2],
}

/// Writes the plugin and its marketplace under the state directory
/// (overwriting) and says how to load or install it.
pub fn install(paths: &Paths) -> Result<Installed, Error> {
    paths.prepare().map_err(|e| Error::failed(e.to_string()))?;
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
    let load = format!("claude --plugin-dir {}", shell_quote(&plugin));
    let install = [
        format!(
            "claude plugin marketplace add {}",
            shell_quote(&marketplace)
        ),
        "claude plugin install wakeful@wakeful".to_string(),
    ];
    Ok(Installed {
        plugin,
        marketplace,
        files,
        on_path,
        this,
        on_path_is_this: same,
        load,
        install,
    })
}

/// Whether `integrate claude-code` wrote the plugin to the state directory
/// (`None`: not written) and whether that copy is this version's.
pub fn written_plugin_is_current(paths: &Paths) -> Option<bool> {
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

/// Which monitors of a plugin to start.
pub enum Which {
    /// `when: "always"`.
    Always,
    /// `on-skill-invoke:<skill>`, given as `SKILL` or `<plugin>:SKILL`.
    Skill(String),
}

impl Which {
    /// Whether `monitor` of `plugin` is one of these.
    pub fn matches(&self, monitor: &PluginMonitor, plugin: &str) -> bool {
        let bare = |s: &str| -> String {
            s.strip_prefix(plugin)
                .and_then(|r| r.strip_prefix(':'))
                .unwrap_or(s)
                .to_string()
        };
        match (self, &monitor.when) {
            (Which::Always, When::Always) => true,
            (Which::Skill(wanted), When::OnSkillInvoke(skill)) => bare(skill) == bare(wanted),
            _ => false,
        }
    }

    /// What a plugin without such a monitor lacks, for the error.
    pub fn missing(&self) -> String {
        match self {
            Which::Always => "no monitor with `when: \"always\"`".to_string(),
            Which::Skill(s) => format!("no monitor with `when: \"on-skill-invoke:{s}\"`"),
        }
    }
}

/// The plugin's name: its manifest's, else its folder's.
pub fn plugin_name(manifest: Option<&str>, root: &Path) -> String {
    manifest
        .map(String::from)
        .or_else(|| root.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "plugin".into())
}

/// `CLAUDE_PLUGIN_DATA` of `plugin` under the state directory, created.
pub fn data_dir(paths: &Paths, plugin: &str) -> Result<PathBuf, Error> {
    paths.prepare().map_err(|e| Error::failed(e.to_string()))?;
    let data = paths.state_dir.join("plugin-data").join(sanitize(plugin));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&data)
        .map_err(|e| Error::failed(format!("cannot create {}: {e}", data.display())))?;
    Ok(data)
}

/// The persistent wakeful monitor of plugin monitor `m`, keyed
/// `<plugin>:<name>`, with the plugin's variables in its environment.
pub fn monitor_spec(
    m: &PluginMonitor,
    plugin: &str,
    root: &Path,
    data: &Path,
    cwd: &Path,
) -> Result<MonitorSpec, Error> {
    let mut spec = MonitorSpec::command(
        m.command.clone(),
        m.description.chars().take(200).collect::<String>(),
    );
    spec.source = Source::Command {
        command: m.command.clone(),
    };
    spec.persistent = true;
    spec.key = Some(format!("{plugin}:{}", m.name));
    spec.env
        .insert("CLAUDE_PLUGIN_ROOT".into(), root.display().to_string());
    spec.env
        .insert("CLAUDE_PLUGIN_DATA".into(), data.display().to_string());
    spec.env
        .insert("CLAUDE_PROJECT_DIR".into(), cwd.display().to_string());
    spec.validate()
        .map_err(|e| Error::usage(format!("monitor {}: {e}", m.name)))?;
    Ok(spec)
}

/// A plugin name as a directory name.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
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
