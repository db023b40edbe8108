//! `wakeful output`: a monitor's output file, or a range of its lines,
//! optionally followed until the monitor ends. The file is read directly
//! (it belongs to the same user); the daemon only says where it is and
//! when the monitor ended. New data is noticed through inotify, not by
//! polling.
//!
//! Each line is printed sanitized (decoded as UTF-8 with U+FFFD for what is
//! not, control characters and escape sequences removed, one printed line
//! per line of the file); `--raw` prints the file's bytes as they are.

use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use notify::{RecursiveMode, Watcher};
use wakeful_client::{connect, Paths};
use wakeful_core::terminal::TerminalInfo;
use wakeful_core::MonitorInfo;
use wakeful_protocol::{Reply, Request};

use crate::cli::LineRange;
use crate::{exit, Failure};

/// Which lines to print, and how.
#[derive(Debug, Clone, Copy)]
struct Selection {
    /// First line (1-based).
    from: u64,
    /// Last line (inclusive).
    to: u64,
    /// The bytes as they are, not sanitized.
    raw: bool,
}

/// Writes one complete line (with its `\n`) of the file.
fn print_line(line: &[u8], raw: bool, out: &mut impl Write) -> std::io::Result<()> {
    if raw {
        return out.write_all(line);
    }
    let text = String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(line));
    writeln!(out, "{}", wakeful_core::present::one_line(&text))
}

/// Prints the selected lines that are complete in the file, starting at
/// `offset`, which is where line `line_no` begins; returns the number of the
/// next line and the byte offset after it. Output is flushed before it
/// returns.
fn print_range(
    file: &mut std::fs::File,
    offset: u64,
    mut line_no: u64,
    sel: Selection,
    out: impl Write,
) -> std::io::Result<(u64, u64)> {
    file.seek(SeekFrom::Start(offset))?;
    let mut reader = BufReader::new(file.take(u64::MAX));
    let mut out = BufWriter::new(out);
    let mut pos = offset;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 || buf.last() != Some(&b'\n') {
            // An unfinished line stays for the next read.
            break;
        }
        pos += n as u64;
        if line_no >= sel.from && line_no <= sel.to {
            print_line(&buf, sel.raw, &mut out)?;
        }
        line_no += 1;
        if line_no > sel.to {
            break;
        }
    }
    out.flush()?;
    Ok((line_no, pos))
}

fn check_range(range: &LineRange) -> Result<Selection, Failure> {
    let from = range.from_line.unwrap_or(1);
    let to = range.to_line.unwrap_or(u64::MAX);
    if from == 0 || to < from {
        return Err(Failure::new(
            exit::USAGE,
            format!("invalid line range {from}..{to}: lines are numbered from 1 and --to-line must not be below --from-line"),
        ));
    }
    Ok(Selection {
        from,
        to,
        raw: range.raw,
    })
}

/// Prints the selected lines of `path`; with `follow`, keeps printing new
/// lines (woken by inotify) until `end` completes, then prints what is left.
async fn print_file(
    path: &std::path::Path,
    sel: Selection,
    follow: bool,
    end: impl std::future::Future<Output = ()>,
) -> Result<u8, Failure> {
    let mut file = std::fs::File::open(path).map_err(|e| {
        Failure::new(
            exit::FAILURE,
            format!("cannot open {}: {e}", path.display()),
        )
    })?;
    let stdout = std::io::stdout();
    // Watch before the first read, so nothing written in between is missed.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
    let mut watcher = notify::recommended_watcher(move |_res: notify::Result<notify::Event>| {
        // A full channel already holds a wake-up; nothing is lost.
        let _ = tx.try_send(());
    })
    .map_err(|e| {
        Failure::new(
            exit::FAILURE,
            format!("cannot watch {}: {e}", path.display()),
        )
    })?;
    if follow {
        watcher
            .watch(path, RecursiveMode::NonRecursive)
            .map_err(|e| {
                Failure::new(
                    exit::FAILURE,
                    format!("cannot watch {}: {e}", path.display()),
                )
            })?;
    }
    let (mut line_no, mut offset) = print_range(&mut file, 0, 1, sel, stdout.lock())?;
    if !follow || line_no > sel.to {
        return Ok(0);
    }
    tokio::pin!(end);
    loop {
        tokio::select! {
            _ = rx.recv() => {
                (line_no, offset) = print_range(&mut file, offset, line_no, sel, stdout.lock())?;
                if line_no > sel.to {
                    return Ok(0);
                }
            }
            _ = &mut end => {
                print_range(&mut file, offset, line_no, sel, stdout.lock())?;
                return Ok(0);
            }
        }
    }
}

/// Runs `wakeful output`.
pub async fn output(paths: &Paths, id: String, range: &LineRange) -> Result<u8, Failure> {
    let sel = check_range(range)?;
    let mut conn = connect(paths).await?;
    let info: MonitorInfo = conn.call_as(Request::Get { id: id.clone() }).await?;
    let follow = range.follow && info.is_active();
    if follow {
        conn.send(Request::Events {
            session: info.session.clone(),
            after: 0,
            follow: true,
            monitor: Some(id),
            wakes_agent: false,
            write_to: None,
        })
        .await?;
    }
    // The monitor's final event (or a broken connection) ends the follow.
    let end = async move {
        while let Ok(Some(reply)) = conn.next().await {
            match reply {
                Reply::Event { event } if !event.kind().is_terminal() => {}
                _ => return,
            }
        }
    };
    print_file(&info.output_path, sel, follow, end).await
}

/// Runs `wakeful terminal output`.
pub async fn terminal_output(paths: &Paths, id: String, range: &LineRange) -> Result<u8, Failure> {
    let sel = check_range(range)?;
    let mut conn = connect(paths).await?;
    let info: TerminalInfo = conn
        .call_as(Request::TerminalGet { id: id.clone() })
        .await?;
    let follow = range.follow && info.state == wakeful_core::MonitorState::Running;
    let end = async move {
        let _ = conn.call(Request::TerminalWait { id }).await;
    };
    print_file(&info.output_path, sel, follow, end).await
}
