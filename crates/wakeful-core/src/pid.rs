//! `--pid`: watching a process wakeful did not start, until it exits
//! (docs/CONTRACT.md §3, "A process").
//!
//! A pid alone does not name a process for long: once the process exits,
//! the kernel may give its pid to another one. So a watched process is
//! named by its pid *and its start time*, read when the monitor starts and
//! kept in the monitor's source; a process at that pid with another start
//! time is another process, and the one watched has exited. This module is
//! the pure part: which pids may be watched, what an observation of the
//! process table means for the watched process ([`judge`]), the wait status
//! decoded ([`Status`]) and what the final event says ([`exit_text`]).

use std::time::Duration;

/// Longest command line kept for the texts, in characters.
pub const MAX_CMDLINE_CHARS: usize = 120;

/// How often the portable (`posix`) backend, which has no exit
/// notification, asks `kill(pid, 0)` whether the process is still there.
pub const POLL_EVERY: Duration = Duration::from_millis(500);

/// Every how many [`POLL_EVERY`] ticks the portable backend also reads the
/// process's start time and state (one `ps` run), to notice a zombie or a
/// pid given to another process: every 2 s.
pub const FULL_CHECK_EVERY: u64 = 4;

/// How long, after the watched process exited, the Linux backend waits for
/// its parent to collect it, so that the event can give its exit status
/// (the kernel keeps it for a pidfd once the process is reaped). A parent
/// that takes longer gives `status unknown`.
pub const REAP_WAIT: Duration = Duration::from_secs(1);

/// Why a pid cannot be watched. Each message says what was wrong and what
/// would be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PidError {
    /// Not a number.
    #[error("--pid (pid) `{0}` is not a process id: give the number `ps` shows for the process, e.g. --pid 4242")]
    NotANumber(String),
    /// Zero, negative, or larger than any pid.
    #[error("--pid (pid) must be a process id, a whole number from 1 to {max} (got {0})", max = i32::MAX)]
    OutOfRange(i64),
    /// Pid 1.
    #[error("pid 1 is the init process: it ends only with the system (or its container), and the daemon with it, so its exit could never be reported; give the pid of the process you are waiting for")]
    Init,
    /// The watcher's own process.
    #[error("pid {0} is the wakeful daemon itself: it cannot report its own exit; give the pid of the process you are waiting for")]
    Daemon(i32),
    /// No such process, or it has exited already.
    #[error("no process {pid}: {why}")]
    NoProcess {
        /// The pid given.
        pid: i32,
        /// Why not: not running, or already exited.
        why: String,
    },
    /// A thread id that is not a process id.
    #[error("{0} is the id of a thread, not of a process: give the pid of the process it belongs to (the Tgid line of /proc/{0}/status)")]
    Thread(i32),
    /// Another user's process whose start time cannot be read.
    #[error("process {0} belongs to another user and the process table hides it from this one (/proc mounted with hidepid): its start time cannot be read, so a later process given the same pid could not be told from it; it is not watched")]
    Hidden(i32),
    /// The system would not let it be watched.
    #[error("process {pid} cannot be watched: {why}")]
    Unwatchable {
        /// The pid given.
        pid: i32,
        /// What the system said.
        why: String,
    },
    /// A start time given with the pid that is not the process's.
    #[error("process {0} is not the process named: it started at another time (the one named has exited, and its pid was given to another process)")]
    Changed(i32),
}

/// Reads `--pid`'s value: a process id from 1 up (pid 1 is refused by
/// [`check_pid`]).
pub fn parse_pid(text: &str) -> Result<i32, PidError> {
    let n: i64 = text
        .trim()
        .parse()
        .map_err(|_| PidError::NotANumber(text.to_string()))?;
    check_number(n)
}

/// A number as a process id: from 1 to `i32::MAX`.
pub fn check_number(n: i64) -> Result<i32, PidError> {
    match i32::try_from(n) {
        Ok(pid) if pid > 0 => Ok(pid),
        _ => Err(PidError::OutOfRange(n)),
    }
}

/// Whether `pid` may be watched at all, before looking at the process
/// table: a process id, not 1 (init ends only with the system and the
/// daemon with it), and not `own`, the watching process itself (which
/// cannot see its own exit).
pub fn check_pid(pid: i32, own: Option<i32>) -> Result<(), PidError> {
    check_number(i64::from(pid))?;
    if pid == 1 {
        return Err(PidError::Init);
    }
    if own == Some(pid) {
        return Err(PidError::Daemon(pid));
    }
    Ok(())
}

/// What the process table shows at the watched pid now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// No process has this pid.
    Gone,
    /// A process has it.
    Process {
        /// Its start time (the platform backend's unit).
        start_time: u64,
        /// False for a zombie: it has exited, its parent has not collected
        /// it yet.
        live: bool,
    },
}

/// What an observation means for the watched process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It still runs.
    Alive,
    /// It has exited: no process has its pid, or it is a zombie.
    Exited,
    /// It has exited, and its pid was given to another process (another
    /// start time), which is not watched.
    Replaced,
}

impl Verdict {
    /// Whether the watched process has exited.
    pub fn exited(self) -> bool {
        self != Verdict::Alive
    }
}

/// What `seen` means for the process that started at `start_time`.
pub fn judge(start_time: u64, seen: Seen) -> Verdict {
    match seen {
        Seen::Gone => Verdict::Exited,
        Seen::Process { start_time: s, .. } if s != start_time => Verdict::Replaced,
        Seen::Process { live: false, .. } => Verdict::Exited,
        Seen::Process { live: true, .. } => Verdict::Alive,
    }
}

/// Whether the portable backend's poll tick `tick` (counted from 1) also
/// reads the start time and state ([`FULL_CHECK_EVERY`]).
pub fn full_check(tick: u64) -> bool {
    tick.is_multiple_of(FULL_CHECK_EVERY)
}

/// A command line as the texts show it: its arguments joined by spaces,
/// control characters as spaces, at most [`MAX_CMDLINE_CHARS`] characters
/// (cut with `…`); `None` when it is empty (a kernel thread, a zombie).
pub fn command_text(argv: &[String]) -> Option<String> {
    let joined = argv.join(" ");
    let clean: String = joined
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let clean = clean.trim();
    if clean.is_empty() {
        return None;
    }
    if clean.chars().count() <= MAX_CMDLINE_CHARS {
        return Some(clean.to_string());
    }
    let mut cut: String = clean.chars().take(MAX_CMDLINE_CHARS - 1).collect();
    cut.push('…');
    Some(cut)
}

/// An exit status, when it could be known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It exited with this code.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

impl Status {
    /// A wait status (`waitpid`'s encoding) decoded: the low 7 bits are the
    /// signal that killed the process (0: it exited), the next byte its
    /// exit code.
    pub fn from_wait_status(raw: i32) -> Status {
        match raw & 0x7f {
            0 => Status::Code((raw >> 8) & 0xff),
            signal => Status::Signal(signal),
        }
    }
}

/// What the final event of a pid monitor says after its description:
/// `process 4242 (`make`) exited with code 2`, `… was killed by signal 9`,
/// or `… exited, status unknown` (a process that is not the daemon's child
/// cannot be waited for); `while_down`: it was found gone when the daemon
/// started again.
pub fn exit_text(
    pid: i32,
    cmdline: Option<&str>,
    status: Option<Status>,
    while_down: bool,
) -> String {
    let who = match cmdline {
        Some(c) => format!("process {pid} (`{c}`)"),
        None => format!("process {pid}"),
    };
    let when = if while_down {
        " while the daemon was down"
    } else {
        ""
    };
    match status {
        Some(Status::Code(code)) => format!("{who} exited{when} with code {code}"),
        Some(Status::Signal(signal)) => format!("{who} was killed by signal {signal}{when}"),
        None => format!("{who} exited{when}, status unknown"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_start_time_is_the_same_process() {
        let alive = Seen::Process {
            start_time: 1000,
            live: true,
        };
        assert_eq!(judge(1000, alive), Verdict::Alive);
        assert!(!judge(1000, alive).exited());
    }

    #[test]
    fn another_start_time_is_another_process_and_ours_has_exited() {
        for live in [true, false] {
            let other = Seen::Process {
                start_time: 2000,
                live,
            };
            assert_eq!(judge(1000, other), Verdict::Replaced);
            assert!(judge(1000, other).exited());
        }
    }

    #[test]
    fn a_pid_that_is_gone_or_a_zombie_has_exited() {
        assert_eq!(judge(1000, Seen::Gone), Verdict::Exited);
        let zombie = Seen::Process {
            start_time: 1000,
            live: false,
        };
        assert_eq!(judge(1000, zombie), Verdict::Exited);
    }

    #[test]
    fn pids_are_positive_numbers_and_neither_init_nor_the_daemon() {
        assert_eq!(parse_pid("4242"), Ok(4242));
        assert_eq!(parse_pid(" 17 "), Ok(17));
        assert_eq!(parse_pid("0"), Err(PidError::OutOfRange(0)));
        assert_eq!(parse_pid("-5"), Err(PidError::OutOfRange(-5)));
        assert_eq!(
            parse_pid("4294967296"),
            Err(PidError::OutOfRange(4_294_967_296))
        );
        assert_eq!(parse_pid("abc"), Err(PidError::NotANumber("abc".into())));
        assert_eq!(parse_pid("12.5"), Err(PidError::NotANumber("12.5".into())));
        assert!(parse_pid("x")
            .unwrap_err()
            .to_string()
            .contains("--pid 4242"));
        assert_eq!(check_pid(1, None), Err(PidError::Init));
        assert_eq!(check_pid(77, Some(77)), Err(PidError::Daemon(77)));
        assert_eq!(check_pid(77, Some(78)), Ok(()));
        assert_eq!(check_pid(-1, None), Err(PidError::OutOfRange(-1)));
        assert_eq!(check_pid(0, None), Err(PidError::OutOfRange(0)));
    }

    #[test]
    fn the_portable_backend_reads_the_process_table_every_fourth_tick() {
        let full: Vec<u64> = (1..=12).filter(|t| full_check(*t)).collect();
        assert_eq!(full, [4, 8, 12]);
        assert_eq!(POLL_EVERY * FULL_CHECK_EVERY as u32, Duration::from_secs(2));
    }

    #[test]
    fn wait_statuses_decode_to_a_code_or_a_signal() {
        assert_eq!(Status::from_wait_status(0), Status::Code(0));
        assert_eq!(Status::from_wait_status(3 << 8), Status::Code(3));
        assert_eq!(Status::from_wait_status(255 << 8), Status::Code(255));
        assert_eq!(Status::from_wait_status(9), Status::Signal(9));
        // Killed by SIGSEGV with a core dump (0x80).
        assert_eq!(Status::from_wait_status(0x80 | 11), Status::Signal(11));
    }

    #[test]
    fn command_lines_are_one_clean_line_of_bounded_length() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            command_text(&argv(&["sleep", "1000"])),
            Some("sleep 1000".into())
        );
        assert_eq!(
            command_text(&argv(&["sh", "-c", "a\nb\u{1b}[31m"])),
            Some("sh -c a b [31m".into())
        );
        assert_eq!(command_text(&[]), None);
        assert_eq!(command_text(&argv(&["", " "])), None);
        let long = command_text(&argv(&[&"x".repeat(500)])).unwrap();
        assert_eq!(long.chars().count(), MAX_CMDLINE_CHARS);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn the_exit_text_says_the_status_or_that_it_is_unknown() {
        assert_eq!(
            exit_text(4242, Some("sleep 1000"), None, false),
            "process 4242 (`sleep 1000`) exited, status unknown"
        );
        assert_eq!(
            exit_text(4242, None, Some(Status::Code(2)), false),
            "process 4242 exited with code 2"
        );
        assert_eq!(
            exit_text(4242, Some("make"), Some(Status::Signal(9)), false),
            "process 4242 (`make`) was killed by signal 9"
        );
        assert_eq!(
            exit_text(4242, Some("make"), None, true),
            "process 4242 (`make`) exited while the daemon was down, status unknown"
        );
    }
}
