//! The daemon as the cluster link sees it (`[cluster]`, docs/CLUSTER.md):
//! what the link needs of the daemon ([`ClusterNode`]: the import path,
//! starting and stopping for other hosts, the monitor list), and starting
//! the link. The requests that go through the link are
//! [`crate::server::cluster`]'s.

use std::sync::{Arc, Weak};

use wakeful_cluster::{Link, LinkError};
use wakeful_core::MonitorInfo;
use wakeful_protocol::{ErrorKind, ImportResult, ImportedEvent, Reply, Request};

use crate::state::{Failure, State};

/// The daemon as the link sees it.
pub(crate) struct ClusterNode {
    pub(crate) state: Weak<State>,
}

impl wakeful_cluster::Node for ClusterNode {
    fn import(
        &self,
        events: Vec<ImportedEvent>,
    ) -> wakeful_cluster::BoxFuture<'_, Result<ImportResult, wakeful_cluster::NodeImportError>>
    {
        Box::pin(async move {
            let state = self
                .state
                .upgrade()
                .ok_or(wakeful_cluster::NodeImportError::Stopping)?;
            crate::import::import(
                state.registry(),
                state.reader(),
                events,
                Vec::new(),
                crate::import::From::Cluster,
            )
            .await
            .map_err(|e| wakeful_cluster::NodeImportError::Refused(Box::new(e)))
        })
    }

    fn control(&self, request: Request) -> wakeful_cluster::BoxFuture<'_, Reply> {
        Box::pin(async move {
            let Some(state) = self.state.upgrade() else {
                return error((ErrorKind::Internal, "the daemon is stopping".into()));
            };
            let answer = match request {
                Request::Start(r) => {
                    crate::server::monitors::start_here(&state, r.session, r.spec, None, None)
                        .await
                        .and_then(|r| ok(&r))
                }
                Request::Stop(r) => crate::server::monitors::stop(&state, &r)
                    .await
                    .and_then(|r| ok(&r)),
                other => Err((
                    ErrorKind::Refused,
                    format!("{} is not taken from other hosts", other.op()),
                )),
            };
            answer.unwrap_or_else(error)
        })
    }

    fn monitors(&self) -> Vec<MonitorInfo> {
        self.state
            .upgrade()
            .map(|s| s.registry().list())
            .unwrap_or_default()
    }
}

fn error((kind, message): Failure) -> Reply {
    Reply::Error { kind, message }
}

fn ok<T: serde::Serialize>(result: &T) -> Result<Reply, Failure> {
    Reply::ok(result).map_err(|e| (ErrorKind::Internal, e.to_string()))
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
