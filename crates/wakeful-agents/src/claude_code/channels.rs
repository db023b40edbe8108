//! Whether the Claude Code that started this process runs with channels
//! on: `--channels …` or `--dangerously-load-development-channels …` on
//! its command line (Claude Code says so nowhere else: neither its
//! `server/discover` probe nor its `initialize` changes with the flag).
//!
//! `wakeful mcp --protocol auto` asks it: the channel, which pushes every
//! event into an idle session, exists only on the legacy handshake, so a
//! Claude Code with channels on keeps that handshake; any other Claude
//! Code gets MCP 2026-07-28, whose tasks wake it when a `monitor_wait`
//! ends.
//!
//! ```
//! use wakeful_agents::claude_code::channels::flag_in;
//!
//! let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
//! assert!(flag_in(&argv(&["claude", "--dangerously-load-development-channels", "server:wakeful"])));
//! assert!(flag_in(&argv(&["node", "/x/cli.js", "--channels=plugin:wakeful@m"])));
//! assert!(!flag_in(&argv(&["claude", "--resume", "abc"])));
//! ```

/// How many ancestors are looked at: Claude Code, then a launcher or two
/// between it and `wakeful mcp` (`npx`, `sh -c`, `node`).
const ANCESTORS: usize = 6;

/// The flags that turn Claude Code's channels on.
const FLAGS: [&str; 2] = ["--channels", "--dangerously-load-development-channels"];

/// Whether `argv` turns channels on.
pub fn flag_in(argv: &[String]) -> bool {
    argv.iter().any(|a| {
        FLAGS
            .iter()
            .any(|f| a == f || a.strip_prefix(f).is_some_and(|rest| rest.starts_with('=')))
    })
}

/// Whether an ancestor of this process (up to a few levels) runs with a
/// channel flag; `false` where the command lines cannot be read.
pub fn enabled_above_me() -> bool {
    let mut pid = std::process::id() as i32;
    for _ in 0..ANCESTORS {
        let Some(parent) = wakeful_platform::tree::proc_info(pid).map(|p| p.ppid) else {
            return false;
        };
        if parent <= 1 {
            return false;
        }
        if wakeful_platform::tree::cmdline(parent).is_some_and(|argv| flag_in(&argv)) {
            return true;
        }
        pid = parent;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_channel_flags_count() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(flag_in(&argv(&["claude", "--channels", "server:wakeful"])));
        assert!(flag_in(&argv(&[
            "claude",
            "--dangerously-load-development-channels=server:wakeful"
        ])));
        assert!(!flag_in(&argv(&["claude", "--channelsx"])));
        assert!(!flag_in(&argv(&["claude", "server:wakeful"])));
        assert!(!flag_in(&[]));
    }
}
