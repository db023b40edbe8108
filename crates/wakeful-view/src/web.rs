//! `wakeful web`: the live view in a browser (axum, server-sent events).
//!
//! Security (docs/SECURITY.md): bound to 127.0.0.1 only; every request
//! must name the server in exactly one `Host` header, `127.0.0.1:PORT` or
//! `localhost:PORT` as written (else 403: DNS rebinding; an absolute-form
//! request line is refused too). The random launch token in the printed
//! URL is good once: `GET /?token=…` exchanges it for a separate random
//! session value, set as an HttpOnly, SameSite=Strict cookie whose name
//! carries the port (`wakeful_web_PORT`: cookies do not tell ports apart),
//! and redirects to `/`, so the token leaves the address bar and the
//! history. Requests without the session cookie get 401. A request that
//! changes anything (any method but GET and HEAD) must carry an `Origin`
//! equal to the page's own origin, port included (else 403); the API and
//! event-stream GETs are refused when their `Origin` or `Sec-Fetch-Site`
//! says another origin sent them (`http://localhost:OTHER` is the same
//! *site*, so SameSite does not stop it). No response carries
//! `Access-Control-Allow-*` headers. Secrets are compared in constant
//! time.
//!
//! Live updates: one daemon follower (`events_all`, read-only) feeds a ring
//! of recent events; each browser pulls from the ring at its own pace
//! (`id:` = seq; `Last-Event-ID` resumes exactly after it, reading older
//! events from the daemon when they left the ring). A browser that stops
//! reading is never waited for: its connection is closed once a write has
//! made no progress for the write deadline. Comments keep idle streams
//! alive every 15 s.
//!
//! Every string that came from a monitor is sanitized here
//! ([`wakeful_core::text::sanitize_for_model`]) and the page inserts text
//! with `textContent` only. The page's assets are compiled into the binary.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::Utc;
use regex::Regex;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use wakeful_client::{connect_existing, Paths};
use wakeful_core::text::{sanitize_for_model, sanitize_json};
use wakeful_core::{Event, EventBody, MonitorInfo, MonitorState};

use crate::app::{Link, Scope};
use crate::events::one_line;
use crate::feed::{self, FeedMsg, FeedOptions};
use crate::model::{ending, Monitors};
use crate::output_pane::OutputIndex;
use crate::ViewError;

const INDEX_HTML: &str = include_str!("web/index.html");
const APP_JS: &str = include_str!("web/app.js");
const APP_CSS: &str = include_str!("web/app.css");

/// How `wakeful web` serves.
#[derive(Debug, Clone)]
pub struct WebOptions {
    /// The port on 127.0.0.1 (0: any free one).
    pub port: u16,
    /// A connection whose writes make no progress for this long is closed.
    pub write_deadline: Duration,
    /// An idle event stream gets a comment this often.
    pub keep_alive: Duration,
    /// Recent events kept for browsers (older ones are read from the
    /// daemon when a browser asks for them).
    pub ring: usize,
}

impl Default for WebOptions {
    fn default() -> Self {
        WebOptions {
            port: 0,
            write_deadline: Duration::from_secs(10),
            keep_alive: Duration::from_secs(15),
            ring: 20_000,
        }
    }
}

/// A running server.
pub struct Running {
    /// The URL to open, with the token.
    pub url: String,
    /// The address it listens on.
    pub addr: SocketAddr,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// Serves until the server fails (it does not end otherwise).
    pub async fn wait(self) -> Result<(), ViewError> {
        match self.server.await {
            Ok(r) => r.map_err(ViewError::Serve),
            Err(e) => Err(ViewError::Serve(std::io::Error::other(e.to_string()))),
        }
    }
}

/// One event as browsers get it: text made safe, lines that look like an
/// error marked.
struct Frame {
    seq: u64,
    session: String,
    data: String,
}

struct HubState {
    ring: VecDeque<Arc<Frame>>,
    /// Every event after this seq and up to the last is in the ring.
    ring_after: u64,
    monitors: Monitors,
    link: Link,
    started: bool,
    storage: Option<wakeful_protocol::StorageStatus>,
}

/// Who may use the view: the launch token (until it is exchanged) and the
/// session values it was exchanged for.
struct Access {
    /// The token of the printed URL; `None` once it was used.
    launch: Option<String>,
    /// The session value the launch token was exchanged for.
    session: Option<String>,
}

struct Shared {
    paths: Paths,
    access: Mutex<Access>,
    port: u16,
    error_regex: Regex,
    options: WebOptions,
    hub: Mutex<HubState>,
    latest: watch::Sender<u64>,
    outputs: Mutex<HashMap<PathBuf, OutputIndex>>,
}

impl Shared {
    fn hub(&self) -> std::sync::MutexGuard<'_, HubState> {
        // A panic while holding the lock cannot leave the ring half-made
        // (pushes and pops are whole); go on with it.
        self.hub.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn access(&self) -> std::sync::MutexGuard<'_, Access> {
        self.access.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A random token: 32 bytes from the kernel, hex.
fn random_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `a` equals `b`, in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Starts serving the view of every session on 127.0.0.1.
pub async fn serve(
    paths: Paths,
    options: WebOptions,
    error_regex: Regex,
) -> Result<Running, ViewError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, options.port))
        .await
        .map_err(|source| ViewError::Listen {
            port: options.port,
            source,
        })?;
    let addr = listener.local_addr().map_err(ViewError::Serve)?;
    let token = random_token().map_err(ViewError::Serve)?;
    let (latest, _) = watch::channel(0);
    let shared = Arc::new(Shared {
        paths: paths.clone(),
        access: Mutex::new(Access {
            launch: Some(token.clone()),
            session: None,
        }),
        port: addr.port(),
        error_regex,
        options: options.clone(),
        hub: Mutex::new(HubState {
            ring: VecDeque::new(),
            ring_after: 0,
            monitors: Monitors::default(),
            link: Link::Connecting,
            started: false,
            storage: None,
        }),
        latest,
        outputs: Mutex::default(),
    });
    let feed = feed::spawn(paths, Scope::All, FeedOptions::default());
    tokio::spawn(pump(feed, shared.clone()));
    let app = router(shared);
    let listener = DeadlineListener {
        inner: listener,
        deadline: options.write_deadline,
    };
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(Running {
        url: format!("http://127.0.0.1:{}/?token={token}", addr.port()),
        addr,
        server,
    })
}

/// Takes the daemon feed into the hub.
async fn pump(mut feed: tokio::sync::mpsc::Receiver<FeedMsg>, shared: Arc<Shared>) {
    while let Some(msg) = feed.recv().await {
        let mut hub = shared.hub();
        match msg {
            FeedMsg::Live { after } => {
                hub.link = Link::Live;
                if !hub.started {
                    // The ring is complete from here on.
                    hub.ring_after = after;
                    hub.started = true;
                }
            }
            FeedMsg::Lost(why) => hub.link = Link::Lost(why),
            FeedMsg::Monitors(list) => hub.monitors.apply_list(list),
            FeedMsg::Storage(s) => hub.storage = Some(*s),
            FeedMsg::Events(events) => {
                let mut last = None;
                for e in &events {
                    let newest = hub.ring.back().map(|f| f.seq).unwrap_or(hub.ring_after);
                    if e.seq <= newest {
                        continue;
                    }
                    hub.monitors.apply_event(e);
                    hub.ring.push_back(Arc::new(frame(e, &shared.error_regex)));
                    while hub.ring.len() > shared.options.ring {
                        if let Some(old) = hub.ring.pop_front() {
                            hub.ring_after = old.seq;
                        }
                    }
                    last = Some(e.seq);
                }
                drop(hub);
                if let Some(seq) = last {
                    shared.latest.send_replace(seq);
                }
                continue;
            }
        }
    }
}

/// An event as the page reads it: every string sanitized.
fn frame(e: &Event, errors: &Regex) -> Frame {
    let lines: Vec<String> = match &e.body {
        EventBody::MonitorEvent { lines, .. } => lines.iter().map(|l| one_line(l)).collect(),
        _ => sanitize_for_model(&e.text)
            .split('\n')
            .map(|l| l.replace('\t', " "))
            .collect(),
    };
    let error_lines: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| errors.is_match(l))
        .map(|(i, _)| i)
        .collect();
    let data = json!({
        "seq": e.seq,
        "session": one_line(&e.session),
        "monitor_id": one_line(&e.monitor_id),
        "kind": e.kind().as_str(),
        "ts": wakeful_core::event::format_ts(&e.ts),
        "lines": lines,
        "errors": error_lines,
    })
    .to_string();
    Frame {
        seq: e.seq,
        session: e.session.clone(),
        data,
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(index))
        .route(
            "/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
        .route("/api/state", get(state))
        .route("/api/events", get(events))
        .route("/api/output", get(output))
        .route("/api/wake", get(wake))
        .route("/api/consumers", get(consumers))
        .route("/api/stop", post(stop))
        .layer(axum::middleware::from_fn_with_state(shared.clone(), guard))
        .with_state(shared)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

fn cookie_name(port: u16) -> String {
    // Cookies do not tell ports apart: one name per server.
    format!("wakeful_web_{port}")
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        text,
    )
        .into_response()
}

/// What the guard decides about a request, before it is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it.
    Serve,
    /// The launch token, exchanged (or given again by a browser that holds
    /// the session already): set the session cookie and redirect to `/`.
    Exchange,
    /// Refuse it with this status and reason.
    Refuse(u16, &'static str),
}

/// What the guard looks at in a request.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// The method.
    pub method: &'a str,
    /// The path.
    pub path: &'a str,
    /// The query, if any.
    pub query: Option<&'a str>,
    /// Whether the request line named an authority (absolute form).
    pub absolute_form: bool,
    /// Every `Host` header (as text; one that is not text is refused).
    pub hosts: &'a [Option<&'a str>],
    /// Every `Origin` header.
    pub origins: &'a [Option<&'a str>],
    /// `Sec-Fetch-Site`, when sent.
    pub fetch_site: Option<&'a str>,
    /// Every `Cookie` header.
    pub cookies: &'a [Option<&'a str>],
}

/// The guard's decision for `ask` to the server on `port`, holding the
/// launch token `launch` (until it was used) and the session value
/// `session` (once it was exchanged). Pure: see the module docs for the
/// rules.
pub fn judge(ask: &Ask<'_>, port: u16, launch: Option<&str>, session: Option<&str>) -> Verdict {
    let allowed = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
    let host =
        match ask.hosts {
            [Some(h)] if allowed.iter().any(|a| a == h) => *h,
            [] | [_] => return Verdict::Refuse(
                403,
                "forbidden: this server answers only to Host 127.0.0.1:PORT or localhost:PORT\n",
            ),
            _ => return Verdict::Refuse(403, "forbidden: more than one Host header\n"),
        };
    if ask.absolute_form {
        return Verdict::Refuse(
            403,
            "forbidden: the request line names a host (absolute form); send the path only\n",
        );
    }
    let own_origin = format!("http://{host}");
    let origin = match ask.origins {
        [] => None,
        [one] => Some(one.unwrap_or("")),
        _ => return Verdict::Refuse(403, "forbidden: more than one Origin header\n"),
    };
    let changes = !matches!(ask.method, "GET" | "HEAD");
    if changes && origin != Some(own_origin.as_str()) {
        return Verdict::Refuse(
            403,
            "forbidden: a request that changes anything must come from this page (Origin)\n",
        );
    }
    let from_elsewhere = origin.is_some_and(|o| o != own_origin)
        || ask.fetch_site.is_some_and(|s| {
            !s.eq_ignore_ascii_case("same-origin") && !s.eq_ignore_ascii_case("none")
        });
    if ask.path.starts_with("/api/") && from_elsewhere {
        return Verdict::Refuse(
            403,
            "forbidden: the API answers only this page (Origin, Sec-Fetch-Site)\n",
        );
    }
    let name = cookie_name(port);
    let by_cookie = session.is_some_and(|value| {
        ask.cookies
            .iter()
            .flatten()
            .flat_map(|v| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .any(|(k, v)| k == name && constant_time_eq(v.as_bytes(), value.as_bytes()))
    });
    let token_given: Vec<&str> = ask
        .query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| *k == "token")
        .map(|(_, v)| v)
        .collect();
    if !token_given.is_empty() {
        let good = launch.is_some_and(|t| {
            token_given
                .iter()
                .any(|v| constant_time_eq(v.as_bytes(), t.as_bytes()))
        });
        return if good && ask.method == "GET" && ask.path == "/" {
            Verdict::Exchange
        } else if by_cookie {
            // Already in: take the token out of the address bar.
            Verdict::Exchange
        } else {
            Verdict::Refuse(
                401,
                "unauthorized: this launch URL is not valid (it is good once); start `wakeful web` again for a new one\n",
            )
        };
    }
    if !by_cookie {
        return Verdict::Refuse(
            401,
            "unauthorized: open the URL that `wakeful web` printed (it carries a one-time token)\n",
        );
    }
    Verdict::Serve
}

/// Host (DNS rebinding), Origin and Sec-Fetch-Site, then the launch token
/// or the session cookie ([`judge`]); no response carries CORS headers.
async fn guard(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let texts = |name: header::HeaderName| -> Vec<Option<&str>> {
        headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().ok())
            .collect()
    };
    let hosts = texts(header::HOST);
    let origins = texts(header::ORIGIN);
    let cookies = texts(header::COOKIE);
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    let ask = Ask {
        method: req.method().as_str(),
        path: req.uri().path(),
        query: req.uri().query(),
        absolute_form: req.uri().authority().is_some(),
        hosts: &hosts,
        origins: &origins,
        fetch_site,
        cookies: &cookies,
    };
    let verdict = {
        let access = shared.access();
        judge(
            &ask,
            shared.port,
            access.launch.as_deref(),
            access.session.as_deref(),
        )
    };
    let mut r = match verdict {
        Verdict::Refuse(status, why) => plain(
            StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN),
            why,
        ),
        Verdict::Exchange => {
            // The launch token is spent; the session value is new (or the
            // one this browser holds already).
            let session = {
                let mut access = shared.access();
                access.launch = None;
                if access.session.is_none() {
                    access.session = random_token().ok();
                }
                access.session.clone().ok_or(())
            };
            match session {
                Ok(session) => {
                    let cookie = format!(
                        "{}={session}; HttpOnly; SameSite=Strict; Path=/",
                        cookie_name(shared.port)
                    );
                    let mut r = StatusCode::SEE_OTHER.into_response();
                    let h = r.headers_mut();
                    h.insert(header::LOCATION, HeaderValue::from_static("/"));
                    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                    if let Ok(v) = HeaderValue::from_str(&cookie) {
                        h.insert(header::SET_COOKIE, v);
                    }
                    r
                }
                Err(_) => plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "cannot read random bytes for a session; start `wakeful web` again\n",
                ),
            }
        }
        Verdict::Serve => next.run(req).await,
    };
    let h = r.headers_mut();
    for cors in [
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        header::ACCESS_CONTROL_ALLOW_METHODS,
    ] {
        h.remove(cors);
    }
    h.remove("access-control-allow-private-network");
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    r
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

fn monitor_json(row: &crate::model::MonitorRow, now: &chrono::DateTime<Utc>) -> Value {
    let i: &MonitorInfo = &row.info;
    let activity: Vec<[u64; 2]> = row
        .activity
        .series(now)
        .iter()
        .map(|b| [b.lines, b.suppressed])
        .collect();
    json!({
        "id": one_line(&i.id),
        "session": one_line(&i.session),
        "description": one_line(&i.description),
        "source": crate::model::source_kind(i),
        "what": one_line(&i.source.summary()),
        "state": match i.state { MonitorState::Running => "running", MonitorState::Ended => "ended" },
        "ending": one_line(&ending(i)),
        "abnormal": i.stop_reason.as_ref().is_some_and(|r| r.is_abnormal()) || !i.survivors.is_empty(),
        "started_at": wakeful_core::event::format_ts(&i.started_at),
        "ended_at": i.ended_at.as_ref().map(wakeful_core::event::format_ts),
        "last_event": row.last_event.as_ref().map(wakeful_core::event::format_ts),
        "lines": i.lines,
        "suppressed_lines": i.suppressed_lines,
        "activity": activity,
    })
}

/// Sessions, monitors and the link, for the page's table.
async fn state(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let now = Utc::now();
    let hub = shared.hub();
    let monitors: Vec<Value> = hub
        .monitors
        .sorted(&now)
        .into_iter()
        .map(|r| monitor_json(r, &now))
        .collect();
    let sessions: Vec<String> = hub
        .monitors
        .sessions()
        .iter()
        .map(|s| one_line(s))
        .collect();
    Json(json!({
        "now": wakeful_core::event::format_ts(&now),
        "link": match &hub.link {
            Link::Live => "live".to_string(),
            Link::Connecting => "connecting".to_string(),
            Link::Lost(why) => one_line(why),
        },
        "last_seq": hub.ring.back().map(|f| f.seq).unwrap_or(hub.ring_after),
        "sessions": sessions,
        "monitors": monitors,
        "storage": hub.storage.as_ref().map(|s| {
            let (text, level) = crate::storage_line(s);
            json!({"text": text, "level": level.as_str()})
        }),
    }))
}

#[derive(Deserialize)]
struct EventsQuery {
    session: Option<String>,
    after: Option<u64>,
}

/// How many recent events a new stream without a cursor starts with.
const TAIL: usize = 1000;
/// Most frames taken from the ring at once.
const CHUNK: usize = 256;

struct Stream {
    shared: Arc<Shared>,
    session: Option<String>,
    /// The last seq sent (or asked to start after); `None`: the recent
    /// events, decided once the hub has its history.
    cursor: Option<u64>,
    pending: VecDeque<Arc<Frame>>,
    latest: watch::Receiver<u64>,
    /// Reading events that left the ring from the daemon.
    backfill: Option<wakeful_client::EventStream>,
}

impl Stream {
    fn matches(&self, f: &Frame) -> bool {
        self.session.as_ref().is_none_or(|s| &f.session == s)
    }

    /// Frames after the cursor from the ring, or `Err` when the cursor is
    /// before the ring (read those from the daemon).
    fn take(&mut self) -> Result<(), ()> {
        let shared = self.shared.clone();
        let hub = shared.hub();
        if !hub.started {
            return Ok(());
        }
        let cursor = match self.cursor {
            Some(c) => c,
            None => {
                // The last TAIL events of the session (or all) from the ring.
                let matching: Vec<u64> = hub
                    .ring
                    .iter()
                    .rev()
                    .filter(|f| self.matches(f))
                    .take(TAIL)
                    .map(|f| f.seq)
                    .collect();
                match matching.last() {
                    Some(oldest) if matching.len() == TAIL => oldest - 1,
                    _ => hub.ring_after,
                }
            }
        };
        self.cursor = Some(cursor);
        if cursor < hub.ring_after {
            return Err(());
        }
        let start = hub.ring.partition_point(|f| f.seq <= cursor);
        for f in hub.ring.iter().skip(start) {
            self.cursor = Some(f.seq);
            if self.session.as_ref().is_none_or(|s| &f.session == s) {
                self.pending.push_back(f.clone());
                if self.pending.len() >= CHUNK {
                    break;
                }
            }
        }
        Ok(())
    }

    async fn next_frame(&mut self) -> Option<Arc<Frame>> {
        loop {
            if let Some(f) = self.pending.pop_front() {
                return Some(f);
            }
            if let Some(events) = &mut self.backfill {
                match events.next().await {
                    Ok(Some(e)) => {
                        let event = e.decode().ok()?;
                        if self.cursor.is_none_or(|c| event.seq > c) {
                            self.cursor = Some(event.seq);
                            let f = frame(&event, &self.shared.error_regex);
                            if self.matches(&f) {
                                return Some(Arc::new(f));
                            }
                        }
                        continue;
                    }
                    Ok(None) => {
                        self.backfill = None;
                        continue;
                    }
                    Err(_) => return None,
                }
            }
            if self.take().is_err() {
                let conn = connect_existing(&self.shared.paths).await.ok()?;
                let after = self.cursor.unwrap_or(0);
                let events = match &self.session {
                    Some(s) => {
                        let request = wakeful_protocol::ReadEvents {
                            session: s.clone(),
                            after,
                            ..Default::default()
                        };
                        conn.events(request).await
                    }
                    None => {
                        let request = wakeful_protocol::ReadAllEvents {
                            after,
                            ..Default::default()
                        };
                        conn.events(request).await
                    }
                };
                self.backfill = Some(events.ok()?);
                continue;
            }
            if self.pending.is_empty() {
                // Wait for the hub to take newer events.
                self.latest.changed().await.ok()?;
            }
        }
    }
}

/// Server-sent events: `id:` = seq, `data:` = the event as JSON.
async fn events(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(q): Query<EventsQuery>,
) -> Response {
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let cursor = resume.or(q.after);
    let stream = Stream {
        latest: shared.latest.subscribe(),
        shared: shared.clone(),
        session: q.session,
        cursor,
        pending: VecDeque::new(),
        backfill: None,
    };
    let body = futures_util::stream::unfold(stream, |mut s| async move {
        let f = s.next_frame().await?;
        let e = SseEvent::default().id(f.seq.to_string()).data(&f.data);
        Some((Ok::<_, Infallible>(e), s))
    });
    Sse::new(body)
        .keep_alive(
            KeepAlive::new()
                .interval(shared.options.keep_alive)
                .text("keep-alive"),
        )
        .into_response()
}

#[derive(Deserialize)]
struct OutputQuery {
    id: String,
    from: Option<u64>,
    count: Option<u64>,
}

/// Lines of a monitor's output file (by id: the path comes from the
/// daemon's list, never from the request).
async fn output(State(shared): State<Arc<Shared>>, Query(q): Query<OutputQuery>) -> Response {
    let path = {
        let hub = shared.hub();
        hub.monitors.get(&q.id).map(|r| r.info.output_path.clone())
    };
    let Some(path) = path.filter(|p| !p.as_os_str().is_empty()) else {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("monitor {} is not known here (active, or ended within the last hour)", one_line(&q.id))})),
        )
            .into_response();
    };
    let from = q.from.unwrap_or(u64::MAX);
    let count = q.count.unwrap_or(200).clamp(1, 5000);
    let shared2 = shared.clone();
    let result = tokio::task::spawn_blocking(move || {
        let mut outputs = shared2.outputs.lock().unwrap_or_else(|e| e.into_inner());
        let index = match outputs.remove(&path) {
            Some(mut i) => i.refresh().map(|()| i),
            None => OutputIndex::open(&path),
        };
        let index = index.map_err(|e| e.to_string())?;
        let lines = index.read(from, count).map_err(|e| e.to_string())?;
        let body = json!({
            "total": index.total(),
            "top": index.window_top(from, count),
            "lines": lines,
            "path": one_line(&path.display().to_string()),
        });
        outputs.insert(path, index);
        Ok::<_, String>(body)
    })
    .await;
    match result {
        Ok(Ok(body)) => Json(body).into_response(),
        Ok(Err(e)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": one_line(&e)})),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": e.to_string()})),
        )
            .into_response(),
    }
}

fn daemon_error(e: wakeful_client::ClientError) -> Response {
    let status = match &e {
        wakeful_client::ClientError::Refused {
            kind: wakeful_client::ErrorKind::NotFound,
            ..
        } => StatusCode::NOT_FOUND,
        wakeful_client::ClientError::Refused { .. } => StatusCode::BAD_REQUEST,
        _ => StatusCode::BAD_GATEWAY,
    };
    (status, Json(json!({"error": one_line(&e.to_string())}))).into_response()
}

#[derive(Deserialize)]
struct SessionQuery {
    session: Option<String>,
}

#[derive(Deserialize)]
struct IdQuery {
    id: String,
}

/// A session's wake route.
async fn wake(State(shared): State<Arc<Shared>>, Query(q): Query<SessionQuery>) -> Response {
    let Some(session) = q.session else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "name a session: ?session=S"})),
        )
            .into_response();
    };
    match feed::call(&shared.paths, wakeful_protocol::ShowWake { session }).await {
        Ok(w) => Json(sanitize_json(json!(w))).into_response(),
        Err(e) => daemon_error(e),
    }
}

/// Consumers and their unacknowledged events.
async fn consumers(State(shared): State<Arc<Shared>>, Query(q): Query<SessionQuery>) -> Response {
    match feed::call(
        &shared.paths,
        wakeful_protocol::ListConsumers { session: q.session },
    )
    .await
    {
        Ok(c) => Json(sanitize_json(json!(c))).into_response(),
        Err(e) => daemon_error(e),
    }
}

/// Stops a monitor (the only action that changes anything).
async fn stop(State(shared): State<Arc<Shared>>, Query(q): Query<IdQuery>) -> Response {
    match feed::call(&shared.paths, wakeful_protocol::StopMonitor { id: q.id }).await {
        Ok(info) => Json(json!({
            "id": one_line(&info.id),
            "state": "ended",
            "ending": one_line(&ending(&info)),
        }))
        .into_response(),
        Err(e) => daemon_error(e),
    }
}

/// Accepts connections whose writes must make progress within a deadline.
struct DeadlineListener {
    inner: TcpListener,
    deadline: Duration,
}

impl axum::serve::Listener for DeadlineListener {
    type Io = DeadlineIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    let _ = stream.set_nodelay(true);
                    return (
                        DeadlineIo {
                            inner: stream,
                            deadline: self.deadline,
                            stalled: None,
                        },
                        addr,
                    );
                }
                // Out of descriptors and the like: back off, go on.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A TCP stream whose writes fail (`TimedOut`) once one has waited longer
/// than the deadline: a browser that stopped reading is dropped instead of
/// holding its connection forever.
pub struct DeadlineIo {
    inner: TcpStream,
    deadline: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl DeadlineIo {
    fn check<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        match r {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let deadline = self.deadline;
                let sleep = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(deadline)));
                if std::future::Future::poll(sleep.as_mut(), cx).is_ready() {
                    Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the client read nothing within the write deadline",
                    )))
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl AsyncRead for DeadlineIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for DeadlineIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.check(cx, r)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.check(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.check(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        let t = random_token().unwrap();
        assert_eq!(t.len(), 64);
        assert_ne!(t, random_token().unwrap());
    }

    fn ask<'a>(
        method: &'a str,
        path: &'a str,
        query: Option<&'a str>,
        hosts: &'a [Option<&'a str>],
        origins: &'a [Option<&'a str>],
        cookies: &'a [Option<&'a str>],
    ) -> Ask<'a> {
        Ask {
            method,
            path,
            query,
            absolute_form: false,
            hosts,
            origins,
            fetch_site: None,
            cookies,
        }
    }

    #[test]
    fn the_guard_lets_in_only_its_own_origin_with_the_session() {
        let host = [Some("127.0.0.1:8080")];
        let session = [Some("wakeful_web_8080=s3cret")];
        let none: [Option<&str>; 0] = [];
        let judge = |a: &Ask<'_>| judge(a, 8080, Some("tok"), Some("s3cret"));
        assert_eq!(
            judge(&ask("GET", "/", None, &host, &none, &session)),
            Verdict::Serve
        );
        // The token, once; never as the cookie.
        assert_eq!(
            judge(&ask("GET", "/", Some("token=tok"), &host, &none, &none)),
            Verdict::Exchange
        );
        assert_eq!(
            judge(&ask("GET", "/", Some("token=tok"), &host, &none, &none)),
            Verdict::Exchange,
            "judge is pure: spending the token is the server's part"
        );
        assert!(matches!(
            super::judge(
                &ask("GET", "/", Some("token=tok"), &host, &none, &none),
                8080,
                None,
                Some("s3cret")
            ),
            Verdict::Refuse(401, _)
        ));
        let token_cookie = [Some("wakeful_web_8080=tok")];
        assert!(matches!(
            judge(&ask("GET", "/api/state", None, &host, &none, &token_cookie)),
            Verdict::Refuse(401, _)
        ));
        let other_port = [Some("wakeful_web_8081=s3cret")];
        assert!(matches!(
            judge(&ask("GET", "/api/state", None, &host, &none, &other_port)),
            Verdict::Refuse(401, _)
        ));
        // Hosts.
        for bad in [
            vec![Some("localhost.:8080")],
            vec![Some("LOCALHOST:8080")],
            vec![Some("[::1]:8080")],
            vec![Some("0.0.0.0:8080")],
            vec![Some("127.0.0.1:8081")],
            vec![None],
            vec![],
            vec![Some("127.0.0.1:8080"), Some("evil.example")],
        ] {
            assert!(
                matches!(
                    judge(&ask("GET", "/", None, &bad, &none, &session)),
                    Verdict::Refuse(403, _)
                ),
                "{bad:?}"
            );
        }
        let mut absolute = ask("GET", "/api/state", None, &host, &none, &session);
        absolute.absolute_form = true;
        assert!(matches!(judge(&absolute), Verdict::Refuse(403, _)));
        // Origins: a change needs this very one; a read refuses others.
        let own = [Some("http://127.0.0.1:8080")];
        assert_eq!(
            judge(&ask("POST", "/api/stop", None, &host, &own, &session)),
            Verdict::Serve
        );
        for bad in [
            vec![],
            vec![Some("null")],
            vec![Some("http://localhost:8080")],
            vec![Some("http://127.0.0.1:9")],
            vec![None],
            own.to_vec().repeat(2),
        ] {
            assert!(
                matches!(
                    judge(&ask("POST", "/api/stop", None, &host, &bad, &session)),
                    Verdict::Refuse(403, _)
                ),
                "{bad:?}"
            );
            assert!(
                matches!(
                    judge(&ask("DELETE", "/api/x", None, &host, &bad, &session)),
                    Verdict::Refuse(403, _)
                ),
                "{bad:?}"
            );
        }
        for bad in [vec![Some("null")], vec![Some("http://127.0.0.1:9")]] {
            assert!(
                matches!(
                    judge(&ask("GET", "/api/events", None, &host, &bad, &session)),
                    Verdict::Refuse(403, _)
                ),
                "{bad:?}"
            );
        }
        let mut same_site = ask("GET", "/api/state", None, &host, &none, &session);
        same_site.fetch_site = Some("same-site");
        assert!(matches!(judge(&same_site), Verdict::Refuse(403, _)));
        same_site.fetch_site = Some("same-origin");
        assert_eq!(judge(&same_site), Verdict::Serve);
    }

    #[test]
    fn frames_are_sanitized_and_mark_errors() {
        let e = crate::model::tests::event(
            7,
            "mon-a",
            0,
            EventBody::MonitorEvent {
                lines: vec!["<b>ok</b>\x1b[31m".into(), "error: \x07boom".into()],
                from_line: 1,
                to_line: 2,
            },
        );
        let f = frame(
            &e,
            &Regex::new(wakeful_protocol::view::DEFAULT_ERROR_REGEX).unwrap(),
        );
        let v: Value = serde_json::from_str(&f.data).unwrap();
        assert_eq!(v["lines"], json!(["<b>ok</b>", "error: boom"]));
        assert_eq!(v["errors"], json!([1]));
        assert_eq!(v["seq"], 7);
        assert_eq!(
            sanitize_json(json!({"a": ["x\x1b[2Jy"], "b": 1})),
            json!({"a": ["xy"], "b": 1})
        );
    }
}
