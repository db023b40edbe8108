//! The fixture corpus: every directory under `tests/fixtures/` is a plugin (or, for
//! names starting with `file-`, a directory holding a bare `monitors.json` validated on
//! its own). Each is snapshot-tested (human rendering and JSON) and checked against a
//! table of the diagnostic codes it must produce, so a wrong snapshot cannot pass
//! silently.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use wakeful_plugin::{validate, Report};

/// Fixture name → the codes it must produce (with multiplicity, in any order).
const EXPECTED: &[(&str, &[&str])] = &[
    // valid layouts
    ("clean-realistic", &[]),
    ("default-layout", &[]),
    ("inline-array", &[]),
    ("path-string", &[]),
    ("no-monitors", &[]),
    ("empty-array", &[]),
    ("root-skill", &[]),
    ("manifest-skills-key", &[]),
    ("lint-negatives", &[]),
    // manifest-level warnings
    ("deprecated-key", &["deprecated-monitors-key"]),
    ("deprecated-key-path", &["deprecated-monitors-key"]),
    ("deprecated-and-experimental", &["deprecated-monitors-key"]),
    ("no-manifest", &["no-manifest"]),
    ("no-manifest-skill", &["no-manifest"]),
    // skills
    ("skill-frontmatter-name", &["unknown-skill"]),
    ("skill-without-namespace", &["skill-without-namespace"]),
    (
        "unknown-skill",
        &["unknown-skill", "unknown-skill", "unknown-skill"],
    ),
    ("unknown-skill-no-skills", &["unknown-skill"]),
    // paths
    ("path-escape-dotdot", &["path-escapes-plugin"]),
    ("path-absolute", &["absolute-path"]),
    ("path-missing", &["path-not-found"]),
    ("path-not-dot-relative", &["path-not-dot-relative"]),
    ("path-is-directory", &["path-not-found"]),
    ("path-symlink-escape", &["path-escapes-plugin"]),
    ("default-symlink-escape", &["path-escapes-plugin"]),
    ("default-is-directory", &["path-not-found"]),
    // JSON shape and fields
    ("invalid-json-trailing-comma", &["invalid-json"]),
    ("invalid-json-comment", &["invalid-json"]),
    ("manifest-invalid-json", &["invalid-json"]),
    ("manifest-not-object", &["wrong-type"]),
    ("manifest-missing-name", &["missing-field"]),
    (
        "manifest-wrong-types",
        &["wrong-type", "wrong-type", "wrong-type", "wrong-type"],
    ),
    ("experimental-monitors-wrong-type", &["wrong-type"]),
    ("wrapped-object", &["not-an-array"]),
    ("not-an-array", &["not-an-array"]),
    (
        "entry-not-object",
        &["entry-not-object", "entry-not-object"],
    ),
    ("typo-key", &["unknown-key", "unknown-key"]),
    (
        "unknown-keys-monitor-tool",
        &["unknown-key", "unknown-key", "unknown-key"],
    ),
    ("missing-fields", &["missing-field"; 3]),
    (
        "empty-and-wrong-types",
        &["empty-field", "empty-field", "wrong-type", "wrong-type"],
    ),
    (
        "bad-when",
        &[
            "invalid-when",
            "invalid-when",
            "invalid-when",
            "invalid-when",
            "invalid-when",
            "wrong-type",
        ],
    ),
    ("duplicate-names", &["duplicate-name"]),
    ("user-config", &["user-config-in-command"]),
    ("not-utf8", &["io-error"]),
    // lints
    ("lint-unbuffered-filter", &["unbuffered-filter"; 6]),
    ("lint-one-shot", &["one-shot"; 3]),
    ("lint-tail-f", &["tail-f-rotation"; 3]),
    ("lint-success-only", &["success-only-filter"]),
    ("lint-mtime", &["mtime-trigger"; 3]),
    ("lint-unquoted-path", &["unquoted-plugin-path"; 3]),
    ("lint-background", &["background-command"; 2]),
    // several mistakes at once (the README example)
    (
        "realistic-broken",
        &[
            "tail-f-rotation",
            "unquoted-plugin-path",
            "unbuffered-filter",
            "success-only-filter",
            "unquoted-plugin-path",
            "user-config-in-command",
            "unknown-key",
            "one-shot",
            "skill-without-namespace",
            "duplicate-name",
            "mtime-trigger",
        ],
    ),
    // a monitors file on its own
    (
        "file-monitors-only",
        &["tail-f-rotation", "unbuffered-filter"],
    ),
    ("file-invalid", &["not-an-array"]),
];

fn fixtures_dir() -> PathBuf {
    // Relative to the package root (cargo's working directory for tests), so that
    // paths in file-mode diagnostics are the same on every machine.
    PathBuf::from("tests/fixtures")
}

fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(fixtures_dir())
        .expect("tests/fixtures exists")
        .map(|e| e.expect("readable entry"))
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn run(name: &str) -> Report {
    let dir = fixtures_dir().join(name);
    if name.starts_with("file-") {
        validate(&dir.join("monitors.json"))
    } else {
        validate(&dir)
    }
}

#[test]
fn the_corpus_is_large_and_the_table_complete() {
    let names = fixture_names();
    assert!(names.len() >= 30, "only {} fixtures", names.len());
    let on_disk: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let in_table: BTreeSet<&str> = EXPECTED.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        on_disk, in_table,
        "every fixture needs an entry in EXPECTED and vice versa"
    );
    assert_eq!(
        in_table.len(),
        EXPECTED.len(),
        "duplicate entries in EXPECTED"
    );
}

#[test]
fn every_fixture_produces_exactly_its_expected_codes() {
    let mut failures = Vec::new();
    for (name, expected) in EXPECTED {
        let report = run(name);
        let mut got: Vec<&str> = report.diagnostics.iter().map(|d| d.code.as_str()).collect();
        got.sort_unstable();
        let mut want: Vec<&str> = expected.to_vec();
        want.sort_unstable();
        if got != want {
            failures.push(format!(
                "{name}: expected {want:?}, got {got:?}\n{}",
                report.render_human()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_code_is_exercised_by_the_corpus() {
    let used: BTreeSet<&str> = EXPECTED
        .iter()
        .flat_map(|(_, c)| c.iter().copied())
        .collect();
    for code in [
        "io-error",
        "invalid-json",
        "not-an-array",
        "entry-not-object",
        "unknown-key",
        "missing-field",
        "empty-field",
        "wrong-type",
        "invalid-when",
        "duplicate-name",
        "path-not-found",
        "absolute-path",
        "path-not-dot-relative",
        "path-escapes-plugin",
        "user-config-in-command",
        "unknown-skill",
        "skill-without-namespace",
        "no-manifest",
        "deprecated-monitors-key",
        "unbuffered-filter",
        "one-shot",
        "tail-f-rotation",
        "success-only-filter",
        "mtime-trigger",
        "unquoted-plugin-path",
        "background-command",
    ] {
        assert!(used.contains(code), "no fixture exercises {code}");
    }
}

#[test]
fn snapshots() {
    for name in fixture_names() {
        let report = run(&name);
        insta::assert_snapshot!(format!("{name}.human"), report.render_human());
        insta::assert_json_snapshot!(format!("{name}.json"), report.to_json());
    }
}

#[test]
fn every_diagnostic_is_positioned_and_helpful() {
    for name in fixture_names() {
        let report = run(&name);
        for d in &report.diagnostics {
            assert!(d.line >= 1 && d.column >= 1, "{name}: {d:?}");
            assert!(!d.help.is_empty() && !d.message.is_empty(), "{name}: {d:?}");
            assert!(d.file.is_relative(), "{name}: {d:?}");
            if let Some(line) = &d.source_line {
                let snippet = d.snippet.as_deref().unwrap_or("");
                let at: String = line.chars().skip(d.column - 1).collect();
                assert!(
                    at.starts_with(snippet),
                    "{name}: snippet {snippet:?} not at {}:{} of {line:?}",
                    d.line,
                    d.column
                );
            }
        }
    }
}

#[test]
fn valid_plugins_load_their_monitors() {
    let report = wakeful_plugin::load(&fixtures_dir().join("clean-realistic")).expect("loads");
    assert_eq!(report.plugin_name.as_deref(), Some("build-watch"));
    let names: Vec<&str> = report.monitors.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["build-errors", "ci-status", "debug-server"]);
    assert_eq!(
        report.monitors[2].when,
        wakeful_plugin::When::OnSkillInvoke("build-watch:debug".into())
    );
    assert_eq!(report.monitors[1].when, wakeful_plugin::When::Always);

    let inline = wakeful_plugin::load(&fixtures_dir().join("inline-array")).expect("loads");
    assert_eq!(inline.monitors.len(), 2);

    let legacy =
        wakeful_plugin::load(&fixtures_dir().join("deprecated-key")).expect("warnings only");
    assert_eq!(legacy.monitors.len(), 1);

    let unnamed = validate(&fixtures_dir().join("no-manifest"));
    assert_eq!(unnamed.plugin_name.as_deref(), Some("no-manifest"));
    assert_eq!(unnamed.monitors.len(), 1);

    let err = wakeful_plugin::load(&fixtures_dir().join("duplicate-names")).unwrap_err();
    assert!(err.to_string().contains("1 error"), "{err}");
    let wakeful_plugin::LoadError::Invalid { report, .. } = err;
    assert_eq!(report.monitors.len(), 2, "valid entries are still listed");
}

#[test]
fn the_manifest_path_validates_its_plugin() {
    let report = validate(&fixtures_dir().join("realistic-broken/.claude-plugin/plugin.json"));
    assert_eq!(report.plugin_name.as_deref(), Some("test-watch"));
    assert_eq!(report.errors(), 3);
}

#[test]
fn a_missing_path_is_an_io_error() {
    let report = validate(Path::new("tests/fixtures/does-not-exist"));
    assert_eq!(report.errors(), 1);
    assert_eq!(report.diagnostics[0].code, "io-error");
    assert_eq!(
        report.diagnostics[0].file,
        Path::new("tests/fixtures/does-not-exist")
    );
}

#[test]
fn readme_example_is_current() {
    let rendered = run("realistic-broken").render_human();
    let path = Path::new("README-example.txt");
    if std::env::var_os("UPDATE_README_EXAMPLE").is_some() {
        fs::write(path, &rendered).expect("write README-example.txt");
    }
    let stored = fs::read_to_string(path).expect("README-example.txt exists");
    assert_eq!(
        stored, rendered,
        "run with UPDATE_README_EXAMPLE=1 to refresh it"
    );
}
