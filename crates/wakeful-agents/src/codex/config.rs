//! `wakeful integrate codex --hooks`: wakeful's two Codex hooks
//! ([`super::hooks`]) in a Codex `config.toml` — the user's
//! (`$CODEX_HOME/config.toml`, else `~/.codex/config.toml`) or a project's
//! (`<dir>/.codex/config.toml`) — without touching anything else in it.
//!
//! Codex reads hooks from `[[hooks.<Event>]]` matcher groups, each with
//! `[[hooks.<Event>.hooks]]` handlers (`type = "command"`, `command`,
//! `timeout` in seconds, `statusMessage`). wakeful writes its groups as one
//! block between two comment lines, [`BEGIN`] and [`END`], appended to the
//! end of the file the first time: every comment, key and table outside
//! the block stays byte for byte. Running it again replaces the block in
//! place (nothing is written when it is current, so an unchanged block
//! keeps its place, and Codex's trust in it, which is keyed by position);
//! `--remove` takes the block out again. The result is parsed before it is
//! written, and refused (the file left as it was) unless wakeful's hooks
//! read back exactly as written: a file that is not TOML, a `hooks` that is
//! not a table, or keys after the block that TOML would put in its last
//! table. A changed file is first copied to
//! `config.toml.wakeful-backup-<UTC time>`, then replaced atomically.
//!
//! Codex 0.171 runs a hook of the user's or a project's config only once
//! the user trusted it (the TUI says "hooks need review before they can
//! run" at start), or under `--dangerously-bypass-hook-trust`.

use std::path::{Path, PathBuf};

use toml::Value;

use crate::Error;

/// The line that opens wakeful's block.
pub const BEGIN: &str =
    "# BEGIN wakeful hooks (`wakeful integrate codex --hooks` writes this block; --remove removes it)";
/// The line that closes it.
pub const END: &str = "# END wakeful hooks";
/// How Codex finds the block's lines, whatever follows on them.
const BEGIN_PREFIX: &str = "# BEGIN wakeful hooks";

/// Codex's default hook timeout is 600 s; ours never wait, so a stuck
/// daemon costs at most this much of a turn.
pub const HOOK_TIMEOUT_SEC: u64 = 30;

/// wakeful's hooks: (Codex event, `wakeful hook` subcommand, status line).
pub const HOOKS: [(&str, &str, &str); 2] = [
    (
        "SessionStart",
        "codex-session-start",
        "wakeful: background monitors",
    ),
    (
        "Stop",
        "codex-stop",
        "wakeful: events of background monitors",
    ),
];

/// The shell command of a hook: nothing at all when `wakeful` is not on
/// PATH.
pub fn command(subcommand: &str) -> String {
    format!("command -v wakeful >/dev/null 2>&1 || exit 0; exec wakeful hook {subcommand}")
}

/// A TOML basic string.
fn quoted(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// wakeful's block, from [`BEGIN`] to [`END`] and a newline.
pub fn block() -> String {
    let mut out = format!("{BEGIN}\n");
    for (i, (event, sub, status)) in HOOKS.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!(
            "[[hooks.{event}]]\n[[hooks.{event}.hooks]]\ntype = \"command\"\ncommand = {}\ntimeout = {HOOK_TIMEOUT_SEC}\nstatusMessage = {}\n",
            quoted(&command(sub)),
            quoted(status)
        ));
    }
    out.push_str(END);
    out.push('\n');
    out
}

/// Why a config text cannot take wakeful's block, or give it back.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not TOML (before or after the edit).
    #[error("it is not valid TOML{after}: {source}")]
    Toml {
        /// " once wakeful's block is added" when only the edit breaks it.
        after: &'static str,
        /// The parser's message.
        #[source]
        source: toml::de::Error,
    },
    /// One marker line without the other, or in the wrong order.
    #[error(
        "it has a `{BEGIN_PREFIX}` line without its `{END}` line after it (or the other way round)"
    )]
    Markers,
    /// wakeful's hooks do not read back as written.
    #[error("wakeful's hooks would not read back as written (is `hooks` a table of arrays of tables, and does a table header follow `{END}`?)")]
    Shape,
}

/// Where the block is: the byte range of its lines (from the start of the
/// `BEGIN` line to the end of the `END` line and its newline).
fn find_block(text: &str) -> Result<Option<std::ops::Range<usize>>, ConfigError> {
    let mut begin = None;
    let mut end = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare.starts_with(BEGIN_PREFIX) && begin.is_none() {
            begin = Some(at);
        } else if bare == END && end.is_none() {
            end = Some(at + line.len());
        }
        at += line.len();
    }
    match (begin, end) {
        (None, None) => Ok(None),
        (Some(b), Some(e)) if b < e => Ok(Some(b..e)),
        _ => Err(ConfigError::Markers),
    }
}

/// Whether wakeful's hooks in parsed `config` are exactly as [`block`]
/// writes them (one group per event holding one handler).
fn reads_back(config: &Value) -> bool {
    HOOKS.iter().all(|(event, sub, status)| {
        let groups = config
            .get("hooks")
            .and_then(|h| h.get(*event))
            .and_then(Value::as_array);
        groups.is_some_and(|groups| {
            groups.iter().any(|g| {
                let Some(handlers) = g.get("hooks").and_then(Value::as_array) else {
                    return false;
                };
                g.as_table().is_some_and(|t| t.len() == 1)
                    && handlers.len() == 1
                    && handlers[0].as_table().is_some_and(|h| {
                        h.len() == 4
                            && h.get("type").and_then(Value::as_str) == Some("command")
                            && h.get("timeout").and_then(Value::as_integer)
                                == i64::try_from(HOOK_TIMEOUT_SEC).ok()
                            && h.get("command").and_then(Value::as_str) == Some(&command(sub))
                            && h.get("statusMessage").and_then(Value::as_str) == Some(status)
                    })
            })
        })
    })
}

fn parse(text: &str, after: &'static str) -> Result<Value, ConfigError> {
    toml::from_str::<toml::Table>(text)
        .map(Value::Table)
        .map_err(|source| ConfigError::Toml { after, source })
}

/// What [`merge`] or [`remove`] did to a config text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// The new text (the old one when nothing changed).
    pub text: String,
    /// Whether it differs from the old one.
    pub changed: bool,
    /// Settings in the file that keep the hooks from running.
    pub warnings: Vec<String>,
}

/// Settings of a parsed config that turn Codex's hooks off.
fn warnings(config: &Value) -> Vec<String> {
    ["hooks", "codex_hooks"]
        .iter()
        .filter(|k| {
            config
                .get("features")
                .and_then(|f| f.get(**k))
                .and_then(Value::as_bool)
                == Some(false)
        })
        .map(|k| format!("`[features] {k} = false` turns Codex's hooks off: set it to true"))
        .collect()
}

/// Adds wakeful's block to a config text (empty: a new file), or brings
/// the block there up to date.
pub fn merge(text: &str) -> Result<Edited, ConfigError> {
    parse(text, "")?;
    let new = match find_block(text)? {
        Some(range) => {
            let mut t = text.to_string();
            t.replace_range(range, &block());
            t
        }
        None if text.trim().is_empty() => block(),
        None => {
            let mut t = text.to_string();
            if !t.ends_with('\n') {
                t.push('\n');
            }
            if !t.ends_with("\n\n") {
                t.push('\n');
            }
            t.push_str(&block());
            t
        }
    };
    let config = parse(&new, " once wakeful's block is added")?;
    if !reads_back(&config) {
        return Err(ConfigError::Shape);
    }
    Ok(Edited {
        changed: new != text,
        warnings: warnings(&config),
        text: new,
    })
}

/// Takes wakeful's block (and the blank line [`merge`] put before it) out
/// of a config text.
pub fn remove(text: &str) -> Result<Edited, ConfigError> {
    let Some(range) = find_block(text)? else {
        return Ok(Edited {
            text: text.to_string(),
            changed: false,
            warnings: Vec::new(),
        });
    };
    let start = if text[..range.start].ends_with("\n\n") {
        range.start - 1
    } else {
        range.start
    };
    let mut new = text.to_string();
    new.replace_range(start..range.end, "");
    parse(&new, " once wakeful's block is removed")?;
    Ok(Edited {
        text: new,
        changed: true,
        warnings: Vec::new(),
    })
}

/// The config file: `<dir>/.codex/config.toml` for a project, else
/// `$CODEX_HOME/config.toml`, else `~/.codex/config.toml`.
pub fn config_path(project: Option<&Path>) -> Result<PathBuf, Error> {
    if let Some(dir) = project {
        return Ok(dir.join(".codex").join("config.toml"));
    }
    super::probe::codex_home(None)
        .map(|h| h.join("config.toml"))
        .ok_or_else(|| {
            Error::usage(
                "cannot find Codex's config: neither $CODEX_HOME nor $HOME is set; pass --project DIR",
            )
        })
}

/// What [`install`] did to the file.
#[derive(Debug)]
pub struct Installed {
    /// The config file (a symlink's target).
    pub path: PathBuf,
    /// Whether it did not exist before.
    pub created: bool,
    /// Whether it was written.
    pub changed: bool,
    /// The copy of the previous file, when it was changed.
    pub backup: Option<PathBuf>,
    /// Settings in the file that keep the hooks from running.
    pub warnings: Vec<String>,
}

/// Adds wakeful's hooks to the config file at `path`, or (`remove`) takes
/// them out.
pub fn install(path: &Path, remove_them: bool) -> Result<Installed, Error> {
    let fail = |what: String| Error::failed(what);
    let target = match std::fs::canonicalize(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => path.to_path_buf(),
        Err(e) => return Err(fail(format!("cannot read {}: {e}", path.display()))),
    };
    let (text, created) = match std::fs::read_to_string(&target) {
        Ok(t) => (t, false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && remove_them => {
            return Ok(Installed {
                path: target,
                created: false,
                changed: false,
                backup: None,
                warnings: Vec::new(),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), true),
        Err(e) => return Err(fail(format!("cannot read {}: {e}", target.display()))),
    };
    let edited = if remove_them {
        remove(&text).map_err(|why| {
            fail(format!(
                "not changing {}: {why}. Remove wakeful's hooks by hand.",
                target.display()
            ))
        })?
    } else {
        merge(&text).map_err(|why| {
            fail(format!(
                "not changing {}: {why}. Fix the file, or add this block by hand:\n{}",
                target.display(),
                block()
            ))
        })?
    };
    let mut installed = Installed {
        path: target.clone(),
        created,
        changed: edited.changed,
        backup: None,
        warnings: edited.warnings,
    };
    if !edited.changed {
        return Ok(installed);
    }
    installed.backup = crate::install::replace_file(&target, &edited.text, !created)?;
    Ok(installed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_gets_the_block_once() {
        let m = merge("").unwrap();
        assert!(m.changed);
        assert_eq!(m.text, block());
        let v = parse(&m.text, "").unwrap();
        assert_eq!(
            v["hooks"]["Stop"][0]["hooks"][0]["command"].as_str(),
            Some("command -v wakeful >/dev/null 2>&1 || exit 0; exec wakeful hook codex-stop")
        );
        assert_eq!(
            v["hooks"]["SessionStart"][0]["hooks"][0]["timeout"].as_integer(),
            Some(30)
        );
        let again = merge(&m.text).unwrap();
        assert!(!again.changed);
        assert_eq!(again.text, m.text);
    }

    #[test]
    fn everything_else_stays_and_remove_gives_it_back() {
        let text = "# my config\nmodel = \"gpt-5\" # inline\n\n[mcp_servers.wakeful]\ncommand = \"wakeful\"\nargs = [\"mcp\"]\n\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\ncommand = \"mine.sh\"\n";
        let m = merge(text).unwrap();
        assert!(m.text.starts_with(text), "{}", m.text);
        let v = parse(&m.text, "").unwrap();
        let stops = v["hooks"]["Stop"].as_array().unwrap();
        assert_eq!(stops.len(), 2);
        assert_eq!(stops[0]["hooks"][0]["command"].as_str(), Some("mine.sh"));
        assert_eq!(
            v["mcp_servers"]["wakeful"]["command"].as_str(),
            Some("wakeful")
        );
        let r = remove(&m.text).unwrap();
        assert!(r.changed);
        assert_eq!(r.text, text);
        let none = remove(text).unwrap();
        assert!(!none.changed);
        // Without a final newline.
        let bare = "model = \"x\"";
        let m = merge(bare).unwrap();
        assert_eq!(m.text, format!("{bare}\n\n{}", block()));
        assert_eq!(remove(&m.text).unwrap().text, format!("{bare}\n"));
    }

    #[test]
    fn an_old_block_is_replaced_in_place() {
        let old = format!(
            "a = 1\n\n{BEGIN_PREFIX} (old)\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\ncommand = \"old\"\n{END}\n\n[tui]\nx = 2\n"
        );
        let m = merge(&old).unwrap();
        assert!(m.changed);
        assert_eq!(m.text, format!("a = 1\n\n{}\n[tui]\nx = 2\n", block()));
        assert!(!m.text.contains("\"old\""));
    }

    #[test]
    fn what_cannot_take_the_block_is_refused() {
        assert!(matches!(
            merge("not toml ="),
            Err(ConfigError::Toml { after: "", .. })
        ));
        assert!(matches!(
            merge("hooks = 3\n"),
            Err(ConfigError::Toml { .. })
        ));
        assert!(matches!(
            merge(&format!("{BEGIN}\n")),
            Err(ConfigError::Markers)
        ));
        assert!(matches!(
            merge(&format!("{END}\n{BEGIN}\n")),
            Err(ConfigError::Markers)
        ));
        // A key after the block would land in its last table.
        let captured = format!("{}model = \"x\"\n", block());
        assert!(matches!(merge(&captured), Err(ConfigError::Shape)));
    }

    #[test]
    fn turned_off_hooks_are_warned_about() {
        let m = merge("[features]\nhooks = false\ncodex_hooks = true\n").unwrap();
        assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
        assert!(m.warnings[0].contains("hooks = false"));
        assert!(merge("[features]\nhooks = true\n")
            .unwrap()
            .warnings
            .is_empty());
    }
}
