//! # wakeful-view
//!
//! The live view of wakeful for people: what runs, its latest lines, the
//! command; stop one in place; keep watching after everything ended.
//!
//! - [`model`]: the monitors (from `list`, kept current by events) and their
//!   activity per minute, pure.
//! - [`events`]: the events pane as a state machine (follow, pause, search,
//!   error jumps), pure.
//! - [`app`]: the terminal view's state and keys, pure.
//! - [`feed`]: the daemon's read-only stream with reconnection (IO).
//! - [`output_pane`]: an output file by line numbers for the output panes (IO).
//! - [`tui`]: `wakeful tui` (ratatui + crossterm).
//! - [`web`]: `wakeful web` (axum, server-sent events).
//!
//! Everything reaches the daemon read-only (`list`, `events`/`events_all`
//! with `follow`, `consumers`, `wake_show`), except the stop action (`stop`).
//! Nothing is ever acknowledged, so a view never takes an event from an
//! agent. Every string that came from a monitor is drawn through
//! [`wakeful_core::text::sanitize_for_model`].

#![forbid(unsafe_code)]

pub mod app;
pub mod events;
pub mod feed;
pub mod model;
pub mod output_pane;
pub mod tui;
pub mod web;

use std::path::Path;

use regex::Regex;
use wakeful_core::storage::ByteSize;
use wakeful_protocol::StorageStatus;

/// How much a view's storage line asks for attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageLevel {
    /// The disk is full: nothing that must write is started.
    Full,
    /// Below the keep-free space: output files do not grow.
    Low,
    /// Only what the last prune removed.
    Info,
}

impl StorageLevel {
    /// Its name in the web view's state (`full`, `low`, `info`).
    pub fn as_str(self) -> &'static str {
        match self {
            StorageLevel::Full => "full",
            StorageLevel::Low => "low",
            StorageLevel::Info => "info",
        }
    }
}

/// What the views' header says about the disk (empty when there is
/// nothing to say): a full or low disk first, else the last prune.
pub fn storage_line(s: &StorageStatus) -> (String, StorageLevel) {
    if s.disk_full {
        return (
            format!(
                "DISK FULL ({} free): nothing new starts; free some space",
                ByteSize(s.free_bytes)
            ),
            StorageLevel::Full,
        );
    }
    if s.disk_low {
        return (
            format!(
                "disk low ({} free, {} kept free): output files are not growing",
                ByteSize(s.free_bytes),
                ByteSize(s.keep_free_bytes)
            ),
            StorageLevel::Low,
        );
    }
    match &s.last_prune {
        Some(p) if p.events > 0 || p.outputs > 0 => (
            format!(
                "last prune {}: {} events of {} monitors",
                p.at.format("%Y-%m-%d %H:%M"),
                p.events,
                p.monitors
            ),
            StorageLevel::Info,
        ),
        _ => (String::new(), StorageLevel::Info),
    }
}
use wakeful_protocol::view::{ViewConfig, ViewConfigFile};

/// Why a view could not run.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// `wakeful tui` was not started in a terminal.
    #[error("wakeful tui needs a terminal on stdin and stdout; in a script, use `wakeful events --follow` or `wakeful web`")]
    NoTerminal,
    /// The terminal could not be set up or drawn on.
    #[error("the terminal failed: {0}")]
    Terminal(std::io::Error),
    /// `config.toml` could not be used.
    #[error("{path}: {message}; fix [view] there (see README.md, config.toml)")]
    Config {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The web server could not listen.
    #[error("cannot listen on 127.0.0.1:{port}: {source}; choose another port with --port (0 picks a free one)")]
    Listen {
        /// The port asked for.
        port: u16,
        /// What failed.
        source: std::io::Error,
    },
    /// The web server failed.
    #[error("the web server failed: {0}")]
    Serve(std::io::Error),
}

/// Reads `[view]` from `config.toml` at `path` (a missing file means the
/// defaults); other tables are the daemon's and not looked at here.
pub fn load_config(path: &Path) -> Result<ViewConfig, ViewError> {
    let bad = |message: String| ViewError::Config {
        path: path.display().to_string(),
        message,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ViewConfig::default()),
        Err(e) => return Err(bad(format!("cannot read it: {e}"))),
    };
    let file: ViewConfigFile = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    Ok(file.view)
}

/// The error regex of a configuration, checked.
pub fn error_regex(config: &ViewConfig) -> Result<Regex, ViewError> {
    Regex::new(&config.error_regex).map_err(|e| ViewError::Config {
        path: "config.toml".into(),
        message: format!("view.error_regex is not a valid regex: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_reads_only_the_view_table() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.toml");
        assert_eq!(load_config(&p).unwrap(), ViewConfig::default());
        std::fs::write(
            &p,
            "[limits]\nmax_active_per_session = 3\n[view]\nerror_regex = \"BAD\"\n",
        )
        .unwrap();
        let c = load_config(&p).unwrap();
        assert_eq!(c.error_regex, "BAD");
        assert!(error_regex(&c).unwrap().is_match("x BAD y"));
        std::fs::write(&p, "[view]\nerror_regx = \"BAD\"\n").unwrap();
        assert!(load_config(&p)
            .unwrap_err()
            .to_string()
            .contains("error_regx"));
        let c = ViewConfig {
            error_regex: "(".into(),
        };
        assert!(error_regex(&c).is_err());
    }
}

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
