//! Claude Code channel push: every new event of the session becomes a
//! `notifications/claude/channel` notification (its text and the events
//! held back for it: [`wakeful_core::channel`]).
//!
//! [`forward`] follows the session's events in the daemon from a given seq
//! and has them sent in seq order, each once. It first hands this process's
//! stdout to the daemon (`write_to: channel`, with the frame lock both
//! writers take around each frame, [`crate::stdout`]): the daemon then
//! writes each notification to the client itself, one process hop sooner.
//! When stdout cannot be handed over (a terminal, a file) or the daemon
//! refuses, this process relays: it reads each event and sends its
//! notification through the MCP peer, the next one only after the previous
//! was written.
//!
//! When the daemon connection breaks (the daemon restarted) the follow
//! resumes after the last event sent: the one the daemon kept in the frame
//! lock, or the last one relayed.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CustomNotification, ServerNotification};
use rmcp::service::{Peer, RoleServer};
use wakeful_client::{connect_existing, Connection, ErrorKind, Paths};
use wakeful_core::channel::Held;
pub use wakeful_core::channel::{CAPABILITY, MAX_CONTENT_BYTES, METHOD};
use wakeful_protocol::{FrameLock, OutputForm, Reply, Request};

/// Set to `1`, `wakeful mcp` relays every event itself instead of handing
/// its stdout to the daemon (to rule the hand-over out when diagnosing a
/// client).
pub const RELAY_ENV: &str = "WAKEFUL_MCP_RELAY";

/// The first pause before reconnecting to the daemon; it doubles up to
/// [`MAX_RETRY`].
const MIN_RETRY: Duration = Duration::from_millis(50);
/// The longest pause between reconnection attempts.
const MAX_RETRY: Duration = Duration::from_secs(1);

/// What lets the daemon write to this process's stdout: the frame lock of
/// this side (to read the last seq the daemon wrote), and the descriptor of
/// the daemon's side.
pub struct Handover {
    /// This process's side of the frame lock.
    pub mine: Arc<FrameLock>,
    /// The daemon's side, sent with each `events` request.
    pub theirs: OwnedFd,
}

/// Where [`forward`] pushes to and what it follows.
pub struct Push {
    /// The MCP peer (for relayed notifications).
    pub peer: Peer<RoleServer>,
    /// The daemon.
    pub paths: Paths,
    /// The session whose events are pushed.
    pub session: String,
    /// Push events after this seq; `None`: after the daemon's last seq at
    /// the first connection.
    pub after: Option<u64>,
    /// The client declared that it shows channel notifications
    /// (`experimental["claude/channel"]` in its capabilities): the daemon
    /// then counts this stream as a live wake path of the session.
    pub shows: bool,
    /// The frame lock, when stdout may be handed to the daemon.
    pub handover: Option<Handover>,
}

/// Pushes every event of the session after `push.after` until the client
/// is gone. Never starts the daemon: when it is down, this waits for it to
/// come back (any tool call or command starts it) and resumes after the
/// last event sent.
pub async fn forward(push: Push) {
    let mut state = Following {
        after: push.after,
        held: Held::default(),
        descriptions: Default::default(),
        // Only what can be written without blocking is handed over;
        // `WAKEFUL_MCP_RELAY=1` keeps every event on this process's way.
        stdout: push
            .handover
            .as_ref()
            .filter(|_| std::env::var_os(RELAY_ENV).is_none_or(|v| v.is_empty() || v == "0"))
            .and_then(|_| wakeful_client::handover::stdout_for_daemon()),
    };
    let mut retry = MIN_RETRY;
    loop {
        if let Ok(mut conn) = connect_existing(&push.paths).await {
            match follow(&mut conn, &push, &mut state).await {
                Followed::ClientGone => return,
                Followed::Progress => retry = MIN_RETRY,
                Followed::Nothing => {}
            }
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(MAX_RETRY);
    }
}

/// How one daemon connection ended.
enum Followed {
    /// The MCP client is gone: stop.
    ClientGone,
    /// At least one event was sent (or the stream was established).
    Progress,
    /// Nothing was achieved: back off before retrying.
    Nothing,
}

/// What [`forward`] keeps across daemon connections.
struct Following {
    /// The last event sent.
    after: Option<u64>,
    /// Relayed events that did not wake, read since the last notification;
    /// `after` stays before them, so a reconnection reads them again.
    held: Held,
    descriptions: wakeful_client::describe::Descriptions,
    /// Stdout, ready for the daemon; `None` once the daemon refused it (or
    /// when it cannot be handed over): events are relayed.
    stdout: Option<OwnedFd>,
}

async fn follow(conn: &mut Connection, push: &Push, state: &mut Following) -> Followed {
    let from = match state.after {
        Some(seq) => seq,
        None => match conn.call(wakeful_protocol::GetStatus {}).await {
            Ok(status) => {
                state.after = Some(status.last_seq);
                status.last_seq
            }
            Err(_) => return Followed::Nothing,
        },
    };
    let request = |write_to| {
        Request::Events(wakeful_protocol::ReadEvents {
            session: push.session.clone(),
            after: from,
            follow: true,
            monitor: None,
            wakes_agent: push.shows,
            write_to,
        })
    };
    // A new connection starts a new stream: events held by the last one
    // come again.
    state.held = Held::default();
    if let (Some(handover), Some(stdout)) = (&push.handover, &state.stdout) {
        let fds = [stdout.as_fd(), handover.theirs.as_fd()];
        if conn
            .send_with_fds(request(Some(OutputForm::Channel)), &fds)
            .await
            .is_err()
        {
            return Followed::Nothing;
        }
        return handed(conn, handover, state).await;
    }
    if conn.send(request(None)).await.is_err() {
        return Followed::Nothing;
    }
    relay(conn, push, state).await
}

/// The daemon writes the notifications: wait for the stream's end, then
/// take the last seq it wrote.
async fn handed(conn: &mut Connection, handover: &Handover, state: &mut Following) -> Followed {
    let end = conn.next().await;
    let written = handover.mine.recorded().ok().flatten();
    let progress = match written {
        Some(seq) if state.after.is_none_or(|a| seq > a) => {
            state.after = Some(seq);
            Followed::Progress
        }
        _ => Followed::Nothing,
    };
    match end {
        Ok(Some(Reply::Error {
            kind: ErrorKind::OutputClosed,
            ..
        })) => Followed::ClientGone,
        Ok(Some(Reply::Error {
            kind: ErrorKind::Invalid,
            message,
        })) => {
            // An older daemon, or a descriptor it will not write to: relay
            // from now on.
            eprintln!(
                "wakeful mcp: the daemon does not write to this stdout ({message}); relaying events instead"
            );
            state.stdout = None;
            Followed::Progress
        }
        Ok(Some(Reply::Error { message, .. })) => {
            eprintln!("wakeful mcp: the daemon refused to stream events: {message}");
            progress
        }
        _ => progress,
    }
}

/// This process sends the notifications.
async fn relay(conn: &mut Connection, push: &Push, state: &mut Following) -> Followed {
    let mut result = Followed::Nothing;
    loop {
        match conn.next().await {
            Ok(Some(Reply::Event { event })) => {
                if state.after.is_some_and(|a| event.seq <= a) {
                    continue;
                }
                let description = state.descriptions.get(&push.paths, &event.monitor_id).await;
                let Some(notification) = state.held.offer(&event, description.as_deref()) else {
                    continue;
                };
                let n = CustomNotification::new(METHOD, Some(notification.params()));
                if push
                    .peer
                    .send_notification(ServerNotification::CustomNotification(n))
                    .await
                    .is_err()
                {
                    return Followed::ClientGone;
                }
                state.after = Some(event.seq);
                result = Followed::Progress;
            }
            Ok(Some(Reply::Error { message, .. })) => {
                eprintln!("wakeful mcp: the daemon refused to stream events: {message}");
                return result;
            }
            // A follow stream does not end by itself; reconnect if it does.
            Ok(Some(Reply::Ok { .. })) | Ok(None) | Err(_) => return result,
            Ok(Some(Reply::Batch { .. })) => {}
        }
    }
}
