//! `wakeful output`: a monitor's output file, or a range of its lines,
//! optionally followed until the monitor ends. The file is read directly
//! (it belongs to the same user); the daemon only says where it is and
//! when the monitor ended. New data is noticed through inotify, not by
//! polling.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};

use notify::{RecursiveMode, Watcher};
use wakeful_client::{connect, Paths};
use wakeful_core::terminal::TerminalInfo;
use wakeful_core::MonitorInfo;
use wakeful_protocol::{Reply, Request};

use crate::cli::LineRange;
use crate::{exit, Failure};

/// Prints lines `from..=to` (1-based, inclusive) that are complete in the
/// file; returns the number of the next line and the byte offset after it.
fn print_range(
    file: &mut std::fs::File,
    offset: u64,
    mut line_no: u64,
    from: u64,
    to: u64,
    out: &mut impl Write,
) -> std::io::Result<(u64, u64)> {
    file.seek(SeekFrom::Start(offset))?;
    let mut reader = BufReader::new(file.take(u64::MAX));
    let mut pos = offset;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 || buf.last() != Some(&b'\n') {
            // An unfinished line stays for the next read.
            return Ok((line_no, pos));
        }
        pos += n as u64;
        if line_no >= from && line_no <= to {
            out.write_all(&buf)?;
        }
        line_no += 1;
        if line_no > to {
            return Ok((line_no, pos));
        }
    }
}

fn check_range(range: &LineRange) -> Result<(u64, u64), Failure> {
    let from = range.from_line.unwrap_or(1);
    let to = range.to_line.unwrap_or(u64::MAX);
    if from == 0 || to < from {
        return Err(Failure::new(
            exit::USAGE,
            format!("invalid line range {from}..{to}: lines are numbered from 1 and --to-line must not be below --from-line"),
        ));
    }
    Ok((from, to))
}

/// Prints lines `from..=to` of `path`; with `follow`, keeps printing new
/// lines (woken by inotify) until `end` completes, then prints what is left.
async fn print_file(
    path: &std::path::Path,
    from: u64,
    to: u64,
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
    let (mut line_no, mut offset) = print_range(&mut file, 0, 1, from, to, &mut stdout.lock())?;
    if !follow || line_no > to {
        return Ok(0);
    }
    tokio::pin!(end);
    loop {
        tokio::select! {
            _ = rx.recv() => {
                (line_no, offset) = print_range(&mut file, offset, line_no, from, to, &mut stdout.lock())?;
                stdout.lock().flush()?;
                if line_no > to {
                    return Ok(0);
                }
            }
            _ = &mut end => {
                print_range(&mut file, offset, line_no, from, to, &mut stdout.lock())?;
                return Ok(0);
            }
        }
    }
}

/// Runs `wakeful output`.
pub async fn output(paths: &Paths, id: String, range: &LineRange) -> Result<u8, Failure> {
    let (from, to) = check_range(range)?;
    let mut conn = connect(paths).await?;
    let info: MonitorInfo = conn.call_as(Request::Get { id: id.clone() }).await?;
    let follow = range.follow && info.is_active();
    if follow {
        conn.send(Request::Events {
            session: info.session.clone(),
            after: 0,
            follow: true,
            monitor: Some(id),
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
    print_file(&info.output_path, from, to, follow, end).await
}

/// Runs `wakeful terminal output`.
pub async fn terminal_output(paths: &Paths, id: String, range: &LineRange) -> Result<u8, Failure> {
    let (from, to) = check_range(range)?;
    let mut conn = connect(paths).await?;
    let info: TerminalInfo = conn
        .call_as(Request::TerminalGet { id: id.clone() })
        .await?;
    let follow = range.follow && info.state == wakeful_core::MonitorState::Running;
    let end = async move {
        let _ = conn.call(Request::TerminalWait { id }).await;
    };
    print_file(&info.output_path, from, to, follow, end).await
}
