//! Which session a client speaks for (docs/CONTRACT.md §2 "Session"): the
//! one place that says, for each kind of client, where a session name may
//! come from and in which order.
//!
//! Every client resolves through [`resolve`] with its own order:
//!
//! | client | order, first non-empty wins |
//! |---|---|
//! | a `wakeful` command ([`COMMAND`]) | `--session`, `$WAKEFUL_SESSION`, `$CLAUDE_CODE_SESSION_ID`, `$CODEX_THREAD_ID`, the session Gemini CLI's hooks recorded for its process, `default` |
//! | `wakeful mcp` ([`MCP`]) | `--session`, `$WAKEFUL_SESSION`, `$CLAUDE_CODE_SESSION_ID`, the Codex thread of the call's `_meta`, `$CODEX_THREAD_ID`, `default` |
//! | an agent's hook or the Claude Code bridge ([`hook`]) | `--session`, `$WAKEFUL_SESSION`, the session recorded for the agent's process, the hook input's `session_id`, the agent's own variable |
//! | `wakeful acp-proxy` ([`ACP`]) | `--session`, `$WAKEFUL_SESSION`, else a new name |
//!
//! ```
//! use wakeful_core::session::{resolve, Known, Source, COMMAND};
//!
//! let env = |k: &str| (k == "CODEX_THREAD_ID").then(|| "t-1".to_string());
//! let known = Known::new(None, &env);
//! assert_eq!(
//!     resolve(&COMMAND, &known),
//!     Some(("t-1".to_string(), Source::Var("CODEX_THREAD_ID")))
//! );
//! ```

/// wakeful's own session variable, which every client reads first after
/// `--session`.
pub const WAKEFUL_SESSION: &str = "WAKEFUL_SESSION";
/// Claude Code's session variable (its Bash tool and hooks have it).
pub const CLAUDE_CODE_SESSION_ID: &str = "CLAUDE_CODE_SESSION_ID";
/// Codex's thread variable (its shell commands have it).
pub const CODEX_THREAD_ID: &str = "CODEX_THREAD_ID";
/// Gemini CLI's session variable (its hooks have it).
pub const GEMINI_SESSION_ID: &str = "GEMINI_SESSION_ID";

/// The session used when nothing names one.
pub const DEFAULT_SESSION: &str = "default";

/// A place a session name may come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `--session` (or a call's own `session` argument).
    Flag,
    /// An environment variable.
    Var(&'static str),
    /// The session recorded for the agent's process (by its first hook).
    Recorded,
    /// The `session_id` of a hook's input.
    HookInput,
    /// The Codex thread a `tools/call` names in its `_meta`.
    CallThread,
    /// [`DEFAULT_SESSION`].
    Default,
}

/// A `wakeful` command's order.
pub const COMMAND: [Source; 6] = [
    Source::Flag,
    Source::Var(WAKEFUL_SESSION),
    Source::Var(CLAUDE_CODE_SESSION_ID),
    Source::Var(CODEX_THREAD_ID),
    Source::Recorded,
    Source::Default,
];

/// `wakeful mcp`'s order for a tool call: the call's Codex thread stands in
/// for `$CODEX_THREAD_ID`, which, inherited by a server that lives across
/// threads, can only be stale.
pub const MCP: [Source; 6] = [
    Source::Flag,
    Source::Var(WAKEFUL_SESSION),
    Source::Var(CLAUDE_CODE_SESSION_ID),
    Source::CallThread,
    Source::Var(CODEX_THREAD_ID),
    Source::Default,
];

/// `wakeful acp-proxy`'s order; with none of these it makes a new name.
pub const ACP: [Source; 2] = [Source::Flag, Source::Var(WAKEFUL_SESSION)];

/// The session the agent itself runs in, as its hooks see it (what a hook
/// records for the agent's process): the hook input's, else the agent's
/// own session variable `agent_var`. The tail of [`hook`].
pub const fn agent_own(agent_var: &'static str) -> [Source; 2] {
    [Source::HookInput, Source::Var(agent_var)]
}

/// The order of a hook (or the Claude Code bridge) of the agent whose own
/// session variable is `agent_var`: an explicit or recorded session, else
/// [`agent_own`].
pub const fn hook(agent_var: &'static str) -> [Source; 5] {
    [
        Source::Flag,
        Source::Var(WAKEFUL_SESSION),
        Source::Recorded,
        Source::HookInput,
        Source::Var(agent_var),
    ]
}

/// What a client knows when it resolves its session. The recorded session
/// is asked for only when the order reaches it (looking it up may record
/// one).
pub struct Known<'a> {
    flag: Option<&'a str>,
    env: &'a dyn Fn(&str) -> Option<String>,
    recorded: Option<&'a dyn Fn() -> Option<String>>,
    hook_input: Option<&'a str>,
    call_thread: Option<&'a str>,
}

impl<'a> Known<'a> {
    /// `--session` and an environment lookup; nothing else known.
    pub fn new(flag: Option<&'a str>, env: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Known {
            flag,
            env,
            recorded: None,
            hook_input: None,
            call_thread: None,
        }
    }

    /// The lookup of the session recorded for the agent's process.
    pub fn recorded(mut self, lookup: &'a dyn Fn() -> Option<String>) -> Self {
        self.recorded = Some(lookup);
        self
    }

    /// The hook input's `session_id`.
    pub fn hook_input(mut self, session_id: Option<&'a str>) -> Self {
        self.hook_input = session_id;
        self
    }

    /// The Codex thread of a tool call.
    pub fn call_thread(mut self, thread: Option<&'a str>) -> Self {
        self.call_thread = thread;
        self
    }

    fn get(&self, source: Source) -> Option<String> {
        let value = match source {
            Source::Flag => self.flag.map(String::from),
            Source::Var(name) => (self.env)(name),
            Source::Recorded => self.recorded.and_then(|lookup| lookup()),
            Source::HookInput => self.hook_input.map(String::from),
            Source::CallThread => self.call_thread.map(String::from),
            Source::Default => Some(DEFAULT_SESSION.to_string()),
        };
        value.filter(|s| !s.is_empty())
    }
}

/// The session by `order`, and the source that named it; `None` when no
/// source of the order names one (an order without [`Source::Default`]).
pub fn resolve(order: &[Source], known: &Known<'_>) -> Option<(String, Source)> {
    order
        .iter()
        .find_map(|&source| known.get(source).map(|s| (s, source)))
}

/// Whether `order` reaches `source` without an earlier source naming the
/// session: for example whether a command should look up a recorded
/// session at all.
pub fn reaches(order: &[Source], source: Source, known: &Known<'_>) -> bool {
    order
        .iter()
        .take_while(|&&s| s != source)
        .all(|&s| known.get(s).is_none())
}

/// A `wakeful` command's session from `--session` and the environment alone
/// (no recorded session): [`COMMAND`] without [`Source::Recorded`].
pub fn resolve_session(explicit: Option<&str>, env: impl Fn(&str) -> Option<String>) -> String {
    let known = Known::new(explicit, &env);
    resolve(&COMMAND, &known)
        .map(|(s, _)| s)
        .unwrap_or_else(|| DEFAULT_SESSION.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(
        vars: &'static [(&'static str, &'static str)],
    ) -> impl Fn(&str) -> Option<String> + 'static {
        move |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn order_of_precedence() {
        assert_eq!(
            resolve_session(Some("x"), env(&[("WAKEFUL_SESSION", "w")])),
            "x"
        );
        assert_eq!(
            resolve_session(
                None,
                env(&[("CODEX_THREAD_ID", "c"), ("CLAUDE_CODE_SESSION_ID", "cc")])
            ),
            "cc"
        );
        assert_eq!(resolve_session(None, env(&[("CODEX_THREAD_ID", "c")])), "c");
        assert_eq!(
            resolve_session(None, env(&[("WAKEFUL_SESSION", "")])),
            "default"
        );
    }

    #[test]
    fn a_command_asks_for_the_recorded_session_only_when_nothing_named_one() {
        let asked = std::cell::Cell::new(0);
        let lookup = || {
            asked.set(asked.get() + 1);
            Some("gemini-1".to_string())
        };
        let named = env(&[("CODEX_THREAD_ID", "t")]);
        let known = Known::new(None, &named).recorded(&lookup);
        assert_eq!(
            resolve(&COMMAND, &known),
            Some(("t".into(), Source::Var(CODEX_THREAD_ID)))
        );
        assert_eq!(asked.get(), 0, "a named session looks nothing up");
        let none = env(&[]);
        let known = Known::new(None, &none).recorded(&lookup);
        assert_eq!(
            resolve(&COMMAND, &known),
            Some(("gemini-1".into(), Source::Recorded))
        );
        assert!(reaches(&COMMAND, Source::Recorded, &known));
        assert!(!reaches(
            &COMMAND,
            Source::Recorded,
            &Known::new(Some("x"), &none)
        ));
    }

    #[test]
    fn mcp_takes_the_calls_thread_over_an_inherited_codex_variable() {
        let stale = env(&[("CODEX_THREAD_ID", "stale")]);
        let call = Known::new(None, &stale).call_thread(Some("t-1"));
        assert_eq!(
            resolve(&MCP, &call),
            Some(("t-1".into(), Source::CallThread))
        );
        let no_thread = Known::new(None, &stale);
        assert_eq!(resolve(&MCP, &no_thread).unwrap().0, "stale");
        let pinned = env(&[("CLAUDE_CODE_SESSION_ID", "cc")]);
        let call = Known::new(None, &pinned).call_thread(Some("t-1"));
        assert_eq!(resolve(&MCP, &call).unwrap().0, "cc");
    }

    #[test]
    fn a_hook_prefers_the_recorded_session_to_its_input() {
        let g = env(&[("GEMINI_SESSION_ID", "g")]);
        let rec = || Some("rec".to_string());
        let order = hook(GEMINI_SESSION_ID);
        let known = Known::new(None, &g)
            .recorded(&rec)
            .hook_input(Some("stdin"));
        assert_eq!(resolve(&order, &known).unwrap().0, "rec");
        let known = Known::new(None, &g).hook_input(Some("stdin"));
        assert_eq!(resolve(&order, &known).unwrap().0, "stdin");
        assert_eq!(resolve(&order, &Known::new(None, &g)).unwrap().0, "g");
        let none = env(&[]);
        assert_eq!(resolve(&order, &Known::new(None, &none)), None);
    }

    #[test]
    fn the_agents_own_session_is_the_tail_of_a_hooks_order() {
        assert_eq!(hook(GEMINI_SESSION_ID)[3..], agent_own(GEMINI_SESSION_ID));
        let g = env(&[("GEMINI_SESSION_ID", "g"), ("WAKEFUL_SESSION", "w")]);
        let order = agent_own(GEMINI_SESSION_ID);
        let known = Known::new(Some("flag"), &g).hook_input(Some("stdin"));
        assert_eq!(resolve(&order, &known).unwrap().0, "stdin");
        assert_eq!(resolve(&order, &Known::new(None, &g)).unwrap().0, "g");
    }

    #[test]
    fn acp_names_no_default() {
        let none = env(&[]);
        assert_eq!(resolve(&ACP, &Known::new(None, &none)), None);
        let w = env(&[("WAKEFUL_SESSION", "w")]);
        assert_eq!(resolve(&ACP, &Known::new(None, &w)).unwrap().0, "w");
    }
}
