//! A monitor's output file: every line its source produced, complete and
//! never rate-limited. Stdout lines are written byte for byte, stderr lines
//! prefixed `[stderr] `. A final line without a newline stays without one
//! (`printf abc` leaves exactly `abc`), unless another line follows it in the
//! file (the other stream, a re-armed run): then a `\n` is put in between so
//! that every line stays a line. Line numbers in `lines` and `suppressed`
//! events refer to this file.

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
    /// The last line was written without a newline (its stream ended).
    unterminated: bool,
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
        let (lines, unterminated) = count_lines(&mut file)?;
        Ok(OutputFile {
            path: path.to_path_buf(),
            writer: BufWriter::with_capacity(64 * 1024, file),
            lines: lines + u64::from(unterminated),
            open_line: None,
            unterminated,
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
        self.end_unterminated()?;
        if self.open_line != Some(stream) {
            self.writer.write_all(stream.file_prefix())?;
        }
        match piece {
            Piece::Partial(bytes) => {
                self.writer.write_all(bytes)?;
                self.open_line = Some(stream);
                Ok(None)
            }
            Piece::Line {
                rest, terminated, ..
            } => {
                self.writer.write_all(rest)?;
                if *terminated {
                    self.writer.write_all(b"\n")?;
                } else {
                    self.unterminated = true;
                }
                self.open_line = None;
                self.lines += 1;
                Ok(Some(self.lines))
            }
        }
    }

    /// A line follows one that ended without a newline: separate them.
    fn end_unterminated(&mut self) -> io::Result<()> {
        if self.unterminated {
            self.writer.write_all(b"\n")?;
            self.unterminated = false;
        }
        Ok(())
    }

    /// Whether a line of some stream is half written (then whole lines of
    /// the other stream must wait for the line splitter).
    pub fn mid_line(&self) -> bool {
        self.open_line.is_some()
    }

    /// Writes `bytes`, which are `count` complete stdout lines (each ending in
    /// `\n`), as they are. Returns the numbers of the first and last line.
    pub fn write_stdout_lines(&mut self, bytes: &[u8], count: u64) -> io::Result<(u64, u64)> {
        self.end_unterminated()?;
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

/// The file's complete lines, and whether it ends with an unterminated one.
fn count_lines(file: &mut File) -> io::Result<(u64, bool)> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    let mut last = None;
    loop {
        let read = file.read(&mut buf)?;
        if read == 0 {
            return Ok((n, last.is_some_and(|b| b != b'\n')));
        }
        n += memchr_count(&buf[..read]);
        last = buf[..read].last().copied();
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
            terminated: true,
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
        let mut f = OutputFile::open(&path).unwrap();
        assert_eq!(f.lines(), 3);
        // A final line without newline stays so, until a line follows it.
        let last = Piece::Line {
            rest: b"abc",
            text: String::new(),
            terminated: false,
        };
        assert_eq!(f.write(Stream::Stdout, &last).unwrap(), Some(4));
        f.flush().unwrap();
        assert!(std::fs::read(&path).unwrap().ends_with(b"\nabc"));
        drop(f);
        let mut f = OutputFile::open(&path).unwrap();
        assert_eq!(f.lines(), 4, "the unterminated line counts");
        assert_eq!(f.write(Stream::Stderr, &line(b"e")).unwrap(), Some(5));
        f.flush().unwrap();
        assert!(std::fs::read(&path)
            .unwrap()
            .ends_with(b"\nabc\n[stderr] e\n"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
