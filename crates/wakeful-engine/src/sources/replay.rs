//! The replay source: a monitor's recorded lines, read from a `wakeful
//! export --format jsonl` file, re-emitted with their recorded timing
//! divided by the speed, through the normal monitor loop (so the replay
//! monitor's filter, `until`, batching and rate limit apply as to any
//! monitor, and its lines go to its own output file).
//!
//! - Time 0 is the recorded monitor's first event (its `started`); each
//!   `lines` event's lines come at its recorded time after that, scaled.
//!   A recording without `lines` events (`until exit`, `until after:`)
//!   replays the lines its final event carried, at that event's time.
//! - Suppressed lines were never recorded as lines, so they are not
//!   replayed (the replay's own rate limit decides anew).
//! - The replay ends at the recorded final event's time, the way the
//!   recording ended (`exit` with its code, `timeout`, `failed` …); a
//!   recording without a final event (exported while it ran) ends with
//!   `until` once its last line is out.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

use wakeful_core::event::format_ts;
use wakeful_core::export::Export;
use wakeful_core::machine::SourceEnd;
use wakeful_core::{EventBody, MonitorStopReason, Stream};

use crate::source::{Input, InputSource};

/// Largest export file a replay reads.
const MAX_FILE: u64 = 256 * 1024 * 1024;

/// Why a recording cannot be replayed (the `failed` reason of the replay
/// monitor).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordingError {
    /// The file cannot be read.
    #[error("cannot read the recording {}: {source}", file.display())]
    Unreadable {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_FILE`].
    #[error("cannot read the recording {}: it is {bytes} bytes, more than the {MAX_FILE} a replay reads; export less (--monitor, --since)", file.display())]
    TooLarge {
        /// The file.
        file: PathBuf,
        /// Its size.
        bytes: u64,
    },
    /// The file is not an export.
    #[error("cannot read the recording {}: {source}", file.display())]
    NotAnExport {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: wakeful_core::export::ExportError,
    },
    /// The file holds no events of the monitor asked for.
    #[error("{} holds no events of monitor {monitor}; it holds {}", file.display(), holds(ids))]
    NoEvents {
        /// The file.
        file: PathBuf,
        /// The monitor asked for.
        monitor: String,
        /// The monitors it holds events of.
        ids: Vec<String>,
    },
}

/// What a recording holds, for [`RecordingError::NoEvents`].
fn holds(ids: &[String]) -> String {
    if ids.is_empty() {
        "no events at all".to_string()
    } else {
        format!("events of {}", ids.join(", "))
    }
}

/// A replay source; see the module docs.
pub(crate) struct Replayer {
    /// Lines to hand out: when (after the start, scaled) and the bytes.
    pending: VecDeque<(Duration, Vec<u8>)>,
    /// When the recording ended (scaled), and how.
    end: (Duration, SourceEnd),
    /// When the first input was asked for.
    start: Option<tokio::time::Instant>,
    /// The chunk handed out last.
    current: Vec<u8>,
    /// Whether the pending lines were flushed.
    flushed: bool,
    summary: String,
}

impl Replayer {
    /// Reads monitor `monitor`'s recording from `file`.
    pub(crate) async fn open(
        file: &Path,
        monitor: &str,
        speed: f64,
    ) -> Result<Self, RecordingError> {
        let unreadable = |source| RecordingError::Unreadable {
            file: file.to_path_buf(),
            source,
        };
        let meta = tokio::fs::metadata(file).await.map_err(unreadable)?;
        if meta.len() > MAX_FILE {
            return Err(RecordingError::TooLarge {
                file: file.to_path_buf(),
                bytes: meta.len(),
            });
        }
        let text = tokio::fs::read_to_string(file).await.map_err(unreadable)?;
        let export = Export::parse(&text).map_err(|source| RecordingError::NotAnExport {
            file: file.to_path_buf(),
            source,
        })?;
        Self::from_export(&export, file, monitor, speed)
    }

    fn from_export(
        export: &Export,
        file: &Path,
        monitor: &str,
        speed: f64,
    ) -> Result<Self, RecordingError> {
        let events: Vec<_> = export.events_of(monitor).collect();
        let Some(first) = events.first() else {
            return Err(RecordingError::NoEvents {
                file: file.to_path_buf(),
                monitor: monitor.to_string(),
                ids: export.monitor_ids().iter().map(|s| s.to_string()).collect(),
            });
        };
        let t0 = first.ts;
        let at = |ts: chrono::DateTime<chrono::Utc>| {
            let ms = (ts - t0).num_milliseconds().max(0) as f64;
            Duration::from_secs_f64(ms / 1000.0 / speed)
        };
        let chunk = |lines: &[String]| {
            let mut bytes = lines.join("\n").into_bytes();
            bytes.push(b'\n');
            bytes
        };
        let mut pending = VecDeque::new();
        let mut end = None;
        for e in &events {
            match &e.body {
                EventBody::MonitorEvent { lines, .. } if !lines.is_empty() => {
                    pending.push_back((at(e.ts), chunk(lines)));
                }
                EventBody::MonitorStopped {
                    reason, last_lines, ..
                } => end = Some((e.ts, SourceEnd::Ended(reason.clone()), last_lines)),
                EventBody::MonitorFailed {
                    error, last_lines, ..
                } => end = Some((e.ts, SourceEnd::Failed(error.clone()), last_lines)),
                _ => {}
            }
        }
        let last_line_at = pending.back().map(|(t, _)| *t).unwrap_or_default();
        let end = match end {
            Some((ts, how, tail)) => {
                if pending.is_empty() && !tail.is_empty() {
                    pending.push_back((at(ts), chunk(tail)));
                }
                (at(ts).max(last_line_at), how)
            }
            None => (last_line_at, SourceEnd::Ended(MonitorStopReason::Until)),
        };
        let record = export.monitor(monitor);
        let what = match record {
            Some(m) => format!("{monitor} \"{}\" ({})", m.description, m.source.summary()),
            None => monitor.to_string(),
        };
        let summary = format!(
            "replay of {what}, which ran {} on {}, from {} at {speed}x",
            format_ts(&t0),
            export.header.host,
            file.display()
        );
        Ok(Replayer {
            pending,
            end,
            start: None,
            current: Vec::new(),
            flushed: false,
            summary,
        })
    }

    /// What the `started` event says about the source: which monitor is
    /// replayed, when and where it ran.
    pub(crate) fn summary(&self) -> &str {
        &self.summary
    }
}

impl InputSource for Replayer {
    async fn next(&mut self) -> Input<'_> {
        let start = *self.start.get_or_insert_with(tokio::time::Instant::now);
        if let Some((at, _)) = self.pending.front() {
            tokio::time::sleep_until(start + *at).await;
            if let Some((_, bytes)) = self.pending.pop_front() {
                self.current = bytes;
                return Input::Chunk(Stream::Stdout, &self.current);
            }
        }
        if !self.flushed {
            self.flushed = true;
            return Input::Flush(Stream::Stdout);
        }
        tokio::time::sleep_until(start + self.end.0).await;
        let how = std::mem::replace(&mut self.end.1, SourceEnd::Exited(0));
        Input::End(how.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{"wakeful_export":1,"wakeful_version":"0.1.0","host":"h1","exported_at":"2026-11-30T12:00:09.000Z"}
{"seq":1,"session":"s","monitor_id":"mon-a","kind":"started","ts":"2026-11-30T12:00:00.000Z","text":"started"}
{"seq":2,"session":"s","monitor_id":"mon-b","kind":"started","ts":"2026-11-30T12:00:00.500Z","text":"started"}
{"seq":3,"session":"s","monitor_id":"mon-a","kind":"lines","ts":"2026-11-30T12:00:01.000Z","text":"x\ny","lines":["x","y"],"count":2,"from_line":1,"to_line":2}
{"seq":4,"session":"s","monitor_id":"mon-a","kind":"lines","ts":"2026-11-30T12:00:04.000Z","text":"z","lines":["z"],"count":1,"from_line":3,"to_line":3}
{"seq":5,"session":"s","monitor_id":"mon-a","kind":"stopped","ts":"2026-11-30T12:00:05.000Z","text":"exited with code 3","lines":["x","y","z"],"stop_reason":{"kind":"exit","code":3}}
{"seq":6,"session":"s","monitor_id":"mon-b","kind":"stopped","ts":"2026-11-30T12:00:02.500Z","text":"until","lines":["t1","t2"],"stop_reason":{"kind":"until"}}
"#;

    fn replayer(monitor: &str, speed: f64) -> Result<Replayer, RecordingError> {
        let export = Export::parse(FILE).unwrap();
        Replayer::from_export(&export, Path::new("/r.jsonl"), monitor, speed)
    }

    #[test]
    fn lines_come_at_their_recorded_times_scaled() {
        let r = replayer("mon-a", 2.0).unwrap();
        let times: Vec<_> = r.pending.iter().map(|(t, _)| t.as_millis()).collect();
        assert_eq!(times, [500, 2000]);
        assert_eq!(r.pending[0].1, b"x\ny\n");
        assert_eq!(r.end.0, Duration::from_millis(2500));
        assert_eq!(
            r.end.1,
            SourceEnd::Ended(MonitorStopReason::ExitCode { code: 3 })
        );
        assert!(r.summary().contains("ran 2026-11-30T12:00:00.000Z on h1"));
    }

    #[test]
    fn a_recording_without_line_events_replays_its_final_lines() {
        let r = replayer("mon-b", 1.0).unwrap();
        assert_eq!(r.pending.len(), 1);
        assert_eq!(
            r.pending[0],
            (Duration::from_millis(2000), b"t1\nt2\n".to_vec())
        );
        assert_eq!(r.end.1, SourceEnd::Ended(MonitorStopReason::Until));
    }

    #[test]
    fn an_unknown_monitor_names_those_in_the_file() {
        let err = replayer("mon-x", 1.0).err().unwrap().to_string();
        assert!(
            err.contains("no events of monitor mon-x") && err.contains("mon-a, mon-b"),
            "{err}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_source_hands_out_lines_then_ends_as_recorded() {
        let mut r = replayer("mon-a", 1.0).unwrap();
        let t0 = tokio::time::Instant::now();
        let mut got = Vec::new();
        loop {
            match r.next().await {
                Input::Chunk(_, b) => got.push((
                    t0.elapsed().as_millis(),
                    String::from_utf8_lossy(b).into_owned(),
                )),
                Input::Flush(_) | Input::Nothing => {}
                Input::End(e) => {
                    got.push((t0.elapsed().as_millis(), format!("{:?}", e.end)));
                    break;
                }
            }
        }
        assert_eq!(
            got,
            [
                (1000, "x\ny\n".to_string()),
                (4000, "z\n".to_string()),
                (5000, "Ended(ExitCode { code: 3 })".to_string())
            ]
        );
    }
}
