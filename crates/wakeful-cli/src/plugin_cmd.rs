//! `wakeful validate` and `wakeful plugin start|skill`: Claude Code plugin
//! monitors, checked by `wakeful-plugin`, made into wakeful monitors by
//! [`wakeful_agents::claude_code::plugin`] and run by the daemon for any
//! agent.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;
use wakeful_agents::claude_code::plugin::{self, Which};
use wakeful_client::{connect, Paths};
use wakeful_plugin::{PluginMonitor, Report};
use wakeful_protocol::StartResult;

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
    let name = plugin::plugin_name(report.plugin_name.as_deref(), &root);
    let chosen: Vec<&PluginMonitor> = report
        .monitors
        .iter()
        .filter(|m| which.matches(m, &name))
        .collect();
    if chosen.is_empty() {
        return Err(Failure::new(
            3,
            format!("plugin {name} has {}", which.missing()),
        ));
    }
    let data = plugin::data_dir(paths, &name)?;
    let cwd = std::env::current_dir()?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let mut conn = connect(paths).await?;
    let mut started = Vec::new();
    for m in chosen {
        let spec = plugin::monitor_spec(m, &name, &root, &data, &cwd)?;
        let r: StartResult = conn
            .call(wakeful_protocol::StartMonitor {
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
            .map(|(monitor, r)| {
                json!({"name": monitor, "id": r.id, "session": r.session, "already_running": r.already_running, "output_path": r.output_path})
            })
            .collect();
        outln!("{}", serde_json::Value::Array(v))?;
    } else {
        for (monitor, r) in &started {
            let note = if r.already_running {
                " (already running)"
            } else {
                ""
            };
            outln!("{name}:{monitor} {}{note}", r.id)?;
        }
    }
    Ok(0)
}
