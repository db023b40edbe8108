//! Process groups: every command runs in a group of its own, and the whole
//! group is what gets signalled, so no grandchild (`tail -F x | grep y`,
//! `sleep 600 &`) survives its monitor.
//!
//! Linux facts this module relies on, read from `/proc`:
//! - a process's group and state are fields 5 and 3 of `/proc/PID/stat`;
//! - a zombie (state `Z`) is already dead: it only waits to be reaped, so it
//!   does not count as a survivor;
//! - orphans are reparented to the nearest *subreaper* (see
//!   [`become_subreaper`]); a daemon that is one can reap its monitors'
//!   grandchildren itself ([`reap_group_zombies`]).

use std::time::Duration;

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

/// Terminates group `pgid`: SIGTERM, then SIGKILL to whatever is still alive
/// after `grace`. Returns once no live member remains (or, should a process be
/// stuck in the kernel, after a bounded extra second).
///
/// There is no kernel notification for "this process group is now empty", so
/// this checks it with a backoff (2 ms doubling to 50 ms), only during this
/// bounded shutdown.
pub async fn terminate_group(pgid: i32, grace: Duration) {
    if group_is_empty(pgid) {
        return;
    }
    signal_group(pgid, Signal::SIGTERM);
    if !wait_group_empty(pgid, grace).await {
        signal_group(pgid, Signal::SIGKILL);
        wait_group_empty(pgid, Duration::from_secs(1)).await;
    }
}

/// Whether group `pgid` has no live member. A signal 0 to the group is the
/// cheap check (no such group: empty); only when some member exists is the
/// process table read, to tell live members from zombies.
pub fn group_is_empty(pgid: i32) -> bool {
    if pgid <= 1 {
        return true;
    }
    // The leader still running: not empty, no need to look further.
    if proc_info(pgid).is_some_and(|p| p.is_live() && p.pgrp == pgid) {
        return false;
    }
    reap_own_zombies(pgid);
    match killpg(Pid::from_raw(pgid), None) {
        Err(nix::errno::Errno::ESRCH) => true,
        _ => live_group_members(pgid).is_empty(),
    }
}

/// Waits up to `limit` for group `pgid` to have no live member, checking
/// after 2 ms, then less and less often (at most every 50 ms).
pub async fn wait_group_empty(pgid: i32, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    let mut pause = Duration::from_millis(2);
    loop {
        if group_is_empty(pgid) {
            return true;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return false;
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Kills group `pgid` with SIGKILL when dropped, unless disarmed: the last
/// line of defence that no process outlives its monitor, even if the task
/// driving it is cancelled.
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
}
