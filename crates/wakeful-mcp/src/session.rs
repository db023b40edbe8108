//! Which session a tool call speaks for.
//!
//! The MCP server is started once per client connection, but a client may
//! run several conversations through it, and some clients do not give their
//! MCP servers the environment their shell commands get. Codex (0.171) is
//! such a client: it starts one `wakeful mcp` per thread with a cleared
//! environment (no `CODEX_THREAD_ID`), and names the thread in every
//! `tools/call` instead, as `_meta.threadId` (and
//! `_meta["x-codex-turn-metadata"].thread_id`). So the session of a call is,
//! in order: `--session`, `$WAKEFUL_SESSION`, `$CLAUDE_CODE_SESSION_ID`,
//! the Codex thread of the call's `_meta`, `$CODEX_THREAD_ID`, `default` —
//! the order of every other wakeful command, with the call's thread standing
//! in for `CODEX_THREAD_ID` (which, inherited, can only be stale).

use serde_json::{Map, Value};
use wakeful_core::session::{self, resolve, Known, Source};

/// The session rule of one server ([`wakeful_core::session::MCP`]); see
/// the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionChoice {
    /// `--session`, `$WAKEFUL_SESSION` or `$CLAUDE_CODE_SESSION_ID`: wins
    /// over anything a call says.
    pinned: Option<String>,
    /// `$CODEX_THREAD_ID`, else `default`: used when a call names no thread.
    fallback: String,
}

impl SessionChoice {
    /// From `--session` and an environment lookup, read once: a server
    /// lives as long as its client, and its environment does not change.
    pub fn new(explicit: Option<&str>, env: impl Fn(&str) -> Option<String>) -> Self {
        let known = Known::new(explicit, &env);
        let decided = |order: &[Source]| resolve(order, &known);
        // The sources before the call's thread pin the session; those after
        // it are the fallback.
        let (before, after) = session::MCP.split_at(
            session::MCP
                .iter()
                .position(|s| *s == Source::CallThread)
                .unwrap_or(session::MCP.len()),
        );
        let pinned = decided(before).map(|(s, _)| s);
        let fallback = decided(after)
            .map(|(s, _)| s)
            .unwrap_or_else(|| session::DEFAULT_SESSION.to_string());
        SessionChoice { pinned, fallback }
    }

    /// The session when a call names none.
    pub fn default_session(&self) -> &str {
        self.pinned.as_deref().unwrap_or(&self.fallback)
    }

    /// The session of a call with this `_meta`, and the Codex thread the
    /// call named (when it decided the session).
    pub fn for_call(&self, meta: &Map<String, Value>) -> (String, Option<String>) {
        if let Some(p) = &self.pinned {
            return (p.clone(), None);
        }
        match codex_thread(meta) {
            Some(thread) => (thread.clone(), Some(thread)),
            None => (self.fallback.clone(), None),
        }
    }
}

/// The Codex thread a `tools/call` names in its `_meta`.
pub fn codex_thread(meta: &Map<String, Value>) -> Option<String> {
    let s = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    s(meta.get("threadId")).or_else(|| {
        s(meta
            .get("x-codex-turn-metadata")
            .and_then(|m| m.get("thread_id")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn meta(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_codex_call_names_its_thread() {
        let c = SessionChoice::new(None, env(&[("CODEX_THREAD_ID", "stale")]));
        assert_eq!(c.default_session(), "stale");
        assert_eq!(
            c.for_call(&meta(json!({"threadId": "t-1", "sessionId": "t-0"}))),
            ("t-1".to_string(), Some("t-1".to_string()))
        );
        assert_eq!(
            c.for_call(&meta(
                json!({"x-codex-turn-metadata": {"thread_id": "t-2"}})
            )),
            ("t-2".to_string(), Some("t-2".to_string()))
        );
        assert_eq!(c.for_call(&meta(json!({}))), ("stale".to_string(), None));
        let none = SessionChoice::new(None, env(&[]));
        assert_eq!(none.for_call(&meta(json!({}))).0, "default");
    }

    #[test]
    fn an_explicit_session_wins() {
        let c = SessionChoice::new(Some("x"), env(&[("WAKEFUL_SESSION", "w")]));
        assert_eq!(
            c.for_call(&meta(json!({"threadId": "t"}))),
            ("x".to_string(), None)
        );
        let c = SessionChoice::new(None, env(&[("WAKEFUL_SESSION", "w")]));
        assert_eq!(c.for_call(&meta(json!({"threadId": "t"}))).0, "w");
        let c = SessionChoice::new(
            None,
            env(&[("CLAUDE_CODE_SESSION_ID", "cc"), ("WAKEFUL_SESSION", "")]),
        );
        assert_eq!(c.default_session(), "cc");
    }
}
