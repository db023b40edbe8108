//! The cluster's directory: the stream and buckets every host uses, each
//! host's heartbeat (bucket [`HOSTS_BUCKET`]) and monitors (bucket
//! [`MONITORS_BUCKET`]), one key per host.
//!
//! A host puts its monitors whenever the set of its monitors or their
//! states change (checked on the hub's commits, at most every 100 ms) and
//! with every heartbeat (every `heartbeat_ms`, with fresh counters), and its
//! heartbeat (`Beat`) every `heartbeat_ms`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, kv, stream};
use chrono::{DateTime, Utc};
use futures_util::TryStreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;
use wakeful_core::MonitorInfo;
use wakeful_engine::Hub;
use wakeful_protocol::{HostMonitor, HostStatus};

use crate::shared::{Backoff, LinkError, Node, Shared};
use crate::subject::{self, HOSTS_BUCKET, MONITORS_BUCKET, STREAM};

/// A host's heartbeat, as stored in [`HOSTS_BUCKET`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Beat {
    /// The host.
    pub host: String,
    /// When it was sent (milliseconds since the Unix epoch).
    pub ts_ms: i64,
    /// The host's heartbeat interval.
    pub heartbeat_ms: u64,
    /// Its events not in the stream yet.
    pub waiting_to_ship: u64,
    /// Events of other hosts it has not imported yet.
    pub import_lag: Option<u64>,
    /// Its running monitors.
    pub monitors_running: usize,
    /// Whether it accepts remote control.
    pub accept_remote: bool,
}

/// A host's monitors, as stored in [`MONITORS_BUCKET`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostMonitors {
    /// The host.
    pub host: String,
    /// When they were put (milliseconds since the Unix epoch).
    pub updated_ms: i64,
    /// Its monitors: active, and ended within the hour.
    pub monitors: Vec<MonitorInfo>,
}

/// The stream and buckets, once made (or found).
#[derive(Clone)]
pub(crate) struct Ready {
    pub(crate) stream: stream::Stream,
    pub(crate) hosts: kv::Store,
    pub(crate) monitors: kv::Store,
}

/// Makes (or finds) the stream and buckets once the link is up; every task
/// waits for it.
#[derive(Clone)]
pub(crate) struct Setup {
    shared: Arc<Shared>,
    js: jetstream::Context,
    ready: Arc<OnceCell<Ready>>,
}

/// The stream's configuration.
pub(crate) fn stream_config(retention_hours: u64) -> stream::Config {
    stream::Config {
        name: STREAM.into(),
        subjects: vec![subject::EVENTS_ALL.into()],
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::Old,
        max_age: Duration::from_secs(retention_hours.saturating_mul(3600)),
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    }
}

impl Setup {
    pub(crate) fn new(shared: Arc<Shared>, js: jetstream::Context) -> Self {
        Setup {
            shared,
            js,
            ready: Arc::new(OnceCell::new()),
        }
    }

    /// The stream and buckets; waits for the link and retries with backoff.
    pub(crate) async fn get(&self) -> Ready {
        self.ready
            .get_or_init(|| async {
                let mut backoff = Backoff::new();
                loop {
                    self.shared.wait_up().await;
                    match self.make().await {
                        Ok(r) => return r,
                        Err(e) => {
                            self.shared
                                .error(format!("cannot set up stream {STREAM}: {e}"));
                            backoff.wait().await;
                        }
                    }
                }
            })
            .await
            .clone()
    }

    /// Makes sure the stream exists again (a server that lost its store).
    pub(crate) async fn ensure_stream(&self) -> Result<(), LinkError> {
        self.js
            .get_or_create_stream(stream_config(self.shared.config.retention_hours))
            .await
            .map(|_| ())
            .map_err(|e| LinkError::Nats(e.to_string()))
    }

    async fn make(&self) -> Result<Ready, LinkError> {
        let nats = |e: &dyn std::fmt::Display| LinkError::Nats(e.to_string());
        let stream = self
            .js
            .get_or_create_stream(stream_config(self.shared.config.retention_hours))
            .await
            .map_err(|e| nats(&e))?;
        let hosts = bucket(&self.js, HOSTS_BUCKET).await?;
        let monitors = bucket(&self.js, MONITORS_BUCKET).await?;
        Ok(Ready {
            stream,
            hosts,
            monitors,
        })
    }
}

async fn bucket(js: &jetstream::Context, name: &str) -> Result<kv::Store, LinkError> {
    if let Ok(store) = js.get_key_value(name).await {
        return Ok(store);
    }
    js.create_key_value(kv::Config {
        bucket: name.into(),
        history: 1,
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await
    .map_err(|e| LinkError::Nats(format!("bucket {name}: {e}")))
}

/// What of the monitors makes a change worth putting: ids and states.
fn signature(monitors: &[MonitorInfo]) -> Vec<(String, bool)> {
    let mut sig: Vec<(String, bool)> = monitors
        .iter()
        .map(|m| (m.id.clone(), m.is_active()))
        .collect();
    sig.sort();
    sig
}

/// Puts this host's heartbeat and monitors; see the module docs.
pub(crate) async fn run(shared: Arc<Shared>, node: Arc<dyn Node>, hub: Hub, setup: Setup) {
    let ready = setup.get().await;
    let key = subject::encode(&shared.host);
    let every = Duration::from_millis(shared.config.heartbeat_ms);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut latest = hub.latest_watch();
    let mut last_sig = None;
    loop {
        let beat = tokio::select! {
            _ = tick.tick() => true,
            changed = latest.changed() => {
                if changed.is_err() {
                    return;
                }
                false
            }
        };
        let monitors = node.monitors();
        let sig = signature(&monitors);
        if beat || last_sig.as_ref() != Some(&sig) {
            let value = HostMonitors {
                host: shared.host.clone(),
                updated_ms: Utc::now().timestamp_millis(),
                monitors,
            };
            match put(&ready.monitors, &key, &value).await {
                Ok(()) => last_sig = Some(sig.clone()),
                Err(e) => shared.error(format!("cannot publish this host's monitors: {e}")),
            }
        }
        if beat {
            if let Ok(info) = ready
                .stream
                .consumer_info(subject::consumer_name(&shared.host))
                .await
            {
                shared.import_lag.store(
                    info.num_pending + info.num_ack_pending as u64,
                    Ordering::SeqCst,
                );
            }
            let value = Beat {
                host: shared.host.clone(),
                ts_ms: Utc::now().timestamp_millis(),
                heartbeat_ms: shared.config.heartbeat_ms,
                waiting_to_ship: shared.waiting_to_ship(),
                import_lag: shared.import_lag(),
                monitors_running: sig.iter().filter(|(_, active)| *active).count(),
                accept_remote: shared.config.accept_remote,
            };
            if let Err(e) = put(&ready.hosts, &key, &value).await {
                shared.error(format!("cannot send the heartbeat: {e}"));
            }
        } else {
            // At most one look at the monitors per 100 ms under a flood of
            // commits.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn put<T: Serialize>(store: &kv::Store, key: &str, value: &T) -> Result<(), LinkError> {
    let bytes = serde_json::to_vec(value).map_err(|e| LinkError::Nats(e.to_string()))?;
    store
        .put(key, bytes.into())
        .await
        .map(|_| ())
        .map_err(|e| LinkError::Nats(e.to_string()))
}

async fn entries<T: for<'de> Deserialize<'de>>(store: &kv::Store) -> Result<Vec<T>, LinkError> {
    let nats = |e: &dyn std::fmt::Display| LinkError::Nats(e.to_string());
    let keys: Vec<String> = store
        .keys()
        .await
        .map_err(|e| nats(&e))?
        .try_collect()
        .await
        .map_err(|e| nats(&e))?;
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        if let Some(bytes) = store.get(&key).await.map_err(|e| nats(&e))? {
            match serde_json::from_slice(&bytes) {
                Ok(v) => out.push(v),
                Err(e) => tracing::warn!("cluster: unreadable directory entry {key}: {e}"),
            }
        }
    }
    Ok(out)
}

/// Every host's last heartbeat, by host name.
pub(crate) async fn hosts(js: &jetstream::Context) -> Result<Vec<HostStatus>, LinkError> {
    let store = js
        .get_key_value(HOSTS_BUCKET)
        .await
        .map_err(|e| LinkError::Nats(e.to_string()))?;
    let now = Utc::now();
    let mut hosts: Vec<HostStatus> = entries::<Beat>(&store)
        .await?
        .into_iter()
        .map(|b| {
            let ts = DateTime::<Utc>::from_timestamp_millis(b.ts_ms).unwrap_or(now);
            let age_ms = (now - ts).num_milliseconds().max(0) as u64;
            HostStatus {
                alive: age_ms <= 3 * b.heartbeat_ms.max(1000),
                host: b.host,
                last_heartbeat: wakeful_core::event::format_ts(&ts),
                age_ms,
                waiting_to_ship: b.waiting_to_ship,
                import_lag: b.import_lag,
                monitors_running: b.monitors_running,
                accept_remote: b.accept_remote,
            }
        })
        .collect();
    hosts.sort_by(|a, b| a.host.cmp(&b.host));
    Ok(hosts)
}

/// Every host's monitors, by host, active first.
pub(crate) async fn monitors(js: &jetstream::Context) -> Result<Vec<HostMonitor>, LinkError> {
    let store = js
        .get_key_value(MONITORS_BUCKET)
        .await
        .map_err(|e| LinkError::Nats(e.to_string()))?;
    let mut all: Vec<HostMonitor> = entries::<HostMonitors>(&store)
        .await?
        .into_iter()
        .flat_map(|h| {
            let host = h.host;
            h.monitors.into_iter().map(move |monitor| HostMonitor {
                host: host.clone(),
                monitor,
            })
        })
        .collect();
    all.sort_by(|a, b| {
        (!a.monitor.is_active(), &a.host, a.monitor.started_at).cmp(&(
            !b.monitor.is_active(),
            &b.host,
            b.monitor.started_at,
        ))
    });
    Ok(all)
}
