//! After a crash: what the dead daemon left behind.
//!
//! The daemon starts commands with `PR_SET_PDEATHSIG`, so each monitor's `sh`
//! dies with it, but grandchildren (`tail -F x | grep y`, `sleep &`) may
//! live on. On start, the new daemon kills every live process that belongs to
//! a monitor its store still lists as running: a process belongs to monitor
//! `M` when its environment carries `WAKEFUL_MONITOR_ID=M` (every descendant
//! inherits it), or when it is in the recorded process group and started no
//! earlier than the recorded process (a descendant that cleared its
//! environment). Then persistent monitors are re-armed and the others end
//! with `daemon_stopped`.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use wakeful_engine::process::{all_processes, has_env, ProcInfo};

/// Kills what is left of monitor `monitor_id` (recorded process group
/// `pgid`, started at `start_ticks`). Returns how many processes were killed.
pub fn kill_leftovers(monitor_id: &str, pgid: Option<i32>, start_ticks: Option<u64>) -> usize {
    let me = std::process::id() as i32;
    let victims: Vec<ProcInfo> = all_processes()
        .into_iter()
        .filter(|p| p.is_live() && p.pid != me)
        .filter(|p| {
            let in_group = pgid.is_some_and(|g| g > 1 && p.pgrp == g)
                && start_ticks.is_some_and(|t| p.start_ticks >= t);
            in_group || has_env(p.pid, "WAKEFUL_MONITOR_ID", monitor_id)
        })
        .collect();
    for p in &victims {
        let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
    }
    victims.len()
}
