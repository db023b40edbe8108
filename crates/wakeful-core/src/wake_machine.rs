//! Delivering a session's events to its agent as a new turn ("waking" it):
//! the pure decision logic, with the clock passed in.
//!
//! - **Single flight**: at most one wake per session is being delivered.
//! - **Coalescing**: events that arrive while a wake is in flight (or being
//!   retried) join the next wake; one wake carries many events.
//! - **Retry**: a refused delivery (busy agent, HTTP error, transport error)
//!   is retried with backoff, 1 s doubling to 60 s, with the same range of
//!   events and the same wake id, for up to 15 minutes. Then the wake is
//!   marked *undelivered*; its events stay unacknowledged and are part of the
//!   next wake, which starts when new events arrive.
//! - A delivery that fails for good (a command that cannot run, a 4xx answer)
//!   is undelivered at once.
//! - **Queued**: the agent holds the message in a durable queue of its own
//!   but has not started the turn that carries it yet (a busy Codex thread,
//!   or Codex not running). The wake is neither refused nor lost, so it is
//!   never sent again as new and never given up: the same wake is checked
//!   again with the retry backoff until the agent starts its turn
//!   (accepted), fails for good, or the route changes. Events that arrive
//!   meanwhile wait for the next wake, as with any wake in flight.
//! - The consumer's cursor moves only when a delivery was accepted.
//!
//! The wake id is derived from the range of events it carries
//! (`wake-<from>-<to>`), so every retry of a wake, even across a daemon
//! restart, carries the same id and an agent can recognise a duplicate.

use std::time::{Duration, Instant};

/// First retry delay.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// Longest retry delay.
pub const RETRY_MAX: Duration = Duration::from_secs(60);
/// How long a wake is retried before it is marked undelivered.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(15 * 60);

/// What the IO edge must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WakeAction {
    /// Deliver events `from..=to` (their seqs) as wake `wake_id`.
    Deliver {
        /// The wake id.
        wake_id: String,
        /// First seq (exclusive lower bound + 1).
        from: u64,
        /// Last seq.
        to: u64,
        /// 1 for the first attempt.
        attempt: u32,
    },
    /// The delivery was accepted: acknowledge up to `seq`.
    Ack {
        /// Last delivered seq.
        seq: u64,
    },
}

/// How a delivery attempt went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The agent accepted the message (for Codex: started the turn that
    /// carries it).
    Accepted,
    /// The agent holds the message durably but has not started the turn
    /// that carries it (or that cannot be seen yet): check again later, with
    /// the same wake, without giving up.
    Queued(String),
    /// Refused for now (busy, HTTP 429/5xx, transport error): retry. Once a
    /// wake was queued, a refusal only means it cannot be checked right now.
    Refused(String),
    /// Failed for good (cannot run, rejected): no retry.
    Failed(String),
}

/// A wake as `wake show` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WakeState {
    /// Nothing to deliver.
    Idle,
    /// A delivery is in progress.
    Delivering {
        /// The wake.
        wake_id: String,
    },
    /// Waiting to retry a refused delivery.
    Retrying {
        /// The wake.
        wake_id: String,
        /// Attempts so far.
        attempts: u32,
        /// When the next attempt is due.
        next_at: Instant,
        /// Why the last attempt was refused.
        last_error: String,
    },
    /// The agent holds the wake in its queue; waiting for the turn that
    /// carries it to start.
    Queued {
        /// The wake.
        wake_id: String,
        /// Checks so far.
        checks: u32,
        /// When the next check is due.
        next_at: Instant,
        /// What the last check found.
        detail: String,
    },
    /// Given up; its events wait for the next wake.
    Undelivered {
        /// The wake.
        wake_id: String,
        /// Why.
        reason: String,
        /// Events that were not delivered.
        events_from: u64,
        /// Last of them.
        events_to: u64,
    },
}

#[derive(Debug, Clone)]
struct Flight {
    from: u64,
    to: u64,
    attempt: u32,
    first_at: Instant,
    next_at: Option<Instant>,
    last_error: String,
    /// Since when the agent holds the wake (an `Outcome::Queued` came).
    queued_at: Option<Instant>,
}

/// The per-session wake state machine; see the module docs.
#[derive(Debug)]
pub struct WakeMachine {
    acked: u64,
    latest: u64,
    flight: Option<Flight>,
    undelivered: Option<(String, String, u64, u64)>,
}

/// The id of the wake carrying events `from..=to`.
pub fn wake_id(from: u64, to: u64) -> String {
    format!("wake-{from}-{to}")
}

/// The delay before retry number `attempt` (2 for the first retry).
pub fn backoff(attempt: u32) -> Duration {
    let shift = attempt.saturating_sub(2).min(16);
    (RETRY_FIRST * 2u32.pow(shift)).min(RETRY_MAX)
}

impl WakeMachine {
    /// A machine whose consumer acknowledged up to `acked`.
    pub fn new(acked: u64) -> Self {
        WakeMachine {
            acked,
            latest: acked,
            flight: None,
            undelivered: None,
        }
    }

    /// The last acknowledged seq.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// Events up to `latest` exist for the session.
    pub fn on_events(&mut self, now: Instant, latest: u64) -> Vec<WakeAction> {
        if latest > self.latest {
            self.latest = latest;
        }
        self.start_next(now)
    }

    fn start_next(&mut self, now: Instant) -> Vec<WakeAction> {
        if self.flight.is_some() || self.latest <= self.acked {
            return vec![];
        }
        // An undelivered wake is retried only together with newer events.
        if let Some((_, _, _, to)) = &self.undelivered {
            if self.latest <= *to {
                return vec![];
            }
        }
        let (from, to) = (self.acked + 1, self.latest);
        self.flight = Some(Flight {
            from,
            to,
            attempt: 1,
            first_at: now,
            next_at: None,
            last_error: String::new(),
            queued_at: None,
        });
        vec![WakeAction::Deliver {
            wake_id: wake_id(from, to),
            from,
            to,
            attempt: 1,
        }]
    }

    /// How the delivery in flight went.
    pub fn on_outcome(&mut self, now: Instant, outcome: Outcome) -> Vec<WakeAction> {
        let Some(mut f) = self.flight.take() else {
            return vec![];
        };
        match outcome {
            Outcome::Accepted => {
                self.acked = self.acked.max(f.to);
                self.undelivered = None;
                let mut actions = vec![WakeAction::Ack { seq: f.to }];
                actions.extend(self.start_next(now));
                actions
            }
            Outcome::Failed(reason) => {
                self.undelivered = Some((wake_id(f.from, f.to), reason, f.from, f.to));
                vec![]
            }
            Outcome::Queued(detail) => {
                f.queued_at.get_or_insert(now);
                self.check_again(now, f, detail);
                vec![]
            }
            Outcome::Refused(reason) if f.queued_at.is_some() => {
                // The agent still holds it: a failed check is no reason to
                // give up or to send it again.
                self.check_again(now, f, format!("cannot check the queued wake: {reason}"));
                vec![]
            }
            Outcome::Refused(reason) => {
                if now.saturating_duration_since(f.first_at) >= GIVE_UP_AFTER {
                    self.undelivered = Some((
                        wake_id(f.from, f.to),
                        format!("still refused after 15 minutes: {reason}"),
                        f.from,
                        f.to,
                    ));
                    return vec![];
                }
                f.attempt += 1;
                let next = now + backoff(f.attempt);
                // Never retry after the give-up time has passed by much.
                f.next_at = Some(next.min(f.first_at + GIVE_UP_AFTER).max(now));
                f.last_error = reason;
                self.flight = Some(f);
                vec![]
            }
        }
    }

    /// Schedules another check of a queued wake (the retry backoff, no
    /// give-up).
    fn check_again(&mut self, now: Instant, mut f: Flight, detail: String) {
        f.attempt += 1;
        f.next_at = Some(now + backoff(f.attempt));
        f.last_error = detail;
        self.flight = Some(f);
    }

    /// When [`WakeMachine::on_tick`] has work.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.flight.as_ref().and_then(|f| f.next_at)
    }

    /// A retry is due: deliver the same wake again.
    pub fn on_tick(&mut self, now: Instant) -> Vec<WakeAction> {
        match &mut self.flight {
            Some(f) if f.next_at.is_some_and(|t| t <= now) => {
                f.next_at = None;
                vec![WakeAction::Deliver {
                    wake_id: wake_id(f.from, f.to),
                    from: f.from,
                    to: f.to,
                    attempt: f.attempt,
                }]
            }
            _ => vec![],
        }
    }

    /// What `wake show` says.
    pub fn state(&self) -> WakeState {
        match (&self.flight, &self.undelivered) {
            (Some(f), _) => match f.next_at {
                Some(next_at) if f.queued_at.is_some() => WakeState::Queued {
                    wake_id: wake_id(f.from, f.to),
                    checks: f.attempt - 1,
                    next_at,
                    detail: f.last_error.clone(),
                },
                Some(next_at) => WakeState::Retrying {
                    wake_id: wake_id(f.from, f.to),
                    attempts: f.attempt - 1,
                    next_at,
                    last_error: f.last_error.clone(),
                },
                None => WakeState::Delivering {
                    wake_id: wake_id(f.from, f.to),
                },
            },
            (None, Some((id, reason, from, to))) => WakeState::Undelivered {
                wake_id: id.clone(),
                reason: reason.clone(),
                events_from: *from,
                events_to: *to,
            },
            (None, None) => WakeState::Idle,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn deliver(actions: &[WakeAction]) -> Option<(u64, u64, u32)> {
        actions.iter().find_map(|a| match a {
            WakeAction::Deliver {
                from, to, attempt, ..
            } => Some((*from, *to, *attempt)),
            _ => None,
        })
    }

    #[test]
    fn single_flight_and_coalescing() {
        let t0 = Instant::now();
        let mut m = WakeMachine::new(10);
        assert_eq!(deliver(&m.on_events(t0, 12)), Some((11, 12, 1)));
        // More events while in flight: no second delivery.
        assert!(m.on_events(t0, 15).is_empty());
        assert!(m.on_events(t0, 17).is_empty());
        // Accepted: ack, then one wake with everything that came meanwhile.
        let a = m.on_outcome(t0 + S, Outcome::Accepted);
        assert_eq!(a[0], WakeAction::Ack { seq: 12 });
        assert_eq!(deliver(&a), Some((13, 17, 1)));
        let a = m.on_outcome(t0 + S, Outcome::Accepted);
        assert_eq!(a, vec![WakeAction::Ack { seq: 17 }]);
        assert_eq!(m.state(), WakeState::Idle);
        assert_eq!(m.acked(), 17);
    }

    #[test]
    fn backoff_doubles_from_1s_to_60s() {
        let delays: Vec<u64> = (2..=10).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }

    #[test]
    fn refused_wakes_are_retried_with_the_same_id_then_given_up_after_15_minutes() {
        let t0 = Instant::now();
        let mut m = WakeMachine::new(0);
        let first = m.on_events(t0, 3);
        assert_eq!(
            first,
            vec![WakeAction::Deliver {
                wake_id: "wake-1-3".into(),
                from: 1,
                to: 3,
                attempt: 1
            }]
        );
        let mut now = t0;
        let mut attempts: u32 = 1;
        let mut gaps = vec![];
        loop {
            let a = m.on_outcome(now, Outcome::Refused("busy".into()));
            assert!(a.is_empty());
            match m.next_deadline() {
                Some(next) => {
                    gaps.push((next - now).as_secs());
                    assert!(m.on_tick(next - Duration::from_millis(1)).is_empty());
                    now = next;
                    // New events never enlarge a wake being retried.
                    assert!(m.on_events(now, 3 + u64::from(attempts)).is_empty());
                    let again = m.on_tick(now);
                    attempts += 1;
                    assert_eq!(deliver(&again), Some((1, 3, attempts)));
                }
                None => break,
            }
        }
        assert_eq!(&gaps[..8], &[1, 2, 4, 8, 16, 32, 60, 60]);
        assert!(now - t0 >= GIVE_UP_AFTER && now - t0 <= GIVE_UP_AFTER + 60 * S);
        match m.state() {
            WakeState::Undelivered {
                wake_id,
                events_from,
                events_to,
                ..
            } => {
                assert_eq!(
                    (wake_id.as_str(), events_from, events_to),
                    ("wake-1-3", 1, 3)
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(m.acked(), 0, "nothing acknowledged");
        // The next wake starts with new events and carries the old ones too.
        let a = m.on_events(now + S, 3 + u64::from(attempts) + 1);
        let (from, to, attempt) = deliver(&a).unwrap();
        assert_eq!((from, attempt), (1, 1));
        assert!(to > 3);
    }

    #[test]
    fn a_failure_is_undelivered_at_once_and_waits_for_new_events() {
        let t0 = Instant::now();
        let mut m = WakeMachine::new(0);
        m.on_events(t0, 2);
        assert!(m
            .on_outcome(t0, Outcome::Failed("no such binary".into()))
            .is_empty());
        assert!(matches!(m.state(), WakeState::Undelivered { .. }));
        assert_eq!(m.next_deadline(), None);
        assert!(m.on_events(t0, 2).is_empty());
        assert_eq!(deliver(&m.on_events(t0, 3)), Some((1, 3, 1)));
    }

    #[test]
    fn a_queued_wake_is_checked_again_with_backoff_and_never_given_up() {
        let t0 = Instant::now();
        let mut m = WakeMachine::new(0);
        assert_eq!(deliver(&m.on_events(t0, 3)), Some((1, 3, 1)));
        let mut now = t0;
        let mut gaps = vec![];
        // Two hours of a busy agent: checked again and again, same wake.
        while now - t0 < Duration::from_secs(2 * 3600) {
            let a = m.on_outcome(now, Outcome::Queued("behind a running turn".into()));
            assert!(a.is_empty());
            let next = m.next_deadline().expect("another check is due");
            gaps.push((next - now).as_secs());
            match m.state() {
                WakeState::Queued {
                    wake_id, detail, ..
                } => {
                    assert_eq!(wake_id, "wake-1-3");
                    assert_eq!(detail, "behind a running turn");
                }
                other => panic!("{other:?}"),
            }
            now = next;
            // New events wait: they never enlarge the queued wake.
            assert!(m.on_events(now, 9).is_empty());
            let (from, to, _) = deliver(&m.on_tick(now)).expect("a check");
            assert_eq!((from, to), (1, 3));
        }
        assert_eq!(&gaps[..8], &[1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(m.acked(), 0);
        // The turn that carries it started: acked, and the events that came
        // meanwhile go out as the next wake.
        let a = m.on_outcome(now, Outcome::Accepted);
        assert_eq!(a[0], WakeAction::Ack { seq: 3 });
        assert_eq!(deliver(&a), Some((4, 9, 1)));
    }

    #[test]
    fn once_queued_a_refused_check_keeps_waiting_and_a_failure_gives_up() {
        let t0 = Instant::now();
        let mut m = WakeMachine::new(0);
        m.on_events(t0, 2);
        m.on_outcome(t0, Outcome::Queued("queued".into()));
        // Far past the give-up time, a check that cannot be made is not a
        // reason to give up a wake the agent holds.
        let later = t0 + GIVE_UP_AFTER * 2;
        deliver(&m.on_tick(later)).unwrap();
        assert!(m
            .on_outcome(later, Outcome::Refused("socket gone".into()))
            .is_empty());
        match m.state() {
            WakeState::Queued { detail, checks, .. } => {
                assert!(detail.contains("socket gone"), "{detail}");
                assert_eq!(checks, 2);
            }
            other => panic!("{other:?}"),
        }
        let next = m.next_deadline().unwrap();
        deliver(&m.on_tick(next)).unwrap();
        m.on_outcome(next, Outcome::Failed("thread deleted".into()));
        assert!(matches!(m.state(), WakeState::Undelivered { .. }));
        assert_eq!(m.next_deadline(), None);
        assert_eq!(m.acked(), 0);
    }

    #[test]
    fn a_refused_wake_that_gets_queued_stops_counting_towards_the_give_up() {
        let t0 = Instant::now();
        let mut m = WakeMachine::new(0);
        m.on_events(t0, 1);
        m.on_outcome(t0, Outcome::Refused("busy".into()));
        assert!(matches!(m.state(), WakeState::Retrying { .. }));
        let t1 = t0 + GIVE_UP_AFTER - S;
        deliver(&m.on_tick(t1)).unwrap();
        m.on_outcome(t1, Outcome::Queued("queued".into()));
        let t2 = t0 + GIVE_UP_AFTER * 3;
        deliver(&m.on_tick(t2)).unwrap();
        m.on_outcome(t2, Outcome::Queued("still queued".into()));
        assert!(matches!(m.state(), WakeState::Queued { .. }));
    }
}
