//! Lints for monitor commands: known traps that make a monitor late, silent or dead.
//!
//! Each lint works on the structure recovered by [`crate::shell`]: which stage of which
//! pipeline a command is, where its standard output goes (the next stage, the monitor's
//! stdout — itself a pipe —, a file, a `$(...)` capture), whether it reads a stream that
//! may never end, whether it runs in a loop. Lints are warnings: each says why the
//! construct hurts a monitor and how to fix it.

use std::ops::Range;

use crate::shell::{self, Command, CompoundKind, Script, SimpleCommand, SubstitutionKind, Word};

/// Lint codes, as they appear in [`crate::Diagnostic::code`].
pub mod codes {
    /// A filter (`grep`, `sed`, `awk`, `jq`, ...) in a pipeline without line buffering.
    pub const UNBUFFERED_FILTER: &str = "unbuffered-filter";
    /// `head -n N`, `grep -m N`, `grep -q`, `sed q`, `awk exit`: the monitor ends after
    /// the first event.
    pub const ONE_SHOT: &str = "one-shot";
    /// `tail -f` where `tail -F` survives log rotation.
    pub const TAIL_F_ROTATION: &str = "tail-f-rotation";
    /// A `grep` that passes only success lines and no failure signature.
    pub const SUCCESS_ONLY_FILTER: &str = "success-only-filter";
    /// A trigger based on modification times.
    pub const MTIME_TRIGGER: &str = "mtime-trigger";
    /// `${CLAUDE_PLUGIN_ROOT}` (or `_DATA`, `CLAUDE_PROJECT_DIR`) outside quotes.
    pub const UNQUOTED_PLUGIN_PATH: &str = "unquoted-plugin-path";
    /// A command that ends with `&`.
    pub const BACKGROUND_COMMAND: &str = "background-command";
}

/// One finding of [`lint_command`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLint {
    /// The lint code (one of [`codes`]).
    pub code: &'static str,
    /// What is wrong and why it matters to a monitor.
    pub message: String,
    /// How to fix it.
    pub help: String,
    /// The offending byte range in the command string.
    pub span: Range<usize>,
}

/// Variables that hold paths and that Claude Code substitutes into monitor commands.
const PATH_VARIABLES: &[&str] = &[
    "CLAUDE_PLUGIN_ROOT",
    "CLAUDE_PLUGIN_DATA",
    "CLAUDE_PROJECT_DIR",
];

/// Lints one monitor command. The result is sorted by position.
pub fn lint_command(command: &str) -> Vec<CommandLint> {
    let script = shell::parse(command);
    let mut linter = Linter {
        src: command,
        out: Vec::new(),
    };
    linter.walk_script(
        &script,
        Ctx {
            sink: Sink::Monitor,
            in_loop: false,
            followed: false,
        },
    );
    linter.check_background(&script);
    linter.check_plugin_paths(&script);
    let mut out = linter.out;
    out.sort_by_key(|l| (l.span.start, l.span.end));
    let mut seen: Vec<(&'static str, Range<usize>)> = Vec::new();
    out.retain(|l| {
        let key = (l.code, l.span.clone());
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
    out
}

/// Where a command's standard output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    /// The monitor's own stdout: a pipe read by the monitor runner.
    Monitor,
    /// The next stage of a pipeline, or a process substitution's reader.
    Pipe,
    /// A `$(...)` or backtick capture: read whole by the shell.
    Captured,
    /// A file, `/dev/null`, stderr.
    Elsewhere,
}

#[derive(Debug, Clone, Copy)]
struct Ctx {
    sink: Sink,
    in_loop: bool,
    /// Whether a long-running command follows in the same list (then a one-shot wait is
    /// a deliberate "wait until ready" step, not the monitor's end).
    followed: bool,
}

#[derive(Debug, Clone, Copy)]
struct StageCtx {
    sink: Sink,
    /// Whether stdin is a pipe from an earlier stage that may stream for ever.
    reads_stream: bool,
    in_loop: bool,
    followed: bool,
}

struct Linter<'a> {
    src: &'a str,
    out: Vec<CommandLint>,
}

impl Linter<'_> {
    fn emit(&mut self, code: &'static str, span: Range<usize>, message: String, help: String) {
        self.out.push(CommandLint {
            code,
            message,
            help,
            span,
        });
    }

    fn raw(&self, span: Range<usize>) -> &str {
        self.src.get(span).unwrap_or("")
    }

    fn walk_script(&mut self, script: &Script, ctx: Ctx) {
        for (i, item) in script.items.iter().enumerate() {
            let later = script.items[i + 1..]
                .iter()
                .flat_map(|it| &it.and_or.pipelines)
                .any(pipeline_streams);
            let and_or = &item.and_or;
            for (j, pipeline) in and_or.pipelines.iter().enumerate() {
                let followed =
                    ctx.followed || later || and_or.pipelines[j + 1..].iter().any(pipeline_streams);
                self.walk_pipeline(pipeline, Ctx { followed, ..ctx });
            }
        }
    }

    fn walk_pipeline(&mut self, pipeline: &shell::Pipeline, ctx: Ctx) {
        let n = pipeline.stages.len();
        let mut prev_finite = true;
        for (i, stage) in pipeline.stages.iter().enumerate() {
            let mut sink = if i + 1 < n { Sink::Pipe } else { ctx.sink };
            if stage.redirects().iter().any(|r| r.redirects_stdout()) {
                sink = Sink::Elsewhere;
            }
            let stdin_redirected = stage.redirects().iter().any(|r| r.redirects_stdin());
            let sctx = StageCtx {
                sink,
                reads_stream: i > 0 && !prev_finite && !stdin_redirected,
                in_loop: ctx.in_loop,
                followed: ctx.followed,
            };
            match stage {
                Command::Simple(c) => {
                    self.check_simple(c, sctx);
                    self.walk_substitutions(
                        c.assignments
                            .iter()
                            .chain(&c.words)
                            .chain(c.redirects.iter().filter_map(|r| r.target.as_ref())),
                        ctx,
                    );
                }
                Command::Compound(c) => {
                    let inner = Ctx {
                        sink,
                        in_loop: ctx.in_loop || c.kind.is_loop(),
                        followed: ctx.followed,
                    };
                    for s in c.conditions.iter().chain(&c.bodies) {
                        self.walk_script(s, inner);
                    }
                    self.walk_substitutions(
                        c.redirects.iter().filter_map(|r| r.target.as_ref()),
                        ctx,
                    );
                }
            }
            prev_finite = stage_finite(stage, i, prev_finite);
        }
    }

    fn walk_substitutions<'w>(&mut self, words: impl Iterator<Item = &'w Word>, ctx: Ctx) {
        for w in words {
            for s in &w.substitutions {
                let sink = match s.kind {
                    SubstitutionKind::Command | SubstitutionKind::Backtick => Sink::Captured,
                    SubstitutionKind::ProcessInput => Sink::Pipe,
                    SubstitutionKind::ProcessOutput => Sink::Captured,
                };
                self.walk_script(&s.script, Ctx { sink, ..ctx });
            }
        }
    }

    fn check_simple(&mut self, c: &SimpleCommand, sctx: StageCtx) {
        self.check_mtime_words(c);
        let Some(inv) = Invocation::of(c) else {
            return;
        };
        match inv.name.as_str() {
            "tail" => self.check_tail(&inv),
            "head" => self.check_head(&inv, sctx),
            "stat" | "gstat" => self.check_stat(&inv),
            "find" | "gfind" => self.check_find(&inv),
            "date" | "gdate" => self.check_date(&inv),
            "test" | "[" | "[[" => self.check_test(&inv),
            "ls" | "gls" => self.check_ls(&inv, sctx),
            _ => {}
        }
        if let Some(kind) = FilterKind::of(&inv.name) {
            self.check_filter(&inv, kind, sctx);
        }
    }

    // ------------------------------------------------------------ filters

    fn check_filter(&mut self, inv: &Invocation, kind: FilterKind, sctx: StageCtx) {
        let info = FilterInfo::of(inv, kind);
        // one-shot waits
        if let Some((span, what)) = &info.one_shot {
            if sctx.reads_stream && !sctx.in_loop && !sctx.followed {
                self.emit(
                    codes::ONE_SHOT,
                    span.clone(),
                    format!(
                        "`{what}` stops at the first match: the pipeline, and with it the \
                         monitor, ends after one event"
                    ),
                    one_shot_help(),
                );
            }
            // It exits (and flushes) at the first match: buffering is not the issue.
            return;
        }
        // Whether it streams or polls, a filter that lets only success through is silent
        // exactly when something goes wrong.
        if matches!(kind, FilterKind::Grep | FilterKind::Ripgrep)
            && !info.silent
            && matches!(sctx.sink, Sink::Pipe | Sink::Monitor)
        {
            if let Some(span) = success_only(&info) {
                self.emit(
                    codes::SUCCESS_ONLY_FILTER,
                    span,
                    format!(
                        "this `{}` passes only success lines: when the job fails, hangs or \
                         crashes, nothing matches and the monitor stays silent",
                        inv.name
                    ),
                    "silence is not success: also match failure signatures, e.g. \
                     `grep --line-buffered -E 'PASS|ok|FAIL|ERROR|panic|Traceback|Killed'`"
                        .to_string(),
                );
            }
        }
        if !matches!(sctx.sink, Sink::Pipe | Sink::Monitor) || info.silent {
            return;
        }
        let streaming = sctx.reads_stream || (kind.is_interpreter() && sctx.sink == Sink::Pipe);
        if !streaming || info.line_buffered || inv.stdbuf_line {
            return;
        }
        let target = if sctx.sink == Sink::Pipe {
            "writes into a pipe"
        } else {
            "writes to the monitor's output, which is a pipe too,"
        };
        let source = if sctx.reads_stream {
            "reads a stream and "
        } else {
            ""
        };
        self.emit(
            codes::UNBUFFERED_FILTER,
            inv.span(),
            format!(
                "`{}` {source}{target} without line buffering: its output waits in a \
                 block buffer (4–64 KiB), so events arrive late, in bursts, or never on a \
                 quiet stream",
                inv.name
            ),
            kind.unbuffer_help(&inv.name),
        );
    }

    fn check_head(&mut self, inv: &Invocation, sctx: StageCtx) {
        if !sctx.reads_stream || sctx.in_loop || sctx.followed {
            return;
        }
        let args = getopt(inv.args, &Spec::new("nc", &["lines", "bytes"], &[]));
        for a in &args {
            if let Arg::Opt { name, value, .. } = a {
                if matches!(name.as_str(), "n" | "c" | "lines" | "bytes")
                    && value.as_deref().is_some_and(|v| v.starts_with('-'))
                {
                    // `head -n -5`: everything but the last lines, not a wait.
                    return;
                }
            }
        }
        let what = self.raw(inv.span()).to_string();
        self.emit(
            codes::ONE_SHOT,
            inv.span(),
            format!(
                "`{what}` exits after its first lines: the pipeline, and with it the monitor, \
                 ends after the first event"
            ),
            one_shot_help(),
        );
    }

    // ------------------------------------------------------------ tail -f

    fn check_tail(&mut self, inv: &Invocation) {
        let args = getopt(
            inv.args,
            &Spec::new(
                "ncsb",
                &[
                    "lines",
                    "bytes",
                    "sleep-interval",
                    "pid",
                    "max-unchanged-stats",
                ],
                &[],
            ),
        );
        let mut descriptor: Option<&Word> = None;
        let mut by_name = false;
        let mut files = 0;
        for a in &args {
            match a {
                Arg::Opt {
                    name, value, word, ..
                } => match (name.as_str(), value.as_deref()) {
                    ("f", _) => descriptor = descriptor.or(Some(*word)),
                    ("F", _) => by_name = true,
                    ("follow", None | Some("descriptor")) => {
                        descriptor = descriptor.or(Some(*word))
                    }
                    ("follow", Some("name")) => by_name = true,
                    _ => {}
                },
                Arg::Operand(_) => files += 1,
            }
        }
        let Some(word) = descriptor else {
            return;
        };
        if by_name || files == 0 {
            return;
        }
        let fixed_word = if word.text.starts_with("--") {
            "-F".to_string()
        } else {
            word.text.replacen('f', "F", 1)
        };
        let mut fixed = vec![inv.name_word.raw(self.src).to_string()];
        for a in inv.args {
            if a.span == word.span {
                fixed.push(fixed_word.clone());
            } else {
                fixed.push(a.raw(self.src).to_string());
            }
        }
        self.emit(
            codes::TAIL_F_ROTATION,
            word.span.clone(),
            format!(
                "`tail {}` follows the open file: once the log is rotated or recreated it keeps \
                 reading the old file and the monitor goes silent",
                word.text
            ),
            format!(
                "use `tail -F` (follow the name, retry when the file reappears): `{}`",
                fixed.join(" ")
            ),
        );
    }

    // ------------------------------------------------------------ mtime

    fn mtime(&mut self, span: Range<usize>, what: &str) {
        self.emit(
            codes::MTIME_TRIGGER,
            span,
            format!(
                "`{what}` triggers on modification time: mtime changes without a meaningful \
                 change (touch, checkouts, editors saving unchanged files) and misses changes \
                 made within the same second"
            ),
            "trigger on content instead: compare a checksum or the value you care about, or \
             watch events (`inotifywait -m -e close_write`, `fswatch`), and print a line only \
             when the meaning changes"
                .to_string(),
        );
    }

    fn check_stat(&mut self, inv: &Invocation) {
        let args = getopt(inv.args, &Spec::new("cf", &["format", "printf"], &[]));
        for a in &args {
            if let Arg::Opt {
                name,
                value: Some(v),
                span,
                ..
            } = a
            {
                let gnu = matches!(name.as_str(), "c" | "format" | "printf")
                    && ["%Y", "%y", "%Z", "%z"].iter().any(|f| v.contains(f));
                let bsd = name == "f" && ["%m", "%Sm", "%c", "%Sc"].iter().any(|f| v.contains(f));
                if gnu || bsd {
                    let what = self.raw(inv.name_word.span.start..span.end).to_string();
                    self.mtime(inv.name_word.span.start..span.end, &what);
                    return;
                }
            }
        }
    }

    fn check_find(&mut self, inv: &Invocation) {
        for w in inv.args {
            let t = w.text.as_str();
            if t.starts_with("-newer")
                || t.starts_with("-anewer")
                || t.starts_with("-cnewer")
                || matches!(t, "-mmin" | "-mtime" | "-cmin" | "-ctime")
            {
                let what = format!("find {t}");
                self.mtime(w.span.clone(), &what);
                return;
            }
        }
    }

    fn check_date(&mut self, inv: &Invocation) {
        let args = getopt(
            inv.args,
            &Spec::new("rdfI", &["reference", "date", "file"], &[]),
        );
        for a in &args {
            if let Arg::Opt {
                name,
                value: Some(v),
                span,
                ..
            } = a
            {
                if (name == "r" && !v.bytes().all(|b| b.is_ascii_digit())) || name == "reference" {
                    let what = self.raw(inv.name_word.span.start..span.end).to_string();
                    self.mtime(inv.name_word.span.start..span.end, &what);
                    return;
                }
            }
        }
    }

    fn check_test(&mut self, inv: &Invocation) {
        for w in inv.args {
            if w.is_keyword("-nt") || w.is_keyword("-ot") {
                let what = format!("test {}", w.text);
                self.mtime(w.span.clone(), &what);
                return;
            }
        }
    }

    fn check_ls(&mut self, inv: &Invocation, sctx: StageCtx) {
        if !sctx.in_loop {
            return;
        }
        for w in inv.args {
            let t = w.text.as_str();
            let by_time = if let Some(long) = t.strip_prefix("--") {
                long.starts_with("full-time") || long.starts_with("time") || long == "sort=time"
            } else if let Some(short) = t.strip_prefix('-') {
                short.contains('t') || short.contains('l')
            } else {
                false
            };
            if by_time {
                let what = self.raw(inv.name_word.span.start..w.span.end).to_string();
                self.mtime(inv.name_word.span.start..w.span.end, &what);
                return;
            }
        }
    }

    /// Interpreter one-liners that read mtimes (`os.path.getmtime`, `st_mtime`, ...).
    fn check_mtime_words(&mut self, c: &SimpleCommand) {
        const NEEDLES: &[&str] = &[
            "getmtime",
            "st_mtime",
            "mtimeMs",
            "filemtime",
            "File.mtime",
            "lastModified",
        ];
        for w in &c.words {
            if let Some(needle) = NEEDLES.iter().find(|n| w.text.contains(**n)) {
                self.mtime(w.span.clone(), needle);
                return;
            }
        }
    }

    // ------------------------------------------------------------ background

    fn check_background(&mut self, script: &Script) {
        let Some(last) = script.items.last() else {
            return;
        };
        if let Some(amp) = &last.background {
            self.emit_background(amp.clone());
            return;
        }
        let stages: Vec<&Command> = last
            .and_or
            .pipelines
            .iter()
            .flat_map(|p| &p.stages)
            .collect();
        if let [Command::Simple(c)] = stages.as_slice() {
            let is_disown = c.words.first().is_some_and(|w| w.is_keyword("disown"));
            if is_disown && script.items.len() >= 2 {
                if let Some(amp) = &script.items[script.items.len() - 2].background {
                    self.emit_background(amp.clone());
                }
            }
        } else if let [Command::Compound(c)] = stages.as_slice() {
            if matches!(c.kind, CompoundKind::Group | CompoundKind::Subshell) {
                if let Some(body) = c.bodies.first() {
                    self.check_background(body);
                }
            }
        }
    }

    fn emit_background(&mut self, amp: Range<usize>) {
        self.emit(
            codes::BACKGROUND_COMMAND,
            amp,
            "the command ends with `&`: the shell exits at once, so the monitor ends \
             immediately while the background job runs on, orphaned, beyond the monitor's \
             control"
                .to_string(),
            "remove the trailing `&`: the monitor itself already runs in the background; keep \
             the watch in the foreground (`exec tail -F ...` even replaces the shell)"
                .to_string(),
        );
    }

    // ------------------------------------------------------------ quoting

    fn check_plugin_paths(&mut self, script: &Script) {
        let mut found: Vec<(Range<usize>, String, String)> = Vec::new();
        shell::for_each_word(script, &mut |w: &Word| {
            if let Some(e) = w
                .expansions
                .iter()
                .find(|e| !e.quoted && PATH_VARIABLES.contains(&e.name.as_str()))
            {
                let raw = w.raw(self.src);
                let var = self.raw(e.span.clone()).to_string();
                let fix = if raw.contains(['"', '\'', '`']) || !w.substitutions.is_empty() {
                    format!("\"{var}\"")
                } else {
                    format!("\"{raw}\"")
                };
                found.push((e.span.clone(), var, fix));
            }
        });
        for (span, var, fix) in found {
            self.emit(
                codes::UNQUOTED_PLUGIN_PATH,
                span,
                format!(
                    "`{var}` is not quoted: a path with spaces (such as `~/Library/Application \
                     Support/...`) is split into several words and the command breaks"
                ),
                format!("put it in double quotes: `{fix}`"),
            );
        }
    }
}

fn one_shot_help() -> String {
    "a monitor should keep running and print one line per event: drop the count or quit \
     (`grep --line-buffered PATTERN` keeps every match); to wait for a single line, run a \
     one-off background command instead, or re-arm in a `while` loop"
        .to_string()
}

// ---------------------------------------------------------------- invocations

/// A simple command with wrappers (`stdbuf`, `env`, `timeout`, `nice`, `exec`, ...)
/// peeled off.
struct Invocation<'c> {
    /// The program's base name (`grep` for `/usr/bin/grep`).
    name: String,
    name_word: &'c Word,
    args: &'c [Word],
    /// `stdbuf -oL` / `stdbuf -o0` / `unbuffer` wrap the program.
    stdbuf_line: bool,
    /// Environment assignments (`VAR=x cmd`, `env VAR=x cmd`).
    env: Vec<(String, String)>,
}

impl<'c> Invocation<'c> {
    fn of(c: &'c SimpleCommand) -> Option<Self> {
        let mut env: Vec<(String, String)> = c
            .assignments
            .iter()
            .filter_map(|w| w.text.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let words = &c.words;
        let mut i = 0;
        let mut stdbuf_line = false;
        for _ in 0..8 {
            let w = words.get(i)?;
            let name = basename(&w.text);
            let arg = |j: usize| words.get(j).map(|w| w.text.as_str()).unwrap_or("");
            i += 1;
            match name {
                "stdbuf" | "gstdbuf" => {
                    while arg(i).starts_with('-') {
                        let t = arg(i);
                        let mode = if let Some(v) = t.strip_prefix("--output=") {
                            Some(v.to_string())
                        } else if t == "-o" {
                            i += 1;
                            Some(arg(i).to_string())
                        } else if let Some(v) = t.strip_prefix("-o") {
                            Some(v.to_string())
                        } else {
                            if matches!(t, "-i" | "-e") {
                                i += 1;
                            }
                            None
                        };
                        if matches!(mode.as_deref(), Some("L" | "0")) {
                            stdbuf_line = true;
                        }
                        i += 1;
                    }
                }
                "unbuffer" => {
                    stdbuf_line = true;
                    while arg(i).starts_with('-') {
                        i += 1;
                    }
                }
                "env" => loop {
                    let t = arg(i);
                    if matches!(t, "-u" | "--unset" | "-C" | "--chdir") {
                        i += 2;
                    } else if t.starts_with('-') {
                        i += 1;
                    } else if let Some((k, v)) = t.split_once('=') {
                        if !k.is_empty() && !k.contains('/') {
                            env.push((k.to_string(), v.to_string()));
                            i += 1;
                        } else {
                            break;
                        }
                    } else {
                        break;
                    }
                },
                "nice" => {
                    while arg(i).starts_with('-') {
                        if arg(i) == "-n" {
                            i += 1;
                        }
                        i += 1;
                    }
                }
                "timeout" | "gtimeout" => {
                    while arg(i).starts_with('-') {
                        if matches!(arg(i), "-s" | "-k") {
                            i += 1;
                        }
                        i += 1;
                    }
                    i += 1; // the duration
                }
                "exec" => {
                    while arg(i).starts_with('-') {
                        if arg(i) == "-a" {
                            i += 1;
                        }
                        i += 1;
                    }
                }
                "command" => {
                    if matches!(arg(i), "-v" | "-V") {
                        return None;
                    }
                    while arg(i).starts_with('-') {
                        i += 1;
                    }
                }
                "sudo" | "doas" => {
                    while arg(i).starts_with('-') {
                        if matches!(
                            arg(i),
                            "-u" | "-g" | "-C" | "-D" | "-h" | "-p" | "-r" | "-t" | "-U"
                        ) {
                            i += 1;
                        }
                        i += 1;
                    }
                }
                "ionice" => {
                    while arg(i).starts_with('-') {
                        if matches!(arg(i), "-c" | "-n" | "-p" | "-t") {
                            i += 1;
                        }
                        i += 1;
                    }
                }
                "nohup" | "setsid" | "builtin" | "caffeinate" | "chronic" | "time" => {
                    while arg(i).starts_with('-') {
                        i += 1;
                    }
                }
                _ => {
                    return Some(Invocation {
                        name: name.to_string(),
                        name_word: w,
                        args: words.get(i..).unwrap_or(&[]),
                        stdbuf_line,
                        env,
                    })
                }
            }
        }
        None
    }

    /// From the program name to its last argument.
    fn span(&self) -> Range<usize> {
        let end = self
            .args
            .last()
            .map_or(self.name_word.span.end, |w| w.span.end);
        self.name_word.span.start..end
    }

    fn env(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

// ---------------------------------------------------------------- option parsing

/// Which options of a program take an argument.
struct Spec {
    short_arg: &'static str,
    long_arg: &'static [&'static str],
    long_arg2: &'static [&'static str],
    /// Options end at the first operand (awk's program, a script path).
    stop_at_operand: bool,
}

impl Spec {
    const fn new(
        short_arg: &'static str,
        long_arg: &'static [&'static str],
        long_arg2: &'static [&'static str],
    ) -> Self {
        Spec {
            short_arg,
            long_arg,
            long_arg2,
            stop_at_operand: false,
        }
    }

    const fn stopping(mut self) -> Self {
        self.stop_at_operand = true;
        self
    }
}

#[derive(Debug)]
enum Arg<'w> {
    Opt {
        /// `q` for `-q`, `line-buffered` for `--line-buffered`.
        name: String,
        value: Option<String>,
        /// The word holding the option.
        word: &'w Word,
        /// The option and its value, when the value is a separate word.
        span: Range<usize>,
    },
    Operand(&'w Word),
}

/// A getopt-like reading of `args` (GNU style: options may follow operands).
fn getopt<'w>(args: &'w [Word], spec: &Spec) -> Vec<Arg<'w>> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut only_operands = false;
    while let Some(w) = args.get(i) {
        let t = w.text.as_str();
        i += 1;
        if only_operands || t == "-" || !t.starts_with('-') {
            out.push(Arg::Operand(w));
            only_operands |= spec.stop_at_operand;
            continue;
        }
        if t == "--" {
            only_operands = true;
            continue;
        }
        let mut span = w.span.clone();
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let value = if value.is_none() && spec.long_arg2.contains(&name) {
                let v = args.get(i).map(|w| w.text.clone());
                if let Some(last) = args.get(i + 1).or(args.get(i)) {
                    span.end = last.span.end;
                }
                i += 2;
                v
            } else if value.is_none() && spec.long_arg.contains(&name) {
                let v = args.get(i).map(|w| {
                    span.end = w.span.end;
                    w.text.clone()
                });
                i += 1;
                v
            } else {
                value
            };
            out.push(Arg::Opt {
                name: name.to_string(),
                value,
                word: w,
                span,
            });
            continue;
        }
        let chars: Vec<char> = t.chars().skip(1).collect();
        for (k, ch) in chars.iter().enumerate() {
            if spec.short_arg.contains(*ch) {
                let rest: String = chars[k + 1..].iter().collect();
                let value = if rest.is_empty() {
                    let v = args.get(i).map(|w| {
                        span.end = w.span.end;
                        w.text.clone()
                    });
                    i += 1;
                    v
                } else {
                    Some(rest)
                };
                out.push(Arg::Opt {
                    name: ch.to_string(),
                    value,
                    word: w,
                    span: span.clone(),
                });
                break;
            }
            out.push(Arg::Opt {
                name: ch.to_string(),
                value: None,
                word: w,
                span: span.clone(),
            });
        }
    }
    out
}

// ---------------------------------------------------------------- filters

/// Programs that block-buffer their output when it is a pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FilterKind {
    Grep,
    Ripgrep,
    Sed,
    Awk,
    Jq,
    /// coreutils-style filters with no unbuffered option (`cut`, `tr`, `uniq`, ...).
    Stdio,
    Perl,
    Python,
    Ruby,
}

impl FilterKind {
    fn of(name: &str) -> Option<Self> {
        Some(match name {
            "grep" | "egrep" | "fgrep" | "ggrep" => FilterKind::Grep,
            "rg" => FilterKind::Ripgrep,
            "sed" | "gsed" => FilterKind::Sed,
            "awk" | "gawk" | "mawk" | "nawk" => FilterKind::Awk,
            "jq" => FilterKind::Jq,
            "cut" | "tr" | "uniq" | "paste" | "nl" | "fold" | "rev" | "expand" | "unexpand"
            | "fmt" | "colrm" | "gcut" | "gtr" | "guniq" => FilterKind::Stdio,
            "perl" => FilterKind::Perl,
            "ruby" => FilterKind::Ruby,
            n if is_python(n) => FilterKind::Python,
            _ => return None,
        })
    }

    fn is_interpreter(self) -> bool {
        matches!(
            self,
            FilterKind::Perl | FilterKind::Python | FilterKind::Ruby
        )
    }

    fn unbuffer_help(self, name: &str) -> String {
        match self {
            FilterKind::Grep | FilterKind::Ripgrep => {
                format!("add `--line-buffered`: `{name} --line-buffered ...`")
            }
            FilterKind::Sed => format!(
                "add `-u` (GNU sed; `-l` on macOS/BSD): `{name} -u ...`, or prefix it with \
                 `stdbuf -oL`"
            ),
            FilterKind::Awk => format!(
                "flush after each line: `{name} '{{ print; fflush() }}'` (or `mawk -W \
                 interactive`), or prefix it with `stdbuf -oL`"
            ),
            FilterKind::Jq => format!("add `--unbuffered`: `{name} --unbuffered ...`"),
            FilterKind::Stdio => format!(
                "`{name}` has no line-buffering option: prefix it with `stdbuf -oL` \
                 (`stdbuf -oL {name} ...`; on macOS `gstdbuf` from coreutils)"
            ),
            FilterKind::Perl => {
                "turn on autoflush: `perl -ne 'BEGIN { $| = 1 } ...'` (or `$| = 1;` at the \
                 top of the script)"
                    .to_string()
            }
            FilterKind::Python => format!(
                "run it unbuffered: `{name} -u ...` or `PYTHONUNBUFFERED=1 {name} ...` (or \
                 `print(..., flush=True)` in the script)"
            ),
            FilterKind::Ruby => {
                "turn on autoflush: `$stdout.sync = true` (`ruby -e '$stdout.sync = true; ...'`)"
                    .to_string()
            }
        }
    }
}

fn is_python(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("python") else {
        return false;
    };
    rest.is_empty() || rest.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// What a filter invocation does, as far as the lints care.
#[derive(Debug, Default)]
struct FilterInfo {
    line_buffered: bool,
    /// Prints nothing per line (`grep -q`, `-c`, `-l`).
    silent: bool,
    /// It stops at the first match: the span and a short description.
    one_shot: Option<(Range<usize>, String)>,
    invert: bool,
    /// The search patterns (grep), with the span of the word holding each.
    patterns: Vec<(String, Range<usize>)>,
    /// Patterns come from a file (`grep -f`): unknown.
    pattern_file: bool,
}

impl FilterInfo {
    fn of(inv: &Invocation, kind: FilterKind) -> Self {
        match kind {
            FilterKind::Grep | FilterKind::Ripgrep => Self::grep(inv, kind),
            FilterKind::Sed => Self::sed(inv),
            FilterKind::Awk => Self::awk(inv),
            FilterKind::Jq => {
                let args = getopt(
                    inv.args,
                    &Spec::new(
                        "fL",
                        &["indent", "from-file"],
                        &["arg", "argjson", "slurpfile", "rawfile"],
                    ),
                );
                FilterInfo {
                    line_buffered: args.iter().any(|a| is_opt(a, &["unbuffered"])),
                    ..Default::default()
                }
            }
            FilterKind::Stdio => FilterInfo::default(),
            FilterKind::Perl => {
                let code: String = inv
                    .args
                    .iter()
                    .map(|w| w.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
                FilterInfo {
                    line_buffered: compact.contains("$|=1")
                        || compact.contains("$|++")
                        || compact.contains("autoflush")
                        || compact.contains("->flush"),
                    ..Default::default()
                }
            }
            FilterKind::Ruby => {
                let compact: String = inv
                    .args
                    .iter()
                    .flat_map(|w| w.text.chars())
                    .filter(|c| !c.is_whitespace())
                    .collect();
                FilterInfo {
                    line_buffered: compact.contains("sync=true") || compact.contains(".flush"),
                    ..Default::default()
                }
            }
            FilterKind::Python => {
                let mut unbuffered = inv.env("PYTHONUNBUFFERED").is_some_and(|v| !v.is_empty());
                let mut code = String::new();
                let mut i = 0;
                'args: while let Some(w) = inv.args.get(i) {
                    let t = w.text.as_str();
                    i += 1;
                    if !t.starts_with('-') || t == "-" || t == "--" {
                        break;
                    }
                    for (k, ch) in t.char_indices().skip(1) {
                        match ch {
                            'u' => unbuffered = true,
                            'c' | 'm' => {
                                let rest = &t[k + ch.len_utf8()..];
                                code = if rest.is_empty() {
                                    inv.args.get(i).map(|w| w.text.clone()).unwrap_or_default()
                                } else {
                                    rest.to_string()
                                };
                                break 'args;
                            }
                            'W' | 'X' => {
                                if t[k + 1..].is_empty() {
                                    i += 1;
                                }
                                break;
                            }
                            _ => {}
                        }
                    }
                }
                FilterInfo {
                    line_buffered: unbuffered
                        || code.contains("flush")
                        || code.contains("line_buffering"),
                    ..Default::default()
                }
            }
        }
    }

    fn grep(inv: &Invocation, kind: FilterKind) -> Self {
        let spec = if kind == FilterKind::Ripgrep {
            Spec::new(
                "efmABCgtTjMrE",
                &[
                    "regexp",
                    "file",
                    "max-count",
                    "after-context",
                    "before-context",
                    "context",
                    "glob",
                    "type",
                    "type-not",
                    "threads",
                    "max-columns",
                    "replace",
                    "encoding",
                ],
                &[],
            )
        } else {
            Spec::new(
                "efmABCDd",
                &[
                    "regexp",
                    "file",
                    "max-count",
                    "after-context",
                    "before-context",
                    "context",
                    "label",
                    "binary-files",
                    "devices",
                    "directories",
                    "exclude",
                    "exclude-from",
                    "exclude-dir",
                    "include",
                    "group-separator",
                ],
                &[],
            )
        };
        let args = getopt(inv.args, &spec);
        let mut info = FilterInfo::default();
        let mut explicit_patterns = false;
        for a in &args {
            match a {
                Arg::Opt {
                    name, value, span, ..
                } => match name.as_str() {
                    "line-buffered" => info.line_buffered = true,
                    "q" | "quiet" | "silent" => {
                        info.silent = true;
                        info.one_shot = Some((span.clone(), format!("{} -q", inv.name)));
                    }
                    "c" | "count" | "l" | "files-with-matches" | "L" | "files-without-match" => {
                        info.silent = true
                    }
                    "v" | "invert-match" => info.invert = true,
                    "m" | "max-count" => {
                        let n = value.clone().unwrap_or_default();
                        if n != "0" && !n.starts_with('-') {
                            info.one_shot = Some((span.clone(), format!("{} -m {n}", inv.name)));
                        }
                    }
                    "e" | "regexp" => {
                        explicit_patterns = true;
                        if let Some(v) = value {
                            info.patterns.push((v.clone(), span.clone()));
                        }
                    }
                    "f" | "file" => {
                        explicit_patterns = true;
                        info.pattern_file = true;
                    }
                    _ => {}
                },
                Arg::Operand(_) => {}
            }
        }
        if !explicit_patterns {
            if let Some(Arg::Operand(w)) = args.iter().find(|a| matches!(a, Arg::Operand(_))) {
                info.patterns.push((w.text.clone(), w.span.clone()));
            }
        }
        info
    }

    fn sed(inv: &Invocation) -> Self {
        let args = getopt(
            inv.args,
            &Spec::new("ef", &["expression", "file", "line-length"], &[]),
        );
        let mut info = FilterInfo::default();
        let mut scripts: Vec<(String, Range<usize>)> = Vec::new();
        let mut explicit = false;
        for a in &args {
            if let Arg::Opt {
                name, value, span, ..
            } = a
            {
                match name.as_str() {
                    "u" | "unbuffered" | "l" => info.line_buffered = true,
                    "e" | "expression" => {
                        explicit = true;
                        if let Some(v) = value {
                            scripts.push((v.clone(), span.clone()));
                        }
                    }
                    "f" | "file" => explicit = true,
                    _ => {}
                }
            }
        }
        if !explicit {
            if let Some(Arg::Operand(w)) = args.iter().find(|a| matches!(a, Arg::Operand(_))) {
                scripts.push((w.text.clone(), w.span.clone()));
            }
        }
        if let Some((script, span)) = scripts.iter().find(|(s, _)| sed_quits(s)) {
            info.one_shot = Some((span.clone(), format!("sed '{script}'")));
        }
        info
    }

    fn awk(inv: &Invocation) -> Self {
        let args = getopt(
            inv.args,
            &Spec::new(
                "fvFWEil",
                &[
                    "file",
                    "assign",
                    "field-separator",
                    "include",
                    "load",
                    "exec",
                ],
                &[],
            )
            .stopping(),
        );
        let mut info = FilterInfo::default();
        let mut program_file = false;
        for a in &args {
            if let Arg::Opt { name, value, .. } = a {
                match name.as_str() {
                    "W" if value.as_deref().is_some_and(|v| v.starts_with("i")) => {
                        info.line_buffered = true
                    }
                    "f" | "file" | "E" | "exec" => program_file = true,
                    _ => {}
                }
            }
        }
        if !program_file {
            if let Some(Arg::Operand(w)) = args.iter().find(|a| matches!(a, Arg::Operand(_))) {
                let program = w.text.as_str();
                if program.contains("fflush") || program.contains("system(\"\")") {
                    info.line_buffered = true;
                }
                if contains_word(program, "exit") {
                    info.one_shot = Some((w.span.clone(), format!("{} '...exit...'", inv.name)));
                }
            }
        }
        info
    }
}

fn is_opt(a: &Arg, names: &[&str]) -> bool {
    matches!(a, Arg::Opt { name, .. } if names.contains(&name.as_str()))
}

fn contains_word(hay: &str, word: &str) -> bool {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    hay.match_indices(word).any(|(i, _)| {
        let before = hay[..i].chars().next_back();
        let after = hay[i + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// Whether a sed script contains a `q` / `Q` command (`q`, `5q`, `/x/q`, `/x/{p;q}`).
fn sed_quits(script: &str) -> bool {
    let chars: Vec<char> = script.chars().collect();
    for (k, &c) in chars.iter().enumerate() {
        if c != 'q' && c != 'Q' {
            continue;
        }
        // after: optional exit code, then end of command
        let mut j = k + 1;
        while j < chars.len() && (chars[j].is_ascii_digit() || chars[j] == ' ') {
            j += 1;
        }
        if !(j == chars.len() || matches!(chars[j], ';' | '}' | '\n')) {
            continue;
        }
        // before: start of a command (after an address or a separator)
        let mut b = k;
        while b > 0 && chars[b - 1] == ' ' {
            b -= 1;
        }
        if b == 0
            || matches!(
                chars[b - 1],
                ';' | '{' | '}' | '\n' | '/' | '$' | '!' | '0'..='9'
            )
        {
            return true;
        }
    }
    false
}

const SUCCESS_WORDS: &[&str] = &[
    "pass",
    "passed",
    "passes",
    "passing",
    "ok",
    "okay",
    "success",
    "successful",
    "successfully",
    "succeeded",
    "succeed",
    "succeeds",
    "done",
    "ready",
    "complete",
    "completed",
    "finished",
    "listening",
    "started",
    "healthy",
    "built",
    "compiled",
    "green",
    "connected",
    "deployed",
    "serving",
    "up-to-date",
    "online",
];

const FAILURE_WORDS: &[&str] = &[
    "error",
    "errors",
    "err",
    "fail",
    "failed",
    "fails",
    "failure",
    "failures",
    "failing",
    "panic",
    "panicked",
    "fatal",
    "exception",
    "timeout",
    "timed",
    "exit",
    "exited",
    "abort",
    "aborted",
    "traceback",
    "killed",
    "denied",
    "crash",
    "crashed",
    "segfault",
    "sigsegv",
    "refused",
    "warn",
    "warning",
    "oom",
    "died",
    "dead",
    "stopped",
    "unhealthy",
    "cannot",
    "unable",
    "invalid",
    "critical",
    "broken",
    "not",
    "red",
    "reject",
    "rejected",
    "e",
];

/// The span of a grep pattern that names success words and no failure word.
fn success_only(info: &FilterInfo) -> Option<Range<usize>> {
    if info.invert || info.pattern_file || info.patterns.is_empty() {
        return None;
    }
    let mut success = false;
    for (pattern, _) in &info.patterns {
        // Drop regex escapes such as \b \w \< so that `\bok\b` yields `ok`.
        let mut cleaned = String::new();
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\\' {
                if chars
                    .peek()
                    .is_some_and(|n| n.is_ascii_alphabetic() || *n == '<' || *n == '>')
                {
                    chars.next();
                }
                cleaned.push(' ');
            } else {
                cleaned.push(c.to_ascii_lowercase());
            }
        }
        for token in cleaned.split(|c: char| !(c.is_alphanumeric() || c == '-')) {
            let token = token.trim_matches('-');
            if token.is_empty() {
                continue;
            }
            if FAILURE_WORDS.contains(&token) {
                return None;
            }
            if SUCCESS_WORDS.contains(&token) {
                success = true;
            }
        }
    }
    if success {
        info.patterns.first().map(|(_, span)| span.clone())
    } else {
        None
    }
}

// ---------------------------------------------------------------- stream analysis

/// Programs whose output is finite and short-lived when they are the first stage.
const FINITE_PRODUCERS: &[&str] = &[
    "echo",
    "printf",
    "cat",
    "ls",
    "find",
    "seq",
    "date",
    "stat",
    "wc",
    "ps",
    "df",
    "du",
    "git",
    "env",
    "printenv",
    "true",
    "false",
    ":",
    "pwd",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "id",
    "whoami",
    "hostname",
    "uname",
    "head",
    "tail",
    "sort",
    "diff",
    "comm",
    "base64",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "shasum",
    "cksum",
    "pgrep",
    "lsof",
    "test",
    "[",
    "[[",
    "sleep",
    "curl",
    "wget",
    "xargs",
    "tee",
    "column",
    "yq",
    "file",
    "which",
    "command",
    "type",
    "cd",
    "export",
    "set",
    "read",
    "exit",
    "return",
    "kill",
    "jobs",
    "netstat",
    "ss",
    "free",
    "uptime",
    "nproc",
    "getconf",
    "mktemp",
    "touch",
    "mkdir",
    "rm",
    "cp",
    "mv",
    "ln",
    "chmod",
    "tr",
    "cut",
    "uniq",
    "paste",
    "nl",
    "fold",
    "rev",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "sed",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "jq",
];

/// Whether a simple command runs until killed (follows a file, a journal, events...).
fn long_lived(c: &SimpleCommand) -> bool {
    let Some(inv) = Invocation::of(c) else {
        return false;
    };
    let has = |flags: &[&str]| inv.args.iter().any(|w| flags.contains(&w.text.as_str()));
    let short = |ch: char| {
        inv.args.iter().any(|w| {
            let t = w.text.as_str();
            t.starts_with('-') && !t.starts_with("--") && t.contains(ch)
        })
    };
    match inv.name.as_str() {
        "tail" | "gtail" => {
            short('f') || short('F') || inv.args.iter().any(|w| w.text.starts_with("--follow"))
        }
        "journalctl" => short('f') || has(&["--follow"]),
        "kubectl" | "oc" | "docker" | "podman" | "stern" => {
            inv.name == "stern"
                || has(&["events"])
                || (has(&["logs", "log"]) && (short('f') || has(&["--follow"])))
                || short('w')
                || has(&["--watch"])
        }
        "inotifywait" => short('m') || has(&["--monitor"]),
        "dmesg" => short('w') || has(&["--follow"]),
        "ping" => !short('c'),
        "log" => has(&["stream"]),
        "adb" => has(&["logcat"]),
        "fswatch" | "watchman-wait" | "watchexec" | "entr" | "watch" | "yes" | "tcpdump"
        | "socat" | "websocat" | "mosquitto_sub" | "vmstat" | "iostat" | "top" => true,
        "nc" | "ncat" => short('l'),
        _ => false,
    }
}

fn script_has_long_lived(script: &Script) -> bool {
    let mut found = false;
    shell::for_each_simple_command(script, &mut |c| found |= long_lived(c));
    found
}

/// Whether the output of `stage` (at position `i`, fed by an earlier stage whose output
/// is finite when `prev_finite`) ends by itself.
fn stage_finite(stage: &Command, i: usize, prev_finite: bool) -> bool {
    match stage {
        Command::Simple(c) => {
            if long_lived(c) {
                return false;
            }
            if i > 0 {
                return prev_finite;
            }
            match Invocation::of(c) {
                Some(inv) => FINITE_PRODUCERS.contains(&inv.name.as_str()),
                None => true,
            }
        }
        Command::Compound(c) => {
            if matches!(c.kind, CompoundKind::While | CompoundKind::Until) {
                return false;
            }
            let mut finite = true;
            for s in c.conditions.iter().chain(&c.bodies) {
                if script_has_long_lived(s) {
                    finite = false;
                }
                shell::for_each_simple_command(s, &mut |sc| {
                    if let Some(inv) = Invocation::of(sc) {
                        if !FINITE_PRODUCERS.contains(&inv.name.as_str()) {
                            finite = false;
                        }
                    }
                });
            }
            finite && (i == 0 || prev_finite)
        }
    }
}

/// Whether a pipeline keeps running (its source is not known to end, or it loops).
fn pipeline_streams(p: &shell::Pipeline) -> bool {
    let mut finite = true;
    for (i, stage) in p.stages.iter().enumerate() {
        finite = stage_finite(stage, i, finite);
    }
    !finite
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes_of(cmd: &str) -> Vec<&'static str> {
        lint_command(cmd).into_iter().map(|l| l.code).collect()
    }

    fn has(cmd: &str, code: &str) -> bool {
        codes_of(cmd).contains(&code)
    }

    #[track_caller]
    fn yes(cmd: &str, code: &str) {
        assert!(
            has(cmd, code),
            "expected {code} for {cmd:?}, got {:?}",
            lint_command(cmd)
        );
    }

    #[track_caller]
    fn no(cmd: &str, code: &str) {
        assert!(
            !has(cmd, code),
            "unexpected {code} for {cmd:?}: {:?}",
            lint_command(cmd)
        );
    }

    #[test]
    fn clean_commands_have_no_findings() {
        for cmd in [
            "tail -F -n0 /var/log/app.log | grep --line-buffered -E 'ERROR|FAIL'",
            "\"${CLAUDE_PLUGIN_ROOT}/scripts/watch.sh\"",
            "\"${CLAUDE_PLUGIN_ROOT}\"/scripts/watch.sh --interval 5",
            "journalctl -f -u app | stdbuf -oL grep -i error",
            "kubectl get pods -w | awk '{print $1, $3; fflush()}'",
            "tail -F log | sed -u 's/^/app: /'",
            "tail -F log.json | jq --unbuffered -r '.msg'",
            "while true; do if ! curl -fsS localhost:8080/health >/dev/null; then echo DOWN; fi; sleep 10; done",
            "inotifywait -m -e close_write src/ --format '%w%f'",
            "exec tail -F /tmp/build.log",
            "python3 -u watch.py | grep --line-buffered -v DEBUG",
            "PYTHONUNBUFFERED=1 python3 watch.py | grep --line-buffered -v DEBUG",
            "",
        ] {
            assert!(lint_command(cmd).is_empty(), "{cmd:?}: {:?}", lint_command(cmd));
        }
    }

    #[test]
    fn unbuffered_filter_positive() {
        yes("tail -F log | grep ERROR", codes::UNBUFFERED_FILTER);
        yes(
            "tail -F log | grep ERROR | while read l; do echo \"$l\"; done",
            codes::UNBUFFERED_FILTER,
        );
        yes("tail -F log | sed 's/a/b/'", codes::UNBUFFERED_FILTER);
        yes("tail -F log | awk '{print $2}'", codes::UNBUFFERED_FILTER);
        yes("tail -F log | cut -d' ' -f2", codes::UNBUFFERED_FILTER);
        yes("tail -F log | tr a-z A-Z", codes::UNBUFFERED_FILTER);
        yes("tail -F log.json | jq -r .msg", codes::UNBUFFERED_FILTER);
        yes("tail -F log | uniq", codes::UNBUFFERED_FILTER);
        yes(
            "tail -F log | perl -ne 'print if /x/'",
            codes::UNBUFFERED_FILTER,
        );
        yes("tail -F log | python3 filter.py", codes::UNBUFFERED_FILTER);
        yes(
            "python3 watch.py | grep --line-buffered x",
            codes::UNBUFFERED_FILTER,
        );
        yes("./watch.sh | grep x", codes::UNBUFFERED_FILTER);
        yes("npm run dev 2>&1 | grep -i error", codes::UNBUFFERED_FILTER);
        yes(
            "tail -F log | grep --line-buffered x | cut -c1-80",
            codes::UNBUFFERED_FILTER,
        );
        yes(
            "while true; do date; sleep 1; done | grep 5",
            codes::UNBUFFERED_FILTER,
        );
        yes(
            "/usr/bin/grep x <(tail -F log) ; tail -F log | /usr/bin/grep y",
            codes::UNBUFFERED_FILTER,
        );
        yes("tail -F log | stdbuf -i0 grep x", codes::UNBUFFERED_FILTER);
        yes(
            "while read l; do echo \"$l\"; done < <(tail -F log | grep x)",
            codes::UNBUFFERED_FILTER,
        );
        yes(
            "tail -F log | env LC_ALL=C grep x",
            codes::UNBUFFERED_FILTER,
        );
        yes("tail -F log | timeout 600 grep x", codes::UNBUFFERED_FILTER);
    }

    #[test]
    fn unbuffered_filter_negative() {
        no(
            "tail -F log | grep --line-buffered ERROR",
            codes::UNBUFFERED_FILTER,
        );
        no(
            "tail -F log | stdbuf -oL grep ERROR",
            codes::UNBUFFERED_FILTER,
        );
        no("tail -F log | stdbuf -o0 cut -f1", codes::UNBUFFERED_FILTER);
        no(
            "tail -F log | stdbuf --output=L tr a b",
            codes::UNBUFFERED_FILTER,
        );
        no("tail -F log | unbuffer grep x", codes::UNBUFFERED_FILTER);
        no(
            "tail -F log | awk '{print; fflush()}'",
            codes::UNBUFFERED_FILTER,
        );
        no(
            "tail -F log | mawk -W interactive '{print}'",
            codes::UNBUFFERED_FILTER,
        );
        no("tail -F log | sed -u s/a/b/", codes::UNBUFFERED_FILTER);
        no("tail -F log | sed -nu p", codes::UNBUFFERED_FILTER);
        no("tail -F log | sed --unbuffered p", codes::UNBUFFERED_FILTER);
        no("tail -F log | jq --unbuffered .", codes::UNBUFFERED_FILTER);
        no("tail -F log | python3 -u f.py", codes::UNBUFFERED_FILTER);
        no(
            "tail -F log | python3 -c 'import sys\nfor l in sys.stdin: print(l, flush=True)'",
            codes::UNBUFFERED_FILTER,
        );
        no(
            "tail -F log | perl -ne 'BEGIN{$|=1} print if /x/'",
            codes::UNBUFFERED_FILTER,
        );
        no(
            "tail -F log | rg --line-buffered x",
            codes::UNBUFFERED_FILTER,
        );
        // grep -q in a condition prints nothing.
        no(
            "if tail -n 50 log | grep -q ERROR; then echo found; fi",
            codes::UNBUFFERED_FILTER,
        );
        no(
            "while sleep 5; do curl -s url | grep -q ok || echo DOWN; done",
            codes::UNBUFFERED_FILTER,
        );
        // grep reading a file, finite.
        no("grep ERROR log | head -n 3", codes::UNBUFFERED_FILTER);
        no("cat log | grep x", codes::UNBUFFERED_FILTER);
        // output captured whole by $(...): the last stage of the substitution.
        no(
            "while true; do n=$(tail -F log | grep -c x); echo $n; done",
            codes::UNBUFFERED_FILTER,
        );
        no(
            "x=$(./status.sh | grep state); echo \"$x\"",
            codes::UNBUFFERED_FILTER,
        );
        // per-line filter in a loop body: input is one echo, it exits and flushes.
        no(
            "tail -F log | while read -r l; do echo \"$l\" | jq -r .msg; done",
            codes::UNBUFFERED_FILTER,
        );
        // output to a file.
        no(
            "tail -F log | grep x >> matches.txt",
            codes::UNBUFFERED_FILTER,
        );
        no("tail -F log | grep x > /dev/null", codes::UNBUFFERED_FILTER);
        // grep with a file operand as first stage.
        no("grep -h x a b | sort", codes::UNBUFFERED_FILTER);
    }

    #[test]
    fn unbuffered_filter_span_and_help() {
        let cmd = "tail -F log | grep ERROR";
        let l = &lint_command(cmd)[0];
        assert_eq!(&cmd[l.span.clone()], "grep ERROR");
        assert!(l.help.contains("--line-buffered"), "{}", l.help);
        assert!(l.message.contains("monitor's output"), "{}", l.message);
        let cmd = "tail -F log | cut -f1 | while read x; do echo $x; done";
        let l = &lint_command(cmd)[0];
        assert!(l.help.contains("stdbuf -oL"), "{}", l.help);
        assert!(l.message.contains("writes into a pipe"), "{}", l.message);
    }

    #[test]
    fn one_shot_positive() {
        yes("tail -F log | head -n 1", codes::ONE_SHOT);
        yes("tail -F log | head -1", codes::ONE_SHOT);
        yes("tail -F log | head -n1", codes::ONE_SHOT);
        yes("tail -F log | head", codes::ONE_SHOT);
        yes("tail -F log | grep -m 1 READY", codes::ONE_SHOT);
        yes("tail -F log | grep -m1 READY", codes::ONE_SHOT);
        yes("tail -F log | grep --max-count=1 READY", codes::ONE_SHOT);
        yes("tail -F log | grep --max-count 1 READY", codes::ONE_SHOT);
        yes("tail -F log | grep -im1 READY", codes::ONE_SHOT);
        yes("tail -F log | grep -q READY && echo up", codes::ONE_SHOT);
        yes("tail -F log | sed -n '/READY/{p;q}'", codes::ONE_SHOT);
        yes("tail -F log | sed '/READY/q'", codes::ONE_SHOT);
        yes("tail -F log | awk '/READY/ {print; exit}'", codes::ONE_SHOT);
        yes(
            "tail -F log | grep --line-buffered x | head -n 5",
            codes::ONE_SHOT,
        );
    }

    #[test]
    fn one_shot_negative() {
        no("head -n 1 file", codes::ONE_SHOT);
        no("grep -m1 x file", codes::ONE_SHOT);
        no("echo \"$x\" | head -c 10", codes::ONE_SHOT);
        no(
            "while true; do tail -n0 -F log | grep -m1 ERROR; done",
            codes::ONE_SHOT,
        );
        no(
            "until tail -F log | grep -q READY; do sleep 1; done",
            codes::ONE_SHOT,
        );
        // A deliberate "wait until ready" step followed by the real watch.
        no(
            "tail -F log | grep -m1 -q READY; tail -F log | grep --line-buffered ERROR",
            codes::ONE_SHOT,
        );
        no(
            "tail -F log | grep -q READY && exec ./watch.sh",
            codes::ONE_SHOT,
        );
        no("tail -F log | sed -u 's/q/x/'", codes::ONE_SHOT);
        no("tail -F log | head -n -5", codes::ONE_SHOT);
        no("tail -F log | awk '{print; fflush()}'", codes::ONE_SHOT);
    }

    #[test]
    fn one_shot_is_not_also_unbuffered() {
        assert_eq!(codes_of("tail -F log | grep -m1 READY"), [codes::ONE_SHOT]);
    }

    #[test]
    fn sed_quit_detection() {
        for s in [
            "q", "5q", "/x/q", "/x/{p;q}", "$q", "s/a/b/;q", "/x/ q 3", "/x/Q",
        ] {
            assert!(sed_quits(s), "{s}");
        }
        for s in ["s/q/x/", "s/a/q/", "p", "/quit/p", "y/q/r/", "s/x/q/g"] {
            assert!(!sed_quits(s), "{s}");
        }
    }

    #[test]
    fn tail_f_rotation() {
        for cmd in [
            "tail -f /var/log/app.log",
            "tail -f -n0 app.log",
            "tail -n0 -f app.log",
            "tail -fn0 app.log",
            "tail -n 0 -f app.log | grep --line-buffered x",
            "tail --follow app.log",
            "tail --follow=descriptor app.log",
            "exec tail -f log",
        ] {
            yes(cmd, codes::TAIL_F_ROTATION);
        }
        for cmd in [
            "tail -F app.log",
            "tail -Fn0 app.log",
            "tail --follow=name --retry app.log",
            "tail -f --follow=name app.log",
            "tail -n 20 app.log",
            "cmd | tail -f",
            "grep -f patterns log",
        ] {
            no(cmd, codes::TAIL_F_ROTATION);
        }
        let l = &lint_command("tail -fn0 \"$LOG\"")[0];
        assert_eq!(l.span, 5..9);
        assert!(l.help.contains("`tail -Fn0 \"$LOG\"`"), "{}", l.help);
        let l = &lint_command("tail --follow app.log")[0];
        assert!(l.help.contains("`tail -F app.log`"), "{}", l.help);
    }

    #[test]
    fn success_only_filter() {
        for cmd in [
            "tail -F log | grep --line-buffered \"PASS\\|ok\\|success\\|done\\|ready\"",
            "tail -F log | grep --line-buffered -E 'Compiled successfully'",
            "tail -F log | grep --line-buffered -e ready -e listening",
            "tail -F log | grep --line-buffered -i '\\bdone\\b'",
            "./dev.sh | grep --line-buffered 'server started'",
            "while sleep 5; do curl -s localhost:8080/health | grep -o ok; done",
            "grep ready status.txt",
            "tail -F log | rg --line-buffered 'tests passed'",
        ] {
            yes(cmd, codes::SUCCESS_ONLY_FILTER);
        }
        for cmd in [
            "tail -F log | grep --line-buffered -E 'PASS|FAIL'",
            "tail -F log | grep --line-buffered -E 'ready|error'",
            "tail -F log | grep --line-buffered -E 'ok|panic'",
            "tail -F log | grep --line-buffered -E 'done|Traceback'",
            "tail -F log | grep --line-buffered -v ok",
            "tail -F log | grep --line-buffered 'user logged in'",
            "tail -F log | grep --line-buffered -f patterns.txt",
            "if curl -s url | grep -q ready; then echo up; fi",
            "x=$(curl -s url | grep -o ready); echo \"$x\"",
            "tail -F log | grep --line-buffered -c ready",
            "tail -F log | grep --line-buffered ready >> ready.log",
            "tail -F log | grep --line-buffered -E 'ok|exit code'",
        ] {
            no(cmd, codes::SUCCESS_ONLY_FILTER);
        }
    }

    #[test]
    fn mtime_trigger() {
        for cmd in [
            "while true; do m=$(stat -c %Y f); [ \"$m\" != \"$last\" ] && echo changed; last=$m; sleep 2; done",
            "stat -f %m file",
            "stat --format=%Y file",
            "stat -c '%y' file",
            "find . -newer /tmp/stamp -name '*.rs'",
            "find src -mmin -1",
            "while sleep 5; do ls -lt build/ | head -2; done",
            "while sleep 5; do ls -l out; done",
            "while :; do [ a -nt b ] && echo newer; sleep 1; done",
            "date -r file +%s",
            "python3 -c 'import os; print(os.path.getmtime(\"f\"))'",
        ] {
            yes(cmd, codes::MTIME_TRIGGER);
        }
        for cmd in [
            "ls -l out",
            "stat -c %s file",
            "find . -name '*.rs'",
            "date -r 1700000000",
            "inotifywait -m -e close_write src",
            "while sleep 5; do ls out; done",
        ] {
            no(cmd, codes::MTIME_TRIGGER);
        }
    }

    #[test]
    fn unquoted_plugin_path() {
        for cmd in [
            "${CLAUDE_PLUGIN_ROOT}/scripts/watch.sh",
            "bash $CLAUDE_PLUGIN_ROOT/scripts/watch.sh",
            "tail -F ${CLAUDE_PLUGIN_DATA}/log",
            "cd ${CLAUDE_PROJECT_DIR} && ./watch",
            "x=$(cat ${CLAUDE_PLUGIN_DATA}/state)",
            "\"$(cat ${CLAUDE_PLUGIN_DATA}/state)\"",
            "DIR=${CLAUDE_PLUGIN_ROOT} ./x",
        ] {
            yes(cmd, codes::UNQUOTED_PLUGIN_PATH);
        }
        for cmd in [
            "\"${CLAUDE_PLUGIN_ROOT}/scripts/watch.sh\"",
            "\"${CLAUDE_PLUGIN_ROOT}\"/scripts/watch.sh",
            "bash \"$CLAUDE_PLUGIN_ROOT/x.sh\" \"${CLAUDE_PLUGIN_DATA}\"",
            "'${CLAUDE_PLUGIN_ROOT}/x.sh'",
            "echo ${HOME}/x",
        ] {
            no(cmd, codes::UNQUOTED_PLUGIN_PATH);
        }
        let cmd = "bash ${CLAUDE_PLUGIN_ROOT}/scripts/watch.sh --fast";
        let l = &lint_command(cmd)[0];
        assert_eq!(&cmd[l.span.clone()], "${CLAUDE_PLUGIN_ROOT}");
        assert!(
            l.help
                .contains("`\"${CLAUDE_PLUGIN_ROOT}/scripts/watch.sh\"`"),
            "{}",
            l.help
        );
    }

    #[test]
    fn background_command() {
        for cmd in [
            "tail -F log &",
            "./watch.sh > out.log 2>&1 &",
            "nohup ./watch.sh &",
            "./watch.sh & disown",
            "( tail -F log | grep --line-buffered x & )",
            "{ ./a.sh; ./b.sh & }",
        ] {
            yes(cmd, codes::BACKGROUND_COMMAND);
        }
        for cmd in [
            "./a.sh & ./b.sh",
            "./a.sh & wait",
            "tail -F log && echo done",
            "echo 'a &'",
            "x=$(sleep 1 &)",
        ] {
            no(cmd, codes::BACKGROUND_COMMAND);
        }
        let cmd = "tail -F log &";
        let l = &lint_command(cmd)[0];
        assert_eq!(&cmd[l.span.clone()], "&");
    }

    #[test]
    fn option_parser() {
        let s = shell::parse("grep -im1 -e a --regexp=b --max-count 3 -- -x file");
        let shell::Command::Simple(c) = &s.items[0].and_or.pipelines[0].stages[0] else {
            panic!()
        };
        let args = getopt(
            &c.words[1..],
            &Spec::new("efm", &["regexp", "max-count"], &[]),
        );
        let rendered: Vec<String> = args
            .iter()
            .map(|a| match a {
                Arg::Opt { name, value, .. } => {
                    format!("{name}={}", value.clone().unwrap_or_default())
                }
                Arg::Operand(w) => format!("<{}>", w.text),
            })
            .collect();
        assert_eq!(
            rendered,
            [
                "i=",
                "m=1",
                "e=a",
                "regexp=b",
                "max-count=3",
                "<-x>",
                "<file>"
            ]
        );
    }

    #[test]
    fn wrappers_are_peeled() {
        let s = shell::parse(
            "FOO=1 env -u X BAR=2 nice -n 5 timeout -s KILL 10 stdbuf -oL /bin/grep x",
        );
        let shell::Command::Simple(c) = &s.items[0].and_or.pipelines[0].stages[0] else {
            panic!()
        };
        let inv = Invocation::of(c).unwrap();
        assert_eq!(inv.name, "grep");
        assert!(inv.stdbuf_line);
        assert_eq!(inv.env("FOO"), Some("1"));
        assert_eq!(inv.env("BAR"), Some("2"));
        assert_eq!(inv.args.len(), 1);
    }

    #[test]
    fn findings_are_sorted_and_deduplicated() {
        let cmd = "tail -f ${CLAUDE_PLUGIN_DATA}/log | grep ready &";
        let found = codes_of(cmd);
        assert_eq!(
            found,
            [
                codes::TAIL_F_ROTATION,
                codes::UNQUOTED_PLUGIN_PATH,
                codes::UNBUFFERED_FILTER,
                codes::SUCCESS_ONLY_FILTER,
                codes::BACKGROUND_COMMAND
            ]
        );
    }
}
