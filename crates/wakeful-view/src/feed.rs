//! The daemon's read-only stream for a view: `list` now and then, and the
//! events with `follow`, reconnecting after the daemon went away and
//! catching up from the last seq seen (`after`): no gap, no duplicate.
//! Nothing is ever acknowledged.

use std::time::Duration;

use tokio::sync::mpsc;
use wakeful_client::{connect_existing, ClientError, Connection, Followed, Follower, Paths};
use wakeful_core::{Event, EventKind, MonitorInfo};
use wakeful_protocol::Status;

/// Sends a `list` result and the store's status; `false` once the view is
/// gone.
async fn send_list(
    control: &mut Connection,
    request: wakeful_protocol::ListMonitors,
    tx: &mpsc::Sender<FeedMsg>,
) -> Result<bool, ClientError> {
    let list: Vec<MonitorInfo> = control.call(request).await?;
    if tx.send(FeedMsg::Monitors(list)).await.is_err() {
        return Ok(false);
    }
    let status: Status = control.call(wakeful_protocol::GetStatus {}).await?;
    if let Some(storage) = status.storage {
        if tx.send(FeedMsg::Storage(Box::new(storage))).await.is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}

use crate::app::Scope;

/// What the feed tells its view.
#[derive(Debug, Clone, PartialEq)]
pub enum FeedMsg {
    /// Connected and streaming every event after this seq.
    Live {
        /// The stream's `after`: the first connection's start (history
        /// begins here), or the last seq seen before a reconnection.
        after: u64,
    },
    /// The connection was lost (or could not be made); retrying.
    Lost(String),
    /// A `list` result.
    Monitors(Vec<MonitorInfo>),
    /// Events in seq order, each after the previous message's.
    Events(Vec<Event>),
    /// What the store takes and the disk does (`status`'s `storage`), with
    /// every `list`.
    Storage(Box<wakeful_protocol::StorageStatus>),
}

/// How the feed reads.
#[derive(Debug, Clone)]
pub struct FeedOptions {
    /// Start this many seqs before the daemon's last one (history for the
    /// events pane and the sparklines); later events all come.
    pub history: u64,
    /// Ask `list` this often (line counts); sooner after a monitor started
    /// or ended.
    pub list_every: Duration,
    /// Start the daemon when none runs (at the first connection only).
    pub start_daemon: bool,
}

impl Default for FeedOptions {
    fn default() -> Self {
        FeedOptions {
            history: 50_000,
            list_every: Duration::from_secs(1),
            start_daemon: true,
        }
    }
}

/// Most events in one [`FeedMsg::Events`].
const BATCH: usize = 512;

/// How long events are gathered into one [`FeedMsg::Events`] after the
/// first (views draw at most every 33 ms; an event is never held longer).
const COALESCE: Duration = Duration::from_millis(10);

/// Starts the feed; it runs until the receiver is dropped.
pub fn spawn(paths: Paths, scope: Scope, options: FeedOptions) -> mpsc::Receiver<FeedMsg> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(run(paths, scope, options, tx));
    rx
}

async fn run(paths: Paths, scope: Scope, options: FeedOptions, tx: mpsc::Sender<FeedMsg>) {
    let mut follower =
        Follower::new(paths.clone(), None, options.history).start_daemon(options.start_daemon);
    loop {
        let outcome = stream(&paths, &scope, &options, &mut follower, &tx).await;
        if tx.is_closed() {
            return;
        }
        follower.reconnect();
        let why = match outcome {
            Ok(()) | Err(ClientError::Closed) => "the daemon closed the stream".to_string(),
            Err(e) => e.to_string(),
        };
        if tx.send(FeedMsg::Lost(why)).await.is_err() {
            return;
        }
    }
}

/// The follower's next event (or change of connection) for `scope`.
async fn next(follower: &mut Follower, scope: &Scope) -> Followed {
    match scope {
        Scope::Session(session) => {
            let request = |after| wakeful_protocol::ReadEvents {
                session: session.clone(),
                after,
                follow: true,
                ..Default::default()
            };
            follower.next(request, &[]).await
        }
        Scope::All => {
            let request = |after| wakeful_protocol::ReadAllEvents {
                after,
                follow: true,
                ..Default::default()
            };
            follower.next(request, &[]).await
        }
    }
}

/// One connection's life: returns when it broke.
async fn stream(
    paths: &Paths,
    scope: &Scope,
    options: &FeedOptions,
    follower: &mut Follower,
    tx: &mpsc::Sender<FeedMsg>,
) -> Result<(), ClientError> {
    let from = match next(follower, scope).await {
        Followed::Live { after } => after,
        Followed::Lost(e) => return Err(e),
        Followed::Event(..) => return Ok(()),
    };
    let mut control = connect_existing(paths).await?;
    let list_request = || wakeful_protocol::ListMonitors {
        session: scope.session().map(String::from),
    };
    if !send_list(&mut control, list_request(), tx).await? {
        return Ok(());
    }
    if tx.send(FeedMsg::Live { after: from }).await.is_err() {
        return Ok(());
    }
    let mut list_tick = tokio::time::interval(options.list_every);
    list_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut list_soon: Option<tokio::time::Instant> = None;
    loop {
        let soon = async {
            match list_soon {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            mut followed = next(follower, scope) => {
                let mut batch = vec![];
                let coalesce_until = tokio::time::Instant::now() + COALESCE;
                let end = loop {
                    let Followed::Event(event, _) = followed else {
                        break Some(followed);
                    };
                    follower.resume_after(event.seq);
                    if matches!(event.kind(), EventKind::Started | EventKind::Rearmed)
                        || event.kind().is_terminal()
                    {
                        list_soon.get_or_insert(
                            tokio::time::Instant::now() + Duration::from_millis(100),
                        );
                    }
                    batch.push(event);
                    if batch.len() >= BATCH {
                        break None;
                    }
                    // Take what comes within COALESCE: a view draws at most
                    // every 33 ms, and one message per event would wake it a
                    // thousand times a second under load.
                    match tokio::time::timeout_at(coalesce_until, next(follower, scope)).await {
                        Ok(next) => followed = next,
                        Err(_) => break None,
                    }
                };
                if !batch.is_empty() && tx.send(FeedMsg::Events(batch)).await.is_err() {
                    return Ok(());
                }
                match end {
                    Some(Followed::Lost(e)) => return Err(e),
                    Some(_) => return Ok(()),
                    None => {}
                }
            }
            _ = list_tick.tick() => {
                if !send_list(&mut control, list_request(), tx).await? {
                    return Ok(());
                }
            }
            _ = soon => {
                list_soon = None;
                if !send_list(&mut control, list_request(), tx).await? {
                    return Ok(());
                }
            }
        }
    }
}

/// One request on a connection of its own (to a running daemon); its
/// decoded result.
pub async fn call<C: wakeful_protocol::Call>(
    paths: &Paths,
    request: C,
) -> Result<C::Reply, ClientError> {
    let mut c = connect_existing(paths).await?;
    c.call(request).await
}
