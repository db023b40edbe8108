//! How events look on a terminal or to a script, and the JSON printed
//! for `--json`.

use std::io::Write;

use wakeful_core::present::{self, sanitize_for_model};
use wakeful_core::{Event, MonitorStopReason};

use crate::{exit, Failure};

/// A table cell from user input: sanitized, newlines and tabs as spaces.
pub fn cell(text: &str) -> String {
    sanitize_for_model(text).replace(['\n', '\t'], " ")
}

/// Prints one event for `watch` (see [`present::watch_lines`]).
pub fn watch_plain(out: &mut impl Write, e: &Event) -> std::io::Result<()> {
    for line in present::watch_lines(e) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// How a `watch` ended.
#[derive(Debug, Clone, Copy)]
pub enum WatchEnd<'a> {
    /// The monitor stopped (its `stopped` event came, or the daemon went
    /// away: `daemon_stopped`).
    Stopped(&'a MonitorStopReason),
    /// The monitor's source failed (its `failed` event came).
    Failed,
    /// The watch got SIGINT (Ctrl-C).
    Interrupted,
    /// The watch got SIGTERM.
    Terminated,
    /// The reader of the watch's stdout went away.
    StdoutClosed,
}

/// `watch`'s exit code (documented in `wakeful watch --help`, README.md and
/// docs/CONTRACT.md §12): the command's own code when it exited, 128+N when
/// it was killed by signal N, 124 on `timeout`/`idle_timeout`, 143 when the
/// monitor was stopped (a user or agent, its session ending, the daemon
/// stopping) or the watch got SIGTERM, 130 on SIGINT, 141 on a closed
/// stdout, 1 when the source failed, a WebSocket closed with a code other
/// than 1000/1001 or sent too large a frame; 0 when `until` was met or
/// `max_events` reached.
pub fn watch_exit_code(end: WatchEnd<'_>) -> u8 {
    let reason = match end {
        WatchEnd::Interrupted => return exit::INTERRUPTED,
        WatchEnd::Terminated => return exit::TERMINATED,
        WatchEnd::StdoutClosed => return exit::CLOSED_STDOUT,
        WatchEnd::Failed => return exit::FAILURE,
        WatchEnd::Stopped(reason) => reason,
    };
    match reason {
        MonitorStopReason::ExitCode { code } => u8::try_from(*code).unwrap_or(exit::FAILURE),
        MonitorStopReason::Signal { signal } => signal
            .checked_add(128)
            .and_then(|c| u8::try_from(c).ok())
            .unwrap_or(exit::FAILURE),
        MonitorStopReason::Timeout | MonitorStopReason::IdleTimeout => exit::TIMEOUT,
        MonitorStopReason::UserStopped
        | MonitorStopReason::SessionEnded
        | MonitorStopReason::DaemonStopped => exit::TERMINATED,
        MonitorStopReason::Until
        | MonitorStopReason::MaxEvents
        | MonitorStopReason::Fired { .. } => 0,
        // A watched process (`--pid`): as a command, when its status is
        // known; 0 when it is not.
        MonitorStopReason::Exited(e) => match (e.code, e.signal) {
            (Some(code), _) => u8::try_from(code).unwrap_or(exit::FAILURE),
            (None, Some(signal)) => signal
                .checked_add(128)
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(exit::FAILURE),
            (None, None) => 0,
        },
        MonitorStopReason::WsClosed { code: 1000 | 1001 } => 0,
        MonitorStopReason::WsClosed { .. }
        | MonitorStopReason::WsFrameTooLarge
        | MonitorStopReason::Failed { .. } => exit::FAILURE,
    }
}

/// What `list` says after a monitor's description about what it watches,
/// where the description does not say it: a running timer's time left, the
/// pid a `--pid` monitor watches (` (pid 4242)`, unless the description is
/// the default `pid 4242`).
fn source_note(m: &wakeful_core::MonitorInfo) -> String {
    match &m.source {
        wakeful_core::Source::Pid { pid, .. } => {
            if m.description == m.source.default_description() {
                String::new()
            } else {
                format!(" (pid {pid})")
            }
        }
        _ => crate::timer_args::time_left(m),
    }
}

/// A table of monitors for `list`.
pub fn monitor_table(
    out: &mut impl Write,
    list: &[wakeful_core::MonitorInfo],
) -> std::io::Result<()> {
    table(out, list.iter().map(|m| (None, m)), false)
}

/// The monitor table with a HOST column, for `list --all-hosts`.
pub fn host_monitor_table(
    out: &mut impl Write,
    list: &[wakeful_protocol::HostMonitor],
) -> std::io::Result<()> {
    table(
        out,
        list.iter().map(|m| (Some(m.host.as_str()), &m.monitor)),
        true,
    )
}

fn table<'a>(
    out: &mut impl Write,
    rows: impl Iterator<Item = (Option<&'a str>, &'a wakeful_core::MonitorInfo)>,
    hosts: bool,
) -> std::io::Result<()> {
    let host_cell = |h: Option<&str>| {
        if hosts {
            let h: String = cell(h.unwrap_or("")).chars().take(16).collect();
            format!("{h:<16} ")
        } else {
            String::new()
        }
    };
    writeln!(
        out,
        "{}{:<15} {:<8} {:<14} {:>6} {:>8} {:>10}  DESCRIPTION",
        if hosts {
            format!("{:<16} ", "HOST")
        } else {
            String::new()
        },
        "ID",
        "STATE",
        "SESSION",
        "EVENTS",
        "LINES",
        "SUPPRESSED"
    )?;
    for (host, m) in rows {
        let state = state_word(m.state, m.stop_reason.as_ref());
        let session: String = cell(&m.session).chars().take(14).collect();
        writeln!(
            out,
            "{}{:<15} {:<8} {:<14} {:>6} {:>8} {:>10}  {}",
            host_cell(host),
            cell(&m.id),
            state,
            session,
            m.events,
            m.lines,
            m.suppressed_lines,
            cell(&format!("{}{}", m.description, source_note(m)))
        )?;
    }
    Ok(())
}

/// `cluster status`: the link's lines, then a row per host.
pub fn cluster_status(
    out: &mut impl Write,
    s: &wakeful_protocol::ClusterStatus,
) -> std::io::Result<()> {
    link_lines(out, &s.link)?;
    writeln!(
        out,
        "{:<16} {:<6} {:>12} {:>10} {:>8} {:>8}  REMOTE",
        "HOST", "ALIVE", "HEARTBEAT", "TO SHIP", "LAG", "RUNNING"
    )?;
    for h in &s.hosts {
        writeln!(
            out,
            "{:<16} {:<6} {:>10}ms {:>10} {:>8} {:>8}  {}",
            cell(&h.host),
            if h.alive { "yes" } else { "no" },
            h.age_ms,
            h.waiting_to_ship,
            h.import_lag.map_or("?".to_string(), |l| l.to_string()),
            h.monitors_running,
            if h.accept_remote {
                "accepted"
            } else {
                "refused"
            }
        )?;
    }
    Ok(())
}

/// The cluster link's lines of `status` and `cluster status`.
pub fn link_lines(out: &mut impl Write, l: &wakeful_protocol::LinkStatus) -> std::io::Result<()> {
    writeln!(
        out,
        "cluster:          host {} · link {} ({})",
        cell(&l.host),
        l.link,
        cell(&l.url)
    )?;
    if let Some(reason) = &l.down_reason {
        writeln!(out, "link down:        {}", cell(reason))?;
    }
    writeln!(
        out,
        "to ship:          {} event(s) waiting (shipped up to seq {}; {} shipped since start)",
        l.waiting_to_ship, l.shipped_seq, l.shipped
    )?;
    writeln!(
        out,
        "import lag:       {} ({} imported since start, {} passed over, {} rejected)",
        l.import_lag
            .map_or("unknown yet".to_string(), |n| format!("{n} event(s)")),
        l.imported,
        l.import_skipped,
        l.import_rejected
    )?;
    if l.publish_failures > 0 || l.reordered > 0 {
        writeln!(
            out,
            "link trouble:     {} failed publication(s), {} event(s) out of order{}",
            l.publish_failures,
            l.reordered,
            l.last_error
                .as_deref()
                .map(|e| format!("; last: {}", cell(e)))
                .unwrap_or_default()
        )?;
    }
    Ok(())
}

fn state_word(
    state: wakeful_core::MonitorState,
    reason: Option<&wakeful_core::MonitorStopReason>,
) -> String {
    match (state, reason) {
        (wakeful_core::MonitorState::Running, _) => "running".to_string(),
        (_, Some(r)) => r.kind().to_string(),
        _ => "ended".to_string(),
    }
}

/// A table of terminals for `terminal list`.
pub fn terminal_table(
    out: &mut impl Write,
    list: &[wakeful_core::terminal::TerminalInfo],
) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<15} {:<8} {:<14} {:>8}  COMMAND",
        "ID", "STATE", "SESSION", "MONITORS"
    )?;
    for t in list {
        let session: String = cell(&t.session).chars().take(14).collect();
        writeln!(
            out,
            "{:<15} {:<8} {:<14} {:>8}  {}",
            cell(&t.id),
            state_word(t.state, t.exit.as_ref()),
            session,
            t.monitors,
            cell(&t.command)
        )?;
    }
    Ok(())
}

/// A table of consumers for `consumers`.
pub fn consumer_table(
    out: &mut impl Write,
    list: &[wakeful_protocol::ConsumerInfo],
) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<14} {:<12} {:>10} {:>8} {:>7}",
        "SESSION", "CONSUMER", "ACKED", "UNACKED", "WAITERS"
    )?;
    for c in list {
        let session: String = cell(&c.session).chars().take(14).collect();
        let consumer: String = cell(&c.consumer).chars().take(12).collect();
        writeln!(
            out,
            "{:<14} {:<12} {:>10} {:>8} {:>7}",
            session, consumer, c.acked_seq, c.unacked, c.waiters
        )?;
    }
    Ok(())
}

/// Prints `v` as one line of JSON.
pub fn print_json(v: &impl serde::Serialize) -> Result<(), Failure> {
    let s = serde_json::to_string(v).map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?;
    Ok(outln!("{s}")?)
}

/// Prints a reply as JSON, or as `human` says; the command's exit code (0).
pub fn show<T: serde::Serialize>(
    v: &T,
    json: bool,
    human: impl FnOnce(&T) -> std::io::Result<()>,
) -> Result<u8, Failure> {
    if json {
        print_json(v)?;
    } else {
        human(v)?;
    }
    Ok(0)
}

/// Prints a list as JSON, or `empty` when it has nothing, or its table.
/// True when a table was printed.
pub fn print_list<T: serde::Serialize>(
    list: &[T],
    json: bool,
    empty: &str,
    table: impl FnOnce(&mut std::io::StdoutLock<'static>, &[T]) -> std::io::Result<()>,
) -> Result<bool, Failure> {
    if json {
        print_json(&list)?;
        return Ok(false);
    }
    if list.is_empty() {
        outln!("{empty}")?;
        return Ok(false);
    }
    table(&mut std::io::stdout().lock(), list)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_exit_codes() {
        use MonitorStopReason as R;
        let exited = |code, signal| {
            R::Exited(Box::new(wakeful_core::ProcessExit {
                pid: 4242,
                cmdline: None,
                code,
                signal,
                while_down: false,
            }))
        };
        let table: Vec<(MonitorStopReason, u8)> = vec![
            (R::ExitCode { code: 0 }, 0),
            (R::ExitCode { code: 3 }, 3),
            (R::ExitCode { code: 255 }, 255),
            (R::ExitCode { code: -1 }, 1),
            (R::Signal { signal: 9 }, 137),
            (R::Signal { signal: 15 }, 143),
            (R::Timeout, 124),
            (R::IdleTimeout, 124),
            (R::UserStopped, 143),
            (R::SessionEnded, 143),
            (R::DaemonStopped, 143),
            (R::Until, 0),
            (R::MaxEvents, 0),
            (R::WsClosed { code: 1000 }, 0),
            (R::WsClosed { code: 1001 }, 0),
            (R::WsClosed { code: 1005 }, 1),
            (R::WsClosed { code: 1011 }, 1),
            (R::WsFrameTooLarge, 1),
            (
                R::Fired {
                    due: chrono::Utc::now(),
                    late_ms: 0,
                },
                0,
            ),
            (exited(None, None), 0),
            (exited(Some(3), None), 3),
            (exited(None, Some(9)), 137),
        ];
        for (reason, code) in &table {
            assert_eq!(
                watch_exit_code(WatchEnd::Stopped(reason)),
                *code,
                "{reason:?}"
            );
        }
        assert_eq!(watch_exit_code(WatchEnd::Failed), 1);
        assert_eq!(watch_exit_code(WatchEnd::Interrupted), 130);
        assert_eq!(watch_exit_code(WatchEnd::Terminated), 143);
        assert_eq!(watch_exit_code(WatchEnd::StdoutClosed), 141);
    }

    #[test]
    fn plain_views_hold_no_control_and_one_line_per_item() {
        let hostile = "a\u{1b}]0;pwned\u{7}b\u{1b}[2Jc\rd\0e\u{7f}f\u{85}g\u{2028}h";
        assert_eq!(present::one_line(hostile), "abcdefg\\nh");
        assert_eq!(cell("two\nlines\tand\u{1b}[31m red"), "two lines and red");
    }
}
