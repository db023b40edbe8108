//! Remote control: `wakeful start --host H` and `wakeful stop ID` (for a
//! monitor of host H) as NATS requests to `wakeful.ctl.<H>`, answered by
//! H's daemon.
//!
//! A host answers only `start` and `stop`, and only when its own
//! `[cluster] accept_remote = true`; otherwise it refuses (error
//! `refused`). A `start` runs there under that host's limits and `[network]`
//! policy, with its daemon's environment and working directory (the
//! requester's are not sent) plus the spec's own `env` and `cwd`. No answer
//! (no such host, or NATS away) is `unreachable`.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use wakeful_protocol::{Envelope, ErrorKind, Reply, Request, PROTOCOL_VERSION};

use crate::shared::{Backoff, LinkError, Node, Shared};
use crate::subject;

/// How long a request waits for the other host (a `stop` waits for the
/// monitor's processes to end).
pub const TIMEOUT: Duration = Duration::from_secs(15);

/// Why a host refuses a request of another host (see [`admit`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Its config does not accept remote control.
    #[error("host {host} refuses remote control: its config.toml has no `accept_remote = true` under [cluster]")]
    NotAccepted {
        /// The host refusing.
        host: String,
    },
    /// A request other than `start` and `stop`.
    #[error("host {host} takes only start and stop from other hosts, not {op}")]
    Op {
        /// The host refusing.
        host: String,
        /// The request's op.
        op: &'static str,
    },
}

/// What host `host` runs of `request`, or why it refuses it (an error of
/// kind `refused`).
pub fn admit(host: &str, accept_remote: bool, request: Request) -> Result<Request, Refusal> {
    if !accept_remote {
        return Err(Refusal::NotAccepted {
            host: host.to_string(),
        });
    }
    match request {
        Request::Start(wakeful_protocol::StartMonitor { session, spec, .. }) => {
            Ok(Request::Start(wakeful_protocol::StartMonitor {
                session,
                spec,
                env: Default::default(),
                cwd: Default::default(),
                host: None,
            }))
        }
        Request::Stop(wakeful_protocol::StopMonitor { id }) => {
            Ok(Request::Stop(wakeful_protocol::StopMonitor { id }))
        }
        other => Err(Refusal::Op {
            host: host.to_string(),
            op: other.op(),
        }),
    }
}

/// Answers remote control for this host until the daemon stops.
pub(crate) async fn serve(shared: Arc<Shared>, client: async_nats::Client, node: Arc<dyn Node>) {
    let subject = subject::control_subject(&shared.host);
    let mut backoff = Backoff::new();
    let mut requests = loop {
        shared.wait_up().await;
        match client.subscribe(subject.clone()).await {
            Ok(s) => break s,
            Err(e) => {
                shared.error(format!("cannot answer remote control on {subject}: {e}"));
                backoff.wait().await;
            }
        }
    };
    while let Some(msg) = requests.next().await {
        let Some(reply_to) = msg.reply.clone() else {
            continue;
        };
        let reply = match serde_json::from_slice::<Envelope>(&msg.payload) {
            Err(e) => Reply::Error {
                kind: ErrorKind::Invalid,
                message: format!("not a wakeful request: {e}"),
            },
            Ok(env) if env.v != PROTOCOL_VERSION => Reply::Error {
                kind: ErrorKind::Version,
                message: format!(
                    "host {} speaks protocol {PROTOCOL_VERSION}, the request {}",
                    shared.host, env.v
                ),
            },
            Ok(env) => match admit(&shared.host, shared.config.accept_remote, env.request) {
                Ok(request) => {
                    tracing::info!("cluster: remote {} accepted", request.op());
                    node.control(request).await
                }
                Err(refusal) => Reply::Error {
                    kind: ErrorKind::Refused,
                    message: refusal.to_string(),
                },
            },
        };
        let bytes = serde_json::to_vec(&reply).unwrap_or_default();
        if let Err(e) = client.publish(reply_to, bytes.into()).await {
            shared.error(format!("cannot answer a remote request: {e}"));
        }
    }
}

/// Sends `request` to `host` and returns its answer.
pub(crate) async fn request(
    client: &async_nats::Client,
    host: &str,
    request: Request,
) -> Result<Reply, LinkError> {
    let env = Envelope {
        v: PROTOCOL_VERSION,
        request,
    };
    let payload = serde_json::to_vec(&env).map_err(|e| LinkError::Nats(e.to_string()))?;
    let unreachable = |detail: String| LinkError::Unreachable {
        host: host.to_string(),
        detail,
    };
    let answer = client
        .send_request(
            subject::control_subject(host),
            async_nats::Request::new()
                .payload(payload.into())
                .timeout(Some(TIMEOUT)),
        )
        .await
        .map_err(|e| match e.kind() {
            async_nats::RequestErrorKind::NoResponders => unreachable(format!(
                "no wakeful daemon of host {host} is connected to the cluster"
            )),
            async_nats::RequestErrorKind::TimedOut => {
                unreachable(format!("no answer within {} s", TIMEOUT.as_secs()))
            }
            _ => unreachable(e.to_string()),
        })?;
    serde_json::from_slice(&answer.payload)
        .map_err(|e| LinkError::Nats(format!("host {host} answered something else: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wakeful_core::MonitorSpec;

    fn start() -> Request {
        Request::Start(wakeful_protocol::StartMonitor {
            session: "s".into(),
            spec: Box::new(MonitorSpec::command("true", "d")),
            env: [("SECRET".to_string(), "x".to_string())].into(),
            cwd: "/home/me".into(),
            host: Some("b".into()),
        })
    }

    #[test]
    fn only_start_and_stop_and_only_when_accepted() {
        let refused = admit("b", false, start()).unwrap_err().to_string();
        assert!(refused.contains("accept_remote = true"), "{refused}");
        let Ok(Request::Start(wakeful_protocol::StartMonitor { env, cwd, host, .. })) =
            admit("b", true, start())
        else {
            panic!()
        };
        assert!(env.is_empty() && cwd.as_os_str().is_empty() && host.is_none());
        assert!(admit(
            "b",
            true,
            Request::Stop(wakeful_protocol::StopMonitor { id: "m".into() })
        )
        .is_ok());
        assert!(
            admit("b", true, Request::Shutdown(wakeful_protocol::Shutdown {}))
                .unwrap_err()
                .to_string()
                .contains("only start and stop")
        );
    }
}
