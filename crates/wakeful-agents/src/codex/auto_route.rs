//! Routing a session to its Codex thread without being asked: a monitor
//! started from inside Codex (its shell gives commands `CODEX_THREAD_ID`)
//! gets its session a `codex` wake route to that thread, unless the session
//! has a route already or `[wake_options] auto_codex = false`. The daemon
//! asks [`route_for`] at each start; the decision is Codex's, so it is here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use wakeful_core::session::CODEX_THREAD_ID;
use wakeful_protocol::WakeAdapter;

/// The route a start with this command environment asks for: a `codex`
/// route to the thread of `CODEX_THREAD_ID` (with the environment's
/// `CODEX_HOME`), or `None` outside Codex.
pub fn route_for(env: &BTreeMap<String, String>) -> Option<WakeAdapter> {
    let thread = env.get(CODEX_THREAD_ID).filter(|t| !t.is_empty())?;
    Some(WakeAdapter::Codex {
        thread: Some(thread.clone()),
        binary: None,
        codex_home: env.get("CODEX_HOME").map(PathBuf::from),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_codex_thread_asks_for_a_route() {
        let mut env = BTreeMap::new();
        assert_eq!(route_for(&env), None);
        env.insert(CODEX_THREAD_ID.to_string(), String::new());
        assert_eq!(route_for(&env), None, "an empty thread names none");
        env.insert(CODEX_THREAD_ID.to_string(), "t-1".to_string());
        env.insert("CODEX_HOME".to_string(), "/h/.codex".to_string());
        assert_eq!(
            route_for(&env),
            Some(WakeAdapter::Codex {
                thread: Some("t-1".into()),
                binary: None,
                codex_home: Some("/h/.codex".into()),
            })
        );
    }
}
