//! Serving the socket: one task per connection, one request at a time per
//! connection. This module holds only the framing and the dispatch: each
//! request goes to its family's handler, a function from the daemon's
//! [`State`] and the typed request to its typed result
//! ([`wakeful_protocol::Call::Reply`]) or a failure:
//!
//! - [`monitors`]: `start`, `list`, `get`, `stop`, `session_end`;
//! - [`events`]: the event streams (`events`, `events_all`), the one kind
//!   of request that writes to the connection (or a handed-over
//!   descriptor) as it goes;
//! - [`wait`]: `wait` and its batches and acknowledgements, `consumers`;
//! - [`terminals`]: `run`, `terminal_*`;
//! - [`tasks`]: `task_create`, `task_get`, `task_cancel`, `task_hand`:
//!   background tasks, each a `wait` the daemon runs and keeps for a
//!   client that fetches its outcome later;
//! - [`subscriptions`]: `event_subscribe`, `event_unsubscribe`: webhook
//!   subscriptions of MCP Events, kept across restarts, and their signed
//!   deliveries;
//! - [`wakes`]: `wake_set`, `wake_show`, `wake_clear`, `wake_check`,
//!   `digest`;
//! - [`admin`]: `status`, `shutdown`, `upgrade` (its check; the
//!   handover is `crate::upgrade`), `import`, `prune`, `prunes`;
//! - [`cluster`]: `cluster_status`, `cluster_monitors`, and `start` or
//!   `stop` of another host's monitor through the link.
//!
//! Beside them, the connection's own parts: `conn` (framing and replies),
//! `quiet` (a socket polled for reading only, and the descriptors a
//! client hands over) and `handed` (events written to such a descriptor
//! in the form the client asked for).
//!
//! Followers never poll: each is a follower of the engine's hub.

use std::sync::Arc;
use std::time::Duration;

use crate::state::State;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use wakeful_protocol::{ErrorKind, Reply, Request};

pub mod admin;
pub mod cluster;
mod conn;
pub mod events;
mod handed;
pub mod monitors;
mod quiet;
pub mod subscriptions;
pub mod tasks;
pub mod terminals;
pub mod wait;
pub mod wakes;

pub use crate::state::Limits;
use conn::{ClientLines, Conn};

/// Whether an accept error means "no descriptor left" (wait for one to
/// come free) rather than a problem of one connection.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS) | Some(libc::ENOMEM)
    )
}

/// A descriptor kept in reserve: freed to accept (and refuse) one waiting
/// client when the daemon has no descriptor left.
fn reserve_descriptor() -> Option<std::fs::File> {
    std::fs::File::open("/dev/null").ok()
}

/// Accepts connections until a `shutdown` request, SIGTERM or SIGINT. An
/// accept error never ends the daemon: out of descriptors, it answers the
/// waiting client `busy` (with a descriptor kept in reserve) and waits for
/// a connection to close (or at most a second) before accepting again.
pub async fn serve(listener: &UnixListener, state: Arc<State>) -> std::io::Result<()> {
    let mut stop = state.shutdown.subscribe();
    let mut upgrade = state.upgrade_to.subscribe();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut reserve = reserve_descriptor();
    let mut pause = Duration::from_millis(10);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    pause = Duration::from_millis(10);
                    let state = state.clone();
                    tokio::spawn(async move {
                        if let Err(e) = connection(stream, state).await {
                            tracing::debug!("connection ended: {e}");
                        }
                    });
                }
                Err(e) => {
                    state.health.accept_failed(&e);
                    if out_of_descriptors(&e) {
                        let closed = state.health.closed.notified();
                        tokio::pin!(closed);
                        closed.as_mut().enable();
                        // Tell one waiting client why instead of leaving it hanging.
                        drop(reserve.take());
                        let waiting = tokio::time::timeout(Duration::from_millis(1), listener.accept()).await;
                        if let Ok(Ok((stream, _))) = waiting {
                            state.health.refused.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            tokio::spawn(refuse(stream, "the wakeful daemon has no file descriptor left for another connection (see `wakeful status` and its log); close some clients or raise its limit of open files, then try again".into()));
                        }
                        reserve = reserve_descriptor();
                        tokio::select! {
                            _ = closed => {}
                            _ = tokio::time::sleep(pause) => {}
                        }
                        pause = (pause * 2).min(Duration::from_secs(1));
                    }
                }
            },
            // (The `Ref` a `wait_for` gives is dropped in its own future:
            // it must not live in the select's output.)
            _ = async { stop.wait_for(|s| *s).await.is_ok() } => return Ok(()),
            // Connections go on waiting in the socket's backlog for the
            // new program (`upgrade`).
            _ = async { upgrade.wait_for(|u| u.is_some()).await.is_ok() } => return Ok(()),
            _ = term.recv() => return Ok(()),
            _ = int.recv() => return Ok(()),
        }
    }
}

/// Answers a connection `busy` and closes it.
async fn refuse(stream: UnixStream, message: String) {
    let (r, mut w) = stream.into_split();
    let mut line = serde_json::to_vec(&Reply::Error {
        kind: ErrorKind::Busy,
        message,
    })
    .unwrap_or_default();
    line.push(b'\n');
    // Let the client finish its request so it reads the answer, not a reset.
    let mut lines = BufReader::new(r).lines();
    let _ = tokio::time::timeout(Duration::from_millis(200), lines.next_line()).await;
    let _ = w.write_all(&line).await;
}

async fn connection(stream: UnixStream, state: Arc<State>) -> std::io::Result<()> {
    let peer = stream.peer_cred()?;
    let pid = peer.pid().and_then(|p| u32::try_from(p).ok());
    let max = state.limits.max_connections_per_process;
    let _counted = match state.health.admit(pid, max) {
        Ok(c) => c,
        Err(n) => {
            state
                .health
                .refused
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tracing::warn!(
                "refused a connection of process {}: it holds {n} already (the limit)",
                pid.unwrap_or(0)
            );
            refuse(
                stream,
                format!(
                    "process {} already holds {n} connections to the wakeful daemon (the limit, `[limits] max_connections_per_process` in config.toml); close some first",
                    pid.unwrap_or(0)
                ),
            )
            .await;
            return Ok(());
        }
    };
    let mut conn = open(stream)?;
    let me = nix::unistd::getuid().as_raw();
    if peer.uid() != me {
        // Only the owner may use this daemon. Let the client finish sending
        // its request (briefly) so that it reads the refusal instead of a
        // broken pipe; the request itself is never looked at.
        let _ = tokio::time::timeout(Duration::from_secs(1), conn.lines.next_line()).await;
        conn.error(
            ErrorKind::Denied,
            format!(
                "connection refused: uid {} is not the daemon's owner",
                peer.uid()
            ),
        )
        .await?;
        return Ok(());
    }
    requests(conn, &state, pid).await
}

fn open(stream: UnixStream) -> std::io::Result<Conn> {
    let (r, w, passed) = quiet::split(stream)?;
    Ok(Conn {
        lines: ClientLines::new(r),
        out: w,
        passed,
    })
}

/// Serves the daemon's own end of a socket pair (a background task's
/// wait, [`tasks`]) as a client's connection: not counted against a
/// process's connections, and its owner is the daemon itself. Boxed: a
/// task's wait is served by the dispatch that created the task.
pub(crate) fn serve_internal(
    stream: UnixStream,
    state: Arc<State>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>> {
    Box::pin(async move { requests(open(stream)?, &state, None).await })
}

/// Answers a connection's requests until it ends.
async fn requests(mut conn: Conn, state: &Arc<State>, pid: Option<u32>) -> std::io::Result<()> {
    let mut upgrading = state.upgrading.subscribe();
    loop {
        // While the daemon hands over to a new program, a connection that
        // waits for a request closes (a request already sent is read
        // first): its client connects again to the new program.
        let next = tokio::select! {
            biased;
            next = conn.request() => next?,
            _ = async { upgrading.wait_for(|u| *u).await.is_ok() } => return Ok(()),
        };
        let Some(req) = next else {
            return Ok(());
        };
        match req {
            Ok(req) => {
                tracing::debug!("request {} from process {}", req.op(), pid.unwrap_or(0));
                dispatch(&mut conn, state, req).await?
            }
            Err((kind, msg)) => {
                tracing::debug!("refused a request ({kind:?}): {msg}");
                conn.error(kind, msg).await?
            }
        }
    }
}

/// Hands a request to its family's handler and answers with what it
/// returns (the streams answer as they go).
async fn dispatch(conn: &mut Conn, state: &Arc<State>, req: Request) -> std::io::Result<()> {
    match req {
        Request::Status(r) => conn.answer(admin::status(state, r)).await,
        Request::Start(r) => {
            let started = match r.host.clone() {
                Some(host) => cluster::start(state, &host, r).await,
                None => monitors::start(state, r).await,
            };
            conn.answer(started).await
        }
        Request::List(r) => conn.answer(monitors::list(state, r)).await,
        Request::Get(r) => conn.answer(monitors::get(state, r)).await,
        Request::Stop(r) => {
            let stopped = match monitors::stop(state, &r).await {
                // Not here: a monitor of another host of the cluster?
                Err((_, not_here)) => cluster::stop(state, r, not_here).await,
                here => here,
            };
            conn.answer(stopped).await
        }
        Request::SessionEnd(r) => conn.answer(monitors::end_session(state, r).await).await,
        Request::Events(r) => events::read(conn, state, r).await,
        Request::EventsAll(r) => events::read_all(conn, state, r).await,
        Request::Wait(r) => wait::wait(conn, state, r).await,
        Request::Ack(_) => {
            conn.error(ErrorKind::Invalid, "ack is only valid inside a wait")
                .await
        }
        Request::Consumers(r) => conn.answer(wait::consumers(state, r)).await,
        Request::Run(r) => conn.answer(terminals::run(state, r).await).await,
        Request::TerminalList(r) => conn.answer(terminals::list(state, r)).await,
        Request::TerminalGet(r) => conn.answer(terminals::get(state, r)).await,
        Request::TerminalKill(r) => conn.answer(terminals::kill(state, r).await).await,
        Request::TerminalWait(r) => conn.answer(terminals::wait(state, r).await).await,
        Request::WakeSet(r) => conn.answer(wakes::set(state, r).await).await,
        Request::WakeShow(r) => conn.answer(wakes::show(state, r)).await,
        Request::WakeClear(r) => conn.answer(wakes::clear(state, r).await).await,
        Request::WakeCheck(r) => conn.answer(wakes::check(state, r)).await,
        Request::Digest(r) => conn.answer(wakes::digest(state, r)).await,
        Request::Import(r) => conn.answer(admin::import(state, r).await).await,
        Request::ClusterStatus(r) => conn.answer(cluster::status(state, r).await).await,
        Request::ClusterMonitors(r) => conn.answer(cluster::monitors(state, r).await).await,
        Request::Prune(r) => conn.answer(admin::prune(state, r).await).await,
        Request::Prunes(r) => conn.answer(admin::prunes(state, r)).await,
        Request::TaskCreate(r) => conn.answer(tasks::create(state, r).await).await,
        Request::TaskGet(r) => conn.answer(tasks::get(state, r).await).await,
        Request::TaskCancel(r) => conn.answer(tasks::cancel(state, r)).await,
        Request::TaskHand(r) => conn.answer(tasks::hand(state, r)).await,
        Request::EventSubscribe(r) => conn.answer(subscriptions::subscribe(state, r).await).await,
        Request::EventUnsubscribe(r) => conn.answer(subscriptions::unsubscribe(state, r)).await,
        Request::Shutdown(r) => {
            conn.ok(&admin::shutdown_result(r)).await?;
            state.shutdown.send_replace(true);
            Ok(())
        }
        Request::Upgrade(r) => {
            let binary = r.binary.clone();
            match admin::upgrade(state, r).await {
                Ok(result) => {
                    conn.ok(&result).await?;
                    state.upgrade_to.send_replace(Some(binary));
                    Ok(())
                }
                Err((kind, message)) => conn.error(kind, message).await,
            }
        }
    }
}

#[cfg(test)]
mod tests;
