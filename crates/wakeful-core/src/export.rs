//! The `wakeful export --format jsonl` file: a monitor's life (or a
//! session's) that can be kept, shared, imported into another state
//! directory (`wakeful import`) and re-run (`wakeful replay`).
//!
//! One JSON object a line:
//!
//! 1. a header, [`ExportHeader`]: `{"wakeful_export": 1, "wakeful_version",
//!    "host", "exported_at", "session"?, "monitor"?, "since"?}`;
//! 2. the events, in seq order, exactly as `wakeful events --json` prints
//!    them;
//! 3. one `{"monitor": {...}}` line per monitor those events belong to, the
//!    monitor as `wakeful list --json` shows it;
//! 4. one `{"prune": {...}}` line per prune of the exporting store in the
//!    exported time ([`PruneRecordLine`]): what was removed before the
//!    export, so that a reader knows the log it holds has been pruned.
//!    Import passes over them.
//!
//! An event's identity across state directories is its *origin*,
//! `<host>/<seq>` ([`origin`]): the host that exported it and its seq
//! there. Importing keeps one event per origin, so importing a file twice
//! stores nothing twice.
//!
//! Parsing is pure: [`Export::parse`] takes the file's text, [`Export::read`]
//! a reader, line by line, never holding more than one line of at most
//! [`MAX_LINE_BYTES`]. A file that is not one wakeful wrote is refused
//! whole, naming the line: a line longer than any wakeful writes, a file
//! cut in the middle of a line (no final newline), an event whose seq is
//! not above the one before it (a duplicate, or not in seq order), a seq
//! that is negative or 0, a host, monitor id or session that wakeful
//! would not write.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{Event, MonitorInfo};

/// The version of the format this build writes and reads.
pub const EXPORT_FORMAT_VERSION: u32 = 1;

/// The longest line a reader takes: far more than wakeful writes (an event
/// holds at most 64 KiB of text in its `lines` and again in `text`, which
/// JSON escaping can make six times as long).
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// The longest host name accepted (a cluster's `[cluster] host`, an
/// export's `host`).
pub const MAX_HOST_LEN: usize = 128;

/// The longest monitor id an export may hold.
pub const MAX_ID_LEN: usize = 128;

/// What an event imported from a file carries after its host's name, so
/// that it never reads as an event the cluster link brought from that host
/// (a host name holds no spaces: no host is called this).
pub const IMPORTED_SUFFIX: &str = " (imported)";

/// Why a host name cannot be used (see [`check_host`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Empty, or longer than [`MAX_HOST_LEN`].
    #[error("host must be 1–{MAX_HOST_LEN} bytes long, not {len}")]
    Length {
        /// Its length in bytes.
        len: usize,
    },
    /// It holds a space, a control character or `/`.
    #[error("host {host:?} holds {c:?}: a host name has no spaces, control characters or `/` (origins are `<host>/<seq>`)")]
    Char {
        /// The host name.
        host: String,
        /// The first character it may not hold.
        c: char,
    },
}

/// Why a host name cannot be used: empty, longer than [`MAX_HOST_LEN`], or
/// holding a space, a control character or `/` (origins are
/// `<host>/<seq>`).
pub fn check_host(host: &str) -> Result<(), HostError> {
    if host.is_empty() || host.len() > MAX_HOST_LEN {
        return Err(HostError::Length { len: host.len() });
    }
    if let Some(c) = host
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || *c == '/')
    {
        return Err(HostError::Char {
            host: host.to_string(),
            c,
        });
    }
    Ok(())
}

/// A monitor id that is not one wakeful writes (see [`check_monitor_id`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("monitor id {shown:?} is not one wakeful writes (1–{MAX_ID_LEN} ASCII letters, digits, `-`, `_`, `.`)")]
pub struct MonitorIdError {
    /// The id as shown: its first 80 characters, on one line.
    pub shown: String,
}

/// Why a monitor id is not one wakeful writes: 1–[`MAX_ID_LEN`] ASCII
/// letters, digits, `-`, `_` and `.`.
pub fn check_monitor_id(id: &str) -> Result<(), MonitorIdError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(MonitorIdError {
            shown: crate::present::one_line(&id.chars().take(80).collect::<String>()),
        })
    }
}

/// The host an imported event shows: the host it names (or, for the
/// exporter's own events, the file's host) with [`IMPORTED_SUFFIX`].
pub fn imported_host(event_host: Option<&str>, file_host: &str) -> String {
    let host = event_host.unwrap_or(file_host);
    if host.ends_with(IMPORTED_SUFFIX) {
        host.to_string()
    } else {
        format!("{host}{IMPORTED_SUFFIX}")
    }
}

/// The first line of an export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportHeader {
    /// The format version ([`EXPORT_FORMAT_VERSION`]).
    pub wakeful_export: u32,
    /// The version of wakeful that wrote it (`wakeful --version`).
    pub wakeful_version: String,
    /// The host it was exported on (part of every event's origin).
    pub host: String,
    /// When it was written (RFC 3339).
    #[serde(with = "crate::info::ts")]
    pub exported_at: DateTime<Utc>,
    /// The session exported, if the export was of a session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The monitor exported, if the export was of one monitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<String>,
    /// Only events at or after this time were exported.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::info::ts_opt"
    )]
    pub since: Option<DateTime<Utc>>,
}

/// A monitor's line in an export: `{"monitor": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorRecord {
    /// The monitor, as `wakeful list --json` shows it.
    pub monitor: MonitorInfo,
}

/// A prune's line in an export: `{"prune": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PruneRecordLine {
    /// What the prune removed.
    pub prune: crate::storage::PruneRecord,
}

/// A whole export, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// Its first line.
    pub header: ExportHeader,
    /// Its events, in file order (seq order as written).
    pub events: Vec<Event>,
    /// Its monitors' records.
    pub monitors: Vec<MonitorInfo>,
    /// The prunes of the exporting store in the exported time.
    pub prunes: Vec<crate::storage::PruneRecord>,
}

/// Why a file is not a usable export.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    /// The file is empty.
    #[error("the file is empty; give a file written by `wakeful export --format jsonl`")]
    Empty,
    /// The first line is not a header.
    #[error("line 1 is not a wakeful export header ({0}); give a file written by `wakeful export --format jsonl` (not --format otlp or asciicast)")]
    NoHeader(String),
    /// A format this build does not know.
    #[error("the file is in export format {found}, this wakeful reads format {EXPORT_FORMAT_VERSION}; import it with a newer wakeful")]
    Version {
        /// The version found.
        found: u32,
    },
    /// A line that is neither an event nor a monitor record, or one that
    /// breaks the file's rules (see the module docs).
    #[error("line {line}: {message}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A line longer than [`MAX_LINE_BYTES`].
    #[error("line {line} is longer than {MAX_LINE_BYTES} bytes, more than any line wakeful writes: not a wakeful export, or a damaged one")]
    LineTooLong {
        /// 1-based line number.
        line: usize,
    },
    /// The last line has no newline: the file was cut.
    #[error("the file ends in the middle of line {line} (no newline after it): it was cut short; export it again, or copy all of it")]
    Truncated {
        /// 1-based line number of the cut line.
        line: usize,
    },
    /// A line that is not UTF-8.
    #[error("line {line} is not UTF-8 text: not a wakeful export, or a damaged one")]
    NotUtf8 {
        /// 1-based line number.
        line: usize,
    },
    /// The file could not be read.
    #[error("{0}")]
    Io(String),
}

/// An event's identity across state directories: `<host>/<seq>`.
pub fn origin(host: &str, seq: u64) -> String {
    format!("{host}/{seq}")
}

impl Export {
    /// Reads an export from the text of its file. Blank lines are passed
    /// over; anything else that is not a header, an event or a monitor
    /// record, or that breaks the rules of the module docs, is an error
    /// naming its line.
    pub fn parse(text: &str) -> Result<Export, ExportError> {
        Export::read(text.as_bytes())
    }

    /// Reads an export line by line from `reader` (see [`Export::parse`]),
    /// holding at most one line of [`MAX_LINE_BYTES`] besides what it keeps.
    pub fn read(reader: impl std::io::BufRead) -> Result<Export, ExportError> {
        use std::io::BufRead;
        let mut reader = reader.take(0);
        let mut parser = ExportParser::default();
        let mut buf = Vec::new();
        let mut n = 0;
        loop {
            n += 1;
            buf.clear();
            reader.set_limit(MAX_LINE_BYTES as u64 + 1);
            let got = reader
                .read_until(b'\n', &mut buf)
                .map_err(|e| ExportError::Io(e.to_string()))?;
            if got == 0 {
                break;
            }
            let ended = buf.last() == Some(&b'\n');
            if buf.len() > MAX_LINE_BYTES {
                return Err(ExportError::LineTooLong { line: n });
            }
            let line = std::str::from_utf8(&buf).map_err(|_| ExportError::NotUtf8 { line: n })?;
            if !ended && parser.header.is_some() && !line.trim().is_empty() {
                // (A first line without newline is read as the header: what
                // is wrong with it says more.)
                return Err(ExportError::Truncated { line: n });
            }
            parser.line(n, line)?;
        }
        parser.finish()
    }
}

/// Reads an export one line at a time (a pure state machine: the lines go
/// in, the export comes out); [`Export::parse`] and [`Export::read`] drive
/// it.
#[derive(Debug, Default)]
pub struct ExportParser {
    header: Option<ExportHeader>,
    events: Vec<Event>,
    monitors: Vec<MonitorInfo>,
    prunes: Vec<crate::storage::PruneRecord>,
    /// The seq of the last event and its line.
    last: Option<(u64, usize)>,
}

impl ExportParser {
    /// Takes line `n` (1-based), without or with its newline.
    pub fn line(&mut self, n: usize, line: &str) -> Result<(), ExportError> {
        if line.len() > MAX_LINE_BYTES {
            return Err(ExportError::LineTooLong { line: n });
        }
        let line = line.trim();
        if line.is_empty() {
            return Ok(());
        }
        let Some(header) = &self.header else {
            self.header = Some(parse_header(line)?);
            return Ok(());
        };
        let bad = |message: String| ExportError::Line { line: n, message };
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| bad(format!("not JSON: {e}")))?;
        let session_ok = |session: &str| header.session.as_deref().is_none_or(|s| s == session);
        if value.get("prune").is_some_and(serde_json::Value::is_object) {
            let record: PruneRecordLine = serde_json::from_value(value)
                .map_err(|e| bad(format!("not a prune record: {e}")))?;
            self.prunes.push(record.prune);
        } else if value
            .get("monitor")
            .is_some_and(serde_json::Value::is_object)
        {
            let record: MonitorRecord = serde_json::from_value(value)
                .map_err(|e| bad(format!("not a monitor record: {e}")))?;
            let m = record.monitor;
            check_monitor_id(&m.id).map_err(|e| bad(e.to_string()))?;
            if !session_ok(&m.session) {
                return Err(bad(format!(
                    "monitor {} is of another session than the file's ({})",
                    m.id,
                    header.session.as_deref().unwrap_or("")
                )));
            }
            if self.monitors.iter().any(|o| o.id == m.id) {
                return Err(bad(format!("monitor {} has a second record", m.id)));
            }
            self.monitors.push(m);
        } else if let Some(seq) = value.get("seq") {
            if seq.as_i64().is_some_and(|s| s <= 0) {
                return Err(bad(format!("seq {seq} is not a seq: seqs start at 1")));
            }
            let event: Event =
                serde_json::from_value(value).map_err(|e| bad(format!("not an event: {e}")))?;
            if let Some((before, at)) = self.last {
                if event.seq <= before {
                    return Err(bad(format!(
                        "seq {} is not above seq {before} of line {at}: an export holds each event once, in seq order",
                        event.seq
                    )));
                }
            }
            check_monitor_id(&event.monitor_id).map_err(|e| bad(e.to_string()))?;
            if !session_ok(&event.session) {
                return Err(bad(format!(
                    "the event is of another session than the file's ({})",
                    header.session.as_deref().unwrap_or("")
                )));
            }
            if let Some(host) = &event.host {
                let name = host.strip_suffix(IMPORTED_SUFFIX).unwrap_or(host);
                check_host(name).map_err(|e| bad(format!("the event's {e}")))?;
                if host == &header.host {
                    return Err(bad(format!(
                        "the event names the file's own host {host}: an export leaves the host out of its own events"
                    )));
                }
            }
            self.last = Some((event.seq, n));
            self.events.push(event);
        } else {
            return Err(bad(
                "neither an event (with `seq`) nor a monitor record (`{\"monitor\": …}`)".into(),
            ));
        }
        Ok(())
    }

    /// The export, once every line went in.
    pub fn finish(self) -> Result<Export, ExportError> {
        Ok(Export {
            header: self.header.ok_or(ExportError::Empty)?,
            events: self.events,
            monitors: self.monitors,
            prunes: self.prunes,
        })
    }
}

fn parse_header(first: &str) -> Result<ExportHeader, ExportError> {
    let value: serde_json::Value =
        serde_json::from_str(first).map_err(|e| ExportError::NoHeader(e.to_string()))?;
    let version = value
        .get("wakeful_export")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| ExportError::NoHeader("no `wakeful_export` version".into()))?;
    if version != u64::from(EXPORT_FORMAT_VERSION) {
        return Err(ExportError::Version {
            found: u32::try_from(version).unwrap_or(u32::MAX),
        });
    }
    let header: ExportHeader =
        serde_json::from_value(value).map_err(|e| ExportError::NoHeader(e.to_string()))?;
    check_host(&header.host).map_err(|e| ExportError::NoHeader(format!("its {e}")))?;
    Ok(header)
}

impl Export {
    /// The record of monitor `id`, if the file has it.
    pub fn monitor(&self, id: &str) -> Option<&MonitorInfo> {
        self.monitors.iter().find(|m| m.id == id)
    }

    /// The events of monitor `id`, in order.
    pub fn events_of<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Event> + 'a {
        self.events.iter().filter(move |e| e.monitor_id == id)
    }

    /// The monitors that have events in it, each once, sorted.
    pub fn monitor_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.events.iter().map(|e| e.monitor_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{"wakeful_export":1,"wakeful_version":"0.1.0","host":"h1","exported_at":"2026-11-30T12:00:05.000Z","session":"s1"}
{"seq":7,"session":"s1","monitor_id":"mon-abc","kind":"started","ts":"2026-11-30T12:00:00.000Z","text":"started: build (command: make)"}
{"seq":8,"session":"s1","monitor_id":"mon-abc","kind":"lines","ts":"2026-11-30T12:00:01.500Z","text":"a","lines":["a"],"count":1,"from_line":1,"to_line":1}

{"monitor":{"id":"mon-abc","session":"s1","description":"build","source":{"kind":"command","command":"make"},"persistent":false,"timeout_ms":300000,"state":"running","stop_reason":null,"started_at":"2026-11-30T12:00:00.000Z","ended_at":null,"events":1,"lines":1,"suppressed_lines":0,"output_path":"/x/mon-abc.log"}}
{"prune":{"at":"2026-11-30T11:00:00.000Z","events":40,"monitors":2,"outputs":0,"bytes":81920,"causes":["age"],"oldest_kept_seq":7,"oldest_kept_at":"2026-11-30T12:00:00.000Z"}}
"#;

    #[test]
    fn an_export_reads_back_line_by_line() {
        let e = Export::parse(FILE).unwrap();
        assert_eq!(e.header.host, "h1");
        assert_eq!(e.header.session.as_deref(), Some("s1"));
        assert_eq!(e.events.len(), 2);
        assert_eq!(e.events_of("mon-abc").count(), 2);
        assert_eq!(e.monitor("mon-abc").unwrap().description, "build");
        assert_eq!(e.prunes.len(), 1);
        assert_eq!(e.prunes[0].events, 40);
        assert_eq!(origin(&e.header.host, e.events[1].seq), "h1/8");
        // The header writes back as it was read.
        let first = FILE.lines().next().unwrap();
        assert_eq!(serde_json::to_string(&e.header).unwrap(), first);
    }

    #[test]
    fn what_is_not_an_export_is_named() {
        assert_eq!(Export::parse(""), Err(ExportError::Empty));
        assert!(matches!(
            Export::parse(r#"{"seq":1}"#),
            Err(ExportError::NoHeader(_))
        ));
        assert_eq!(
            Export::parse(
                r#"{"wakeful_export":2,"wakeful_version":"9","host":"h","exported_at":"2026-01-01T00:00:00.000Z"}"#
            ),
            Err(ExportError::Version { found: 2 })
        );
        let mut broken = FILE.to_string();
        broken.push_str("{\"resourceSpans\":[]}\n");
        match Export::parse(&broken) {
            Err(ExportError::Line { line, .. }) => assert_eq!(line, 7),
            other => panic!("{other:?}"),
        }
    }

    /// FILE with its second event's line replaced by `line`.
    fn with_event_line(line: &str) -> String {
        let mut lines: Vec<&str> = FILE.lines().collect();
        lines[2] = line;
        lines.join("\n") + "\n"
    }

    fn line_error(text: &str) -> (usize, String) {
        match Export::parse(text) {
            Err(ExportError::Line { line, message }) => (line, message),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_hostile_file_is_refused_naming_its_line() {
        // A huge line: refused without being read whole.
        let huge = format!(
            "{}\n{}\n",
            FILE.lines().next().unwrap(),
            "x".repeat(MAX_LINE_BYTES + 10)
        );
        assert_eq!(
            Export::parse(&huge),
            Err(ExportError::LineTooLong { line: 2 })
        );
        // Cut in the middle of a line.
        let cut = &FILE[..FILE.len() - 40];
        assert!(
            matches!(Export::parse(cut), Err(ExportError::Truncated { line: 6 })),
            "{:?}",
            Export::parse(cut)
        );
        // Trailing blanks are not a cut.
        assert!(Export::parse(&format!("{FILE}  ")).is_ok());
        // A duplicate seq, a seq going back, a negative one, 0.
        let seven = FILE.lines().nth(1).unwrap();
        let (line, m) = line_error(&with_event_line(seven));
        assert_eq!(line, 3);
        assert!(m.contains("seq 7 is not above seq 7 of line 2"), "{m}");
        let (_, m) = line_error(&with_event_line(&seven.replace("\"seq\":7", "\"seq\":3")));
        assert!(m.contains("seq 3 is not above"), "{m}");
        for bad in ["-1", "0"] {
            let (_, m) = line_error(&with_event_line(
                &seven.replace("\"seq\":7", &format!("\"seq\":{bad}")),
            ));
            assert!(m.contains(&format!("seq {bad} is not a seq")), "{m}");
        }
        // Hosts: the header's must be a host name; an event's too, and
        // never the file's own.
        for host in ["", "a b", "x/1", "evil\u{1b}[2J"] {
            let text = FILE.replacen(
                "\"host\":\"h1\"",
                &format!("\"host\":{}", serde_json::json!(host)),
                1,
            );
            assert!(
                matches!(Export::parse(&text), Err(ExportError::NoHeader(_))),
                "{host:?}"
            );
        }
        let eight = FILE.lines().nth(2).unwrap();
        let (_, m) = line_error(&with_event_line(
            &eight.replace("\"text\"", "\"host\":\"h1\",\"text\""),
        ));
        assert!(m.contains("the file's own host h1"), "{m}");
        let (_, m) = line_error(&with_event_line(
            &eight.replace("\"text\"", "\"host\":\"a/b\",\"text\""),
        ));
        assert!(m.contains("the event's host"), "{m}");
        let ok =
            with_event_line(&eight.replace("\"text\"", "\"host\":\"build-2 (imported)\",\"text\""));
        assert!(Export::parse(&ok).is_ok());
        // Ids and sessions wakeful would not write.
        let (_, m) = line_error(&with_event_line(
            &eight.replace("mon-abc", "mon abc] [wakeful"),
        ));
        assert!(m.contains("is not one wakeful writes"), "{m}");
        let (_, m) = line_error(&with_event_line(
            &eight.replace("\"session\":\"s1\"", "\"session\":\"other\""),
        ));
        assert!(m.contains("another session"), "{m}");
        let record = FILE.lines().nth(4).unwrap();
        let (line, m) = line_error(&format!("{FILE}{record}\n"));
        assert_eq!(line, 7);
        assert!(m.contains("second record"), "{m}");
    }

    #[test]
    fn imported_hosts_are_marked_once() {
        assert_eq!(imported_host(None, "laptop"), "laptop (imported)");
        assert_eq!(
            imported_host(Some("build-1"), "laptop"),
            "build-1 (imported)"
        );
        assert_eq!(
            imported_host(Some("build-1 (imported)"), "laptop"),
            "build-1 (imported)"
        );
        assert!(
            check_host(&imported_host(None, "x")).is_err(),
            "no cluster host is called that"
        );
    }
}
