//! Reading a monitor's output file by line numbers, across its segments
//! and the ranges it dropped (the layout of [`wakeful_core::outlog`];
//! docs/STORAGE.md). `wakeful output` and the live views read through an
//! [`OutputIndex`]; files are read directly (the daemon runs as the same
//! user).
//!
//! The index knows where every kept line starts (any window is one seek
//! and one read) and where lines were dropped. [`OutputIndex::refresh`]
//! extends it as the live file grows and builds it again when the
//! manifest changed (a rotation, a drop). A dropped range is an item of
//! its own: a reader shows that the lines are missing and why, never
//! other lines in their place.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use wakeful_core::outlog::{self, DropReason, Manifest, Span};

/// Why an output file cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the output file {path}: {source}; `wakeful list` shows where it is")]
pub struct OutputError {
    /// The file.
    pub path: PathBuf,
    /// What failed.
    #[source]
    pub source: io::Error,
}

/// What stands at a line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A line's bytes as in the file, with its newline (a last line
    /// without one has none).
    Line(Vec<u8>),
    /// Lines `from_line..=to_line` are in no file.
    Dropped {
        /// The first.
        from_line: u64,
        /// The last.
        to_line: u64,
        /// Their bytes.
        bytes: u64,
        /// Where they began in the whole output (as if nothing was
        /// dropped).
        first_byte: u64,
        /// Why.
        reason: DropReason,
    },
}

impl Item {
    /// What a plain view prints for a dropped range: `[wakeful: output
    /// lines 120–4000 (12 MiB) are not in the output file: …]`.
    pub fn dropped_text(&self) -> Option<String> {
        match self {
            Item::Line(_) => None,
            Item::Dropped {
                from_line,
                to_line,
                bytes,
                reason,
                ..
            } => Some(format!(
                "[wakeful: output lines {from_line}–{to_line} ({}) are not in the output file: {}]",
                wakeful_core::storage::ByteSize(*bytes),
                reason.describe()
            )),
        }
    }
}

#[derive(Debug, Clone)]
enum Indexed {
    Kept {
        segment: u32,
        first_line: u64,
        /// Offsets (in the segment's file) where each complete line
        /// starts, then where the last one ended.
        starts: Vec<u64>,
        /// Where this run ends in its file (`None`: the live file's last
        /// run, which grows).
        end: Option<u64>,
        /// Bytes after the last complete line (a line not finished yet,
        /// or the last line without a newline).
        partial: u64,
    },
    Dropped {
        first_line: u64,
        lines: u64,
        first_byte: u64,
        bytes: u64,
        reason: DropReason,
    },
}

impl Indexed {
    fn first_line(&self) -> u64 {
        match self {
            Indexed::Kept { first_line, .. } | Indexed::Dropped { first_line, .. } => *first_line,
        }
    }

    /// Complete lines.
    fn lines(&self) -> u64 {
        match self {
            Indexed::Kept { starts, .. } => starts.len().saturating_sub(1) as u64,
            Indexed::Dropped { lines, .. } => *lines,
        }
    }
}

/// Where every line of an output file is; see the module docs.
#[derive(Debug, Clone)]
pub struct OutputIndex {
    path: PathBuf,
    /// The manifest's generation when the spans were built (`None`: no
    /// manifest).
    generation: Option<u64>,
    spans: Vec<Indexed>,
    /// The output was pruned: no file is left.
    pruned: bool,
}

impl OutputIndex {
    /// Indexes output file `path` (its segments and manifest beside it).
    pub fn open(path: &Path) -> Result<Self, OutputError> {
        let mut index = OutputIndex {
            path: path.to_path_buf(),
            generation: None,
            spans: Vec::new(),
            pruned: false,
        };
        index.rebuild()?;
        Ok(index)
    }

    fn err(&self, source: io::Error) -> OutputError {
        OutputError {
            path: self.path.clone(),
            source,
        }
    }

    fn read_manifest(&self) -> Result<Option<Manifest>, OutputError> {
        match std::fs::read_to_string(outlog::manifest_path(&self.path)) {
            Ok(text) => Manifest::parse(&text)
                .map(Some)
                .map_err(|e| self.err(io::Error::new(io::ErrorKind::InvalidData, e))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.err(e)),
        }
    }

    fn rebuild(&mut self) -> Result<(), OutputError> {
        let manifest = self.read_manifest()?;
        self.generation = manifest.as_ref().map(|m| m.generation);
        self.pruned = manifest.as_ref().is_some_and(Manifest::is_pruned);
        let manifest = manifest.unwrap_or_default();
        if !self.pruned && manifest.parts.is_empty() && !self.path.exists() {
            return Err(self.err(io::ErrorKind::NotFound.into()));
        }
        let mut spans = Vec::new();
        for span in manifest.spans() {
            match span {
                Span::Dropped {
                    first_line,
                    lines,
                    first_byte,
                    bytes,
                    reason,
                } => spans.push(Indexed::Dropped {
                    first_line,
                    lines,
                    first_byte,
                    bytes,
                    reason,
                }),
                Span::Kept {
                    segment,
                    offset,
                    first_line,
                    lines,
                    bytes,
                } => {
                    if self.pruned && segment == 0 {
                        continue;
                    }
                    let end = bytes.map(|b| offset + b);
                    match self.index_run(segment, offset, end) {
                        Ok((starts, partial)) => spans.push(Indexed::Kept {
                            segment,
                            first_line,
                            starts,
                            end,
                            partial,
                        }),
                        // Gone since the manifest was read (dropped past
                        // the cap): the lines are missing, and say so.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            spans.push(Indexed::Dropped {
                                first_line,
                                lines: lines.unwrap_or(0),
                                first_byte: 0,
                                bytes: bytes.unwrap_or(0),
                                reason: DropReason::Cap,
                            })
                        }
                        Err(e) => return Err(self.err(e)),
                    }
                }
            }
        }
        self.spans = spans;
        Ok(())
    }

    /// Line starts of segment `segment` from `offset` to `end` (the end
    /// of the file for `None`), and the bytes after the last complete line.
    fn index_run(
        &self,
        segment: u32,
        offset: u64,
        end: Option<u64>,
    ) -> io::Result<(Vec<u64>, u64)> {
        let mut starts = vec![offset];
        let partial = scan(
            &outlog::segment_path(&self.path, segment),
            offset,
            end,
            &mut starts,
        )?;
        Ok((starts, partial))
    }

    /// Indexes what was written since; builds the index again when the
    /// manifest changed (a rotation, a drop) or the live file shrank.
    pub fn refresh(&mut self) -> Result<(), OutputError> {
        let generation = self.read_manifest()?.map(|m| m.generation);
        if generation != self.generation {
            return self.rebuild();
        }
        let path = self.path.clone();
        let Some(Indexed::Kept {
            segment: 0,
            starts,
            end: None,
            partial,
            ..
        }) = self.spans.last_mut()
        else {
            return Ok(());
        };
        let from = starts.last().copied().unwrap_or(0);
        let len = std::fs::metadata(&path).map_or(0, |m| m.len());
        if len < from + *partial {
            return self.rebuild();
        }
        let mut more = Vec::new();
        match scan(&path, from, None, &mut more) {
            Ok(rest) => {
                starts.extend(more);
                *partial = rest;
                Ok(())
            }
            // Renamed away this instant: the manifest says where next time.
            Err(e) if e.kind() == io::ErrorKind::NotFound => self.rebuild(),
            Err(e) => Err(OutputError { path, source: e }),
        }
    }

    /// Whether the output was pruned (no file is left; [`OutputIndex::items`]
    /// gives one dropped range).
    pub fn is_pruned(&self) -> bool {
        self.pruned
    }

    /// The number of the last complete line (a line still being written
    /// is not counted).
    pub fn complete(&self) -> u64 {
        self.spans
            .last()
            .map_or(0, |s| s.first_line() + s.lines() - 1)
    }

    /// The number of the last line, counting a last line without a
    /// newline.
    pub fn total(&self) -> u64 {
        let partial =
            matches!(self.spans.last(), Some(Indexed::Kept { partial, .. }) if *partial > 0);
        self.complete() + u64::from(partial)
    }

    /// The items from line `from` on (1-based), at most `count` of them,
    /// not past line `to`: lines, and a dropped range as one item (at its
    /// first line's number, or at `from` when `from` falls inside it).
    /// With `partial`, a last line without a newline is given too.
    pub fn items(
        &self,
        from: u64,
        to: u64,
        count: usize,
        partial: bool,
    ) -> Result<Vec<(u64, Item)>, OutputError> {
        let mut out = Vec::new();
        let mut line = from.max(1);
        for span in &self.spans {
            if out.len() >= count || line > to {
                break;
            }
            let first = span.first_line();
            let last_line = first + span.lines();
            let extra = match span {
                Indexed::Kept { partial: p, .. } if partial && *p > 0 => 1,
                _ => 0,
            };
            if line >= last_line + extra {
                continue;
            }
            match span {
                Indexed::Dropped {
                    lines,
                    first_byte,
                    bytes,
                    reason,
                    ..
                } => {
                    out.push((
                        line,
                        Item::Dropped {
                            from_line: first,
                            to_line: first + lines - 1,
                            bytes: *bytes,
                            first_byte: *first_byte,
                            reason: *reason,
                        },
                    ));
                    line = first + lines;
                }
                Indexed::Kept {
                    segment,
                    starts,
                    partial: p,
                    ..
                } => {
                    let file = outlog::segment_path(&self.path, *segment);
                    let complete = (starts.len() - 1) as u64;
                    let i = line - first;
                    if i < complete {
                        let room = (count - out.len()) as u64;
                        let k = (complete - i).min(room).min(to - line + 1);
                        let bytes = read_range(&file, starts[i as usize], starts[(i + k) as usize])
                            .map_err(|e| self.err(e))?;
                        for (n, l) in (line..).zip(bytes.split_inclusive(|b| *b == b'\n')) {
                            out.push((n, Item::Line(l.to_vec())));
                        }
                        line += k;
                    }
                    if partial
                        && *p > 0
                        && line - first == complete
                        && out.len() < count
                        && line <= to
                    {
                        let at = starts[complete as usize];
                        let bytes = read_range(&file, at, at + p).map_err(|e| self.err(e))?;
                        out.push((line, Item::Line(bytes)));
                        line += 1;
                    }
                }
            }
        }
        Ok(out)
    }

    /// Dropped ranges, in order.
    pub fn dropped(&self) -> Vec<Item> {
        self.spans
            .iter()
            .filter_map(|s| match s {
                Indexed::Dropped {
                    first_line,
                    lines,
                    first_byte,
                    bytes,
                    reason,
                } => Some(Item::Dropped {
                    from_line: *first_line,
                    to_line: first_line + lines - 1,
                    bytes: *bytes,
                    first_byte: *first_byte,
                    reason: *reason,
                }),
                Indexed::Kept { .. } => None,
            })
            .collect()
    }
}

/// Appends to `starts` where each line after `offset` starts (after each
/// newline) in `path`, up to `end`; returns the bytes after the last
/// newline.
fn scan(path: &Path, offset: u64, end: Option<u64>, starts: &mut Vec<u64>) -> io::Result<u64> {
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut f: Box<dyn Read> = match end {
        Some(end) => Box::new(f.take(end.saturating_sub(offset))),
        None => Box::new(f),
    };
    let mut buf = vec![0u8; 256 * 1024];
    let mut pos = offset;
    let mut last_start = offset;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(pos - last_start);
        }
        for i in memchr::memchr_iter(b'\n', &buf[..n]) {
            last_start = pos + i as u64 + 1;
            starts.push(last_start);
        }
        pos += n as u64;
    }
}

fn read_range(path: &Path, start: u64, stop: u64) -> io::Result<Vec<u8>> {
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::with_capacity((stop - start) as usize);
    f.take(stop - start).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines(items: &[(u64, Item)]) -> Vec<(u64, String)> {
        items
            .iter()
            .map(|(n, i)| match i {
                Item::Line(b) => (
                    *n,
                    String::from_utf8_lossy(b.strip_suffix(b"\n").unwrap_or(b)).into_owned(),
                ),
                d => (*n, d.dropped_text().unwrap()),
            })
            .collect()
    }

    #[test]
    fn a_plain_file_grows_and_a_last_line_without_newline_counts() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o.log");
        std::fs::write(&p, "").unwrap();
        let mut idx = OutputIndex::open(&p).unwrap();
        assert_eq!(idx.total(), 0);
        assert!(idx.items(1, u64::MAX, 10, true).unwrap().is_empty());
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"one\ntwo\r\npart").unwrap();
        idx.refresh().unwrap();
        assert_eq!((idx.complete(), idx.total()), (2, 3));
        assert_eq!(
            lines(&idx.items(1, u64::MAX, 10, true).unwrap()),
            [(1, "one".into()), (2, "two\r".into()), (3, "part".into())]
        );
        assert_eq!(lines(&idx.items(1, u64::MAX, 10, false).unwrap()).len(), 2);
        f.write_all(b"ial\nfive\n").unwrap();
        idx.refresh().unwrap();
        assert_eq!(
            lines(&idx.items(3, 3, 10, true).unwrap()),
            [(3, "partial".into())]
        );
        assert_eq!(idx.items(2, u64::MAX, 1, true).unwrap().len(), 1);
        std::fs::write(&p, "x\n").unwrap();
        idx.refresh().unwrap();
        assert_eq!(idx.total(), 1, "truncated: indexed again");
        assert!(OutputIndex::open(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn segments_and_dropped_ranges_read_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.log");
        // Head (lines 1–2) in segment 1, lines 3–4 dropped (cap), 5–6 in
        // segment 3, line 7 not written (disk), 8– in the live file.
        std::fs::write(outlog::segment_path(&p, 1), "l1\nl2\n").unwrap();
        std::fs::write(outlog::segment_path(&p, 3), "l5\nl6\n").unwrap();
        std::fs::write(&p, "l8\nl9\n").unwrap();
        let mut m = Manifest::default();
        m.close_run(2, 6);
        m.rotate();
        m.close_run(2, 6);
        m.rotate();
        m.close_run(2, 6);
        m.record_drop(1, 3, DropReason::DiskLow);
        m.rotate();
        m.drop_segment(2, DropReason::Cap);
        std::fs::write(outlog::manifest_path(&p), m.to_json()).unwrap();
        let mut idx = OutputIndex::open(&p).unwrap();
        assert_eq!(idx.total(), 9);
        let all = lines(&idx.items(1, u64::MAX, 100, true).unwrap());
        assert_eq!(
            all,
            [
                (1, "l1".into()),
                (2, "l2".into()),
                (3, "[wakeful: output lines 3–4 (6 B) are not in the output file: over the output file's cap (the head and the newest lines are kept)]".into()),
                (5, "l5".into()),
                (6, "l6".into()),
                (7, "[wakeful: output lines 7–7 (3 B) are not in the output file: not written while the disk was low on space]".into()),
                (8, "l8".into()),
                (9, "l9".into()),
            ]
        );
        // A window that starts inside a dropped range begins with it.
        assert_eq!(lines(&idx.items(4, 5, 10, true).unwrap())[0].0, 4);
        assert_eq!(
            lines(&idx.items(4, 5, 10, true).unwrap())[1],
            (5, "l5".into())
        );
        // A segment deleted after the manifest was read reads as dropped.
        std::fs::remove_file(outlog::segment_path(&p, 3)).unwrap();
        let mut m2 = m.clone();
        m2.generation += 1;
        std::fs::write(outlog::manifest_path(&p), m2.to_json()).unwrap();
        idx.refresh().unwrap();
        let all = idx.items(5, 6, 10, true).unwrap();
        assert!(
            matches!(
                all[0].1,
                Item::Dropped {
                    reason: DropReason::Cap,
                    from_line: 5,
                    to_line: 6,
                    ..
                }
            ),
            "{all:?}"
        );
        // Pruned: one range, no file.
        std::fs::remove_file(&p).unwrap();
        std::fs::write(outlog::manifest_path(&p), Manifest::pruned(9, 30).to_json()).unwrap();
        let idx = OutputIndex::open(&p).unwrap();
        assert!(idx.is_pruned());
        let all = idx.items(1, u64::MAX, 10, true).unwrap();
        assert_eq!(all.len(), 1);
        assert!(all[0]
            .1
            .dropped_text()
            .unwrap()
            .contains("removed by a prune"));
    }
}
