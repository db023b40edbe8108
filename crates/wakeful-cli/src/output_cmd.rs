//! `wakeful output`: a monitor's output file, or a range of its lines,
//! optionally followed until the monitor ends. The file is read directly
//! (it belongs to the same user), across its segments; a range the file
//! dropped (its cap, a disk low on space, a prune) prints as one line that
//! says so (docs/STORAGE.md). The daemon only says where it is and when
//! the monitor ended. New data is noticed through the file system's change
//! notification (the `notify` crate), not by polling.
//!
//! Each line is printed sanitized (decoded as UTF-8 with U+FFFD for what is
//! not, control characters and escape sequences removed, one printed line
//! per line of the file); `--raw` prints the file's bytes as they are.

use std::io::{BufWriter, Write};

use notify::{RecursiveMode, Watcher};
use wakeful_client::output_file::{Item, OutputIndex};
use wakeful_client::{connect, Paths};
use wakeful_core::terminal::TerminalInfo;
use wakeful_core::MonitorInfo;

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

/// Writes one line of the file (`raw`: its bytes as they are).
fn print_line(line: &[u8], raw: bool, out: &mut impl Write) -> std::io::Result<()> {
    if raw {
        return out.write_all(line);
    }
    let text = String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(line));
    writeln!(out, "{}", wakeful_core::present::one_line(&text))
}

/// Prints the selected items from line `next` on that are complete in the
/// file; returns the number of the next line to print. A dropped range
/// prints one line that says so (with `--raw`, on stderr: stdout keeps
/// only the file's bytes). Output is flushed before it returns.
fn print_range(
    index: &OutputIndex,
    next: u64,
    sel: Selection,
    partial: bool,
    out: impl Write,
) -> Result<u64, Failure> {
    let mut out = BufWriter::new(out);
    let mut next = next.max(sel.from);
    while next <= sel.to {
        let items = index
            .items(next, sel.to, 4096, partial)
            .map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?;
        let Some((last, _)) = items.last() else {
            break;
        };
        let mut after = *last + 1;
        for (_, item) in &items {
            match item {
                Item::Line(bytes) => print_line(bytes, sel.raw, &mut out)?,
                dropped => {
                    let text = dropped.dropped_text().unwrap_or_default();
                    if sel.raw {
                        out.flush()?;
                        eprintln!("{text}");
                    } else {
                        writeln!(out, "{text}")?;
                    }
                    if let Item::Dropped { to_line, .. } = dropped {
                        after = after.max(to_line + 1);
                    }
                }
            }
        }
        next = after;
    }
    out.flush()?;
    Ok(next)
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

/// Prints the selected lines of `path` (across its segments, saying
/// where lines were dropped); with `follow`, keeps printing new lines
/// (woken by a change notification on its directory) until `end` completes, then prints
/// what is left, a last line without a newline too.
async fn print_file(
    path: &std::path::Path,
    sel: Selection,
    follow: bool,
    end: impl std::future::Future<Output = ()>,
) -> Result<u8, Failure> {
    let cannot = |e: &dyn std::fmt::Display| {
        Failure::new(
            exit::FAILURE,
            format!("cannot open {}: {e}", path.display()),
        )
    };
    let stdout = std::io::stdout();
    // Watch before the first read, so nothing written in between is missed:
    // the directory, since the file is renamed when it is rotated.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Off Linux the watcher is kqueue's (macOS, the BSDs; not FSEvents, which
    // needs Apple's SDK to link), which tells of a directory's entries but not
    // of appends to a file in it: there the follow also looks every 100 ms,
    // as the posix backend's followed files do (docs/PLATFORMS.md).
    #[cfg(not(target_os = "linux"))]
    if follow {
        let tx = tx.clone();
        tokio::spawn(async move {
            while !tx.is_closed() {
                let _ = tx.try_send(());
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        });
    }
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let ours = res.map_or(true, |ev| {
            ev.paths.iter().any(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(name.as_str()))
            })
        });
        if ours {
            // A full channel already holds a wake-up; nothing is lost.
            let _ = tx.try_send(());
        }
    })
    .map_err(|e| cannot(&e))?;
    if follow {
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|e| cannot(&e))?;
    }
    let mut index = OutputIndex::open(path).map_err(|e| cannot(&e))?;
    let mut next = print_range(&index, sel.from, sel, !follow, stdout.lock())?;
    if !follow || next > sel.to {
        return Ok(0);
    }
    tokio::pin!(end);
    loop {
        tokio::select! {
            _ = rx.recv() => {
                index.refresh().map_err(|e| cannot(&e))?;
                next = print_range(&index, next, sel, false, stdout.lock())?;
                if next > sel.to {
                    return Ok(0);
                }
            }
            _ = &mut end => {
                index.refresh().map_err(|e| cannot(&e))?;
                print_range(&index, next, sel, true, stdout.lock())?;
                return Ok(0);
            }
        }
    }
}

/// Runs `wakeful output`.
pub async fn output(paths: &Paths, id: String, range: &LineRange) -> Result<u8, Failure> {
    let sel = check_range(range)?;
    let mut conn = connect(paths).await?;
    let info: MonitorInfo = conn
        .call(wakeful_protocol::GetMonitor { id: id.clone() })
        .await?;
    let follow = range.follow && info.is_active();
    let request = wakeful_protocol::ReadEvents {
        session: info.session.clone(),
        follow: true,
        monitor: Some(id),
        ..Default::default()
    };
    let events = if follow {
        Some(conn.events(request).await?)
    } else {
        None
    };
    // The monitor's final event (or a broken connection) ends the follow.
    let end = async move {
        let Some(mut events) = events else { return };
        while let Ok(Some(e)) = events.next().await {
            if e.decode().map_or(true, |e| e.kind().is_terminal()) {
                return;
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
        .call(wakeful_protocol::GetTerminal { id: id.clone() })
        .await?;
    let follow = range.follow && info.state == wakeful_core::MonitorState::Running;
    let end = async move {
        let _ = conn.call(wakeful_protocol::WaitTerminal { id }).await;
    };
    print_file(&info.output_path, sel, follow, end).await
}
