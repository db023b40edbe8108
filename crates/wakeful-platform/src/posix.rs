//! The portable backend: only what macOS and the BSDs have too.
//!
//! - The process table comes from one `ps -A -o pid= -o ppid= -o pgid=
//!   -o stat= -o lstart=` run (POSIX `ps` fields, plus `lstart`, which
//!   procps, macOS and the BSDs all print as `Thu Dec  3 17:30:29 2026`
//!   under `LC_ALL=C`); [`parse_ps`] reads it and is tested without a
//!   process table.
//! - No subreaper, no parent-death signal, no containers, no reading of
//!   another process's environment: what the stop of a command cannot find
//!   (a process that left its group, whose parent exited) it cannot claim
//!   to have stopped ([`crate::Backend::finds_every_process`]).
//! - Files are followed by polling `stat` ([`crate::follow`]).

use std::process::{Command, Stdio};

use crate::tree::ProcInfo;

/// The `ps` arguments of one scan.
const PS_FIELDS: [&str; 10] = [
    "-o", "pid=", "-o", "ppid=", "-o", "pgid=", "-o", "stat=", "-o", "lstart=",
];

fn ps(select: &[&str], fields: &[&str]) -> Option<String> {
    let out = Command::new("ps")
        .args(select)
        .args(fields)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    // `ps -p PID` exits 1 when PID is gone: no output then either.
    String::from_utf8(out.stdout).ok()
}

/// Every process, from one `ps -A` scan (empty when `ps` cannot run).
pub fn all_processes() -> Vec<ProcInfo> {
    ps(&["-A"], &PS_FIELDS).map_or_else(Vec::new, |t| parse_ps(&t))
}

/// Process `pid`, from `ps -p PID`; `None` when it is gone.
pub fn proc_info(pid: i32) -> Option<ProcInfo> {
    if pid <= 0 {
        return None;
    }
    let text = ps(&["-p", &pid.to_string()], &PS_FIELDS)?;
    parse_ps(&text).into_iter().find(|p| p.pid == pid)
}

/// The command line of `pid` as `ps -o command=` shows it, split at
/// spaces.
pub fn cmdline(pid: i32) -> Option<Vec<String>> {
    let text = ps(&["-p", &pid.to_string()], &["-o", "command="])?;
    let line = text.lines().next()?.trim();
    if line.is_empty() {
        return None;
    }
    Some(line.split_whitespace().map(str::to_string).collect())
}

/// The rows of a `ps -o pid= -o ppid= -o pgid= -o stat= -o lstart=` run;
/// lines that do not parse are skipped.
pub fn parse_ps(text: &str) -> Vec<ProcInfo> {
    text.lines().filter_map(parse_row).collect()
}

fn parse_row(line: &str) -> Option<ProcInfo> {
    let mut f = line.split_whitespace();
    let pid = f.next()?.parse().ok()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    let state = f.next()?.chars().next()?;
    // lstart: weekday, month, day, hh:mm:ss, year.
    let _weekday = f.next()?;
    let start_ticks = lstart_seconds(f.next()?, f.next()?, f.next()?, f.next()?)?;
    Some(ProcInfo {
        pid,
        ppid,
        pgrp,
        state,
        start_ticks,
    })
}

/// `Dec`, `3`, `17:30:29`, `2026` as a number of seconds that grows with
/// time (not an epoch: months count 31 days) — enough to tell two
/// processes of one pid apart.
fn lstart_seconds(month: &str, day: &str, time: &str, year: &str) -> Option<u64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? as u64;
    let day: u64 = day.parse().ok()?;
    let mut hms = time.split(':').map(|x| x.parse::<u64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    let year: u64 = year.parse().ok()?;
    Some((((((year * 12 + month) * 31 + day) * 24 + h) * 60 + m) * 60) + s)
}

/// `root` and its descendants in `table` (parent links only).
pub fn subtree_of(table: &[ProcInfo], root: i32) -> Vec<ProcInfo> {
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        if let Some(p) = table.iter().find(|p| p.pid == pid) {
            out.push(p.clone());
            todo.extend(
                table
                    .iter()
                    .filter(|c| c.ppid == pid && c.pid != pid)
                    .map(|c| c.pid),
            );
        }
        if out.len() > 65_536 {
            break;
        }
    }
    out
}

/// Where containers would be made: never (off Linux there are none).
#[derive(Debug, Clone)]
pub struct NoContainerRoot(());

impl NoContainerRoot {
    /// Never finds one.
    pub fn detect() -> Option<Self> {
        None
    }

    /// Never called: there is no root.
    pub fn base(&self) -> &std::path::Path {
        std::path::Path::new("/")
    }

    /// Never makes one.
    pub fn create(&self, _name: &str) -> std::io::Result<NoContainer> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "no containers on this system",
        ))
    }

    /// Nothing to clean up.
    pub fn clean_up(&self, _name: &str) -> usize {
        0
    }
}

/// A container that is never made.
#[derive(Debug)]
pub struct NoContainer(());

impl NoContainer {
    /// No handle.
    pub fn procs_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// No members.
    pub fn pids(&self) -> Vec<i32> {
        Vec::new()
    }

    /// Nothing to kill.
    pub fn kill(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "    1     0     1 Ss   Thu Dec  3 09:00:00 2026
  100     1   100 Ss   Thu Dec  3 17:30:29 2026
  101   100   100 S+   Thu Dec  3 17:30:30 2026
  102   101   102 Z    Thu Dec  3 17:30:31 2026
  103   100   103 Ss   Thu Dec  3 17:30:31 2026
  garbage line
  104   103   103 R    Fri Jan  1 00:00:00 2027
";

    #[test]
    fn a_ps_table_parses() {
        let t = parse_ps(TABLE);
        assert_eq!(t.len(), 6);
        assert_eq!(
            t[1],
            ProcInfo {
                pid: 100,
                ppid: 1,
                pgrp: 100,
                state: 'S',
                start_ticks: lstart_seconds("Dec", "3", "17:30:29", "2026").unwrap(),
            }
        );
        assert!(!t[3].is_live(), "a zombie");
        assert!(
            t[5].start_ticks > t[4].start_ticks,
            "later starts are larger"
        );
        assert!(t[2].start_ticks == t[1].start_ticks + 1);
    }

    #[test]
    fn a_subtree_follows_parent_links_across_groups() {
        let t = parse_ps(TABLE);
        let mut pids: Vec<i32> = subtree_of(&t, 100).iter().map(|p| p.pid).collect();
        pids.sort();
        assert_eq!(pids, vec![100, 101, 102, 103, 104]);
        assert!(subtree_of(&t, 999).is_empty());
    }

    #[test]
    fn the_real_ps_finds_this_process_and_its_child() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let me = std::process::id() as i32;
        let table = all_processes();
        assert!(table.iter().any(|p| p.pid == me), "{table:?}");
        let info = proc_info(child.id() as i32).expect("the child");
        assert_eq!(info.ppid, me);
        assert_eq!(cmdline(child.id() as i32).unwrap(), ["sleep", "30"]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(proc_info(child.id() as i32), None);
    }
}
