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

    /// The kept runs of segment `n` as cap drops, with their line numbers:
    /// what deleting it removes, for [`DropReports`].
    pub fn segment_drops(&self, n: u32, reason: DropReason) -> Vec<Dropped> {
        self.spans()
            .into_iter()
            .filter_map(|s| match s {
                Span::Kept {
                    segment,
                    first_line,
                    lines: Some(lines),
                    bytes: Some(bytes),
                    ..
                } if segment == n && (lines > 0 || bytes > 0) => Some(Dropped {
                    reason,
                    count: lines,
                    from_line: first_line,
                    to_line: (first_line + lines).saturating_sub(1),
                    bytes,
                }),
                _ => None,
            })
            .collect()
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

/// Where an output file's lines go under its cap: the decisions its
/// writer takes, pure (the engine's `OutputFile` follows them; the
/// property test below checks them over caps, line lengths and counts).
///
/// - The live file is rotated *before* a line that would take it past a
///   segment is written ([`Layout::rotate_before`]), never after: so no
///   segment, the head included, holds more than a segment (but for a
///   single line longer than one, alone in its file), and the live file is
///   never left empty: the newest lines are always in it.
/// - Rotated segments are dropped, the oldest first and never the head,
///   until they and the live file, with room for it to grow to a segment,
///   fit in the cap ([`Layout::over_cap`]): the file never holds more
///   than its cap (unless one line is longer than the cap less the head).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// A segment's size.
    pub segment: u64,
    /// The most the file keeps: head, segments and live file together.
    pub cap: u64,
}

impl Layout {
    /// Whether the live file, holding `live` bytes, is rotated before a
    /// line (or run of lines) of `len` bytes is written to it: when it
    /// holds something and would pass a segment.
    pub fn rotate_before(&self, live: u64, len: u64) -> bool {
        live > 0 && live.saturating_add(len) > self.segment
    }

    /// What the live file, holding `live` bytes, may grow to before it is
    /// rotated: a segment, or more while it holds one longer line.
    pub fn reserve(&self, live: u64) -> u64 {
        live.max(self.segment)
    }

    /// The rotated segments of `m` to delete now, the live file holding
    /// `live` bytes: the oldest but the head, until the segments plus the
    /// live file's [`Layout::reserve`] fit in the cap.
    pub fn over_cap(&self, m: &Manifest, live: u64) -> Vec<u32> {
        m.over_cap(self.reserve(live), self.cap)
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

/// Ranges of one reason that a report waits with at most: past it, a
/// range is merged into the last one (its report then says how many lines
/// between which are missing).
pub const MAX_PENDING_RANGES: usize = 64;

/// Turns the ranges an output file drops into reports, the way the rate
/// gate reports suppression: the first at once, then at most one batch
/// every [`DROP_REPORT_INTERVAL`] per reason, covering what was dropped
/// since the last; what is left is reported when the monitor ends
/// ([`DropReports::finish`]). Each report names one range exactly:
/// contiguous ranges are one report, ranges with kept lines between them
/// are reported apart (up to [`MAX_PENDING_RANGES`] a reason), so the
/// reports name every dropped line and nothing else. The clock is passed
/// in.
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
        let same = self.pending.iter().filter(|p| p.reason == d.reason).count();
        match self.pending.iter_mut().rev().find(|p| p.reason == d.reason) {
            Some(p) if p.to_line + 1 == d.from_line || same >= MAX_PENDING_RANGES => {
                p.count += d.count;
                p.from_line = p.from_line.min(d.from_line);
                p.to_line = p.to_line.max(d.to_line);
                p.bytes += d.bytes;
            }
            _ => self.pending.push(d),
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
                let (due, rest) = std::mem::take(&mut self.pending)
                    .into_iter()
                    .partition(|p| p.reason == reason);
                let due: Vec<Dropped> = due;
                out.extend(due);
                self.pending = rest;
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
        // Ranges that are not contiguous (the disk around its mark) are
        // reported apart: no report names a line that was kept.
        r.add(d(40, 40));
        r.add(d(41, 42));
        assert_eq!(r.finish(), [d(30, 31), d(40, 42)]);
        // Past the bound, ranges merge (how many lines, between which).
        for i in 0..MAX_PENDING_RANGES as u64 + 1 {
            r.add(d(100 + 2 * i, 100 + 2 * i));
        }
        let all = r.finish();
        assert_eq!(all.len(), MAX_PENDING_RANGES);
        let last = all[MAX_PENDING_RANGES - 1];
        assert_eq!((last.count, last.from_line, last.to_line), (2, 226, 228));
        assert!(r.finish().is_empty());
    }
}

/// The layout's promises, checked over caps, line lengths and line
/// counts: the head and the newest lines are kept, no file passes its
/// share, and the reports name every dropped range and nothing else.
#[cfg(test)]
mod layout_props {
    use super::*;
    use crate::storage::OutputCaps;
    use proptest::prelude::*;
    use std::time::{Duration, Instant};

    /// Lines written by the layout's decisions, as the engine's
    /// `OutputFile` writes them (without the files).
    struct Model {
        layout: Layout,
        m: Manifest,
        live: u64,
        run_lines: u64,
        lines: u64,
        reports: DropReports,
        events: Vec<Dropped>,
    }

    impl Model {
        fn trim(&mut self, live: u64) {
            for n in self.layout.over_cap(&self.m, live) {
                for d in self.m.segment_drops(n, DropReason::Cap) {
                    self.reports.add(d);
                }
                self.m.drop_segment(n, DropReason::Cap);
            }
        }

        fn write(&mut self, len: u64, now: Instant) {
            if self.layout.rotate_before(self.live, len) {
                self.m.close_run(self.run_lines, self.live);
                self.m.rotate();
                self.live = 0;
                self.run_lines = 0;
                self.trim(len);
            }
            self.live += len;
            self.run_lines += 1;
            self.lines += 1;
            self.trim(self.live);
            self.events.extend(self.reports.due(now));
        }
    }

    /// Merges ranges that touch (the form both sides are compared in).
    fn merged(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
        ranges.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (a, b) in ranges {
            match out.last_mut() {
                Some(last) if last.1 + 1 == a => last.1 = b,
                _ => out.push((a, b)),
            }
        }
        out
    }

    fn check(per_file: u64, running: usize, count: u64, max_len: u64, seed: u64, step_ms: u64) {
        let caps = OutputCaps {
            per_file,
            total: per_file * 4,
        };
        let layout = Layout {
            segment: caps.segment(),
            cap: caps.share(running),
        };
        let mut model = Model {
            layout,
            m: Manifest::default(),
            live: 0,
            run_lines: 0,
            lines: 0,
            reports: DropReports::default(),
            events: Vec::new(),
        };
        let t0 = Instant::now();
        let mut rng = seed | 1;
        let mut lens = Vec::with_capacity(count as usize);
        for i in 0..count {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let len = 1 + rng % max_len;
            lens.push(len);
            model.write(len, t0 + Duration::from_millis(i * step_ms));
            let m = &model.m;
            let segments = m.segments();
            // No segment holds more than a segment, but one long line.
            for (n, bytes) in &segments {
                let one_line = m
                    .parts
                    .iter()
                    .any(|p| matches!(p, Part::Kept { segment, lines: 1, .. } if segment == n));
                assert!(
                    *bytes <= layout.segment || one_line,
                    "segment {n}: {bytes} > {layout:?}"
                );
            }
            let kept: u64 = segments.iter().map(|(_, b)| b).sum::<u64>() + model.live;
            // The newest line is in the live file.
            assert!(model.live >= len, "line {} is not kept", i + 1);
            if max_len <= layout.segment {
                // The cap holds, with room for the live file to grow.
                assert!(
                    kept - model.live + layout.reserve(model.live) <= layout.cap,
                    "{kept} kept under {layout:?}"
                );
            }
        }
        let m = &model.m;
        // The head: the first lines up to a segment (at least one), in
        // segment 1, whole.
        let mut head_lines = 0;
        let mut head_bytes = 0;
        for &len in &lens {
            if head_bytes > 0 && head_bytes + len > layout.segment {
                break;
            }
            head_bytes += len;
            head_lines += 1;
        }
        if head_lines < count {
            assert_eq!(
                m.parts.first(),
                Some(&Part::Kept {
                    segment: HEAD_SEGMENT,
                    lines: head_lines,
                    bytes: head_bytes
                })
            );
        }
        // The newest lines: everything after the last dropped range is
        // kept, and that is at least the cap less three segments.
        let spans = m.spans();
        let last_drop = spans.iter().rev().find_map(|s| match s {
            Span::Dropped {
                first_line, lines, ..
            } => Some(first_line + lines - 1),
            _ => None,
        });
        if let Some(last_drop) = last_drop {
            let tail: u64 = lens[last_drop as usize..].iter().sum();
            if max_len <= layout.segment {
                assert!(
                    tail >= layout.cap.saturating_sub(3 * layout.segment),
                    "only {tail} newest bytes kept under {layout:?}"
                );
            }
        }
        // Every line is numbered: the parts and the live run.
        assert_eq!(m.lines() + model.run_lines, count);
        // The reports, once the monitor ended, name every dropped range
        // and nothing else.
        let mut events = model.events;
        events.extend(model.reports.finish());
        for e in &events {
            assert_eq!(
                e.count,
                e.to_line - e.from_line + 1,
                "{e:?} is not one range"
            );
        }
        let reported = merged(events.iter().map(|e| (e.from_line, e.to_line)).collect());
        let dropped = merged(
            spans
                .iter()
                .filter_map(|s| match *s {
                    Span::Dropped {
                        first_line, lines, ..
                    } => Some((first_line, first_line + lines - 1)),
                    _ => None,
                })
                .collect(),
        );
        assert_eq!(reported, dropped);
        let bytes: u64 = events.iter().map(|e| e.bytes).sum();
        assert_eq!(bytes, m.dropped().iter().map(|(_, _, b)| b).sum::<u64>());
    }

    #[test]
    fn the_reported_case_64kib_and_300000_lines_of_seq() {
        // `seq 1 300000` under the smallest cap: lines of 2 to 7 bytes.
        let caps = OutputCaps {
            per_file: 64 << 10,
            total: 1 << 30,
        };
        let layout = Layout {
            segment: caps.segment(),
            cap: caps.share(1),
        };
        let mut model = Model {
            layout,
            m: Manifest::default(),
            live: 0,
            run_lines: 0,
            lines: 0,
            reports: DropReports::default(),
            events: Vec::new(),
        };
        let now = Instant::now();
        for i in 1..=300_000u64 {
            model.write(i.to_string().len() as u64 + 1, now);
        }
        let segs = model.m.segments();
        assert_eq!(segs[0].0, HEAD_SEGMENT);
        assert!(segs.iter().all(|(_, b)| *b <= 16 << 10), "{segs:?}");
        let kept = segs.iter().map(|(_, b)| b).sum::<u64>() + model.live;
        assert!(kept <= 64 << 10, "{kept}");
        assert!(model.live > 0, "the newest lines are kept");
        let mut events = model.events;
        events.extend(model.reports.finish());
        let Span::Dropped {
            first_line, lines, ..
        } = model.m.spans()[1]
        else {
            panic!("{:?}", model.m.spans())
        };
        assert_eq!(events.first().map(|e| e.from_line), Some(first_line));
        assert_eq!(
            events.last().map(|e| e.to_line),
            Some(first_line + lines - 1)
        );
        assert_eq!(events.iter().map(|e| e.count).sum::<u64>(), lines);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        #[test]
        fn caps_keep_the_head_and_the_newest_lines_and_say_what_they_dropped(
            per_file_kib in prop_oneof![Just(64u64), 64u64..=1024, Just(200), Just(4096)],
            running in prop_oneof![Just(1usize), 1usize..=64],
            count in 1u64..12_000,
            max_len in prop_oneof![Just(8u64), 1u64..=256, 1u64..=20_000, 1u64..=70_000],
            seed in any::<u64>(),
            step_ms in prop_oneof![Just(0u64), 0u64..=20_000],
        ) {
            check(per_file_kib << 10, running, count, max_len, seed, step_ms);
        }
    }
}
