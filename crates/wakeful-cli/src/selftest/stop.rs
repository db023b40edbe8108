//! A stop ends the whole process tree: a `tail -F | grep` pipeline and a
//! `sleep &` child, and a `setsid` escapee (or the limit is reported).

use std::collections::BTreeSet;

use std::process::{Command, Stdio};
use std::time::Duration;
use wakeful_platform::tree::ProcInfo;

use super::scratch::{missing, pids, until, Scratch};
use super::{Check, Outcome};

const BUG: &str = "report it with the output of `wakeful doctor --selftest --json`; until then stop such commands yourself";

/// Leaves a process with `word` in its command line that no monitor
/// started: a survivor the stop cannot know of (the self-test's own
/// break, debug builds only).
pub fn plant_survivor(word: &str) {
    let _ = Command::new("sleep")
        .arg(format!("600.{word}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

/// `tail -F FILE | grep WORD & sleep 600 & wait`, stopped: zero survivors
/// and no zombie, counted by command line and process group.
pub fn pipeline(s: &Scratch, brk: Option<&str>, backend: wakeful_platform::Backend) -> Check {
    const G: &str = "a stop kills the whole process tree";
    if let Some(why) = missing(&["tail", "grep", "sleep"]) {
        return Check::new("stop", G, Outcome::NotChecked, why);
    }
    let word = format!("{}1", s.tag());
    let file = s.dir().join(format!("pipe-{word}.log"));
    if let Err(e) = std::fs::write(&file, b"") {
        return Check::new(
            "stop",
            G,
            Outcome::NotChecked,
            format!("{}: {e}", file.display()),
        );
    }
    let command = format!(
        "tail -F {} | grep {word} & sleep 600.{word} & wait",
        file.display()
    );
    let id = match s.start(&command) {
        Ok(id) => id,
        Err(e) => return Check::new("stop", G, Outcome::Failed, e.to_string()).fix(BUG),
    };
    // sh, tail, grep, sleep.
    if !until(Duration::from_secs(5), || s.tagged(&word).len() >= 4) {
        return Check::new(
            "stop",
            G,
            Outcome::Failed,
            format!("the pipeline did not start: {:?}", pids(&s.tagged(&word))),
        )
        .fix(BUG);
    }
    let started = s.tagged(&word);
    let groups: BTreeSet<i32> = started.iter().map(|p| p.pgrp).collect();
    if brk == Some("stop") {
        plant_survivor(&word);
    }
    if let Err(e) = s
        .json(&["stop", &id])
        .and_then(|_| s.ended(&id, Duration::from_secs(10)))
    {
        return Check::new("stop", G, Outcome::Failed, e.to_string()).fix(BUG);
    }
    // A zombie has no command line any more: its group names it.
    let left = || {
        let mut all: Vec<ProcInfo> = wakeful_platform::tree::all_processes()
            .into_iter()
            .filter(|p| groups.contains(&p.pgrp))
            .chain(s.tagged(&word))
            .collect();
        all.sort_by_key(|p| p.pid);
        all.dedup_by_key(|p| p.pid);
        all
    };
    let mut seen = Vec::new();
    if until(Duration::from_secs(3), || {
        seen = left();
        seen.is_empty()
    }) {
        return Check::new(
            "stop",
            G,
            Outcome::Ok,
            format!(
                "`tail -F | grep` and `sleep 600 &` ({} processes, group {:?}) stopped: none left, no zombie",
                started.len(),
                groups
            ),
        );
    }
    let daemon = s.daemon_pid().unwrap_or(0);
    let verdict = judge_left(&seen, daemon, backend.name() == "linux");
    match verdict {
        Left::Zombies { init } => Check::new(
            "stop",
            G,
            Outcome::Limit,
            format!(
                "every process stopped; {} zombies ({:?}) wait for their parent, pid {init} (not the daemon: backend {} is no subreaper), to reap them",
                seen.len(),
                pids(&seen),
                backend.name()
            ),
        )
        .fix("nothing runs; the zombies go when that process reaps them (a container's init may be slow to)"),
        Left::Survivors => {
            let zombies = seen.iter().filter(|p| !p.is_live()).count();
            Check::new(
                "stop",
                G,
                Outcome::Failed,
                format!(
                    "after the stop's final event, {} processes of the command are left ({zombies} zombies): {:?}",
                    seen.len(),
                    pids(&seen)
                ),
            )
            .fix(BUG)
        }
    }
}

/// What is left after a stop, when anything is.
#[derive(Debug, PartialEq, Eq)]
pub enum Left {
    /// A process runs, or a zombie waits for the daemon or (with a
    /// subreaper daemon) for anyone.
    Survivors,
    /// Only zombies, all waiting for `init`, a process that is not the
    /// daemon, which (without a subreaper) is theirs to reap.
    Zombies {
        /// Their parent.
        init: i32,
    },
}

/// Pure: whether what is `left` after a stop breaks the guarantee, given
/// the daemon's pid and whether it is a subreaper.
pub fn judge_left(left: &[ProcInfo], daemon: i32, subreaper: bool) -> Left {
    let first = left.first().map(|p| p.ppid).unwrap_or(0);
    let all_zombies_of_another = !left.is_empty()
        && left
            .iter()
            .all(|p| !p.is_live() && p.ppid != daemon && p.ppid == first);
    if subreaper || !all_zombies_of_another {
        Left::Survivors
    } else {
        Left::Zombies { init: first }
    }
}

/// `(setsid sleep 600 &); sleep 601`, stopped: the escapee (its own
/// session, its parent gone) is found, or the stop says it could not look.
pub fn escapee(s: &Scratch, brk: Option<&str>, backend: wakeful_platform::Backend) -> Check {
    const G: &str = "a stop finds a setsid escapee";
    let word = format!("{}2", s.tag());
    if let Some(why) = missing(&["setsid", "sleep"]) {
        return Check::new("escapee", G, Outcome::NotChecked, why);
    }
    let command = format!("(setsid sleep 600.{word} &); sleep 601.{word}");
    let id = match s.start(&command) {
        Ok(id) => id,
        Err(e) => return Check::new("escapee", G, Outcome::Failed, e.to_string()).fix(BUG),
    };
    let sleeps = || {
        s.tagged(&word)
            .into_iter()
            .filter(|p| {
                wakeful_platform::tree::cmdline(p.pid)
                    .and_then(|c| c.first().cloned())
                    .is_some_and(|a| a.ends_with("sleep"))
            })
            .count()
    };
    if !until(Duration::from_secs(5), || sleeps() >= 2) {
        return Check::new("escapee", G, Outcome::Failed, "the escapee did not start").fix(BUG);
    }
    if brk == Some("escapee") {
        plant_survivor(&word);
    }
    let end = match s
        .json(&["stop", &id])
        .and_then(|_| s.ended(&id, Duration::from_secs(10)))
    {
        Ok(end) => end,
        Err(e) => return Check::new("escapee", G, Outcome::Failed, e.to_string()).fix(BUG),
    };
    let mut left = Vec::new();
    if until(Duration::from_secs(3), || {
        left = s
            .tagged(&word)
            .into_iter()
            .filter(|p| p.is_live())
            .collect();
        left.is_empty()
    }) {
        return Check::new(
            "escapee",
            G,
            Outcome::Ok,
            format!("the setsid'd sleep (own session, parent gone) was stopped with its command (backend {})", backend.name()),
        );
    }
    let unverified = end.get("unverified").is_some() || end.to_string().contains("unverified");
    if unverified && !backend.finds_every_process() {
        Check::new(
            "escapee",
            G,
            Outcome::Limit,
            format!(
                "the escapee survived (pids {:?}, killed by the self-test) and the stop's final event said it could not look (`unverified`), as documented for backend {}",
                pids(&left),
                backend.name()
            ),
        )
        .fix("use the linux backend where you can (unset WAKEFUL_PLATFORM); elsewhere stop what a command detached yourself")
    } else {
        Check::new(
            "escapee",
            G,
            Outcome::Failed,
            format!(
                "after the stop's final event, pids {:?} are left and the stop did not say so",
                pids(&left)
            ),
        )
        .fix(BUG)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: i32, ppid: i32, state: char) -> ProcInfo {
        ProcInfo {
            pid,
            ppid,
            pgrp: 7,
            state,
            start_ticks: 0,
        }
    }

    #[test]
    fn a_live_process_is_a_survivor() {
        assert_eq!(judge_left(&[p(10, 1, 'S')], 5, false), Left::Survivors);
        assert_eq!(
            judge_left(&[p(10, 1, 'Z'), p(11, 1, 'S')], 5, false),
            Left::Survivors
        );
    }

    #[test]
    fn a_zombie_the_daemon_should_reap_is_a_survivor() {
        assert_eq!(judge_left(&[p(10, 5, 'Z')], 5, false), Left::Survivors);
        // A subreaper daemon reaps every orphan.
        assert_eq!(judge_left(&[p(10, 1, 'Z')], 5, true), Left::Survivors);
    }

    #[test]
    fn zombies_left_to_init_without_a_subreaper_are_a_limit() {
        let left = [p(10, 1, 'Z'), p(11, 1, 'Z')];
        assert_eq!(judge_left(&left, 5, false), Left::Zombies { init: 1 });
    }
}
