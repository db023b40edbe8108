//! The command source: a [`ProcessDriver`] feeding the monitor's
//! [`Driver`], with the machine's deadlines and stop requests in between.

use std::time::Instant;

use tokio::sync::watch;
use wakeful_core::journal::JournalEntry;
use wakeful_core::machine::{SourceEnd, Step};
use wakeful_core::{MonitorSpec, MonitorStopReason};

use crate::driver::{ProcEvent, ProcessDriver, SpawnRequest};
use crate::monitor::{monitor_cwd, sleep_until_opt, Control, Driver, Launch};

/// The spawn request of a command monitor or terminal.
pub(crate) fn spawn_request<'a>(
    spec: &'a MonitorSpec,
    command: &'a str,
    launch: &'a Launch,
    id: &'a str,
    session: &'a str,
) -> SpawnRequest<'a> {
    SpawnRequest {
        command,
        base_env: launch.base_env.as_ref(),
        extra_env: &spec.env,
        cwd: monitor_cwd(spec, launch),
        id,
        session,
        die_with_parent: launch.die_with_parent,
        cgroups: launch.cgroups.as_ref(),
        wide_stdout: true,
        grace: launch.grace,
        drain: launch.drain,
    }
}

/// Runs a command monitor to its end (the final event included).
pub(crate) async fn run(
    driver: &mut Driver,
    spec: &MonitorSpec,
    command: &str,
    launch: &Launch,
    stop_rx: &mut watch::Receiver<Option<Control>>,
) {
    let req = spawn_request(spec, command, launch, &driver.id, &driver.session);
    let mut proc = match ProcessDriver::spawn(req) {
        Ok(p) => p,
        Err(e) => {
            driver
                .finish(SourceEnd::Failed(format!("could not start `sh -c`: {e}")))
                .await;
            return;
        }
    };
    let _ = driver
        .sink
        .send(JournalEntry::Spawned {
            monitor_id: driver.id.clone(),
            pid: proc.pid(),
            start_ticks: proc.start_ticks(),
        })
        .await;
    let mut failure: Option<String> = None;
    let mut suspended = false;
    loop {
        let deadline = driver
            .machine
            .next_deadline()
            .map(tokio::time::Instant::from_std);
        let mut step = Step::default();
        let stopping = proc.stopping();
        tokio::select! {
            changed = stop_rx.changed(), if !stopping => {
                let control = if changed.is_ok() {
                    stop_rx.borrow().clone()
                } else {
                    Some(Control::Stop(MonitorStopReason::SessionEnded))
                };
                let reason = match control {
                    Some(Control::Stop(reason)) => Some(reason),
                    Some(Control::Suspend) => {
                        suspended = true;
                        Some(MonitorStopReason::DaemonStopped)
                    }
                    None => None,
                };
                if let Some(reason) = reason {
                    driver.machine.request_stop(reason);
                    proc.stop();
                }
            }
            ev = proc.next() => {
                let now = Instant::now();
                let res = match ev {
                    None => break,
                    Some(ProcEvent::Data(stream, bytes)) => driver.feed(now, stream, bytes),
                    Some(ProcEvent::Eof(stream)) => driver.end_stream(now, stream),
                    Some(ProcEvent::Exited) => Ok(Step::default()),
                };
                match res {
                    Ok(s) => step = s,
                    Err(e) => failure = Some(format!("cannot write the output file: {e}")),
                }
            }
            _ = sleep_until_opt(deadline), if deadline.is_some() => {
                step = driver.machine.on_tick(Instant::now());
            }
        }
        let stop = step.stop.take();
        driver.emit(step.emits).await;
        if failure.is_some() && !proc.stopping() {
            driver.machine.request_stop(MonitorStopReason::UserStopped);
            proc.stop();
        }
        if stop.is_some() {
            proc.stop();
        }
    }
    let ended = proc.finish().await;
    if suspended {
        return;
    }
    let end = match failure {
        Some(f) => SourceEnd::Failed(f),
        None => ended.end,
    };
    driver.finish_with(end, ended.survivors).await;
}
