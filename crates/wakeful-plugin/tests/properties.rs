//! Property tests (issue #31, point 11) of the monitors.json reader and of
//! the shell scanner behind the lints: any text is read or refused with
//! diagnostics that point inside it, never a panic; a well-formed file of
//! any names and commands passes; every range the scanner and the lints
//! give lies on character boundaries of the command.
//!
//! Bounded in CI by proptest's default of 256 cases a property; for a
//! longer run: `PROPTEST_CASES=100000 cargo test -p wakeful-plugin --test
//! properties` (docs/SECURITY.md).
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use wakeful_plugin::shell::{self, Script};

fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Text made of JSON and shell syntax, quotes, escapes and odd characters.
fn code() -> impl Strategy<Value = String> {
    let pieces = proptest::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "'",
        "\\",
        "\\u00",
        "\\ud800",
        "//",
        "/*",
        "*/",
        "\"monitors\"",
        "\"name\"",
        "\"command\"",
        "\"description\"",
        "\"when\"",
        "\"always\"",
        "\"on-skill-invoke:x\"",
        "${CLAUDE_PLUGIN_ROOT}",
        "${user_config.x}",
        "$(",
        ")",
        "`",
        "|",
        "||",
        "&&",
        ";",
        "&",
        ">",
        ">>",
        "2>&1",
        "<<EOF\n",
        "EOF",
        "if ",
        "then ",
        "fi",
        "while ",
        "do ",
        "done",
        "case ",
        "esac",
        "for ",
        " in ",
        "(",
        "{ ",
        " }",
        "grep ",
        "tail -f ",
        "sed ",
        "awk ",
        "\n",
        " ",
        "\t",
        "é",
        "✓",
        "\u{202E}",
        "\u{0}",
        "1e999",
        "-0",
        "true",
        "null",
    ]);
    proptest::collection::vec(
        prop_oneof![
            4 => pieces.prop_map(String::from),
            1 => any::<char>().prop_map(String::from),
        ],
        0..50,
    )
    .prop_map(|p| p.concat())
}

/// Every range inside `script` on character boundaries of `src`.
fn check_script(src: &str, script: &Script) -> Result<(), TestCaseError> {
    let mut ok = Ok(());
    shell::for_each_simple_command(script, &mut |c| {
        if ok.is_ok() && !(c.span.start <= c.span.end && src.get(c.span.clone()).is_some()) {
            ok = Err(TestCaseError::fail(format!(
                "command span {:?} of {src:?}",
                c.span
            )));
        }
    });
    shell::for_each_word(script, &mut |w| {
        if ok.is_ok() && src.get(w.span.clone()).is_none() {
            ok = Err(TestCaseError::fail(format!(
                "word span {:?} of {src:?}",
                w.span
            )));
        }
        for e in &w.expansions {
            if ok.is_ok() && src.get(e.span.clone()).is_none() {
                ok = Err(TestCaseError::fail(format!(
                    "expansion span {:?} of {src:?}",
                    e.span
                )));
            }
        }
    });
    ok
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_scanner_and_the_lints_take_any_command(src in code()) {
        let script = shell::parse(&src);
        check_script(&src, &script)?;
        for lint in wakeful_plugin::lint::lint_command(&src) {
            prop_assert!(src.get(lint.span.clone()).is_some(), "{:?} of {:?}", lint.span, src);
            prop_assert!(!lint.message.is_empty() && !lint.help.is_empty());
        }
    }

    #[test]
    fn any_monitors_file_is_read_or_refused_with_diagnostics_inside_it(text in code()) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("monitors.json");
        std::fs::write(&file, &text).unwrap();
        let report = wakeful_plugin::validate(&file);
        let lines = text.split('\n').count();
        for d in &report.diagnostics {
            prop_assert!(d.line >= 1 && d.line <= lines + 1, "{:?} in {:?}", d, text);
            prop_assert!(d.column >= 1, "{:?}", d);
            let _ = d.render_human();
        }
        let _ = report.to_json();
        let _ = report.render_human();
        if report.errors() == 0 {
            for m in &report.monitors {
                prop_assert!(!m.name.is_empty());
            }
        }
    }

    #[test]
    fn a_well_formed_monitors_file_passes_whatever_it_runs(
        entries in proptest::collection::btree_map(
            "[a-z][a-z0-9-]{0,15}",
            ("[!-~][ -~]{0,59}", "[!-~][ -~]{0,39}"),
            1..6,
        ),
    ) {
        let monitors: Vec<serde_json::Value> = entries
            .iter()
            .filter(|(_, (command, _))| !command.contains("${user_config"))
            .map(|(name, (command, description))| {
                serde_json::json!({"name": name, "command": command, "description": description})
            })
            .collect();
        prop_assume!(!monitors.is_empty());
        let text = serde_json::to_string_pretty(&monitors).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("monitors.json");
        std::fs::write(&file, &text).unwrap();
        let report = wakeful_plugin::validate(&file);
        prop_assert_eq!(report.errors(), 0, "{}\n{}", text, report.render_human());
        prop_assert_eq!(report.monitors.len(), monitors.len());
    }
}
