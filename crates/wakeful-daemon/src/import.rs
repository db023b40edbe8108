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
}

/// Keeps `events` and `monitors`; see the module docs.
pub async fn import(
    registry: &MonitorRegistry,
    reader: &StoreReader,
    events: Vec<ImportedEvent>,
    monitors: Vec<MonitorInfo>,
) -> Result<ImportResult, ImportError> {
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
    for ImportedEvent { origin, event } in events {
        if local.contains(&event.monitor_id)
            || !seen.insert(origin.clone())
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
