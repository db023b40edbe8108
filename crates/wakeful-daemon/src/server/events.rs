//! The event streams: `events` (one session's, or one monitor's) and
//! `events_all`. One follower of the hub each; the events go to the
//! connection as event replies, or straight to a descriptor the client
//! handed over.

use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use wakeful_engine::{Committed, Filter, Follow, FollowError};
use wakeful_protocol::{
    described_event_reply_line, event_reply_line, Descriptions, ErrorKind, ReadAllEvents,
    ReadEvents, StreamEnd,
};

use super::conn::Conn;
use super::monitors::find;
use crate::server::handed::Handed;
use crate::server::quiet::QuietWrite;
use crate::state::{Following, Pushing, State};

/// `events`: the session's events (or one monitor's), to the connection or
/// to the descriptor that came with the request.
pub(crate) async fn read(conn: &mut Conn, state: &State, r: ReadEvents) -> std::io::Result<()> {
    let ReadEvents {
        session,
        after,
        follow,
        monitor,
        wakes_agent,
        write_to,
        describe,
    } = r;
    let output = match write_to {
        None => None,
        Some(form) => match Handed::new(conn.passed.take(), form) {
            Ok(out) => {
                tracing::debug!(%session, ?form, "writing events to a descriptor the client handed over");
                Some(out)
            }
            Err(e) => {
                tracing::info!(%session, ?form, "refused a handed-over descriptor: {e}");
                return conn.error(ErrorKind::Invalid, e.to_string()).await;
            }
        },
    };
    let _pushing = (follow && wakes_agent).then(|| Pushing::new(state, &session));
    let stream = EventStream {
        session: Some(&session),
        monitor: monitor.as_deref(),
        after,
        follow,
        describe,
    };
    stream_events(conn, state, stream, output).await
}

/// `events_all`: every session's events.
pub(crate) async fn read_all(
    conn: &mut Conn,
    state: &State,
    r: ReadAllEvents,
) -> std::io::Result<()> {
    let stream = EventStream {
        session: None,
        monitor: None,
        after: r.after,
        follow: r.follow,
        describe: r.describe,
    };
    stream_events(conn, state, stream, None).await
}

/// Bytes of event lines gathered into one socket write.
const WRITE_BATCH: usize = 64 * 1024;

/// Where a stream's events go: the connection, as event replies (with
/// each monitor's description the first time, when the client asked), or a
/// descriptor the client handed over.
enum Output<'a> {
    Connection(
        &'a mut QuietWrite,
        Option<(&'a mut Descriptions, &'a State)>,
    ),
    Handed(&'a mut Handed, &'a State),
}

impl Output<'_> {
    /// Adds one event to what is about to be written.
    fn add(&mut self, buf: &mut Vec<u8>, e: &Committed) {
        match self {
            Output::Connection(_, Some((described, state))) => {
                let id = &e.event.monitor_id;
                match described.first(id, || find(state, id).map(|i| i.description)) {
                    Some(d) => buf.extend_from_slice(&described_event_reply_line(e.json(), &d)),
                    None => buf.extend_from_slice(&event_reply_line(e.json())),
                }
            }
            Output::Connection(_, None) => {
                buf.extend_from_slice(wakeful_protocol::EVENT_REPLY_PREFIX.as_bytes());
                buf.extend_from_slice(e.json().as_bytes());
                buf.extend_from_slice(b"}\n");
            }
            Output::Handed(out, state) => {
                out.add(buf, e, &|id| find(state, id).map(|i| i.description));
            }
        }
    }

    async fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Output::Connection(out, _) => out.write_all(buf).await,
            Output::Handed(out, _) => out.write(buf).await,
        }
    }
}

/// Writes `first` and whatever else the follower has ready now, in one
/// write; returns the last seq written and, when the monitor of a
/// `monitor` stream ended, its final event.
async fn write_ready(
    mut out: Output<'_>,
    follow: &mut Follow,
    first: Arc<Committed>,
    monitor: Option<&str>,
) -> std::io::Result<(u64, Option<Arc<Committed>>)> {
    let mut buf = Vec::with_capacity(first.json().len() + 32);
    let mut next = Some(first);
    let mut last = 0;
    while let Some(e) = next.take() {
        out.add(&mut buf, &e);
        last = e.seq();
        if monitor.is_some() && e.event.kind().is_terminal() {
            out.write(&buf).await?;
            return Ok((last, Some(e)));
        }
        if buf.len() < WRITE_BATCH {
            next = follow.try_next().map_err(follow_error)?;
        }
    }
    out.write(&buf).await?;
    Ok((last, None))
}

pub(crate) fn follow_error(e: FollowError) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// What an `events` request reads.
struct EventStream<'a> {
    /// One session's events, or every session's.
    session: Option<&'a str>,
    /// Only this monitor's events (the stream ends with its final event).
    monitor: Option<&'a str>,
    /// Events after this seq.
    after: u64,
    /// Keep sending new events as they come.
    follow: bool,
    /// Send each monitor's description with its first event.
    describe: bool,
}

/// Sends the session's events after `after` (only `monitor`'s, when given);
/// with `follow`, keeps sending new ones as they are committed, until the
/// client disconnects (or `monitor`'s final event was sent). One follower
/// of the hub does it all: catching up from memory or the store, then
/// live, each event once, in order, as the JSON the store holds.
///
/// With `output` (a descriptor the client handed over, and the form it
/// asked for), the events go there, straight to the reader, and the
/// connection carries only the end: `ok`, or `output_closed` once the
/// reader closed it.
async fn stream_events(
    conn: &mut Conn,
    state: &State,
    stream: EventStream<'_>,
    mut output: Option<Handed>,
) -> std::io::Result<()> {
    let EventStream {
        session,
        monitor,
        after,
        follow,
        describe,
    } = stream;
    let mut described = describe.then(Descriptions::default);
    let _following = follow.then(|| Following::stream(state));
    let filter = Filter {
        session: session.map(String::from),
        monitor: monitor.map(String::from),
    };
    let mut events = state.registry.hub().follow(filter, after);
    let written = if follow {
        // Caught up, its events go to the pipe straight from the task that
        // committed them.
        if let Some(w) = output
            .as_ref()
            .and_then(|h| h.inline_writer(&state.registry))
        {
            events.write_inline(w);
        }
        follow_events(
            conn,
            state,
            &mut events,
            &mut output,
            &mut described,
            monitor,
        )
        .await
    } else {
        let mut written = Ok(Some(None));
        while let Some(e) = events.try_next().map_err(follow_error)? {
            match write_watching(
                conn,
                state,
                &mut output,
                &mut described,
                &mut events,
                e,
                monitor,
            )
            .await
            {
                Ok(Some((_, Some(last)))) => {
                    written = Ok(Some(Some(last)));
                    break;
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    written = Ok(None);
                    break;
                }
                Err(e) => {
                    written = Err(e);
                    break;
                }
            }
        }
        written.map(|w| w.map(|ended| (events.position(), ended)))
    };
    // The reader gets its end of file no later than the client its reply.
    events.stop_inline();
    let handed = output.take().is_some();
    match written {
        Ok(None) => Ok(()),
        Ok(Some((last_seq, ended))) => {
            // A monitor's final event went to the reader; its client learns
            // it on the connection too (`watch` exits by it).
            if let Some(last) = ended.filter(|_| handed) {
                conn.out
                    .write_all(&wakeful_protocol::event_reply_line(last.json()))
                    .await?;
            }
            conn.ok(&StreamEnd {
                last_seq,
                resume: follow && state.is_upgrading(),
            })
            .await
        }
        Err(e) if handed && e.kind() == std::io::ErrorKind::BrokenPipe => {
            tracing::debug!("the reader of a handed-over output closed it");
            conn.error(
                ErrorKind::OutputClosed,
                "the reader of the events' output closed it",
            )
            .await
        }
        Err(e) => Err(e),
    }
}

/// Writes `first` and what else is ready ([`write_ready`]) to the
/// handed-over descriptor, else the connection. Writing to a descriptor
/// waits for its reader only while the client is there: a client that
/// leaves meanwhile ends the stream (`Ok(None)`), so a reader that stopped
/// reading does not keep the daemon holding its pipe for nobody.
async fn write_watching(
    conn: &mut Conn,
    state: &State,
    output: &mut Option<Handed>,
    described: &mut Option<Descriptions>,
    events: &mut Follow,
    first: Arc<Committed>,
    monitor: Option<&str>,
) -> std::io::Result<Option<(u64, Option<Arc<Committed>>)>> {
    match output {
        None => {
            let out = Output::Connection(&mut conn.out, described.as_mut().map(|d| (d, state)));
            write_ready(out, events, first, monitor).await.map(Some)
        }
        Some(out) => tokio::select! {
            written = write_ready(Output::Handed(out, state), events, first, monitor) => written.map(Some),
            // The client said something or left; either ends the stream.
            _ = conn.lines.next_line() => Ok(None),
        },
    }
}

/// The live part of [`stream_events`]: `Ok(Some((last seq, its final
/// event)))` when the monitor of a `monitor` stream ended, `Ok(None)` when
/// the client left or the hub closed.
async fn follow_events(
    conn: &mut Conn,
    state: &State,
    events: &mut Follow,
    output: &mut Option<Handed>,
    described: &mut Option<Descriptions>,
    monitor: Option<&str>,
) -> std::io::Result<Option<(u64, Option<Arc<Committed>>)>> {
    loop {
        tokio::select! {
            next = events.next() => {
                let e = match next {
                    Ok(e) => e,
                    // An upgrade closed the hub: the stream ends with
                    // `resume` after the last event written.
                    Err(FollowError::Closed) if state.is_upgrading() => {
                        return Ok(Some((events.position(), None)))
                    }
                    Err(FollowError::Closed) => return Ok(None),
                    Err(e) => return Err(follow_error(e)),
                };
                let Some((last, ended)) = write_watching(conn, state, output, described, events, e, monitor).await? else {
                    return Ok(None);
                };
                if ended.is_some() {
                    return Ok(Some((last, ended)));
                }
            }
            line = conn.lines.next_line() => {
                // The client said something or left; either ends the stream.
                line?;
                return Ok(None);
            }
            gone = reader_gone(output) => {
                // `wakeful events --follow | head -1`: once head is gone, the
                // stream ends now, not at the next event.
                gone?;
                return Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
            }
        }
    }
}

/// Completes when the reader of a handed-over descriptor is gone; never
/// without one.
async fn reader_gone(output: &mut Option<Handed>) -> std::io::Result<()> {
    match output {
        Some(out) => out.reader_gone().await,
        None => std::future::pending().await,
    }
}
