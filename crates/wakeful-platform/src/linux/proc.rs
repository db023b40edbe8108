//! The process table, read from `/proc`.

use crate::tree::ProcInfo;

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

/// The kernel's table of file locks, `/proc/locks`.
pub fn locks_table() -> Option<String> {
    std::fs::read_to_string("/proc/locks").ok()
}

/// A pidfd of process `pid` (`pidfd_open`): readable once it exits.
pub fn pidfd(pid: i32) -> Option<std::os::fd::OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new
    // descriptor (or -1); no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: fd was just returned by pidfd_open and is owned by nobody else.
    Some(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// The executable of process `pid` (`/proc/PID/exe`), when readable.
pub fn exe(pid: i32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

/// The path of descriptor `fd` of process `pid`: `/proc/PID/fd/N`.
pub fn fd_path(pid: i32, fd: i32) -> std::path::PathBuf {
    format!("/proc/{pid}/fd/{fd}").into()
}

/// Whether process `pid`'s environment contains `NAME=VALUE` exactly
/// (false when it cannot be read: gone, or another user's).
pub fn has_env(pid: i32, name: &str, value: &str) -> bool {
    let wanted = format!("{name}={value}");
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|b| *b == 0).any(|kv| kv == wanted.as_bytes()))
        .unwrap_or(false)
}

/// The command line of process `pid`, one argument each; `None` when it
/// cannot be read.
pub fn cmdline(pid: i32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
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

/// Makes this process the subreaper of its descendants
/// (`PR_SET_CHILD_SUBREAPER`).
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
        assert!(cmdline(std::process::id() as i32).is_some_and(|c| !c.is_empty()));
    }
}
