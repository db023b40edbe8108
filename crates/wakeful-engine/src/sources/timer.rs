//! The timer source (`--in`, `--at`, `--cron`): the pure
//! [`wakeful_core::timer::TimerMachine`] on the wall clock and the local
//! time zone. It waits at most [`wakeful_core::timer::RECHECK`] at a time and
//! reads the wall clock again, so a suspended machine or a stepped clock is
//! noticed. A one-shot timer's fire is its monitor's final event (one
//! commit: a daemon killed around it can never fire it twice); a cron
//! timer's fires are lines, and it runs until stopped.

use chrono::{DateTime, Local, Utc};

use wakeful_core::machine::SourceEnd;
use wakeful_core::timer::TimerMachine;
use wakeful_core::{MonitorStopReason, Stream};

use crate::source::{Input, InputSource};

/// A timer source; see the module docs.
pub(crate) struct TimerSource {
    machine: TimerMachine<Local>,
    line: Vec<u8>,
    flush: bool,
}

impl TimerSource {
    /// A timer due at `due` (and with `cron`, at each later occurrence).
    pub(crate) fn new(
        due: DateTime<Utc>,
        cron: Option<&str>,
    ) -> Result<Self, wakeful_core::timer::TimerError> {
        let machine = TimerMachine::new(due, cron, Utc::now(), Local)?;
        Ok(TimerSource {
            machine,
            line: Vec::new(),
            flush: false,
        })
    }
}

impl InputSource for TimerSource {
    async fn next(&mut self) -> Input<'_> {
        if std::mem::take(&mut self.flush) {
            return Input::Flush(Stream::Stdout);
        }
        loop {
            let now = Utc::now();
            if let Some(fire) = self.machine.poll(now) {
                if fire.last {
                    let reason = MonitorStopReason::Fired {
                        due: fire.due,
                        late_ms: fire.late_ms(),
                    };
                    return Input::End(SourceEnd::Ended(reason).into());
                }
                self.line = format!("{}\n", fire.text()).into_bytes();
                self.flush = true;
                return Input::Chunk(Stream::Stdout, &self.line);
            }
            match self.machine.wait(now) {
                Some(wait) => tokio::time::sleep(wait).await,
                None => std::future::pending::<()>().await,
            }
        }
    }
}
