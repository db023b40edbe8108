//! Processes: every command runs in a process group of its own, and a stop
//! reaches everything the command started — its group, its process tree,
//! orphans that carry its `WAKEFUL_MONITOR_ID` marker, and its cgroup when
//! one could be made — so no grandchild (`tail -F x | grep y`, `sleep 600 &`,
//! `setsid sleep 600 &`) survives its monitor.
//!
//! - the process driver (`driver`): one way to run a long command (monitors,
//!   terminals, poll runs) — spawn, read both pipes, drain, stop, collect.
//! - [`Target`] ([`target`]): the processes of one command, and
//!   [`Target::terminate`] (SIGTERM, grace, SIGKILL; survivors reported).
//! - [`spawn`] and the reaper ([`reaper`]): children this process started
//!   are registered, so that adopted orphans can be told apart and reaped
//!   without stealing an exit status from the runtime.
//! - [`cgroup`]: a cgroup v2 per command, where one is delegated to us.
//!
//! Linux facts this module relies on, read from `/proc`:
//! - a process's group and state are fields 5 and 3 of `/proc/PID/stat`;
//! - a zombie (state `Z`) is already dead: it only waits to be reaped, so it
//!   does not count as a survivor;
//! - `/proc/PID/task/TID/children` lists a thread's children;
//! - orphans are reparented to the nearest *subreaper* (see
//!   [`become_subreaper`]): in a daemon that is one, every descendant of
//!   every command stays in the daemon's own process tree.

pub mod cgroup;
pub(crate) mod driver;
pub mod reaper;
pub mod target;

pub use reaper::{spawn, Managed};
pub use target::Target;

use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

/// One entry of the process table, as far as wakeful cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcInfo {
    /// Process id.
    pub pid: i32,
    /// Parent process id.
    pub ppid: i32,
    /// Process group id.
    pub pgrp: i32,
    /// State letter (`R`, `S`, `Z`, ...).
    pub state: char,
    /// Start time in clock ticks after boot.
    pub start_ticks: u64,
}

impl ProcInfo {
    /// Whether the process still runs (is not a zombie or dead).
    pub fn is_live(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Reads `/proc/PID/stat`; `None` when the process is gone.
pub fn proc_info(pid: i32) -> Option<ProcInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

fn parse_stat(stat: &str) -> Option<ProcInfo> {
    // The command name is in parentheses and may contain spaces.
    let close = stat.rfind(')')?;
    let pid = stat[..stat.find(' ')?].parse().ok()?;
    let mut fields = stat[close + 2..].split(' ');
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    // Fields 6 to 21 come next; field 22 is starttime.
    let start_ticks = fields.nth(16)?.parse().ok()?;
    Some(ProcInfo {
        pid,
        ppid,
        pgrp,
        state,
        start_ticks,
    })
}

/// Every process in the process table.
pub fn all_processes() -> Vec<ProcInfo> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(proc_info)
        .collect()
}

/// The processes of group `pgid` that are still alive (zombies excluded).
pub fn live_group_members(pgid: i32) -> Vec<ProcInfo> {
    all_processes()
        .into_iter()
        .filter(|p| p.pgrp == pgid && p.is_live())
        .collect()
}

/// Whether process `pid`'s environment contains `NAME=VALUE` exactly
/// (false when it cannot be read: gone, or another user's).
pub fn has_env(pid: i32, name: &str, value: &str) -> bool {
    let wanted = format!("{name}={value}");
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|b| *b == 0).any(|kv| kv == wanted.as_bytes()))
        .unwrap_or(false)
}

/// The live processes belonging to monitor `monitor_id`: every descendant of
/// its command inherits `WAKEFUL_MONITOR_ID`, whatever group it moved to.
pub fn live_of_monitor(monitor_id: &str) -> Vec<ProcInfo> {
    let me = std::process::id() as i32;
    all_processes()
        .into_iter()
        .filter(|p| p.is_live() && p.pid != me && has_env(p.pid, "WAKEFUL_MONITOR_ID", monitor_id))
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

/// Whether this process is a child subreaper (then orphans of its
/// commands are reparented to it).
pub fn is_subreaper() -> bool {
    let mut flag: libc::c_int = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER writes one int through the pointer,
    // which points to a live local.
    let rc = unsafe {
        libc::prctl(
            libc::PR_GET_CHILD_SUBREAPER,
            &mut flag as *mut libc::c_int,
            0,
            0,
            0,
        )
    };
    rc == 0 && flag != 0
}

/// The children of process `pid` (of all its threads), zombies included;
/// empty when it is gone or the kernel does not list children.
pub fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in tasks.flatten() {
        let mut path = t.path();
        path.push("children");
        if let Ok(text) = std::fs::read_to_string(&path) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// `root` and its descendants, as the process table shows them now
/// (zombies included; a process whose parent is gone is no longer under it).
pub fn subtree(root: i32) -> Vec<ProcInfo> {
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        if let Some(info) = proc_info(pid) {
            out.push(info);
            todo.extend(children_of(pid));
        }
        if out.len() > 65_536 {
            break; // a fork bomb is not walked forever
        }
    }
    out
}

/// Makes this process the subreaper of its descendants, so that orphaned
/// grandchildren are reparented here (and can be reaped by
/// [`reap_group_zombies`]) instead of to PID 1, which in some containers
/// never reaps them.
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer argument and
    // touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Reaps zombies of group `pgid` that are this process's children (orphans
/// reparented to it as subreaper), without reading the process table: the
/// kernel names them one by one (`waitid` on the group, peeking first). The
/// group's leader, whose status tokio collects, is left alone.
fn reap_own_zombies(pgid: i32) {
    use nix::sys::wait::{waitid, Id, WaitStatus};
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_spaces_in_name() {
        let stat = "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10 18446744073709551615";
        let p = parse_stat(stat).unwrap();
        assert_eq!(p.pid, 1234);
        assert_eq!(p.ppid, 1);
        assert_eq!(p.pgrp, 1234);
        assert_eq!(p.state, 'S');
        assert_eq!(p.start_ticks, 987654);
    }

    #[test]
    fn reads_own_process() {
        let me = proc_info(std::process::id() as i32).unwrap();
        assert!(me.is_live());
        assert!(me.start_ticks > 0);
    }

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
