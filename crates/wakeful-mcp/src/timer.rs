//! `monitor_start`'s timer fields (`in`, `at`, `cron`, `say`): read into a
//! timer source by [`wakeful_core::timer`] as of now, in local time.

use chrono::{Local, Utc};
use wakeful_core::timer::TimerError;
use wakeful_core::Source;

use crate::args::MonitorStartArgs;

/// The timer the arguments name, if any; `say` without one (or a `pid`)
/// is an error.
pub fn source(args: &MonitorStartArgs) -> Result<Option<Source>, TimerError> {
    wakeful_core::timer::source_of(
        args.r#in.as_deref(),
        args.at.as_deref(),
        args.cron.as_deref(),
        args.say.is_some() && args.pid.is_none(),
        Utc::now(),
        &Local,
    )
}

/// Whether the arguments ask for a timer (which is always persistent).
pub fn is_timer(args: &MonitorStartArgs) -> bool {
    args.r#in.is_some() || args.at.is_some() || args.cron.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(json: serde_json::Value) -> MonitorStartArgs {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_timer_is_a_persistent_source_saying_say() {
        let spec = args(serde_json::json!({"in": "20m", "say": "check the deploy"}))
            .to_spec()
            .unwrap();
        assert!(matches!(spec.source, Source::Timer { cron: None, .. }));
        assert!(spec.persistent);
        assert_eq!(spec.description, "check the deploy");
        let spec = args(serde_json::json!({"cron": "0 9 * * *", "description": "standup"}))
            .to_spec()
            .unwrap();
        assert!(matches!(spec.source, Source::Timer { cron: Some(_), .. }));
    }

    #[test]
    fn bad_timers_are_refused_with_the_format() {
        let err = |j| args(j).to_spec().unwrap_err().to_string();
        assert!(err(serde_json::json!({"in": "0", "say": "x"})).contains("more than 0"));
        assert!(err(serde_json::json!({"at": "3pm", "say": "x"})).contains("HH:MM"));
        assert!(err(serde_json::json!({"cron": "often", "say": "x"})).contains("five fields"));
        assert!(
            err(serde_json::json!({"in": "1m", "command": "x", "say": "x"}))
                .contains("exactly one source")
        );
        assert!(err(serde_json::json!({"command": "x", "say": "x"})).contains("goes with a timer"));
        assert!(
            err(serde_json::json!({"in": "1m", "say": "x", "timeout_ms": 5000}))
                .contains("no timeout")
        );
    }
}
