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
    open_pidfd(pid).ok()
}

/// A pidfd of process `pid` (`pidfd_open`), or why there is none: `ESRCH`
/// (no such process), `EINVAL` or `ENOENT` (`pid` names a thread that does
/// not lead its process), `ENOSYS` (a kernel before 5.3), `EMFILE`.
pub fn open_pidfd(pid: i32) -> std::io::Result<std::os::fd::OwnedFd> {
    if pid <= 0 {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: pidfd_open takes a pid and flags and returns a new
    // descriptor (or -1); no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let Some(fd) = i32::try_from(fd).ok().filter(|fd| *fd >= 0) else {
        return Err(std::io::Error::last_os_error());
    };
    // SAFETY: fd was just returned by pidfd_open and is owned by nobody else.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// `struct pidfd_info` of `uapi/linux/pidfd.h` as far as its first
/// version goes (64 bytes; `exit_code` is filled since Linux 6.15).
#[repr(C)]
#[derive(Default)]
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ruid: u32,
    rgid: u32,
    euid: u32,
    egid: u32,
    suid: u32,
    sgid: u32,
    fsuid: u32,
    fsgid: u32,
    exit_code: i32,
}

const _: () = assert!(std::mem::size_of::<PidfdInfo>() == 64);

/// `PIDFD_INFO_PID`: the process is still there (not yet reaped).
const PIDFD_INFO_PID: u64 = 1 << 0;
/// `PIDFD_INFO_EXIT`: its exit status, once it has been reaped.
const PIDFD_INFO_EXIT: u64 = 1 << 3;
/// `PIDFD_GET_INFO`: `_IOWR(0xFF, 11, struct pidfd_info)`.
const PIDFD_GET_INFO: u64 = (3 << 30) | (64 << 16) | (0xFF << 8) | 11;

/// What the kernel tells of the exit of the process behind `pidfd`
/// (`PIDFD_GET_INFO` with `PIDFD_INFO_EXIT`, Linux 6.15 and later): the
/// wait status once it has been reaped (by whichever process collects it:
/// it need not be ours), not yet while it is a zombie, and nothing on a
/// kernel without it.
pub fn pidfd_exit(pidfd: std::os::fd::BorrowedFd<'_>) -> crate::tree::ExitInfo {
    use std::os::fd::AsRawFd;
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_EXIT,
        ..PidfdInfo::default()
    };
    // SAFETY: PIDFD_GET_INFO writes at most size_of::<PidfdInfo>() bytes
    // (the size encoded in the request) through the pointer, which points
    // to a live, exclusively borrowed local of that size.
    let rc = unsafe {
        libc::ioctl(
            pidfd.as_raw_fd(),
            PIDFD_GET_INFO as libc::Ioctl,
            &mut info as *mut PidfdInfo,
        )
    };
    if rc != 0 {
        // ENOTTY/EINVAL: a kernel without PIDFD_GET_INFO (before 6.13);
        // ESRCH: reaped, and a kernel that keeps no exit status (6.13, 6.14).
        return crate::tree::ExitInfo::Unknown;
    }
    if info.mask & PIDFD_INFO_EXIT != 0 {
        crate::tree::ExitInfo::Status(info.exit_code)
    } else if info.mask & PIDFD_INFO_PID != 0 {
        crate::tree::ExitInfo::NotReaped
    } else {
        crate::tree::ExitInfo::Unknown
    }
}

/// Whether the process behind `pidfd` has exited (it is readable), without
/// waiting.
pub fn pidfd_exited(pidfd: std::os::fd::BorrowedFd<'_>) -> bool {
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, which lives across the call; a zero timeout.
    unsafe { libc::poll(&mut pfd, 1, 0) > 0 }
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
    fn a_pidfd_says_when_its_process_exited_and_how() {
        use std::os::fd::AsFd;
        let mut child = std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .unwrap();
        let fd = open_pidfd(child.id() as i32).unwrap();
        assert!(!pidfd_exited(fd.as_fd()));
        assert_eq!(pidfd_exit(fd.as_fd()), crate::tree::ExitInfo::NotReaped);
        child.kill().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !pidfd_exited(fd.as_fd()) {
            assert!(std::time::Instant::now() < deadline, "never readable");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // A zombie: not reaped yet, so no status.
        assert_eq!(pidfd_exit(fd.as_fd()), crate::tree::ExitInfo::NotReaped);
        child.wait().unwrap();
        match pidfd_exit(fd.as_fd()) {
            crate::tree::ExitInfo::Status(status) => assert_eq!(status, libc::SIGKILL),
            crate::tree::ExitInfo::Unknown => {
                eprintln!("this kernel keeps no exit status for pidfds (before 6.15)")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            open_pidfd(child.id() as i32).unwrap_err().raw_os_error(),
            Some(libc::ESRCH)
        );
    }

    #[test]
    fn a_thread_is_not_a_process_to_pidfd_open() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid takes nothing and returns this thread's id.
            tx.send(unsafe { libc::gettid() }).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        // EINVAL or ENOENT, as the kernel has it.
        let errno = open_pidfd(tid).unwrap_err().raw_os_error();
        assert!(
            matches!(errno, Some(libc::EINVAL | libc::ENOENT)),
            "{errno:?}"
        );
        done_tx.send(()).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn reads_own_process() {
        let me = proc_info(std::process::id() as i32).unwrap();
        assert!(me.is_live());
        assert!(me.start_ticks > 0);
        assert!(cmdline(std::process::id() as i32).is_some_and(|c| !c.is_empty()));
    }
}
