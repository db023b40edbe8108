//! The proxy's decisions, with no IO: which line goes where, which ACP
//! sessions exist, which prompts are in flight, when a wake may be sent and
//! when it was accepted.
//!
//! Lines are forwarded exactly as they came (the machine hands back the
//! same string); only the proxy's own messages are built here. Every line is
//! one JSON-RPC message (ACP's stdio transport: newline-delimited JSON). A
//! line that is not a JSON object is forwarded too, unlooked at.
//!
//! Per ACP session the machine knows the user's prompts in flight (their
//! request ids), whether a wake turn is in flight, and the user prompts held
//! back behind that wake turn. A wake goes to the *target* session: the one
//! the editor used last (created, loaded, resumed or prompted). It is sent
//! only while that session has no prompt in flight and nothing queued; a
//! user prompt that comes while a wake turn runs waits and is forwarded, in
//! order, when the wake turn ends. The wake counts as accepted when the
//! agent answers its `session/prompt` with a result (a stop reason: the
//! agent took the prompt into the session and ran its turn, `cancelled`
//! included); an error answer, or the agent ending first, hands it back
//! unacknowledged.

use std::collections::{HashMap, VecDeque};

use serde_json::{json, Value};

/// Request ids of the proxy's own requests start with this; the editor's
/// ids are numbers in every client seen (Zed, JetBrains, the TypeScript
/// SDK), and a string id with this prefix from an editor would be taken for
/// the proxy's own.
pub const ID_PREFIX: &str = "wakeful-acp-";

/// Events to deliver as one wake: the framed text, and the seq of its last
/// event (what is acknowledged once the agent accepted it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    /// The presenter's framed text (`[wakeful wake-…] N events …`).
    pub text: String,
    /// Seq of the last event the text holds.
    pub last_seq: u64,
}

/// What the proxy must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write this line to the agent's stdin.
    ToAgent(String),
    /// Write this line to the editor (the proxy's stdout).
    ToEditor(String),
    /// The held wake was accepted: acknowledge its events up to `last_seq`.
    Accepted {
        /// Seq of the wake's last event.
        last_seq: u64,
    },
    /// The held wake was not accepted (an error answer, or the agent left):
    /// its events stay unacknowledged and come again.
    Refused {
        /// Why, for the log.
        reason: String,
    },
}

/// Where one ACP session stands.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SessionState {
    /// Request ids (their JSON text) of the editor's prompts in flight.
    pub user_prompts: Vec<String>,
    /// Request id of the proxy's wake prompt in flight.
    pub wake_prompt: Option<String>,
    /// The editor's prompts held back behind the wake turn, as they came.
    pub queued: VecDeque<String>,
}

impl SessionState {
    /// No prompt in flight, none waiting.
    pub fn is_idle(&self) -> bool {
        self.user_prompts.is_empty() && self.wake_prompt.is_none() && self.queued.is_empty()
    }
}

/// A request of the editor whose answer the machine wants to see.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pending {
    /// `session/new`: the result names the session.
    New,
    /// `session/load` or `session/resume` of this session.
    Load(String),
    /// `session/prompt` of this session.
    Prompt(String),
}

/// The proxy's state (see the module docs).
#[derive(Debug, Default)]
pub struct Machine {
    sessions: HashMap<String, SessionState>,
    target: Option<String>,
    pending: HashMap<String, Pending>,
    held: Option<Wake>,
    wake_session: Option<String>,
    next_id: u64,
}

/// The parts of a JSON-RPC message the machine looks at.
struct Message<'a> {
    id: Option<String>,
    method: Option<&'a str>,
    params: Option<&'a Value>,
    result: Option<&'a Value>,
    is_error: bool,
}

fn parse(v: &Value) -> Option<Message<'_>> {
    let o = v.as_object()?;
    Some(Message {
        id: o.get("id").filter(|i| !i.is_null()).map(Value::to_string),
        method: o.get("method").and_then(Value::as_str),
        params: o.get("params"),
        result: o.get("result"),
        is_error: o.contains_key("error"),
    })
}

fn session_of(params: Option<&Value>) -> Option<String> {
    params?
        .get("sessionId")
        .and_then(Value::as_str)
        .map(String::from)
}

impl Machine {
    /// A machine that knows no session yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The ACP sessions known so far.
    pub fn sessions(&self) -> &HashMap<String, SessionState> {
        &self.sessions
    }

    /// The session a wake goes to (the one the editor used last).
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    /// Whether a wake is held (waiting for an idle session, or in flight).
    pub fn holds_wake(&self) -> bool {
        self.held.is_some()
    }

    /// Whether a wake turn is in flight.
    pub fn wake_in_flight(&self) -> bool {
        self.wake_session.is_some()
    }

    /// A line from the editor.
    pub fn from_editor(&mut self, line: String) -> Vec<Action> {
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            return vec![Action::ToAgent(line)];
        };
        let Some(m) = parse(&v) else {
            return vec![Action::ToAgent(line)];
        };
        let (Some(id), Some(method)) = (m.id.clone(), m.method) else {
            // A notification (session/cancel among them) or an answer to
            // one of the agent's requests.
            return vec![Action::ToAgent(line)];
        };
        match method {
            "session/new" => {
                self.pending.insert(id, Pending::New);
            }
            "session/load" | "session/resume" => {
                if let Some(s) = session_of(m.params) {
                    self.pending.insert(id, Pending::Load(s));
                }
            }
            "session/prompt" => {
                if let Some(s) = session_of(m.params) {
                    self.target = Some(s.clone());
                    let state = self.sessions.entry(s.clone()).or_default();
                    self.pending.insert(id.clone(), Pending::Prompt(s));
                    if state.wake_prompt.is_some() || !state.queued.is_empty() {
                        state.queued.push_back(line);
                        return Vec::new();
                    }
                    state.user_prompts.push(id);
                }
            }
            _ => {}
        }
        vec![Action::ToAgent(line)]
    }

    /// A line from the agent.
    pub fn from_agent(&mut self, line: String) -> Vec<Action> {
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            return vec![Action::ToEditor(line)];
        };
        let Some(m) = parse(&v) else {
            return vec![Action::ToEditor(line)];
        };
        let Some(id) = m.id.clone().filter(|_| m.method.is_none()) else {
            // A request or a notification of the agent (session/update…).
            return vec![Action::ToEditor(line)];
        };
        // An answer. The proxy's own is swallowed.
        if self.is_own_wake(&id) {
            return self.wake_answered(m.result.is_some() && !m.is_error, &v);
        }
        let mut out = vec![Action::ToEditor(line)];
        match self.pending.remove(&id) {
            Some(Pending::New) => {
                if let Some(s) = m
                    .result
                    .and_then(|r| r.get("sessionId"))
                    .and_then(Value::as_str)
                {
                    self.sessions.entry(s.to_string()).or_default();
                    self.target = Some(s.to_string());
                }
            }
            Some(Pending::Load(s)) if !m.is_error => {
                self.sessions.entry(s.clone()).or_default();
                self.target = Some(s);
            }
            Some(Pending::Prompt(s)) => {
                if let Some(state) = self.sessions.get_mut(&s) {
                    state.user_prompts.retain(|p| *p != id);
                }
            }
            Some(Pending::Load(_)) | None => {}
        }
        out.extend(self.try_deliver());
        out
    }

    /// Events to deliver (the waiter hands one wake at a time, and the next
    /// only after [`Action::Accepted`] or [`Action::Refused`]).
    pub fn wake(&mut self, wake: Wake) -> Vec<Action> {
        self.held = Some(wake);
        self.try_deliver()
    }

    /// The agent is gone: a held wake is handed back.
    pub fn agent_gone(&mut self) -> Vec<Action> {
        self.wake_session = None;
        match self.held.take() {
            Some(_) => vec![Action::Refused {
                reason: "the agent ended".into(),
            }],
            None => Vec::new(),
        }
    }

    fn is_own_wake(&self, id: &str) -> bool {
        let Some(s) = &self.wake_session else {
            return false;
        };
        self.sessions
            .get(s)
            .and_then(|st| st.wake_prompt.as_deref())
            .is_some_and(|w| w == id)
    }

    fn wake_answered(&mut self, ok: bool, answer: &Value) -> Vec<Action> {
        let mut out = Vec::new();
        let held = self.held.take();
        if let Some(s) = self.wake_session.take() {
            if let Some(state) = self.sessions.get_mut(&s) {
                state.wake_prompt = None;
                // The prompts held back go now, in the order they came.
                while let Some(line) = state.queued.pop_front() {
                    if let Some(id) = serde_json::from_str::<Value>(&line)
                        .ok()
                        .and_then(|v| v.get("id").map(Value::to_string))
                    {
                        state.user_prompts.push(id);
                    }
                    out.push(Action::ToAgent(line));
                }
            }
        }
        match (ok, held) {
            (true, Some(w)) => out.insert(
                0,
                Action::Accepted {
                    last_seq: w.last_seq,
                },
            ),
            (false, Some(_)) => out.insert(
                0,
                Action::Refused {
                    reason: format!(
                        "the agent answered the wake prompt with {}",
                        answer.get("error").unwrap_or(answer)
                    ),
                },
            ),
            _ => {}
        }
        out
    }

    fn try_deliver(&mut self) -> Vec<Action> {
        if self.wake_session.is_some() {
            return Vec::new();
        }
        let (Some(wake), Some(target)) = (&self.held, &self.target) else {
            return Vec::new();
        };
        let Some(state) = self.sessions.get_mut(target) else {
            return Vec::new();
        };
        if !state.is_idle() {
            return Vec::new();
        }
        self.next_id += 1;
        let id = format!("{ID_PREFIX}{}", self.next_id);
        let id_json = Value::String(id.clone()).to_string();
        state.wake_prompt = Some(id_json);
        self.wake_session = Some(target.clone());
        let shown = json!({
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": target,
                "update": {
                    "sessionUpdate": "user_message_chunk",
                    "content": {"type": "text", "text": wake.text},
                    "_meta": {"wakeful": {"wake": true, "lastSeq": wake.last_seq}},
                },
            },
        });
        let prompt = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "session/prompt",
            "params": {
                "sessionId": target,
                "prompt": [{"type": "text", "text": wake.text}],
                "_meta": {"wakeful": {"wake": true, "lastSeq": wake.last_seq}},
            },
        });
        vec![
            Action::ToEditor(shown.to_string()),
            Action::ToAgent(prompt.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u64, method: &str, params: Value) -> String {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
    }

    fn answer(id: Value, result: Value) -> String {
        json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
    }

    fn wake(seq: u64) -> Wake {
        Wake {
            text: format!("[wakeful wake-1-{seq}] 1 event"),
            last_seq: seq,
        }
    }

    /// A machine with session `s1` made by `session/new` (request id 1).
    fn with_session() -> Machine {
        let mut m = Machine::new();
        let new = req(1, "session/new", json!({"cwd": "/", "mcpServers": []}));
        assert_eq!(m.from_editor(new.clone()), vec![Action::ToAgent(new)]);
        let ans = answer(json!(1), json!({"sessionId": "s1"}));
        assert_eq!(m.from_agent(ans.clone()), vec![Action::ToEditor(ans)]);
        assert_eq!(m.target(), Some("s1"));
        m
    }

    fn prompt(id: u64) -> String {
        req(
            id,
            "session/prompt",
            json!({"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}),
        )
    }

    /// The wake prompt's id among the actions.
    fn wake_id(actions: &[Action]) -> Value {
        actions
            .iter()
            .find_map(|a| match a {
                Action::ToAgent(l) => {
                    let v: Value = serde_json::from_str(l).unwrap();
                    (v["method"] == "session/prompt").then(|| v["id"].clone())
                }
                _ => None,
            })
            .unwrap()
    }

    #[test]
    fn lines_pass_unchanged_both_ways() {
        let mut m = Machine::new();
        for line in [
            "not json".to_string(),
            "[1,2]".to_string(),
            req(0, "initialize", json!({"protocolVersion": 1})),
            json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}})
                .to_string(),
        ] {
            assert_eq!(m.from_editor(line.clone()), vec![Action::ToAgent(line)]);
        }
        let update = json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"x","update":{}}}).to_string();
        assert_eq!(m.from_agent(update.clone()), vec![Action::ToEditor(update)]);
        let perm = req(7, "session/request_permission", json!({}));
        assert_eq!(m.from_agent(perm.clone()), vec![Action::ToEditor(perm)]);
    }

    #[test]
    fn a_wake_waits_for_a_session_and_goes_when_it_is_idle() {
        let mut m = Machine::new();
        assert!(m.wake(wake(5)).is_empty(), "no session yet");
        let new = req(1, "session/new", json!({}));
        m.from_editor(new);
        let out = m.from_agent(answer(json!(1), json!({"sessionId": "s1"})));
        // The answer, then what the editor is shown, then the prompt.
        assert_eq!(out.len(), 3);
        let Action::ToEditor(shown) = &out[1] else {
            panic!("{out:?}")
        };
        let v: Value = serde_json::from_str(shown).unwrap();
        assert_eq!(v["params"]["update"]["sessionUpdate"], "user_message_chunk");
        assert_eq!(v["params"]["sessionId"], "s1");
        let id = wake_id(&out);
        assert!(id.as_str().unwrap().starts_with(ID_PREFIX));
        assert!(m.wake_in_flight());
        // The agent's answer is swallowed; the events are accepted.
        let out = m.from_agent(answer(id, json!({"stopReason": "end_turn"})));
        assert_eq!(out, vec![Action::Accepted { last_seq: 5 }]);
        assert!(!m.holds_wake());
        assert!(m.sessions()["s1"].is_idle());
    }

    #[test]
    fn a_wake_waits_while_a_user_prompt_runs() {
        let mut m = with_session();
        let p = prompt(2);
        assert_eq!(m.from_editor(p.clone()), vec![Action::ToAgent(p)]);
        assert!(m.wake(wake(9)).is_empty(), "a prompt is in flight");
        let ans = answer(json!(2), json!({"stopReason": "end_turn"}));
        let out = m.from_agent(ans.clone());
        assert_eq!(out[0], Action::ToEditor(ans));
        assert_eq!(out.len(), 3, "the wake goes once the prompt ended");
        assert!(m.wake_in_flight());
    }

    #[test]
    fn a_user_prompt_during_a_wake_turn_is_queued_then_forwarded() {
        let mut m = with_session();
        let out = m.wake(wake(3));
        let id = wake_id(&out);
        let p2 = prompt(2);
        let p3 = prompt(3);
        assert!(m.from_editor(p2.clone()).is_empty());
        assert!(m.from_editor(p3.clone()).is_empty());
        assert_eq!(m.sessions()["s1"].queued.len(), 2);
        // Updates of the wake turn still reach the editor meanwhile.
        let upd = json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk"}}}).to_string();
        assert_eq!(m.from_agent(upd.clone()), vec![Action::ToEditor(upd)]);
        let out = m.from_agent(answer(id, json!({"stopReason": "end_turn"})));
        assert_eq!(
            out,
            vec![
                Action::Accepted { last_seq: 3 },
                Action::ToAgent(p2),
                Action::ToAgent(p3)
            ]
        );
        assert_eq!(m.sessions()["s1"].user_prompts, vec!["2", "3"]);
        // A new wake waits for both.
        assert!(m.wake(wake(4)).is_empty());
        let a2 = answer(json!(2), json!({"stopReason": "end_turn"}));
        assert_eq!(m.from_agent(a2.clone()), vec![Action::ToEditor(a2)]);
        let a3 = answer(json!(3), json!({"stopReason": "end_turn"}));
        let out = m.from_agent(a3);
        assert_eq!(out.len(), 3, "{out:?}");
    }

    #[test]
    fn an_error_answer_refuses_the_wake() {
        let mut m = with_session();
        let id = wake_id(&m.wake(wake(3)));
        let err = json!({"jsonrpc":"2.0","id": id, "error": {"code": -32603, "message": "boom"}})
            .to_string();
        let out = m.from_agent(err);
        assert!(matches!(&out[..], [Action::Refused { reason }] if reason.contains("boom")));
        assert!(!m.holds_wake());
        assert!(!m.wake_in_flight());
    }

    #[test]
    fn the_agent_leaving_refuses_a_held_wake() {
        let mut m = with_session();
        m.wake(wake(3));
        assert!(matches!(&m.agent_gone()[..], [Action::Refused { .. }]));
        assert!(m.agent_gone().is_empty());
    }

    #[test]
    fn editor_ids_that_look_alike_are_not_taken_for_the_proxys() {
        let mut m = with_session();
        let id = wake_id(&m.wake(wake(3)));
        // The editor's request 1 answered again (a number) is not the wake.
        let other = answer(json!(99), json!({}));
        assert_eq!(m.from_agent(other.clone()), vec![Action::ToEditor(other)]);
        assert!(m.wake_in_flight());
        assert_eq!(id, json!("wakeful-acp-1"));
    }

    #[test]
    fn load_and_prompt_choose_the_target() {
        let mut m = with_session();
        m.from_editor(req(5, "session/load", json!({"sessionId": "old"})));
        assert_eq!(m.target(), Some("s1"), "only once the load succeeded");
        m.from_agent(answer(json!(5), json!(null)));
        assert_eq!(m.target(), Some("old"));
        m.from_editor(prompt(6));
        assert_eq!(m.target(), Some("s1"));
        // A failed load is not a session.
        m.from_editor(req(7, "session/load", json!({"sessionId": "gone"})));
        m.from_agent(
            json!({"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"no"}}).to_string(),
        );
        assert!(!m.sessions().contains_key("gone"));
    }

    #[test]
    fn a_wake_goes_to_the_target_session_only() {
        let mut m = with_session();
        m.from_editor(req(2, "session/new", json!({})));
        m.from_agent(answer(json!(2), json!({"sessionId": "s2"})));
        // s2 is the target and busy; s1 idle does not take the wake.
        m.from_editor(req(
            3,
            "session/prompt",
            json!({"sessionId": "s2", "prompt": []}),
        ));
        assert!(m.wake(wake(1)).is_empty());
        let out = m.from_agent(answer(json!(3), json!({"stopReason": "end_turn"})));
        let Action::ToAgent(p) = &out[2] else {
            panic!("{out:?}")
        };
        assert!(p.contains("\"sessionId\":\"s2\""));
    }
}
