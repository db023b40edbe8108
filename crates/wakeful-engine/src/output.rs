//! A monitor's output file: every line its source produced, complete and
//! never rate-limited. Stdout lines are written byte for byte, stderr lines
//! prefixed `[stderr] `; every line ends with `\n` (a final line that had
//! none gets one). Line numbers in `lines` and `suppressed` events refer to
//! this file.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use wakeful_core::lines::{Piece, Stream};

/// An open output file with its line count.
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    writer: BufWriter<File>,
    lines: u64,
    open_line: Option<Stream>,
}

impl OutputFile {
    /// Opens (creating it and its directory, mode 0600/0700) `path` for
    /// appending. Existing lines are counted so numbering continues, as for a
    /// re-armed monitor.
    pub fn open(path: &Path) -> io::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        let lines = count_lines(&mut file)?;
        Ok(OutputFile {
            path: path.to_path_buf(),
            writer: BufWriter::with_capacity(64 * 1024, file),
            lines,
            open_line: None,
        })
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lines written so far (the number of the last line).
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Writes one piece from the line splitter of `stream`. Returns the line
    /// number when the piece finished a line.
    pub fn write(&mut self, stream: Stream, piece: &Piece<'_>) -> io::Result<Option<u64>> {
        if self.open_line != Some(stream) {
            self.writer.write_all(stream.file_prefix())?;
        }
        match piece {
            Piece::Partial(bytes) => {
                self.writer.write_all(bytes)?;
                self.open_line = Some(stream);
                Ok(None)
            }
            Piece::Line { rest, .. } => {
                self.writer.write_all(rest)?;
                self.writer.write_all(b"\n")?;
                self.open_line = None;
                self.lines += 1;
                Ok(Some(self.lines))
            }
        }
    }

    /// Whether a line of some stream is half written (then whole lines of
    /// the other stream must wait for the line splitter).
    pub fn mid_line(&self) -> bool {
        self.open_line.is_some()
    }

    /// Writes `bytes`, which are `count` complete stdout lines (each ending in
    /// `\n`), as they are. Returns the numbers of the first and last line.
    pub fn write_stdout_lines(&mut self, bytes: &[u8], count: u64) -> io::Result<(u64, u64)> {
        self.writer.write_all(bytes)?;
        let first = self.lines + 1;
        self.lines += count;
        Ok((first, self.lines))
    }

    /// Pushes buffered bytes to the file, so readers see them.
    pub fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

fn count_lines(file: &mut File) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    loop {
        let read = file.read(&mut buf)?;
        if read == 0 {
            return Ok(n);
        }
        n += memchr_count(&buf[..read]);
    }
}

fn memchr_count(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|b| **b == b'\n').count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_prefixes_and_counts_lines_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.log");
        let mut f = OutputFile::open(&path).unwrap();
        let line = |rest: &'static [u8]| Piece::Line {
            rest,
            text: String::new(),
        };
        assert_eq!(f.write(Stream::Stdout, &line(b"a")).unwrap(), Some(1));
        assert_eq!(f.write(Stream::Stderr, &line(b"oops")).unwrap(), Some(2));
        f.write(Stream::Stdout, &Piece::Partial(b"pa")).unwrap();
        assert_eq!(f.write(Stream::Stdout, &line(b"rt\xff")).unwrap(), Some(3));
        f.flush().unwrap();
        drop(f);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"a\n[stderr] oops\npart\xff\n"
        );
        let f = OutputFile::open(&path).unwrap();
        assert_eq!(f.lines(), 3);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
