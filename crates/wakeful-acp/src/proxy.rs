//! The proxy's IO: the agent's process, the two line streams, and the
//! waiter that takes the session's events from the daemon.

use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use wakeful_client::{ClientError, Paths};
use wakeful_core::present;
use wakeful_protocol::ErrorKind;

use crate::state::{Action, Machine, Wake};
use crate::{Error, Options};

/// Largest framed text of one wake (the rest of the events come with the
/// next); the same bounds as the daemon's wake routes.
const MAX_TEXT: usize = 48 * 1024;
/// Largest body of one event in a wake.
const MAX_EVENT_TEXT: usize = 16 * 1024;
/// How long the agent has to exit by itself once its stdin is closed.
const EXIT_GRACE: Duration = Duration::from_secs(3);
/// How long the agent's process group has between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// A wake handed from the waiter to the proxy's loop, with the way back to
/// say whether the agent accepted it.
struct Offer {
    wake: Wake,
    accepted: oneshot::Sender<bool>,
}

/// Runs the proxy until the editor closes its stdin or the agent ends;
/// returns the exit code (0 on the editor's close, else the agent's).
pub(crate) async fn run(paths: Paths, opts: Options) -> Result<u8, Error> {
    let Some((program, args)) = opts.agent.split_first() else {
        return Err(Error::Usage("no agent command given after --".into()));
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .env(wakeful_core::session::WAKEFUL_SESSION, &opts.session)
        .env(crate::PROXY_ENV, std::process::id().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0);
    if let Some(rule) = &opts.wake_on {
        cmd.env(crate::WAKE_ON_ENV, rule);
    }
    // SAFETY: the closure runs in the child between fork and exec and makes
    // one async-signal-safe system call (prctl); it allocates nothing.
    unsafe {
        cmd.pre_exec(wakeful_platform::tree::die_with_parent);
    }
    let mut child = Command::from(cmd)
        .kill_on_drop(false)
        .spawn()
        .map_err(|e| Error::Spawn(program.clone(), e))?;
    let pgid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
    let (Some(agent_in), Some(agent_out)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(Error::Spawn(
            program.clone(),
            std::io::Error::other("no pipes to the agent"),
        ));
    };
    let mut agent_in = Some(agent_in);
    let mut agent_lines = BufReader::new(agent_out).lines();
    let mut editor_lines = BufReader::new(tokio::io::stdin()).lines();
    let mut editor_out = tokio::io::stdout();

    let (offers_tx, mut offers) = mpsc::channel::<Offer>(1);
    let waiter = tokio::spawn(waiter(paths, opts.session.clone(), offers_tx));

    let mut machine = Machine::new();
    let mut pending: Option<oneshot::Sender<bool>> = None;
    let code = loop {
        let actions = tokio::select! {
            line = editor_lines.next_line() => match line {
                Ok(Some(line)) => machine.from_editor(line),
                // The editor is done: close the agent's stdin and end.
                Ok(None) | Err(_) => break 0,
            },
            line = agent_lines.next_line() => match line {
                Ok(Some(line)) => machine.from_agent(line),
                Ok(None) | Err(_) => {
                    let code = wait_exit(&mut child, EXIT_GRACE).await.unwrap_or(1);
                    eprintln!("wakeful acp-proxy: the agent ended (exit {code})");
                    break code;
                }
            },
            Some(offer) = offers.recv() => {
                pending = Some(offer.accepted);
                machine.wake(offer.wake)
            }
        };
        let mut editor_gone = false;
        for action in actions {
            match action {
                Action::ToAgent(line) => {
                    if let Some(w) = agent_in.as_mut() {
                        if write_line(w, &line).await.is_err() {
                            agent_in = None;
                        }
                    }
                }
                Action::ToEditor(line) => {
                    if write_line(&mut editor_out, &line).await.is_err() {
                        // Nobody reads us any more.
                        editor_gone = true;
                    }
                }
                Action::Accepted { .. } => {
                    if let Some(tx) = pending.take() {
                        let _ = tx.send(true);
                    }
                }
                Action::Refused { reason } => {
                    eprintln!("wakeful acp-proxy: wake not accepted: {reason}");
                    if let Some(tx) = pending.take() {
                        let _ = tx.send(false);
                    }
                }
            }
        }
        if editor_gone {
            break 0;
        }
    };
    machine.agent_gone();
    drop(pending);
    waiter.abort();
    drop(agent_in);
    end_agent(&mut child, pgid).await;
    Ok(code)
}

async fn write_line<W: AsyncWrite + Unpin>(w: &mut W, line: &str) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    w.write_all(&buf).await?;
    w.flush().await
}

/// The agent's exit code, if it exits within `grace`.
async fn wait_exit(child: &mut Child, grace: Duration) -> Option<u8> {
    let status = tokio::time::timeout(grace, child.wait()).await.ok()?.ok()?;
    use std::os::unix::process::ExitStatusExt;
    Some(match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c).unwrap_or(1),
        (None, Some(s)) => u8::try_from(128 + s).unwrap_or(1),
        _ => 1,
    })
}

/// Ends the agent and everything in its process group: its stdin is closed
/// already; it has [`EXIT_GRACE`] to exit, then the group gets SIGTERM, and
/// SIGKILL after [`KILL_GRACE`].
async fn end_agent(child: &mut Child, pgid: i32) {
    let _ = wait_exit(child, EXIT_GRACE).await;
    if pgid <= 0 {
        return;
    }
    if !group_alive(pgid) {
        return;
    }
    signal_group(pgid, libc::SIGTERM);
    let deadline = tokio::time::Instant::now() + KILL_GRACE;
    loop {
        let _ = tokio::time::timeout(Duration::from_millis(20), child.wait()).await;
        if !group_alive(pgid) || tokio::time::Instant::now() >= deadline {
            break;
        }
    }
    if group_alive(pgid) {
        signal_group(pgid, libc::SIGKILL);
    }
    let _ = tokio::time::timeout(KILL_GRACE, child.wait()).await;
}

/// Whether a live process (not a zombie: an orphan's zombie waits for its
/// reaper, not for us) is still in the group.
fn group_alive(pgid: i32) -> bool {
    wakeful_platform::tree::all_processes()
        .iter()
        .any(|p| p.pgrp == pgid && p.is_live())
}

fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: kill(2) on the agent's own process group.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// Takes the session's events through `wait` (consumer
/// [`crate::CONSUMER`]), one batch at a time, frames them like every wake
/// and offers them to the proxy's loop; acknowledges a batch only once the
/// agent accepted it. A refused batch is dropped with the connection
/// (unacknowledged: the next `wait` hands it out again) after a backoff.
async fn waiter(paths: Paths, session: String, offers: mpsc::Sender<Offer>) {
    let mut attempt = 0u32;
    loop {
        match take_one(&paths, &session, &offers).await {
            Ok(true) => attempt = 0,
            Ok(false) => {
                attempt += 1;
                tokio::time::sleep(wakeful_core::wake_machine::backoff(attempt)).await;
            }
            Err(Stop) => return,
        }
    }
}

/// The proxy's loop is gone.
struct Stop;

/// One batch: `Ok(true)` accepted and acknowledged, `Ok(false)` not (retry
/// after a pause).
async fn take_one(
    paths: &Paths,
    session: &str,
    offers: &mpsc::Sender<Offer>,
) -> Result<bool, Stop> {
    let request = wakeful_protocol::WaitEvents {
        session: session.to_string(),
        consumer: crate::CONSUMER.to_string(),
        describe: true,
        ..Default::default()
    };
    let Ok(conn) = wakeful_client::connect(paths).await else {
        return Ok(false);
    };
    let Ok(mut waiter) = conn.waiter(request).await else {
        return Ok(false);
    };
    let waited = tokio::select! {
        r = waiter.wait() => r,
        _ = offers.closed() => return Err(Stop),
    };
    let mut batch = match waited {
        Ok(Some(batch)) => batch,
        Err(ClientError::Refused {
            kind: ErrorKind::Timeout | ErrorKind::Superseded,
            ..
        }) => return Ok(true),
        Err(ClientError::Refused { message, .. }) => {
            eprintln!("wakeful acp-proxy: wait: {message}");
            return Ok(false);
        }
        _ => return Ok(false),
    };
    let described = &batch.events;
    let (Some(first), Some(_)) = (described.first(), described.last()) else {
        return Ok(false);
    };
    let from = first.0.seq;
    // The text holds the first `n` events; only those are acknowledged.
    let to_all = described.last().map_or(from, |(e, _)| e.seq);
    let (text, n) = present::batch(
        described,
        MAX_TEXT,
        MAX_EVENT_TEXT,
        Some(&wakeful_core::wake_machine::wake_id(from, to_all)),
    );
    let Some((last, _)) = described.get(n.wrapping_sub(1)) else {
        return Ok(false);
    };
    let last_seq = last.seq;
    let (text, _) = if n < described.len() {
        // The id names what the text holds.
        present::batch(
            &described[..n],
            MAX_TEXT,
            MAX_EVENT_TEXT,
            Some(&wakeful_core::wake_machine::wake_id(from, last_seq)),
        )
    } else {
        (text, n)
    };
    let (tx, rx) = oneshot::channel();
    if offers
        .send(Offer {
            wake: Wake { text, last_seq },
            accepted: tx,
        })
        .await
        .is_err()
    {
        return Err(Stop);
    }
    match rx.await {
        Ok(true) => {
            batch.keep(n);
            Ok(waiter.ack_last(batch).await.is_ok())
        }
        Ok(false) => Ok(false),
        Err(_) => Err(Stop),
    }
}
