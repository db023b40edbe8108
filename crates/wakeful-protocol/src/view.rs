//! `[view]` of `config.toml`: settings of the live views (`wakeful tui`,
//! `wakeful web`). The daemon parses the whole file strictly (unknown keys
//! are errors) with this table in it; the views read only this table
//! themselves, from the same file ([`crate::Paths::config_file`]).

use serde::{Deserialize, Serialize};

/// What the views take for a line that looks like an error (`e` jumps to
/// the next one) when `[view] error_regex` is not set.
pub const DEFAULT_ERROR_REGEX: &str =
    r"(?i)\b(error|fail(ed|ure)?|panic(ked)?|exception|traceback|fatal)\b";

/// The `[view]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ViewConfig {
    /// A regex (Rust `regex` syntax) for lines that look like an error.
    pub error_regex: String,
}

impl Default for ViewConfig {
    fn default() -> Self {
        ViewConfig {
            error_regex: DEFAULT_ERROR_REGEX.to_string(),
        }
    }
}

/// A whole `config.toml` seen by a view: only `[view]` is read, every other
/// table is the daemon's business (and checked by it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ViewConfigFile {
    /// The `[view]` table.
    #[serde(default)]
    pub view: ViewConfig,
}
