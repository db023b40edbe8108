//! The Codex adapter: a wake is accepted only when Codex has started the
//! turn that carries it.
//!
//! Codex (0.171) runs interactive threads in its app-server daemon, which
//! listens on `$CODEX_HOME/app-server-control/app-server-control.sock`: a
//! WebSocket over a Unix socket speaking JSON-RPC. One delivery is one
//! connection:
//!
//! 1. `initialize` (with `experimentalApi`) and `initialized`;
//! 2. `thread/read`: the thread's status and where it came from;
//! 3. `thread/resume {excludeTurns: true}`: loads a thread that is not loaded,
//!    and subscribes this connection to the thread's notifications (a client
//!    only hears `turn/started` and `item/started` of threads it resumed or
//!    started; resuming a loaded thread leaves its running turn alone). Codex
//!    refuses with "already has an active writer" when another process holds
//!    the thread: a `codex exec` run (which would take a queued message when
//!    it exits and drop it) or an app-server of its own. wakeful refuses such
//!    a delivery for good ([`Verdict::Owned`]);
//! 4. `thread/queue/list`: is the wake already queued (an earlier attempt, or
//!    `codex queue`)? Queued wakes of the same session that this one replaces
//!    (its range covers theirs) are deleted;
//! 5. `thread/turns/list`: did a turn already carry it (a retry after the
//!    turn started)? Codex does not deduplicate `clientUserMessageId`, so
//!    without these two checks a retry would run twice;
//! 6. `thread/queue/add {clientUserMessageId: "wakeful:<wake id>:<session>"}`:
//!    an idle thread starts a turn with it at once, a busy one runs it as the
//!    next turn (`turn/start` would steer it into the running turn instead);
//! 7. wait for the `item/started` of the user message with that `clientId`
//!    (after `turn/started`): accepted. Until the deadline: queued.
//!
//! The exchange is the pure [`Exchange`]; [`deliver`] does the IO. When the
//! control socket is not there, the wake goes through `codex queue` (a
//! durable queue that Codex runs when the thread is opened again) and is
//! reported as queued; once the app-server is up, the next check confirms it
//! through the socket (matching the `[wakeful <wake id>]` at the start of the
//! text, since `codex queue` picks its own message id).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::UnixStream;
use tokio_tungstenite::tungstenite::Message;
use wakeful_core::wake_machine::Outcome;

use super::probe::{codex_home, control_socket, thread_holder, Holder};
#[cfg(test)]
use super::probe::{is_codex_exec, lock_holder};
use crate::delivery::{run, Wake};

/// How long one delivery may take, from connecting to the turn starting.
/// After it a wake that Codex holds is reported as queued and checked again.
pub const ATTEMPT_DEADLINE: Duration = Duration::from_secs(30);
/// How many recent turns are searched for a turn that already carried the
/// wake.
const HISTORY_TURNS: u64 = 25;
/// Prefix of the `clientUserMessageId`s wakeful gives its messages.
const CLIENT_ID_PREFIX: &str = "wakeful:";

/// The `clientUserMessageId` of a wake: the same for every attempt of it.
pub fn client_id(wake_id: &str, session: &str) -> String {
    format!("{CLIENT_ID_PREFIX}{wake_id}:{session}")
}

/// What a wake's text starts with (`present::batch`): `[wakeful <wake id>]`.
pub fn marker(wake_id: &str) -> String {
    format!("[wakeful {wake_id}]")
}

/// What the IO edge must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Send this JSON-RPC message.
    Send(Value),
    /// The delivery is over.
    Done(Verdict),
}

/// How a delivery through the control socket ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A turn carrying the wake started.
    Started {
        /// The turn, when Codex named it.
        turn_id: Option<String>,
        /// Found in the thread's history (an earlier attempt's turn), not
        /// seen starting now.
        earlier: bool,
    },
    /// Codex holds the wake in the thread's queue; no turn carries it yet.
    Queued {
        /// Why, for `wake show`.
        detail: String,
    },
    /// Another process holds the thread ("already has an active writer").
    Owned {
        /// The thread's `source` (`exec`, `vscode`, …) when it was read.
        source: Option<String>,
        /// Codex's message.
        message: String,
    },
    /// There is no such thread (or the id is not one).
    NoThread(String),
    /// An error or an unexpected answer before the wake was queued: retry.
    Refused(String),
}

/// What a request of ours was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Initialize,
    Read,
    Resume,
    QueueList,
    History,
    Add,
    Delete,
}

/// The JSON-RPC exchange of one delivery, without IO: feed it every message
/// that comes from the socket and send what it asks for.
#[derive(Debug)]
pub struct Exchange {
    thread: String,
    session: String,
    wake_id: String,
    client_id: String,
    marker: String,
    text: String,
    next_id: u64,
    pending: HashMap<u64, Purpose>,
    /// The step we wait for.
    waiting_for: Purpose,
    status: Option<String>,
    source: Option<String>,
    /// Codex holds the wake in the thread's queue.
    queued: bool,
    /// A turn carrying the wake was seen starting (its id).
    started: Option<Option<String>>,
    done: bool,
    /// Codex holds the wake already: never add it.
    confirm_only: bool,
}

impl Exchange {
    /// A delivery of `text` (wake `wake_id` of `session`) to `thread`.
    pub fn new(thread: &str, session: &str, wake_id: &str, text: &str) -> Self {
        Exchange {
            thread: thread.to_string(),
            session: session.to_string(),
            wake_id: wake_id.to_string(),
            client_id: client_id(wake_id, session),
            marker: marker(wake_id),
            text: text.to_string(),
            next_id: 0,
            pending: HashMap::new(),
            waiting_for: Purpose::Initialize,
            status: None,
            source: None,
            queued: false,
            started: None,
            done: false,
            confirm_only: false,
        }
    }

    /// Codex already holds the wake (an earlier attempt queued it): look
    /// for it and wait for its turn, but never add it again.
    pub fn confirm_only(mut self) -> Self {
        self.confirm_only = true;
        self
    }

    /// The first message.
    pub fn start(&mut self) -> Vec<Step> {
        let init = self.request(
            Purpose::Initialize,
            "initialize",
            json!({
                "clientInfo": {"name": "wakeful", "version": env!("CARGO_PKG_VERSION")},
                "capabilities": {"experimentalApi": true},
            }),
        );
        vec![init]
    }

    fn request(&mut self, purpose: Purpose, method: &str, params: Value) -> Step {
        self.next_id += 1;
        self.pending.insert(self.next_id, purpose);
        if purpose != Purpose::Delete {
            self.waiting_for = purpose;
        }
        Step::Send(
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}),
        )
    }

    fn done(&mut self, verdict: Verdict) -> Vec<Step> {
        self.done = true;
        vec![Step::Done(verdict)]
    }

    fn started_verdict(&self, earlier: bool) -> Option<Verdict> {
        self.started
            .clone()
            .map(|turn_id| Verdict::Started { turn_id, earlier })
    }

    /// Whether a user message item (`item/started`, history) carries the wake.
    fn carries_item(&self, item: &Value) -> bool {
        item["type"] == "userMessage"
            && (item["clientId"].as_str() == Some(&self.client_id)
                || first_text(&item["content"]).starts_with(&self.marker))
    }

    /// Whether a queue entry is the wake.
    fn is_ours(&self, entry: &Value) -> bool {
        entry["clientUserMessageId"].as_str() == Some(&self.client_id)
            || first_text(&entry["input"]).starts_with(&self.marker)
    }

    /// Whether a queue entry is an older wake of the same session, which
    /// this one replaces (a wake carries every unacknowledged event of its
    /// session, so its range covers any older wake still queued).
    fn is_replaced(&self, entry: &Value) -> bool {
        let Some(id) = entry["clientUserMessageId"].as_str() else {
            return false;
        };
        match id
            .strip_prefix(CLIENT_ID_PREFIX)
            .and_then(|rest| rest.split_once(':'))
        {
            Some((wake, session)) => session == self.session && wake != self.wake_id,
            None => false,
        }
    }

    fn status_text(&self) -> String {
        self.status.clone().unwrap_or_else(|| "unknown".to_string())
    }

    /// The verdict when the deadline passed.
    pub fn on_deadline(&self) -> Verdict {
        if let Some(v) = self.started_verdict(false) {
            return v;
        }
        if self.queued {
            return Verdict::Queued {
                detail: format!(
                    "Codex holds {} in the queue of thread {} (thread {}); no turn has started with it yet",
                    self.wake_id,
                    self.thread,
                    self.status_text()
                ),
            };
        }
        Verdict::Refused(format!(
            "Codex's app-server did not answer {} within {}s",
            method_of(self.waiting_for),
            ATTEMPT_DEADLINE.as_secs()
        ))
    }

    /// The verdict when the connection ended early.
    pub fn on_closed(&self, why: &str) -> Verdict {
        if let Some(v) = self.started_verdict(false) {
            return v;
        }
        if self.queued {
            return Verdict::Queued {
                detail: format!(
                    "Codex holds {} in the queue of thread {}; the app-server connection ended before a turn started ({why})",
                    self.wake_id, self.thread
                ),
            };
        }
        Verdict::Refused(format!(
            "the app-server connection ended while waiting for {} ({why})",
            method_of(self.waiting_for)
        ))
    }

    /// One message from the socket.
    pub fn on_message(&mut self, msg: &Value) -> Vec<Step> {
        if self.done {
            return vec![];
        }
        let id = msg.get("id").and_then(Value::as_u64);
        match (msg.get("method").and_then(Value::as_str), id) {
            // A request from the server (an approval of the thread's turn,
            // sent to every subscriber): never ours to answer.
            (Some(_), Some(_)) => vec![],
            (Some(method), None) => self.on_notification(method, &msg["params"]),
            (None, Some(id)) => match self.pending.remove(&id) {
                Some(purpose) => self.on_response(purpose, msg),
                None => vec![],
            },
            (None, None) => vec![],
        }
    }

    fn on_notification(&mut self, method: &str, params: &Value) -> Vec<Step> {
        if params["threadId"].as_str() != Some(&self.thread) {
            return vec![];
        }
        match method {
            "item/started" | "item/completed" if self.carries_item(&params["item"]) => {
                // Proof enough in any phase: nothing more is sent.
                self.started = Some(params["turnId"].as_str().map(str::to_string));
                match self.started_verdict(false) {
                    Some(v) => self.done(v),
                    None => vec![],
                }
            }
            "thread/status/changed" => {
                self.status = Some(status_of(&params["status"]));
                vec![]
            }
            _ => vec![],
        }
    }

    fn on_response(&mut self, purpose: Purpose, msg: &Value) -> Vec<Step> {
        let error = msg.get("error").map(|e| {
            e["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| e.to_string())
        });
        let result = &msg["result"];
        match purpose {
            Purpose::Initialize => match error {
                Some(e) => self.done(Verdict::Refused(format!("initialize: {e}"))),
                None => {
                    let read = self.request(
                        Purpose::Read,
                        "thread/read",
                        json!({"threadId": self.thread}),
                    );
                    vec![
                        Step::Send(json!({"jsonrpc": "2.0", "method": "initialized"})),
                        read,
                    ]
                }
            },
            Purpose::Read => {
                // An error here (an unknown thread reads as "thread not
                // loaded") is left to thread/resume, whose error says more.
                if error.is_none() {
                    self.status = Some(status_of(&result["thread"]["status"]));
                    self.source = source_of(&result["thread"]["source"]);
                }
                vec![self.request(
                    Purpose::Resume,
                    "thread/resume",
                    json!({"threadId": self.thread, "excludeTurns": true}),
                )]
            }
            Purpose::Resume => match error {
                Some(e) if e.contains("active writer") => self.done(Verdict::Owned {
                    source: self.source.clone(),
                    message: e,
                }),
                Some(e)
                    if e.contains("no rollout found")
                        || e.contains("invalid thread id")
                        || e.contains("invalid session id") =>
                {
                    self.done(Verdict::NoThread(e))
                }
                Some(e) => self.done(Verdict::Refused(format!("thread/resume: {e}"))),
                None => {
                    if result["thread"]["status"].is_object() {
                        self.status = Some(status_of(&result["thread"]["status"]));
                    }
                    vec![self.request(
                        Purpose::QueueList,
                        "thread/queue/list",
                        json!({"threadId": self.thread, "limit": 100}),
                    )]
                }
            },
            Purpose::QueueList => {
                if let Some(e) = error {
                    return self.done(Verdict::Refused(format!("thread/queue/list: {e}")));
                }
                let entries = result["data"].as_array().cloned().unwrap_or_default();
                let mut steps = vec![];
                for entry in &entries {
                    if self.is_ours(entry) {
                        self.queued = true;
                    } else if self.is_replaced(entry) {
                        if let Some(qid) = entry["id"].as_str() {
                            steps.push(self.request(
                                Purpose::Delete,
                                "thread/queue/delete",
                                json!({"threadId": self.thread, "queuedSubmissionId": qid}),
                            ));
                        }
                    }
                }
                if let Some(v) = self.started_verdict(false) {
                    steps.extend(self.done(v));
                    return steps;
                }
                if self.queued {
                    // Queued already (an earlier attempt, or `codex queue`):
                    // wait for its turn, add nothing.
                    self.waiting_for = Purpose::Add;
                    return steps;
                }
                steps.push(self.request(
                    Purpose::History,
                    "thread/turns/list",
                    json!({"threadId": self.thread, "limit": HISTORY_TURNS,
                           "itemsView": "full", "sortDirection": "desc"}),
                ));
                steps
            }
            Purpose::History => {
                if let Some(e) = error {
                    return self.done(Verdict::Refused(format!("thread/turns/list: {e}")));
                }
                let earlier = result["data"].as_array().and_then(|turns| {
                    turns.iter().find_map(|turn| {
                        let items = turn["items"].as_array()?;
                        items
                            .iter()
                            .any(|i| self.carries_item(i))
                            .then(|| turn["id"].as_str().map(str::to_string))
                    })
                });
                if let Some(turn_id) = earlier {
                    return self.done(Verdict::Started {
                        turn_id,
                        earlier: true,
                    });
                }
                if let Some(v) = self.started_verdict(false) {
                    return self.done(v);
                }
                if self.confirm_only {
                    // Held by Codex, in neither list at this instant: on its
                    // way into a turn. Wait for that turn's item.
                    self.queued = true;
                    self.waiting_for = Purpose::Add;
                    return vec![];
                }
                vec![self.request(
                    Purpose::Add,
                    "thread/queue/add",
                    json!({"threadId": self.thread, "clientUserMessageId": self.client_id,
                           "input": [{"type": "text", "text": self.text}]}),
                )]
            }
            Purpose::Add => {
                if let Some(e) = error {
                    return self.done(Verdict::Refused(format!("thread/queue/add: {e}")));
                }
                self.queued = true;
                match self.started_verdict(false) {
                    Some(v) => self.done(v),
                    None => vec![],
                }
            }
            Purpose::Delete => {
                if let Some(e) = error {
                    tracing::warn!(
                        "could not remove a replaced wake from Codex thread {}'s queue: {e}",
                        self.thread
                    );
                }
                vec![]
            }
        }
    }
}

fn method_of(p: Purpose) -> &'static str {
    match p {
        Purpose::Initialize => "initialize",
        Purpose::Read => "thread/read",
        Purpose::Resume => "thread/resume",
        Purpose::QueueList => "thread/queue/list",
        Purpose::History => "thread/turns/list",
        Purpose::Add => "the turn to start",
        Purpose::Delete => "thread/queue/delete",
    }
}

/// The text of the first text part of a `UserInput` list.
fn first_text(input: &Value) -> &str {
    input
        .as_array()
        .and_then(|parts| parts.iter().find_map(|p| p["text"].as_str()))
        .unwrap_or("")
}

/// `idle`, `notLoaded`, `active (waitingOnApproval)`, …
fn status_of(status: &Value) -> String {
    let kind = status["type"].as_str().unwrap_or("unknown").to_string();
    let flags: Vec<&str> = status["activeFlags"]
        .as_array()
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if flags.is_empty() {
        kind
    } else {
        format!("{kind} ({})", flags.join(", "))
    }
}

fn source_of(source: &Value) -> Option<String> {
    match source {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.keys().next().cloned(),
        _ => None,
    }
}

/// What the adapter remembers between attempts of a session's wakes.
#[derive(Debug, Default)]
pub struct Memory {
    /// The wake Codex holds: an earlier attempt left it queued (through the
    /// control socket, or with `codex queue` while the socket was absent).
    /// Later attempts only confirm it and never hand it over again: between
    /// `thread/queue/list` and `thread/turns/list` a queued message can be
    /// leaving the queue for a turn that does not list it yet, and adding it
    /// then would run it twice.
    held: Option<String>,
}

/// Why a thread held by another process is not woken.
fn owned_reason(thread: &str, holder: Option<&Holder>, source: Option<&str>) -> String {
    let exec = holder
        .map(Holder::is_exec)
        .unwrap_or(source == Some("exec"));
    let who = holder
        .map(|h| format!(" ({})", h.describe()))
        .unwrap_or_default();
    if exec {
        format!(
            "Codex thread {thread} is run by `codex exec`{who}: a queued message would be taken by that run when it exits and dropped unseen, so wakeful does not wake it; its events go with the next wake once the run has ended"
        )
    } else {
        format!(
            "Codex thread {thread} is open in another Codex process{who}, not in Codex's app-server daemon, and that process does not run queued messages; its events go with the next wake once the thread is free"
        )
    }
}

/// Hands `wake` to Codex thread `thread`; see the module docs.
pub async fn deliver(
    thread: &str,
    binary: Option<&Path>,
    route_home: Option<&Path>,
    wake: &Wake<'_>,
    memory: &mut Memory,
) -> Outcome {
    let home = codex_home(route_home);
    let socket = home.as_deref().map(control_socket);
    let connected = match &socket {
        Some(s) => connect(s).await,
        None => Err(ConnectError::Absent(
            "neither CODEX_HOME nor HOME is set".into(),
        )),
    };
    let outcome = match connected {
        Ok(ws) => {
            let held = memory.held.as_deref() == Some(wake.wake_id);
            let verdict = exchange(ws, thread, wake, held).await;
            verdict_outcome(thread, home.as_deref(), wake.wake_id, verdict)
        }
        Err(ConnectError::Absent(why)) => {
            fallback(
                thread,
                binary,
                route_home,
                home.as_deref(),
                wake,
                memory,
                &why,
            )
            .await
        }
        Err(ConnectError::Unreachable(e)) => Outcome::Refused(e),
    };
    match &outcome {
        Outcome::Queued(_) => memory.held = Some(wake.wake_id.to_string()),
        Outcome::Refused(_) => {}
        _ => memory.held = None,
    }
    outcome
}

fn verdict_outcome(thread: &str, home: Option<&Path>, wake_id: &str, v: Verdict) -> Outcome {
    match v {
        Verdict::Started { turn_id, earlier } => {
            tracing::info!(
                "{wake_id}: Codex thread {thread} {} turn {}",
                if earlier { "had run it in" } else { "started" },
                turn_id.as_deref().unwrap_or("?")
            );
            Outcome::Accepted
        }
        Verdict::Queued { detail } => Outcome::Queued(detail),
        Verdict::Owned { source, message } => {
            let holder = home.and_then(|h| thread_holder(h, thread));
            tracing::info!("{wake_id}: {message}");
            Outcome::Failed(owned_reason(thread, holder.as_ref(), source.as_deref()))
        }
        Verdict::NoThread(e) => Outcome::Failed(format!("no Codex thread {thread}: {e}")),
        Verdict::Refused(e) => Outcome::Refused(e),
    }
}

type Ws = tokio_tungstenite::WebSocketStream<UnixStream>;

/// Why the control socket could not be used.
enum ConnectError {
    /// Not there, or nobody listens: Codex's app-server is not running.
    Absent(String),
    /// There, but not usable now.
    Unreachable(String),
}

async fn connect(socket: &Path) -> Result<Ws, ConnectError> {
    let work = async {
        let stream = match UnixStream::connect(socket).await {
            Ok(s) => s,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                return Err(ConnectError::Absent(format!(
                    "no app-server listens on {} ({e})",
                    socket.display()
                )))
            }
            Err(e) => {
                return Err(ConnectError::Unreachable(format!(
                    "cannot connect to Codex's app-server at {}: {e}",
                    socket.display()
                )))
            }
        };
        tokio_tungstenite::client_async("ws://localhost/", stream)
            .await
            .map(|(ws, _)| ws)
            .map_err(|e| {
                ConnectError::Unreachable(format!(
                    "WebSocket handshake with Codex's app-server at {} failed: {e}",
                    socket.display()
                ))
            })
    };
    tokio::time::timeout(Duration::from_secs(10), work)
        .await
        .unwrap_or_else(|_| {
            Err(ConnectError::Unreachable(format!(
                "connecting to Codex's app-server at {} timed out",
                socket.display()
            )))
        })
}

/// Runs the exchange over an open connection, until a verdict or the
/// deadline.
/// `held`: Codex already holds the wake (see [`Memory`]): confirm, add
/// nothing.
async fn exchange(mut ws: Ws, thread: &str, wake: &Wake<'_>, held: bool) -> Verdict {
    let deadline = tokio::time::Instant::now() + ATTEMPT_DEADLINE;
    let mut ex = Exchange::new(thread, wake.session, wake.wake_id, wake.text);
    if held {
        ex = ex.confirm_only();
    }
    let mut steps = ex.start();
    let verdict = 'talk: loop {
        for step in steps.drain(..) {
            match step {
                Step::Done(v) => break 'talk v,
                Step::Send(msg) => {
                    let sent =
                        tokio::time::timeout_at(deadline, ws.send(Message::text(msg.to_string())))
                            .await;
                    match sent {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => break 'talk ex.on_closed(&e.to_string()),
                        Err(_) => break 'talk ex.on_deadline(),
                    }
                }
            }
        }
        let text = match tokio::time::timeout_at(deadline, ws.next()).await {
            Err(_) => break ex.on_deadline(),
            Ok(None) => break ex.on_closed("closed"),
            Ok(Some(Err(e))) => break ex.on_closed(&e.to_string()),
            Ok(Some(Ok(Message::Text(t)))) => t,
            Ok(Some(Ok(Message::Close(_)))) => break ex.on_closed("closed by Codex"),
            Ok(Some(Ok(_))) => continue,
        };
        match serde_json::from_str::<Value>(text.as_str()) {
            Ok(v) => steps = ex.on_message(&v),
            Err(e) => tracing::debug!("unreadable message from Codex's app-server: {e}"),
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
    verdict
}

/// The control socket is absent: `codex queue`, reported as queued (Codex
/// runs it when the thread is opened again; a later check confirms it
/// through the socket).
async fn fallback(
    thread: &str,
    binary: Option<&Path>,
    route_home: Option<&Path>,
    home: Option<&Path>,
    wake: &Wake<'_>,
    memory: &mut Memory,
    why: &str,
) -> Outcome {
    let waiting = |how: &str| {
        format!(
            "{} was queued for Codex thread {thread} with `{how}`; Codex's app-server is not running ({why}), so the turn starts when Codex opens the thread again, and wakeful confirms it then",
            wake.wake_id
        )
    };
    if memory.held.as_deref() == Some(wake.wake_id) {
        return Outcome::Queued(waiting("codex queue"));
    }
    match home.and_then(|h| thread_holder(h, thread)) {
        Some(holder) if holder.is_control_app_server() => {
            return Outcome::Refused(format!(
                "Codex's app-server ({}) runs thread {thread} but its control socket does not answer: {why}",
                holder.describe()
            ))
        }
        Some(holder) => return Outcome::Failed(owned_reason(thread, Some(&holder), None)),
        None => {}
    }
    let program = super::program(binary);
    // `--resume` makes a daemon that comes up meanwhile load the thread; it
    // starts none.
    let args = vec![
        "queue".to_string(),
        "--thread".to_string(),
        thread.to_string(),
        "--message".to_string(),
        wake.text.to_string(),
        "--resume".to_string(),
    ];
    let mut env = BTreeMap::new();
    if let Some(h) = route_home {
        env.insert("CODEX_HOME".to_string(), h.display().to_string());
    }
    match run(&program, &args, &env).await {
        Ok((0, _)) => Outcome::Queued(waiting("codex queue")),
        Ok((code, err)) => Outcome::Refused(format!("codex queue exited {code}: {err}")),
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "01a2308a-0904-70a1-9b64-ab82448322f4";

    /// The messages sent in `steps`, and the verdict if there is one.
    fn split(steps: Vec<Step>) -> (Vec<Value>, Option<Verdict>) {
        let mut sent = vec![];
        let mut verdict = None;
        for s in steps {
            match s {
                Step::Send(v) => sent.push(v),
                Step::Done(v) => verdict = Some(v),
            }
        }
        (sent, verdict)
    }

    /// The one request in `steps` (asserting its method); its id.
    fn only_request(steps: Vec<Step>, method: &str) -> (u64, Value) {
        let (sent, verdict) = split(steps);
        assert_eq!(verdict, None, "{sent:?}");
        let requests: Vec<&Value> = sent.iter().filter(|m| m.get("id").is_some()).collect();
        assert_eq!(requests.len(), 1, "{sent:?}");
        assert_eq!(requests[0]["method"], method, "{sent:?}");
        (
            requests[0]["id"].as_u64().unwrap(),
            requests[0]["params"].clone(),
        )
    }

    fn ok(id: u64, result: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": result})
    }

    fn err(id: u64, message: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": message}})
    }

    fn thread(status: Value, source: &str) -> Value {
        json!({"thread": {"id": T, "status": status, "source": source, "turns": []}})
    }

    fn item_started(thread: &str, turn: &str, client_id: Option<&str>, text: &str) -> Value {
        json!({"jsonrpc": "2.0", "method": "item/started", "params": {
            "threadId": thread, "turnId": turn,
            "item": {"type": "userMessage", "id": "u1", "clientId": client_id,
                     "content": [{"type": "text", "text": text, "text_elements": []}]}}})
    }

    const TEXT: &str = "[wakeful wake-1-3] 2 events from this session's background monitors";

    /// Runs the exchange up to the queue listing; returns it and the
    /// listing's id.
    fn up_to_queue_list(status: Value, source: &str) -> (Exchange, u64) {
        up_to_queue_list_of(Exchange::new(T, "sess", "wake-1-3", TEXT), status, source)
    }

    fn up_to_queue_list_of(mut ex: Exchange, status: Value, source: &str) -> (Exchange, u64) {
        let (id, params) = only_request(ex.start(), "initialize");
        assert_eq!(params["capabilities"]["experimentalApi"], true);
        let (sent, _) = split(ex.on_message(&ok(id, json!({"userAgent": "x"}))));
        assert_eq!(sent[0], json!({"jsonrpc": "2.0", "method": "initialized"}));
        assert_eq!(sent[1]["method"], "thread/read");
        assert_eq!(sent[1]["params"]["threadId"], T);
        let read = sent[1]["id"].as_u64().unwrap();
        let (id, params) = only_request(
            ex.on_message(&ok(read, thread(status, source))),
            "thread/resume",
        );
        assert_eq!(params, json!({"threadId": T, "excludeTurns": true}));
        let (id, params) = only_request(
            ex.on_message(&ok(id, thread(json!({"type": "idle"}), source))),
            "thread/queue/list",
        );
        assert_eq!(params["threadId"], T);
        (ex, id)
    }

    /// Runs the exchange up to the add; returns it and the add's id.
    fn up_to_add(status: Value) -> (Exchange, u64) {
        let (mut ex, list) = up_to_queue_list(status, "cli");
        let (id, params) = only_request(
            ex.on_message(&ok(list, json!({"data": []}))),
            "thread/turns/list",
        );
        assert_eq!(params["itemsView"], "full");
        assert_eq!(params["sortDirection"], "desc");
        let history = json!({"data": [{"id": "turn-0", "status": "completed", "items": [
            {"type": "userMessage", "clientId": null, "content": [{"type": "text", "text": "hello"}]}]}]});
        let (id, params) = only_request(ex.on_message(&ok(id, history)), "thread/queue/add");
        assert_eq!(
            params,
            json!({"threadId": T, "clientUserMessageId": "wakeful:wake-1-3:sess",
                   "input": [{"type": "text", "text": TEXT}]})
        );
        (ex, id)
    }

    #[test]
    fn an_idle_thread_is_accepted_when_the_turn_carrying_the_wake_starts() {
        let (mut ex, add) = up_to_add(json!({"type": "idle"}));
        let queued = json!({"queuedSubmission": {"id": "q1", "clientUserMessageId": "wakeful:wake-1-3:sess"}});
        assert_eq!(split(ex.on_message(&ok(add, queued))), (vec![], None));
        let turn_started = json!({"jsonrpc": "2.0", "method": "turn/started",
            "params": {"threadId": T, "turn": {"id": "turn-1", "items": []}}});
        assert_eq!(split(ex.on_message(&turn_started)), (vec![], None));
        // Another thread's message, and one of ours without the id: not it.
        let other = item_started("other-thread", "t9", Some("wakeful:wake-1-3:sess"), TEXT);
        assert_eq!(split(ex.on_message(&other)), (vec![], None));
        let user = item_started(T, "turn-1", None, "hello again");
        assert_eq!(split(ex.on_message(&user)), (vec![], None));
        let (_, verdict) = split(ex.on_message(&item_started(
            T,
            "turn-1",
            Some("wakeful:wake-1-3:sess"),
            TEXT,
        )));
        assert_eq!(
            verdict,
            Some(Verdict::Started {
                turn_id: Some("turn-1".into()),
                earlier: false
            })
        );
        // Nothing more after the verdict.
        assert!(ex.on_message(&user).is_empty());
    }

    #[test]
    fn the_turn_may_start_before_the_add_is_answered() {
        let (mut ex, _add) = up_to_add(json!({"type": "idle"}));
        let (sent, verdict) = split(ex.on_message(&item_started(
            T,
            "turn-1",
            Some("wakeful:wake-1-3:sess"),
            TEXT,
        )));
        assert!(sent.is_empty());
        assert!(matches!(verdict, Some(Verdict::Started { .. })));
    }

    #[test]
    fn a_busy_thread_holds_the_wake_queued_until_the_deadline() {
        let (mut ex, add) = up_to_add(json!({"type": "active", "activeFlags": []}));
        ex.on_message(&ok(add, json!({"queuedSubmission": {"id": "q1"}})));
        let status = json!({"jsonrpc": "2.0", "method": "thread/status/changed",
            "params": {"threadId": T, "status": {"type": "active", "activeFlags": ["waitingOnApproval"]}}});
        ex.on_message(&status);
        // An approval request to every subscriber: never answered by wakeful.
        let approval = json!({"jsonrpc": "2.0", "id": 0, "method": "item/commandExecution/requestApproval",
            "params": {"threadId": T}});
        assert!(ex.on_message(&approval).is_empty());
        match ex.on_deadline() {
            Verdict::Queued { detail } => {
                assert!(detail.contains("wake-1-3"), "{detail}");
                assert!(detail.contains("active (waitingOnApproval)"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(ex.on_closed("eof"), Verdict::Queued { .. }));
    }

    #[test]
    fn a_thread_that_is_not_loaded_is_resumed_first() {
        // up_to_queue_list asserts that thread/resume follows thread/read.
        let (ex, _) = up_to_queue_list(json!({"type": "notLoaded"}), "cli");
        assert_eq!(ex.status.as_deref(), Some("idle"), "as resumed");
    }

    #[test]
    fn a_thread_another_process_writes_is_refused_for_good() {
        let mut ex = Exchange::new(T, "sess", "wake-1-3", TEXT);
        let (id, _) = only_request(ex.start(), "initialize");
        let (sent, _) = split(ex.on_message(&ok(id, json!({}))));
        let read = sent[1]["id"].as_u64().unwrap();
        let (id, _) = only_request(
            ex.on_message(&ok(read, thread(json!({"type": "notLoaded"}), "exec"))),
            "thread/resume",
        );
        let message = format!("thread {T} already has an active writer");
        let (sent, verdict) = split(ex.on_message(&err(id, &message)));
        assert!(sent.is_empty(), "nothing is queued");
        assert_eq!(
            verdict,
            Some(Verdict::Owned {
                source: Some("exec".into()),
                message
            })
        );
        let reason = owned_reason(T, None, Some("exec"));
        assert!(reason.contains("`codex exec`"), "{reason}");
        let holder = Holder {
            pid: 42,
            argv: vec!["/x/codex".into(), "app-server".into()],
        };
        let reason = owned_reason(T, Some(&holder), Some("exec"));
        assert!(
            reason.contains("another Codex process (pid 42: /x/codex app-server)"),
            "{reason}"
        );
    }

    #[test]
    fn an_unknown_thread_fails_and_other_errors_are_refusals() {
        for (message, no_thread) in [
            ("no rollout found for thread id 01a2", true),
            ("invalid session id: invalid character", true),
            ("internal error", false),
        ] {
            let mut ex = Exchange::new(T, "sess", "wake-1-3", TEXT);
            let (id, _) = only_request(ex.start(), "initialize");
            let (sent, _) = split(ex.on_message(&ok(id, json!({}))));
            let read = sent[1]["id"].as_u64().unwrap();
            let (id, _) = only_request(
                ex.on_message(&err(read, "thread not loaded: 01a2")),
                "thread/resume",
            );
            let (_, verdict) = split(ex.on_message(&err(id, message)));
            match verdict {
                Some(Verdict::NoThread(m)) if no_thread => assert_eq!(m, message),
                Some(Verdict::Refused(m)) if !no_thread => assert!(m.contains(message)),
                other => panic!("{message}: {other:?}"),
            }
        }
        let mut ex = Exchange::new(T, "sess", "wake-1-3", TEXT);
        let (id, _) = only_request(ex.start(), "initialize");
        let (_, verdict) = split(ex.on_message(&err(id, "experimental API disabled")));
        assert!(matches!(verdict, Some(Verdict::Refused(m)) if m.starts_with("initialize")));
    }

    #[test]
    fn a_wake_already_queued_is_not_added_again_and_older_ones_are_replaced() {
        let (mut ex, list) = up_to_queue_list(json!({"type": "active", "activeFlags": []}), "cli");
        let entries = json!({"data": [
            {"id": "q-user", "clientUserMessageId": "0199-random",
             "input": [{"type": "text", "text": "the user's own queued message"}]},
            {"id": "q-old", "clientUserMessageId": "wakeful:wake-1-2:sess",
             "input": [{"type": "text", "text": "[wakeful wake-1-2] …"}]},
            {"id": "q-other-session", "clientUserMessageId": "wakeful:wake-4-4:other",
             "input": [{"type": "text", "text": "[wakeful wake-4-4] …"}]},
            // Queued by `codex queue` (its own id), recognised by the text.
            {"id": "q-cli", "clientUserMessageId": "0199-cli",
             "input": [{"type": "text", "text": TEXT}]}
        ]});
        let (sent, verdict) = split(ex.on_message(&ok(list, entries)));
        assert_eq!(verdict, None);
        assert_eq!(
            sent.len(),
            1,
            "one delete, no history read, no add: {sent:?}"
        );
        assert_eq!(sent[0]["method"], "thread/queue/delete");
        assert_eq!(
            sent[0]["params"],
            json!({"threadId": T, "queuedSubmissionId": "q-old"})
        );
        // The delete's answer changes nothing.
        let del = sent[0]["id"].as_u64().unwrap();
        assert!(ex.on_message(&ok(del, json!({}))).is_empty());
        // It starts under `codex queue`'s id: recognised by the text.
        let (_, verdict) = split(ex.on_message(&item_started(T, "turn-7", Some("0199-cli"), TEXT)));
        assert!(
            matches!(verdict, Some(Verdict::Started { turn_id: Some(t), earlier: false }) if t == "turn-7")
        );
    }

    #[test]
    fn a_wake_an_earlier_turn_carried_is_accepted_without_sending_it_again() {
        let (mut ex, list) = up_to_queue_list(json!({"type": "idle"}), "cli");
        let (id, _) = only_request(
            ex.on_message(&ok(list, json!({"data": []}))),
            "thread/turns/list",
        );
        let history = json!({"data": [
            {"id": "turn-9", "items": [{"type": "userMessage", "clientId": null,
                "content": [{"type": "text", "text": "later user message"}]}]},
            {"id": "turn-8", "items": [{"type": "userMessage", "clientId": "wakeful:wake-1-3:sess",
                "content": [{"type": "text", "text": TEXT}]}, {"type": "agentMessage", "text": "ok"}]}
        ]});
        let (sent, verdict) = split(ex.on_message(&ok(id, history)));
        assert!(sent.is_empty());
        assert_eq!(
            verdict,
            Some(Verdict::Started {
                turn_id: Some("turn-8".into()),
                earlier: true
            })
        );
    }

    #[test]
    fn a_wake_codex_holds_is_confirmed_and_never_added_again() {
        // Found in neither the queue nor the history: on its way from one
        // to the other. Adding it now would run it twice.
        let held = Exchange::new(T, "sess", "wake-1-3", TEXT).confirm_only();
        let (mut ex, list) = up_to_queue_list_of(held, json!({"type": "idle"}), "cli");
        let (id, _) = only_request(
            ex.on_message(&ok(list, json!({"data": []}))),
            "thread/turns/list",
        );
        let (sent, verdict) = split(ex.on_message(&ok(id, json!({"data": []}))));
        assert_eq!((sent, verdict), (vec![], None), "nothing added");
        assert!(matches!(ex.on_deadline(), Verdict::Queued { .. }));
        let (_, verdict) = split(ex.on_message(&item_started(T, "turn-2", Some("0199-cli"), TEXT)));
        assert!(
            matches!(verdict, Some(Verdict::Started { turn_id: Some(t), earlier: false }) if t == "turn-2")
        );
    }

    #[test]
    fn no_answer_before_the_add_is_a_refusal_naming_the_step() {
        let (ex, _) = up_to_queue_list(json!({"type": "idle"}), "cli");
        match ex.on_deadline() {
            Verdict::Refused(m) => assert!(m.contains("thread/queue/list"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(ex.on_closed("eof"), Verdict::Refused(m) if m.contains("eof")));
        let (mut ex, add) = up_to_add(json!({"type": "idle"}));
        let (_, verdict) = split(ex.on_message(&err(add, "queue full")));
        assert!(matches!(verdict, Some(Verdict::Refused(m)) if m.contains("queue full")));
    }

    #[test]
    fn codex_exec_is_told_from_other_codex_commands() {
        let argv = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        for exec in [
            "/usr/lib/node_modules/@openai/codex/vendor/x/bin/codex exec --json now",
            "codex e hi",
            "codex -c model=\"o3\" --enable x exec resume 019a hi",
            "node /usr/bin/codex exec --skip-git-repo-check hi",
        ] {
            assert!(is_codex_exec(&argv(exec)), "{exec}");
        }
        let daemon = Holder {
            pid: 1,
            argv: argv("/h/.codex/packages/app-server-daemon/current/bin/codex app-server --listen unix:// --analytics-default-enabled --managed-daemon"),
        };
        assert!(daemon.is_control_app_server() && !daemon.is_exec());
        let stdio = Holder {
            pid: 1,
            argv: argv("codex app-server"),
        };
        assert!(!stdio.is_control_app_server());
        for other in [
            "codex app-server --listen unix://",
            "codex",
            "codex resume --last",
            "codex -c x=exec",
            "bash -c codex exec",
            "node /srv/app.js exec",
            "",
        ] {
            assert!(!is_codex_exec(&argv(other)), "{other}");
        }
    }

    #[test]
    fn the_lock_holder_is_read_from_proc_locks() {
        let dev = libc::makedev(0xfe, 0x01);
        let locks = "1: FLOCK  ADVISORY  WRITE 4334 fe:00:5767237 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 999 fe:01:10021313 0 EOF\n\
                     3: POSIX  ADVISORY  READ 4135 fe:01:10021185 128 128\n\
                     4: FLOCK  ADVISORY  WRITE 4135 fe:01:10021313 0 EOF\n";
        assert_eq!(lock_holder(locks, dev, 10021313), Some(4135));
        assert_eq!(lock_holder(locks, dev, 5767237), None, "other device");
        assert_eq!(lock_holder(locks, dev, 1), None);
        assert_eq!(lock_holder("", dev, 1), None);
    }

    #[test]
    fn a_thread_nobody_holds_has_no_holder() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(thread_holder(dir.path(), T), None);
        std::fs::create_dir_all(dir.path().join("thread-writer-locks")).unwrap();
        std::fs::write(
            dir.path()
                .join("thread-writer-locks")
                .join(format!("{T}.lock")),
            "",
        )
        .unwrap();
        assert_eq!(thread_holder(dir.path(), T), None);
        assert_eq!(thread_holder(dir.path(), "../x"), None);
    }

    #[test]
    fn a_held_writer_lock_names_its_process() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("thread-writer-locks")).unwrap();
        let lock = std::fs::File::create(
            dir.path()
                .join("thread-writer-locks")
                .join(format!("{T}.lock")),
        )
        .unwrap();
        // SAFETY: flock on an open descriptor we own.
        assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
        let holder = thread_holder(dir.path(), T).expect("the lock is held");
        assert_eq!(holder.pid, std::process::id());
        assert!(!holder.is_exec(), "{:?}", holder.argv);
        drop(lock);
        assert_eq!(thread_holder(dir.path(), T), None);
    }

    #[test]
    fn ids_and_paths() {
        assert_eq!(client_id("wake-1-3", "a:b"), "wakeful:wake-1-3:a:b");
        let ex = Exchange::new(T, "a:b", "wake-1-3", TEXT);
        assert!(!ex.is_replaced(&json!({"clientUserMessageId": "wakeful:wake-1-3:a:b"})));
        assert!(ex.is_replaced(&json!({"clientUserMessageId": "wakeful:wake-1-2:a:b"})));
        assert!(!ex.is_replaced(&json!({"clientUserMessageId": "wakeful:wake-1-2:a"})));
        assert_eq!(
            control_socket(Path::new("/h/.codex")),
            Path::new("/h/.codex/app-server-control/app-server-control.sock")
        );
        assert_eq!(
            codex_home(Some(Path::new("/x"))),
            Some(std::path::PathBuf::from("/x"))
        );
    }
}
