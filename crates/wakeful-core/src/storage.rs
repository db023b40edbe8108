//! How much disk wakeful may take, and what it gives back (docs/STORAGE.md).
//!
//! - [`ByteSize`] and [`Span`]: the sizes (`64MiB`) and ages (`7d`) of the
//!   `[store]` table of `config.toml`.
//! - [`KeepFree`]: the free space the state directory's filesystem keeps
//!   (`1GiB`, or `5%` of the filesystem).
//! - [`Retention`] and [`plan`]: which ended monitors a prune removes, by
//!   age first, then by the size caps, oldest first. Pure: the caller
//!   passes the candidates, the sizes and the time.
//! - [`PruneRecord`]: what a prune removed, as the store keeps it and
//!   `status`, `export` and the views show it.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A number of bytes, written in config files as `65536`, `512KiB`,
/// `64MiB`, `2GiB` (or `KB`/`MB`/`GB`, powers of 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// `n` KiB.
    pub const fn kib(n: u64) -> Self {
        ByteSize(n << 10)
    }
    /// `n` MiB.
    pub const fn mib(n: u64) -> Self {
        ByteSize(n << 20)
    }
    /// `n` GiB.
    pub const fn gib(n: u64) -> Self {
        ByteSize(n << 30)
    }

    /// Reads `64MiB`, `1.5GiB`, `500MB`, `4096` (bytes).
    pub fn parse(s: &str) -> Result<Self, SizeParseError> {
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let unit = unit.trim();
        let mult: u64 = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kib" => 1 << 10,
            "m" | "mib" => 1 << 20,
            "g" | "gib" => 1 << 30,
            "t" | "tib" => 1 << 40,
            "kb" => 1_000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            "tb" => 1_000_000_000_000,
            _ => {
                return Err(SizeParseError::Unit {
                    text: s.to_string(),
                })
            }
        };
        let value: f64 = num.parse().map_err(|_| SizeParseError::Number {
            text: s.to_string(),
        })?;
        let bytes = value * mult as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(SizeParseError::Range {
                text: s.to_string(),
            });
        }
        Ok(ByteSize(bytes.round() as u64))
    }
}

/// Why a size (or a free-space value) of the config cannot be read; each
/// says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeParseError {
    /// A unit this parser does not know.
    #[error("`{text}` is not a size: use bytes or a unit such as 512KiB, 64MiB, 2GiB")]
    Unit {
        /// The text given.
        text: String,
    },
    /// No number before the unit.
    #[error("`{text}` is not a size: use a number with a unit such as 64MiB")]
    Number {
        /// The text given.
        text: String,
    },
    /// More bytes than a `u64` holds.
    #[error("`{text}` is out of range")]
    Range {
        /// The text given.
        text: String,
    },
    /// A [`KeepFree`] percentage above 100 % or not a number.
    #[error("`{text}` is not a percentage from 0% to 100%")]
    Percent {
        /// The text given.
        text: String,
    },
}

impl fmt::Display for ByteSize {
    /// `64 MiB`, `1.5 GiB`, `812 B`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut v = self.0 as f64;
        let mut unit = 0;
        while v >= 1024.0 && unit + 1 < UNITS.len() {
            v /= 1024.0;
            unit += 1;
        }
        if unit == 0 || (v.fract() == 0.0 && v < 10_000.0) {
            write!(f, "{} {}", v as u64, UNITS[unit])
        } else if v < 10.0 {
            write!(f, "{v:.1} {}", UNITS[unit])
        } else {
            write!(f, "{} {}", v.round() as u64, UNITS[unit])
        }
    }
}

/// Reads a config value written as a number or as text (`4096`, `"4KiB"`).
fn number_or_text<'de, D: serde::Deserializer<'de>, T, E: fmt::Display>(
    d: D,
    number: impl FnOnce(u64) -> T,
    text: impl FnOnce(&str) -> Result<T, E>,
) -> Result<T, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(u64),
        S(String),
    }
    match Raw::deserialize(d)? {
        Raw::N(n) => Ok(number(n)),
        Raw::S(s) => text(&s).map_err(serde::de::Error::custom),
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        number_or_text(d, ByteSize, ByteSize::parse)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

/// A length of time, written in config files as `30s`, `10m`, `12h`, `7d`
/// (or a number of seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span(pub std::time::Duration);

impl Span {
    /// `n` days.
    pub const fn days(n: u64) -> Self {
        Span(std::time::Duration::from_secs(n * 86_400))
    }

    /// Reads `500ms`, `30s`, `10m`, `12h`, `7d`, `2w`, or seconds.
    pub fn parse(s: &str) -> Result<Self, SpanParseError> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num.parse().map_err(|_| SpanParseError::NotADuration {
            text: s.to_string(),
        })?;
        let ms: u64 = match unit.trim() {
            "ms" => 1,
            "" | "s" => 1_000,
            "m" | "min" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            _ => {
                return Err(SpanParseError::NotADuration {
                    text: s.to_string(),
                })
            }
        };
        n.checked_mul(ms)
            .map(|ms| Span(std::time::Duration::from_millis(ms)))
            .ok_or_else(|| SpanParseError::Range {
                text: s.to_string(),
            })
    }
}

/// Why a length of time of the config cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpanParseError {
    /// Not a number with a known unit.
    #[error("`{text}` is not a duration: use e.g. 30s, 10m, 12h, 7d")]
    NotADuration {
        /// The text given.
        text: String,
    },
    /// More milliseconds than a `u64` holds.
    #[error("`{text}` is out of range")]
    Range {
        /// The text given.
        text: String,
    },
}

impl fmt::Display for Span {
    /// The largest unit that divides it: `7d`, `36h`, `90s`, `1500ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        for (unit, size) in [
            ("d", 86_400_000),
            ("h", 3_600_000),
            ("m", 60_000),
            ("s", 1_000),
        ] {
            if ms >= size && ms.is_multiple_of(size) {
                return write!(f, "{}{unit}", ms / size);
            }
        }
        write!(f, "{ms}ms")
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        number_or_text(d, |n| Span(std::time::Duration::from_secs(n)), Span::parse)
    }
}

impl Serialize for Span {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The free space the filesystem of the state directory keeps: below it,
/// output files stop growing (what is not written is counted and
/// reported), events are still recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepFree {
    /// This many bytes.
    Bytes(ByteSize),
    /// This percentage of the filesystem's size, at most `at_most`.
    Percent {
        /// 0–100.
        percent: u8,
        /// The cap on what the percentage gives.
        at_most: ByteSize,
    },
}

impl Default for KeepFree {
    /// 5 % of the filesystem, at most 1 GiB.
    fn default() -> Self {
        KeepFree::Percent {
            percent: 5,
            at_most: ByteSize::gib(1),
        }
    }
}

impl KeepFree {
    /// Reads `5%` (a percentage, capped at 1 GiB as the default is) or a
    /// size (`512MiB`).
    pub fn parse(s: &str) -> Result<Self, SizeParseError> {
        match s.trim().strip_suffix('%') {
            Some(p) => {
                let percent: u8 = p.trim().parse().ok().filter(|p| *p <= 100).ok_or_else(|| {
                    SizeParseError::Percent {
                        text: s.to_string(),
                    }
                })?;
                Ok(KeepFree::Percent {
                    percent,
                    at_most: ByteSize::gib(1),
                })
            }
            None => ByteSize::parse(s).map(KeepFree::Bytes),
        }
    }

    /// The bytes to keep free on a filesystem of `total` bytes.
    pub fn bytes(&self, total: u64) -> u64 {
        match *self {
            KeepFree::Bytes(b) => b.0,
            KeepFree::Percent { percent, at_most } => {
                ((total as u128 * u128::from(percent) / 100) as u64).min(at_most.0)
            }
        }
    }
}

impl fmt::Display for KeepFree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeepFree::Bytes(b) => write!(f, "{b}"),
            KeepFree::Percent { percent, at_most } => {
                write!(f, "{percent}% of the filesystem (at most {at_most})")
            }
        }
    }
}

impl<'de> Deserialize<'de> for KeepFree {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        number_or_text(d, |n| KeepFree::Bytes(ByteSize(n)), KeepFree::parse)
    }
}

/// The output files' caps (`[store] output_max`, `output_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputCaps {
    /// The most one monitor's (or terminal's) output file keeps.
    pub per_file: u64,
    /// The most all output files of running monitors keep together: each
    /// running file gets at most this divided by how many run.
    pub total: u64,
}

impl Default for OutputCaps {
    /// 64 MiB a file, 1 GiB in all.
    fn default() -> Self {
        OutputCaps {
            per_file: ByteSize::mib(64).0,
            total: ByteSize::gib(1).0,
        }
    }
}

impl OutputCaps {
    /// Size of one segment of a file: an eighth of the cap, at least
    /// 16 KiB. The first segment (the head) is always kept.
    pub fn segment(&self) -> u64 {
        (self.per_file / 8).max(16 * 1024)
    }

    /// What one file may keep while `running` files share the total: its
    /// own cap or its share, whichever is smaller, but never less than two
    /// segments (the head and the one being written).
    pub fn share(&self, running: usize) -> u64 {
        let share = self.total / running.max(1) as u64;
        self.per_file.min(share).max(2 * self.segment())
    }
}

/// When the daemon checks the store's size: within `every` of a write,
/// and never while nothing is written (an idle daemon is not woken for
/// it). The clock is passed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeChecks {
    every: std::time::Duration,
    due: Option<std::time::Instant>,
}

impl SizeChecks {
    /// Checks spaced `every` apart, the first due at `now` (a daemon
    /// that starts checks what it finds).
    pub fn new(every: std::time::Duration, now: std::time::Instant) -> Self {
        SizeChecks {
            every,
            due: Some(now),
        }
    }

    /// Something was written at `now`: a check is due `every` later,
    /// unless one is due already (a flood arms one check, not one a line).
    pub fn wrote(&mut self, now: std::time::Instant) {
        if self.due.is_none() {
            self.due = Some(now + self.every);
        }
    }

    /// The check ran: none is due until something is written again.
    pub fn checked(&mut self) {
        self.due = None;
    }

    /// When the next check is due; `None` while nothing was written since
    /// the last.
    pub fn due(&self) -> Option<std::time::Instant> {
        self.due
    }
}

/// What a prune keeps (`[store] max_age`, `max_size`, `output_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Ended monitors older than this are removed (events, row, output).
    pub max_age: Span,
    /// Database plus output files: over it, ended monitors are removed
    /// oldest first, whatever their age.
    pub max_size: u64,
    /// All output files: over it, the output files of ended monitors are
    /// removed oldest first (their events stay).
    pub output_total: u64,
}

impl Default for Retention {
    /// 7 days, 2 GiB, 1 GiB.
    fn default() -> Self {
        Retention {
            max_age: Span::days(7),
            max_size: ByteSize::gib(2).0,
            output_total: OutputCaps::default().total,
        }
    }
}

/// An ended monitor (or terminal) a prune may remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its id (`mon-…`, `term-…`).
    pub id: String,
    /// When it ended.
    pub ended_at: DateTime<Utc>,
    /// How many events it has.
    pub events: u64,
    /// What its events take in the database (an estimate: their JSON).
    pub event_bytes: u64,
    /// What its output files take.
    pub output_bytes: u64,
}

/// What the store takes now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Database, its WAL and its redo log.
    pub database: u64,
    /// Every output file.
    pub output: u64,
}

/// Why a monitor is pruned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PruneCause {
    /// It ended longer than `max_age` ago.
    Age,
    /// The store was over `max_size`.
    Size,
    /// Output files were over `output_total` (only its output goes).
    OutputTotal,
}

/// What one prune removes: whole monitors, and the output files of others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Monitors removed with their events, oldest first, and why.
    pub monitors: Vec<(String, PruneCause)>,
    /// Monitors whose output files only are removed.
    pub outputs: Vec<String>,
    /// Events removed.
    pub events: u64,
    /// Bytes the plan expects to free.
    pub bytes: u64,
    /// Bytes of the oldest events of running monitors to remove as well:
    /// more than zero only when the store is over `max_size` with every
    /// ended monitor gone (a tenth of `max_size` below the cap, so that
    /// the next few size checks find room).
    pub running_trim: u64,
}

impl Plan {
    /// Whether it removes nothing.
    pub fn is_empty(&self) -> bool {
        self.monitors.is_empty() && self.outputs.is_empty() && self.running_trim == 0
    }
}

/// Which ended monitors a prune at `now` removes, under `policy`, given the
/// store's `usage`: first every candidate older than `max_age`; then, while
/// the output files are over `output_total`, the output files of the
/// oldest remaining ones; then, while the whole store is over `max_size`,
/// the oldest remaining monitors. A candidate younger than `max_age` is
/// only taken while a cap is exceeded. Running monitors are never
/// candidates; only when the store is still over `max_size` with every
/// ended monitor gone does the plan name bytes of running monitors' oldest
/// events to remove ([`Plan::running_trim`]).
pub fn plan(
    candidates: &[Candidate],
    usage: Usage,
    policy: &Retention,
    now: DateTime<Utc>,
) -> Plan {
    let mut by_age: Vec<&Candidate> = candidates.iter().collect();
    by_age.sort_by(|a, b| a.ended_at.cmp(&b.ended_at).then_with(|| a.id.cmp(&b.id)));
    let cutoff = chrono::Duration::from_std(policy.max_age.0)
        .ok()
        .and_then(|age| now.checked_sub_signed(age));
    let mut left = usage;
    let mut out = Plan::default();
    // Removes a whole monitor; its output counts only if it is still there.
    let remove = |c: &Candidate, cause, out: &mut Plan, left: &mut Usage, output: bool| {
        out.monitors.push((c.id.clone(), cause));
        out.events += c.events;
        let own_output = if output { c.output_bytes } else { 0 };
        out.bytes += c.event_bytes + own_output;
        left.database = left.database.saturating_sub(c.event_bytes);
        left.output = left.output.saturating_sub(own_output);
    };
    let mut rest = Vec::new();
    for c in by_age {
        if cutoff.is_some_and(|cut| c.ended_at < cut) {
            remove(c, PruneCause::Age, &mut out, &mut left, true);
        } else {
            rest.push(c);
        }
    }
    let mut output_gone = vec![false; rest.len()];
    for (i, c) in rest.iter().enumerate() {
        if left.output <= policy.output_total {
            break;
        }
        if c.output_bytes > 0 {
            out.outputs.push(c.id.clone());
            out.bytes += c.output_bytes;
            left.output = left.output.saturating_sub(c.output_bytes);
            output_gone[i] = true;
        }
    }
    for (i, c) in rest.iter().enumerate() {
        if left.database + left.output <= policy.max_size {
            break;
        }
        if output_gone[i] {
            out.outputs.retain(|id| id != &c.id);
        }
        remove(c, PruneCause::Size, &mut out, &mut left, !output_gone[i]);
    }
    let total = left.database + left.output;
    if total > policy.max_size {
        out.running_trim = total - policy.max_size + policy.max_size / 10;
    }
    out
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What a prune removed: kept by the store, shown by `status`, `export`
/// and the live views, written to the daemon's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PruneRecord {
    /// When.
    #[serde(with = "crate::info::ts")]
    pub at: DateTime<Utc>,
    /// Events removed.
    pub events: u64,
    /// Monitors (and terminals) removed with their events.
    pub monitors: u64,
    /// Monitors whose output files only were removed.
    pub outputs: u64,
    /// Bytes given back to the filesystem (database and files).
    pub bytes: u64,
    /// The causes, as they applied (`age`, `size`, `output_total`).
    pub causes: Vec<PruneCause>,
    /// Of `events`, those that were the oldest events of running monitors
    /// (taken only when the store was over `max_size` with every ended
    /// monitor gone).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub running_events: u64,
    /// How many running monitors those were.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub running_monitors: u64,
    /// The oldest event kept after it (its seq), if any is left.
    pub oldest_kept_seq: Option<u64>,
    /// That event's time.
    #[serde(default, with = "crate::info::ts_opt")]
    pub oldest_kept_at: Option<DateTime<Utc>>,
}

impl fmt::Display for PruneRecord {
    /// `pruned 1200 events of 3 monitors (4.2 MiB; age); oldest kept: seq 812 (2026-11-26 09:12 UTC)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        if self.running_events > 0 {
            let ended = self.events.saturating_sub(self.running_events);
            write!(
                f,
                "pruned {} event{} ({ended} of {} monitor{}, the oldest {} of {} running monitor{})",
                self.events,
                plural(self.events),
                self.monitors,
                plural(self.monitors),
                self.running_events,
                self.running_monitors,
                plural(self.running_monitors)
            )?;
        } else {
            write!(
                f,
                "pruned {} event{} of {} monitor{}",
                self.events,
                plural(self.events),
                self.monitors,
                plural(self.monitors)
            )?;
        }
        if self.outputs > 0 {
            write!(f, " and the output files of {} more", self.outputs)?;
        }
        let causes: Vec<&str> = self
            .causes
            .iter()
            .map(|c| match c {
                PruneCause::Age => "age",
                PruneCause::Size => "size cap",
                PruneCause::OutputTotal => "output cap",
            })
            .collect();
        write!(f, " ({}; {})", ByteSize(self.bytes), causes.join(", "))?;
        match (self.oldest_kept_seq, self.oldest_kept_at) {
            (Some(seq), Some(at)) => write!(
                f,
                "; oldest kept: seq {seq} ({})",
                at.format("%Y-%m-%d %H:%M UTC")
            ),
            (Some(seq), None) => write!(f, "; oldest kept: seq {seq}"),
            _ => write!(f, "; no event left"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn sizes_and_spans_read_and_print() {
        assert_eq!(ByteSize::parse("64MiB").unwrap(), ByteSize::mib(64));
        assert_eq!(ByteSize::parse("64 mib").unwrap(), ByteSize::mib(64));
        assert_eq!(ByteSize::parse("1.5GiB").unwrap().0, 3 << 29);
        assert_eq!(ByteSize::parse("500MB").unwrap().0, 500_000_000);
        assert_eq!(ByteSize::parse("4096").unwrap().0, 4096);
        assert!(ByteSize::parse("lots").is_err());
        assert!(ByteSize::parse("5 parsecs").is_err());
        assert!(ByteSize::parse("-1MiB").is_err());
        assert_eq!(ByteSize::mib(64).to_string(), "64 MiB");
        assert_eq!(ByteSize(1536).to_string(), "1.5 KiB");
        assert_eq!(ByteSize(812).to_string(), "812 B");
        assert_eq!(ByteSize(47 << 20 | 1).to_string(), "47 MiB");
        assert_eq!(Span::parse("7d").unwrap(), Span::days(7));
        assert_eq!(Span::parse("90").unwrap().0.as_secs(), 90);
        assert_eq!(Span::parse("1500ms").unwrap().0.as_millis(), 1500);
        assert!(Span::parse("7 fortnights").is_err());
        assert!(Span::parse("d").is_err());
        assert_eq!(Span::days(7).to_string(), "7d");
        assert_eq!(Span::parse("36h").unwrap().to_string(), "36h");
        assert_eq!(Span::parse("1500ms").unwrap().to_string(), "1500ms");
    }

    #[test]
    fn keep_free_is_a_size_or_a_capped_share() {
        assert_eq!(KeepFree::default().bytes(10 << 30), 512 << 20);
        assert_eq!(KeepFree::default().bytes(1 << 40), 1 << 30, "capped");
        assert_eq!(KeepFree::parse("10%").unwrap().bytes(30 << 20), 3 << 20);
        assert_eq!(KeepFree::parse("2MiB").unwrap().bytes(1 << 40), 2 << 20);
        assert!(KeepFree::parse("120%").is_err());
        assert!(KeepFree::parse("x%").is_err());
    }

    #[test]
    fn size_checks_follow_writes_and_sleep_without_them() {
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let every = Duration::from_secs(10);
        let mut c = SizeChecks::new(every, t0);
        assert_eq!(c.due(), Some(t0), "a starting daemon checks at once");
        c.checked();
        assert_eq!(c.due(), None, "idle: no check, no timer");
        c.wrote(t0 + Duration::from_secs(3));
        c.wrote(t0 + Duration::from_secs(4));
        assert_eq!(c.due(), Some(t0 + Duration::from_secs(13)), "one per spell");
        c.checked();
        assert_eq!(c.due(), None);
    }

    #[test]
    fn output_shares_never_go_below_head_and_live() {
        let caps = OutputCaps::default();
        assert_eq!(caps.segment(), 8 << 20);
        assert_eq!(caps.share(1), 64 << 20);
        assert_eq!(caps.share(32), 32 << 20, "1 GiB / 32");
        assert_eq!(caps.share(1000), 16 << 20, "two segments at least");
    }

    fn at(day: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, day, 12, 0, 0).unwrap()
    }

    fn cand(id: &str, day: u32, events: u64, output: u64) -> Candidate {
        Candidate {
            id: id.into(),
            ended_at: at(day),
            events,
            event_bytes: events * 100,
            output_bytes: output,
        }
    }

    fn ids(p: &Plan) -> Vec<(&str, PruneCause)> {
        p.monitors.iter().map(|(i, c)| (i.as_str(), *c)).collect()
    }

    #[test]
    fn age_first_then_caps_oldest_first() {
        let policy = Retention {
            max_age: Span::days(7),
            max_size: 100_000,
            output_total: 50_000,
        };
        let c = [
            cand("old", 1, 10, 0),
            cand("mid", 25, 10, 30_000),
            cand("new", 29, 10, 30_000),
        ];
        // Under every cap: only age.
        let usage = Usage {
            database: 3_000,
            output: 40_000,
        };
        let p = plan(&c, usage, &policy, at(30));
        assert_eq!(ids(&p), [("old", PruneCause::Age)]);
        assert!(p.outputs.is_empty());
        assert_eq!((p.events, p.bytes), (10, 1_000));
        // Outputs over their cap: the oldest remaining output goes, its
        // events stay.
        let usage = Usage {
            database: 3_000,
            output: 60_000,
        };
        let p = plan(&c, usage, &policy, at(30));
        assert_eq!(ids(&p), [("old", PruneCause::Age)]);
        assert_eq!(p.outputs, ["mid"]);
        // Everything over: whole monitors go, oldest first, until it fits;
        // one whose output already went is counted once.
        let usage = Usage {
            database: 72_000,
            output: 60_000,
        };
        let p = plan(&c, usage, &policy, at(30));
        assert_eq!(
            ids(&p),
            [("old", PruneCause::Age), ("mid", PruneCause::Size)]
        );
        assert!(p.outputs.is_empty(), "{:?}", p.outputs);
        assert_eq!(p.bytes, 1_000 + 1_000 + 30_000);
        assert_eq!(p.running_trim, 0, "ended monitors were enough");
        // Still over with every ended monitor gone: the oldest events of
        // running monitors go too, down to a tenth below the cap.
        let usage = Usage {
            database: 120_000,
            output: 70_000,
        };
        let p = plan(&c, usage, &policy, at(30));
        assert_eq!(p.monitors.len(), 3);
        let left = 190_000 - 3_000 - 60_000;
        assert_eq!(p.running_trim, left - 100_000 + 10_000);
        assert!(!p.is_empty());
        // Over with no ended monitor at all.
        let p = plan(&[], usage, &policy, at(30));
        assert!(p.monitors.is_empty() && !p.is_empty());
        assert_eq!(p.running_trim, 190_000 - 90_000);
        // Nothing to do.
        let p = plan(&c[1..], Usage::default(), &policy, at(26));
        assert!(p.is_empty());
    }

    #[test]
    fn a_prune_says_what_it_did() {
        let r = PruneRecord {
            at: at(30),
            events: 1200,
            monitors: 3,
            outputs: 0,
            bytes: 4_404_019,
            causes: vec![PruneCause::Age],
            oldest_kept_seq: Some(812),
            oldest_kept_at: Some(at(26)),
            running_events: 0,
            running_monitors: 0,
        };
        assert_eq!(
            r.to_string(),
            "pruned 1200 events of 3 monitors (4.2 MiB; age); oldest kept: seq 812 (2026-11-26 12:00 UTC)"
        );
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains("running_"), "{json}");
        assert_eq!(serde_json::from_str::<PruneRecord>(&json).unwrap(), r);
        let r = PruneRecord {
            events: 1500,
            running_events: 300,
            running_monitors: 2,
            causes: vec![PruneCause::Age, PruneCause::Size],
            ..r
        };
        assert_eq!(
            r.to_string(),
            "pruned 1500 events (1200 of 3 monitors, the oldest 300 of 2 running monitors) \
             (4.2 MiB; age, size cap); oldest kept: seq 812 (2026-11-26 12:00 UTC)"
        );
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<PruneRecord>(&json).unwrap(), r);
    }
}
