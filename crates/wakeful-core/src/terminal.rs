//! Terminals (docs/CONTRACT.md §5): managed long-running commands that monitors attach to.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::event::MonitorStopReason;
use crate::info::MonitorState;

/// Most monitors attached to one terminal at a time.
pub const MAX_MONITORS_PER_TERMINAL: usize = 4;

/// A terminal as listings show it (`wakeful terminal list --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalInfo {
    /// `term-…`.
    pub id: String,
    /// The session that started it.
    pub session: String,
    /// The command (`sh -c`).
    pub command: String,
    /// Running or ended.
    pub state: MonitorState,
    /// How the command ended.
    pub exit: Option<MonitorStopReason>,
    /// When it started.
    #[serde(with = "crate::info::ts")]
    pub started_at: DateTime<Utc>,
    /// When it ended.
    #[serde(with = "crate::info::ts_opt")]
    pub ended_at: Option<DateTime<Utc>>,
    /// Its complete output.
    pub output_path: PathBuf,
    /// Monitors attached now.
    pub monitors: usize,
    /// Process id (and group) of its `sh`.
    pub pid: Option<i32>,
    /// Processes still alive after its command was stopped (normally
    /// none, and then left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub survivors: Vec<i32>,
}
