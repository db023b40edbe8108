//! Does the Claude Code process that runs a hook wait for its `asyncRewake`
//! hooks? It does in a single-shot print run (`claude -p`); it runs them in
//! the background in the interactive TUI and under the Agent SDKs.
//!
//! Claude Code (seen in 2.1.332, in its code and by running it) sends an
//! `asyncRewake` hook to the background only when the session is
//! interactive or reads its input as stream-json:
//!
//! - it calls a session *non-interactive* when its arguments, up to `--`,
//!   hold `-p`, `--print`, `--init-only` or an argument that starts with
//!   `--sdk-url`, **or when its stdout is not a terminal** (so
//!   `claude "…" > file` is a print run too);
//! - it reads *stream-json input* with `--input-format stream-json`, which
//!   both SDKs pass.
//!
//! In the remaining case, non-interactive without stream-json input, it
//! awaits every asyncRewake hook like a synchronous one: a SessionStart hook
//! holds back the first model request and a Stop hook the end of the turn
//! and the exit. A hook that waits for events (`wakeful hook rewake`) must
//! then return at once.
//!
//! The hook reads both inputs of that decision from the Claude Code
//! process: `/proc/<pid>/cmdline` and `/proc/<pid>/fd/1`. Claude Code sets
//! `CLAUDE_PID` to its own pid for every hook (it overwrites an inherited
//! value); without a usable one, the hook walks up its ancestors to the
//! first process that is Claude Code. The hook's own stdin, stdout and
//! environment cannot tell: its stdio are pipes in every mode, and
//! `CLAUDE_CODE_ENTRYPOINT` keeps an inherited value.

use std::io::IsTerminal;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

use crate::agent_process::{cmdline, nearest_ancestor, AgentProgram};

/// How a Claude Code process runs its `asyncRewake` hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The interactive TUI: in the background.
    Interactive,
    /// Not interactive, but reading its input as stream-json (the Agent
    /// SDKs, `-p --input-format stream-json`): in the background too.
    StreamInput,
    /// A single-shot print run: each one is awaited.
    Print,
}

impl Mode {
    /// Whether Claude Code waits for an `asyncRewake` hook to exit before
    /// it goes on.
    pub fn awaits_async_hooks(self) -> bool {
        self == Mode::Print
    }
}

/// The environment variable that overrides the detection: `print` or
/// `interactive`.
pub const MODE_ENV: &str = "WAKEFUL_CLAUDE_MODE";

/// The mode forced by [`MODE_ENV`]; `None` (detect) for anything else.
pub fn forced(value: Option<&str>) -> Option<Mode> {
    match value.map(str::trim) {
        Some("print") => Some(Mode::Print),
        Some("interactive") => Some(Mode::Interactive),
        _ => None,
    }
}

/// The mode of a Claude Code process started with `args` (its command line
/// without the program name) whose stdout is a terminal or not; the rule
/// in the module docs.
///
/// Claude Code's own scan skips the values of the options it knows
/// (`--model -p` is a model named `-p`); this one does not, on purpose: a
/// value that reads like `-p` is far-fetched, and a mistake this way costs
/// one rewake in such an interactive session, while a mistake the other
/// way (an option list copied from one version that a later version
/// changed, and a `-p` taken for a value) would make every print run hang.
pub fn mode<S: AsRef<str>>(args: &[S], stdout_is_terminal: bool) -> Mode {
    let mut print_flag = false;
    // Like Claude Code's option parser, the last `--input-format` wins.
    let mut input_format: Option<&str> = None;
    let mut args = args.iter().map(AsRef::as_ref).peekable();
    while let Some(arg) = args.next() {
        match arg {
            "--" => break,
            "-p" | "--print" | "--init-only" => print_flag = true,
            "--input-format" => input_format = args.peek().copied(),
            _ if arg.starts_with("--sdk-url") => print_flag = true,
            _ => {
                if let Some(value) = arg.strip_prefix("--input-format=") {
                    input_format = Some(value);
                }
            }
        }
    }
    if !print_flag && stdout_is_terminal {
        Mode::Interactive
    } else if input_format == Some("stream-json") {
        Mode::StreamInput
    } else {
        Mode::Print
    }
}

/// Claude Code (the npm package links `.bin/claude` to `claude.exe`).
pub const CLAUDE: AgentProgram = AgentProgram {
    names: &["claude", "claude.exe"],
    package: "/@anthropic-ai/claude-code/",
};

/// Whether the name a descriptor's link gives (`/proc/<pid>/fd/N` on
/// Linux) names a terminal.
pub fn is_terminal_path(target: &str) -> bool {
    target.starts_with("/dev/pts/") || target.starts_with("/dev/tty") || target == "/dev/console"
}

// ------------------------------------------------------------ IO

/// How the Claude Code process was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `$CLAUDE_PID`.
    ClaudePid,
    /// The first ancestor that is Claude Code.
    Ancestry,
}

/// The Claude Code process a hook runs under and its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Its pid.
    pub pid: u32,
    /// How it was found.
    pub via: Via,
    /// Whether it awaits async hooks.
    pub mode: Mode,
}

/// The Claude Code process of this hook (`claude_pid` is `$CLAUDE_PID`;
/// when it is missing or its process cannot be read, the ancestors are
/// searched) and its mode; `None` when there is none to be found.
pub fn detect(claude_pid: Option<&str>) -> Option<Found> {
    let from_env = claude_pid
        .and_then(|p| p.trim().parse::<u32>().ok())
        .filter(|&pid| pid > 0)
        .and_then(|pid| Some((pid, cmdline(pid)?)));
    let (pid, argv, via) = match from_env {
        Some((pid, argv)) => (pid, argv, Via::ClaudePid),
        None => {
            let (pid, argv) = claude_ancestor()?;
            (pid, argv, Via::Ancestry)
        }
    };
    // Unknown counts as a terminal: the mode then rests on the arguments,
    // and without a print flag the hook waits, as it always did.
    let tty = stdout_is_terminal(pid).unwrap_or(true);
    Some(Found {
        pid,
        via,
        mode: mode(argv.get(1..).unwrap_or_default(), tty),
    })
}

/// The pid of the Claude Code process of this hook or command:
/// `claude_pid` (`$CLAUDE_PID`) when its process is there, else the nearest
/// ancestor that is Claude Code.
pub fn claude_process(claude_pid: Option<&str>) -> Option<u32> {
    claude_pid
        .and_then(|p| p.trim().parse::<u32>().ok())
        .filter(|&pid| pid > 1 && cmdline(pid).is_some())
        .or_else(|| claude_ancestor().map(|(pid, _)| pid))
}

/// The nearest ancestor of this process that is Claude Code.
fn claude_ancestor() -> Option<(u32, Vec<String>)> {
    nearest_ancestor(&CLAUDE)
}

/// Whether a process's stdout is a terminal; `None` when that cannot be
/// read.
///
/// The question Claude Code asks is `isatty(1)` (Node's and Bun's
/// `process.stdout.isTTY`), and only the file itself can answer it: a
/// terminal's name depends on the driver and the mount namespace
/// (`/dev/pts/N`, `/dev/ttyN`, `/dev/ttyS0`, `/dev/console`, a pty of a
/// container's own devpts), and a character device need not be a terminal
/// (`/dev/null`). So: `stat` through the `/proc/<pid>/fd/1` link, which
/// opens nothing, rules out pipes, sockets and files (opening one could
/// block on a FIFO or a network file system, or join a pipe as a reader);
/// a character device is then opened, without becoming the controlling
/// terminal (`O_NOCTTY`) and without waiting for a modem line
/// (`O_NONBLOCK`), and asked with `isatty`. The name of the link is only
/// the fallback for a device that cannot be opened (another owner).
fn stdout_is_terminal(pid: u32) -> Option<bool> {
    let fd = wakeful_platform::fd::of_process(i32::try_from(pid).ok()?, 1)?;
    let by_name = || {
        std::fs::read_link(&fd)
            .ok()
            .map(|target| is_terminal_path(&target.to_string_lossy()))
    };
    match std::fs::metadata(&fd) {
        Ok(meta) if !meta.file_type().is_char_device() => Some(false),
        Ok(_) => match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
            .open(&fd)
        {
            Ok(file) => Some(file.is_terminal()),
            Err(_) => by_name(),
        },
        Err(_) => by_name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_process::is_agent;

    #[test]
    fn the_mode_from_arguments_and_stdout() {
        use Mode::*;
        // (arguments after the program name, stdout is a terminal, mode)
        let table: &[(&[&str], bool, Mode)] = &[
            // The TUI.
            (&[], true, Interactive),
            (
                &["--plugin-dir", "x", "--debug-file", "d.log"],
                true,
                Interactive,
            ),
            (&["hi"], true, Interactive),
            (&["--resume", "abc"], true, Interactive),
            // Print runs, whatever stdout is.
            (&["-p", "hi"], false, Print),
            (&["-p", "hi"], true, Print),
            (&["hi", "-p"], true, Print),
            (&["--print", "hi"], true, Print),
            (&["--init-only"], true, Print),
            (&["--sdk-url", "wss://x"], true, Print),
            (&["--sdk-url=wss://x"], true, Print),
            (&["--sdk-urlx"], true, Print),
            (&["-p", "hi", "--output-format", "json"], false, Print),
            (
                &["-p", "hi", "--output-format", "stream-json", "--verbose"],
                false,
                Print,
            ),
            (&["-p", "--resume", "sess", "text"], false, Print),
            // No print flag, stdout not a terminal (`claude hi > file`).
            (&["hi"], false, Print),
            (&[], false, Print),
            // After `--`, nothing is an option.
            (&["--", "-p"], true, Interactive),
            (&["hi", "--", "--print", "--sdk-url"], true, Interactive),
            (&["-p", "--", "x"], true, Print),
            (&["--", "-p"], false, Print),
            // Look-alikes are not the flags.
            (&["-pc"], true, Interactive),
            (&["--print=yes"], true, Interactive),
            (&["-P"], true, Interactive),
            (&["explain -p"], true, Interactive),
            // Stream-json input: in the background even with -p.
            (
                &[
                    "-p",
                    "--input-format",
                    "stream-json",
                    "--output-format",
                    "stream-json",
                ],
                false,
                StreamInput,
            ),
            (&["-p", "--input-format=stream-json"], true, StreamInput),
            // The Python SDK's command line: no -p, stdout a pipe.
            (
                &[
                    "--output-format",
                    "stream-json",
                    "--verbose",
                    "--system-prompt",
                    "",
                    "--input-format",
                    "stream-json",
                ],
                false,
                StreamInput,
            ),
            (&["--input-format", "stream-json"], true, Interactive),
            (&["-p", "--input-format", "text"], false, Print),
            (&["-p", "--input-format"], false, Print),
            (&["-p", "--output-format", "stream-json"], false, Print),
            (
                &[
                    "-p",
                    "--input-format",
                    "stream-json",
                    "--input-format",
                    "text",
                ],
                false,
                Print,
            ),
            (&["-p", "--", "--input-format", "stream-json"], false, Print),
        ];
        for (args, tty, want) in table {
            assert_eq!(mode(args, *tty), *want, "{args:?}, tty {tty}");
        }
    }

    #[test]
    fn only_print_runs_await_async_hooks() {
        assert!(Mode::Print.awaits_async_hooks());
        assert!(!Mode::Interactive.awaits_async_hooks());
        assert!(!Mode::StreamInput.awaits_async_hooks());
    }

    #[test]
    fn the_override() {
        assert_eq!(forced(Some("print")), Some(Mode::Print));
        assert_eq!(forced(Some(" interactive\n")), Some(Mode::Interactive));
        assert_eq!(forced(Some("")), None);
        assert_eq!(forced(Some("auto")), None);
        assert_eq!(forced(Some("PRINT")), None);
        assert_eq!(forced(None), None);
    }

    #[test]
    fn which_processes_are_claude_code() {
        let none: &[&str] = &[];
        let native = "/home/u/.local/share/claude/versions/2.1.332";
        let table: &[(Option<&str>, &[&str], bool)] = &[
            (
                Some("/x/node_modules/@anthropic-ai/claude-code/bin/claude.exe"),
                &["/x/node_modules/.bin/claude", "-p", "hi"],
                true,
            ),
            (
                Some("/x/bin/claude.exe (deleted)"),
                &["/x/bin/claude"],
                true,
            ),
            (Some(native), &["claude", "--resume"], true),
            (None, &["claude"], true),
            (None, &["/usr/local/bin/claude", "-p"], true),
            (
                Some("/usr/bin/node"),
                &[
                    "node",
                    "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js",
                    "-p",
                ],
                true,
            ),
            (
                Some("/usr/bin/node"),
                &["node", "/usr/local/bin/claude"],
                true,
            ),
            (Some("/root/.bun/bin/bun"), &["bun", "/x/bin/claude"], true),
            (
                Some("/usr/bin/node"),
                &["node", "/srv/app.js", "claude"],
                false,
            ),
            (
                Some("/usr/bin/bash"),
                &["bash", "-c", "claude -p hi"],
                false,
            ),
            (
                Some("/usr/bin/dash"),
                &["sh", "-c", "exec x", "claude"],
                false,
            ),
            (Some("/usr/bin/claudette"), &["claudette"], false),
            (None, &["/opt/claude/bin/wakeful", "hook", "rewake"], false),
            (None, none, false),
        ];
        for (exe, argv, want) in table {
            assert_eq!(is_agent(&CLAUDE, *exe, argv), *want, "{exe:?} {argv:?}");
        }
    }

    #[test]
    fn proc_texts() {
        for t in ["/dev/pts/3", "/dev/tty1", "/dev/ttyS0", "/dev/console"] {
            assert!(is_terminal_path(t), "{t}");
        }
        for t in [
            "pipe:[1234]",
            "socket:[9]",
            "/dev/null",
            "/tmp/out",
            "/tmp/dev/pts/1",
        ] {
            assert!(!is_terminal_path(t), "{t}");
        }
    }

    #[test]
    fn reads_a_live_process() {
        // A child with `-p` in its arguments and a pipe as stdout.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read _", "claude", "-p", "hi"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        // Until it has exec'd, the child shows this test's command line.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while cmdline(pid).is_none_or(|argv| argv[0] != "sh") {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never ran sh"
            );
            std::thread::yield_now();
        }
        assert_eq!(stdout_is_terminal(pid), Some(false));
        let found = detect(Some(&pid.to_string())).unwrap();
        assert_eq!(
            found,
            Found {
                pid,
                via: Via::ClaudePid,
                mode: Mode::Print
            }
        );
        drop(child.stdin.take());
        child.wait().unwrap();
        // Gone: the pid no longer says anything; the ancestors decide.
        let again = detect(Some(&pid.to_string()));
        assert!(again.is_none_or(|f| f.via == Via::Ancestry), "{again:?}");
    }
}
