//! Typed streams: each streaming request names its item
//! ([`Stream::Item`]), and this is the one reader of each kind.
//!
//! - [`EventStream`]: the events of `events` or `events_all`
//!   ([`Connection::events`]), then the stream's end.
//! - [`Waiter`]: the batches of a `wait` ([`Connection::waiter`]); a batch
//!   is acknowledged by [`Waiter::ack`] once its reader really got it, and
//!   a batch dropped unacknowledged acknowledges nothing.
//! - [`Follower`]: an event stream that survives the daemon: it reconnects
//!   and resumes after the last seq its reader was done with.
//!
//! A request that asks `describe` gets each event's monitor description
//! with it, from the stream itself ([`wakeful_protocol::Descriptions`]).

use std::os::fd::BorrowedFd;
use std::time::Duration;

use wakeful_core::Event;
use wakeful_protocol::{Ack, Batch, Descriptions, Paths, Reply, Request, Stream};

use crate::client::{connect, connect_existing, ClientError, Connection};

/// One event of an event stream, as the daemon sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEvent {
    /// The event's JSON exactly as the daemon sent it (what `--json`
    /// prints), not decoded.
    pub json: String,
    /// Its monitor's description, when the request asked `describe` and the
    /// daemon knew the monitor.
    pub description: Option<String>,
}

impl StreamEvent {
    /// The event, decoded.
    pub fn decode(&self) -> Result<Event, ClientError> {
        decode(&self.json)
    }
}

/// An event's JSON, decoded.
pub fn decode(json: &str) -> Result<Event, ClientError> {
    serde_json::from_str(json).map_err(|e| ClientError::Protocol(format!("{e}: {json}")))
}

/// One line of a stream, read.
enum Line {
    Event(StreamEvent),
    Batch(u64),
    End,
}

/// Whether `request` asked for descriptions.
fn describes(request: &Request) -> bool {
    match request {
        Request::Events(r) => r.describe,
        Request::EventsAll(r) => r.describe,
        Request::Wait(r) => r.describe,
        _ => false,
    }
}

/// Reads the next line of a stream: an `error` is [`ClientError::Refused`],
/// the daemon closing the connection [`ClientError::Closed`].
async fn read(
    conn: &mut Connection,
    described: &mut Option<Descriptions>,
) -> Result<Line, ClientError> {
    let line = conn.next_line().await?.ok_or(ClientError::Closed)?;
    let (json, sent) = match wakeful_protocol::event_of_line(&line) {
        Some((json, sent)) => (json.to_string(), sent),
        None => match serde_json::from_str(&line)
            .map_err(|e| ClientError::Protocol(format!("{e}: {line}")))?
        {
            Reply::Event { event, description } => (
                serde_json::to_string(&event).map_err(|e| ClientError::Protocol(e.to_string()))?,
                description,
            ),
            Reply::Batch { last_seq } => return Ok(Line::Batch(last_seq)),
            Reply::Ok { .. } => return Ok(Line::End),
            Reply::Error { kind, message } => return Err(ClientError::Refused { kind, message }),
        },
    };
    let description = match described {
        Some(d) => d.of(&decode(&json)?.monitor_id, sent),
        None => None,
    };
    Ok(Line::Event(StreamEvent { json, description }))
}

/// The events of an `events` or `events_all` request, then its end.
pub struct EventStream {
    conn: Connection,
    described: Option<Descriptions>,
}

impl EventStream {
    /// The next event; `Ok(None)` once the stream ended (its `ok`). The
    /// daemon's `error` is [`ClientError::Refused`]; a connection the
    /// daemon closed, [`ClientError::Closed`].
    pub async fn next(&mut self) -> Result<Option<StreamEvent>, ClientError> {
        loop {
            match read(&mut self.conn, &mut self.described).await? {
                Line::Event(e) => return Ok(Some(e)),
                Line::End => return Ok(None),
                Line::Batch(_) => {}
            }
        }
    }

    /// Whether more of the daemon's lines are already read and waiting (a
    /// reader can then write its output once for all of them).
    pub fn has_buffered(&mut self) -> bool {
        self.conn.has_buffered()
    }

    /// The connection, to send another request on it.
    pub fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }
}

/// The batches of a `wait`. Each comes from [`Waiter::wait`]; the daemon
/// moves the consumer's cursor only when [`Waiter::ack`] acknowledges it.
pub struct Waiter {
    conn: Connection,
    described: Option<Descriptions>,
    ended: bool,
}

impl Waiter {
    /// The next batch; `Ok(None)` once the wait ended (its `ok`, after the
    /// last batch of a wait without `follow`). `timeout`, `superseded` and
    /// every other `error` are [`ClientError::Refused`]; a connection the
    /// daemon closed, [`ClientError::Closed`].
    pub async fn wait(&mut self) -> Result<Option<Batch>, ClientError> {
        if self.ended {
            return Ok(None);
        }
        let mut batch = Batch::default();
        loop {
            match read(&mut self.conn, &mut self.described).await? {
                Line::Event(e) => {
                    batch.events.push((e.decode()?, e.description));
                    batch.json.push(e.json);
                }
                Line::Batch(last_seq) => {
                    batch.last_seq = last_seq;
                    return Ok(Some(batch));
                }
                Line::End => {
                    self.ended = true;
                    return Ok(None);
                }
            }
        }
    }

    /// Acknowledges `batch` (up to [`Batch::ack_seq`]): call it only once
    /// the batch's reader really got it.
    pub async fn ack(&mut self, batch: Batch) -> Result<(), ClientError> {
        self.conn
            .send(Ack {
                seq: batch.ack_seq(),
            })
            .await
    }

    /// Acknowledges `batch` as [`Waiter::ack`] does and waits until the
    /// daemon recorded it (it records an acknowledgement before it sends
    /// anything more, or closes the connection), then lets the wait go.
    pub async fn ack_last(mut self, batch: Batch) -> Result<(), ClientError> {
        self.ack(batch).await?;
        let _ = self.conn.next_line().await;
        Ok(())
    }
}

impl Connection {
    /// Sends an event stream's request; its events follow.
    pub async fn events<S: Stream<Item = Event>>(
        self,
        request: S,
    ) -> Result<EventStream, ClientError> {
        self.events_with_fds(request, &[]).await
    }

    /// As [`Connection::events`], with descriptors for the daemon to write
    /// to ([`Connection::send_with_fds`]); the stream then carries only its
    /// end (and a monitor's final event).
    pub async fn events_with_fds<S: Stream<Item = Event>>(
        mut self,
        request: S,
        fds: &[BorrowedFd<'_>],
    ) -> Result<EventStream, ClientError> {
        let request: Request = request.into();
        let described = describes(&request).then(Descriptions::default);
        if fds.is_empty() {
            self.send(request).await?;
        } else {
            self.send_with_fds(request, fds).await?;
        }
        Ok(EventStream {
            conn: self,
            described,
        })
    }

    /// Sends a `wait`; its batches follow.
    pub async fn waiter<S: Stream<Item = Batch>>(
        mut self,
        request: S,
    ) -> Result<Waiter, ClientError> {
        let request: Request = request.into();
        let described = describes(&request).then(Descriptions::default);
        self.send(request).await?;
        Ok(Waiter {
            conn: self,
            described,
            ended: false,
        })
    }
}

/// What [`Follower::next`] brings.
#[derive(Debug)]
pub enum Followed {
    /// Connected, and streaming every event after this seq.
    Live {
        /// The stream's `after`.
        after: u64,
    },
    /// An event after the last one its reader was done with.
    Event(Event, Option<String>),
    /// The stream ended or broke (or could not start): the next call
    /// reconnects, after a pause. A stream that ended by itself (or whose
    /// connection the daemon closed) is [`ClientError::Closed`].
    Lost(ClientError),
}

/// An event stream that reconnects when the daemon goes away and resumes
/// after the last seq its reader was done with
/// ([`Follower::resume_after`]): no gap, no duplicate.
pub struct Follower {
    paths: Paths,
    after: Option<u64>,
    back: u64,
    start_daemon: bool,
    stream: Option<EventStream>,
    retry: Duration,
    min_retry: Duration,
    max_retry: Duration,
    lost: bool,
}

impl Follower {
    /// Follows from after `after`, or, when `None`, from `back` events
    /// before the daemon's last seq at the first connection. Never starts
    /// the daemon unless [`Follower::start_daemon`] says so.
    pub fn new(paths: Paths, after: Option<u64>, back: u64) -> Follower {
        Follower {
            paths,
            after,
            back,
            start_daemon: false,
            stream: None,
            retry: Duration::from_millis(100),
            min_retry: Duration::from_millis(100),
            max_retry: Duration::from_secs(1),
            lost: false,
        }
    }

    /// The first connection starts the daemon when none runs.
    pub fn start_daemon(mut self, start: bool) -> Follower {
        self.start_daemon = start;
        self
    }

    /// The pause before reconnecting: `min`, doubling up to `max`, back to
    /// `min` with each [`Follower::resume_after`].
    pub fn retry(mut self, min: Duration, max: Duration) -> Follower {
        (self.retry, self.min_retry, self.max_retry) = (min, min, max);
        self
    }

    /// Lets the connection go: the next call reconnects, after a pause.
    pub fn reconnect(&mut self) {
        (self.stream, self.lost) = (None, true);
    }

    /// The seq the next connection resumes after.
    pub fn after(&self) -> Option<u64> {
        self.after
    }

    /// The reader is done with every event up to `seq`: a new connection
    /// resumes after it, and earlier events are passed over.
    pub fn resume_after(&mut self, seq: u64) {
        self.after = Some(seq);
        self.retry = self.min_retry;
    }

    /// The next event, or a change of connection. `request` makes the
    /// request of a new connection from the seq it resumes after; `fds` go
    /// with it ([`Connection::events_with_fds`]).
    pub async fn next<S: Stream<Item = Event>>(
        &mut self,
        request: impl FnOnce(u64) -> S,
        fds: &[BorrowedFd<'_>],
    ) -> Followed {
        loop {
            let Some(stream) = &mut self.stream else {
                return match self.open(request, fds).await {
                    Ok(after) => Followed::Live { after },
                    Err(e) => Followed::Lost(e),
                };
            };
            let next = match stream.next().await {
                Ok(Some(e)) => e.decode().map(|event| (event, e.description)),
                Ok(None) => Err(ClientError::Closed),
                Err(e) => Err(e),
            };
            match next {
                Ok((event, description)) if self.after.is_none_or(|a| event.seq > a) => {
                    return Followed::Event(event, description)
                }
                Ok(_) => {}
                Err(e) => {
                    self.reconnect();
                    return Followed::Lost(e);
                }
            }
        }
    }

    /// A new connection, after a pause when the last one was lost.
    async fn open<S: Stream<Item = Event>>(
        &mut self,
        request: impl FnOnce(u64) -> S,
        fds: &[BorrowedFd<'_>],
    ) -> Result<u64, ClientError> {
        if std::mem::replace(&mut self.lost, true) {
            tokio::time::sleep(self.retry).await;
            self.retry = (self.retry * 2).min(self.max_retry);
        }
        let mut conn = if std::mem::take(&mut self.start_daemon) {
            connect(&self.paths).await?
        } else {
            connect_existing(&self.paths).await?
        };
        let after = match self.after {
            Some(seq) => seq,
            None => {
                let status = conn.call(wakeful_protocol::GetStatus {}).await?;
                status.last_seq.saturating_sub(self.back)
            }
        };
        self.after = Some(after);
        self.stream = Some(conn.events_with_fds(request(after), fds).await?);
        self.lost = false;
        Ok(after)
    }
}
