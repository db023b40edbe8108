//! A cgroup v2 per command, where one is delegated to us.
//!
//! A process can leave its process group (`setsid`), clear its environment
//! (losing the `WAKEFUL_MONITOR_ID` marker) and be reparented anywhere, but
//! it cannot leave its cgroup without write access to another one. So when
//! this process may create cgroups under its own (root, or a systemd user
//! service with delegation), every command is started inside a fresh cgroup
//! `<our cgroup>/wakeful/<id>`: its members are listed by `cgroup.procs` and
//! killed at once by `cgroup.kill`. Where no cgroup can be created, nothing
//! changes: the process tree and the marker still find the command's
//! processes (the engine's `process::Target`).

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

/// Where this process may create cgroups for its commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupRoot {
    base: PathBuf,
}

impl CgroupRoot {
    /// `<our cgroup>/wakeful`, when cgroups can be created there (checked
    /// by creating and removing one); `None` otherwise.
    pub fn detect() -> Option<Self> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = cgroup2_mount(&mounts)?;
        let dir = mount.join(rel.trim_start_matches('/'));
        let base = dir.join("wakeful");
        if !base.is_dir() {
            std::fs::create_dir(&base).ok()?;
        }
        let probe = base.join(format!("probe-{}", std::process::id()));
        std::fs::create_dir(&probe).ok()?;
        let procs_ok = probe.join("cgroup.procs").exists();
        let _ = std::fs::remove_dir(&probe);
        procs_ok.then_some(CgroupRoot { base })
    }

    /// The directory commands' cgroups go into.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// A new cgroup `name` (a monitor or terminal id).
    pub fn create(&self, name: &str) -> std::io::Result<Cgroup> {
        let dir = self.base.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let procs = File::options().write(true).open(dir.join("cgroup.procs"))?;
        Ok(Cgroup {
            dir,
            procs: Some(procs),
        })
    }

    /// Kills and removes the cgroup `name` left by an earlier daemon, if
    /// any; returns how many processes it still held.
    pub fn clean_up(&self, name: &str) -> usize {
        let dir = self.base.join(name);
        if !dir.is_dir() {
            return 0;
        }
        let cg = Cgroup { dir, procs: None };
        let n = cg.pids().len();
        cg.kill();
        n
    }
}

/// The cgroup2 mount point in a `/proc/self/mountinfo` text.
fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace().nth(4).map(PathBuf::from)
    })
}

/// One command's cgroup. Removed (when empty) on drop.
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    procs: Option<File>,
}

impl Cgroup {
    /// A descriptor of `cgroup.procs`, for the child to move itself in
    /// before it runs the command ([`enter`]).
    pub fn procs_fd(&self) -> Option<RawFd> {
        self.procs.as_ref().map(|f| f.as_raw_fd())
    }

    /// The processes in the cgroup now.
    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|t| {
                t.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// SIGKILL to every process in the cgroup at once (`cgroup.kill`, Linux
    /// 5.14+; one by one where it is missing).
    pub fn kill(&self) {
        let written = File::options()
            .write(true)
            .open(self.dir.join("cgroup.kill"))
            .and_then(|mut f| f.write_all(b"1"));
        if written.is_err() {
            for pid in self.pids() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.procs = None;
        // Fails while a process is still inside; it is then left for the
        // next daemon's clean-up.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is open
/// as `fd`. Meant for a child between fork and exec: it only calls
/// `write(2)`, which is async-signal-safe. Failure is ignored (the command
/// then runs outside, found by its process tree and marker).
pub fn enter(fd: RawFd) {
    // SAFETY: writes one byte from a static buffer to a descriptor the
    // caller owns; no allocation, no locks.
    unsafe {
        libc::write(fd, b"0".as_ptr().cast(), 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_mount() {
        let hybrid = "25 18 0:22 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n26 18 0:23 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
        assert_eq!(
            cgroup2_mount(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let pure = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(cgroup2_mount(pure), Some(PathBuf::from("/sys/fs/cgroup")));
        assert_eq!(cgroup2_mount("1 2 0:3 / / rw - ext4 /dev/vda rw\n"), None);
    }
}
