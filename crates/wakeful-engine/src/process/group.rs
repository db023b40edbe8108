//! Process groups: what is alive in one, signalling one, reaping the
//! zombies it left, and the guard that kills one when a monitor's task is
//! dropped.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use wakeful_platform::tree::ProcInfo;

/// The processes of group `pgid` that are still alive (zombies excluded),
/// as the system shows them whatever the platform backend
/// (`tree::observed_processes`): a check of what a stop claims.
pub fn live_group_members(pgid: i32) -> Vec<ProcInfo> {
    wakeful_platform::tree::observed_processes()
        .into_iter()
        .filter(|p| p.pgrp == pgid && p.is_live())
        .collect()
}

/// The live processes belonging to monitor `monitor_id`: every descendant of
/// its command inherits `WAKEFUL_MONITOR_ID`, whatever group it moved to.
/// As the system shows them whatever the platform backend (on Linux the
/// marker is read even under the posix backend, which cannot): a check
/// of what a stop claims, for tests and `doctor`.
pub fn live_of_monitor(monitor_id: &str) -> Vec<ProcInfo> {
    use wakeful_platform::tree::{observed_has_env, observed_processes};
    let me = std::process::id() as i32;
    observed_processes()
        .into_iter()
        .filter(|p| {
            p.is_live() && p.pid != me && observed_has_env(p.pid, "WAKEFUL_MONITOR_ID", monitor_id)
        })
        .collect()
}

/// Sends `signal` to every process of group `pgid`. A group that no longer
/// exists is not an error.
pub fn signal_group(pgid: i32, signal: Signal) {
    if pgid <= 1 {
        return;
    }
    // ESRCH: the group is gone, which is what we want anyway.
    let _ = killpg(Pid::from_raw(pgid), signal);
}

/// Reaps zombies of group `pgid` that are this process's children (orphans
/// reparented to it as subreaper), without reading the process table: the
/// kernel names them one by one (`waitid` on the group, peeking first). The
/// group's leader, whose status tokio collects, is left alone. (macOS has
/// no `waitid` on a group, and no subreaper either: nothing is adopted
/// there to reap.)
#[cfg(target_vendor = "apple")]
fn reap_own_zombies(_pgid: i32) {}

#[cfg(not(target_vendor = "apple"))]
fn reap_own_zombies(pgid: i32) {
    use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
    for _ in 0..1024 {
        let peek = waitid(
            Id::PGid(Pid::from_raw(pgid)),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
        );
        let pid = match peek {
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(status) => match status.pid() {
                Some(pid) => pid,
                None => return,
            },
        };
        if pid.as_raw() == pgid {
            return;
        }
        let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
    }
}

/// Reaps the zombies of group `pgid` that are children of this process
/// (orphans reparented to us as subreaper). The group's leader is left to
/// tokio, which collects its exit status.
pub fn reap_group_zombies(pgid: i32) {
    reap_own_zombies(pgid);
}

/// Kills group `pgid` with SIGKILL when dropped, unless disarmed: the last
/// line of defence that no process outlives its monitor, even if the task
/// driving it is cancelled. (A cancelled task cannot wait for a grace
/// period; the group is what can be reached at once.)
#[derive(Debug)]
pub struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    /// Guards group `pgid`.
    pub fn new(pgid: i32) -> Self {
        GroupGuard { pgid: Some(pgid) }
    }

    /// The group is known to be gone; do nothing on drop.
    pub fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid {
            signal_group(pgid, Signal::SIGKILL);
        }
    }
}
