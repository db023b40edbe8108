//! The processes of one command, and stopping all of them.

use std::collections::BTreeSet;
use std::time::Instant;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use wakeful_core::stop::{self, Next, StopPlan};

use super::group::{reap_group_zombies, signal_group};
use super::reaper;
use wakeful_platform::tree::{
    all_processes, children_of, has_env, is_subreaper, proc_info, subtree, Container, ProcInfo,
};

/// The environment marker every process of a command inherits.
pub const MARKER: &str = "WAKEFUL_MONITOR_ID";

/// What a stop of one command must reach: its process group (led by its
/// `sh`), the process tree under that `sh`, orphans that kept its
/// [`MARKER`] or its group (adopted by this process when it is a
/// subreaper; searched in the whole process table otherwise), and its
/// container when it has one.
#[derive(Debug)]
pub struct Target {
    /// Process id of the command's `sh`, which is also its group id.
    pub leader: i32,
    /// The leader's start time (clock ticks after boot): a pid that was
    /// reused by another process is never taken for the leader.
    pub leader_start: u64,
    /// The value of [`MARKER`] in the command's environment.
    pub marker: String,
    /// The command's container, if it has one.
    pub container: Option<Container>,
    /// Every process a stop of it found (for the report of a platform
    /// backend that cannot look everywhere: [`Target::seen`]).
    pub seen: std::sync::Mutex<BTreeSet<i32>>,
}

impl Target {
    /// The processes its stops found so far, in pid order.
    pub fn seen(&self) -> Vec<i32> {
        self.seen
            .lock()
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The live processes of the command now (zombies are dead already).
    pub fn live(&self) -> Vec<i32> {
        let me = std::process::id() as i32;
        let mut found: BTreeSet<i32> = BTreeSet::new();
        let take = |tree: Vec<ProcInfo>, found: &mut BTreeSet<i32>| {
            for p in tree {
                if p.is_live() && p.pid != me {
                    found.insert(p.pid);
                }
            }
        };
        let leader_is_ours = proc_info(self.leader).is_some_and(|p| {
            p.start_ticks == self.leader_start && p.ppid == me && p.pgrp == self.leader
        });
        if leader_is_ours {
            take(subtree(self.leader), &mut found);
        }
        let belongs = |p: &ProcInfo| p.pgrp == self.leader || has_env(p.pid, MARKER, &self.marker);
        if is_subreaper() {
            // Every orphan of the command was reparented to us.
            for pid in children_of(me) {
                if pid == self.leader || reaper::is_managed(pid) {
                    continue;
                }
                if let Some(p) = proc_info(pid) {
                    if belongs(&p) {
                        take(subtree(pid), &mut found);
                    }
                }
            }
        } else {
            for p in all_processes() {
                if p.pid != me && p.is_live() && belongs(&p) {
                    take(subtree(p.pid), &mut found);
                }
            }
        }
        if let Some(cg) = &self.container {
            found.extend(cg.pids().into_iter().filter(|p| *p != me));
        }
        found.into_iter().collect()
    }

    /// Stops every process of the command: SIGTERM, up to `grace` for them
    /// to leave, SIGKILL, up to [`stop::KILL_WAIT`] more. Returns the
    /// processes still alive after that (normally none). Processes that
    /// appear meanwhile get the signal of the moment.
    pub async fn terminate(&self, grace: std::time::Duration) -> Vec<i32> {
        let mut plan = StopPlan::new(grace);
        loop {
            let live = self.live();
            if let Ok(mut seen) = self.seen.lock() {
                seen.extend(live.iter().copied());
            }
            let step = plan.step(Instant::now(), &live);
            if let Some((sig, pids)) = step.signal {
                let sig = match sig {
                    stop::Signal::Term => Signal::SIGTERM,
                    stop::Signal::Kill => Signal::SIGKILL,
                };
                signal_group(self.leader, sig);
                for pid in pids {
                    let _ = kill(Pid::from_raw(pid), sig);
                }
                if sig == Signal::SIGKILL {
                    if let Some(cg) = &self.container {
                        cg.kill();
                    }
                }
            }
            match step.next {
                Next::Done { survivors } => {
                    reap_group_zombies(self.leader);
                    if is_subreaper() {
                        reaper::reap_adopted();
                    }
                    return survivors;
                }
                Next::CheckAt(at) => tokio::time::sleep_until(at.into()).await,
            }
        }
    }
}
