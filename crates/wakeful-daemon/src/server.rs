//! Serving the socket: one task per connection, one request at a time per
//! connection, streams for `events --follow` and `wait`.
//!
//! Followers never poll: they read the store after the last seq they sent,
//! then wait for the registry's "latest seq" to change.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::handed::Handed;
use crate::quiet::{QuietRead, QuietWrite};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use wakeful_core::journal::JournalEntry;
use wakeful_core::terminal::TerminalInfo;
use wakeful_core::{MonitorInfo, MonitorSpec};
use wakeful_engine::{
    Committed, Filter, Follow, FollowError, MonitorRegistry, StartError, StartOptions,
};
use wakeful_protocol::frame::{parse_request, FrameError, Framer, MAX_REQUEST_BYTES};
use wakeful_protocol::{
    Acked, ErrorKind, Reply, Request, RunResult, SessionEndResult, ShutdownResult, StartResult,
    Status, StreamEnd, WakeClearResult,
};
use wakeful_protocol::{Paths, PROTOCOL_VERSION};
use wakeful_store::StoreReader;

/// Events read from the store per query.
const PAGE: usize = 1000;

/// What every connection shares.
pub struct State {
    wakes: crate::wake::Wakes,
    registry: MonitorRegistry,
    reader: StoreReader,
    paths: Paths,
    shutdown: watch::Sender<bool>,
    consumers: std::sync::Mutex<HashMap<(String, String), Arc<ConsumerSlot>>>,
    followers: std::sync::atomic::AtomicUsize,
    /// Notified when a streaming connection ends.
    followers_left: tokio::sync::Notify,
    health: Health,
    limits: Limits,
    /// Event streams pushing to an agent woken by them, per session.
    pushers: std::sync::Mutex<HashMap<String, usize>>,
    /// The cluster link, when `[cluster]` is configured (set once, after
    /// the state exists: the link answers remote control through it).
    pub(crate) cluster: std::sync::OnceLock<wakeful_cluster::Link>,
    /// The store's share of the disk.
    storage: Arc<crate::storage::Storage>,
}

/// Counts a streaming connection while it lives.
struct Following<'a>(
    &'a std::sync::atomic::AtomicUsize,
    Option<&'a tokio::sync::Notify>,
);

impl<'a> Following<'a> {
    fn new(n: &'a std::sync::atomic::AtomicUsize) -> Self {
        n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Following(n, None)
    }

    /// A streaming connection of `state`: counted, and the daemon's
    /// shutdown waits for it to have sent what it had.
    fn stream(state: &'a State) -> Self {
        state
            .followers
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Following(&state.followers, Some(&state.followers_left))
    }
}

impl Drop for Following<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(n) = self.1 {
            n.notify_waiters();
        }
    }
}

/// One consumer of one session: its batches are handed out one at a time,
/// and the newest exclusive waiter is the only one that may wait.
struct ConsumerSlot {
    handing_out: tokio::sync::Mutex<()>,
    exclusive: watch::Sender<u64>,
    waiters: std::sync::atomic::AtomicUsize,
    /// Waiters that do not stand by (`fallback`): while there is one, the
    /// waiters that stand by take no batch.
    first: watch::Sender<usize>,
    /// Waiters that stand by.
    fallbacks: std::sync::atomic::AtomicUsize,
}

/// Counts a waiter that does not stand by in [`ConsumerSlot::first`] while
/// it lives.
struct FirstWaiter<'a>(&'a watch::Sender<usize>);

impl<'a> FirstWaiter<'a> {
    fn new(first: &'a watch::Sender<usize>) -> Self {
        first.send_modify(|n| *n += 1);
        FirstWaiter(first)
    }
}

impl Drop for FirstWaiter<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl State {
    fn consumer(&self, session: &str, consumer: &str) -> Arc<ConsumerSlot> {
        let mut map = self.consumers.lock().unwrap_or_else(|p| p.into_inner());
        map.entry((session.to_string(), consumer.to_string()))
            .or_insert_with(|| {
                Arc::new(ConsumerSlot {
                    handing_out: tokio::sync::Mutex::new(()),
                    exclusive: watch::channel(0).0,
                    waiters: std::sync::atomic::AtomicUsize::new(0),
                    first: watch::channel(0).0,
                    fallbacks: std::sync::atomic::AtomicUsize::new(0),
                })
            })
            .clone()
    }
}

/// Counts an event stream that pushes to an agent (see
/// [`Request::Events`]'s `wakes_agent`) while it lives.
struct Pushing<'a> {
    state: &'a State,
    session: String,
}

impl<'a> Pushing<'a> {
    fn new(state: &'a State, session: &str) -> Self {
        let mut map = state.pushers.lock().unwrap_or_else(|p| p.into_inner());
        *map.entry(session.to_string()).or_insert(0) += 1;
        Pushing {
            state,
            session: session.to_string(),
        }
    }
}

impl Drop for Pushing<'_> {
    fn drop(&mut self) {
        let mut map = self.state.pushers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.session) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.session);
            }
        }
    }
}

impl State {
    /// Whether, and through what, `session`'s events would wake its agent
    /// now.
    pub fn wake_report(&self, session: &str) -> wakeful_protocol::WakeReport {
        let waiters: Vec<(String, usize)> = {
            let map = self.consumers.lock().unwrap_or_else(|p| p.into_inner());
            map.iter()
                .filter(|((s, _), _)| s == session)
                .map(|((_, c), slot)| {
                    (
                        c.clone(),
                        slot.waiters.load(std::sync::atomic::Ordering::SeqCst),
                    )
                })
                .collect()
        };
        let channel_pushers = {
            let map = self.pushers.lock().unwrap_or_else(|p| p.into_inner());
            map.get(session).copied().unwrap_or(0)
        };
        let route = self.wakes.show(session);
        crate::liveness::assess(
            session,
            &crate::liveness::Attached {
                waiters,
                channel_pushers,
                route: route.as_ref(),
            },
        )
    }
}

impl State {
    /// After the hub closed: waits (up to `limit`) until every streaming
    /// connection has sent its last events.
    pub async fn drain_followers(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = self.followers_left.notified();
            tokio::pin!(left);
            left.as_mut().enable();
            if self.followers.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, left).await.is_err() {
                return;
            }
        }
    }

    /// Consumers of `session` (all for `None`): the store's cursors, and
    /// consumers with waiters attached that never acknowledged anything.
    fn consumers(
        &self,
        session: Option<&str>,
    ) -> Result<Vec<wakeful_protocol::ConsumerInfo>, wakeful_store::StoreError> {
        let slots: Vec<((String, String), (usize, usize))> = {
            let map = self.consumers.lock().unwrap_or_else(|p| p.into_inner());
            map.iter()
                .filter(|((s, _), _)| session.is_none_or(|want| s == want))
                .map(|(k, slot)| {
                    let n = slot.waiters.load(std::sync::atomic::Ordering::SeqCst);
                    let f = slot.fallbacks.load(std::sync::atomic::Ordering::SeqCst);
                    (k.clone(), (n, f.min(n)))
                })
                .collect()
        };
        let mut out: Vec<wakeful_protocol::ConsumerInfo> = self
            .reader
            .consumers(session)?
            .into_iter()
            .map(
                |(session, consumer, acked_seq, unacked)| wakeful_protocol::ConsumerInfo {
                    session,
                    consumer,
                    acked_seq,
                    unacked,
                    waiters: 0,
                    fallback_waiters: 0,
                },
            )
            .collect();
        for ((s, c), (waiters, fallback_waiters)) in slots {
            match out.iter_mut().find(|i| i.session == s && i.consumer == c) {
                Some(info) => {
                    info.waiters = waiters;
                    info.fallback_waiters = fallback_waiters;
                }
                None if waiters > 0 => {
                    let unacked = self.reader.count_after(&s, 0)?;
                    out.push(wakeful_protocol::ConsumerInfo {
                        session: s,
                        consumer: c,
                        acked_seq: 0,
                        unacked,
                        waiters,
                        fallback_waiters,
                    });
                }
                None => {}
            }
        }
        out.sort_by(|a, b| (&a.session, &a.consumer).cmp(&(&b.session, &b.consumer)));
        Ok(out)
    }

    /// Set once the daemon is asked to stop.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// The monitor registry.
    pub(crate) fn registry(&self) -> &MonitorRegistry {
        &self.registry
    }

    /// The store's reader.
    pub(crate) fn reader(&self) -> &StoreReader {
        &self.reader
    }

    /// The daemon's shared state.
    pub fn new(
        registry: MonitorRegistry,
        reader: StoreReader,
        paths: Paths,
        wakes: crate::wake::Wakes,
        limits: Limits,
        storage: Arc<crate::storage::Storage>,
    ) -> Self {
        State {
            storage,
            wakes,
            registry,
            reader,
            paths,
            shutdown: watch::channel(false).0,
            consumers: std::sync::Mutex::new(HashMap::new()),
            followers: std::sync::atomic::AtomicUsize::new(0),
            followers_left: tokio::sync::Notify::new(),
            health: Health::default(),
            limits,
            pushers: std::sync::Mutex::new(HashMap::new()),
            cluster: std::sync::OnceLock::new(),
        }
    }
}

/// How client connections are limited.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most connections one client process may hold open at once.
    pub max_connections_per_process: usize,
}

/// How the socket fares: connections open, refused, accept failures.
#[derive(Default)]
struct Health {
    connections: std::sync::atomic::AtomicUsize,
    per_process: std::sync::Mutex<HashMap<u32, usize>>,
    refused: std::sync::atomic::AtomicU64,
    accept_errors: std::sync::atomic::AtomicU64,
    last_accept_error: std::sync::Mutex<Option<(String, std::time::Instant)>>,
    /// Notified whenever a connection closes (a descriptor came free).
    closed: tokio::sync::Notify,
}

/// One open connection, counted while it lives.
struct Counted<'a> {
    health: &'a Health,
    pid: Option<u32>,
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering::SeqCst;
        self.health.connections.fetch_sub(1, SeqCst);
        if let Some(pid) = self.pid {
            let mut map = self
                .health
                .per_process
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(n) = map.get_mut(&pid) {
                *n -= 1;
                if *n == 0 {
                    map.remove(&pid);
                }
            }
        }
        self.health.closed.notify_waiters();
    }
}

impl Health {
    /// Counts a new connection of process `pid`; `Err` with the count when
    /// that process already holds `max`.
    fn admit(&self, pid: Option<u32>, max: usize) -> Result<Counted<'_>, usize> {
        use std::sync::atomic::Ordering::SeqCst;
        if let Some(pid) = pid {
            let mut map = self.per_process.lock().unwrap_or_else(|p| p.into_inner());
            let n = map.entry(pid).or_insert(0);
            if *n >= max {
                return Err(*n);
            }
            *n += 1;
        }
        self.connections.fetch_add(1, SeqCst);
        Ok(Counted { health: self, pid })
    }

    fn accept_failed(&self, e: &std::io::Error) {
        use std::sync::atomic::Ordering::SeqCst;
        let n = self.accept_errors.fetch_add(1, SeqCst) + 1;
        let now = std::time::Instant::now();
        let mut last = self
            .last_accept_error
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // Logged at most every 5 s: a daemon out of descriptors must not
        // also fill its disk.
        let quiet = last
            .as_ref()
            .is_some_and(|(_, at)| now.duration_since(*at) < Duration::from_secs(5));
        let text = format!(
            "{} ({})",
            e,
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        );
        if !quiet {
            tracing::warn!(
                "accepting a connection failed ({n} time(s) so far): {e}; backing off (existing monitors go on)"
            );
            *last = Some((text, now));
        } else if let Some((t, _)) = last.as_mut() {
            *t = text;
        }
    }
}

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
pub async fn serve(listener: UnixListener, state: Arc<State>) -> std::io::Result<()> {
    let mut stop = state.shutdown.subscribe();
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
            _ = stop.wait_for(|s| *s) => return Ok(()),
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

/// A client's lines, cut by [`Framer`]: no line longer than
/// [`MAX_REQUEST_BYTES`] is ever held. Cancel-safe, like
/// `tokio::io::Lines::next_line`.
struct ClientLines {
    read: QuietRead,
    framer: Framer,
    ended: bool,
}

impl ClientLines {
    fn new(read: QuietRead) -> Self {
        ClientLines {
            read,
            framer: Framer::new(MAX_REQUEST_BYTES),
            ended: false,
        }
    }

    /// The next line, or why it cannot be taken; `None` at the end.
    async fn next_frame(&mut self) -> std::io::Result<Option<Result<String, FrameError>>> {
        use tokio::io::AsyncReadExt;
        loop {
            if let Some(frame) = self.framer.next_line() {
                return Ok(Some(frame));
            }
            if self.ended {
                return Ok(None);
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.read.read(&mut chunk).await?;
            if n == 0 {
                self.ended = true;
                return Ok(self.framer.finish());
            }
            self.framer.push(&chunk[..n]);
        }
    }

    /// The next line; a line that cannot be taken is an error.
    async fn next_line(&mut self) -> std::io::Result<Option<String>> {
        match self.next_frame().await? {
            None => Ok(None),
            Some(Ok(line)) => Ok(Some(line)),
            Some(Err(e)) => Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        }
    }
}

struct Conn {
    lines: ClientLines,
    out: QuietWrite,
    /// The descriptor the client sent with its request, if any.
    passed: crate::quiet::Passed,
}

impl Conn {
    async fn reply(&mut self, r: &Reply) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(r).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.out.write_all(&line).await
    }

    async fn ok<T: serde::Serialize>(&mut self, result: &T) -> std::io::Result<()> {
        let result = serde_json::to_value(result).map_err(std::io::Error::other)?;
        self.reply(&Reply::Ok { result }).await
    }

    async fn error(&mut self, kind: ErrorKind, message: impl Into<String>) -> std::io::Result<()> {
        self.reply(&Reply::Error {
            kind,
            message: message.into(),
        })
        .await
    }

    /// The next request; `None` at end of stream.
    async fn request(&mut self) -> std::io::Result<Option<Result<Request, (ErrorKind, String)>>> {
        Ok(match self.lines.next_frame().await? {
            None => None,
            Some(Ok(line)) => Some(parse_request(&line)),
            Some(Err(e)) => Some(Err((ErrorKind::Invalid, e.to_string()))),
        })
    }
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
    let (r, w, passed) = crate::quiet::split(stream)?;
    let mut conn = Conn {
        lines: ClientLines::new(r),
        out: w,
        passed,
    };
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
    while let Some(req) = conn.request().await? {
        match req {
            Ok(req) => {
                tracing::debug!("request {} from process {}", req.op(), pid.unwrap_or(0));
                handle(&mut conn, &state, req).await?
            }
            Err((kind, msg)) => {
                tracing::debug!("refused a request ({kind:?}): {msg}");
                conn.error(kind, msg).await?
            }
        }
    }
    Ok(())
}

/// Starts a monitor on this host (`start`, and `start` from another host of
/// the cluster, which brings no environment or working directory: the
/// daemon's own apply).
pub(crate) async fn start_here(
    state: &State,
    session: String,
    spec: Box<MonitorSpec>,
    env: Option<std::collections::BTreeMap<String, String>>,
    cwd: Option<std::path::PathBuf>,
) -> Result<StartResult, (ErrorKind, String)> {
    state
        .storage
        .writable("start a monitor")
        .map_err(|m| (ErrorKind::DiskFull, m))?;
    let after_seq = state.registry.hub().latest();
    // Inside Codex: route the session to its thread, unless it has a
    // route or the configuration says no.
    let thread = env
        .as_ref()
        .and_then(|e| e.get("CODEX_THREAD_ID"))
        .filter(|t| !t.is_empty());
    if let (Some(thread), Some(env)) = (thread, &env) {
        if state.wakes.auto_codex && !state.wakes.has_route(&session) && spec.validate().is_ok() {
            let route = wakeful_protocol::WakeAdapter::Codex {
                thread: Some(thread.clone()),
                binary: None,
                codex_home: env.get("CODEX_HOME").map(std::path::PathBuf::from),
            };
            if let Err(e) = state
                .wakes
                .set(&session, route, wakeful_protocol::RouteSource::Auto)
                .await
            {
                tracing::warn!("cannot route session {session} to Codex: {e}");
            }
        }
    }
    let opts = StartOptions {
        session: Some(session.clone()),
        base_env: env,
        base_cwd: cwd,
        ..StartOptions::default()
    };
    match state.registry.start_with(*spec, opts).await {
        Ok(s) => Ok(StartResult {
            id: s.info.id,
            session: s.info.session,
            already_running: s.already_running,
            output_path: s.info.output_path,
            after_seq: if s.already_running {
                state.registry.hub().latest()
            } else {
                after_seq
            },
            wake: state.wake_report(&session).wake,
        }),
        Err(e) => Err((start_error(&e), e.to_string())),
    }
}

fn start_error(e: &StartError) -> ErrorKind {
    match e {
        StartError::Invalid(_) | StartError::Cwd(_) => ErrorKind::Invalid,
        StartError::Limit { .. } => ErrorKind::Limit,
        StartError::Closed => ErrorKind::Internal,
        StartError::Storage(_) => ErrorKind::DiskFull,
    }
}

async fn handle(conn: &mut Conn, state: &State, req: Request) -> std::io::Result<()> {
    match req {
        Request::Status {} => {
            let all = state.registry.list();
            let running: Vec<&MonitorInfo> = all.iter().filter(|i| i.is_active()).collect();
            let mut sessions: Vec<&str> = running.iter().map(|i| i.session.as_str()).collect();
            sessions.sort_unstable();
            sessions.dedup();
            let status = Status {
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION").to_string(),
                protocol: PROTOCOL_VERSION,
                socket: state.paths.socket(),
                state_dir: state.paths.state_dir.clone(),
                monitors_running: running.len(),
                monitors_recently_ended: all.len() - running.len(),
                sessions_active: sessions.len(),
                last_seq: state.registry.hub().latest(),
                wakes_undelivered: state.wakes.undelivered().len(),
                followers: state.followers.load(std::sync::atomic::Ordering::SeqCst),
                journal_failures: state.registry.journal_failures(),
                connections: state
                    .health
                    .connections
                    .load(std::sync::atomic::Ordering::SeqCst),
                max_open_files: wakeful_platform::fd::max_open_files(),
                cluster: state.cluster.get().map(|l| l.status()),
                accept_errors: state
                    .health
                    .accept_errors
                    .load(std::sync::atomic::Ordering::SeqCst),
                last_accept_error: state
                    .health
                    .last_accept_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                    .map(|(t, _)| t.clone()),
                connections_refused: state
                    .health
                    .refused
                    .load(std::sync::atomic::Ordering::SeqCst),
                storage: Some(state.storage.status()),
            };
            conn.ok(&status).await
        }
        Request::Start {
            session,
            spec,
            env,
            cwd,
            host,
        } => {
            let started = match host {
                Some(host) => crate::cluster::start(state, &host, session, spec, env, cwd).await,
                None => start_here(state, session, spec, Some(env), Some(cwd)).await,
            };
            match started {
                Ok(result) => conn.ok(&result).await,
                Err((kind, message)) => conn.error(kind, message).await,
            }
        }
        Request::List { session } => {
            let list: Vec<MonitorInfo> = state
                .registry
                .list()
                .into_iter()
                .filter(|i| session.as_ref().is_none_or(|s| &i.session == s))
                .collect();
            conn.ok(&list).await
        }
        Request::Get { id } => match find(state, &id) {
            Some(info) => conn.ok(&info).await,
            None => not_found(conn, &id).await,
        },
        Request::Stop { id } => match state.registry.stop(&id).await {
            Ok(info) => conn.ok(&info).await,
            // Not here: a monitor of another host of the cluster?
            Err(e) => match crate::cluster::stop(state, &id, e.to_string()).await {
                Ok(info) => conn.ok(&info).await,
                Err((kind, message)) => conn.error(kind, message).await,
            },
        },
        Request::Events {
            session,
            after,
            follow,
            monitor,
            wakes_agent,
            write_to,
        } => {
            let output = match write_to {
                None => None,
                Some(form) => match Handed::new(conn.passed.take(), form) {
                    Ok(out) => {
                        tracing::debug!(%session, ?form, "writing events to a descriptor the client handed over");
                        Some(out)
                    }
                    Err(message) => {
                        tracing::info!(%session, ?form, "refused a handed-over descriptor: {message}");
                        return conn.error(ErrorKind::Invalid, message).await;
                    }
                },
            };
            let _pushing = (follow && wakes_agent).then(|| Pushing::new(state, &session));
            let stream = EventStream {
                session: Some(&session),
                monitor: monitor.as_deref(),
                after,
                follow,
            };
            stream_events(conn, state, stream, output).await
        }
        Request::EventsAll { after, follow } => {
            let stream = EventStream {
                session: None,
                monitor: None,
                after,
                follow,
            };
            stream_events(conn, state, stream, None).await
        }
        Request::WakeCheck { session } => conn.ok(&state.wake_report(&session)).await,
        Request::Digest { session } => {
            match crate::digest::build(&state.registry, &state.reader, &session) {
                Ok(d) => conn.ok(&d).await,
                Err(e) => conn.error(ErrorKind::Internal, e.to_string()).await,
            }
        }
        Request::Wait {
            session,
            consumer,
            timeout_ms,
            follow,
            exclusive,
            all,
            fallback,
            monitor,
        } => {
            if let Some(id) = &monitor {
                if find(state, id).is_none_or(|m| m.session != session) {
                    return not_found(conn, id).await;
                }
            }
            let opts = WaitOpts {
                session: &session,
                consumer: &consumer,
                timeout_ms,
                follow,
                exclusive,
                all,
                fallback,
                monitor: monitor.as_deref(),
            };
            wait(conn, state, opts).await
        }
        Request::Ack { .. } => {
            conn.error(ErrorKind::Invalid, "ack is only valid inside a wait")
                .await
        }
        Request::Consumers { session } => match state.consumers(session.as_deref()) {
            Ok(list) => conn.ok(&list).await,
            Err(e) => conn.error(ErrorKind::Internal, e.to_string()).await,
        },
        Request::SessionEnd { session } => {
            let stopped = state.registry.end_session(&session).await;
            conn.ok(&SessionEndResult { session, stopped }).await
        }
        Request::Run(run) => run_terminal(conn, state, run).await,
        Request::TerminalList { session } => {
            let list = terminals(state)
                .into_iter()
                .filter(|t| session.as_ref().is_none_or(|s| &t.session == s))
                .collect::<Vec<_>>();
            conn.ok(&list).await
        }
        Request::TerminalGet { id } => match terminals(state).into_iter().find(|t| t.id == id) {
            Some(t) => conn.ok(&t).await,
            None => terminal_not_found(conn, &id).await,
        },
        Request::TerminalKill { id } => match state.registry.terminals().kill(&id).await {
            Ok(t) => {
                state
                    .registry
                    .sync_within(wakeful_engine::registry::REGISTER_WAIT)
                    .await;
                conn.ok(&t).await
            }
            Err(_) => terminal_not_found(conn, &id).await,
        },
        Request::TerminalWait { id } => match state.registry.terminals().wait(&id).await {
            Ok(t) => conn.ok(&t).await,
            Err(_) => match terminals(state).into_iter().find(|t| t.id == id) {
                Some(t) => conn.ok(&t).await,
                None => terminal_not_found(conn, &id).await,
            },
        },
        Request::WakeSet { session, route } => {
            if let Err(m) = state.storage.writable("set a wake route") {
                return conn.error(ErrorKind::DiskFull, m).await;
            }
            match state
                .wakes
                .set(&session, route, wakeful_protocol::RouteSource::Set)
                .await
            {
                Ok(v) => conn.ok(&v).await,
                Err(e) => conn.error(ErrorKind::Invalid, e).await,
            }
        }
        Request::WakeShow { session } => conn.ok(&state.wakes.show(&session)).await,
        Request::WakeClear { session } => {
            if let Err(m) = state.storage.writable("clear a wake route") {
                return conn.error(ErrorKind::DiskFull, m).await;
            }
            let cleared = state.wakes.clear(&session).await;
            conn.ok(&WakeClearResult { session, cleared }).await
        }
        Request::Import { events, monitors } => {
            if let Err(m) = state.storage.writable("import events") {
                return conn.error(ErrorKind::DiskFull, m).await;
            }
            match crate::import::import(
                &state.registry,
                &state.reader,
                events,
                monitors,
                crate::import::From::File,
            )
            .await
            {
                Ok(result) => conn.ok(&result).await,
                Err(e @ crate::import::ImportError::Invalid(_)) => {
                    conn.error(ErrorKind::Invalid, e.to_string()).await
                }
                Err(e) => conn.error(ErrorKind::Internal, e.to_string()).await,
            }
        }
        Request::ClusterStatus {} => match crate::cluster::status(state).await {
            Ok(s) => conn.ok(&s).await,
            Err((kind, message)) => conn.error(kind, message).await,
        },
        Request::ClusterMonitors { session } => {
            match crate::cluster::monitors(state, session.as_deref()).await {
                Ok(list) => conn.ok(&list).await,
                Err((kind, message)) => conn.error(kind, message).await,
            }
        }
        Request::Prune { dry_run } => {
            match state.storage.prune(chrono::Utc::now(), dry_run).await {
                Ok(r) => conn.ok(&r).await,
                Err(e) => conn.error(ErrorKind::Internal, e.to_string()).await,
            }
        }
        Request::Prunes { since } => match state.reader.prunes(since) {
            Ok(list) => conn.ok(&list).await,
            Err(e) => conn.error(ErrorKind::Internal, e.to_string()).await,
        },
        Request::Shutdown {} => {
            conn.ok(&ShutdownResult {
                pid: std::process::id(),
            })
            .await?;
            state.shutdown.send_replace(true);
            Ok(())
        }
    }
}

/// Live terminals, then those the store remembers from earlier daemons
/// (ended within the last hour).
fn terminals(state: &State) -> Vec<TerminalInfo> {
    let mut list = state.registry.terminals().list();
    let cutoff = chrono::Utc::now() - chrono::Duration::hours(1);
    if let Ok(stored) = state.reader.terminals() {
        for t in stored {
            let recent = t.ended_at.is_some_and(|e| e >= cutoff);
            if recent && !list.iter().any(|l| l.id == t.id) {
                list.push(t);
            }
        }
    }
    list
}

async fn terminal_not_found(conn: &mut Conn, id: &str) -> std::io::Result<()> {
    conn.error(
        ErrorKind::NotFound,
        format!("terminal {id} not found; `wakeful terminal list` shows them"),
    )
    .await
}

async fn run_terminal(
    conn: &mut Conn,
    state: &State,
    run: wakeful_protocol::RunRequest,
) -> std::io::Result<()> {
    let wakeful_protocol::RunRequest {
        session,
        command,
        env,
        cwd,
        until,
        description,
    } = run;
    if let Err(m) = state.storage.writable("start a terminal") {
        return conn.error(ErrorKind::DiskFull, m).await;
    }
    // Check the monitor's parameters before starting anything.
    let monitor_spec = until.map(|until| {
        let mut spec =
            MonitorSpec::command(command.clone(), description.clone().unwrap_or_default());
        if spec.description.is_empty() {
            spec.description = spec.source.default_description();
        }
        spec.until = Some(until);
        spec
    });
    if let Some(spec) = &monitor_spec {
        if let Err(e) = spec.validate() {
            return conn.error(ErrorKind::Invalid, e.to_string()).await;
        }
    }
    if !cwd.is_dir() {
        return conn
            .error(
                ErrorKind::Invalid,
                format!("working directory {} does not exist", cwd.display()),
            )
            .await;
    }
    // With a monitor to attach, hold the output back until it is attached,
    // so that it sees every line.
    let (gate_tx, gate_rx) = tokio::sync::oneshot::channel();
    let gate = monitor_spec.as_ref().map(|_| gate_rx);
    let term = match state
        .registry
        .terminals()
        .run_gated(
            &session,
            &command,
            Some(env.clone()),
            Some(cwd.clone()),
            gate,
        )
        .await
    {
        Ok(t) => t,
        Err(e) => return conn.error(ErrorKind::Invalid, e.to_string()).await,
    };
    let mut monitor_id = None;
    if let Some(mut spec) = monitor_spec {
        spec.source = wakeful_core::Source::Terminal {
            terminal_id: term.id.clone(),
        };
        let opts = StartOptions {
            session: Some(session.clone()),
            base_env: Some(env),
            base_cwd: Some(cwd),
            ..StartOptions::default()
        };
        let started = state.registry.start_with(spec, opts).await;
        let _ = gate_tx.send(());
        match started {
            Ok(s) => monitor_id = Some(s.info.id),
            Err(e) => {
                let _ = state.registry.terminals().kill(&term.id).await;
                return conn.error(start_error(&e), e.to_string()).await;
            }
        }
    }
    let result = RunResult {
        wake: state.wake_report(&session).wake,
        id: term.id,
        session,
        output_path: term.output_path,
        monitor_id,
    };
    conn.ok(&result).await
}

fn find(state: &State, id: &str) -> Option<MonitorInfo> {
    state
        .registry
        .get(id)
        .or_else(|| state.reader.monitor(id).ok().flatten().map(|m| m.info))
}

async fn not_found(conn: &mut Conn, id: &str) -> std::io::Result<()> {
    conn.error(
        ErrorKind::NotFound,
        format!("monitor {id} not found; `wakeful list` shows the monitors of this session"),
    )
    .await
}

fn store_error(e: wakeful_store::StoreError) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Bytes of event lines gathered into one socket write.
const WRITE_BATCH: usize = 64 * 1024;

/// Where a stream's events go: the connection, as event replies, or a
/// descriptor the client handed over.
enum Output<'a> {
    Connection(&'a mut QuietWrite),
    Handed(&'a mut Handed, &'a State),
}

impl Output<'_> {
    /// Adds one event to what is about to be written.
    fn add(&mut self, buf: &mut Vec<u8>, e: &Committed) {
        match self {
            Output::Connection(_) => {
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
            Output::Connection(out) => out.write_all(buf).await,
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

fn follow_error(e: FollowError) -> std::io::Error {
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
    } = stream;
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
        follow_events(conn, state, &mut events, &mut output, monitor).await
    } else {
        let mut written = Ok(Some(None));
        while let Some(e) = events.try_next().map_err(follow_error)? {
            match write_watching(conn, state, &mut output, &mut events, e, monitor).await {
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
            conn.ok(&StreamEnd { last_seq }).await
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
    events: &mut Follow,
    first: Arc<Committed>,
    monitor: Option<&str>,
) -> std::io::Result<Option<(u64, Option<Arc<Committed>>)>> {
    match output {
        None => write_ready(Output::Connection(&mut conn.out), events, first, monitor)
            .await
            .map(Some),
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
    monitor: Option<&str>,
) -> std::io::Result<Option<(u64, Option<Arc<Committed>>)>> {
    loop {
        tokio::select! {
            next = events.next() => {
                let e = match next {
                    Ok(e) => e,
                    Err(FollowError::Closed) => return Ok(None),
                    Err(e) => return Err(follow_error(e)),
                };
                let Some((last, ended)) = write_watching(conn, state, output, events, e, monitor).await? else {
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

/// Hands the consumer's unacknowledged events over in batches; the cursor
/// moves only when the client acknowledges a batch.
struct WaitOpts<'a> {
    session: &'a str,
    consumer: &'a str,
    timeout_ms: Option<u64>,
    follow: bool,
    exclusive: bool,
    /// Hand out events that do not wake without waiting for one that does.
    all: bool,
    /// Stand by while a waiter that does not is attached.
    fallback: bool,
    /// Only this monitor's events.
    monitor: Option<&'a str>,
}

/// What a wait read from the hub and has not handed out yet.
///
/// At most [`PAGE`] events are kept. Past that, events that do not wake are
/// only counted as skipped; once one that wakes turns up, the wait reads
/// again from the cursor (the hub catches up from the store), so a long run
/// of quiet events costs no memory and none is lost.
#[derive(Default)]
struct Unhanded {
    events: std::collections::VecDeque<Arc<Committed>>,
    /// The last event that wakes, read but not yet acknowledged.
    wake_at: Option<u64>,
    /// Events were read past the page and not kept.
    skipped: bool,
}

impl Unhanded {
    fn take(&mut self, e: Arc<Committed>) {
        if e.event.wakes {
            self.wake_at = Some(e.seq());
        }
        if self.events.len() < PAGE && !self.skipped {
            self.events.push_back(e);
        } else {
            self.skipped = true;
        }
    }

    /// Forgets what was acknowledged (up to `seq`).
    fn acked(&mut self, seq: u64) {
        while self.events.front().is_some_and(|e| e.seq() <= seq) {
            self.events.pop_front();
        }
        if self.wake_at.is_some_and(|w| w <= seq) {
            self.wake_at = None;
        }
    }

    /// Something to hand out now.
    fn ready(&self, all: bool) -> bool {
        !self.events.is_empty() && (all || self.wake_at.is_some())
    }
}

async fn wait(conn: &mut Conn, state: &State, opts: WaitOpts<'_>) -> std::io::Result<()> {
    let WaitOpts {
        session,
        consumer,
        timeout_ms,
        follow,
        exclusive,
        all,
        fallback,
        monitor,
    } = opts;
    let _following = Following::stream(state);
    let slot = state.consumer(session, consumer);
    let _attached = Following::new(&slot.waiters);
    let _standing_by = fallback.then(|| Following::new(&slot.fallbacks));
    let _first = (!fallback).then(|| FirstWaiter::new(&slot.first));
    // A waiter that stands by yields while this counts others.
    let mut first = slot.first.subscribe();
    let mut generation = slot.exclusive.subscribe();
    let mine = if exclusive {
        slot.exclusive.send_modify(|g| *g += 1);
        Some(*generation.borrow_and_update())
    } else {
        None
    };
    let deadline = timeout_ms.map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
    let filter = Filter {
        session: Some(session.to_string()),
        monitor: monitor.map(String::from),
    };
    let follow_from = |after: u64| state.registry.hub().follow(filter.clone(), after);
    let cursor = state
        .reader
        .cursor(session, consumer)
        .map_err(store_error)?;
    let mut events = follow_from(cursor);
    let mut pending = Unhanded::default();
    loop {
        if mine.is_some_and(|m| *generation.borrow() != m) {
            return superseded(conn, session, consumer).await;
        }
        while let Some(e) = events.try_next().map_err(follow_error)? {
            pending.take(e);
            if pending.skipped && pending.wake_at.is_some() {
                break;
            }
        }
        if pending.skipped && (pending.wake_at.is_some() || pending.events.is_empty()) {
            // Read again from the cursor: the events not kept come back
            // from the store, page by page.
            let acked = state
                .reader
                .cursor(session, consumer)
                .map_err(store_error)?;
            let wake_at = pending.wake_at;
            events = follow_from(acked);
            pending = Unhanded::default();
            while pending.events.len() < PAGE {
                match events.try_next().map_err(follow_error)? {
                    Some(e) => pending.take(e),
                    None => break,
                }
            }
            pending.wake_at = pending.wake_at.max(wake_at);
        }
        let yielding = fallback && *first.borrow_and_update() > 0;
        if !pending.ready(all) || yielding {
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                next = events.next() => match next {
                    Ok(e) => pending.take(e),
                    Err(FollowError::Closed) => return Ok(()),
                    Err(e) => return Err(follow_error(e)),
                },
                _ = sleep => {
                    let quiet = if pending.events.is_empty() { "" } else { " that wake (events that do not wake wait for one that does, or for `wait --all`)" };
                    return conn
                        .error(
                            ErrorKind::Timeout,
                            format!("no new events{quiet} for session `{session}` within {} ms", timeout_ms.unwrap_or(0)),
                        )
                        .await;
                }
                line = conn.lines.next_line() => {
                    if line?.is_none() {
                        return Ok(());
                    }
                }
                _ = generation.changed(), if mine.is_some() => {}
                _ = first.changed(), if fallback => {
                    // What a waiter that went first acknowledged is gone.
                    let acked = state
                        .reader
                        .cursor(session, consumer)
                        .map_err(store_error)?;
                    pending.acked(acked);
                }
            }
            continue;
        }
        // One batch of this consumer at a time: read, hand out, acknowledge.
        let _handing_out = slot.handing_out.lock().await;
        if mine.is_some_and(|m| *generation.borrow() != m) {
            return superseded(conn, session, consumer).await;
        }
        if fallback && *first.borrow() > 0 {
            continue;
        }
        // Another waiter may have acknowledged some meanwhile.
        let acked = state
            .reader
            .cursor(session, consumer)
            .map_err(store_error)?;
        pending.acked(acked);
        if !pending.ready(all) {
            continue;
        }
        // Up to the last event that wakes; the quiet ones after it wait.
        let n = match (all, pending.wake_at) {
            (false, Some(w)) => pending.events.iter().take_while(|e| e.seq() <= w).count(),
            _ => pending.events.len(),
        };
        let Some(last) = pending.events.get(n.wrapping_sub(1)).map(|e| e.seq()) else {
            continue;
        };
        let wakes = pending.events.iter().take(n).any(|e| e.event.wakes);
        let mut buf = Vec::new();
        for e in pending.events.iter().take(n) {
            buf.extend_from_slice(&wakeful_protocol::event_reply_line(e.json()));
        }
        conn.out.write_all(&buf).await?;
        conn.reply(&Reply::Batch { last_seq: last }).await?;
        match conn.request().await? {
            Some(Ok(Request::Ack { seq })) if seq <= last && seq > acked => {
                let ack = JournalEntry::Ack {
                    session: session.to_string(),
                    consumer: consumer.to_string(),
                    seq,
                };
                match state
                    .registry
                    .hub()
                    .append_within(vec![ack], wakeful_engine::registry::REGISTER_WAIT)
                    .await
                {
                    Ok(()) => {}
                    Err(wakeful_engine::AppendError::Closed) => {
                        return conn
                            .error(ErrorKind::Internal, "the daemon is stopping")
                            .await;
                    }
                    Err(wakeful_engine::AppendError::TimedOut) => {
                        // The acknowledgement waits in the hub and is
                        // recorded once the store can write; until then a
                        // new wait may hand these events out again.
                        let m = state
                            .storage
                            .writable("record the acknowledgement")
                            .err()
                            .unwrap_or_else(|| "cannot record the acknowledgement in time: the event store is failing (see `wakeful status`)".into());
                        return conn.error(ErrorKind::DiskFull, m).await;
                    }
                }
                pending.acked(seq);
            }
            Some(Ok(_)) | Some(Err(_)) => {
                return conn
                    .error(ErrorKind::Invalid, format!("expected an ack of seq {last}"))
                    .await;
            }
            None => return Ok(()),
        }
        // Without follow, one batch ends the wait, unless the event that
        // wakes is still ahead (more than a page of quiet events before it).
        if !follow && (all || wakes) {
            return conn.ok(&Acked { acked: last }).await;
        }
    }
}

async fn superseded(conn: &mut Conn, session: &str, consumer: &str) -> std::io::Result<()> {
    conn.error(
        ErrorKind::Superseded,
        format!(
            "a newer exclusive waiter of session `{session}` (consumer `{consumer}`) took over"
        ),
    )
    .await
}
