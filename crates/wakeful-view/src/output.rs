//! A monitor's output file by line numbers (the numbers of `wakeful output
//! --from-line`), read from `output_path` directly (the daemon runs as the
//! same user). An index of line starts is built once and extended as the
//! file grows, so any window is one seek and one read.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::events::one_line;

/// Longest text shown of one line (the rest is cut with a note).
pub const MAX_LINE_CHARS: usize = 4096;

/// Why an output file cannot be shown.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the output file {path}: {source}; `wakeful output ID` reads it through the daemon's rules, and `wakeful list` shows where it is")]
pub struct OutputError {
    /// The file.
    pub path: PathBuf,
    /// What failed.
    #[source]
    pub source: std::io::Error,
}

/// Where each line of an output file starts.
#[derive(Debug, Clone)]
pub struct OutputIndex {
    path: PathBuf,
    /// Byte offsets of line starts; the last one may be the end of the
    /// file (a line not begun yet).
    starts: Vec<u64>,
    /// Bytes indexed.
    len: u64,
}

impl OutputIndex {
    /// Indexes `path`.
    pub fn open(path: &Path) -> Result<Self, OutputError> {
        let mut index = OutputIndex {
            path: path.to_path_buf(),
            starts: vec![0],
            len: 0,
        };
        index.refresh()?;
        Ok(index)
    }

    fn err(&self, source: std::io::Error) -> OutputError {
        OutputError {
            path: self.path.clone(),
            source,
        }
    }

    /// Indexes what was written since (starts over if the file shrank).
    pub fn refresh(&mut self) -> Result<(), OutputError> {
        let mut f = File::open(&self.path).map_err(|e| self.err(e))?;
        let size = f.metadata().map_err(|e| self.err(e))?.len();
        if size < self.len {
            self.starts = vec![0];
            self.len = 0;
        }
        f.seek(SeekFrom::Start(self.len)).map_err(|e| self.err(e))?;
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = f.read(&mut buf).map_err(|e| self.err(e))?;
            if n == 0 {
                break;
            }
            for (i, b) in buf[..n].iter().enumerate() {
                if *b == b'\n' {
                    self.starts.push(self.len + i as u64 + 1);
                }
            }
            self.len += n as u64;
        }
        Ok(())
    }

    /// Lines in the file (a last line without newline counts).
    pub fn total(&self) -> u64 {
        let begun = self.starts.last().is_some_and(|s| *s < self.len);
        self.starts.len() as u64 - u64::from(!begun)
    }

    /// Lines `from..from+count` (1-based; `from` past the end gives the
    /// last page): (number, text made safe for a terminal, cut at
    /// [`MAX_LINE_CHARS`]).
    pub fn read(&self, from: u64, count: u64) -> Result<Vec<(u64, String)>, OutputError> {
        let total = self.total();
        if total == 0 || count == 0 {
            return Ok(vec![]);
        }
        let from = from.clamp(1, total.saturating_sub(count) + 1).min(total);
        let to = (from + count - 1).min(total);
        let start = self.starts[(from - 1) as usize];
        let end = self
            .starts
            .get(to as usize)
            .copied()
            .unwrap_or(self.len)
            .min(self.len);
        let mut f = File::open(&self.path).map_err(|e| self.err(e))?;
        f.seek(SeekFrom::Start(start)).map_err(|e| self.err(e))?;
        let mut bytes = vec![];
        f.take(end - start)
            .read_to_end(&mut bytes)
            .map_err(|e| self.err(e))?;
        let text = String::from_utf8_lossy(&bytes);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        Ok(text
            .split('\n')
            .zip(from..)
            .map(|(l, n)| (n, cut(&one_line(l.strip_suffix('\r').unwrap_or(l)))))
            .collect())
    }

    /// The first line of the window [`OutputIndex::read`] gives for `from`.
    pub fn window_top(&self, from: u64, count: u64) -> u64 {
        let total = self.total();
        if total == 0 {
            return 1;
        }
        from.clamp(1, total.saturating_sub(count) + 1).min(total)
    }
}

fn cut(s: &str) -> String {
    match s.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => format!("{}…[{} more bytes]", &s[..at], s.len() - at),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_by_number_growth_and_hostile_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o.log");
        std::fs::write(&p, "").unwrap();
        let mut idx = OutputIndex::open(&p).unwrap();
        assert_eq!(idx.total(), 0);
        assert!(idx.read(1, 10).unwrap().is_empty());
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"one\ntwo\r\nthr\x1b[31mee\xff\npart").unwrap();
        idx.refresh().unwrap();
        assert_eq!(idx.total(), 4);
        assert_eq!(
            idx.read(1, 10).unwrap(),
            [
                (1, "one".to_string()),
                (2, "two".to_string()),
                (3, "three\u{fffd}".to_string()),
                (4, "part".to_string())
            ]
        );
        f.write_all(b"ial\nfive\n").unwrap();
        idx.refresh().unwrap();
        assert_eq!(idx.total(), 5);
        assert_eq!(idx.read(4, 1).unwrap(), [(4, "partial".to_string())]);
        // Past the end: the last page.
        assert_eq!(idx.read(u64::MAX, 2).unwrap()[1], (5, "five".to_string()));
        assert_eq!(idx.window_top(u64::MAX, 2), 4);
        // Truncated: indexed again.
        std::fs::write(&p, "x\n").unwrap();
        idx.refresh().unwrap();
        assert_eq!(idx.total(), 1);
        assert!(OutputIndex::open(&dir.path().join("missing")).is_err());
    }
}
