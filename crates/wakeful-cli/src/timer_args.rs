//! The timer flags of `start` and `watch` (`--in`, `--at`, `--cron`,
//! `--say`; docs/CONTRACT.md §3, "Timers"), read into a timer source by
//! [`wakeful_core::timer`] as of now, in local time.

use chrono::{Local, Utc};
use clap::Args;
use wakeful_core::{MonitorSpec, Source};

/// When a timer falls due, and what it says.
#[derive(Debug, Clone, Args)]
pub struct TimerArgs {
    /// A timer: one event after this long, e.g. 90s, 20m, 1h30m, 2d (at most
    /// 366 days). The deadline is kept on the wall clock and survives a
    /// daemon restart.
    #[arg(long = "in", value_name = "DURATION", conflicts_with_all = ["at", "cron"])]
    pub in_: Option<String>,
    /// A timer: one event at this time: HH:MM[:SS] today or YYYY-MM-DD
    /// HH:MM[:SS] in local time, or RFC 3339 (2026-12-06T15:00:00Z).
    #[arg(long, value_name = "TIME", conflicts_with = "cron")]
    pub at: Option<String>,
    /// A recurring timer: an event at every occurrence of this cron
    /// expression (five fields, local time, e.g. "0 9 * * MON-FRI"), until
    /// stopped.
    #[arg(long, value_name = "EXPR")]
    pub cron: Option<String>,
    /// With --in, --at, --cron or --pid: what the event says (its
    /// description).
    #[arg(long, value_name = "TEXT", conflicts_with = "description")]
    pub say: Option<String>,
}

impl TimerArgs {
    /// Whether a timer is asked for (`--in`, `--at` or `--cron`).
    pub fn names_a_timer(&self) -> bool {
        self.in_.is_some() || self.at.is_some() || self.cron.is_some()
    }

    /// The timer these flags name, if any; `--say` alone is an error.
    pub fn to_source(&self) -> Result<Option<Source>, wakeful_core::timer::TimerError> {
        wakeful_core::Source::timer_of(
            self.in_.as_deref(),
            self.at.as_deref(),
            self.cron.as_deref(),
            self.say.is_some(),
            Utc::now(),
            &Local,
        )
    }

    /// A durable source's spec made whole (a timer, `--pid`): persistent
    /// (it outlives the daemon), and saying `--say`.
    pub fn apply(&self, spec: &mut MonitorSpec) {
        if spec.source.is_durable() {
            spec.persistent = true;
            if let Some(say) = &self.say {
                spec.description = say.clone();
            }
        }
    }
}

/// What `list` says after a running timer's description: ` (due in 3 min
/// 20 s)`, or ` (due now)` for a deadline that passed; empty for anything
/// else.
pub fn time_left(m: &wakeful_core::MonitorInfo) -> String {
    let Source::Timer { due, cron } = &m.source else {
        return String::new();
    };
    if m.state != wakeful_core::MonitorState::Running {
        return String::new();
    }
    let now = Utc::now();
    let next = wakeful_core::timer::TimerMachine::new(*due, cron.as_deref(), now, Local)
        .ok()
        .and_then(|t| t.next_due());
    match next.map(|n| (n - now).num_milliseconds()) {
        Some(ms) if ms > 0 => format!(
            " (due in {})",
            wakeful_core::timer::human(u128::from(ms.unsigned_abs()))
        ),
        Some(_) => " (due now)".to_string(),
        None => String::new(),
    }
}
