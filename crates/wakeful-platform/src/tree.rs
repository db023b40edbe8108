//! The process tree: the process table as wakeful needs it, orphans,
//! dying with the parent, and containers a command cannot leave.
//!
//! Each function here is the interface; the backend ([`crate::backend`]:
//! `linux` or [`crate::posix`]) does the work.

#[cfg(target_os = "linux")]
use crate::linux;
use crate::posix;

/// Whether the Linux backend runs (never, off Linux).
fn linux() -> bool {
    cfg!(target_os = "linux") && crate::backend() == crate::Backend::Linux
}

/// Calls the Linux backend's `$linux` when it runs, else `$posix`.
macro_rules! either {
    ($linux:expr, $posix:expr) => {{
        #[cfg(target_os = "linux")]
        {
            if linux() {
                return $linux;
            }
        }
        $posix
    }};
}

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
    /// When it started (Linux: clock ticks after boot; the posix backend:
    /// seconds of its `ps -o lstart` time): with the pid, it names one
    /// process even after its pid was reused. Compare only values of one
    /// backend.
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
    either!(linux::proc::proc_info(pid), posix::proc_info(pid))
}

/// Every process in the process table.
pub fn all_processes() -> Vec<ProcInfo> {
    either!(linux::proc::all_processes(), posix::all_processes())
}

/// The children of process `pid`, zombies included; empty when it is gone.
pub fn children_of(pid: i32) -> Vec<i32> {
    either!(
        linux::proc::children_of(pid),
        posix::all_processes()
            .into_iter()
            .filter(|p| p.ppid == pid)
            .map(|p| p.pid)
            .collect()
    )
}

/// Whether process `pid`'s environment contains `NAME=VALUE` exactly
/// (false when it cannot be read: gone, or another user's; always false
/// under the posix backend, which cannot read another process's
/// environment portably).
pub fn has_env(pid: i32, name: &str, value: &str) -> bool {
    either!(linux::proc::has_env(pid, name, value), {
        let _ = (pid, name, value);
        false
    })
}

/// The command line of process `pid`; `None` when it cannot be read.
/// (The posix backend has only `ps -o command`, split at spaces: an
/// argument with a space in it comes as several.)
pub fn cmdline(pid: i32) -> Option<Vec<String>> {
    either!(linux::proc::cmdline(pid), posix::cmdline(pid))
}

/// The executable file of process `pid`, where the system says
/// (`/proc/PID/exe` on Linux; `None` under the posix backend).
pub fn exe(pid: i32) -> Option<std::path::PathBuf> {
    either!(linux::proc::exe(pid), {
        let _ = pid;
        None
    })
}

/// Process `pid`'s start time in the backend's unit (see
/// [`ProcInfo::start_ticks`]); `None` when it is gone.
pub fn start_time(pid: i32) -> Option<u64> {
    proc_info(pid).map(|p| p.start_ticks)
}

/// A descriptor that becomes readable when process `pid` exits (Linux: a
/// pidfd); `None` when it cannot be had (gone, or the posix backend, whose
/// callers ask [`is_alive`] instead).
pub fn exit_watch(pid: i32) -> Option<std::os::fd::OwnedFd> {
    either!(linux::proc::pidfd(pid), {
        let _ = pid;
        None
    })
}

/// A descriptor that becomes readable when process `pid` exits, or why
/// there is none. Linux: a pidfd, or the `pidfd_open` error (`ESRCH`: no
/// such process; `EINVAL` or `ENOENT`: `pid` is a thread that does not lead
/// its process; `ENOSYS`: a kernel before 5.3; `EMFILE`). The posix backend:
/// `Ok(None)`, always (its callers poll [`is_alive`] and [`proc_info`]).
pub fn open_exit_watch(pid: i32) -> std::io::Result<Option<std::os::fd::OwnedFd>> {
    either!(linux::proc::open_pidfd(pid).map(Some), {
        let _ = pid;
        Ok(None)
    })
}

/// What an exit watch ([`open_exit_watch`]) knows of its process's exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitInfo {
    /// Its wait status (`WIFEXITED`/`WTERMSIG` encoding): it was reaped
    /// (by its parent, whoever that is) on a kernel that keeps the status
    /// for pidfds (Linux 6.15 and later).
    Status(i32),
    /// It is still there: running, or a zombie its parent has not
    /// collected yet.
    NotReaped,
    /// It cannot be known: a kernel that keeps no exit status for pidfds,
    /// or a watch that is not a pidfd.
    Unknown,
}

/// What the exit watch `watch` of [`open_exit_watch`] knows of its
/// process's exit (Linux: `PIDFD_GET_INFO`; a process that is not ours
/// cannot be waited for, but the kernel keeps the status it was reaped
/// with). [`ExitInfo::Unknown`] off Linux.
pub fn exit_info(watch: std::os::fd::BorrowedFd<'_>) -> ExitInfo {
    either!(linux::proc::pidfd_exit(watch), {
        let _ = watch;
        ExitInfo::Unknown
    })
}

/// Whether the process of the exit watch `watch` ([`open_exit_watch`]) has
/// exited (its descriptor is readable), without waiting.
pub fn has_exited(watch: std::os::fd::BorrowedFd<'_>) -> bool {
    #[cfg(target_os = "linux")]
    return linux::proc::pidfd_exited(watch);
    #[cfg(not(target_os = "linux"))]
    {
        let _ = watch;
        false
    }
}

/// Whether process `pid` exists (`kill(pid, 0)`; a zombie counts).
pub fn is_alive(pid: i32) -> bool {
    pid > 0 && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok_or_eperm()
}

/// Whether process `pid` exists but belongs to another user: `kill(pid,
/// 0)` says `EPERM`.
pub fn is_others(pid: i32) -> bool {
    pid > 0
        && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
            == Err(nix::errno::Errno::EPERM)
}

trait OkOrEperm {
    fn is_ok_or_eperm(&self) -> bool;
}

impl OkOrEperm for nix::Result<()> {
    fn is_ok_or_eperm(&self) -> bool {
        matches!(self, Ok(()) | Err(nix::errno::Errno::EPERM))
    }
}

/// Every process as the system shows it, whatever backend was chosen
/// (on Linux `/proc`, even under the posix backend): for checks of what
/// a backend claims — tests, `doctor` — never for the backend's own work.
pub fn observed_processes() -> Vec<ProcInfo> {
    #[cfg(target_os = "linux")]
    return linux::proc::all_processes();
    #[cfg(not(target_os = "linux"))]
    posix::all_processes()
}

/// [`has_env`] as the system shows it, whatever backend was chosen (see
/// [`observed_processes`]; false off Linux).
pub fn observed_has_env(pid: i32, name: &str, value: &str) -> bool {
    #[cfg(target_os = "linux")]
    return linux::proc::has_env(pid, name, value);
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (pid, name, value);
        false
    }
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
    if !linux() {
        // One scan of the table, not one per process.
        return posix::subtree_of(&posix::all_processes(), root);
    }
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
    either!(linux::proc::is_subreaper(), false)
}

/// Makes this process adopt the orphans of its descendants, instead of
/// PID 1 (which in some containers never reaps them).
/// The posix backend cannot: `Unsupported`.
pub fn become_subreaper() -> std::io::Result<()> {
    either!(
        linux::proc::become_subreaper(),
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "the posix platform backend has no subreaper"
        ))
    )
}

/// Arranges for the calling process to be killed when its parent dies.
/// Async-signal-safe: meant for a child between fork and exec. Does
/// nothing under the posix backend, which has no such signal (decide
/// which backend runs before forking: [`crate::backend`] is then a load).
pub fn die_with_parent() -> std::io::Result<()> {
    either!(linux::die_with_parent(), Ok(()))
}

/// Whether [`die_with_parent`] does anything here.
pub fn dies_with_parent() -> bool {
    linux()
}

/// Where per-command containers can be made (cgroup v2 on Linux).
#[cfg(target_os = "linux")]
pub type ContainerRoot = linux::cgroup::CgroupRoot;
/// Where per-command containers can be made (none off Linux).
#[cfg(not(target_os = "linux"))]
pub type ContainerRoot = posix::NoContainerRoot;

/// One command's container: its members cannot leave it.
#[cfg(target_os = "linux")]
pub type Container = linux::cgroup::Cgroup;
/// One command's container (none off Linux).
#[cfg(not(target_os = "linux"))]
pub type Container = posix::NoContainer;

/// Whether containers can be made here, when `wanted` (never under the
/// posix backend); logs which way commands will be tracked.
pub fn detect_containers(wanted: bool) -> Option<ContainerRoot> {
    let root = (wanted && linux()).then(ContainerRoot::detect).flatten();
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
    #[cfg(target_os = "linux")]
    linux::cgroup::enter(fd);
    #[cfg(not(target_os = "linux"))]
    let _ = fd;
}
