//! The resume digest of a session (see [`wakeful_core::digest`]): its
//! running monitors, those that ended after the furthest cursor of its
//! consumers, and how many events of each the agent has not had yet.

use wakeful_core::digest::{Digest, DigestMonitor, MAX_LISTED};
use wakeful_core::{EventBody, MonitorInfo};
use wakeful_engine::MonitorRegistry;
use wakeful_store::{StoreError, StoreReader};

/// The digest of `session` now.
pub fn build(
    registry: &MonitorRegistry,
    reader: &StoreReader,
    session: &str,
) -> Result<Digest, StoreError> {
    let seen_seq = reader.furthest_cursor(session)?;
    let last_seq = reader.latest_seq_of(session)?;
    let unread = reader.unread_by_monitor(session, seen_seq)?;
    let unread_of = |id: &str| unread.get(id).copied().unwrap_or(0);
    let mut running: Vec<MonitorInfo> = registry
        .list()
        .into_iter()
        .filter(|m| m.session == session && m.is_active())
        .collect();
    running.sort_by_key(|m| m.started_at);
    let more_active = running.len().saturating_sub(MAX_LISTED) as u64;
    let active = running
        .iter()
        .take(MAX_LISTED)
        .map(|m| DigestMonitor {
            id: m.id.clone(),
            description: m.description.clone(),
            ended: None,
            unread: unread_of(&m.id),
        })
        .collect();
    let (endings, total) = reader.endings_after(session, seen_seq, MAX_LISTED)?;
    let mut ended: Vec<DigestMonitor> = endings
        .iter()
        .map(|e| {
            let how = match &e.body {
                EventBody::MonitorStopped { reason, .. } => reason.to_string(),
                EventBody::MonitorFailed { error, .. } => format!("failed: {error}"),
                _ => e.text.clone(),
            };
            let description = registry
                .get(&e.monitor_id)
                .map(|m| m.description)
                .or_else(|| {
                    reader
                        .monitor(&e.monitor_id)
                        .ok()
                        .flatten()
                        .map(|m| m.info.description)
                })
                .unwrap_or_default();
            DigestMonitor {
                id: e.monitor_id.clone(),
                description,
                ended: Some(how),
                unread: unread_of(&e.monitor_id),
            }
        })
        .collect();
    // Oldest first, as the events came.
    ended.reverse();
    Ok(Digest {
        session: session.to_string(),
        seen_seq,
        last_seq,
        active,
        more_active,
        ended,
        more_ended: total.saturating_sub(MAX_LISTED as u64),
    })
}
