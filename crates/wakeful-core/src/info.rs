//! What a listing shows about a monitor (docs/CONTRACT.md §2 `MonitorInfo`, §7 `list --json`).

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::event::MonitorStopReason;
use crate::params::Source;

/// Whether a monitor still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MonitorState {
    /// Its source is being watched.
    Running,
    /// It ended; `stop_reason` says why.
    Ended,
}

/// A monitor as listings show it. Serialized, this is one element of
/// `wakeful list --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonitorInfo {
    /// `mon-…`.
    pub id: String,
    /// The owning session.
    pub session: String,
    /// What it watches, in words.
    pub description: String,
    /// What it watches.
    pub source: Source,
    /// Whether it is re-armed after a daemon restart.
    pub persistent: bool,
    /// Its timeout; `null` for persistent monitors.
    pub timeout_ms: Option<u64>,
    /// Its idempotency key, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Running or ended.
    pub state: MonitorState,
    /// Why it ended.
    pub stop_reason: Option<MonitorStopReason>,
    /// When it started (RFC 3339).
    #[serde(with = "ts")]
    pub started_at: DateTime<Utc>,
    /// When it ended.
    #[serde(with = "ts_opt")]
    pub ended_at: Option<DateTime<Utc>>,
    /// `lines` events delivered.
    pub events: u64,
    /// Lines read from the source.
    pub lines: u64,
    /// Lines counted by `suppressed` events.
    pub suppressed_lines: u64,
    /// The complete output file.
    pub output_path: PathBuf,
    /// Processes that were still alive after the monitor's stop (SIGTERM,
    /// grace, SIGKILL); normally empty, and then left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub survivors: Vec<i32>,
    /// The stop could not look for every process of the command (the
    /// posix platform backend): what it found; left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unverified: Option<crate::event::Unverified>,
}

impl MonitorInfo {
    /// The listing of monitor `id` of `session`, starting now from `spec`:
    /// running, nothing counted yet, its lines going to `output_path`.
    pub fn starting(
        id: String,
        session: String,
        spec: &crate::params::MonitorSpec,
        output_path: PathBuf,
    ) -> Self {
        MonitorInfo {
            id,
            session,
            description: spec.description.clone(),
            source: spec.source.clone(),
            persistent: spec.persistent,
            timeout_ms: spec.effective_timeout().map(|d| d.as_millis() as u64),
            key: spec.key.clone(),
            state: MonitorState::Running,
            stop_reason: None,
            started_at: Utc::now(),
            ended_at: None,
            events: 0,
            lines: 0,
            suppressed_lines: 0,
            output_path,
            survivors: Vec::new(),
            unverified: None,
        }
    }

    /// Whether it is still running.
    pub fn is_active(&self) -> bool {
        self.state == MonitorState::Running
    }
}

/// Serde helpers for a timestamp as the wire writes it (RFC 3339 with
/// milliseconds, `Z`): `#[serde(with = "wakeful_core::info::ts")]`.
pub mod ts {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes it.
    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::event::format_ts(t))
    }

    /// Reads it.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let s = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&s)
            .map(|t| t.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }
}

/// As [`ts`], for an optional timestamp (`null` when absent).
pub mod ts_opt {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes it.
    pub fn serialize<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&crate::event::format_ts(t)),
            None => s.serialize_none(),
        }
    }

    /// Reads it.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        let s = Option::<String>::deserialize(d)?;
        s.map(|s| {
            DateTime::parse_from_rfc3339(&s)
                .map(|t| t.with_timezone(&Utc))
                .map_err(serde::de::Error::custom)
        })
        .transpose()
    }
}
