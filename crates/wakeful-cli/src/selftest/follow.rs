//! A followed file sees an append, a rotation and a truncation; the
//! latency of a line to `events --follow`, beside `tail -F | grep`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use super::scratch::{Scratch, ScratchError};
use super::{Check, Outcome};

/// The lines a child prints, each with when it was read.
pub struct Reader {
    child: Child,
    lines: Receiver<(Instant, String)>,
    /// Children feeding this one (`tail` before `grep`), ended with it.
    feeders: Vec<Child>,
}

impl Reader {
    /// Spawns `cmd` with its stdout a pipe read on a thread of its own.
    pub fn spawn(mut cmd: Command) -> std::io::Result<Reader> {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
        let (tx, lines) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if tx.send((Instant::now(), line)).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(Reader {
            child,
            lines,
            feeders: Vec::new(),
        })
    }

    /// `tail -F PATH | grep --line-buffered WORD`, both children of this
    /// process (no shell between, so both end with the reader).
    pub fn tail_grep(path: &Path, word: &str) -> std::io::Result<Reader> {
        let mut tail = Command::new("tail")
            .arg("-F")
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let Some(out) = tail.stdout.take() else {
            let _ = tail.kill();
            let _ = tail.wait();
            return Err(std::io::Error::other("tail has no stdout"));
        };
        let mut grep = Command::new("grep");
        grep.args(["--line-buffered", word]).stdin(Stdio::from(out));
        match Reader::spawn(grep) {
            Ok(mut r) => {
                r.feeders.push(tail);
                Ok(r)
            }
            Err(e) => {
                let _ = tail.kill();
                let _ = tail.wait();
                Err(e)
            }
        }
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `wakeful --json events --follow` in the scratch home.
    pub fn events(s: &Scratch) -> std::io::Result<Reader> {
        Reader::spawn(s.cmd(&["--json", "events", "--follow"]))
    }

    /// The first line `pred` accepts within `limit`, and when it came.
    pub fn wait(
        &self,
        limit: Duration,
        mut pred: impl FnMut(&str) -> bool,
    ) -> Option<(Instant, String)> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            match self.lines.recv_timeout(left) {
                Ok((at, line)) if pred(&line) => return Some((at, line)),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        for c in self
            .feeders
            .iter_mut()
            .chain(std::iter::once(&mut self.child))
        {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn append(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)?;
    f.write_all(text.as_bytes())
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// `start --file F`: a line appended, F renamed and made again, F
/// truncated; each must come as an event.
pub fn rotation(s: &Scratch, brk: Option<&str>) -> Check {
    const G: &str = "a followed file: append, rotation, truncation";
    let word = format!("{}5", s.tag());
    let file = s.dir().join(format!("rot-{word}.log"));
    let setup = || -> Result<Reader, ScratchError> {
        std::fs::write(&file, b"")?;
        let path = file.display().to_string();
        s.json(&["start", "--batch-ms", "0", "--file", &path])?;
        Ok(Reader::events(s)?)
    };
    let reader = match setup() {
        Ok(r) => r,
        Err(e) => return Check::new("follow", G, Outcome::Failed, e.to_string()),
    };
    let mut took = Vec::new();
    let steps: [(&str, &str); 3] = [("append", "a"), ("rotation", "r"), ("truncation", "t")];
    for (step, p) in steps {
        let line = format!("{p}{word}");
        let at = Instant::now();
        let wrote = match step {
            "append" => append(&file, &format!("the appended line {line}\n")),
            "rotation" => std::fs::rename(&file, file.with_extension("log.1")).and_then(|_| {
                if brk == Some("follow") {
                    // The break: the new file is made, the line is never written.
                    std::fs::write(&file, b"")
                } else {
                    append(&file, &format!("a line after rotation {line}\n"))
                }
            }),
            // Shorter than what was there: a truncation, even when polled.
            _ => std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&file)
                .and_then(|_| append(&file, &format!("{line}\n"))),
        };
        if let Err(e) = wrote {
            return Check::new("follow", G, Outcome::NotChecked, format!("{step}: {e}"));
        }
        match reader.wait(Duration::from_secs(5), |l| l.contains(&line)) {
            Some((seen, _)) => took.push(format!("{step} {}", ms(seen.saturating_duration_since(at)))),
            None => {
                return Check::new(
                    "follow",
                    G,
                    Outcome::Failed,
                    format!("the line written after the {step} did not come as an event within 5 s ({})", took.join(", ")),
                )
                .fix("if the state directory's filesystem does not report changes (some network or FUSE filesystems), WAKEFUL_PLATFORM=posix polls instead; else report it with `wakeful doctor --selftest --json`")
            }
        }
    }
    Check::new(
        "follow",
        G,
        Outcome::Ok,
        format!(
            "each line came as an event: {} (write to `events --follow`)",
            took.join(", ")
        ),
    )
}

/// Fifteen lines appended to a followed file, each timed to
/// `events --follow` and to `tail -F FILE | grep`.
pub fn latency(s: &Scratch, brk: Option<&str>) -> Check {
    const G: &str = "line → events --follow latency";
    // Under the rate limit's burst of 20 events (with the warm-up line).
    const SAMPLES: usize = 15;
    let word = format!("{}6", s.tag());
    let file = s.dir().join(format!("lat-{word}.log"));
    let have_tail = Command::new("sh")
        .args(["-c", "command -v tail && command -v grep"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|st| st.success());
    let setup = || -> Result<(Reader, Option<Reader>), ScratchError> {
        std::fs::write(&file, b"")?;
        let path = file.display().to_string();
        s.json(&["start", "--batch-ms", "0", "--file", &path])?;
        let events = Reader::events(s)?;
        let tail = if have_tail {
            Some(Reader::tail_grep(&file, &word)?)
        } else {
            None
        };
        Ok((events, tail))
    };
    let (events, tail) = match setup() {
        Ok(r) => r,
        Err(e) => return Check::new("latency", G, Outcome::Failed, e.to_string()),
    };
    // tail -F starts at the end: wait until it shows a first line.
    let tail = tail.filter(|t| {
        let _ = append(&file, &format!("warm {word}\n"));
        t.wait(Duration::from_secs(5), |l| l.contains("warm"))
            .is_some()
            && events
                .wait(Duration::from_secs(5), |l| l.contains("warm"))
                .is_some()
    });
    let target = if brk == Some("latency") {
        file.with_extension("other")
    } else {
        file.clone()
    };
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for i in 0..SAMPLES {
        let line = format!("sample {i} {word}");
        let at = Instant::now();
        if let Err(e) = append(&target, &format!("{line}\n")) {
            return Check::new("latency", G, Outcome::NotChecked, e.to_string());
        }
        match events.wait(Duration::from_secs(5), |l| l.contains(&line)) {
            Some((seen, _)) => ours.push(seen.saturating_duration_since(at)),
            None => {
                return Check::new(
                    "latency",
                    G,
                    Outcome::Failed,
                    format!("line {i} of {SAMPLES} did not reach `events --follow` within 5 s"),
                )
                .fix("report it with the output of `wakeful doctor --selftest --json`")
            }
        }
        if let Some(t) = &tail {
            if let Some((seen, _)) = t.wait(Duration::from_secs(5), |l| l.contains(&line)) {
                theirs.push(seen.saturating_duration_since(at));
            }
        }
    }
    let summary = |v: &mut Vec<Duration>| {
        v.sort();
        match (v.get(v.len() / 2), v.last()) {
            (Some(m), Some(x)) => format!("median {}, max {}", ms(*m), ms(*x)),
            _ => "no sample".to_string(),
        }
    };
    let beside = match &tail {
        Some(_) => format!(
            "; `tail -F | grep`: {} ({} of {SAMPLES})",
            summary(&mut theirs),
            theirs.len()
        ),
        None => {
            "; `tail -F | grep` not measured (not here, or it showed nothing in 5 s)".to_string()
        }
    };
    Check::new(
        "latency",
        G,
        Outcome::Ok,
        format!(
            "{SAMPLES} lines, `events --follow`: {}{beside}",
            summary(&mut ours)
        ),
    )
}
