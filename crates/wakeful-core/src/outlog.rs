//! The layout of a monitor's output file once it is bounded
//! (docs/STORAGE.md): segments, what was dropped, and the manifest that
//! says so. Pure: the engine writes files by it, readers (`wakeful
//! output`, the live views) read them by it.
//!
//! A monitor's output is `<id>.log`, the *live* file, which always holds
//! the newest lines. When it reaches a segment's size it is renamed to
//! `<id>.log.<n>` (`n` counting up from 1) and a new live file is begun.
//! Segment 1, the first lines the monitor ever printed (the *head*), is
//! kept for good; past the cap, the oldest of the others is deleted. Lines
//! can also go unwritten while the disk is low ([`DropReason::DiskLow`]),
//! and a prune can remove a whole file ([`DropReason::Pruned`]).
//!
//! Line numbers never change: every line a monitor read has its number,
//! whether it is in a file or in a dropped range. The manifest
//! `<id>.log.manifest` lists, in order, the [`Part`]s before the live
//! file's last run of lines: runs of kept lines (which segment, how many
//! lines, how many bytes) and dropped ranges (how many lines and bytes,
//! why). Whatever the live file holds after its own kept runs is the
//! newest run, numbered on from the parts. A file without a manifest is
//! one run (every output file before bounding was).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The manifest format this build writes and reads.
pub const MANIFEST_VERSION: u32 = 1;

/// The segment that is never dropped: the first lines of the output.
pub const HEAD_SEGMENT: u32 = 1;

/// Why lines are missing from an output file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The file reached its cap: a middle segment was deleted.
    Cap,
    /// The disk was below its keep-free space (or full): not written.
    DiskLow,
    /// A prune removed the file (its monitor ended long ago).
    Pruned,
}

impl DropReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Cap => "cap",
            DropReason::DiskLow => "disk_low",
            DropReason::Pruned => "pruned",
        }
    }

    /// Why, in words, for a reader: "the output file's cap".
    pub fn describe(self) -> &'static str {
        match self {
            DropReason::Cap => {
                "over the output file's cap (the head and the newest lines are kept)"
            }
            DropReason::DiskLow => "not written while the disk was low on space",
            DropReason::Pruned => "removed by a prune",
        }
    }
}

/// One piece of an output file's history, in line order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Part {
    /// Lines kept in a segment: 0 is the live file, `n ≥ 1` is
    /// `<id>.log.<n>`; a segment's runs lie in it one after the other.
    Kept {
        /// Which file.
        segment: u32,
        /// Lines.
        lines: u64,
        /// Bytes in that file.
        bytes: u64,
    },
    /// Lines that are in no file.
    Dropped {
        /// Lines.
        lines: u64,
        /// The bytes they had (or would have had) in the file.
        bytes: u64,
        /// Why.
        reason: DropReason,
    },
}

impl Part {
    /// Its lines.
    pub fn lines(&self) -> u64 {
        match self {
            Part::Kept { lines, .. } | Part::Dropped { lines, .. } => *lines,
        }
    }

    /// Its bytes.
    pub fn bytes(&self) -> u64 {
        match self {
            Part::Kept { bytes, .. } | Part::Dropped { bytes, .. } => *bytes,
        }
    }
}

/// The manifest of one output file; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_VERSION`].
    pub version: u32,
    /// Changes with every write, so a reader knows when to look again.
    pub generation: u64,
    /// Everything before the live file's last run, in order.
    pub parts: Vec<Part>,
    /// The number the next rotated segment gets.
    pub next_segment: u32,
}

impl Default for Manifest {
    fn default() -> Self {
        Manifest {
            version: MANIFEST_VERSION,
            generation: 0,
            parts: Vec::new(),
            next_segment: HEAD_SEGMENT,
        }
    }
}

/// The manifest's path for output file `path` (`<id>.log.manifest`).
pub fn manifest_path(path: &Path) -> PathBuf {
    suffixed(path, ".manifest")
}

/// The path of segment `n` of output file `path`: the file itself for 0,
/// `<id>.log.<n>` else.
pub fn segment_path(path: &Path, n: u32) -> PathBuf {
    if n == 0 {
        path.to_path_buf()
    } else {
        suffixed(path, &format!(".{n}"))
    }
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Why a manifest's text is not one this wakeful reads.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// Not JSON of a manifest.
    #[error("not an output manifest: {0}")]
    Json(#[source] serde_json::Error),
    /// A manifest of another version.
    #[error("output manifest version {found} (this wakeful reads {MANIFEST_VERSION})")]
    Version {
        /// The version it holds.
        found: u32,
    },
}

/// A stretch of lines as a reader meets it, with absolute numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// Lines in segment `segment` from byte `offset`, numbered from
    /// `first_line`; `lines` and `bytes` are `None` for the live file's
    /// last run (it grows; read to the end).
    Kept {
        /// Which file (see [`segment_path`]).
        segment: u32,
        /// Where the run starts in that file.
        offset: u64,
        /// Its first line's number.
        first_line: u64,
        /// How many lines (`None`: to the end of the file).
        lines: Option<u64>,
        /// How many bytes (`None`: to the end of the file).
        bytes: Option<u64>,
    },
    /// Lines that are in no file.
    Dropped {
        /// The first missing line.
        first_line: u64,
        /// How many.
        lines: u64,
        /// The byte offset (in the whole output, as if nothing was
        /// dropped) where they began.
        first_byte: u64,
        /// Their bytes.
        bytes: u64,
        /// Why.
        reason: DropReason,
    },
}

impl Manifest {
    /// Reads a manifest's text.
    pub fn parse(text: &str) -> Result<Manifest, ManifestError> {
        let m: Manifest = serde_json::from_str(text).map_err(ManifestError::Json)?;
        if m.version != MANIFEST_VERSION {
            return Err(ManifestError::Version { found: m.version });
        }
        Ok(m)
    }

    /// Its text.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Lines of every part (the live file's last run begins after them).
    pub fn lines(&self) -> u64 {
        self.parts.iter().map(Part::lines).sum()
    }

    /// Bytes of every part, kept or dropped.
    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(Part::bytes).sum()
    }

    /// Where the live file's last run begins in it.
    pub fn live_offset(&self) -> u64 {
        self.kept_bytes(0)
    }

    /// Bytes kept in segment `n`.
    pub fn kept_bytes(&self, n: u32) -> u64 {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Kept { segment, bytes, .. } if *segment == n => *bytes,
                _ => 0,
            })
            .sum()
    }

    /// The rotated segments that hold kept lines, in order, with their
    /// bytes.
    pub fn segments(&self) -> Vec<(u32, u64)> {
        let mut out: Vec<(u32, u64)> = Vec::new();
        for p in &self.parts {
            if let Part::Kept { segment, bytes, .. } = p {
                if *segment == 0 {
                    continue;
                }
                match out.iter_mut().find(|(s, _)| s == segment) {
                    Some((_, b)) => *b += bytes,
                    None => out.push((*segment, *bytes)),
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// Dropped lines and bytes by reason.
    pub fn dropped(&self) -> Vec<(DropReason, u64, u64)> {
        let mut out: Vec<(DropReason, u64, u64)> = Vec::new();
        for p in &self.parts {
            if let Part::Dropped {
                lines,
                bytes,
                reason,
            } = p
            {
                match out.iter_mut().find(|(r, _, _)| r == reason) {
                    Some((_, l, b)) => {
                        *l += lines;
                        *b += bytes;
                    }
                    None => out.push((*reason, *lines, *bytes)),
                }
            }
        }
        out
    }

    fn push(&mut self, part: Part) {
        if part.lines() == 0 && part.bytes() == 0 {
            return;
        }
        match (self.parts.last_mut(), part) {
            (
                Some(Part::Kept {
                    segment: s,
                    lines,
                    bytes,
                }),
                Part::Kept {
                    segment,
                    lines: l,
                    bytes: b,
                },
            ) if *s == segment => {
                *lines += l;
                *bytes += b;
            }
            (
                Some(Part::Dropped {
                    lines,
                    bytes,
                    reason: r,
                }),
                Part::Dropped {
                    lines: l,
                    bytes: b,
                    reason,
                },
            ) if *r == reason => {
                *lines += l;
                *bytes += b;
            }
            _ => self.parts.push(part),
        }
        self.generation += 1;
    }

    /// The live file's last run ends here (`lines`, `bytes` of it): it
    /// becomes a part of its own.
    pub fn close_run(&mut self, lines: u64, bytes: u64) {
        self.push(Part::Kept {
            segment: 0,
            lines,
            bytes,
        });
    }

    /// `lines` (of `bytes`) after what is recorded are in no file, for
    /// `reason`.
    pub fn record_drop(&mut self, lines: u64, bytes: u64, reason: DropReason) {
        self.push(Part::Dropped {
            lines,
            bytes,
            reason,
        });
    }

    /// The live file was renamed to the next segment: its parts now name
    /// it. Returns that segment's number.
    pub fn rotate(&mut self) -> u32 {
        let n = self.next_segment.max(HEAD_SEGMENT);
        for p in &mut self.parts {
            if let Part::Kept { segment, .. } = p {
                if *segment == 0 {
                    *segment = n;
                }
            }
        }
        self.next_segment = n + 1;
        self.generation += 1;
        n
    }

    /// Segment `n`'s lines are gone for `reason` (its file was deleted,
    /// or found missing): its parts become dropped ranges.
    pub fn drop_segment(&mut self, n: u32, reason: DropReason) {
        let parts = std::mem::take(&mut self.parts);
        for p in parts {
            match p {
                Part::Kept {
                    segment,
                    lines,
                    bytes,
                } if segment == n => self.push(Part::Dropped {
                    lines,
                    bytes,
                    reason,
                }),
                other => self.push(other),
            }
        }
        self.generation += 1;
    }

    /// Which rotated segments to delete so that the kept bytes (the
    /// segments plus `live_bytes` of the live file) fit in `cap`: the
    /// oldest first, never the head.
    pub fn over_cap(&self, live_bytes: u64, cap: u64) -> Vec<u32> {
        let segments = self.segments();
        let mut kept: u64 = segments.iter().map(|(_, b)| b).sum::<u64>() + live_bytes;
        let mut out = Vec::new();
        for (n, bytes) in segments {
            if kept <= cap {
                break;
            }
            if n == HEAD_SEGMENT {
                continue;
            }
            kept -= bytes;
            out.push(n);
        }
        out
    }

    /// The whole output as a reader meets it: every part with absolute
    /// line numbers and offsets, then the live file's last run.
    pub fn spans(&self) -> Vec<Span> {
        let mut out = Vec::with_capacity(self.parts.len() + 1);
        let mut line = 1;
        let mut byte = 0;
        let mut offsets: Vec<(u32, u64)> = Vec::new();
        for p in &self.parts {
            match *p {
                Part::Kept {
                    segment,
                    lines,
                    bytes,
                } => {
                    let at = match offsets.iter_mut().find(|(s, _)| *s == segment) {
                        Some((_, o)) => {
                            let at = *o;
                            *o += bytes;
                            at
                        }
                        None => {
                            offsets.push((segment, bytes));
                            0
                        }
                    };
                    out.push(Span::Kept {
                        segment,
                        offset: at,
                        first_line: line,
                        lines: Some(lines),
                        bytes: Some(bytes),
                    });
                }
                Part::Dropped {
                    lines,
                    bytes,
                    reason,
                } => out.push(Span::Dropped {
                    first_line: line,
                    lines,
                    first_byte: byte,
                    bytes,
                    reason,
                }),
            }
            line += p.lines();
            byte += p.bytes();
        }
        out.push(Span::Kept {
            segment: 0,
            offset: self.live_offset(),
            first_line: line,
            lines: None,
            bytes: None,
        });
        out
    }

    /// The manifest of an output file a prune removed: one dropped range
    /// of `lines` lines and `bytes` bytes.
    pub fn pruned(lines: u64, bytes: u64) -> Manifest {
        let mut m = Manifest::default();
        m.record_drop(lines, bytes, DropReason::Pruned);
        m.next_segment = 0;
        m
    }

    /// Whether the output's files are gone (a prune removed them).
    pub fn is_pruned(&self) -> bool {
        self.next_segment == 0
    }
}

/// Lines an output file did not keep, as an `output_dropped` event
/// reports them: `count` lines between `from_line` and `to_line` (all of
/// them when the range is whole; the manifest has each range exactly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// Why.
    pub reason: DropReason,
    /// Lines not kept.
    pub count: u64,
    /// The first of them.
    pub from_line: u64,
    /// The last of them.
    pub to_line: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Reports of dropped ranges are spaced at least this far apart, per
/// reason (a disk that stays low, a flood past the cap).
pub const DROP_REPORT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// Turns the ranges an output file drops into reports, the way the rate
/// gate reports suppression: the first at once, then at most one every
/// [`DROP_REPORT_INTERVAL`] per reason, each covering what was dropped
/// since the last (one report a reason: the lines between its first and
/// its last line, and how many of them are missing); what is left is
/// reported when the monitor ends ([`DropReports::finish`]). The clock is
/// passed in.
#[derive(Debug, Default)]
pub struct DropReports {
    pending: Vec<Dropped>,
    last: Vec<(DropReason, std::time::Instant)>,
}

impl DropReports {
    /// Counts a dropped range (lines `from_line..=to_line`).
    pub fn add(&mut self, d: Dropped) {
        if d.count == 0 && d.bytes == 0 {
            return;
        }
        match self.pending.iter_mut().find(|p| p.reason == d.reason) {
            Some(p) => {
                p.count += d.count;
                p.from_line = p.from_line.min(d.from_line);
                p.to_line = p.to_line.max(d.to_line);
                p.bytes += d.bytes;
            }
            None => self.pending.push(d),
        }
    }

    /// The reports due at `now`.
    pub fn due(&mut self, now: std::time::Instant) -> Vec<Dropped> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.pending.len() {
            let reason = self.pending[i].reason;
            let last = self
                .last
                .iter()
                .find(|(r, _)| *r == reason)
                .map(|(_, t)| *t);
            if last.is_none_or(|t| now.saturating_duration_since(t) >= DROP_REPORT_INTERVAL) {
                out.push(self.pending.remove(i));
                self.last.retain(|(r, _)| *r != reason);
                self.last.push((reason, now));
            } else {
                i += 1;
            }
        }
        out
    }

    /// When the next report is due, if one waits.
    pub fn next_due(&self) -> Option<std::time::Instant> {
        self.pending
            .iter()
            .filter_map(|p| {
                self.last
                    .iter()
                    .find(|(r, _)| *r == p.reason)
                    .map(|(_, t)| *t + DROP_REPORT_INTERVAL)
            })
            .min()
    }

    /// Everything still counted (the monitor ends).
    pub fn finish(&mut self) -> Vec<Dropped> {
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn kept(segment: u32, lines: u64, bytes: u64) -> Part {
        Part::Kept {
            segment,
            lines,
            bytes,
        }
    }

    #[test]
    fn rotation_caps_and_drops_keep_every_line_number() {
        let mut m = Manifest::default();
        // 100 lines (1000 bytes) in the live file, which is rotated: the head.
        m.close_run(100, 1000);
        assert_eq!(m.rotate(), 1);
        // Two more segments.
        m.close_run(100, 1000);
        assert_eq!(m.rotate(), 2);
        m.close_run(50, 500);
        // The disk ran low for 10 lines, then they came back.
        m.record_drop(10, 100, DropReason::DiskLow);
        m.close_run(40, 400);
        assert_eq!(m.rotate(), 3);
        assert_eq!(m.segments(), [(1, 1000), (2, 1000), (3, 900)]);
        assert_eq!(m.lines(), 300);
        // The cap: 2500 bytes with 400 in the live file: segment 2 goes
        // (never the head).
        assert_eq!(m.over_cap(400, 2500), [2]);
        assert_eq!(m.over_cap(400, 100), [2, 3], "the head stays");
        m.drop_segment(2, DropReason::Cap);
        assert_eq!(
            m.parts,
            [
                kept(1, 100, 1000),
                Part::Dropped {
                    lines: 100,
                    bytes: 1000,
                    reason: DropReason::Cap
                },
                kept(3, 50, 500),
                Part::Dropped {
                    lines: 10,
                    bytes: 100,
                    reason: DropReason::DiskLow
                },
                kept(3, 40, 400),
            ]
        );
        let spans = m.spans();
        assert_eq!(
            spans[2],
            Span::Kept {
                segment: 3,
                offset: 0,
                first_line: 201,
                lines: Some(50),
                bytes: Some(500)
            }
        );
        assert_eq!(
            spans[3],
            Span::Dropped {
                first_line: 251,
                lines: 10,
                first_byte: 2500,
                bytes: 100,
                reason: DropReason::DiskLow
            }
        );
        assert_eq!(
            spans[4],
            Span::Kept {
                segment: 3,
                offset: 500,
                first_line: 261,
                lines: Some(40),
                bytes: Some(400)
            }
        );
        assert_eq!(
            spans[5],
            Span::Kept {
                segment: 0,
                offset: 0,
                first_line: 301,
                lines: None,
                bytes: None
            }
        );
        let back = Manifest::parse(&m.to_json()).unwrap();
        assert_eq!(back, m);
        assert!(Manifest::parse("{}").is_err());
        assert!(Manifest::parse(&m.to_json().replace("\"version\":1", "\"version\":9")).is_err());
    }

    #[test]
    fn adjacent_drops_of_one_reason_merge() {
        let mut m = Manifest::default();
        m.close_run(10, 100);
        m.rotate();
        m.close_run(10, 100);
        m.rotate();
        m.close_run(10, 100);
        m.rotate();
        m.drop_segment(2, DropReason::Cap);
        m.drop_segment(3, DropReason::Cap);
        assert_eq!(m.parts.len(), 2);
        assert_eq!(m.dropped(), [(DropReason::Cap, 20, 200)]);
        let p = Manifest::pruned(30, 300);
        assert!(p.is_pruned());
        assert_eq!(p.lines(), 30);
    }

    #[test]
    fn paths() {
        let p = Path::new("/s/output/mon-x.log");
        assert_eq!(segment_path(p, 0), p);
        assert_eq!(segment_path(p, 3), Path::new("/s/output/mon-x.log.3"));
        assert_eq!(manifest_path(p), Path::new("/s/output/mon-x.log.manifest"));
    }

    #[test]
    fn drop_reports_come_at_once_then_spaced() {
        let t0 = Instant::now();
        let d = |from: u64, to: u64| Dropped {
            reason: DropReason::DiskLow,
            count: to - from + 1,
            from_line: from,
            to_line: to,
            bytes: (to - from + 1) * 10,
        };
        let mut r = DropReports::default();
        r.add(d(1, 5));
        assert_eq!(r.due(t0), [d(1, 5)]);
        r.add(d(6, 9));
        r.add(d(10, 20));
        assert!(r.due(t0 + Duration::from_secs(10)).is_empty());
        assert_eq!(r.next_due(), Some(t0 + DROP_REPORT_INTERVAL));
        assert_eq!(r.due(t0 + DROP_REPORT_INTERVAL), [d(6, 20)]);
        r.add(d(30, 31));
        // Ranges that are not contiguous (the disk around its mark) make
        // one report: how many lines, between which.
        r.add(d(40, 40));
        assert_eq!(
            r.finish(),
            [Dropped {
                count: 3,
                bytes: 30,
                ..d(30, 40)
            }]
        );
        assert!(r.finish().is_empty());
    }
}
