//! The `wakeful export --format jsonl` file: a monitor's life (or a
//! session's) that can be kept, shared, imported into another state
//! directory (`wakeful import`) and re-run (`wakeful replay`).
//!
//! One JSON object a line:
//!
//! 1. a header, [`ExportHeader`]: `{"wakeful_export": 1, "wakeful_version",
//!    "host", "exported_at", "session"?, "monitor"?, "since"?}`;
//! 2. the events, in seq order, exactly as `wakeful events --json` prints
//!    them;
//! 3. one `{"monitor": {...}}` line per monitor those events belong to, the
//!    monitor as `wakeful list --json` shows it;
//! 4. one `{"prune": {...}}` line per prune of the exporting store in the
//!    exported time ([`PruneRecordLine`]): what was removed before the
//!    export, so that a reader knows the log it holds has been pruned.
//!    Import passes over them.
//!
//! An event's identity across state directories is its *origin*,
//! `<host>/<seq>` ([`origin`]): the host that exported it and its seq
//! there. Importing keeps one event per origin, so importing a file twice
//! stores nothing twice.
//!
//! Parsing is pure: [`Export::parse`] takes the file's text.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{Event, MonitorInfo};

/// The version of the format this build writes and reads.
pub const EXPORT_FORMAT_VERSION: u32 = 1;

/// The first line of an export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportHeader {
    /// The format version ([`EXPORT_FORMAT_VERSION`]).
    pub wakeful_export: u32,
    /// The version of wakeful that wrote it (`wakeful --version`).
    pub wakeful_version: String,
    /// The host it was exported on (part of every event's origin).
    pub host: String,
    /// When it was written (RFC 3339).
    #[serde(with = "crate::info::ts")]
    pub exported_at: DateTime<Utc>,
    /// The session exported, if the export was of a session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The monitor exported, if the export was of one monitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<String>,
    /// Only events at or after this time were exported.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::info::ts_opt"
    )]
    pub since: Option<DateTime<Utc>>,
}

/// A monitor's line in an export: `{"monitor": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorRecord {
    /// The monitor, as `wakeful list --json` shows it.
    pub monitor: MonitorInfo,
}

/// A prune's line in an export: `{"prune": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PruneRecordLine {
    /// What the prune removed.
    pub prune: crate::storage::PruneRecord,
}

/// A whole export, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// Its first line.
    pub header: ExportHeader,
    /// Its events, in file order (seq order as written).
    pub events: Vec<Event>,
    /// Its monitors' records.
    pub monitors: Vec<MonitorInfo>,
    /// The prunes of the exporting store in the exported time.
    pub prunes: Vec<crate::storage::PruneRecord>,
}

/// Why a file is not a usable export.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    /// The file is empty.
    #[error("the file is empty; give a file written by `wakeful export --format jsonl`")]
    Empty,
    /// The first line is not a header.
    #[error("line 1 is not a wakeful export header ({0}); give a file written by `wakeful export --format jsonl` (not --format otlp or asciicast)")]
    NoHeader(String),
    /// A format this build does not know.
    #[error("the file is in export format {found}, this wakeful reads format {EXPORT_FORMAT_VERSION}; import it with a newer wakeful")]
    Version {
        /// The version found.
        found: u32,
    },
    /// A line that is neither an event nor a monitor record.
    #[error("line {line}: {message}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

/// An event's identity across state directories: `<host>/<seq>`.
pub fn origin(host: &str, seq: u64) -> String {
    format!("{host}/{seq}")
}

impl Export {
    /// Reads an export from the text of its file. Blank lines are passed
    /// over; anything else that is not a header, an event or a monitor
    /// record is an error naming its line.
    pub fn parse(text: &str) -> Result<Export, ExportError> {
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .filter(|(_, l)| !l.is_empty());
        let (_, first) = lines.next().ok_or(ExportError::Empty)?;
        let value: serde_json::Value =
            serde_json::from_str(first).map_err(|e| ExportError::NoHeader(e.to_string()))?;
        let version = value
            .get("wakeful_export")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| ExportError::NoHeader("no `wakeful_export` version".into()))?;
        if version != u64::from(EXPORT_FORMAT_VERSION) {
            return Err(ExportError::Version {
                found: u32::try_from(version).unwrap_or(u32::MAX),
            });
        }
        let header: ExportHeader =
            serde_json::from_value(value).map_err(|e| ExportError::NoHeader(e.to_string()))?;
        let mut events = Vec::new();
        let mut monitors = Vec::new();
        let mut prunes = Vec::new();
        for (n, line) in lines {
            let bad = |message: String| ExportError::Line { line: n, message };
            let value: serde_json::Value =
                serde_json::from_str(line).map_err(|e| bad(format!("not JSON: {e}")))?;
            if value
                .get("monitor")
                .is_some_and(serde_json::Value::is_object)
            {
                let record: MonitorRecord = serde_json::from_value(value)
                    .map_err(|e| bad(format!("not a monitor record: {e}")))?;
                monitors.push(record.monitor);
            } else if value.get("prune").is_some_and(serde_json::Value::is_object) {
                let record: PruneRecordLine = serde_json::from_value(value)
                    .map_err(|e| bad(format!("not a prune record: {e}")))?;
                prunes.push(record.prune);
            } else if value.get("seq").is_some() {
                let event: Event =
                    serde_json::from_value(value).map_err(|e| bad(format!("not an event: {e}")))?;
                events.push(event);
            } else {
                return Err(bad(
                    "neither an event (with `seq`) nor a monitor record (`{\"monitor\": …}`)"
                        .into(),
                ));
            }
        }
        Ok(Export {
            header,
            events,
            monitors,
            prunes,
        })
    }

    /// The record of monitor `id`, if the file has it.
    pub fn monitor(&self, id: &str) -> Option<&MonitorInfo> {
        self.monitors.iter().find(|m| m.id == id)
    }

    /// The events of monitor `id`, in order.
    pub fn events_of<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Event> + 'a {
        self.events.iter().filter(move |e| e.monitor_id == id)
    }

    /// The monitors that have events in it, each once, sorted.
    pub fn monitor_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.events.iter().map(|e| e.monitor_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{"wakeful_export":1,"wakeful_version":"0.1.0","host":"h1","exported_at":"2026-11-30T12:00:05.000Z","session":"s1"}
{"seq":7,"session":"s1","monitor_id":"mon-abc","kind":"started","ts":"2026-11-30T12:00:00.000Z","text":"started: build (command: make)"}
{"seq":8,"session":"s1","monitor_id":"mon-abc","kind":"lines","ts":"2026-11-30T12:00:01.500Z","text":"a","lines":["a"],"count":1,"from_line":1,"to_line":1}

{"monitor":{"id":"mon-abc","session":"s1","description":"build","source":{"kind":"command","command":"make"},"persistent":false,"timeout_ms":300000,"state":"running","stop_reason":null,"started_at":"2026-11-30T12:00:00.000Z","ended_at":null,"events":1,"lines":1,"suppressed_lines":0,"output_path":"/x/mon-abc.log"}}
{"prune":{"at":"2026-11-30T11:00:00.000Z","events":40,"monitors":2,"outputs":0,"bytes":81920,"causes":["age"],"oldest_kept_seq":7,"oldest_kept_at":"2026-11-30T12:00:00.000Z"}}
"#;

    #[test]
    fn an_export_reads_back_line_by_line() {
        let e = Export::parse(FILE).unwrap();
        assert_eq!(e.header.host, "h1");
        assert_eq!(e.header.session.as_deref(), Some("s1"));
        assert_eq!(e.events.len(), 2);
        assert_eq!(e.events_of("mon-abc").count(), 2);
        assert_eq!(e.monitor("mon-abc").unwrap().description, "build");
        assert_eq!(e.prunes.len(), 1);
        assert_eq!(e.prunes[0].events, 40);
        assert_eq!(origin(&e.header.host, e.events[1].seq), "h1/8");
        // The header writes back as it was read.
        let first = FILE.lines().next().unwrap();
        assert_eq!(serde_json::to_string(&e.header).unwrap(), first);
    }

    #[test]
    fn what_is_not_an_export_is_named() {
        assert_eq!(Export::parse(""), Err(ExportError::Empty));
        assert!(matches!(
            Export::parse(r#"{"seq":1}"#),
            Err(ExportError::NoHeader(_))
        ));
        assert_eq!(
            Export::parse(
                r#"{"wakeful_export":2,"wakeful_version":"9","host":"h","exported_at":"2026-01-01T00:00:00.000Z"}"#
            ),
            Err(ExportError::Version { found: 2 })
        );
        let mut broken = FILE.to_string();
        broken.push_str("{\"resourceSpans\":[]}\n");
        match Export::parse(&broken) {
            Err(ExportError::Line { line, .. }) => assert_eq!(line, 7),
            other => panic!("{other:?}"),
        }
    }
}
