//! How events look on a terminal or to a script.

use std::io::Write;

use wakeful_core::{Event, EventBody, MonitorStopReason};

/// Prints one event for `watch`: the lines of a `lines` event as they are
/// (so each output line is one line of the monitored command, which is what
/// a Claude Code Monitor wants), every other event as `[wakeful] <text>`.
pub fn watch_plain(out: &mut impl Write, e: &Event) -> std::io::Result<()> {
    match &e.body {
        EventBody::MonitorEvent { lines, .. } => {
            for l in lines {
                writeln!(out, "{l}")?;
            }
        }
        _ => {
            for (i, l) in e.text.lines().enumerate() {
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

/// `<seq> <monitor-id> <text>`, one line (newlines in the text escaped as
/// `\n`), for `events` and `wait`.
pub fn event_line(out: &mut impl Write, e: &Event) -> std::io::Result<()> {
    writeln!(
        out,
        "{} {} {}",
        e.seq,
        e.monitor_id,
        e.text.replace('\n', "\\n")
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
        let session: String = m.session.chars().take(14).collect();
        writeln!(
            out,
            "{:<15} {:<8} {:<14} {:>6} {:>8} {:>10}  {}",
            m.id, state, session, m.events, m.lines, m.suppressed_lines, m.description
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
        let session: String = t.session.chars().take(14).collect();
        writeln!(
            out,
            "{:<15} {:<8} {:<14} {:>8}  {}",
            t.id,
            state_word(t.state, t.exit.as_ref()),
            session,
            t.monitors,
            t.command
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
        let session: String = c.session.chars().take(14).collect();
        let consumer: String = c.consumer.chars().take(12).collect();
        writeln!(
            out,
            "{:<14} {:<12} {:>10} {:>8} {:>7}",
            session, consumer, c.acked_seq, c.unacked, c.waiters
        )?;
    }
    Ok(())
}
