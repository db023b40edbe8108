//! What `wakeful doctor` reports: one [`Check`] per finding. The agent
//! modules add their own (`codex::route_check`, `claude_code::plugin_check`), so that
//! what doctor knows of an agent lives with the rest of that agent's code;
//! [`crate::route_probe`] checks a wake route's target. This module is the
//! vocabulary they share and imports none of them.

use std::time::Duration;

use serde::Serialize;

/// How long a probe of an agent's program or server may take.
pub const PROBE: Duration = Duration::from_secs(3);

/// What one check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// It works.
    Ok,
    /// It does not, and a wake may not arrive: `fix` says what to do.
    Problem,
    /// Worth knowing; neither good nor bad.
    Info,
}

/// One finding of `wakeful doctor` (in `--json` output as it is here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What was checked (`codex app-server`, `claude code plugin`).
    pub name: String,
    /// What it found.
    pub level: Level,
    /// The finding, in a sentence.
    pub detail: String,
    /// What to do about a problem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    /// A finding without a fix.
    pub fn new(name: &str, level: Level, detail: impl Into<String>) -> Self {
        Check {
            name: name.to_string(),
            level,
            detail: detail.into(),
            fix: None,
        }
    }

    /// A problem and its fix.
    pub fn problem(name: &str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            fix: Some(fix.into()),
            ..Check::new(name, Level::Problem, detail)
        }
    }
}
