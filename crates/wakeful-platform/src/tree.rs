//! The process tree: the process table as wakeful needs it, orphans,
//! dying with the parent, and containers a command cannot leave.
//!
//! Each function here is the interface; the backend ([`crate::linux`])
//! does the work.

use crate::linux;

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
    /// Start time in clock ticks after boot: with the pid, it names one
    /// process even after its pid was reused.
    pub start_ticks: u64,
}

impl ProcInfo {
    /// Whether the process still runs (is not a zombie or dead). A zombie
    /// only waits to be reaped, so it does not count as a survivor.
    pub fn is_live(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Process `pid`; `None` when it is gone.
pub fn proc_info(pid: i32) -> Option<ProcInfo> {
    linux::proc::proc_info(pid)
}

/// Every process in the process table.
pub fn all_processes() -> Vec<ProcInfo> {
    linux::proc::all_processes()
}

/// The children of process `pid`, zombies included; empty when it is gone.
pub fn children_of(pid: i32) -> Vec<i32> {
    linux::proc::children_of(pid)
}

/// Whether process `pid`'s environment contains `NAME=VALUE` exactly
/// (false when it cannot be read: gone, or another user's).
pub fn has_env(pid: i32, name: &str, value: &str) -> bool {
    linux::proc::has_env(pid, name, value)
}

/// The command line of process `pid`; `None` when it cannot be read.
pub fn cmdline(pid: i32) -> Option<Vec<String>> {
    linux::proc::cmdline(pid)
}

/// The parent of `pid`, its parent, and so on up to (not including) pid 1
/// or the first that cannot be read.
pub fn ancestry(pid: i32) -> Vec<ProcInfo> {
    let mut out = Vec::new();
    let mut at = proc_info(pid).map(|p| p.ppid);
    while let Some(ppid) = at.filter(|p| *p > 1) {
        let Some(info) = proc_info(ppid) else { break };
        at = Some(info.ppid);
        out.push(info);
        if out.len() > 4096 {
            break;
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

/// Whether this process adopts the orphans of its descendants.
pub fn is_subreaper() -> bool {
    linux::proc::is_subreaper()
}

/// Makes this process adopt the orphans of its descendants, instead of
/// PID 1 (which in some containers never reaps them).
pub fn become_subreaper() -> std::io::Result<()> {
    linux::proc::become_subreaper()
}

/// Arranges for the calling process to be killed when its parent dies.
/// Async-signal-safe: meant for a child between fork and exec.
pub fn die_with_parent() -> std::io::Result<()> {
    linux::die_with_parent()
}

/// Where per-command containers can be made (cgroup v2 on Linux).
pub type ContainerRoot = linux::cgroup::CgroupRoot;

/// One command's container: its members cannot leave it.
pub type Container = linux::cgroup::Cgroup;

/// Whether containers can be made here, when `wanted`; logs which way
/// commands will be tracked.
pub fn detect_containers(wanted: bool) -> Option<ContainerRoot> {
    let root = wanted.then(ContainerRoot::detect).flatten();
    match &root {
        Some(root) => tracing::info!(
            "commands get a cgroup each, under {}",
            root.base().display()
        ),
        None => tracing::info!(
            "no cgroup for commands: they are tracked by process tree, group and marker"
        ),
    }
    root
}

/// Moves the calling process into the container whose handle is `fd`
/// ([`Container::procs_fd`]). Async-signal-safe: meant for a child between
/// fork and exec; failure is ignored.
pub fn enter_container(fd: std::os::fd::RawFd) {
    linux::cgroup::enter(fd)
}
