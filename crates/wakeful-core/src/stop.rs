//! Stopping a command and everything it started, as a pure state machine
//! (docs/CONTRACT.md §4 "Stopping"): SIGTERM to every process of the monitor, a grace
//! period, SIGKILL to whatever is still alive, a bounded wait, and an honest
//! report of the processes that survived even that.
//!
//! The IO edge lists the monitor's live processes (its process group, its
//! process tree, orphans that carry its marker, its container), calls
//! [`StopPlan::step`] with that list and the current time, sends the signal
//! the step asks for, and calls again when the step says. Processes that
//! appear during the stop (a child forking while it is being terminated)
//! get the signal of the current phase at the next step.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How long to wait after SIGKILL before calling the rest survivors.
pub const KILL_WAIT: Duration = Duration::from_secs(1);
/// First pause between checks; doubles up to [`MAX_PAUSE`].
pub const MIN_PAUSE: Duration = Duration::from_millis(2);
/// Longest pause between checks.
pub const MAX_PAUSE: Duration = Duration::from_millis(50);

/// Which signal a step asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM: please stop.
    Term,
    /// SIGKILL: stop now.
    Kill,
}

/// What to do after one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Call [`StopPlan::step`] again at this time (or when something
    /// changes, whichever comes first).
    CheckAt(Instant),
    /// Stopping is over; these processes survived SIGKILL (normally none).
    Done {
        /// Their pids.
        survivors: Vec<i32>,
    },
}

/// One step's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Send this signal to these processes (and to the process group).
    pub signal: Option<(Signal, Vec<i32>)>,
    /// What comes next.
    pub next: Next,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Term { since: Instant },
    Kill { since: Instant },
    Done,
}

/// The stop of one monitor's processes; see the module docs.
#[derive(Debug, Clone)]
pub struct StopPlan {
    grace: Duration,
    kill_wait: Duration,
    phase: Phase,
    pause: Duration,
    /// Processes already sent the current phase's signal.
    signalled: BTreeSet<i32>,
}

impl StopPlan {
    /// A stop with `grace` between SIGTERM and SIGKILL.
    pub fn new(grace: Duration) -> Self {
        Self::with_kill_wait(grace, KILL_WAIT)
    }

    /// Like [`StopPlan::new`], waiting `kill_wait` after SIGKILL.
    pub fn with_kill_wait(grace: Duration, kill_wait: Duration) -> Self {
        StopPlan {
            grace,
            kill_wait,
            phase: Phase::Start,
            pause: MIN_PAUSE,
            signalled: BTreeSet::new(),
        }
    }

    /// Whether SIGKILL was sent.
    pub fn killed(&self) -> bool {
        matches!(self.phase, Phase::Kill { .. })
    }

    /// One step, given the processes of the monitor alive at `now`.
    pub fn step(&mut self, now: Instant, live: &[i32]) -> Step {
        if self.phase == Phase::Done {
            return Step {
                signal: None,
                next: Next::Done {
                    survivors: Vec::new(),
                },
            };
        }
        if live.is_empty() && self.phase != Phase::Start {
            self.phase = Phase::Done;
            return Step {
                signal: None,
                next: Next::Done {
                    survivors: Vec::new(),
                },
            };
        }
        let mut signal = None;
        match self.phase {
            Phase::Start => {
                self.phase = Phase::Term { since: now };
                if live.is_empty() {
                    self.phase = Phase::Done;
                    return Step {
                        signal: None,
                        next: Next::Done {
                            survivors: Vec::new(),
                        },
                    };
                }
                self.signalled = live.iter().copied().collect();
                signal = Some((Signal::Term, live.to_vec()));
            }
            Phase::Term { since } if now >= since + self.grace => {
                self.phase = Phase::Kill { since: now };
                self.pause = MIN_PAUSE;
                self.signalled = live.iter().copied().collect();
                signal = Some((Signal::Kill, live.to_vec()));
            }
            Phase::Kill { since } if now >= since + self.kill_wait => {
                self.phase = Phase::Done;
                let mut survivors = live.to_vec();
                survivors.sort_unstable();
                survivors.dedup();
                return Step {
                    signal: None,
                    next: Next::Done { survivors },
                };
            }
            Phase::Term { .. } | Phase::Kill { .. } => {
                let sig = if self.killed() {
                    Signal::Kill
                } else {
                    Signal::Term
                };
                let new: Vec<i32> = live
                    .iter()
                    .copied()
                    .filter(|p| self.signalled.insert(*p))
                    .collect();
                if !new.is_empty() {
                    signal = Some((sig, new));
                }
            }
            Phase::Done => {}
        }
        let deadline = match self.phase {
            Phase::Term { since } => since + self.grace,
            Phase::Kill { since } => since + self.kill_wait,
            _ => now,
        };
        let at = (now + self.pause).min(deadline);
        self.pause = (self.pause * 2).min(MAX_PAUSE);
        Step {
            signal,
            next: Next::CheckAt(at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_millis(700);

    #[test]
    fn nothing_alive_is_done_at_once() {
        let t0 = Instant::now();
        let mut p = StopPlan::new(GRACE);
        let s = p.step(t0, &[]);
        assert_eq!(s.signal, None);
        assert_eq!(s.next, Next::Done { survivors: vec![] });
    }

    #[test]
    fn term_then_done_when_they_leave() {
        let t0 = Instant::now();
        let mut p = StopPlan::new(GRACE);
        let s = p.step(t0, &[10, 11]);
        assert_eq!(s.signal, Some((Signal::Term, vec![10, 11])));
        let Next::CheckAt(at) = s.next else {
            panic!("{s:?}")
        };
        assert_eq!(at, t0 + MIN_PAUSE);
        // Still there: no second SIGTERM, later checks back off.
        let s = p.step(at, &[10, 11]);
        assert_eq!(s.signal, None);
        assert_eq!(s.next, Next::CheckAt(at + MIN_PAUSE * 2));
        let s = p.step(at + MIN_PAUSE * 2, &[]);
        assert_eq!(s.next, Next::Done { survivors: vec![] });
    }

    #[test]
    fn a_process_born_during_the_stop_gets_the_signal_too() {
        let t0 = Instant::now();
        let mut p = StopPlan::new(GRACE);
        p.step(t0, &[10]);
        let s = p.step(t0 + MIN_PAUSE, &[10, 12]);
        assert_eq!(s.signal, Some((Signal::Term, vec![12])));
    }

    #[test]
    fn kill_after_grace_then_survivors_are_reported() {
        let t0 = Instant::now();
        let mut p = StopPlan::new(GRACE);
        p.step(t0, &[10, 11]);
        // Checks never go past the grace deadline.
        let mut t = t0;
        loop {
            let s = p.step(t, &[10, 11]);
            match s.next {
                Next::CheckAt(at) => {
                    if s.signal.is_some() {
                        assert_eq!(s.signal, Some((Signal::Kill, vec![10, 11])));
                        assert_eq!(t, t0 + GRACE);
                        break;
                    }
                    assert!(at <= t0 + GRACE);
                    t = at;
                }
                Next::Done { .. } => panic!("done too early"),
            }
        }
        assert!(p.killed());
        // 11 dies, 10 is stuck (uninterruptible sleep): reported after the wait.
        let s = p.step(t + Duration::from_millis(100), &[10]);
        assert_eq!(s.signal, None);
        let s = p.step(t + KILL_WAIT, &[10]);
        assert_eq!(
            s.next,
            Next::Done {
                survivors: vec![10]
            }
        );
    }

    #[test]
    fn a_late_child_during_kill_gets_sigkill() {
        let t0 = Instant::now();
        let mut p = StopPlan::new(Duration::ZERO);
        p.step(t0, &[10]);
        let s = p.step(t0, &[10]);
        assert_eq!(s.signal, Some((Signal::Kill, vec![10])));
        let s = p.step(t0 + MIN_PAUSE, &[10, 13]);
        assert_eq!(s.signal, Some((Signal::Kill, vec![13])));
    }
}
