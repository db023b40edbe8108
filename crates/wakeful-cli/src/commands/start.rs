//! `wakeful start` and `wakeful watch`: a monitor started from flags and
//! command words; `watch` follows it until its end.

use std::io::Write;
use std::os::fd::AsFd;

use serde_json::json;
use wakeful_client::{connect, connect_existing, ClientError, Connection, ErrorKind, Paths};
use wakeful_core::{EventBody, MonitorSpec, MonitorStopReason};
use wakeful_protocol::{OutputForm, StartResult};

use crate::render::{self, print_json};
use crate::{exit, Failure};

/// The spec that `start`/`watch` flags and command words describe.
pub(super) fn spec_of(
    monitor: &crate::monitor_args::MonitorArgs,
    source: &crate::monitor_args::SourceArgs,
    command: Vec<String>,
) -> Result<MonitorSpec, Failure> {
    let watched = source
        .to_source(command)
        .map_err(|e| Failure::new(exit::USAGE, e.to_string()))?;
    let mut spec = monitor.to_spec(watched);
    source.timer.apply(&mut spec);
    Ok(spec)
}

/// Checks the spec locally so that invalid input exits 2 without starting
/// (or even contacting) the daemon.
fn check(spec: &MonitorSpec) -> Result<(), Failure> {
    spec.validate()
        .map(|_| ())
        .map_err(|e| Failure::new(exit::USAGE, e.to_string()))
}

async fn start_request(
    paths: &Paths,
    session: String,
    spec: MonitorSpec,
    host: Option<String>,
) -> Result<(Connection, StartResult), Failure> {
    check(&spec)?;
    let cwd = std::env::current_dir()?;
    let mut conn = connect(paths).await?;
    let result: StartResult = conn
        .call(wakeful_protocol::StartMonitor {
            session,
            spec: Box::new(spec),
            env: client_env(),
            cwd,
            host,
        })
        .await?;
    Ok((conn, result))
}

pub(super) async fn start(
    paths: &Paths,
    session: String,
    spec: MonitorSpec,
    host: Option<String>,
    json: bool,
) -> Result<u8, Failure> {
    let (_, r) = start_request(paths, session, spec, host).await?;
    if json {
        print_json(&json!({
            "id": r.id,
            "session": r.session,
            "already_running": r.already_running,
            "output_path": r.output_path,
            "wake": r.wake,
        }))?;
    } else {
        if r.already_running {
            outln!("{} (already running)", r.id)?;
        } else {
            outln!("{}", r.id)?;
        }
        say_wake(&r.wake);
    }
    Ok(0)
}

pub(super) async fn watch(
    paths: &Paths,
    session: String,
    spec: MonitorSpec,
    json: bool,
) -> Result<u8, Failure> {
    use render::{watch_exit_code, WatchEnd};
    let persistent = spec.persistent;
    let detach_on_interrupt = spec.key.is_some() || persistent;
    // Before the monitor starts, so that a signal never finds the default
    // action (death without stopping the monitor).
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let (conn, started) = start_request(paths, session.clone(), spec, None).await?;
    let request_after = |after, write_to| wakeful_protocol::ReadEvents {
        session: session.clone(),
        after,
        follow: true,
        monitor: Some(started.id.clone()),
        write_to,
        ..Default::default()
    };
    let request = |write_to| request_after(started.after_seq, write_to);
    let form = if json {
        OutputForm::Json
    } else {
        OutputForm::Watch
    };
    // A pipe or a socket: the daemon writes the monitor's output to it
    // itself, and sends its final event here too.
    let handover = wakeful_client::handover::stdout_for_daemon();
    let mut handed = handover.is_some();
    let mut events = match &handover {
        Some(fd) => {
            conn.events_with_fds(request(Some(form)), &[fd.as_fd()])
                .await?
        }
        None => conn.events(request(None)).await?,
    };
    drop(handover);
    loop {
        let next = tokio::select! {
            r = events.next() => r,
            _ = interrupt.recv() => {
                let_go(paths, &started.id, detach_on_interrupt, true).await;
                return Ok(watch_exit_code(WatchEnd::Interrupted));
            }
            _ = terminate.recv() => {
                let_go(paths, &started.id, detach_on_interrupt, true).await;
                return Ok(watch_exit_code(WatchEnd::Terminated));
            }
        };
        match next {
            Ok(Some(e)) if handed => {
                // The final event; the daemon has written it already.
                if let Some(code) = watch_end_code(&e.decode()?) {
                    return Ok(code);
                }
            }
            Err(ClientError::Refused {
                kind: ErrorKind::OutputClosed,
                ..
            }) => {
                // Nobody reads our output any more: let the monitor go as on
                // Ctrl-C, quietly (exit 141).
                let_go(paths, &started.id, detach_on_interrupt, false).await;
                return Ok(watch_exit_code(WatchEnd::StdoutClosed));
            }
            Err(ClientError::Upgraded { after }) if handed => {
                // The daemon was upgraded: hand stdout to the new one.
                let Some(fd) = wakeful_client::handover::stdout_for_daemon() else {
                    return Err(ClientError::Closed.into());
                };
                events = wakeful_client::connect_existing(paths)
                    .await
                    .map_err(ClientError::from)?
                    .events_with_fds(request_after(after, Some(form)), &[fd.as_fd()])
                    .await?;
            }
            Err(ClientError::Refused {
                kind: ErrorKind::Invalid,
                ..
            }) if handed => {
                // A daemon that cannot write there: relay.
                handed = false;
                events.connection().send(request(None)).await?;
            }
            Ok(Some(e)) => {
                let event = e.decode()?;
                let mut out = std::io::stdout().lock();
                let written = if json {
                    writeln!(out, "{}", e.json)
                } else {
                    render::watch_plain(&mut out, &event)
                };
                if let Err(e) = written.and_then(|_| out.flush()) {
                    drop(out);
                    // Nobody reads our output any more: let the monitor go as
                    // on Ctrl-C; a closed pipe ends quietly (exit 141).
                    let closed = e.kind() == std::io::ErrorKind::BrokenPipe;
                    let_go(paths, &started.id, detach_on_interrupt, !closed).await;
                    if closed {
                        return Ok(watch_exit_code(WatchEnd::StdoutClosed));
                    }
                    return Err(e.into());
                }
                if let Some(code) = watch_end_code(&event) {
                    return Ok(code);
                }
            }
            Ok(None) => {}
            Err(ClientError::Closed) => {
                // A daemon that stops may close the stream before the final
                // event reached it; a monitor that is not persistent ended
                // with it (`daemon_stopped`).
                if !persistent && connect_existing(paths).await.is_err() {
                    eprintln!(
                        "wakeful: the daemon stopped while {} ran; `wakeful events` shows its end",
                        started.id
                    );
                    return Ok(watch_exit_code(WatchEnd::Stopped(
                        &MonitorStopReason::DaemonStopped,
                    )));
                }
                return Err(Failure::new(
                    exit::FAILURE,
                    format!(
                        "the daemon closed the stream of {}; `wakeful events` has everything",
                        started.id
                    ),
                ));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// `watch`'s exit code when `event` is its monitor's final one.
fn watch_end_code(event: &wakeful_core::Event) -> Option<u8> {
    use render::{watch_exit_code, WatchEnd};
    match &event.body {
        EventBody::MonitorStopped { reason, .. } => {
            Some(watch_exit_code(WatchEnd::Stopped(reason)))
        }
        EventBody::MonitorFailed { .. } => Some(watch_exit_code(WatchEnd::Failed)),
        _ => None,
    }
}

/// Ends `watch`'s hold on monitor `id`: stops it, or with `detach` leaves it
/// running (and, with `say`, says so on stderr).
async fn let_go(paths: &Paths, id: &str, detach: bool, say: bool) {
    if detach {
        if say {
            eprintln!(
                "wakeful: detached from {id}; it keeps running (`wakeful stop {id}` ends it)"
            );
        }
        return;
    }
    if let Ok(mut conn) = connect_existing(paths).await {
        let _ = conn
            .call(wakeful_protocol::StopMonitor { id: id.to_string() })
            .await;
    }
}

/// The environment a started command or terminal gets: this process's.
pub(super) fn client_env() -> std::collections::BTreeMap<String, String> {
    let mut env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    // Under `wakeful acp-proxy` the proxy delivers the session's events; a
    // Codex agent's CODEX_THREAD_ID would give the session a `codex` wake
    // route too, and every event would be delivered twice.
    if env.contains_key(wakeful_acp::PROXY_ENV) {
        env.remove(wakeful_core::session::CODEX_THREAD_ID);
    }
    env
}

/// On stderr (stdout holds only the id, for scripts): when no wake will
/// come, say so and what to do.
pub(super) fn say_wake(wake: &wakeful_protocol::WakeInfo) {
    if !wake.live {
        eprintln!("wakeful: {}", wake.reason);
    }
}
