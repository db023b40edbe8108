//! `import`: events and monitors recorded in another state directory (or
//! on another host), kept here through the event hub so that followers see
//! them like local ones.
//!
//! - Each event keeps its *origin* (`<host>/<seq there>`); the store keeps
//!   one event per origin, so importing a file twice stores nothing twice.
//!   Its seq is this log's next one (seqs are this log's own).
//! - Events of a monitor of this state directory (it has events recorded
//!   here, or it is running here) are passed over: importing an export
//!   into the directory it came from adds nothing.
//! - Monitors are registered as ended (never re-armed, never stopped).
//! - Events from a file ([`From::File`], the `import` request) are kept
//!   apart from those the cluster link brings: their origin is stored as
//!   `file:<host>/<seq>`, so a file can neither take the place of another
//!   host's events (an origin the link would then pass over) nor replace
//!   them, and their `host` says they were imported (`build-1 (imported)`,
//!   [`wakeful_core::export::imported_host`]), so they never read as that
//!   host's. One whose event the link already brought (origin
//!   `<host>/<seq>`) is passed over. A request that breaks these rules
//!   (an origin that is not `<host>/<seq>`, a monitor id wakeful would not
//!   write) stores nothing.

use std::collections::{BTreeMap, HashSet};

use wakeful_core::journal::{JournalEntry, Registration};
use wakeful_core::{MonitorInfo, MonitorSpec, MonitorState, PendingEvent};
use wakeful_engine::MonitorRegistry;
use wakeful_protocol::{ImportResult, ImportedEvent};
use wakeful_store::{StoreError, StoreReader};

/// Why an import was refused (nothing was stored).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The daemon is stopping.
    #[error("the daemon is stopping; import again once it runs")]
    Closed,
    /// The request breaks the import rules (see the module docs): an
    /// origin that is not `<host>/<seq>`.
    #[error("{0}; nothing was imported")]
    Origin(#[from] OriginError),
    /// A monitor id that is not one wakeful writes.
    #[error("{0}; nothing was imported")]
    MonitorId(#[from] wakeful_core::export::MonitorIdError),
}

/// Why an origin is not `<host>/<seq>`.
#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    /// Not a host, a `/` and a seq above 0.
    #[error("origin {shown:?} is not <host>/<seq>")]
    Form {
        /// The origin as shown: its first 80 characters, on one line.
        shown: String,
    },
    /// A host name that cannot be used.
    #[error("origin {origin}: {source}")]
    Host {
        /// The origin.
        origin: String,
        /// Why.
        #[source]
        source: wakeful_core::export::HostError,
    },
}

/// Where imported events come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// A file (`wakeful import`, the `import` request).
    File,
    /// The cluster link: another host's events, as that host sent them.
    Cluster,
}

/// The host and seq of an origin `<host>/<seq>`, checked.
fn split_origin(origin: &str) -> Result<(&str, u64), OriginError> {
    let bad = || OriginError::Form {
        shown: wakeful_core::present::one_line(&origin.chars().take(80).collect::<String>()),
    };
    let (host, seq) = origin.rsplit_once('/').ok_or_else(bad)?;
    wakeful_core::export::check_host(host).map_err(|source| OriginError::Host {
        origin: origin.to_string(),
        source,
    })?;
    let seq: u64 = seq.parse().map_err(|_| bad())?;
    if seq == 0 {
        return Err(bad());
    }
    Ok((host, seq))
}

/// Keeps `events` and `monitors`; see the module docs.
pub async fn import(
    registry: &MonitorRegistry,
    reader: &StoreReader,
    mut events: Vec<ImportedEvent>,
    monitors: Vec<MonitorInfo>,
    from: From,
) -> Result<ImportResult, ImportError> {
    // The origin each event is passed over for, besides the one it is
    // stored under (a file's: the link's copy of the same event).
    let mut also = Vec::with_capacity(events.len());
    if from == From::File {
        for m in &monitors {
            wakeful_core::export::check_monitor_id(&m.id)?;
        }
        for e in &mut events {
            let host = split_origin(&e.origin)?.0.to_string();
            wakeful_core::export::check_monitor_id(&e.event.monitor_id)?;
            e.event.host = Some(wakeful_core::export::imported_host(
                e.event.host.as_deref(),
                &host,
            ));
            let plain = std::mem::take(&mut e.origin);
            e.origin = format!("file:{plain}");
            also.push(Some(plain));
        }
    } else {
        also.resize(events.len(), None);
    }
    let mut ids: Vec<&str> = monitors.iter().map(|m| m.id.as_str()).collect();
    ids.extend(events.iter().map(|e| e.event.monitor_id.as_str()));
    let mut local = HashSet::new();
    for id in ids {
        if local.contains(id) {
            continue;
        }
        let running_here = registry.get(id).is_some_and(|i| i.is_active());
        if running_here || reader.has_local_events(id)? {
            local.insert(id.to_string());
        }
    }
    // When each monitor's last imported event happened: its end, for a
    // record that was exported while it still ran.
    let mut last_ts = BTreeMap::new();
    for e in &events {
        last_ts
            .entry(e.event.monitor_id.clone())
            .and_modify(|t| *t = e.event.ts.max(*t))
            .or_insert(e.event.ts);
    }
    let mut entries = Vec::with_capacity(events.len() + monitors.len());
    let mut kept = Vec::new();
    for mut info in monitors {
        if local.contains(&info.id) {
            continue;
        }
        if info.state != MonitorState::Ended {
            info.state = MonitorState::Ended;
            info.ended_at = Some(last_ts.get(&info.id).copied().unwrap_or(info.started_at));
        }
        info.persistent = false;
        let mut spec = MonitorSpec::command("", info.description.clone());
        spec.source = info.source.clone();
        spec.timeout_ms = info.timeout_ms;
        spec.key = info.key.clone();
        entries.push(JournalEntry::Registered(Box::new(Registration {
            info: info.clone(),
            spec,
            base_env: None,
            base_cwd: None,
        })));
        kept.push(info);
    }
    let mut imported = 0;
    let mut skipped = 0;
    let mut seen = HashSet::new();
    for (ImportedEvent { origin, event }, plain) in events.into_iter().zip(also) {
        let known_plain = match &plain {
            Some(p) => reader.has_origin(p)?,
            None => false,
        };
        if local.contains(&event.monitor_id)
            || !seen.insert(origin.clone())
            || known_plain
            || reader.has_origin(&origin)?
        {
            skipped += 1;
            continue;
        }
        imported += 1;
        entries.push(JournalEntry::Imported {
            origin,
            event: PendingEvent {
                session: event.session,
                monitor_id: event.monitor_id,
                ts: event.ts,
                text: event.text,
                body: event.body,
                wakes: event.wakes,
                replayed: event.replayed,
                host: event.host,
            },
        });
    }
    registry
        .hub()
        .append(entries)
        .await
        .map_err(|_| ImportError::Closed)?;
    let monitors = kept.len() as u64;
    for info in kept {
        registry.insert_ended(info);
    }
    Ok(ImportResult {
        imported,
        skipped,
        monitors,
    })
}
