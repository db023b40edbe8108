//! Timers (docs/CONTRACT.md §3, "Timers"): `--in DURATION`, `--at TIME` and
//! `--cron EXPR` read into an absolute deadline, and the pure machine that
//! says when a timer fires ([`TimerMachine`]), with the wall clock and the
//! time zone passed in.
//!
//! The rules:
//! - A deadline is a point on the wall clock (UTC), stored absolute: it
//!   survives a daemon restart and a reboot. A monotonic clock stops while
//!   the machine sleeps, so the engine reads the wall clock again at least
//!   every [`RECHECK`].
//! - A deadline that passed while nothing watched it (no daemon ran, the
//!   machine slept) fires once, as soon as it is seen, and says how late
//!   (when later than [`LATE_AFTER`]).
//! - `--at` reads `HH:MM[:SS]` (today) and `YYYY-MM-DD HH:MM[:SS]` in local
//!   time, or RFC 3339 with its offset. A local time the clocks skip (the
//!   spring-forward gap) is refused; one they pass twice (fall back) is the
//!   first of the two.
//! - A cron expression has five fields (minute hour day-of-month month
//!   day-of-week) in the daemon's local time, DST included. A clock stepped
//!   back never fires an occurrence again; occurrences missed while nothing
//!   watched fire once, together, when next seen.

use std::time::Duration;

use chrono::{
    DateTime, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, TimeZone, Utc,
};

/// The furthest ahead a timer may fall due: 366 days.
pub const MAX_AHEAD: Duration = Duration::from_secs(366 * 24 * 3600);
/// A fire later than this says how late it is.
pub const LATE_AFTER: Duration = Duration::from_secs(2);
/// The longest a timer waits before it reads the wall clock again (a
/// suspend, or a clock stepped, is noticed within this).
pub const RECHECK: Duration = Duration::from_secs(30);

/// Input for a timer that is not accepted. Each message names the flag (and
/// its MCP field), what was wrong and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimerError {
    /// `--in` that is not a duration.
    #[error("--in (in) `{0}` is not a duration: give a number with a unit, e.g. 90s, 20m, 1h30m or 2d (units ms, s, m, h, d)")]
    Duration(String),
    /// `--in 0`.
    #[error("--in (in) must be more than 0 (got `{0}`): a timer falls due later than now")]
    Zero(String),
    /// `--at` that is not a time.
    #[error("--at (at) `{0}` is not a time: give HH:MM[:SS] (today, local time), YYYY-MM-DD HH:MM[:SS] (local time) or RFC 3339 (2026-12-06T15:00:00Z, 2026-12-06T15:00:00+01:00)")]
    At(String),
    /// `--at` in the past.
    #[error("--at (at) {given} was {ago} ago; give a time in the future (with its date for another day: YYYY-MM-DD HH:MM), or a delay with --in (e.g. --in 20m)")]
    Past {
        /// The time as given.
        given: String,
        /// How far in the past, in words.
        ago: String,
    },
    /// A local time the clocks skip.
    #[error("--at (at) {0} does not exist in local time: the clocks go forward over it (daylight saving time); give another time, or RFC 3339 with an offset")]
    Skipped(String),
    /// A deadline too far ahead.
    #[error("the timer would fall due in {0}, beyond the longest accepted (366 days)")]
    TooFar(String),
    /// A cron expression that does not parse.
    #[error("--cron (cron) `{expr}` is not a cron expression ({why}): give five fields, minute hour day-of-month month day-of-week, in local time, e.g. \"*/15 * * * *\" or \"0 9 * * MON-FRI\"")]
    Cron {
        /// The expression as given.
        expr: String,
        /// What the parser said.
        why: String,
    },
    /// A cron expression without an occurrence in the next 366 days.
    #[error("--cron (cron) `{0}` does not fall due within 366 days")]
    CronNever(String),
    /// `--say` without a timer (or a process).
    #[error(
        "--say (say) goes with a timer: --in, --at or --cron (in, at, cron), or with --pid (pid)"
    )]
    SayAlone,
    /// More than one of `--in`, `--at`, `--cron`.
    #[error("give one of --in, --at and --cron (in, at, cron), not several")]
    Several,
}

/// Reads a duration: numbers with units, `90s`, `20m`, `1h30m`, `2d`,
/// `500ms`. Zero is refused, and so is more than [`MAX_AHEAD`].
pub fn parse_duration(text: &str) -> Result<Duration, TimerError> {
    let bad = || TimerError::Duration(text.to_string());
    let s = text.trim();
    if s.is_empty() {
        return Err(bad());
    }
    // A bare number has no unit; only a bare zero says what it means.
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(if s.bytes().all(|b| b == b'0') {
            TimerError::Zero(text.to_string())
        } else {
            bad()
        });
    }
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let n: u128 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let ms_per: u128 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" | "min" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total = total.saturating_add(n.saturating_mul(ms_per));
    }
    if total == 0 {
        return Err(TimerError::Zero(text.to_string()));
    }
    if total > MAX_AHEAD.as_millis() {
        return Err(TimerError::TooFar(human(total)));
    }
    u64::try_from(total)
        .map(Duration::from_millis)
        .map_err(|_| bad())
}

/// Reads `--at`: RFC 3339, or a local `YYYY-MM-DD HH:MM[:SS]` (a `T` in
/// place of the space too), or a local `HH:MM[:SS]` today (in `tz`, as of
/// `now`). A time in the past, or beyond [`MAX_AHEAD`], is refused.
pub fn parse_at<Tz: TimeZone>(
    text: &str,
    now: DateTime<Utc>,
    tz: &Tz,
) -> Result<DateTime<Utc>, TimerError> {
    let s = text.trim();
    let at = if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        t.with_timezone(&Utc)
    } else {
        let naive = local_naive(s, now, tz).ok_or_else(|| TimerError::At(text.to_string()))?;
        match tz.from_local_datetime(&naive) {
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => t.with_timezone(&Utc),
            LocalResult::None => return Err(TimerError::Skipped(text.to_string())),
        }
    };
    check_ahead(at, now).map_err(|e| match e {
        AheadError::Past(ago) => TimerError::Past {
            given: text.to_string(),
            ago,
        },
        AheadError::TooFar(ahead) => TimerError::TooFar(ahead),
    })?;
    Ok(at)
}

fn local_naive<Tz: TimeZone>(s: &str, now: DateTime<Utc>, tz: &Tz) -> Option<NaiveDateTime> {
    let time = |t: &str| {
        NaiveTime::parse_from_str(t, "%H:%M:%S")
            .or_else(|_| NaiveTime::parse_from_str(t, "%H:%M"))
            .ok()
    };
    if let Some((date, t)) = s.split_once([' ', 'T']) {
        let date = NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
        return Some(date.and_time(time(t.trim())?));
    }
    let today = now.with_timezone(tz).date_naive();
    Some(today.and_time(time(s)?))
}

enum AheadError {
    Past(String),
    TooFar(String),
}

fn check_ahead(at: DateTime<Utc>, now: DateTime<Utc>) -> Result<(), AheadError> {
    let ahead = at - now;
    if ahead <= TimeDelta::zero() {
        return Err(AheadError::Past(human(
            (-ahead).num_milliseconds().unsigned_abs().into(),
        )));
    }
    if ahead.to_std().is_ok_and(|d| d > MAX_AHEAD) {
        return Err(AheadError::TooFar(human(
            ahead.num_milliseconds().unsigned_abs().into(),
        )));
    }
    Ok(())
}

/// A cron expression read: five fields, no seconds.
pub fn parse_cron(expr: &str) -> Result<croner::Cron, TimerError> {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| TimerError::Cron {
            expr: expr.to_string(),
            why: e.to_string(),
        })
}

/// The first occurrence of `cron` after `after`, in `tz`; `None` when there
/// is none within [`MAX_AHEAD`].
pub fn next_occurrence<Tz: TimeZone>(
    cron: &croner::Cron,
    after: DateTime<Utc>,
    tz: &Tz,
) -> Option<DateTime<Utc>> {
    let next = cron
        .find_next_occurrence(&after.with_timezone(tz), false)
        .ok()?
        .with_timezone(&Utc);
    let limit = after + TimeDelta::from_std(MAX_AHEAD).ok()?;
    (next <= limit).then_some(next)
}

/// A timer's first deadline and its cron expression.
pub type Deadline = (DateTime<Utc>, Option<String>);

/// The timer that `--in`, `--at` or `--cron` names (at most one may be
/// given), as of `now` in `tz`: its first deadline and its cron expression.
/// `Ok(None)` when none is given.
pub fn deadline_of<Tz: TimeZone>(
    in_: Option<&str>,
    at: Option<&str>,
    cron: Option<&str>,
    now: DateTime<Utc>,
    tz: &Tz,
) -> Result<Option<Deadline>, TimerError> {
    match (in_, at, cron) {
        (None, None, None) => Ok(None),
        (Some(d), None, None) => {
            let d = TimeDelta::from_std(parse_duration(d)?)
                .map_err(|_| TimerError::Duration(d.to_string()))?;
            Ok(Some((now + d, None)))
        }
        (None, Some(at), None) => Ok(Some((parse_at(at, now, tz)?, None))),
        (None, None, Some(expr)) => {
            let parsed = parse_cron(expr)?;
            let first = next_occurrence(&parsed, now, tz)
                .ok_or_else(|| TimerError::CronNever(expr.to_string()))?;
            Ok(Some((first, Some(expr.to_string()))))
        }
        _ => Err(TimerError::Several),
    }
}

/// A fire: the deadline it was for, and how late it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fire {
    /// The deadline.
    pub due: DateTime<Utc>,
    /// How long after the deadline it fired.
    pub late: Duration,
    /// Further occurrences of a cron timer that passed unseen with it.
    pub missed: u64,
    /// Whether the timer is done (a one-shot timer after its fire).
    pub last: bool,
}

impl Fire {
    /// What the event says: `timer fired (due …)` and, when it is late,
    /// how late and why it can be.
    pub fn text(&self) -> String {
        let mut text = format!(
            "timer fired (due {})",
            self.due.format("%Y-%m-%d %H:%M:%S UTC")
        );
        if self.late > LATE_AFTER {
            text.push_str(&format!(
                ", {} late: no daemon ran or the machine slept when it fell due",
                human(self.late.as_millis())
            ));
        }
        if self.missed > 0 {
            text.push_str(&format!(
                "; {} earlier occurrence{} passed unseen with it",
                self.missed,
                if self.missed == 1 { "" } else { "s" }
            ));
        }
        text
    }

    /// The lateness in whole milliseconds.
    pub fn late_ms(&self) -> u64 {
        u64::try_from(self.late.as_millis()).unwrap_or(u64::MAX)
    }
}

/// When a timer fires: a one-shot deadline, or the occurrences of a cron
/// expression. Pure: the wall clock comes with each call.
#[derive(Debug, Clone)]
pub struct TimerMachine<Tz: TimeZone> {
    next: Option<DateTime<Utc>>,
    cron: Option<croner::Cron>,
    tz: Tz,
}

impl<Tz: TimeZone> TimerMachine<Tz> {
    /// A timer due at `due`; with `cron`, again at each later occurrence.
    /// A cron timer armed again after `due` (a daemon restart) goes on
    /// from its next occurrence after `now`: what passed while no daemon
    /// ran is not made up (as cron(8) does), but a one-shot deadline that
    /// passed fires at once, late.
    pub fn new(
        due: DateTime<Utc>,
        cron: Option<&str>,
        now: DateTime<Utc>,
        tz: Tz,
    ) -> Result<Self, TimerError> {
        let cron = cron.map(parse_cron).transpose()?;
        let next = match &cron {
            Some(c) if due < now => next_occurrence(c, now, &tz),
            _ => Some(due),
        };
        Ok(TimerMachine { next, cron, tz })
    }

    /// The next deadline; `None` once a one-shot timer fired.
    pub fn next_due(&self) -> Option<DateTime<Utc>> {
        self.next
    }

    /// How long to wait before calling [`TimerMachine::poll`] again: until
    /// the deadline, but never more than [`RECHECK`]; `None` when done.
    pub fn wait(&self, now: DateTime<Utc>) -> Option<Duration> {
        let next = self.next?;
        Some((next - now).to_std().unwrap_or(Duration::ZERO).min(RECHECK))
    }

    /// Whether the timer fires at `now`, and then what comes next. Passed
    /// occurrences of a cron timer fire once, together.
    pub fn poll(&mut self, now: DateTime<Utc>) -> Option<Fire> {
        let due = self.next?;
        if now < due {
            return None;
        }
        let late = (now - due).to_std().unwrap_or(Duration::ZERO);
        let Some(cron) = &self.cron else {
            self.next = None;
            return Some(Fire {
                due,
                late,
                missed: 0,
                last: true,
            });
        };
        // The occurrences up to now went by; the next is the first after
        // both the deadline just fired and now (a clock stepped back does
        // not fire one again).
        let mut missed = 0;
        let mut next = next_occurrence(cron, due, &self.tz);
        while let Some(n) = next.filter(|n| *n <= now) {
            missed += 1;
            next = next_occurrence(cron, n, &self.tz);
        }
        self.next = next;
        Some(Fire {
            due,
            late,
            missed,
            last: next.is_none(),
        })
    }
}

/// `1500` ms as `1.5 s`, `200000` as `3 min 20 s`, `90000000` as `1 d 1 h`.
pub fn human(ms: u128) -> String {
    let s = ms / 1000;
    if s < 60 {
        if ms.is_multiple_of(1000) || ms >= 10_000 {
            return format!("{s} s");
        }
        return format!("{:.1} s", ms as f64 / 1000.0);
    }
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m, sec) {
        (0, 0, m, 0) => format!("{m} min"),
        (0, 0, m, s) => format!("{m} min {s} s"),
        (0, h, 0, _) => format!("{h} h"),
        (0, h, m, _) => format!("{h} h {m} min"),
        (d, 0, _, _) => format!("{d} d"),
        (d, h, _, _) => format!("{d} d {h} h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::Europe::Berlin;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn durations_read_with_units_and_refuse_zero_nonsense_and_too_far() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("20min"), Ok(Duration::from_secs(1200)));
        for zero in ["0", "0s", "0m0s"] {
            assert_eq!(parse_duration(zero), Err(TimerError::Zero(zero.into())));
        }
        for bad in ["", "20", "m", "2x", "-5s", "1.5h", "s20"] {
            assert_eq!(
                parse_duration(bad),
                Err(TimerError::Duration(bad.into())),
                "{bad}"
            );
        }
        assert_eq!(parse_duration("366d"), Ok(MAX_AHEAD));
        assert!(matches!(parse_duration("367d"), Err(TimerError::TooFar(_))));
        assert!(matches!(
            parse_duration("99999999999999999999999d"),
            Err(TimerError::TooFar(_))
        ));
        let msg = TimerError::Zero("0".into()).to_string();
        assert!(msg.contains("--in"), "{msg}");
    }

    #[test]
    fn at_reads_local_times_and_rfc3339_and_refuses_the_past() {
        let now = utc("2026-07-01T10:00:00Z"); // 12:00 in Berlin (CEST, +2)
        assert_eq!(
            parse_at("15:00", now, &Berlin),
            Ok(utc("2026-07-01T13:00:00Z"))
        );
        assert_eq!(
            parse_at("2026-07-02 08:30", now, &Berlin),
            Ok(utc("2026-07-02T06:30:00Z"))
        );
        assert_eq!(
            parse_at("2026-07-02T08:30:15", now, &Berlin),
            Ok(utc("2026-07-02T06:30:15Z"))
        );
        assert_eq!(
            parse_at("2026-07-01T11:00:00Z", now, &Berlin),
            Ok(utc("2026-07-01T11:00:00Z"))
        );
        match parse_at("11:30", now, &Berlin) {
            Err(e @ TimerError::Past { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("30 min ago") && msg.contains("--in"), "{msg}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_at("12:00", now, &Berlin),
            Err(TimerError::Past { .. })
        ));
        for bad in ["soon", "25:00", "2026-13-01 10:00", "3pm"] {
            assert_eq!(
                parse_at(bad, now, &Berlin),
                Err(TimerError::At(bad.into())),
                "{bad}"
            );
        }
        assert!(matches!(
            parse_at("2028-01-01T00:00:00Z", now, &Berlin),
            Err(TimerError::TooFar(_))
        ));
    }

    #[test]
    fn at_across_dst_refuses_the_skipped_hour_and_takes_the_first_of_a_doubled_one() {
        let now = utc("2026-03-28T12:00:00Z");
        // 2026-03-29 02:00 Berlin the clocks go to 03:00.
        assert_eq!(
            parse_at("2026-03-29 02:30", now, &Berlin),
            Err(TimerError::Skipped("2026-03-29 02:30".into()))
        );
        assert_eq!(
            parse_at("2026-03-29 03:30", now, &Berlin),
            Ok(utc("2026-03-29T01:30:00Z"))
        );
        // 2026-10-25 03:00 Berlin the clocks go back to 02:00: 02:30 comes twice.
        let now = utc("2026-10-24T12:00:00Z");
        assert_eq!(
            parse_at("2026-10-25 02:30", now, &Berlin),
            Ok(utc("2026-10-25T00:30:00Z"))
        );
    }

    #[test]
    fn a_one_shot_timer_fires_once_at_its_deadline() {
        let now = utc("2026-07-01T10:00:00Z");
        let (due, cron) = deadline_of(Some("2s"), None, None, now, &Utc)
            .unwrap()
            .unwrap();
        assert_eq!(cron, None);
        let mut m = TimerMachine::new(due, None, now, Utc).unwrap();
        assert_eq!(m.wait(now), Some(Duration::from_secs(2)));
        assert_eq!(m.poll(now + TimeDelta::milliseconds(1999)), None);
        let fire = m.poll(now + TimeDelta::seconds(2)).unwrap();
        assert_eq!(fire.late, Duration::ZERO);
        assert!(fire.last);
        assert!(!fire.text().contains("late"), "{}", fire.text());
        assert_eq!(m.poll(now + TimeDelta::seconds(3)), None, "once");
        assert_eq!(m.wait(now + TimeDelta::seconds(3)), None);
    }

    #[test]
    fn a_deadline_passed_while_down_fires_once_with_its_lateness() {
        let due = utc("2026-07-01T10:00:00Z");
        let restart = utc("2026-07-01T10:07:30Z");
        let mut m = TimerMachine::new(due, None, restart, Utc).unwrap();
        assert_eq!(m.wait(restart), Some(Duration::ZERO));
        let fire = m.poll(restart).unwrap();
        assert_eq!(fire.late, Duration::from_secs(450));
        assert_eq!(fire.late_ms(), 450_000);
        assert!(fire.text().contains("7 min 30 s late"), "{}", fire.text());
        assert_eq!(m.poll(restart + TimeDelta::seconds(1)), None);
    }

    #[test]
    fn long_waits_read_the_clock_again_so_a_suspend_is_noticed() {
        let now = utc("2026-07-01T10:00:00Z");
        let due = now + TimeDelta::hours(2);
        let mut m = TimerMachine::new(due, None, now, Utc).unwrap();
        assert_eq!(m.wait(now), Some(RECHECK));
        // The machine slept through the deadline: the next look fires it.
        let woke = now + TimeDelta::hours(3);
        assert_eq!(
            m.poll(woke).map(|f| f.late),
            Some(Duration::from_secs(3600))
        );
    }

    #[test]
    fn a_clock_stepped_back_delays_a_deadline_and_never_fires_an_occurrence_twice() {
        let now = utc("2026-07-01T10:00:00Z");
        let mut once = TimerMachine::new(now + TimeDelta::minutes(5), None, now, Utc).unwrap();
        let back = now - TimeDelta::hours(1);
        assert_eq!(once.poll(back), None);
        assert_eq!(once.wait(back), Some(RECHECK));
        assert!(once.poll(now + TimeDelta::minutes(5)).is_some());

        let (due, cron) = deadline_of(None, None, Some("0 * * * *"), now, &Utc)
            .unwrap()
            .unwrap();
        assert_eq!(due, utc("2026-07-01T11:00:00Z"));
        let mut hourly = TimerMachine::new(due, cron.as_deref(), now, Utc).unwrap();
        let fire = hourly.poll(utc("2026-07-01T11:00:00Z")).unwrap();
        assert!(!fire.last);
        assert_eq!(hourly.next_due(), Some(utc("2026-07-01T12:00:00Z")));
        // Back to 10:30: 11:00 has fired, it does not again.
        assert_eq!(hourly.poll(utc("2026-07-01T10:30:00Z")), None);
        assert_eq!(hourly.poll(utc("2026-07-01T11:00:00Z")), None);
        assert!(hourly.poll(utc("2026-07-01T12:00:01Z")).is_some());
    }

    #[test]
    fn missed_cron_occurrences_fire_once_together() {
        let now = utc("2026-07-01T10:00:00Z");
        let cron = "*/15 * * * *";
        let due = utc("2026-07-01T10:15:00Z");
        let mut m = TimerMachine::new(due, Some(cron), now, Utc).unwrap();
        let fire = m.poll(utc("2026-07-01T11:05:00Z")).unwrap();
        assert_eq!(fire.due, due);
        assert_eq!(fire.missed, 3, "10:30, 10:45, 11:00");
        assert!(
            fire.text().contains("3 earlier occurrences"),
            "{}",
            fire.text()
        );
        assert_eq!(m.next_due(), Some(utc("2026-07-01T11:15:00Z")));
        // Armed again after a restart past its first deadline: from the next
        // occurrence on, nothing made up.
        let m = TimerMachine::new(due, Some(cron), utc("2026-07-01T12:01:00Z"), Utc).unwrap();
        assert_eq!(m.next_due(), Some(utc("2026-07-01T12:15:00Z")));
    }

    #[test]
    fn cron_follows_local_time_across_dst() {
        // 09:00 Berlin every day: 07:00 UTC in summer, 08:00 UTC in winter.
        let cron = parse_cron("0 9 * * *").unwrap();
        let before = utc("2026-10-24T12:00:00Z");
        let first = next_occurrence(&cron, before, &Berlin).unwrap();
        assert_eq!(
            first,
            utc("2026-10-25T08:00:00Z"),
            "the day the clocks go back"
        );
        assert_eq!(
            next_occurrence(&cron, utc("2026-03-28T12:00:00Z"), &Berlin),
            Some(utc("2026-03-29T07:00:00Z")),
            "the day they go forward"
        );
        // 02:30 Berlin daily: the spring-forward day has no 02:30, and the
        // fall-back day's (twice) fires once.
        let night = parse_cron("30 2 * * *").unwrap();
        let mut m = TimerMachine::new(
            next_occurrence(&night, utc("2026-10-24T12:00:00Z"), &Berlin).unwrap(),
            Some("30 2 * * *"),
            utc("2026-10-24T12:00:00Z"),
            Berlin,
        )
        .unwrap();
        let fire = m.poll(utc("2026-10-25T00:30:00Z")).unwrap();
        assert_eq!(fire.missed, 0);
        assert!(
            m.next_due().unwrap() > utc("2026-10-25T12:00:00Z"),
            "not again that night"
        );
        let spring = next_occurrence(&night, utc("2026-03-28T12:00:00Z"), &Berlin).unwrap();
        assert!(spring != utc("2026-03-29T00:30:00Z") && spring > utc("2026-03-28T12:00:00Z"));
    }

    #[test]
    fn bad_cron_and_several_choices_are_refused_with_the_format() {
        let now = utc("2026-07-01T10:00:00Z");
        for bad in ["every hour", "* * *", "0 0 0 * * *", "61 * * * *"] {
            match deadline_of(None, None, Some(bad), now, &Utc) {
                Err(e @ TimerError::Cron { .. }) => {
                    assert!(e.to_string().contains("five fields"), "{e}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert_eq!(
            deadline_of(Some("1m"), Some("15:00"), None, now, &Utc),
            Err(TimerError::Several)
        );
        assert_eq!(deadline_of(None, None, None, now, &Utc), Ok(None));
        assert!(matches!(
            deadline_of(None, None, Some("0 0 30 2 *"), now, &Utc),
            Err(TimerError::CronNever(_)) | Err(TimerError::Cron { .. })
        ));
    }

    #[test]
    fn human_durations() {
        assert_eq!(human(1500), "1.5 s");
        assert_eq!(human(45_000), "45 s");
        assert_eq!(human(200_000), "3 min 20 s");
        assert_eq!(human(3_600_000), "1 h");
        assert_eq!(human(5_400_000), "1 h 30 min");
        assert_eq!(human(90_000_000), "1 d 1 h");
    }
}
