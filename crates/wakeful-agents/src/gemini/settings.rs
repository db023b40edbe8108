//! `wakeful integrate gemini`: adds wakeful's hooks to a Gemini CLI
//! `settings.json` (the user's, `~/.gemini/settings.json`, or a project's,
//! `<dir>/.gemini/settings.json`) without touching anything else in it.
//!
//! Gemini reads its settings with comments allowed (strip-json-comments,
//! then `JSON.parse`), so the file is edited as a syntax tree that keeps
//! comments, key order and formatting. A hook of wakeful is one whose
//! `name` is one of [`HOOKS`]'s: those are replaced, everything else stays.
//! An up-to-date file is not written at all (idempotent); a file that is
//! changed is copied to `<file>.wakeful-backup-<UTC time>` first, then
//! replaced atomically. A file that is not valid JSON (with comments), or
//! whose `hooks` are not shaped as Gemini reads them, is refused, with the
//! entries to add by hand.

use std::path::{Path, PathBuf};

use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use jsonc_parser::ParseOptions;
use serde_json::{json, Value};

use crate::Error;

/// Gemini's default hook timeout is 60 s; ours never wait, so a stuck
/// daemon costs at most this much of a turn.
pub const HOOK_TIMEOUT_MS: u64 = 30_000;

/// wakeful's hooks: (Gemini event, hook name, `wakeful hook` subcommand,
/// what it does).
pub const HOOKS: [(&str, &str, &str, &str); 3] = [
    (
        "SessionStart",
        "wakeful-session-start",
        "gemini-session-start",
        "wakeful: the session's background monitors (resume digest) as context",
    ),
    (
        "AfterTool",
        "wakeful-after-tool",
        "gemini-after-tool",
        "wakeful: events of background monitors that arrived during the turn, appended to the tool result",
    ),
    (
        "AfterAgent",
        "wakeful-after-agent",
        "gemini-after-agent",
        "wakeful: events still unread at the end of a turn, sent back as a new prompt",
    ),
];

/// The shell command of a hook: nothing at all when `wakeful` is not on
/// PATH (Gemini reads any exit but 0 and 1 as "block").
pub fn command(subcommand: &str) -> String {
    format!("command -v wakeful >/dev/null 2>&1 || exit 0; exec wakeful hook {subcommand}")
}

/// The hook definition (one entry of `hooks.<event>`) wakeful wants.
pub fn definition(name: &str, subcommand: &str, description: &str) -> Value {
    json!({
        "hooks": [{
            "name": name,
            "type": "command",
            "command": command(subcommand),
            "timeout": HOOK_TIMEOUT_MS,
            "description": description,
        }]
    })
}

/// [`definition`] for the syntax tree, its keys in a readable order.
fn definition_input(name: &str, subcommand: &str, description: &str) -> CstInputValue {
    let hook = [
        ("name", name.into()),
        ("type", "command".into()),
        ("command", command(subcommand).into()),
        ("timeout", HOOK_TIMEOUT_MS.into()),
        ("description", description.into()),
    ];
    CstInputValue::Object(vec![(
        "hooks".into(),
        CstInputValue::Array(vec![CstInputValue::Object(
            hook.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        )]),
    )])
}

/// The `hooks` object wakeful wants, for showing or adding by hand.
pub fn hooks_snippet() -> Value {
    let mut hooks = serde_json::Map::new();
    for (event, name, sub, description) in HOOKS {
        hooks.insert(
            event.to_string(),
            json!([definition(name, sub, description)]),
        );
    }
    json!({ "hooks": hooks })
}

/// What merging did to a settings text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// The new text (the old one when nothing changed).
    pub text: String,
    /// The events whose wakeful hooks were added or replaced.
    pub changed: Vec<&'static str>,
    /// Settings in the file that keep the hooks from running.
    pub warnings: Vec<String>,
}

/// For the syntax tree of a text already known to be JSON with comments.
fn parse_options() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
    }
}

/// The text with its comments (`//` to the end of the line, `/* … */`)
/// replaced by spaces, as Gemini's strip-json-comments does before
/// `JSON.parse`: line and column numbers stay right.
pub fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push(c);
                while let Some(c) = chars.next() {
                    out.push(c);
                    match c {
                        '\\' => {
                            if let Some(e) = chars.next() {
                                out.push(e);
                            }
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                out.push(' ');
                while let Some(&c) = chars.peek() {
                    if c == '\n' {
                        break;
                    }
                    out.push(blank(c));
                    chars.next();
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                out.push(' ');
                let mut last = ' ';
                for c in chars.by_ref() {
                    out.push(blank(c));
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Whether a hook entry (in a definition's `hooks`) is wakeful's.
fn is_ours(hook: &Value) -> bool {
    hook.get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| HOOKS.iter().any(|(_, name, _, _)| *name == n))
}

/// Why the text of a settings file cannot take wakeful's hooks ([`merge`]).
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// Not JSON, comments aside.
    #[error("it is not valid JSON (comments aside): {0}")]
    Json(#[source] serde_json::Error),
    /// Not JSON with comments, as the editor of the file reads it.
    #[error("{0}")]
    Jsonc(#[source] jsonc_parser::errors::ParseError),
    /// Its top level is not an object.
    #[error("its top level is not a JSON object")]
    NotAnObject,
    /// Its `hooks` is not an object.
    #[error("its `hooks` is not an object")]
    HooksNotAnObject,
    /// Its `hooks.<event>` is not an array.
    #[error("its `hooks.{event}` is not an array")]
    NotAnArray {
        /// The event.
        event: &'static str,
    },
}

/// Adds or refreshes wakeful's hooks in the text of a settings file (empty:
/// a new file). `Err` says what is wrong with the text.
pub fn merge(text: &str) -> Result<Merged, SettingsError> {
    let text = if text.trim().is_empty() { "{}\n" } else { text };
    let value: Value = serde_json::from_str(&strip_comments(text)).map_err(SettingsError::Json)?;
    let Value::Object(root) = &value else {
        return Err(SettingsError::NotAnObject);
    };
    let hooks = match root.get("hooks") {
        None => None,
        Some(Value::Object(h)) => Some(h),
        Some(_) => return Err(SettingsError::HooksNotAnObject),
    };
    let mut stale = Vec::new();
    for (event, name, sub, description) in HOOKS {
        let defs = match hooks.and_then(|h| h.get(event)) {
            None => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(SettingsError::NotAnArray { event }),
        };
        let ours: Vec<&Value> = defs
            .iter()
            .filter(|d| {
                d.get("hooks")
                    .and_then(Value::as_array)
                    .is_some_and(|hs| hs.iter().any(is_ours))
            })
            .collect();
        if ours != [&definition(name, sub, description)] {
            stale.push(event);
        }
    }
    let warnings = warnings(root);
    if stale.is_empty() {
        return Ok(Merged {
            text: text.to_string(),
            changed: stale,
            warnings,
        });
    }
    let cst = CstRootNode::parse(text, &parse_options()).map_err(SettingsError::Jsonc)?;
    let root_obj = cst.object_value().ok_or(SettingsError::NotAnObject)?;
    let hooks_obj = root_obj
        .object_value_or_create("hooks")
        .ok_or(SettingsError::HooksNotAnObject)?;
    for (event, name, sub, description) in HOOKS {
        if !stale.contains(&event) {
            continue;
        }
        let defs = hooks_obj
            .array_value_or_create(event)
            .ok_or(SettingsError::NotAnArray { event })?;
        for def in defs.elements().into_iter().rev() {
            let Some(def_obj) = def.as_object() else {
                continue;
            };
            remove_ours(&def_obj);
            let emptied = def_obj
                .array_value("hooks")
                .is_some_and(|hs| hs.elements().is_empty());
            if emptied && had_ours(&value, event, def.element_index()) {
                def.remove();
            }
        }
        defs.ensure_multiline();
        defs.append(definition_input(name, sub, description));
    }
    let mut out = cst.to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(Merged {
        text: out,
        changed: stale,
        warnings,
    })
}

/// Removes wakeful's entries from a definition's `hooks` array.
fn remove_ours(def: &CstObject) {
    let Some(hooks) = def.array_value("hooks") else {
        return;
    };
    for hook in hooks.elements().into_iter().rev() {
        let ours = hook.as_object().is_some_and(|o| {
            o.get("name")
                .and_then(|p| p.value())
                .and_then(|v| v.as_string_lit())
                .and_then(|s| s.decoded_value().ok())
                .is_some_and(|n| HOOKS.iter().any(|(_, name, _, _)| *name == n))
        });
        if ours {
            hook.remove();
        }
    }
}

/// Whether definition `index` of `hooks.<event>` in the original held a hook
/// of wakeful's (a definition the user left empty is not removed).
fn had_ours(original: &Value, event: &str, index: Option<usize>) -> bool {
    index
        .and_then(|i| original.get("hooks")?.get(event)?.get(i))
        .and_then(|d| d.get("hooks")?.as_array())
        .is_some_and(|hs| hs.iter().any(is_ours))
}

/// Settings that keep the hooks from running.
fn warnings(root: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    let config = root.get("hooksConfig");
    if config.and_then(|c| c.get("enabled")) == Some(&Value::Bool(false)) {
        out.push(
            "`hooksConfig.enabled` is false in this file: Gemini runs no hook until it is true (wakeful leaves it as it is)".to_string(),
        );
    }
    if let Some(disabled) = config
        .and_then(|c| c.get("disabled"))
        .and_then(Value::as_array)
    {
        for (_, name, _, _) in HOOKS {
            if disabled.iter().any(|d| d.as_str() == Some(name)) {
                out.push(format!(
                    "`hooksConfig.disabled` names `{name}`: Gemini skips it (`/hooks enable {name}` turns it on)"
                ));
            }
        }
    }
    out
}

// ------------------------------------------------------------ IO

/// The settings file: `<dir>/.gemini/settings.json` for a project, else the
/// user's, under `$GEMINI_CLI_HOME` or `$HOME` (as Gemini finds it).
pub fn settings_path(project: Option<&Path>) -> Result<PathBuf, Error> {
    if let Some(dir) = project {
        return Ok(dir.join(".gemini").join("settings.json"));
    }
    let home = ["GEMINI_CLI_HOME", "HOME"]
        .iter()
        .find_map(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
        .ok_or_else(|| {
            Error::usage("cannot find Gemini's settings: neither $GEMINI_CLI_HOME nor $HOME is set; pass --project DIR",
            )
        })?;
    Ok(PathBuf::from(home).join(".gemini").join("settings.json"))
}

/// What `install` did.
#[derive(Debug)]
pub struct Installed {
    /// The settings file.
    pub path: PathBuf,
    /// Whether it did not exist before.
    pub created: bool,
    /// The events whose wakeful hooks were added or replaced.
    pub changed: Vec<&'static str>,
    /// The copy of the previous file, when it was changed.
    pub backup: Option<PathBuf>,
    /// Settings in the file that keep the hooks from running.
    pub warnings: Vec<String>,
}

/// Merges wakeful's hooks into the settings file at `path` (following a
/// symlink to the file it names).
pub fn install(path: &Path) -> Result<Installed, Error> {
    let fail = |what: String| Error::failed(what);
    // A dotfile manager's symlink stays a symlink: the file it names is
    // edited.
    let target = match std::fs::canonicalize(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => path.to_path_buf(),
        Err(e) => return Err(fail(format!("cannot read {}: {e}", path.display()))),
    };
    let (text, created) = match std::fs::read_to_string(&target) {
        Ok(t) => (t, false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), true),
        Err(e) => return Err(fail(format!("cannot read {}: {e}", target.display()))),
    };
    let merged = merge(&text).map_err(|why| {
        Error::failed(format!(
                "not changing {}: {why}. Fix the file, or add these entries to its \"hooks\" by hand:\n{}",
                target.display(),
                serde_json::to_string_pretty(&hooks_snippet()).unwrap_or_default()
            ),
        )
    })?;
    let mut installed = Installed {
        path: target.clone(),
        created,
        changed: merged.changed.clone(),
        backup: None,
        warnings: merged.warnings.clone(),
    };
    if merged.changed.is_empty() {
        return Ok(installed);
    }
    let dir = target
        .parent()
        .ok_or_else(|| fail(format!("{} has no folder", target.display())))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
    let name = target
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("settings.json");
    if !created {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
        let backup = dir.join(format!("{name}.wakeful-backup-{stamp}"));
        std::fs::copy(&target, &backup).map_err(|e| {
            fail(format!(
                "not changing {}: cannot back it up to {}: {e}",
                target.display(),
                backup.display()
            ))
        })?;
        installed.backup = Some(backup);
    }
    let tmp = dir.join(format!(".{name}.wakeful-{}", std::process::id()));
    let written = std::fs::write(&tmp, &merged.text).and_then(|()| {
        if let Ok(meta) = std::fs::metadata(&target) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, &target)
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(format!("cannot write {}: {e}", target.display())));
    }
    Ok(installed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours_in(text: &str) -> Value {
        let v: Value = serde_json::from_str(&strip_comments(text)).unwrap();
        v["hooks"].clone()
    }

    #[test]
    fn a_new_file_gets_the_three_hooks() {
        let m = merge("").unwrap();
        assert_eq!(m.changed, ["SessionStart", "AfterTool", "AfterAgent"]);
        assert!(
            m.text
                .contains("\"name\": \"wakeful-after-tool\",\n            \"type\": \"command\""),
            "{}",
            m.text
        );
        let v: Value = serde_json::from_str(&m.text).unwrap();
        assert_eq!(v, hooks_snippet());
        assert_eq!(
            v["hooks"]["AfterAgent"][0]["hooks"][0]["command"],
            "command -v wakeful >/dev/null 2>&1 || exit 0; exec wakeful hook gemini-after-agent"
        );
        // Idempotent: the second run changes nothing.
        let again = merge(&m.text).unwrap();
        assert!(again.changed.is_empty());
        assert_eq!(again.text, m.text);
    }

    #[test]
    fn other_settings_and_comments_stay() {
        let text = r#"{
  // my theme
  "ui": {"theme": "GitHub", "zeta": 1, "alpha": 2},
  "hooks": {
    "AfterTool": [
      {"matcher": "write_file", "hooks": [{"type": "command", "command": "lint.sh", "name": "lint"}]}
    ],
    "BeforeTool": [{"hooks": [{"type": "command", "command": "guard.sh"}]}]
  },
  "mcpServers": {"wakeful": {"command": "wakeful", "args": ["mcp"]}}
}
"#;
        let m = merge(text).unwrap();
        assert!(m.text.contains("// my theme"), "{}", m.text);
        assert!(
            m.text.find("\"zeta\"").unwrap() < m.text.find("\"alpha\"").unwrap(),
            "key order kept"
        );
        let hooks = ours_in(&m.text);
        assert_eq!(hooks["AfterTool"][0]["hooks"][0]["name"], "lint");
        assert_eq!(
            hooks["AfterTool"][1],
            definition(HOOKS[1].1, HOOKS[1].2, HOOKS[1].3)
        );
        assert_eq!(hooks["BeforeTool"][0]["hooks"][0]["command"], "guard.sh");
        assert_eq!(hooks["SessionStart"].as_array().unwrap().len(), 1);
        let again = merge(&m.text).unwrap();
        assert!(again.changed.is_empty());
    }

    #[test]
    fn an_old_wakeful_hook_is_replaced_not_doubled() {
        let text = r#"{"hooks": {"AfterAgent": [
            {"hooks": [{"name": "wakeful-after-agent", "type": "command", "command": "old"}]},
            {"hooks": [{"name": "mine", "type": "command", "command": "x"},
                       {"name": "wakeful-after-agent", "type": "command", "command": "older"}]},
            {"hooks": []}
        ]}}"#;
        let m = merge(text).unwrap();
        let defs = ours_in(&m.text)["AfterAgent"].as_array().unwrap().clone();
        assert_eq!(defs.len(), 3, "{}", m.text);
        assert_eq!(
            defs[0]["hooks"],
            json!([{"name": "mine", "type": "command", "command": "x"}])
        );
        // A definition the user left empty is the user's.
        assert_eq!(defs[1], json!({"hooks": []}));
        assert_eq!(defs[2], definition(HOOKS[2].1, HOOKS[2].2, HOOKS[2].3));
        assert!(merge(&m.text).unwrap().changed.is_empty());
    }

    #[test]
    fn refuses_what_gemini_would_not_read_or_could_be_lost() {
        for (text, why) in [
            ("{\"a\": 1,}", "not valid JSON"),
            ("{'a': 1}", "not valid JSON"),
            ("not json", "not valid JSON"),
            ("[1]", "top level is not a JSON object"),
            ("{\"hooks\": []}", "`hooks` is not an object"),
            (
                "{\"hooks\": {\"AfterTool\": {}}}",
                "`hooks.AfterTool` is not an array",
            ),
        ] {
            let e = merge(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn comments_are_blanked_outside_strings() {
        assert_eq!(
            strip_comments("{\"a\": \"//x/*\", // c\n /* d\n e */ \"b\": 1}"),
            "{\"a\": \"//x/*\",     \n     \n      \"b\": 1}"
        );
        assert_eq!(strip_comments(r#"{"q": "\"//"}"#), r#"{"q": "\"//"}"#);
    }

    #[test]
    fn warns_when_hooks_are_switched_off() {
        let m = merge(r#"{"hooksConfig": {"enabled": false, "disabled": ["wakeful-after-tool"]}}"#)
            .unwrap();
        assert_eq!(m.warnings.len(), 2, "{:?}", m.warnings);
        assert!(m.warnings[0].contains("hooksConfig.enabled"));
        assert!(m.warnings[1].contains("/hooks enable wakeful-after-tool"));
    }
}
