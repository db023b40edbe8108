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

/// Whether the `ok` that ends a stream says the daemon is being replaced
/// (`resume`), and after which seq to ask again.
fn resume_of(result: &serde_json::Value) -> Option<u64> {
    if result.get("resume").and_then(|r| r.as_bool()) != Some(true) {
        return None;
    }
    Some(
        ["last_seq", "acked"]
            .iter()
            .find_map(|k| result.get(*k).and_then(|v| v.as_u64()))
            .unwrap_or(0),
    )
}

/// A stream's connection, and the descriptions it carried when its
/// request asked `describe`.
struct Reader {
    conn: Connection,
    described: Option<Descriptions>,
    /// The request's `op` (named when another version of the daemon did
    /// not understand it).
    op: &'static str,
    /// The request, asked again of the daemon that replaces this one (an
    /// upgrade); `None` for one sent with descriptors, which its caller
    /// hands over again ([`ClientError::Upgraded`]).
    request: Option<Request>,
}

impl Reader {
    /// Sends `request` (with `fds`, if any); its stream follows.
    async fn open(
        mut conn: Connection,
        request: Request,
        fds: &[BorrowedFd<'_>],
    ) -> Result<Reader, ClientError> {
        let described = request.describes().then(Descriptions::default);
        let op = request.op();
        let kept = fds.is_empty().then(|| request.clone());
        if fds.is_empty() {
            conn.send(request).await?;
        } else {
            conn.send_with_fds(request, fds).await?;
        }
        Ok(Reader {
            conn,
            described,
            op,
            request: kept,
        })
    }

    /// The next line of the stream: an `error` is
    /// [`ClientError::Refused`], the daemon closing the connection
    /// [`ClientError::Closed`]. A stream the daemon ended because it is
    /// being replaced (an upgrade) goes on with the new daemon, after the
    /// last event this one sent.
    async fn read(&mut self) -> Result<Line, ClientError> {
        loop {
            let read = match self.read_line().await {
                Err(ClientError::Upgraded { after }) => self.resume(after).await,
                other => other,
            };
            match read {
                Err(ClientError::Upgraded { .. }) if self.request.is_some() => continue,
                other => return other.map_err(|e| self.conn.name_skew(self.op, e)),
            }
        }
    }

    /// Asks the daemon that replaced this one for the rest of the stream.
    /// `Err(Upgraded)` when it did (read on), or when the request came with
    /// descriptors (its caller hands them over again).
    async fn resume(&mut self, after: u64) -> Result<Line, ClientError> {
        let (Some(request), Some(paths)) = (&self.request, self.conn.paths()) else {
            return Err(ClientError::Upgraded { after });
        };
        let request = request.resumed_after(after);
        let mut conn = crate::client::reconnect(paths).await?;
        conn.send(request.clone()).await?;
        self.conn = conn;
        self.request = Some(request);
        Err(ClientError::Upgraded { after })
    }

    async fn read_line(&mut self) -> Result<Line, ClientError> {
        let line = self.conn.next_line().await?.ok_or(ClientError::Closed)?;
        let (json, sent) = match wakeful_protocol::event_of_line(&line) {
            Some((json, sent)) => (json.to_string(), sent),
            None => match serde_json::from_str(&line)
                .map_err(|e| ClientError::Protocol(format!("{e}: {line}")))?
            {
                Reply::Event { event, description } => (
                    serde_json::to_string(&event)
                        .map_err(|e| ClientError::Protocol(e.to_string()))?,
                    description,
                ),
                Reply::Batch { last_seq } => return Ok(Line::Batch(last_seq)),
                Reply::Ok { result } => {
                    return match resume_of(&result) {
                        Some(after) => Err(ClientError::Upgraded { after }),
                        None => Ok(Line::End),
                    }
                }
                Reply::Error { kind, message } => {
                    return Err(ClientError::Refused { kind, message })
                }
            },
        };
        let description = match &mut self.described {
            Some(d) => d.of(&decode(&json)?.monitor_id, sent),
            None => None,
        };
        Ok(Line::Event(StreamEvent { json, description }))
    }
}

/// The events of an `events` or `events_all` request, then its end.
pub struct EventStream(Reader);

impl EventStream {
    /// The next event; `Ok(None)` once the stream ended (its `ok`). The
    /// daemon's `error` is [`ClientError::Refused`]; a connection the
    /// daemon closed, [`ClientError::Closed`].
    pub async fn next(&mut self) -> Result<Option<StreamEvent>, ClientError> {
        loop {
            match self.0.read().await? {
                Line::Event(e) => return Ok(Some(e)),
                Line::End => return Ok(None),
                Line::Batch(_) => {}
            }
        }
    }

    /// Whether more of the daemon's lines are already read and waiting (a
    /// reader can then write its output once for all of them).
    pub fn has_buffered(&mut self) -> bool {
        self.0.conn.has_buffered()
    }

    /// The connection, to send another request on it.
    pub fn connection(&mut self) -> &mut Connection {
        &mut self.0.conn
    }
}

/// The batches of a `wait`. Each comes from [`Waiter::wait`]; the daemon
/// moves the consumer's cursor only when [`Waiter::ack`] acknowledges it.
pub struct Waiter {
    reader: Reader,
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
            match self.reader.read().await? {
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
        let seq = batch.ack_seq();
        self.reader.conn.send(Ack { seq }).await
    }

    /// Acknowledges `batch` as [`Waiter::ack`] does and waits until the
    /// daemon recorded it (it records an acknowledgement before it sends
    /// anything more, or closes the connection), then lets the wait go.
    pub async fn ack_last(mut self, batch: Batch) -> Result<(), ClientError> {
        self.ack(batch).await?;
        let _ = self.reader.conn.next_line().await;
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
        self,
        request: S,
        fds: &[BorrowedFd<'_>],
    ) -> Result<EventStream, ClientError> {
        Ok(EventStream(Reader::open(self, request.into(), fds).await?))
    }

    /// Sends a `wait`; its batches follow.
    pub async fn waiter<S: Stream<Item = Batch>>(self, request: S) -> Result<Waiter, ClientError> {
        let reader = Reader::open(self, request.into(), &[]).await?;
        Ok(Waiter {
            reader,
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::UnixListener;

    const EVENT: &str = r#"{"seq":SEQ,"session":"s","monitor_id":"mon-a","kind":"started","ts":"2026-01-01T00:00:00.000Z","text":"x"}"#;

    fn event(seq: u64) -> String {
        EVENT.replace("SEQ", &seq.to_string())
    }

    /// A daemon of one connection: it reads the request, writes `lines`
    /// and closes its side, then returns every line the client sent after
    /// the request.
    async fn daemon(lines: Vec<Vec<u8>>) -> (Connection, tokio::task::JoinHandle<Vec<String>>) {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s");
        let listener = UnixListener::bind(&socket).unwrap();
        let served = tokio::spawn(async move {
            let _dir = dir;
            let (stream, _) = listener.accept().await.unwrap();
            let (r, mut w) = stream.into_split();
            let mut r = BufReader::new(r).lines();
            r.next_line().await.unwrap().unwrap();
            for l in lines {
                w.write_all(&l).await.unwrap();
            }
            // Then it closes its side.
            drop(w);
            let mut got = Vec::new();
            while let Ok(Some(l)) = r.next_line().await {
                got.push(l);
            }
            got
        });
        (crate::client::connect_at(&socket).await.unwrap(), served)
    }

    const UNKNOWN_OP: &[u8] = b"{\"type\":\"error\",\"kind\":\"invalid\",\"message\":\"unknown variant `task_create`, expected one of `status`, `start`\"}\n";

    #[test]
    fn only_an_end_that_says_resume_asks_again_and_after_its_last_seq() {
        use serde_json::json;
        assert_eq!(resume_of(&json!({"last_seq": 44})), None);
        assert_eq!(resume_of(&json!({"last_seq": 44, "resume": false})), None);
        assert_eq!(
            resume_of(&json!({"last_seq": 44, "resume": true})),
            Some(44)
        );
        assert_eq!(resume_of(&json!({"acked": 7, "resume": true})), Some(7));
    }

    #[tokio::test]
    async fn an_older_daemon_that_does_not_know_a_request_is_named_with_both_versions() {
        let (conn, _served) = daemon(vec![UNKNOWN_OP.to_vec()]).await;
        let mut conn = conn.knowing(Some("0.0.9".into()));
        let e = conn
            .call(wakeful_protocol::CreateTask {
                session: "s".into(),
                consumer: "mcp".into(),
                ttl_ms: 1000,
                ..Default::default()
            })
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, ClientError::Skew { .. }), "{text}");
        for want in [
            crate::client::VERSION,
            "0.0.9",
            "`task_create`",
            "wakeful daemon stop",
        ] {
            assert!(text.contains(want), "{want}: {text}");
        }
        assert_eq!(e.exit_code(), 1);
    }

    #[tokio::test]
    async fn the_same_version_or_an_unknown_one_keeps_the_daemons_own_error() {
        for version in [Some(crate::client::VERSION.to_string()), None] {
            let (conn, _served) = daemon(vec![UNKNOWN_OP.to_vec()]).await;
            let mut conn = conn.knowing(version);
            let e = conn.call(wakeful_protocol::GetStatus {}).await.unwrap_err();
            assert!(
                matches!(
                    e,
                    ClientError::Refused {
                        kind: wakeful_protocol::ErrorKind::Invalid,
                        ..
                    }
                ),
                "{e}"
            );
        }
    }

    #[tokio::test]
    async fn a_stream_an_older_daemon_refuses_is_named_too() {
        let refused =
            b"{\"type\":\"error\",\"kind\":\"invalid\",\"message\":\"unknown field `describe`\"}\n";
        let (conn, _served) = daemon(vec![refused.to_vec()]).await;
        let conn = conn.knowing(Some("0.0.9".into()));
        let mut waiter = conn.waiter(wait_request()).await.unwrap();
        let e = waiter.wait().await.unwrap_err();
        assert!(
            matches!(e, ClientError::Skew { ref op, .. } if op == "wait"),
            "{e}"
        );
    }

    fn wait_request() -> wakeful_protocol::WaitEvents {
        wakeful_protocol::WaitEvents {
            session: "s".into(),
            consumer: "c".into(),
            describe: true,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_batch_is_acknowledged_up_to_what_was_kept_and_a_dropped_one_not_at_all() {
        let lines = vec![
            wakeful_protocol::described_event_reply_line(&event(3), "api"),
            wakeful_protocol::event_reply_line(&event(4)),
            b"{\"type\":\"batch\",\"last_seq\":4}\n".to_vec(),
        ];
        let (conn, served) = daemon(lines.clone()).await;
        let mut waiter = conn.waiter(wait_request()).await.unwrap();
        let mut batch = waiter.wait().await.unwrap().unwrap();
        assert_eq!(batch.last_seq, 4);
        assert_eq!(batch.json, [event(3), event(4)]);
        // The description came once; the reader knows it for both.
        assert!(batch
            .events
            .iter()
            .all(|(_, d)| d.as_deref() == Some("api")));
        batch.keep(1);
        waiter.ack(batch).await.unwrap();
        drop(waiter);
        assert_eq!(served.await.unwrap(), [r#"{"v":1,"op":"ack","seq":3}"#]);

        let (conn, served) = daemon(lines).await;
        let mut waiter = conn.waiter(wait_request()).await.unwrap();
        drop(waiter.wait().await.unwrap().unwrap());
        drop(waiter);
        assert!(served.await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn an_event_stream_ends_with_ok_and_says_when_the_daemon_closed_it() {
        let lines = vec![
            wakeful_protocol::event_reply_line(&event(3)),
            b"{\"type\":\"ok\",\"result\":{\"last_seq\":3}}\n".to_vec(),
        ];
        let (conn, _served) = daemon(lines).await;
        let request = wakeful_protocol::ReadAllEvents::default();
        let mut events = conn.events(request).await.unwrap();
        let e = events.next().await.unwrap().unwrap();
        assert_eq!((e.json.as_str(), e.description), (event(3).as_str(), None));
        assert!(events.next().await.unwrap().is_none());
        assert!(matches!(events.next().await, Err(ClientError::Closed)));
    }
}
