//! Reading a plugin the way Claude Code does: the manifest, where its monitors are,
//! the monitors themselves, its skills.

use std::collections::HashMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

use jsonc_parser::ast::{Array, Object, ObjectProp, Value};

use crate::json::{self, Source};
use crate::{codes, lint, Diagnostic, PluginMonitor, Report, Severity, When};

const MANIFEST: &str = ".claude-plugin/plugin.json";
const DEFAULT_MONITORS: &str = "monitors/monitors.json";
const ENTRY_KEYS: &[&str] = &["name", "command", "description", "when"];
const SKILL_PREFIX: &str = "on-skill-invoke:";

/// What the plugin context brings to monitor checks.
struct PluginCtx {
    name: String,
    /// Skill names as published after the namespace (`<plugin>:<skill>`).
    skills: Vec<String>,
}

pub(crate) fn validate_path(path: &Path) -> Report {
    let mut report = Report::default();
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            report.diagnostics.push(Diagnostic::whole_file(
                Severity::Error,
                codes::IO_ERROR,
                path,
                format!("cannot read `{}`: {e}", path.display()),
                "give the path of a plugin directory (the one holding `.claude-plugin/`) or of a \
                 monitors.json file",
            ));
            return report;
        }
    };
    if meta.is_dir() {
        validate_plugin(path, &mut report);
        return report;
    }
    // `.../.claude-plugin/plugin.json`: validate its plugin.
    let is_manifest = path.file_name().is_some_and(|n| n == "plugin.json")
        && path
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n == ".claude-plugin");
    if is_manifest {
        if let Some(root) = path.parent().and_then(Path::parent) {
            let root = if root.as_os_str().is_empty() {
                Path::new(".")
            } else {
                root
            };
            validate_plugin(root, &mut report);
            return report;
        }
    }
    if let Some(src) = read_source(path, path.to_path_buf(), &mut report) {
        check_monitors_file(&src, None, &mut report);
    }
    report
}

fn read_source(path: &Path, display: PathBuf, report: &mut Report) -> Option<Source> {
    match fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Some(Source::new(display, text)),
            Err(e) => {
                report.diagnostics.push(Diagnostic::whole_file(
                    Severity::Error,
                    codes::IO_ERROR,
                    display,
                    format!("the file is not valid UTF-8 ({})", e.utf8_error()),
                    "save it as UTF-8",
                ));
                None
            }
        },
        Err(e) => {
            report.diagnostics.push(Diagnostic::whole_file(
                Severity::Error,
                codes::IO_ERROR,
                display,
                format!("cannot read the file: {e}"),
                "check the file's permissions",
            ));
            None
        }
    }
}

/// Where the monitors are declared.
enum Declared<'s, 'a> {
    /// Nothing declared: `monitors/monitors.json` if it exists.
    Default,
    /// An inline array in `plugin.json`.
    Inline(&'s Array<'a>),
    /// A path in `plugin.json`, with the range of the string.
    Path(String, std::ops::Range<usize>),
    /// Declared with a wrong type (already reported): nothing is loaded.
    Invalid,
}

fn validate_plugin(root: &Path, report: &mut Report) {
    report.root = Some(root.to_path_buf());
    let dir_name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .or_else(|| {
            fs::canonicalize(root)
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        })
        .unwrap_or_else(|| "plugin".to_string());
    let manifest_path = root.join(MANIFEST);

    let manifest_src = if manifest_path.is_file() {
        match read_source(&manifest_path, PathBuf::from(MANIFEST), report) {
            Some(src) => Some(src),
            None => return,
        }
    } else {
        if manifest_path.exists() {
            report.diagnostics.push(Diagnostic::whole_file(
                Severity::Error,
                codes::IO_ERROR,
                MANIFEST,
                "`.claude-plugin/plugin.json` is not a file",
                "make `.claude-plugin/plugin.json` a JSON file",
            ));
            return;
        }
        report.diagnostics.push(Diagnostic::whole_file(
            Severity::Warning,
            codes::NO_MANIFEST,
            MANIFEST,
            format!(
                "no `.claude-plugin/plugin.json`: Claude Code loads the plugin under its \
                 directory's name, `{dir_name}`, which changes with where it is installed (and \
                 so do its skills' names, `{dir_name}:<skill>`)"
            ),
            format!(
                "add `.claude-plugin/plugin.json` with at least a name: `{{\"name\": \"{dir_name}\"}}`"
            ),
        ));
        None
    };

    let parsed = match &manifest_src {
        Some(src) => match src.parse() {
            Ok(v) => Some((src, v)),
            Err(d) => {
                report.diagnostics.push(*d);
                return;
            }
        },
        None => None,
    };

    let mut plugin_name = dir_name.clone();
    let mut declared = Declared::Default;
    let mut skill_paths: Option<Vec<String>> = None;
    if let Some((src, value)) = &parsed {
        let Some(manifest) = value.as_object() else {
            report.diagnostics.push(src.diag(
                Severity::Error,
                codes::WRONG_TYPE,
                json::range(value),
                format!(
                    "`plugin.json` must be a JSON object, not {}",
                    json::type_name(value)
                ),
                "write the manifest as an object: `{\"name\": \"my-plugin\", ...}`",
            ));
            return;
        };
        if let Some(name) = check_manifest(src, manifest, report) {
            plugin_name = name;
        }
        declared = monitors_declaration(src, manifest, report);
        skill_paths = manifest_skill_paths(src, manifest, report);
    }
    report.plugin_name = Some(plugin_name.clone());

    let ctx = PluginCtx {
        skills: discover_skills(root, skill_paths.as_deref()),
        name: plugin_name,
    };

    match declared {
        Declared::Invalid => {}
        Declared::Inline(array) => {
            if let Some((src, _)) = &parsed {
                check_entries(src, array, Some(&ctx), report);
            }
        }
        Declared::Path(path, range) => {
            if let Some((src, _)) = &parsed {
                if let Some((full, display)) =
                    resolve_declared_path(root, &path, src, range, report)
                {
                    if let Some(monitors) = read_source(&full, display, report) {
                        check_monitors_file(&monitors, Some(&ctx), report);
                    }
                }
            }
        }
        Declared::Default => {
            let full = root.join(DEFAULT_MONITORS);
            if fs::symlink_metadata(&full).is_err() {
                return; // a plugin without monitors
            }
            let display = PathBuf::from(DEFAULT_MONITORS);
            if !full.is_file() {
                report.diagnostics.push(Diagnostic::whole_file(
                    Severity::Error,
                    codes::PATH_NOT_FOUND,
                    display,
                    "`monitors/monitors.json` exists but is not a readable file (a directory, or \
                     a broken symlink)",
                    "make `monitors/monitors.json` a JSON file holding an array of monitors",
                ));
                return;
            }
            if escapes_root(root, &full) {
                report.diagnostics.push(Diagnostic::whole_file(
                    Severity::Error,
                    codes::PATH_ESCAPES_PLUGIN,
                    display,
                    "`monitors/monitors.json` is a symlink to a file outside the plugin: an \
                     installed plugin is copied without it",
                    "keep the monitors file inside the plugin directory (copy it rather than \
                     symlink it)",
                ));
                return;
            }
            if let Some(monitors) = read_source(&full, display, report) {
                check_monitors_file(&monitors, Some(&ctx), report);
            }
        }
    }
}

/// Checks the manifest's own fields; returns the plugin's name if it is valid.
fn check_manifest(src: &Source, manifest: &Object<'_>, report: &mut Report) -> Option<String> {
    let mut name = None;
    match json::get(manifest, "name") {
        None => report.diagnostics.push(src.diag(
            Severity::Error,
            codes::MISSING_FIELD,
            json::open_brace(manifest),
            "`plugin.json` has no `name`: it is the one required field",
            "add the plugin's name, in kebab-case: `\"name\": \"my-plugin\"`",
        )),
        Some(p) => match p.value.as_string_lit() {
            Some(s) if s.value.trim().is_empty() => report.diagnostics.push(src.diag(
                Severity::Error,
                codes::EMPTY_FIELD,
                json::range(&p.value),
                "the plugin's `name` is empty",
                "give the plugin a name, in kebab-case: `\"name\": \"my-plugin\"`",
            )),
            Some(s) => name = Some(s.value.to_string()),
            None => {
                report
                    .diagnostics
                    .push(wrong_type(src, p, "a string", "`\"name\": \"my-plugin\"`"))
            }
        },
    }
    for key in [
        "version",
        "description",
        "homepage",
        "repository",
        "license",
    ] {
        if let Some(p) = json::get(manifest, key) {
            if p.value.as_string_lit().is_none() {
                report.diagnostics.push(wrong_type(
                    src,
                    p,
                    "a string",
                    &format!("`\"{key}\": \"...\"`"),
                ));
            }
        }
    }
    if let Some(p) = json::get(manifest, "keywords") {
        let ok = p
            .value
            .as_array()
            .is_some_and(|a| a.elements.iter().all(|e| e.as_string_lit().is_some()));
        if !ok {
            report.diagnostics.push(wrong_type(
                src,
                p,
                "an array of strings",
                "`\"keywords\": [\"monitoring\", \"ci\"]`",
            ));
        }
    }
    name
}

fn wrong_type(src: &Source, p: &ObjectProp<'_>, expected: &str, example: &str) -> Diagnostic {
    let key = p.name.as_str();
    src.diag(
        Severity::Error,
        codes::WRONG_TYPE,
        json::range(&p.value),
        format!(
            "`{key}` must be {expected}, not {}",
            json::type_name(&p.value)
        ),
        format!("write it as {example}"),
    )
}

fn monitors_declaration<'s, 'a>(
    src: &Source,
    manifest: &'s Object<'a>,
    report: &mut Report,
) -> Declared<'s, 'a> {
    let mut declared = None;
    if let Some(exp) = json::get(manifest, "experimental") {
        match exp.value.as_object() {
            None => {
                report.diagnostics.push(wrong_type(
                    src,
                    exp,
                    "an object",
                    "`\"experimental\": { \"monitors\": \"./monitors/monitors.json\" }`",
                ));
                declared = Some(Declared::Invalid);
            }
            Some(obj) => {
                if let Some(p) = json::get(obj, "monitors") {
                    declared = Some(declaration_of(src, p, "experimental.monitors", report));
                }
            }
        }
    }
    if let Some(p) = json::get(manifest, "monitors") {
        let also = if declared.is_some() {
            "; `experimental.monitors` is declared too and is the one used"
        } else {
            ""
        };
        report.diagnostics.push(src.diag(
            Severity::Warning,
            codes::DEPRECATED_MONITORS_KEY,
            json::name_range(p),
            format!("the top-level `monitors` key is deprecated{also}"),
            "move it under `experimental`: `\"experimental\": { \"monitors\": ... }` (or drop it \
             and use the default `monitors/monitors.json`)",
        ));
        if declared.is_none() {
            declared = Some(declaration_of(src, p, "monitors", report));
        }
    }
    declared.unwrap_or(Declared::Default)
}

fn declaration_of<'s, 'a>(
    src: &Source,
    p: &'s ObjectProp<'a>,
    key: &str,
    report: &mut Report,
) -> Declared<'s, 'a> {
    match &p.value {
        Value::Array(a) => Declared::Inline(a),
        Value::StringLit(s) => Declared::Path(s.value.to_string(), json::range(&p.value)),
        other => {
            report.diagnostics.push(src.diag(
                Severity::Error,
                codes::WRONG_TYPE,
                json::range(other),
                format!(
                    "`{key}` must be an array of monitors or a path to a monitors file, not {}",
                    json::type_name(other)
                ),
                "write a path (`\"./monitors/monitors.json\"`) or an array of \
                 `{\"name\", \"command\", \"description\"}` objects",
            ));
            Declared::Invalid
        }
    }
}

/// The `skills` key of the manifest: extra directories holding skills.
fn manifest_skill_paths(
    src: &Source,
    manifest: &Object<'_>,
    report: &mut Report,
) -> Option<Vec<String>> {
    let p = json::get(manifest, "skills")?;
    match &p.value {
        Value::StringLit(s) => Some(vec![s.value.to_string()]),
        Value::Array(a) if a.elements.iter().all(|e| e.as_string_lit().is_some()) => Some(
            a.elements
                .iter()
                .filter_map(|e| e.as_string_lit().map(|s| s.value.to_string()))
                .collect(),
        ),
        _ => {
            report.diagnostics.push(wrong_type(
                src,
                p,
                "a path or an array of paths",
                "`\"skills\": [\"./extra-skills/\"]`",
            ));
            Some(Vec::new())
        }
    }
}

/// Lexically normalizes a relative path; `None` if it climbs above its start.
fn normalize(path: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in Path::new(path).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Whether `path` (which exists) resolves outside `root` (through symlinks).
fn escapes_root(root: &Path, path: &Path) -> bool {
    match (fs::canonicalize(root), fs::canonicalize(path)) {
        (Ok(root), Ok(real)) => !real.starts_with(root),
        _ => false,
    }
}

fn is_absolute_like(path: &str) -> bool {
    let b = path.as_bytes();
    Path::new(path).is_absolute()
        || path.starts_with('/')
        || path.starts_with('\\')
        || path.starts_with('~')
        || (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':')
}

/// Checks a declared monitors path; returns the file to read and its display path.
fn resolve_declared_path(
    root: &Path,
    path: &str,
    src: &Source,
    range: std::ops::Range<usize>,
    report: &mut Report,
) -> Option<(PathBuf, PathBuf)> {
    if is_absolute_like(path) {
        report.diagnostics.push(src.diag(
            Severity::Error,
            codes::ABSOLUTE_PATH,
            range,
            format!("the monitors path `{path}` is absolute: Claude Code only accepts paths inside the plugin"),
            "use a path relative to the plugin root, starting with `./`: \
             `\"./monitors/monitors.json\"` (a command can reach the plugin's files through \
             `\"${CLAUDE_PLUGIN_ROOT}\"`)",
        ));
        return None;
    }
    let Some(normalized) = normalize(path) else {
        report.diagnostics.push(src.diag(
            Severity::Error,
            codes::PATH_ESCAPES_PLUGIN,
            range,
            format!(
                "the monitors path `{path}` leaves the plugin root: an installed plugin is \
                 copied without what lies outside it"
            ),
            "move the monitors file into the plugin and point at it with a `./` path",
        ));
        return None;
    };
    if !path.starts_with("./") {
        let fixed = format!("./{}", normalized.to_string_lossy());
        report.diagnostics.push(src.diag(
            Severity::Error,
            codes::PATH_NOT_DOT_RELATIVE,
            range.clone(),
            format!("the monitors path `{path}` does not start with `./`: Claude Code requires paths relative to the plugin root written as `./...`"),
            format!("write it `\"{fixed}\"`"),
        ));
    }
    let full = root.join(&normalized);
    if normalized.as_os_str().is_empty() || !full.exists() {
        report.diagnostics.push(src.diag(
            Severity::Error,
            codes::PATH_NOT_FOUND,
            range,
            format!("the monitors file `{path}` does not exist in the plugin"),
            "create the file (a JSON array of monitors) or fix the path",
        ));
        return None;
    }
    if !full.is_file() {
        report.diagnostics.push(src.diag(
            Severity::Error,
            codes::PATH_NOT_FOUND,
            range,
            format!("the monitors path `{path}` is a directory, not a file"),
            format!(
                "point at the JSON file itself, e.g. `\"./{}/monitors.json\"`",
                normalized.to_string_lossy()
            ),
        ));
        return None;
    }
    if escapes_root(root, &full) {
        report.diagnostics.push(src.diag(
            Severity::Error,
            codes::PATH_ESCAPES_PLUGIN,
            range,
            format!(
                "the monitors path `{path}` resolves through a symlink to a file outside the \
                 plugin: an installed plugin is copied without it"
            ),
            "keep the monitors file inside the plugin directory (copy it rather than symlink it)",
        ));
        return None;
    }
    Some((full, normalized))
}

// ---------------------------------------------------------------- skills

fn discover_skills(root: &Path, manifest_paths: Option<&[String]>) -> Vec<String> {
    let mut skills = Vec::new();
    let default_dir = root.join("skills");
    let mut dirs = vec![default_dir.clone()];
    for p in manifest_paths.unwrap_or(&[]) {
        if let Some(n) = normalize(p) {
            dirs.push(root.join(n));
        }
    }
    for dir in &dirs {
        if dir.join("SKILL.md").is_file() {
            skills.push(skill_name(dir));
            continue;
        }
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        let mut subdirs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join("SKILL.md").is_file())
            .collect();
        subdirs.sort();
        skills.extend(subdirs.iter().map(|d| skill_name(d)));
    }
    // A single skill at the plugin root, when there is no skills/ directory nor key.
    if !default_dir.is_dir() && manifest_paths.is_none() && root.join("SKILL.md").is_file() {
        skills.push(skill_name(root));
    }
    skills.dedup();
    skills
}

/// A skill's name: `name:` in SKILL.md's front matter, else its directory's name.
fn skill_name(dir: &Path) -> String {
    if let Ok(text) = fs::read_to_string(dir.join("SKILL.md")) {
        let mut lines = text.lines();
        if lines.next().map(str::trim) == Some("---") {
            for line in lines {
                let line = line.trim();
                if line == "---" {
                    break;
                }
                if let Some(v) = line.strip_prefix("name:") {
                    let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
                    if !v.is_empty() {
                        return v.to_string();
                    }
                }
            }
        }
    }
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .or_else(|| {
            fs::canonicalize(dir)
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------- monitors

fn check_monitors_file(src: &Source, ctx: Option<&PluginCtx>, report: &mut Report) {
    let value = match src.parse() {
        Ok(v) => v,
        Err(d) => {
            report.diagnostics.push(*d);
            return;
        }
    };
    match &value {
        Value::Array(a) => check_entries(src, a, ctx, report),
        Value::Object(o) => {
            let wrapped = json::get(o, "monitors").is_some_and(|p| p.value.as_array().is_some());
            let single = json::get(o, "command").is_some() || json::get(o, "name").is_some();
            let help = if wrapped {
                "make the file a bare array: replace `{\"monitors\": [ ... ]}` by `[ ... ]`"
            } else if single {
                "this object looks like one monitor: wrap it in an array, `[ { ... } ]`"
            } else {
                "the file must be a bare JSON array of monitors: `[{\"name\": ..., \"command\": \
                 ..., \"description\": ...}]`"
            };
            let message = if wrapped {
                "the monitors file is an object wrapping a `monitors` array: Claude Code expects \
                 the array itself at the top level"
            } else {
                "the monitors file must be a JSON array, not an object"
            };
            report.diagnostics.push(src.diag(
                Severity::Error,
                codes::NOT_AN_ARRAY,
                json::open_brace(o),
                message,
                help,
            ));
        }
        other => report.diagnostics.push(src.diag(
            Severity::Error,
            codes::NOT_AN_ARRAY,
            json::range(other),
            format!(
                "the monitors file must be a JSON array, not {}",
                json::type_name(other)
            ),
            "the file must be a bare JSON array of monitors: `[{\"name\": ..., \"command\": ..., \
             \"description\": ...}]`",
        )),
    }
}

fn check_entries(src: &Source, array: &Array<'_>, ctx: Option<&PluginCtx>, report: &mut Report) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for element in &array.elements {
        let Some(obj) = element.as_object() else {
            report.diagnostics.push(src.diag(
                Severity::Error,
                codes::ENTRY_NOT_OBJECT,
                json::range(element),
                format!("a monitor must be an object, not {}", json::type_name(element)),
                "write each monitor as `{\"name\": \"...\", \"command\": \"...\", \"description\": \
                 \"...\"}`",
            ));
            continue;
        };
        if let Some(m) = check_entry(src, obj, ctx, &mut seen, report) {
            report.monitors.push(m);
        }
    }
}

fn check_entry(
    src: &Source,
    obj: &Object<'_>,
    ctx: Option<&PluginCtx>,
    seen: &mut HashMap<String, usize>,
    report: &mut Report,
) -> Option<PluginMonitor> {
    let errors_before = report.errors();
    let mut suggested = Vec::new();
    for p in &obj.properties {
        let key = p.name.as_str();
        if !ENTRY_KEYS.contains(&key) {
            suggested.extend(suggest_key(key));
            report.diagnostics.push(src.diag(
                Severity::Error,
                codes::UNKNOWN_KEY,
                json::name_range(p),
                format!(
                    "unknown key `{key}` in a monitor: Claude Code's schema is strict and rejects \
                     the monitors for it"
                ),
                unknown_key_help(key),
            ));
        }
    }
    // A missing field whose misspelling was just reported is not reported twice.
    let missing: Vec<&str> = ["name", "command", "description"]
        .into_iter()
        .filter(|k| json::get(obj, k).is_none() && !suggested.contains(k))
        .collect();
    if !missing.is_empty() {
        let list = missing.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>();
        let list = match list.as_slice() {
            [one] => one.clone(),
            [init @ .., last] => format!("{} and {last}", init.join(", ")),
            [] => String::new(),
        };
        let examples = missing
            .iter()
            .map(|k| field_example(k))
            .collect::<Vec<_>>()
            .join(", ");
        report.diagnostics.push(src.diag(
            Severity::Error,
            codes::MISSING_FIELD,
            json::open_brace(obj),
            if missing.len() == 3 {
                "this monitor has none of the required `name`, `command` and `description`"
                    .to_string()
            } else {
                format!(
                    "this monitor is missing {list} (`name`, `command` and `description` are \
                     required)"
                )
            },
            format!("add {examples}"),
        ));
    }
    let name = required_string(src, obj, "name", report);
    let command = required_string(src, obj, "command", report);
    let description = required_string(src, obj, "description", report);
    let when = check_when(src, obj, ctx, report);

    if let Some((name, range)) = &name {
        let line = src.line_of(range.start);
        if let Some(first) = seen.get(name) {
            report.diagnostics.push(src.diag(
                Severity::Error,
                codes::DUPLICATE_NAME,
                range.clone(),
                format!(
                    "duplicate monitor name `{name}` (first defined on line {first}): names must \
                     be unique within the plugin"
                ),
                "rename one of them: the name is how a monitor is kept from starting twice",
            ));
        } else {
            seen.insert(name.clone(), line);
        }
    }
    if let Some((command, range)) = &command {
        check_command(src, command, range.clone(), report);
    }
    if report.errors() > errors_before {
        return None;
    }
    Some(PluginMonitor {
        name: name?.0,
        command: command?.0,
        description: description?.0,
        when: when?,
    })
}

/// A required non-empty string field; its value and range if valid.
fn required_string(
    src: &Source,
    obj: &Object<'_>,
    key: &str,
    report: &mut Report,
) -> Option<(String, std::ops::Range<usize>)> {
    let example = field_example(key);
    // Missing fields are reported together by `check_entry`.
    let p = json::get(obj, key)?;
    let Some(s) = p.value.as_string_lit() else {
        report
            .diagnostics
            .push(wrong_type(src, p, "a string", example));
        return None;
    };
    if s.value.trim().is_empty() {
        let what = if s.value.is_empty() { "empty" } else { "blank" };
        report.diagnostics.push(src.diag(
            Severity::Error,
            codes::EMPTY_FIELD,
            json::range(&p.value),
            format!("`{key}` is {what}"),
            format!("write a non-empty value: {example}"),
        ));
        return None;
    }
    Some((s.value.to_string(), json::range(&p.value)))
}

fn field_example(key: &str) -> &'static str {
    match key {
        "name" => "`\"name\": \"build-errors\"`",
        "command" => {
            "`\"command\": \"tail -F -n0 build.log | grep --line-buffered -E 'error|FAIL'\"`"
        }
        "description" => "`\"description\": \"errors in the build log\"`",
        _ => "`\"when\": \"always\"`",
    }
}

/// The known key an unknown key most likely meant.
fn suggest_key(key: &str) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    let alias = match lower.as_str() {
        "cmd" | "run" | "script" | "exec" | "shell" => Some("command"),
        "desc" | "summary" | "title" | "label" => Some("description"),
        "trigger" | "on" | "event" | "condition" | "start" | "activation" => Some("when"),
        "id" | "key" => Some("name"),
        _ => None,
    };
    alias.or_else(|| {
        ENTRY_KEYS
            .iter()
            .map(|k| (edit_distance(&lower, k), *k))
            .filter(|(d, k)| *d <= 2.max(k.len() / 3))
            .min()
            .map(|(_, k)| k)
    })
}

fn unknown_key_help(key: &str) -> String {
    let allowed = "a monitor takes only `name`, `command`, `description` and `when`";
    let lower = key.to_ascii_lowercase();
    match (suggest_key(key), lower.as_str()) {
        (Some(k), _) => format!("did you mean `{k}`? ({allowed})"),
        (None, "timeout" | "timeout_ms" | "persistent" | "max_events" | "idle_timeout_ms") => {
            format!(
                "`{key}` belongs to the Monitor tool, not to plugin monitors, which run for the \
             whole session: remove it ({allowed})"
            )
        }
        (None, _) => format!("remove it: {allowed}"),
    }
}

/// Levenshtein distance.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn check_when(
    src: &Source,
    obj: &Object<'_>,
    ctx: Option<&PluginCtx>,
    report: &mut Report,
) -> Option<When> {
    let Some(p) = json::get(obj, "when") else {
        return Some(When::Always);
    };
    let example = "`\"always\"` (the default) or `\"on-skill-invoke:<plugin>:<skill>\"`";
    let Some(s) = p.value.as_string_lit() else {
        report
            .diagnostics
            .push(wrong_type(src, p, "a string", "`\"when\": \"always\"`"));
        return None;
    };
    let value = s.value.as_ref();
    let range = json::range(&p.value);
    if value == "always" {
        return Some(When::Always);
    }
    let invalid = |message: String, help: String| {
        src.diag(
            Severity::Error,
            codes::INVALID_WHEN,
            range.clone(),
            message,
            help,
        )
    };
    let Some(skill) = value.strip_prefix(SKILL_PREFIX) else {
        let normalized = value.to_ascii_lowercase().replace(['_', ' '], "-");
        let help = if normalized == "always" {
            "write it in lower case: `\"when\": \"always\"`".to_string()
        } else if let Some((prefix, skill)) = value.split_once(':') {
            let p = prefix.to_ascii_lowercase().replace(['_', ' '], "-");
            if p.contains("skill") || edit_distance(&p, "on-skill-invoke") <= 4 {
                format!("write `\"on-skill-invoke:{}\"`", skill.trim())
            } else {
                format!("write {example}")
            }
        } else if normalized.starts_with("on-skill") || normalized.contains("skill") {
            "name the skill: `\"on-skill-invoke:<plugin>:<skill>\"`".to_string()
        } else {
            format!("write {example}")
        };
        report.diagnostics.push(invalid(
            format!("invalid `when` value `{value}`: Claude Code accepts only `always` and `on-skill-invoke:<skill>`"),
            help,
        ));
        return None;
    };
    if skill.trim().is_empty() {
        report.diagnostics.push(invalid(
            "`on-skill-invoke:` names no skill".to_string(),
            "write the skill after the colon: `\"on-skill-invoke:<plugin>:<skill>\"`".to_string(),
        ));
        return None;
    }
    if skill.chars().any(char::is_whitespace) {
        report.diagnostics.push(invalid(
            format!("the skill name `{skill}` contains whitespace"),
            format!(
                "write the skill's published name without spaces: `\"on-skill-invoke:{}\"`",
                skill.split_whitespace().collect::<String>()
            ),
        ));
        return None;
    }
    if let Some(ctx) = ctx {
        check_skill(src, range.clone(), skill, ctx, report);
    }
    Some(When::OnSkillInvoke(skill.to_string()))
}

fn check_skill(
    src: &Source,
    range: std::ops::Range<usize>,
    skill: &str,
    ctx: &PluginCtx,
    report: &mut Report,
) {
    let plugin = &ctx.name;
    let available = if ctx.skills.is_empty() {
        "the plugin has no skills (directories `skills/<name>/` holding a `SKILL.md`)".to_string()
    } else {
        format!(
            "the plugin's skills are {}",
            ctx.skills
                .iter()
                .map(|s| format!("`{plugin}:{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    match skill.split_once(':') {
        Some((ns, name)) if ns == plugin => {
            if !ctx.skills.iter().any(|s| s == name) {
                report.diagnostics.push(src.diag(
                    Severity::Warning,
                    codes::UNKNOWN_SKILL,
                    range,
                    format!("plugin `{plugin}` has no skill `{name}`: this monitor never starts"),
                    format!("{available}; add `skills/{name}/SKILL.md` or fix the name"),
                ));
            }
        }
        Some((ns, _)) => {
            report.diagnostics.push(src.diag(
                Severity::Warning,
                codes::UNKNOWN_SKILL,
                range,
                format!(
                    "`{skill}` is a skill of another plugin (`{ns}`), not of `{plugin}`: this \
                     monitor starts only if that plugin is installed and its skill invoked"
                ),
                format!("if that is intended, ignore this; otherwise {available}"),
            ));
        }
        None => {
            if ctx.skills.iter().any(|s| s == skill) {
                report.diagnostics.push(src.diag(
                    Severity::Warning,
                    codes::SKILL_WITHOUT_NAMESPACE,
                    range,
                    format!(
                        "`on-skill-invoke:{skill}` never fires for this plugin's skill: Claude \
                         Code matches the published name `{plugin}:{skill}`"
                    ),
                    format!("write `\"on-skill-invoke:{plugin}:{skill}\"`"),
                ));
            } else {
                report.diagnostics.push(src.diag(
                    Severity::Warning,
                    codes::UNKNOWN_SKILL,
                    range,
                    format!(
                        "the plugin has no skill `{skill}`: this monitor starts only if a user or \
                         project skill of that name exists and is invoked"
                    ),
                    format!("{available}; name one of them as `on-skill-invoke:{plugin}:<skill>`"),
                ));
            }
        }
    }
}

/// `${user_config.*}` (an error) and the command lints (warnings), positioned in the
/// JSON file.
fn check_command(
    src: &Source,
    command: &str,
    literal: std::ops::Range<usize>,
    report: &mut Report,
) {
    let raw = src.text.get(literal.clone()).unwrap_or("");
    let offsets = json::decoded_offsets(raw).filter(|m| m.len() == command.len() + 1);
    let to_file = |span: std::ops::Range<usize>| -> std::ops::Range<usize> {
        match &offsets {
            Some(map) => {
                let start = map.get(span.start).copied().unwrap_or(0);
                let end = map.get(span.end).copied().unwrap_or(start);
                literal.start + start..literal.start + end.max(start)
            }
            None => literal.clone(),
        }
    };
    for (i, _) in command.match_indices("${user_config.") {
        let end = command[i..].find('}').map_or(command.len(), |j| i + j + 1);
        let expr = &command[i..end];
        let key = expr
            .trim_start_matches("${user_config.")
            .trim_end_matches('}')
            .to_ascii_uppercase()
            .replace(['-', '.'], "_");
        report.diagnostics.push(src.diag(
            Severity::Error,
            codes::USER_CONFIG_IN_COMMAND,
            to_file(i..end),
            format!(
                "`{expr}` in a command: Claude Code rejects it, since pasting a user-supplied \
                 value into a shell command is a shell-injection hole"
            ),
            format!(
                "read the option inside a script from the environment instead (Claude Code \
                 exports plugin options as `CLAUDE_PLUGIN_OPTION_<KEY>`), quoted: \
                 `\"$CLAUDE_PLUGIN_OPTION_{key}\"`"
            ),
        ));
    }
    for l in lint::lint_command(command) {
        report.diagnostics.push(src.diag(
            Severity::Warning,
            l.code,
            to_file(l.span),
            l.message,
            l.help,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_paths() {
        assert_eq!(
            normalize("./a/../b/c.json"),
            Some(PathBuf::from("b/c.json"))
        );
        assert_eq!(normalize("./a/./b"), Some(PathBuf::from("a/b")));
        assert_eq!(normalize("./a/../../x"), None);
        assert_eq!(normalize("../x"), None);
        assert_eq!(normalize("/etc/x"), None);
    }

    #[test]
    fn absolute_like() {
        assert!(is_absolute_like("/etc/m.json"));
        assert!(is_absolute_like("C:\\m.json"));
        assert!(is_absolute_like("~/m.json"));
        assert!(!is_absolute_like("./m.json"));
        assert!(!is_absolute_like("m.json"));
    }

    #[test]
    fn key_suggestions() {
        assert!(unknown_key_help("nmae").contains("`name`"));
        assert!(unknown_key_help("comand").contains("`command`"));
        assert!(unknown_key_help("Description").contains("`description`"));
        assert!(unknown_key_help("cmd").contains("`command`"));
        assert!(unknown_key_help("wen").contains("`when`"));
        assert!(unknown_key_help("persistent").contains("Monitor tool"));
        assert!(unknown_key_help("zzzzzz").starts_with("remove it"));
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
