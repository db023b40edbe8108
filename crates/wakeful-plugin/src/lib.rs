//! Claude Code plugin monitors: read them as Claude Code does, validate them strictly,
//! and lint the traps that make a monitor late, silent or dead.
//!
//! A Claude Code plugin ships monitors in `monitors/monitors.json` (or declares them in
//! `.claude-plugin/plugin.json` under `experimental.monitors`, inline or as a path).
//! `claude plugin validate` never opens that file; [`validate`] does:
//!
//! * **errors** — what makes Claude Code reject or mis-load the monitors: invalid JSON,
//!   a file that is not a bare array, entries that are not strict
//!   `{name, command, description, when}` objects, duplicate names, a bad `when`, a
//!   declared path that is missing, absolute, not `./`-relative or outside the plugin,
//!   `${user_config.*}` in a command, wrong types in `plugin.json`;
//! * **warnings** — a plugin without `.claude-plugin/plugin.json`, the deprecated
//!   top-level `monitors` key, `on-skill-invoke` naming an unknown skill or a skill
//!   without its plugin namespace, and the command lints of [`lint`].
//!
//! Every [`Diagnostic`] names a file, a 1-based line and column, the offending text and
//! how to fix it. [`Report::render_human`] prints them the way rustc does;
//! [`Report::to_json`] gives them to programs.
//!
//! Decisions where Claude Code's behaviour is not documented:
//! * a declared `experimental.monitors` replaces the default `monitors/monitors.json`;
//! * when both `experimental.monitors` and the deprecated top-level `monitors` are
//!   present, `experimental.monitors` is used;
//! * a declared path that does not start with `./` is an error, but the file is still
//!   read and checked so that every problem shows at once.

#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

mod json;
pub mod lint;
mod plugin;
pub mod shell;

/// Every diagnostic code, as it appears in [`Diagnostic::code`].
pub mod codes {
    pub use crate::lint::codes::*;

    /// A path that cannot be read (missing, unreadable, not UTF-8).
    pub const IO_ERROR: &str = "io-error";
    /// A file that is not strict JSON.
    pub const INVALID_JSON: &str = "invalid-json";
    /// A monitors file whose top level is not an array (`{"monitors": [...]}` included).
    pub const NOT_AN_ARRAY: &str = "not-an-array";
    /// A monitors entry that is not an object.
    pub const ENTRY_NOT_OBJECT: &str = "entry-not-object";
    /// A key a monitor entry does not allow.
    pub const UNKNOWN_KEY: &str = "unknown-key";
    /// A required field that is absent (`name`, `command`, `description`, or `name`
    /// in `plugin.json`).
    pub const MISSING_FIELD: &str = "missing-field";
    /// A required string that is empty or blank.
    pub const EMPTY_FIELD: &str = "empty-field";
    /// A value of the wrong JSON type (in monitors or in `plugin.json`).
    pub const WRONG_TYPE: &str = "wrong-type";
    /// A `when` that is neither `"always"` nor `"on-skill-invoke:<skill>"`.
    pub const INVALID_WHEN: &str = "invalid-when";
    /// Two monitors with the same name in one plugin.
    pub const DUPLICATE_NAME: &str = "duplicate-name";
    /// A declared monitors path that does not exist (or is not a file).
    pub const PATH_NOT_FOUND: &str = "path-not-found";
    /// A declared monitors path that is absolute.
    pub const ABSOLUTE_PATH: &str = "absolute-path";
    /// A declared monitors path that does not start with `./`.
    pub const PATH_NOT_DOT_RELATIVE: &str = "path-not-dot-relative";
    /// A monitors path that leaves the plugin root (`..`, symlinks).
    pub const PATH_ESCAPES_PLUGIN: &str = "path-escapes-plugin";
    /// `${user_config.*}` in a command: Claude Code rejects it (shell injection).
    pub const USER_CONFIG_IN_COMMAND: &str = "user-config-in-command";
    /// `on-skill-invoke:<skill>` naming a skill the plugin does not have.
    pub const UNKNOWN_SKILL: &str = "unknown-skill";
    /// `on-skill-invoke:<skill>` naming a plugin skill without the plugin's namespace.
    pub const SKILL_WITHOUT_NAMESPACE: &str = "skill-without-namespace";
    /// A plugin directory without `.claude-plugin/plugin.json`.
    pub const NO_MANIFEST: &str = "no-manifest";
    /// The deprecated top-level `monitors` key of `plugin.json`.
    pub const DEPRECATED_MONITORS_KEY: &str = "deprecated-monitors-key";
}

/// How serious a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Claude Code rejects or mis-loads the monitors.
    Error,
    /// The monitors load, but something will likely not work as intended.
    Warning,
}

impl Severity {
    /// `"error"` or `"warning"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One finding, with where it is and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// A stable, kebab-case code (one of [`codes`]).
    pub code: String,
    /// What is wrong, and why it matters.
    pub message: String,
    /// The file, relative to the path given to [`validate`] when it is a plugin
    /// directory (`monitors/monitors.json`), or as given when it is a file.
    pub file: PathBuf,
    /// 1-based line (1 for findings about a whole file).
    pub line: usize,
    /// 1-based column, in characters (1 for findings about a whole file).
    pub column: usize,
    /// The offending text as written in the file (its first line only).
    pub snippet: Option<String>,
    /// How to fix it.
    pub help: String,
    /// The whole source line holding the finding, for rendering.
    #[serde(skip)]
    pub source_line: Option<String>,
}

impl Diagnostic {
    /// A finding about a whole file (or a missing one), with no position inside it.
    pub fn whole_file(
        severity: Severity,
        code: &str,
        file: impl Into<PathBuf>,
        message: impl Into<String>,
        help: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity,
            code: code.to_string(),
            message: message.into(),
            file: file.into(),
            line: 1,
            column: 1,
            snippet: None,
            help: help.into(),
            source_line: None,
        }
    }

    /// Renders this diagnostic the way rustc does, without a trailing newline.
    pub fn render_human(&self) -> String {
        let mut out = format!(
            "{}[{}]: {}\n",
            self.severity.as_str(),
            self.code,
            self.message
        );
        let file = self.file.to_string_lossy();
        match &self.source_line {
            Some(source) => {
                let number = self.line.to_string();
                let pad = " ".repeat(number.len() + 1);
                let _ = writeln!(out, "{pad}--> {file}:{}:{}", self.line, self.column);
                let _ = writeln!(out, "{pad} |");
                let _ = writeln!(out, " {number} | {}", expand_tabs(source));
                let before: String = source.chars().take(self.column.saturating_sub(1)).collect();
                let indent = " ".repeat(expand_tabs(&before).chars().count());
                let width = self
                    .snippet
                    .as_deref()
                    .map_or(1, |s| expand_tabs(s).chars().count().max(1));
                let _ = writeln!(out, "{pad} | {indent}{}", "^".repeat(width));
                let _ = write!(out, "{pad} = help: {}", self.help);
            }
            None => {
                let _ = writeln!(out, "  --> {file}");
                let _ = write!(out, "   = help: {}", self.help);
            }
        }
        out
    }
}

fn expand_tabs(s: &str) -> String {
    s.replace('\t', "    ")
}

/// When a plugin monitor starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum When {
    /// `"always"` (the default): when the session starts.
    Always,
    /// `"on-skill-invoke:<skill>"`: when the skill is invoked; holds `<skill>` as
    /// written (Claude Code matches it against published names, `<plugin>:<skill>`).
    OnSkillInvoke(String),
}

impl When {
    /// The value as written in monitors.json.
    pub fn as_json_value(&self) -> String {
        match self {
            When::Always => "always".to_string(),
            When::OnSkillInvoke(skill) => format!("on-skill-invoke:{skill}"),
        }
    }
}

/// One monitor declared by a plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginMonitor {
    /// Unique within the plugin; used to avoid starting it twice.
    pub name: String,
    /// The shell command, before variable substitution.
    pub command: String,
    /// What the monitor watches, shown to the agent with its events.
    pub description: String,
    /// When it starts.
    pub when: When,
}

impl PluginMonitor {
    /// The command with every `${NAME}` for which `lookup` returns a value replaced by
    /// it, as Claude Code substitutes `${CLAUDE_PLUGIN_ROOT}`, `${CLAUDE_PLUGIN_DATA}`,
    /// `${CLAUDE_PROJECT_DIR}` and `${ENV_VAR}`. Other text (including `$NAME` without
    /// braces and unknown names) is left for the shell.
    pub fn command_with(&self, lookup: impl Fn(&str) -> Option<String>) -> String {
        substitute_variables(&self.command, lookup)
    }
}

/// Replaces every `${NAME}` (NAME = `[A-Za-z_][A-Za-z0-9_]*`) for which `lookup` returns
/// a value. See [`PluginMonitor::command_with`].
pub fn substitute_variables(text: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let name = &after[..name_len];
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if valid && after[name_len..].starts_with('}') {
            if let Some(value) = lookup(name) {
                out.push_str(&value);
                rest = &after[name_len + 1..];
                continue;
            }
        }
        out.push_str("${");
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The result of [`validate`]: what was loaded and what is wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The plugin's name (`plugin.json`'s `name`, else its directory's name); `None`
    /// when a monitors file was validated on its own.
    pub plugin_name: Option<String>,
    /// The plugin root, as given; `None` when a monitors file was validated on its own.
    pub root: Option<PathBuf>,
    /// The monitors whose entries are valid, in file order. Use them only when
    /// [`Report::errors`] is 0: Claude Code loads none of them otherwise.
    pub monitors: Vec<PluginMonitor>,
    /// Every finding, sorted by file, line and column.
    pub diagnostics: Vec<Diagnostic>,
}

impl Report {
    /// The number of errors.
    pub fn errors(&self) -> usize {
        self.count(Severity::Error)
    }

    /// The number of warnings.
    pub fn warnings(&self) -> usize {
        self.count(Severity::Warning)
    }

    fn count(&self, severity: Severity) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == severity)
            .count()
    }

    /// The findings as JSON:
    /// `{"errors": N, "warnings": N, "diagnostics": [{"severity", "code", "message",
    /// "file", "line", "column", "snippet", "help"}]}` (`snippet` may be null).
    pub fn to_json(&self) -> serde_json::Value {
        let diagnostics: Vec<serde_json::Value> = self
            .diagnostics
            .iter()
            .map(|d| {
                serde_json::json!({
                    "severity": d.severity.as_str(),
                    "code": d.code,
                    "message": d.message,
                    "file": d.file.to_string_lossy(),
                    "line": d.line,
                    "column": d.column,
                    "snippet": d.snippet,
                    "help": d.help,
                })
            })
            .collect();
        serde_json::json!({
            "errors": self.errors(),
            "warnings": self.warnings(),
            "diagnostics": diagnostics,
        })
    }

    /// Every diagnostic rendered as rustc does, separated by blank lines, then a summary
    /// line such as `2 errors, 1 warning`. Ends with a newline.
    pub fn render_human(&self) -> String {
        let mut out = String::new();
        for d in &self.diagnostics {
            out.push_str(&d.render_human());
            out.push_str("\n\n");
        }
        out.push_str(&self.summary());
        out.push('\n');
        out
    }

    /// `N error(s), N warning(s)`.
    pub fn summary(&self) -> String {
        let plural = |n: usize, word: &str| {
            if n == 1 {
                format!("1 {word}")
            } else {
                format!("{n} {word}s")
            }
        };
        format!(
            "{}, {}",
            plural(self.errors(), "error"),
            plural(self.warnings(), "warning")
        )
    }

    fn sort(&mut self) {
        self.diagnostics
            .sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
    }
}

/// Validates a plugin directory, or a monitors file on its own (then without the
/// plugin's context: no skill checks). A path to `.claude-plugin/plugin.json` validates
/// its plugin. Never panics: I/O problems become `io-error` diagnostics.
pub fn validate(path: &Path) -> Report {
    let mut report = plugin::validate_path(path);
    report.sort();
    report
}

/// The error of [`load`].
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The plugin has errors; Claude Code would not load its monitors.
    #[error("{} in plugin {}", .report.summary(), .path.display())]
    Invalid {
        /// The path given to [`load`].
        path: PathBuf,
        /// The full report, to show the user.
        report: Box<Report>,
    },
}

/// Validates a plugin and returns its report only if it has no errors (warnings are
/// allowed): [`Report::monitors`] is then what Claude Code would run.
pub fn load(plugin_dir: &Path) -> Result<Report, LoadError> {
    let report = validate(plugin_dir);
    if report.errors() > 0 {
        return Err(LoadError::Invalid {
            path: plugin_dir.to_path_buf(),
            report: Box::new(report),
        });
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diag(line: usize, column: usize, snippet: Option<&str>, source: Option<&str>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code: "unknown-key".into(),
            message: "unknown key `nmae`".into(),
            file: PathBuf::from("monitors/monitors.json"),
            line,
            column,
            snippet: snippet.map(String::from),
            help: "did you mean `name`?".into(),
            source_line: source.map(String::from),
        }
    }

    #[test]
    fn renders_like_rustc() {
        let d = diag(3, 5, Some("\"nmae\""), Some("    \"nmae\": \"x\","));
        assert_eq!(
            d.render_human(),
            "error[unknown-key]: unknown key `nmae`\n  --> monitors/monitors.json:3:5\n   |\n 3 |     \"nmae\": \"x\",\n   |     ^^^^^^\n   = help: did you mean `name`?"
        );
        let d = diag(12, 2, None, Some("\t\"x\""));
        let r = d.render_human();
        assert!(r.contains("   --> monitors/monitors.json:12:2\n    |\n 12 |     \"x\"\n    |     ^\n    = help:"), "{r}");
        let d = diag(1, 1, None, None);
        assert_eq!(
            d.render_human(),
            "error[unknown-key]: unknown key `nmae`\n  --> monitors/monitors.json\n   = help: did you mean `name`?"
        );
    }

    #[test]
    fn report_counts_json_and_summary() {
        let mut r = Report::default();
        assert_eq!(r.render_human(), "0 errors, 0 warnings\n");
        r.diagnostics.push(diag(3, 5, Some("\"nmae\""), None));
        let mut w = diag(1, 1, None, None);
        w.severity = Severity::Warning;
        r.diagnostics.push(w);
        assert_eq!((r.errors(), r.warnings()), (1, 1));
        assert_eq!(r.summary(), "1 error, 1 warning");
        let j = r.to_json();
        assert_eq!(j["errors"], 1);
        assert_eq!(j["warnings"], 1);
        assert_eq!(j["diagnostics"][0]["severity"], "error");
        assert_eq!(j["diagnostics"][0]["file"], "monitors/monitors.json");
        assert_eq!(j["diagnostics"][0]["line"], 3);
        assert_eq!(j["diagnostics"][0]["column"], 5);
        assert_eq!(j["diagnostics"][0]["snippet"], "\"nmae\"");
        assert_eq!(j["diagnostics"][1]["severity"], "warning");
        let keys: Vec<&String> = j["diagnostics"][0].as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 8);
    }

    #[test]
    fn variable_substitution() {
        let m = PluginMonitor {
            name: "n".into(),
            command: "\"${CLAUDE_PLUGIN_ROOT}/w.sh\" ${X} $Y ${UNKNOWN} ${1} ${".into(),
            description: "d".into(),
            when: When::Always,
        };
        let out = m.command_with(|k| match k {
            "CLAUDE_PLUGIN_ROOT" => Some("/p q".into()),
            "X" => Some("x".into()),
            _ => None,
        });
        assert_eq!(out, "\"/p q/w.sh\" x $Y ${UNKNOWN} ${1} ${");
        assert_eq!(
            When::OnSkillInvoke("p:s".into()).as_json_value(),
            "on-skill-invoke:p:s"
        );
    }
}

/// The examples of this crate's README.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
