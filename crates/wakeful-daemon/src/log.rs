//! The daemon's log: `daemon.log` in the state directory, written through
//! `tracing`, at the level of `WAKEFUL_LOG` (default `info`; any
//! `tracing-subscriber` filter works, e.g. `wakeful_daemon=debug`).
//!
//! The file is capped: once it passes [`MAX_LOG_BYTES`] it is renamed to
//! `daemon.log.1` (replacing the previous one) and a new file is started,
//! so the log never takes more than twice the cap. Panics are logged too.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// The environment variable that sets the level.
pub const LEVEL_VAR: &str = "WAKEFUL_LOG";
/// Largest log file before it is rotated.
pub const MAX_LOG_BYTES: u64 = 8 * 1024 * 1024;

/// A file that starts over (keeping one previous file) when it grows past
/// its cap.
#[derive(Debug)]
pub struct CappedFile {
    path: PathBuf,
    cap: u64,
    file: File,
    size: u64,
    /// Log records that could not be written (a full disk), and the first
    /// error; told in the log once writing works again.
    lost: u64,
    lost_why: Option<String>,
}

impl CappedFile {
    /// Opens `path` for appending (mode 0600).
    pub fn open(path: &Path, cap: u64) -> io::Result<Self> {
        let file = open_append(path)?;
        let size = file.metadata()?.len();
        Ok(CappedFile {
            path: path.to_path_buf(),
            cap,
            file,
            size,
            lost: 0,
            lost_why: None,
        })
    }

    fn rotate(&mut self) -> io::Result<()> {
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        std::fs::rename(&self.path, &old)?;
        self.file = open_append(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

impl Write for CappedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.size > 0 && self.size + buf.len() as u64 > self.cap {
            // A log that cannot rotate keeps writing where it is.
            let _ = self.rotate();
        }
        if self.lost > 0 {
            let note = format!(
                "{} WARN {} log record(s) could not be written ({}); writing again\n",
                chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                self.lost,
                self.lost_why.as_deref().unwrap_or("unknown error")
            );
            if self.file.write_all(note.as_bytes()).is_err() {
                self.lost += 1;
                return Err(io::Error::other("the log cannot be written"));
            }
            self.size += note.len() as u64;
            self.lost = 0;
            self.lost_why = None;
        }
        match self.file.write(buf) {
            Ok(n) => {
                self.size += n as u64;
                Ok(n)
            }
            Err(e) => {
                // Counted, and said once the disk has room again: a full
                // disk never stops the daemon, and its log resumes.
                self.lost += 1;
                self.lost_why.get_or_insert_with(|| e.to_string());
                Err(e)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Hands the shared [`CappedFile`] to the subscriber, one event at a time.
#[derive(Clone)]
struct Shared(Arc<Mutex<CappedFile>>);

struct Guard<'a>(std::sync::MutexGuard<'a, CappedFile>);

impl Write for Guard<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl<'a> MakeWriter<'a> for Shared {
    type Writer = Guard<'a>;
    fn make_writer(&'a self) -> Self::Writer {
        Guard(self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Sends the daemon's `tracing` events to `log_path` (and, when `stderr`
/// is true — a person running `wakeful daemon --foreground` — to stderr as
/// well), and logs panics. Call once per process; a second call changes
/// nothing.
pub fn init(log_path: &Path, stderr: bool) -> io::Result<()> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    let filter = || EnvFilter::try_from_env(LEVEL_VAR).unwrap_or_else(|_| EnvFilter::new("info"));
    let file = Shared(Arc::new(Mutex::new(CappedFile::open(
        log_path,
        MAX_LOG_BYTES,
    )?)));
    let to_file = tracing_subscriber::fmt::layer()
        .with_writer(file)
        .with_ansi(false)
        .with_target(false)
        .with_filter(filter());
    let to_stderr = stderr.then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(io::stderr)
            .with_target(false)
            .with_filter(filter())
    });
    let _ = tracing_subscriber::registry()
        .with(to_file)
        .with(to_stderr)
        .try_init();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        tracing::error!("panic: {info}");
        default_hook(info);
    }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_lost_to_a_full_disk_are_counted_and_told_when_writing_works_again() {
        // /dev/full fails every write with ENOSPC, as a full disk does.
        let mut f = CappedFile::open(Path::new("/dev/full"), 1 << 20).unwrap();
        assert!(f.write(b"one\n").is_err());
        assert!(f.write(b"two\n").is_err());
        assert_eq!(f.lost, 2);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.log");
        f.file = open_append(&path).unwrap();
        f.write_all(b"three\n").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("2 log record(s) could not be written (No space left on device"),
            "{text}"
        );
        assert!(text.ends_with("three\n"), "{text}");
        assert_eq!(f.lost, 0);
    }

    #[test]
    fn rotates_past_the_cap_and_keeps_one_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.log");
        let mut f = CappedFile::open(&path, 100).unwrap();
        for i in 0..30 {
            writeln!(f, "line {i:02} of the log").unwrap();
        }
        let now = std::fs::metadata(&path).unwrap().len();
        let old = std::fs::metadata(dir.path().join("daemon.log.1"))
            .unwrap()
            .len();
        assert!(now <= 100, "{now}");
        assert!(old <= 100, "{old}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("line 29 of the log\n"), "{text}");
    }
}
