//! Monitors: `start`, `list`, `get`, `stop`, `session_end`.

use wakeful_core::MonitorInfo;
use wakeful_engine::{StartError, StartOptions};
use wakeful_protocol::{
    EndSession, ErrorKind, GetMonitor, ListMonitors, SessionEndResult, StartMonitor, StartResult,
    StopMonitor,
};

use super::conn::Handled;
use crate::state::{Failure, State};

/// `start` of a monitor on this host.
pub(crate) async fn start(state: &State, r: StartMonitor) -> Handled<StartMonitor> {
    start_here(state, r.session, r.spec, Some(r.env), Some(r.cwd)).await
}

/// Starts a monitor on this host (`start`, and `start` from another host of
/// the cluster, which brings no environment or working directory: the
/// daemon's own apply).
pub(crate) async fn start_here(
    state: &State,
    session: String,
    spec: Box<wakeful_core::MonitorSpec>,
    env: Option<std::collections::BTreeMap<String, String>>,
    cwd: Option<std::path::PathBuf>,
) -> Result<StartResult, Failure> {
    state
        .storage
        .writable("start a monitor")
        .map_err(|m| (ErrorKind::DiskFull, m.to_string()))?;
    let after_seq = state.registry.hub().latest();
    // Inside Codex: route the session to its thread, unless it has a
    // route or the configuration says no.
    if let Some(route) = env
        .as_ref()
        .and_then(wakeful_agents::codex::auto_route::route_for)
    {
        if state.wakes.auto_codex && !state.wakes.has_route(&session) && spec.validate().is_ok() {
            if let Err(e) = state
                .wakes
                .set(&session, route, wakeful_protocol::RouteSource::Auto)
                .await
            {
                tracing::warn!("cannot route session {session} to Codex: {e}");
            }
        }
    }
    let opts = StartOptions {
        session: Some(session.clone()),
        base_env: env,
        base_cwd: cwd,
        ..StartOptions::default()
    };
    match state.registry.start_with(*spec, opts).await {
        Ok(s) => Ok(StartResult {
            id: s.info.id,
            session: s.info.session,
            already_running: s.already_running,
            output_path: s.info.output_path,
            after_seq: if s.already_running {
                state.registry.hub().latest()
            } else {
                after_seq
            },
            wake: state.wake_report(&session).wake,
        }),
        Err(e) => Err((start_error(&e), e.to_string())),
    }
}

/// The error kind of a failed start.
pub(crate) fn start_error(e: &StartError) -> ErrorKind {
    match e {
        StartError::Invalid(_) | StartError::Cwd(_) => ErrorKind::Invalid,
        StartError::Limit { .. } => ErrorKind::Limit,
        StartError::Closed => ErrorKind::Internal,
        StartError::Storage(_) => ErrorKind::DiskFull,
    }
}

/// `list`: active monitors first, then those ended in the last hour.
pub(crate) fn list(state: &State, r: ListMonitors) -> Handled<ListMonitors> {
    Ok(state
        .registry
        .list()
        .into_iter()
        .filter(|i| r.session.as_ref().is_none_or(|s| &i.session == s))
        .collect())
}

/// `get`: one monitor, active or recorded.
pub(crate) fn get(state: &State, r: GetMonitor) -> Handled<GetMonitor> {
    find(state, &r.id).ok_or_else(|| not_found(&r.id))
}

/// `stop` of a monitor of this host; `not_found` (with the registry's
/// message) when it is not here.
pub(crate) async fn stop(state: &State, r: &StopMonitor) -> Handled<StopMonitor> {
    state
        .registry
        .stop(&r.id)
        .await
        .map_err(|e| (ErrorKind::NotFound, e.to_string()))
}

/// `session_end`: stops every active monitor of the session.
pub(crate) async fn end_session(state: &State, r: EndSession) -> Handled<EndSession> {
    let stopped = state.registry.end_session(&r.session).await;
    Ok(SessionEndResult {
        session: r.session,
        stopped,
    })
}

/// A monitor, active or recently ended, else from the store.
pub(crate) fn find(state: &State, id: &str) -> Option<MonitorInfo> {
    state
        .registry
        .get(id)
        .or_else(|| state.reader.monitor(id).ok().flatten().map(|m| m.info))
}

/// `not_found` for a monitor id.
pub(crate) fn not_found(id: &str) -> Failure {
    (
        ErrorKind::NotFound,
        format!("monitor {id} not found; `wakeful list` shows the monitors of this session"),
    )
}
