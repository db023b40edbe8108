//! `wakeful export --format asciicast`: one monitor's output lines as an
//! asciicast v2 recording (`asciinema play FILE`), with the recorded timing.
//!
//! The header is `{"version": 2, "width", "height", "timestamp", "title",
//! "env"}`; then one `[seconds, "o", data]` line per `lines` event, at the
//! event's time after the monitor's first event, its lines ending in
//! `\r\n`. A monitor without `lines` events (`--until exit`) plays the
//! lines of its final event at that event's time. Colours (SGR sequences)
//! are kept; every other control character and escape sequence is removed,
//! so that playing a recording cannot act on the terminal beyond colour.

use std::io::Write;

use serde_json::json;
use wakeful_core::export::Export;
use wakeful_core::text::sanitize_for_model;
use wakeful_core::{Event, EventBody};

use crate::{exit, Failure};

/// Narrowest and widest terminal a recording asks for.
const WIDTH: (usize, usize) = (80, 250);
/// Rows of the recorded terminal.
const HEIGHT: usize = 24;

/// The first line, in the order the format's documentation gives.
#[derive(serde::Serialize)]
struct Header {
    version: u32,
    width: usize,
    height: usize,
    timestamp: i64,
    title: String,
    env: Env,
}

#[derive(serde::Serialize)]
struct Env {
    #[serde(rename = "TERM")]
    term: &'static str,
    #[serde(rename = "SHELL")]
    shell: &'static str,
}

/// The monitor an asciicast records: the one exported, else the only one.
fn target(x: &Export) -> Result<&str, Failure> {
    if let Some(id) = &x.header.monitor {
        return Ok(id);
    }
    match x.monitor_ids().as_slice() {
        [one] => Ok(one),
        [] => Err(Failure::new(
            exit::USAGE,
            "no events to record; `wakeful list` shows the session's monitors",
        )),
        many => Err(Failure::new(
            exit::USAGE,
            format!(
                "an asciicast records one monitor's output and the session has {} ({}); give --monitor ID",
                many.len(),
                many.join(", ")
            ),
        )),
    }
}

/// `line` for a terminal: SGR colour sequences kept, everything else that
/// could act on the terminal removed (see the module docs).
pub fn keep_colours(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut plain_from = 0;
    let mut i = 0;
    let bytes = line.as_bytes();
    while i + 1 < bytes.len() {
        if bytes[i] == 0x1b && bytes[i + 1] == b'[' {
            let params = bytes[i + 2..]
                .iter()
                .take_while(|b| b.is_ascii_digit() || **b == b';' || **b == b':')
                .count();
            let end = i + 2 + params;
            if bytes.get(end) == Some(&b'm') {
                out.push_str(&sanitize_for_model(&line[plain_from..i]));
                out.push_str(&line[i..=end]);
                i = end + 1;
                plain_from = i;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&sanitize_for_model(&line[plain_from..]));
    out.replace('\n', "\r\n")
}

/// Writes the recording of the exported monitor.
pub fn write(out: &mut impl Write, x: &Export) -> Result<(), Failure> {
    let id = target(x)?;
    let events: Vec<&Event> = x.events.iter().filter(|e| e.monitor_id == id).collect();
    let Some(first) = events.first() else {
        return Err(Failure::new(
            exit::USAGE,
            format!("monitor {id} has no events to record"),
        ));
    };
    let t0 = first.ts;
    let mut frames: Vec<(f64, Vec<&String>)> = Vec::new();
    for e in &events {
        if let EventBody::MonitorEvent { lines, .. } = &e.body {
            let at = (e.ts - t0).num_milliseconds().max(0) as f64 / 1000.0;
            frames.push((at, lines.iter().collect()));
        }
    }
    if frames.is_empty() {
        if let Some(last) = events.last() {
            if let EventBody::MonitorStopped { last_lines, .. }
            | EventBody::MonitorFailed { last_lines, .. } = &last.body
            {
                let at = (last.ts - t0).num_milliseconds().max(0) as f64 / 1000.0;
                frames.push((at, last_lines.iter().collect()));
            }
        }
    }
    let width = frames
        .iter()
        .flat_map(|(_, lines)| lines.iter())
        .map(|l| sanitize_for_model(l).chars().count())
        .max()
        .unwrap_or(0)
        .clamp(WIDTH.0, WIDTH.1);
    let monitor = x.monitors.iter().find(|m| m.id == id);
    let title = match monitor {
        Some(m) => format!("{} ({id})", m.description),
        None => id.to_string(),
    };
    let header = Header {
        version: 2,
        width,
        height: HEIGHT,
        timestamp: t0.timestamp(),
        title: sanitize_for_model(&title).replace('\n', " "),
        env: Env {
            term: "xterm-256color",
            shell: "/bin/sh",
        },
    };
    let header = serde_json::to_string(&header)
        .map_err(|e| Failure::new(exit::FAILURE, format!("cannot encode the recording: {e}")))?;
    writeln!(out, "{header}")?;
    for (at, lines) in frames {
        let mut data = String::new();
        for l in lines {
            data.push_str(&keep_colours(l));
            data.push_str("\r\n");
        }
        writeln!(
            out,
            "{}",
            json!([(at * 1000.0).round() / 1000.0, "o", data])
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_stay_other_escapes_go() {
        assert_eq!(
            keep_colours("\u{1b}[31merror\u{1b}[0m: x"),
            "\u{1b}[31merror\u{1b}[0m: x"
        );
        assert_eq!(keep_colours("a\u{1b}]0;pwned\u{7}b\u{1b}[2Jc\rd"), "abcd");
        assert_eq!(
            keep_colours("\u{1b}[1;38:5:208mhot"),
            "\u{1b}[1;38:5:208mhot"
        );
        assert_eq!(keep_colours("x\u{2028}y"), "x\r\ny");
        assert_eq!(keep_colours("trailing \u{1b}["), "trailing ");
    }
}
