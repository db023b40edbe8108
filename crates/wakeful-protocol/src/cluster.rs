//! What the cluster link (docs/CLUSTER.md) shows: `status`'s `cluster`,
//! `cluster_status` and `cluster_monitors` results.

use serde::{Deserialize, Serialize};
use wakeful_core::MonitorInfo;

/// The state of this host's connection to NATS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkState {
    /// Not connected yet since the daemon started.
    Connecting,
    /// Connected: events ship and import.
    Up,
    /// Not connected: the connection was lost, or an attempt to connect
    /// failed (`LinkStatus::down_reason` says why); retrying with backoff.
    /// Events wait in the local log.
    Down,
}

impl std::fmt::Display for LinkState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LinkState::Connecting => "connecting",
            LinkState::Up => "up",
            LinkState::Down => "down",
        })
    }
}

/// This host's cluster link (`status --json`'s `cluster`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkStatus {
    /// This host's name in the cluster.
    pub host: String,
    /// The NATS server URL(s) configured.
    pub url: String,
    /// The connection.
    pub link: LinkState,
    /// Events of this host not acknowledged by the stream yet.
    pub waiting_to_ship: u64,
    /// Every event of this host up to this seq is in the stream.
    pub shipped_seq: u64,
    /// Events of other hosts in the stream not imported here yet (`None`
    /// until the link could ask).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import_lag: Option<u64>,
    /// Events shipped since the daemon started.
    pub shipped: u64,
    /// Events of other hosts imported since the daemon started.
    pub imported: u64,
    /// Messages the importer passed over since the daemon started: its own
    /// host's, already imported (a redelivery), or unreadable
    /// (`import_rejected` counts those).
    pub import_skipped: u64,
    /// Messages that were not a wakeful event (acknowledged and dropped).
    pub import_rejected: u64,
    /// Publications that failed (retried from the first unacknowledged).
    pub publish_failures: u64,
    /// Times a later event reached the stream before an earlier one whose
    /// publication failed (it is published again; importers then see the
    /// two out of order).
    pub reordered: u64,
    /// Times the link came up.
    pub connects: u64,
    /// Times the link went down.
    pub disconnects: u64,
    /// The last error of the link, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Why the link is not up: the last failed connection attempt (the
    /// server's refusal, a TLS failure, an unreachable address) in words
    /// that say what to do. Absent while the link is up, and before an
    /// attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_reason: Option<String>,
}

/// One host as its last heartbeat described it (`cluster_status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostStatus {
    /// The host.
    pub host: String,
    /// When its last heartbeat was sent (RFC 3339).
    pub last_heartbeat: String,
    /// Milliseconds since then, by this host's clock.
    pub age_ms: u64,
    /// Whether it is to be taken as alive: a heartbeat within three
    /// heartbeat intervals.
    pub alive: bool,
    /// Its events not in the stream yet.
    pub waiting_to_ship: u64,
    /// Events of other hosts it has not imported yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import_lag: Option<u64>,
    /// Its running monitors.
    pub monitors_running: usize,
    /// Whether it accepts `start --host` and `stop` from other hosts.
    pub accept_remote: bool,
}

/// Result of `cluster_status` (`wakeful cluster status --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatus {
    /// This host's link.
    pub link: LinkStatus,
    /// Every host with a heartbeat in the bucket, this one included, by name.
    pub hosts: Vec<HostStatus>,
}

/// A monitor of some host (`list --all-hosts --json`): the monitor as
/// `list --json` shows it, with `host`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostMonitor {
    /// The host it runs (or ran) on.
    pub host: String,
    /// The monitor.
    #[serde(flatten)]
    pub monitor: MonitorInfo,
}
