//! Per-monitor rate limiting (docs/CONTRACT.md §4 "Rate limit").
//!
//! A token bucket (burst [`BURST`], refilled at one token per second) admits
//! `lines` events. Over the limit the gate enters *suppression*: lines are
//! counted, never delivered, and reported by `suppressed` reports that carry
//! the exact count and the output-file line range.
//!
//! Reports are spaced at least [`REPORT_INTERVAL`] apart. The first one goes
//! out at once; later ones when the interval has passed. Suppression ends only
//! at a report time when a token is available again; that report is the final
//! one for the episode, so every report covers a contiguous range of lines of
//! which none was delivered. At the end of a monitor, whatever is still
//! counted is reported ([`RateGate::finish`]). Suppression is never silent and
//! never stops the monitor.

use std::time::{Duration, Instant};

/// Events the bucket holds when full.
pub const BURST: u32 = 20;
/// Time to refill one token.
pub const REFILL: Duration = Duration::from_secs(1);
/// Minimum spacing of `suppressed` reports.
pub const REPORT_INTERVAL: Duration = Duration::from_secs(5);

/// A suppressed range of lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Suppressed {
    /// Exact number of lines.
    pub count: u64,
    /// First output-file line of the range.
    pub from_line: u64,
    /// Last output-file line of the range.
    pub to_line: u64,
}

/// The gate's verdict on one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admit {
    /// Deliver the batch; before it, emit this final report if present.
    Deliver(Option<Suppressed>),
    /// The batch is counted as suppressed; emit this report now if present.
    Suppress(Option<Suppressed>),
}

/// The token bucket plus suppression accounting; see the module docs.
#[derive(Debug)]
pub struct RateGate {
    /// Tokens in units of 1/1000 token.
    millitokens: u64,
    last_refill: Instant,
    suppressing: bool,
    pending: Option<Suppressed>,
    last_report: Option<Instant>,
}

impl RateGate {
    /// A full bucket at `now`.
    pub fn new(now: Instant) -> Self {
        RateGate {
            millitokens: u64::from(BURST) * 1000,
            last_refill: now,
            suppressing: false,
            pending: None,
            last_report: None,
        }
    }

    fn refill(&mut self, now: Instant) {
        // One millitoken per millisecond: REFILL is one second.
        let full = u64::from(BURST) * 1000;
        let ms = now.saturating_duration_since(self.last_refill).as_millis() as u64;
        if ms == 0 {
            return;
        }
        self.millitokens = (self.millitokens + ms).min(full);
        self.last_refill = if self.millitokens == full {
            now
        } else {
            self.last_refill + Duration::from_millis(ms)
        };
    }

    fn report_allowed(&self, now: Instant) -> bool {
        self.last_report
            .is_none_or(|last| now.saturating_duration_since(last) >= REPORT_INTERVAL)
    }

    fn take_report(&mut self, now: Instant) -> Option<Suppressed> {
        let r = self.pending.take();
        if r.is_some() {
            self.last_report = Some(now);
        }
        r
    }

    fn take_token(&mut self) -> bool {
        if self.millitokens >= 1000 {
            self.millitokens -= 1000;
            true
        } else {
            false
        }
    }

    /// Whether the gate is suppressing lines now.
    pub fn is_suppressing(&self) -> bool {
        self.suppressing
    }

    /// Whether a batch offered now would be suppressed: the gate is
    /// suppressing and will not end it now. Lets a source count a flood in
    /// bulk instead of line by line.
    pub fn would_suppress(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.suppressing && !(self.report_allowed(now) && self.millitokens >= 1000)
    }

    /// Offers a batch of `count` lines spanning output-file lines
    /// `from_line..=to_line`.
    pub fn admit(&mut self, now: Instant, count: u64, from_line: u64, to_line: u64) -> Admit {
        self.refill(now);
        let mut final_report = None;
        if self.suppressing && self.report_allowed(now) && self.millitokens >= 1000 {
            final_report = self.take_report(now);
            self.suppressing = false;
        }
        if !self.suppressing && self.take_token() {
            return Admit::Deliver(final_report);
        }
        self.suppressing = true;
        let p = self.pending.get_or_insert(Suppressed {
            count: 0,
            from_line,
            to_line,
        });
        p.count += count;
        p.to_line = to_line;
        let report = if self.report_allowed(now) {
            self.take_report(now)
        } else {
            None
        };
        Admit::Suppress(report)
    }

    /// When [`RateGate::on_deadline`] must be called, if at all: the next
    /// time a held report may go out.
    pub fn next_deadline(&self) -> Option<Instant> {
        match (self.pending, self.last_report) {
            (Some(_), Some(last)) => Some(last + REPORT_INTERVAL),
            (Some(_), None) => Some(self.last_refill),
            _ => None,
        }
    }

    /// Emits a held report when its time has come; ends suppression when a
    /// token is available again.
    pub fn on_deadline(&mut self, now: Instant) -> Option<Suppressed> {
        if !self.report_allowed(now) {
            return None;
        }
        self.refill(now);
        let report = self.take_report(now);
        if self.millitokens >= 1000 {
            self.suppressing = false;
        }
        report
    }

    /// The monitor ends: whatever is still counted must be reported.
    pub fn finish(&mut self, now: Instant) -> Option<Suppressed> {
        self.suppressing = false;
        self.take_report(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn burst_of_20_then_suppression_reported_at_once() {
        let t0 = Instant::now();
        let mut g = RateGate::new(t0);
        for i in 0..20 {
            assert_eq!(
                g.admit(t0, 1, i + 1, i + 1),
                Admit::Deliver(None),
                "event {i}"
            );
        }
        let r = g.admit(t0, 5, 21, 25);
        assert_eq!(
            r,
            Admit::Suppress(Some(Suppressed {
                count: 5,
                from_line: 21,
                to_line: 25
            }))
        );
        assert!(g.is_suppressing());
        // More lines within 5 s are counted, not reported yet.
        assert_eq!(g.admit(t0 + 100 * MS, 10, 26, 35), Admit::Suppress(None));
        assert_eq!(g.admit(t0 + 2 * S, 10, 36, 45), Admit::Suppress(None));
        assert_eq!(g.next_deadline(), Some(t0 + 5 * S));
        assert_eq!(g.on_deadline(t0 + 4 * S), None);
        // At 5 s the held report goes out; tokens have refilled, so it ends.
        assert_eq!(
            g.on_deadline(t0 + 5 * S),
            Some(Suppressed {
                count: 20,
                from_line: 26,
                to_line: 45
            })
        );
        assert!(!g.is_suppressing());
        assert_eq!(g.admit(t0 + 5 * S, 1, 46, 46), Admit::Deliver(None));
    }

    #[test]
    fn sustained_flood_reports_at_most_every_5_s_and_counts_exactly() {
        let t0 = Instant::now();
        let mut g = RateGate::new(t0);
        let (mut delivered, mut suppressed, mut reports) = (0u64, 0u64, vec![]);
        let mut line = 1u64;
        // 50-line batches every 10 ms for 60 s.
        for step in 0..6000u64 {
            let now = t0 + Duration::from_millis(step * 10);
            if let Some(r) = g
                .next_deadline()
                .filter(|d| *d <= now)
                .and_then(|_| g.on_deadline(now))
            {
                suppressed += r.count;
                reports.push((now, r));
            }
            match g.admit(now, 50, line, line + 49) {
                Admit::Deliver(r) => {
                    if let Some(r) = r {
                        suppressed += r.count;
                        reports.push((now, r));
                    }
                    delivered += 50;
                }
                Admit::Suppress(r) => {
                    if let Some(r) = r {
                        suppressed += r.count;
                        reports.push((now, r));
                    }
                }
            }
            line += 50;
        }
        if let Some(r) = g.finish(t0 + 60 * S) {
            suppressed += r.count;
            reports.push((t0 + 60 * S, r));
        }
        assert_eq!(delivered + suppressed, 6000 * 50);
        // 20 burst + about one token per second.
        assert!(delivered / 50 <= 20 + 61, "{}", delivered / 50);
        for pair in reports.windows(2) {
            assert!(pair[1].0 - pair[0].0 >= REPORT_INTERVAL || pair[1].0 == t0 + 60 * S);
            // Ranges are contiguous and never overlap.
            assert!(pair[1].1.from_line > pair[0].1.to_line);
        }
        for (_, r) in &reports {
            assert!(r.count <= r.to_line - r.from_line + 1);
        }
    }

    #[test]
    fn finish_reports_what_is_still_counted() {
        let t0 = Instant::now();
        let mut g = RateGate::new(t0);
        for i in 0..20 {
            g.admit(t0, 1, i, i);
        }
        assert!(matches!(g.admit(t0, 1, 21, 21), Admit::Suppress(Some(_))));
        assert_eq!(g.admit(t0, 3, 22, 24), Admit::Suppress(None));
        assert_eq!(
            g.finish(t0 + MS),
            Some(Suppressed {
                count: 3,
                from_line: 22,
                to_line: 24
            })
        );
        assert_eq!(g.finish(t0 + MS), None);
    }

    #[test]
    fn tokens_refill_one_per_second_up_to_burst() {
        let t0 = Instant::now();
        let mut g = RateGate::new(t0);
        for i in 0..20 {
            g.admit(t0, 1, i, i);
        }
        assert!(matches!(g.admit(t0, 1, 21, 21), Admit::Suppress(_)));
        let t = t0 + 100 * S;
        // After the report interval, the suppression ends with a final report,
        // then the full burst is available again, not more.
        let mut n = 0;
        while let Admit::Deliver(_) = g.admit(t, 1, 100 + n, 100 + n) {
            n += 1;
        }
        assert_eq!(n, 20);
    }
}
