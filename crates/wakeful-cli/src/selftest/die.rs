//! A command dies with a killed daemon (`kill -9` of the scratch daemon),
//! or the limit is reported: what outlived it, and whether the next
//! daemon's recovery ended it.

use std::time::Duration;

use super::scratch::{missing, pids, until, Scratch};
use super::stop::plant_survivor;
use super::{Check, Outcome};

/// `sleep 600 & exec sleep 601`, then SIGKILL to the daemon.
pub fn with_daemon(s: &Scratch, brk: Option<&str>, backend: wakeful_platform::Backend) -> Check {
    const G: &str = "a command dies with a killed daemon";
    if let Some(why) = missing(&["sleep"]) {
        return Check::new("die", G, Outcome::NotChecked, why);
    }
    let word = format!("{}3", s.tag());
    let id = match s.start(&format!("sleep 600.{word} & exec sleep 601.{word}")) {
        Ok(id) => id,
        Err(e) => return Check::new("die", G, Outcome::Failed, e.to_string()),
    };
    let live = || -> Vec<_> {
        s.tagged(&word)
            .into_iter()
            .filter(|p| p.is_live())
            .collect()
    };
    if !until(Duration::from_secs(5), || live().len() >= 2) {
        return Check::new(
            "die",
            G,
            Outcome::Failed,
            format!("monitor {id} did not start its two sleeps"),
        );
    }
    if brk == Some("die") {
        plant_survivor(&word);
    }
    if let Err(e) = s.kill_daemon() {
        return Check::new("die", G, Outcome::NotChecked, e.to_string());
    }
    let mut left = Vec::new();
    if until(Duration::from_secs(2), || {
        left = live();
        left.is_empty()
    }) {
        return Check::new(
            "die",
            G,
            Outcome::Ok,
            "`sleep 600 & exec sleep 601`: both gone within 2 s of SIGKILL to the daemon",
        );
    }
    let outlived = pids(&left);
    // The next daemon (started by this request) ends what the store lists.
    if let Err(e) = s.daemon_pid() {
        return Check::new(
            "die",
            G,
            Outcome::Failed,
            format!("{outlived:?} outlived the daemon, and no next daemon: {e}"),
        );
    }
    if until(Duration::from_secs(5), || {
        left = live();
        left.is_empty()
    }) {
        Check::new(
            "die",
            G,
            Outcome::Limit,
            format!(
                "{} of the command's processes ({outlived:?}) outlived the killed daemon ({}); the next daemon ended them when it started",
                outlived.len(),
                if backend.name() == "linux" {
                    "PR_SET_PDEATHSIG reaches only the process the daemon started; a cgroup, where there is one, is killed only by the next daemon"
                } else {
                    "backend posix: no parent-death signal"
                }
            ),
        )
        .fix("after a daemon crash, run any wakeful command: the next daemon ends what its monitors left")
    } else {
        Check::new(
            "die",
            G,
            Outcome::Failed,
            format!(
                "{outlived:?} outlived the killed daemon, and {:?} still run after the next daemon started",
                pids(&left)
            ),
        )
        .fix("kill them yourself; report it with the output of `wakeful doctor --selftest --json`")
    }
}
