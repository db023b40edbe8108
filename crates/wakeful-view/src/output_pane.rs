//! A monitor's output file by line numbers (the numbers of `wakeful output
//! --from-line`), for the output panes: a window of lines made safe for a
//! terminal or a page, read through [`wakeful_client::output_file::OutputIndex`]
//! (every segment of the file, and what it dropped: a dropped range is a
//! row that says so).

use std::path::Path;

use wakeful_client::output_file::Item;
pub use wakeful_client::output_file::OutputError;

use crate::events::one_line;

/// Longest text shown of one line (the rest is cut with a note).
pub const MAX_LINE_CHARS: usize = 4096;

/// Where each line of an output file starts; see the module docs.
#[derive(Debug, Clone)]
pub struct OutputIndex {
    inner: wakeful_client::output_file::OutputIndex,
}

impl OutputIndex {
    /// Indexes `path`.
    pub fn open(path: &Path) -> Result<Self, OutputError> {
        Ok(OutputIndex {
            inner: wakeful_client::output_file::OutputIndex::open(path)?,
        })
    }

    /// Indexes what was written since (again from the start when the file
    /// was rotated, cut or shrank).
    pub fn refresh(&mut self) -> Result<(), OutputError> {
        self.inner.refresh()
    }

    /// Lines in the file (a last line without newline counts).
    pub fn total(&self) -> u64 {
        self.inner.total()
    }

    /// Lines `from..from+count` (1-based; `from` past the end gives the
    /// last page): (number, text made safe for a terminal, cut at
    /// [`MAX_LINE_CHARS`]). A range of dropped lines is one row, at the
    /// number it starts from, saying which lines are missing and why.
    pub fn read(&self, from: u64, count: u64) -> Result<Vec<(u64, String)>, OutputError> {
        let total = self.total();
        if total == 0 || count == 0 {
            return Ok(vec![]);
        }
        let from = self.window_top(from, count);
        let items = self.inner.items(from, total, count as usize, true)?;
        Ok(items
            .into_iter()
            .map(|(n, item)| match item {
                Item::Line(bytes) => {
                    let text = String::from_utf8_lossy(bytes.strip_suffix(b"\n").unwrap_or(&bytes));
                    (n, cut(&one_line(text.strip_suffix('\r').unwrap_or(&text))))
                }
                dropped => (n, dropped.dropped_text().unwrap_or_default()),
            })
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

    #[test]
    fn a_dropped_range_is_a_row_that_says_so() {
        use wakeful_core::outlog::{self, DropReason, Manifest};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.log");
        std::fs::write(outlog::segment_path(&p, 1), "head\n").unwrap();
        std::fs::write(&p, "new\n").unwrap();
        let mut m = Manifest::default();
        m.close_run(1, 5);
        m.rotate();
        m.record_drop(998, 9_000, DropReason::Cap);
        std::fs::write(outlog::manifest_path(&p), m.to_json()).unwrap();
        let idx = OutputIndex::open(&p).unwrap();
        assert_eq!(idx.total(), 1000);
        let rows = idx.read(1, 50).unwrap();
        assert_eq!(rows[0], (1, "head".to_string()));
        assert_eq!(rows[1].0, 2);
        assert!(rows[1].1.contains("output lines 2–999"), "{}", rows[1].1);
        assert_eq!(rows[2], (1000, "new".to_string()));
    }
}
