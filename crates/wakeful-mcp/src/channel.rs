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
use wakeful_client::{ClientError, ErrorKind, Followed, Follower, Paths};
use wakeful_core::channel::Held;
pub use wakeful_core::channel::{CAPABILITY, MAX_CONTENT_BYTES, METHOD};
use wakeful_protocol::{FrameLock, OutputForm};

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
    // Relayed events that did not wake, read since the last notification;
    // the follower resumes before them, so a reconnection reads them again.
    let mut held = Held::default();
    // Stdout, ready for the daemon; `None` once the daemon refused it (or
    // when it cannot be handed over): events are relayed. Only what can be
    // written without blocking is handed over; `WAKEFUL_MCP_RELAY=1` keeps
    // every event on this process's way.
    let mut stdout = push
        .handover
        .as_ref()
        .filter(|_| std::env::var_os(RELAY_ENV).is_none_or(|v| v.is_empty() || v == "0"))
        .and_then(|_| wakeful_client::handover::stdout_for_daemon());
    let mut follower = Follower::new(push.paths.clone(), push.after, 0).retry(MIN_RETRY, MAX_RETRY);
    loop {
        let handing = push.handover.as_ref().zip(stdout.as_ref());
        let fds = handing.map(|(h, out)| [out.as_fd(), h.theirs.as_fd()]);
        let request = |after| wakeful_protocol::ReadEvents {
            session: push.session.clone(),
            after,
            follow: true,
            wakes_agent: push.shows,
            write_to: handing.map(|_| OutputForm::Channel),
            describe: handing.is_none(),
            ..Default::default()
        };
        match follower
            .next(request, fds.as_ref().map_or(&[], |f| f))
            .await
        {
            // A new connection starts a new stream: events held by the last
            // one come again.
            Followed::Live { .. } => held = Held::default(),
            Followed::Event(event, description) => {
                let Some(notification) = held.offer(&event, description.as_deref()) else {
                    continue;
                };
                let n = CustomNotification::new(METHOD, Some(notification.params()));
                let sent = push
                    .peer
                    .send_notification(ServerNotification::CustomNotification(n))
                    .await;
                if sent.is_err() {
                    return;
                }
                follower.resume_after(event.seq);
            }
            Followed::Lost(end) => {
                // The daemon wrote the notifications: the last seq it wrote.
                let written = push.handover.as_ref().filter(|_| stdout.is_some());
                if let Some(seq) = written.and_then(|h| h.mine.recorded().ok().flatten()) {
                    if follower.after().is_none_or(|a| seq > a) {
                        follower.resume_after(seq);
                    }
                }
                match end {
                    ClientError::Refused {
                        kind: ErrorKind::OutputClosed,
                        ..
                    } => return,
                    ClientError::Refused {
                        kind: ErrorKind::Invalid,
                        message,
                    } if stdout.is_some() => {
                        // An older daemon, or a descriptor it will not write
                        // to: relay from now on.
                        eprintln!("wakeful mcp: the daemon does not write to this stdout ({message}); relaying events instead");
                        stdout = None;
                        if let Some(after) = follower.after() {
                            follower.resume_after(after);
                        }
                    }
                    ClientError::Refused { message, .. } => {
                        eprintln!("wakeful mcp: the daemon refused to stream events: {message}");
                    }
                    _ => {}
                }
            }
        }
    }
}
