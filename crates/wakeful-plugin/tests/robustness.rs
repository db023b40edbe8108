//! `validate` and the command scanner never panic, whatever the input.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;

use wakeful_plugin::{lint::lint_command, shell, validate};

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const SHELL_PIECES: &[&str] = &[
    " ",
    "  ",
    "|",
    "||",
    "&",
    "&&",
    ";",
    ";;",
    "\n",
    "(",
    ")",
    "{",
    "}",
    "$(",
    "`",
    "<(",
    ">(",
    "'",
    "\"",
    "\\",
    "$",
    "${",
    "}",
    "#",
    "<",
    ">",
    ">>",
    "2>&1",
    "<<",
    "EOF",
    "<<<",
    "tail",
    "-f",
    "-F",
    "-fn0",
    "grep",
    "-m1",
    "--line-buffered",
    "sed",
    "q",
    "awk",
    "exit",
    "fflush()",
    "jq",
    "head",
    "-n",
    "1",
    "stat",
    "-c",
    "%Y",
    "find",
    "-newer",
    "ls",
    "-lt",
    "while",
    "do",
    "done",
    "if",
    "then",
    "fi",
    "for",
    "in",
    "case",
    "esac",
    "function",
    "[[",
    "]]",
    "((",
    "))",
    "${CLAUDE_PLUGIN_ROOT}",
    "$CLAUDE_PLUGIN_DATA",
    "${user_config.x}",
    "é",
    "💥",
    "x=1",
    "!",
    "stdbuf",
    "-oL",
    "env",
    "timeout",
    "python3",
    "-u",
    "perl",
    "-e",
    "ready",
    "ok",
    "error",
];

const JSON_PIECES: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "\"name\"",
    "\"command\"",
    "\"description\"",
    "\"when\"",
    "\"always\"",
    "\"on-skill-invoke:\"",
    "\"on-skill-invoke:p:s\"",
    "\"x\"",
    "\"\"",
    "1",
    "null",
    "true",
    " ",
    "\n",
    "\"tail -f a | grep b &\"",
    "\"\\u00e9\\\"\\\\\"",
    "\"nmae\"",
    "//",
    "/*",
    "\"${user_config.k}\"",
    "é",
    "\"monitors\"",
    "\u{feff}",
];

#[test]
fn the_scanner_and_lints_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3000 {
        let n = (rng.next() % 40) as usize;
        let cmd: String = (0..n).map(|_| rng.pick(SHELL_PIECES)).collect();
        let script = shell::parse(&cmd);
        let mut words = 0;
        shell::for_each_word(&script, &mut |w| {
            words += 1;
            // Every span is on character boundaries of the input.
            assert!(cmd.get(w.span.clone()).is_some(), "{cmd:?}: {w:?}");
        });
        for lint in lint_command(&cmd) {
            assert!(cmd.get(lint.span.clone()).is_some(), "{cmd:?}: {lint:?}");
        }
    }
}

#[test]
fn validate_never_panics_on_arbitrary_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = dir.path().join("fuzz-plugin");
    fs::create_dir_all(plugin.join("monitors")).expect("mkdir");
    fs::create_dir_all(plugin.join(".claude-plugin")).expect("mkdir");
    let mut rng = Rng(0x0123_4567_89AB_CDEF);
    for i in 0..600 {
        let n = (rng.next() % 30) as usize;
        let text: String = (0..n).map(|_| rng.pick(JSON_PIECES)).collect();
        fs::write(plugin.join("monitors/monitors.json"), &text).expect("write");
        let manifest = if i % 3 == 0 {
            format!("{{\"name\": \"p\", \"experimental\": {{\"monitors\": {text}}}}}")
        } else {
            "{\"name\": \"p\"}".to_string()
        };
        fs::write(plugin.join(".claude-plugin/plugin.json"), manifest).expect("write");
        let report = validate(&plugin);
        let _ = report.render_human();
        let _ = report.to_json();
        let file_report = validate(&plugin.join("monitors/monitors.json"));
        let _ = file_report.render_human();
    }
}

#[test]
fn generated_valid_monitors_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = dir.path().join("gen");
    fs::create_dir_all(plugin.join("monitors")).expect("mkdir");
    let commands = [
        "tail -F -n0 a.log | grep --line-buffered -E 'error|FAIL'",
        "\"${CLAUDE_PLUGIN_ROOT}/bin/watch\" --json",
        "inotifywait -m -e close_write src",
    ];
    let entries: Vec<serde_json::Value> = commands
        .iter()
        .enumerate()
        .map(
            |(i, c)| serde_json::json!({"name": format!("m{i}"), "command": c, "description": "d"}),
        )
        .collect();
    fs::write(
        plugin.join("monitors/monitors.json"),
        serde_json::to_string_pretty(&entries).expect("json"),
    )
    .expect("write");
    let report = validate(&plugin);
    // Only the missing manifest is reported.
    assert_eq!(report.errors(), 0, "{}", report.render_human());
    assert_eq!(report.warnings(), 1, "{}", report.render_human());
    let got: Vec<&str> = report.monitors.iter().map(|m| m.command.as_str()).collect();
    assert_eq!(got, commands);
}
