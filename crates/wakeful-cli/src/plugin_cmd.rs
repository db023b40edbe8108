//! `wakeful validate` and `wakeful plugin start|skill`: Claude Code plugin
//! monitors, checked by `wakeful-plugin` and run by the daemon for any agent.
//!
//! A plugin monitor becomes a persistent monitor keyed `<plugin>:<name>`, so
//! running the same command again never starts a duplicate. The command text
//! is passed to `sh -c` unchanged: `CLAUDE_PLUGIN_ROOT`, `CLAUDE_PLUGIN_DATA`
//! and `CLAUDE_PROJECT_DIR` are environment variables the shell expands, so no
//! value is ever spliced into the command and none can inject code.

use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use serde_json::json;
use wakeful_client::{connect, Paths};
use wakeful_core::{MonitorSpec, Source};
use wakeful_plugin::{PluginMonitor, Report, When};
use wakeful_protocol::{Request, StartResult};

use crate::{exit, Failure};

/// `wakeful validate PATH`.
pub fn validate(path: &Path, json: bool) -> Result<u8, Failure> {
    let report = wakeful_plugin::validate(path);
    print_report(&report, json, false)?;
    Ok(if report.errors() > 0 { exit::USAGE } else { 0 })
}

fn print_report(report: &Report, json: bool, to_stderr: bool) -> Result<(), Failure> {
    let text = if json {
        serde_json::to_string_pretty(&report.to_json())
            .map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?
    } else {
        report.render_human()
    };
    if to_stderr {
        eprintln!("{}", text.trim_end());
    } else {
        outln!("{}", text.trim_end())?;
    }
    Ok(())
}

/// Which monitors of a plugin to start.
pub enum Which {
    /// `when: "always"`.
    Always,
    /// `on-skill-invoke:<skill>`, given as `SKILL` or `<plugin>:SKILL`.
    Skill(String),
}

fn matches(monitor: &PluginMonitor, which: &Which, plugin: &str) -> bool {
    let bare = |s: &str| -> String {
        s.strip_prefix(plugin)
            .and_then(|r| r.strip_prefix(':'))
            .unwrap_or(s)
            .to_string()
    };
    match (which, &monitor.when) {
        (Which::Always, When::Always) => true,
        (Which::Skill(wanted), When::OnSkillInvoke(skill)) => bare(skill) == bare(wanted),
        _ => false,
    }
}

/// `wakeful plugin start DIR` and `wakeful plugin skill DIR SKILL`.
pub async fn start(
    paths: &Paths,
    session: String,
    dir: &Path,
    which: Which,
    json: bool,
) -> Result<u8, Failure> {
    let report = match wakeful_plugin::load(dir) {
        Ok(r) => r,
        Err(wakeful_plugin::LoadError::Invalid { report, .. }) => {
            print_report(&report, json, true)?;
            return Err(Failure::new(
                exit::USAGE,
                format!(
                    "{} has errors; nothing was started (see `wakeful validate {}`)",
                    dir.display(),
                    dir.display()
                ),
            ));
        }
    };
    let root = std::fs::canonicalize(dir)
        .map_err(|e| Failure::new(exit::USAGE, format!("{}: {e}", dir.display())))?;
    let plugin = report
        .plugin_name
        .clone()
        .or_else(|| root.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "plugin".into());
    let chosen: Vec<&PluginMonitor> = report
        .monitors
        .iter()
        .filter(|m| matches(m, &which, &plugin))
        .collect();
    if chosen.is_empty() {
        let what = match &which {
            Which::Always => "no monitor with `when: \"always\"`".to_string(),
            Which::Skill(s) => format!("no monitor with `when: \"on-skill-invoke:{s}\"`"),
        };
        return Err(Failure::new(3, format!("plugin {plugin} has {what}")));
    }
    paths
        .prepare()
        .map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?;
    let data = paths.state_dir.join("plugin-data").join(sanitize(&plugin));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&data)
        .map_err(|e| {
            Failure::new(
                exit::FAILURE,
                format!("cannot create {}: {e}", data.display()),
            )
        })?;
    let cwd = std::env::current_dir()?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let mut conn = connect(paths).await?;
    let mut started = Vec::new();
    for m in chosen {
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
            .map_err(|e| Failure::new(exit::USAGE, format!("monitor {}: {e}", m.name)))?;
        let r: StartResult = conn
            .call_as(Request::Start {
                session: session.clone(),
                spec: Box::new(spec),
                env: env.clone(),
                cwd: cwd.clone(),
                host: None,
            })
            .await?;
        started.push((m.name.clone(), r));
    }
    if json {
        let v: Vec<_> = started
            .iter()
            .map(|(name, r)| {
                json!({"name": name, "id": r.id, "session": r.session, "already_running": r.already_running, "output_path": r.output_path})
            })
            .collect();
        outln!("{}", serde_json::Value::Array(v))?;
    } else {
        for (name, r) in &started {
            let note = if r.already_running {
                " (already running)"
            } else {
                ""
            };
            outln!("{plugin}:{name} {}{note}", r.id)?;
        }
    }
    Ok(0)
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
