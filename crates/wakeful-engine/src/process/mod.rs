//! Processes: every command runs in a process group of its own, and a stop
//! reaches everything the command started — its group, its process tree,
//! orphans that carry its `WAKEFUL_MONITOR_ID` marker, and its container when
//! one could be made — so no grandchild (`tail -F x | grep y`, `sleep 600 &`,
//! `setsid sleep 600 &`) survives its monitor.
//!
//! - the process driver (`driver`): one way to run a long command (monitors,
//!   terminals, poll runs) — spawn, read both pipes, drain, stop, collect.
//! - process groups ([`group`]): signalling one, reaping its zombies, and
//!   [`GroupGuard`].
//! - [`Target`] ([`target`]): the processes of one command, and
//!   [`Target::terminate`] (SIGTERM, grace, SIGKILL; survivors reported).
//! - [`spawn`] and the reaper ([`reaper`]): children this process started
//!   are registered, so that adopted orphans can be told apart and reaped
//!   without stealing an exit status from the runtime.
//! - the spawner ([`spawner`]): every command is started from one thread,
//!   which alone may replace the program (an upgrade that keeps them).
//! - containers ([`wakeful_platform::tree::Container`]): one per command,
//!   where the platform can make them.
//!
//! The process table, orphan adoption (subreaper) and containers come from
//! the platform layer (`wakeful_platform::tree`): in a daemon that adopts
//! orphans, every descendant of every command stays in its own process tree.

pub(crate) mod driver;
pub mod group;
pub mod reaper;
pub mod spawner;
pub mod target;

pub use crate::source::HandedProcess;
pub use reaper::{spawn, Managed};
pub use target::Target;

pub use group::{
    live_group_members, live_of_monitor, reap_group_zombies, signal_group, GroupGuard,
};

pub use wakeful_platform::tree::{
    all_processes, become_subreaper, children_of, has_env, is_subreaper, observed_has_env,
    observed_processes, proc_info, subtree, ProcInfo,
};

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::Signal;
    use nix::unistd::Pid;

    #[test]
    fn children_and_subtree_of_a_real_process() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut tree = Vec::new();
        while std::time::Instant::now() < deadline {
            tree = subtree(pid);
            if tree.len() == 3 {
                break;
            }
            std::thread::yield_now();
        }
        assert_eq!(tree.len(), 3, "sh and its two sleeps: {tree:?}");
        assert!(children_of(std::process::id() as i32).contains(&pid));
        signal_group_members(&tree, Signal::SIGKILL);
        let _ = child.wait();
    }

    fn signal_group_members(tree: &[ProcInfo], sig: Signal) {
        for p in tree {
            let _ = nix::sys::signal::kill(Pid::from_raw(p.pid), sig);
        }
    }
}
