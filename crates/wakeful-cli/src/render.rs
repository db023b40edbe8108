//! How events look on a terminal or to a script.

use std::io::Write;

use wakeful_core::text::sanitize_for_model;
use wakeful_core::{Event, EventBody, MonitorStopReason};

/// `text` as one line that cannot act on a terminal: sanitized (no control
/// characters or escape sequences; see [`sanitize_for_model`]), with any
/// newline in it written as `\n`.
pub fn plain_line(text: &str) -> String {
    sanitize_for_model(text).replace('\n', "\\n")
}

/// A table cell from user input: sanitized, newlines and tabs as spaces.
fn cell(text: &str) -> String {
    sanitize_for_model(text).replace(['\n', '\t'], " ")
}

/// Prints one event for `watch`: each line of a `lines` event on a line of
/// its own (so each output line is one line of the monitored command, which
/// is what a Claude Code Monitor wants), every other event as
/// `[wakeful] <text>`; all of it sanitized.
pub fn watch_plain(out: &mut impl Write, e: &Event) -> std::io::Result<()> {
    match &e.body {
        EventBody::MonitorEvent { lines, .. } => {
            for l in lines {
                writeln!(out, "{}", plain_line(l))?;
            }
        }
        _ => {
            for (i, l) in sanitize_for_model(&e.text).lines().enumerate() {
                if i == 0 {
                    writeln!(out, "[wakeful] {l}")?;
                } else {
                    writeln!(out, "[wakeful]   {l}")?;
                }
            }
        }
    }
    Ok(())
}

/// `<seq> <monitor-id> <text>`, one line (the text sanitized, newlines in
/// it written as `\n`), for `events` and `wait`.
pub fn event_line(out: &mut impl Write, e: &Event) -> std::io::Result<()> {
    writeln!(
        out,
        "{} {} {}",
        e.seq,
        plain_line(&e.monitor_id),
        plain_line(&e.text)
    )
}

/// One JSON object a line (SPEC §7).
pub fn json_line(out: &mut impl Write, e: &Event) -> std::io::Result<()> {
    let s = serde_json::to_string(e).map_err(std::io::Error::other)?;
    writeln!(out, "{s}")
}

/// `watch`'s exit code for a monitor's final event: the command's code for a
/// non-zero exit, 128+N for signal N, 1 when it failed, else 0.
pub fn watch_exit_code(e: &Event) -> u8 {
    match &e.body {
        EventBody::MonitorFailed { .. } => 1,
        EventBody::MonitorStopped {
            reason: MonitorStopReason::ExitCode { code },
            ..
        } => u8::try_from(*code).unwrap_or(1),
        EventBody::MonitorStopped {
            reason: MonitorStopReason::Signal { signal },
            ..
        } => u8::try_from(128 + *signal).unwrap_or(1),
        _ => 0,
    }
}

/// A table of monitors for `list`.
pub fn monitor_table(
    out: &mut impl Write,
    list: &[wakeful_core::MonitorInfo],
) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<15} {:<8} {:<14} {:>6} {:>8} {:>10}  DESCRIPTION",
        "ID", "STATE", "SESSION", "EVENTS", "LINES", "SUPPRESSED"
    )?;
    for m in list {
        let state = state_word(m.state, m.stop_reason.as_ref());
        let session: String = cell(&m.session).chars().take(14).collect();
        writeln!(
            out,
            "{:<15} {:<8} {:<14} {:>6} {:>8} {:>10}  {}",
            cell(&m.id),
            state,
            session,
            m.events,
            m.lines,
            m.suppressed_lines,
            cell(&m.description)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_views_hold_no_control_and_one_line_per_item() {
        let hostile = "a\u{1b}]0;pwned\u{7}b\u{1b}[2Jc\rd\0e\u{7f}f\u{85}g\u{2028}h";
        assert_eq!(plain_line(hostile), "abcdefg\\nh");
        assert_eq!(cell("two\nlines\tand\u{1b}[31m red"), "two lines and red");
    }
}
