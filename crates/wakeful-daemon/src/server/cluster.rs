//! Requests that go through the cluster link (`[cluster]`,
//! docs/CLUSTER.md): `start --host`, `stop` of another host's monitor,
//! `cluster_status`, `cluster_monitors`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use wakeful_cluster::{Link, LinkError};
use wakeful_protocol::{
    Call, ErrorKind, GetClusterStatus, ListClusterMonitors, ReplyError, StartMonitor, StartResult,
    StopMonitor,
};

use super::conn::Handled;
use crate::state::{Failure, State};

fn link(state: &State) -> Result<&Link, Failure> {
    state.cluster.get().ok_or_else(|| {
        (
            ErrorKind::Invalid,
            "this daemon has no cluster link: add [cluster] to config.toml (docs/CLUSTER.md) and restart it (`wakeful daemon stop`)".into(),
        )
    })
}

fn link_error(e: LinkError) -> Failure {
    (ErrorKind::Unreachable, e.to_string())
}

/// `start` with `host`: here when it names this host, else through the
/// link on that host.
pub(crate) async fn start(state: &State, host: &str, r: StartMonitor) -> Handled<StartMonitor> {
    let link = link(state)?;
    if host == link.host() {
        return super::monitors::start(state, r).await;
    }
    let session = r.session.clone();
    let request = StartMonitor {
        session: r.session,
        spec: r.spec,
        env: BTreeMap::new(),
        cwd: PathBuf::new(),
        host: None,
    };
    let result: StartResult = remote(link, host, request).await?;
    Ok(StartResult {
        // Its events reach this log after what is in it now; whether they
        // wake the agent is decided here.
        after_seq: state.registry.hub().latest(),
        wake: state.wake_report(&session).wake,
        ..result
    })
}

/// `stop` of a monitor that is not here: through the link on the host whose
/// directory entry lists it running. `not_here` is the local error.
pub(crate) async fn stop(state: &State, r: StopMonitor, not_here: String) -> Handled<StopMonitor> {
    let Some(link) = state.cluster.get() else {
        return Err((ErrorKind::NotFound, not_here));
    };
    let monitors = match link.monitors(None).await {
        Ok(m) => m,
        Err(e) => {
            return Err((
                ErrorKind::NotFound,
                format!("{not_here} (other hosts' monitors could not be looked up: {e})"),
            ))
        }
    };
    let host = monitors
        .into_iter()
        .find(|m| m.monitor.id == r.id && m.host != link.host() && m.monitor.is_active())
        .map(|m| m.host);
    let Some(host) = host else {
        return Err((
            ErrorKind::NotFound,
            format!(
                "{not_here}; no host of the cluster lists it running (`wakeful list --all-hosts`)"
            ),
        ));
    };
    remote(link, &host, r).await
}

/// `request` on another host: its typed result, or its error (named after
/// it).
async fn remote<C: Call>(link: &Link, host: &str, request: C) -> Handled<C> {
    let reply = link
        .remote(host, request.into())
        .await
        .map_err(link_error)?;
    C::decode(reply).map_err(|e| match e {
        ReplyError::Refused { kind, message } => (kind, format!("host {host}: {message}")),
        ReplyError::Unexpected(m) => (ErrorKind::Internal, format!("host {host} answered {m}")),
    })
}

/// `cluster_status`.
pub(crate) async fn status(state: &State, _: GetClusterStatus) -> Handled<GetClusterStatus> {
    link(state)?.cluster_status().await.map_err(link_error)
}

/// `cluster_monitors`.
pub(crate) async fn monitors(
    state: &State,
    r: ListClusterMonitors,
) -> Handled<ListClusterMonitors> {
    link(state)?
        .monitors(r.session.as_deref())
        .await
        .map_err(link_error)
}
