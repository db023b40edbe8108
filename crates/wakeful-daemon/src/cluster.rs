//! The daemon's side of the cluster link (`[cluster]`, docs/CLUSTER.md):
//! what the link needs of the daemon ([`ClusterNode`]: the import path,
//! starting and stopping for other hosts, the monitor list), and the
//! requests that go through the link (`start --host`, `stop` of another
//! host's monitor, `cluster_status`, `cluster_monitors`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use wakeful_cluster::{Link, LinkError};
use wakeful_core::{MonitorInfo, MonitorSpec};
use wakeful_protocol::{
    ClusterStatus, ErrorKind, HostMonitor, ImportResult, ImportedEvent, Reply, Request, StartResult,
};

use crate::server::State;

type Failure = (ErrorKind, String);

/// The daemon as the link sees it.
pub(crate) struct ClusterNode {
    pub(crate) state: Weak<State>,
}

impl wakeful_cluster::Node for ClusterNode {
    fn import(
        &self,
        events: Vec<ImportedEvent>,
    ) -> wakeful_cluster::BoxFuture<'_, Result<ImportResult, String>> {
        Box::pin(async move {
            let state = self.state.upgrade().ok_or("the daemon is stopping")?;
            crate::import::import(
                state.registry(),
                state.reader(),
                events,
                Vec::new(),
                crate::import::From::Cluster,
            )
            .await
            .map_err(|e| e.to_string())
        })
    }

    fn control(&self, request: Request) -> wakeful_cluster::BoxFuture<'_, Reply> {
        Box::pin(async move {
            let Some(state) = self.state.upgrade() else {
                return error(ErrorKind::Internal, "the daemon is stopping".into());
            };
            let answer = match request {
                Request::Start { session, spec, .. } => {
                    crate::server::start_here(&state, session, spec, None, None)
                        .await
                        .and_then(|r| to_value(&r))
                }
                Request::Stop { id } => match state.registry().stop(&id).await {
                    Ok(info) => to_value(&info),
                    Err(e) => Err((ErrorKind::NotFound, e.to_string())),
                },
                other => Err((
                    ErrorKind::Refused,
                    format!("{} is not taken from other hosts", other.op()),
                )),
            };
            match answer {
                Ok(result) => Reply::Ok { result },
                Err((kind, message)) => error(kind, message),
            }
        })
    }

    fn monitors(&self) -> Vec<MonitorInfo> {
        self.state
            .upgrade()
            .map(|s| s.registry().list())
            .unwrap_or_default()
    }
}

fn error(kind: ErrorKind, message: String) -> Reply {
    Reply::Error { kind, message }
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<serde_json::Value, Failure> {
    serde_json::to_value(v).map_err(|e| (ErrorKind::Internal, e.to_string()))
}

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

/// Starts the link when `[cluster]` is configured.
pub(crate) async fn start_link(
    config: wakeful_cluster::ClusterConfig,
    state: &Arc<State>,
) -> Result<(), LinkError> {
    let node = Arc::new(ClusterNode {
        state: Arc::downgrade(state),
    });
    let link = Link::start(
        config,
        node,
        state.registry().hub().clone(),
        state.reader().clone(),
    )
    .await?;
    let _ = state.cluster.set(link);
    Ok(())
}

/// `start` with `host`: here when it names this host, else through the
/// link on that host.
pub(crate) async fn start(
    state: &State,
    host: &str,
    session: String,
    spec: Box<MonitorSpec>,
    env: BTreeMap<String, String>,
    cwd: PathBuf,
) -> Result<StartResult, Failure> {
    let link = link(state)?;
    if host == link.host() {
        return crate::server::start_here(state, session, spec, Some(env), Some(cwd)).await;
    }
    let request = Request::Start {
        session: session.clone(),
        spec,
        env: BTreeMap::new(),
        cwd: PathBuf::new(),
        host: None,
    };
    let result: StartResult = answer(host, link.remote(host, request).await)?;
    Ok(StartResult {
        // Its events reach this log after what is in it now; whether they
        // wake the agent is decided here.
        after_seq: state.registry().hub().latest(),
        wake: state.wake_report(&session).wake,
        ..result
    })
}

/// `stop` of a monitor that is not here: through the link on the host whose
/// directory entry lists it running. `not_here` is the local error.
pub(crate) async fn stop(
    state: &State,
    id: &str,
    not_here: String,
) -> Result<MonitorInfo, Failure> {
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
        .find(|m| m.monitor.id == id && m.host != link.host() && m.monitor.is_active())
        .map(|m| m.host);
    let Some(host) = host else {
        return Err((
            ErrorKind::NotFound,
            format!(
                "{not_here}; no host of the cluster lists it running (`wakeful list --all-hosts`)"
            ),
        ));
    };
    answer(
        &host,
        link.remote(&host, Request::Stop { id: id.to_string() })
            .await,
    )
}

/// The result of another host's reply, or its error (named after it).
fn answer<T: serde::de::DeserializeOwned>(
    host: &str,
    reply: Result<Reply, LinkError>,
) -> Result<T, Failure> {
    match reply.map_err(link_error)? {
        Reply::Ok { result } => serde_json::from_value(result)
            .map_err(|e| (ErrorKind::Internal, format!("host {host} answered: {e}"))),
        Reply::Error { kind, message } => Err((kind, format!("host {host}: {message}"))),
        other => Err((
            ErrorKind::Internal,
            format!("host {host} answered {other:?}"),
        )),
    }
}

/// `cluster_status`.
pub(crate) async fn status(state: &State) -> Result<ClusterStatus, Failure> {
    link(state)?.cluster_status().await.map_err(link_error)
}

/// `cluster_monitors`.
pub(crate) async fn monitors(
    state: &State,
    session: Option<&str>,
) -> Result<Vec<HostMonitor>, Failure> {
    link(state)?.monitors(session).await.map_err(link_error)
}
