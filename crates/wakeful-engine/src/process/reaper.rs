//! Children we started, and children we adopted.
//!
//! A daemon that is a child subreaper inherits every orphan of its commands
//! (`setsid sleep 1 &` whose shell already exited). When such an orphan
//! exits, it stays a zombie until its new parent — the daemon — reaps it.
//! The daemon must reap those, but must not reap the children it started
//! itself: tokio collects their exit status (`Child::wait`), and a status
//! reaped elsewhere is lost.
//!
//! So every child is started through [`spawn`], which registers its pid
//! ([`Managed`] removes it again once its status was collected or the child
//! is dropped), and [`reap_adopted`] reaps the zombie children that are not
//! registered. [`start_reaper`] runs it on every SIGCHLD. Registration
//! happens under the same lock the reaper takes, so a child can never be
//! seen unregistered between its fork and its registration.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

/// Registered children, each with how many [`Managed`] hold it.
static MANAGED: Mutex<BTreeMap<i32, usize>> = Mutex::new(BTreeMap::new());

fn managed() -> MutexGuard<'static, BTreeMap<i32, usize>> {
    MANAGED.lock().unwrap_or_else(|p| p.into_inner())
}

/// A registered child: while this lives, the reaper leaves the pid alone.
#[derive(Debug)]
pub struct Managed {
    pid: i32,
}

impl Managed {
    /// The child's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        let mut set = managed();
        if let Some(n) = set.get_mut(&self.pid) {
            *n -= 1;
            if *n == 0 {
                set.remove(&self.pid);
            }
        }
    }
}

fn register(set: &mut BTreeMap<i32, usize>, pid: i32) -> Managed {
    *set.entry(pid).or_insert(0) += 1;
    Managed { pid }
}

/// Starts `cmd` and registers the child (see the module docs). The child
/// must be waited for (or dropped) before the returned [`Managed`] is.
pub fn spawn(
    cmd: &mut tokio::process::Command,
) -> std::io::Result<(tokio::process::Child, Managed)> {
    let mut set = managed();
    let child = cmd.spawn()?;
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| std::io::Error::other("the child exited before its pid was read"))?;
    Ok((child, register(&mut set, pid)))
}

/// Registers `pid`, a child this process's program before it started (an
/// upgrade hands its commands over): the reaper leaves it to its driver,
/// which collects its status.
pub fn adopt(pid: i32) -> Managed {
    register(&mut managed(), pid)
}

/// Whether `pid` is a child this process started (and has not collected).
pub fn is_managed(pid: i32) -> bool {
    managed().contains_key(&pid)
}

/// Reaps every zombie child that was not started through [`spawn`]
/// (orphans adopted as subreaper); returns how many.
pub fn reap_adopted() -> usize {
    let me = std::process::id() as i32;
    let set = managed();
    let mut reaped = 0;
    for pid in wakeful_platform::tree::children_of(me) {
        if set.contains_key(&pid) {
            continue;
        }
        let zombie = wakeful_platform::tree::proc_info(pid).is_some_and(|p| !p.is_live());
        if zombie && waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)).is_ok() {
            reaped += 1;
        }
    }
    reaped
}

/// Reaps adopted orphans now and on every SIGCHLD, for as long as the
/// runtime runs. Call once, in a daemon that is a subreaper.
pub fn start_reaper() -> std::io::Result<()> {
    let mut sigchld = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())?;
    tokio::spawn(async move {
        reap_adopted();
        while sigchld.recv().await.is_some() {
            let n = reap_adopted();
            if n > 0 {
                tracing::debug!("reaped {n} adopted orphan(s)");
            }
        }
    });
    Ok(())
}
