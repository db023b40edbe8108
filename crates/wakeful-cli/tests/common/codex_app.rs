//! A fake of Codex's app-server control socket
//! (`$CODEX_HOME/app-server-control/app-server-control.sock`: JSON-RPC over a
//! WebSocket over a Unix socket), with just what wakeful's Codex adapter
//! uses, behaving as the real Codex 0.171 was seen to (docs/agents/codex.md):
//!
//! - `thread/read`: `notLoaded` / `idle` / `active`, `source`;
//! - `thread/resume`: loads the thread, subscribes the connection, starts
//!   what is queued; "already has an active writer" for a thread an exec run
//!   holds, "no rollout found" for an unknown one;
//! - `thread/queue/list|add|delete`, `thread/turns/list` (newest first);
//! - a loaded idle thread runs its queue at once, one turn per entry:
//!   `turn/started`, then `item/started` of the user message (with `clientId`)
//!   to the subscribers; a busy thread runs it when the test frees it.
//!
//! Messages queued by the fake `codex queue` (accepted calls in
//! `<calls dir>/<n>`) join the queue too, as `codex queue` and the daemon
//! share Codex's queue database.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// A thread as the fake knows it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadSpec {
    /// Loaded in the app-server.
    pub loaded: bool,
    /// A turn is running.
    pub busy: bool,
    /// A `codex exec` run holds it.
    pub exec: bool,
}

/// A turn the fake ran.
#[derive(Debug, Clone)]
pub struct Turn {
    pub id: String,
    pub thread: String,
    pub client_id: String,
    pub text: String,
}

struct Entry {
    id: String,
    thread: String,
    client_id: String,
    text: String,
}

#[derive(Default)]
struct State {
    threads: HashMap<String, ThreadSpec>,
    queue: Vec<Entry>,
    turns: Vec<Turn>,
    requests: Vec<(String, Value)>,
    cli_calls: Option<PathBuf>,
    cli_seen: usize,
    subscribers: Vec<(String, mpsc::UnboundedSender<String>)>,
    n: u64,
}

impl State {
    fn next(&mut self, what: &str) -> String {
        self.n += 1;
        format!("{what}-{}", self.n)
    }

    /// Accepted calls of the fake `codex queue` join the queue.
    fn import_cli(&mut self) {
        let Some(dir) = self.cli_calls.clone() else {
            return;
        };
        while let Ok(raw) = std::fs::read(dir.join(self.cli_seen.to_string())) {
            let refused = dir.join(format!("{}.refused", self.cli_seen)).exists();
            self.cli_seen += 1;
            if refused {
                continue;
            }
            let args: Vec<String> = raw
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let arg = |name: &str| {
                args.iter()
                    .position(|a| a == name)
                    .and_then(|i| args.get(i + 1))
                    .cloned()
                    .unwrap_or_default()
            };
            let id = self.next("q");
            let client_id = self.next("cli-random");
            self.queue.push(Entry {
                id,
                thread: arg("--thread"),
                client_id,
                text: arg("--message"),
            });
        }
    }

    fn notify(&mut self, thread: &str, method: &str, params: Value) {
        let text = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
        self.subscribers
            .retain(|(t, tx)| t != thread || tx.send(text.clone()).is_ok());
    }

    /// A loaded idle thread runs its queue, one turn per entry.
    fn run_queue(&mut self, thread: &str) {
        self.import_cli();
        loop {
            let spec = self.threads.get(thread).copied().unwrap_or_default();
            if !spec.loaded || spec.busy {
                return;
            }
            let Some(i) = self.queue.iter().position(|e| e.thread == thread) else {
                return;
            };
            let e = self.queue.remove(i);
            let turn = self.next("turn");
            self.notify(thread, "thread/queue/changed", json!({"threadId": thread}));
            self.notify(
                thread,
                "turn/started",
                json!({"threadId": thread, "turn": {"id": turn, "items": [], "status": "inProgress"}}),
            );
            let item = self.next("item");
            self.notify(
                thread,
                "item/started",
                json!({"threadId": thread, "turnId": turn, "item": {
                    "type": "userMessage", "id": item, "clientId": e.client_id,
                    "content": [{"type": "text", "text": e.text, "text_elements": []}]}}),
            );
            self.turns.push(Turn {
                id: turn,
                thread: thread.to_string(),
                client_id: e.client_id,
                text: e.text,
            });
        }
    }

    fn status(&self, thread: &str) -> Value {
        match self.threads.get(thread) {
            Some(s) if !s.loaded => json!({"type": "notLoaded"}),
            Some(s) if s.busy => json!({"type": "active", "activeFlags": []}),
            _ => json!({"type": "idle"}),
        }
    }

    fn thread_json(&self, thread: &str) -> Value {
        let exec = self.threads.get(thread).is_some_and(|s| s.exec);
        json!({"thread": {"id": thread, "status": self.status(thread),
                          "source": if exec { "exec" } else { "cli" }, "turns": []}})
    }

    /// Answers a request; `Err` is a JSON-RPC error message.
    fn handle(
        &mut self,
        method: &str,
        params: &Value,
        conn: &mpsc::UnboundedSender<String>,
    ) -> Result<Value, String> {
        self.requests.push((method.to_string(), params.clone()));
        let thread = params["threadId"].as_str().unwrap_or("").to_string();
        let known = self.threads.contains_key(&thread);
        match method {
            "initialize" => Ok(json!({"userAgent": "fake-codex-app-server"})),
            "thread/read" if known => Ok(self.thread_json(&thread)),
            "thread/read" => Err(format!("thread not loaded: {thread}")),
            "thread/resume" if !known => Err(format!("no rollout found for thread id {thread}")),
            "thread/resume" if self.threads[&thread].exec => {
                Err(format!("thread {thread} already has an active writer"))
            }
            "thread/resume" => {
                if let Some(s) = self.threads.get_mut(&thread) {
                    s.loaded = true;
                }
                self.subscribers.push((thread.clone(), conn.clone()));
                Ok(self.thread_json(&thread))
            }
            "thread/queue/list" => {
                self.import_cli();
                let data: Vec<Value> = self
                    .queue
                    .iter()
                    .filter(|e| e.thread == thread)
                    .map(|e| {
                        json!({"id": e.id, "clientUserMessageId": e.client_id,
                                    "input": [{"type": "text", "text": e.text}]})
                    })
                    .collect();
                Ok(json!({"data": data, "nextCursor": null}))
            }
            "thread/turns/list" => {
                let data: Vec<Value> = self
                    .turns
                    .iter()
                    .rev()
                    .filter(|t| t.thread == thread)
                    .map(|t| {
                        json!({"id": t.id, "status": "completed", "items": [
                        {"type": "userMessage", "id": "u", "clientId": t.client_id,
                         "content": [{"type": "text", "text": t.text}]}]})
                    })
                    .collect();
                Ok(json!({"data": data}))
            }
            "thread/queue/add" => {
                let id = self.next("q");
                self.queue.push(Entry {
                    id: id.clone(),
                    thread,
                    client_id: params["clientUserMessageId"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    text: params["input"][0]["text"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                });
                Ok(json!({"queuedSubmission": {"id": id}}))
            }
            "thread/queue/delete" => {
                let qid = params["queuedSubmissionId"].as_str().unwrap_or("");
                self.queue.retain(|e| e.id != qid);
                Ok(json!({}))
            }
            other => Err(format!("unsupported method {other}")),
        }
    }
}

/// The fake app-server; stopped (socket removed) on drop.
pub struct FakeAppServer {
    state: Arc<Mutex<State>>,
    socket: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeAppServer {
    /// Listens on the control socket of `codex_home`; `cli_calls` is the
    /// fake `codex`'s calls directory, if any.
    pub fn start(codex_home: &Path, cli_calls: Option<&Path>) -> Self {
        let dir = codex_home.join("app-server-control");
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("app-server-control.sock");
        let _ = std::fs::remove_file(&socket);
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        listener.set_nonblocking(true).unwrap();
        let state = Arc::new(Mutex::new(State {
            cli_calls: cli_calls.map(Path::to_path_buf),
            ..State::default()
        }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::UnixListener::from_std(listener).unwrap();
                tokio::pin!(stopped);
                loop {
                    tokio::select! {
                        _ = &mut stopped => return,
                        accepted = listener.accept() => {
                            if let Ok((stream, _)) = accepted {
                                tokio::spawn(serve(stream, st.clone()));
                            }
                        }
                    }
                }
            });
        });
        FakeAppServer {
            state,
            socket,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Adds (or changes) a thread.
    pub fn thread(&self, id: &str, spec: ThreadSpec) {
        self.state
            .lock()
            .unwrap()
            .threads
            .insert(id.to_string(), spec);
    }

    /// Ends the running turn of a thread: its queue runs.
    pub fn free(&self, id: &str) {
        let mut st = self.state.lock().unwrap();
        if let Some(s) = st.threads.get_mut(id) {
            s.busy = false;
        }
        st.run_queue(id);
    }

    /// The turns run so far.
    pub fn turns(&self) -> Vec<Turn> {
        self.state.lock().unwrap().turns.clone()
    }

    /// The methods (with params) called so far.
    pub fn requests(&self) -> Vec<(String, Value)> {
        self.state.lock().unwrap().requests.clone()
    }

    /// How many entries are queued for a thread.
    pub fn queued(&self, thread: &str) -> usize {
        let mut st = self.state.lock().unwrap();
        st.import_cli();
        st.queue.iter().filter(|e| e.thread == thread).count()
    }
}

impl Drop for FakeAppServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

async fn serve(stream: tokio::net::UnixStream, state: Arc<Mutex<State>>) {
    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(text) => if ws.send(Message::text(text)).await.is_err() { return },
                None => return,
            },
            msg = ws.next() => {
                let text = match msg {
                    Some(Ok(Message::Text(t))) => t.to_string(),
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                    Some(Ok(_)) => continue,
                };
                let Ok(req) = serde_json::from_str::<Value>(&text) else { continue };
                let (Some(method), Some(id)) = (req["method"].as_str(), req.get("id")) else {
                    continue; // a notification (`initialized`)
                };
                let mut st = state.lock().unwrap();
                let reply = match st.handle(method, &req["params"], &tx) {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    Err(message) => json!({"jsonrpc": "2.0", "id": id,
                                           "error": {"code": -32600, "message": message}}),
                };
                // The answer first, then what it set off (as Codex does).
                let _ = tx.send(reply.to_string());
                if matches!(method, "thread/resume" | "thread/queue/add") {
                    if let Some(thread) = req["params"]["threadId"].as_str() {
                        st.run_queue(thread);
                    }
                }
            }
        }
    }
}
