//! Which session a client speaks for (docs/CONTRACT.md §2 "Session").

/// The environment variables consulted, in order, after `--session`.
pub const SESSION_ENV_VARS: [&str; 3] = [
    "WAKEFUL_SESSION",
    "CLAUDE_CODE_SESSION_ID",
    "CODEX_THREAD_ID",
];

/// The session used when nothing names one.
pub const DEFAULT_SESSION: &str = "default";

/// Resolves the session: `explicit`, else the first non-empty variable of
/// [`SESSION_ENV_VARS`] as read by `env`, else [`DEFAULT_SESSION`].
pub fn resolve_session(explicit: Option<&str>, env: impl Fn(&str) -> Option<String>) -> String {
    if let Some(s) = explicit.filter(|s| !s.is_empty()) {
        return s.to_string();
    }
    SESSION_ENV_VARS
        .iter()
        .find_map(|name| env(name).filter(|v| !v.is_empty()))
        .unwrap_or_else(|| DEFAULT_SESSION.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_of_precedence() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
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
}
