//! The daemon and its store: `status`, `shutdown`, `upgrade`, `import`,
//! `prune`, `prunes`.

use std::sync::atomic::Ordering::SeqCst;

use wakeful_core::MonitorInfo;
use wakeful_protocol::{
    ErrorKind, GetStatus, Import, ListPrunes, Prune, Shutdown, ShutdownResult, Status, Upgrade,
    UpgradeResult, PROTOCOL_VERSION,
};

use super::conn::Handled;
use crate::state::State;

/// `status`: the daemon's facts.
pub(crate) fn status(state: &State, _: GetStatus) -> Handled<GetStatus> {
    let all = state.registry.list();
    let running: Vec<&MonitorInfo> = all.iter().filter(|i| i.is_active()).collect();
    let mut sessions: Vec<&str> = running.iter().map(|i| i.session.as_str()).collect();
    sessions.sort_unstable();
    sessions.dedup();
    let health = &state.health;
    Ok(Status {
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        protocol: PROTOCOL_VERSION,
        socket: state.paths.socket(),
        state_dir: state.paths.state_dir.clone(),
        monitors_running: running.len(),
        monitors_recently_ended: all.len() - running.len(),
        sessions_active: sessions.len(),
        last_seq: state.registry.hub().latest(),
        wakes_undelivered: state.wakes.undelivered().len(),
        followers: state.followers.load(SeqCst),
        journal_failures: state.registry.journal_failures(),
        connections: health.connections.load(SeqCst),
        max_open_files: wakeful_platform::fd::max_open_files(),
        cluster: state.cluster.get().map(|l| l.status()),
        accept_errors: health.accept_errors.load(SeqCst),
        last_accept_error: health
            .last_accept_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|(t, _)| t.clone()),
        connections_refused: health.refused.load(SeqCst),
        upgrades: state.upgrades.0,
        upgraded_from: state.upgrades.1.clone(),
        storage: Some(state.storage.status()),
        event_webhooks: state.subscriptions.infos(),
    })
}

/// What `shutdown` answers before the daemon stops.
pub(crate) fn shutdown_result(_: Shutdown) -> ShutdownResult {
    ShutdownResult {
        pid: std::process::id(),
    }
}

/// `upgrade`: checks the new program and says what will be handed over;
/// the daemon hands over once this is answered (`crate::upgrade`). A
/// terminal cannot be handed over yet: while one runs, nothing changes.
pub(crate) async fn upgrade(state: &State, r: Upgrade) -> Handled<Upgrade> {
    if state.upgrade_to.borrow().is_some() {
        return Err((ErrorKind::Busy, "an upgrade is already under way".into()));
    }
    let terminals = state
        .registry
        .terminals()
        .list()
        .into_iter()
        .filter(|t| t.state == wakeful_core::MonitorState::Running)
        .count();
    if terminals > 0 {
        return Err((
            ErrorKind::Invalid,
            format!(
                "{terminals} terminal(s) are running (`wakeful terminal list`), and an upgrade cannot hand a terminal over yet; wait for them or kill them (`wakeful terminal kill ID`), then upgrade. Nothing changed"
            ),
        ));
    }
    let check = crate::upgrade::check_binary(&r.binary)
        .await
        .map_err(|e| (ErrorKind::Invalid, e.to_string()))?;
    Ok(UpgradeResult {
        pid: std::process::id(),
        from: env!("CARGO_PKG_VERSION").to_string(),
        to: check.version,
        binary: r.binary,
        monitors: state
            .registry
            .list()
            .iter()
            .filter(|i| i.is_active())
            .count(),
        upgrades: state.upgrades.0,
    })
}

/// `import`: events and monitors recorded elsewhere.
pub(crate) async fn import(state: &State, r: Import) -> Handled<Import> {
    state
        .storage
        .writable("import events")
        .map_err(|m| (ErrorKind::DiskFull, m.to_string()))?;
    crate::import::import(
        &state.registry,
        &state.reader,
        r.events,
        r.monitors,
        crate::import::From::File,
    )
    .await
    .map_err(|e| match e {
        crate::import::ImportError::Origin(_) | crate::import::ImportError::MonitorId(_) => {
            (ErrorKind::Invalid, e.to_string())
        }
        e => (ErrorKind::Internal, e.to_string()),
    })
}

/// `prune`: now, or only what would go.
pub(crate) async fn prune(state: &State, r: Prune) -> Handled<Prune> {
    state
        .storage
        .prune(chrono::Utc::now(), r.dry_run)
        .await
        .map_err(|e| (ErrorKind::Internal, e.to_string()))
}

/// `prunes`: what prunes removed.
pub(crate) fn prunes(state: &State, r: ListPrunes) -> Handled<ListPrunes> {
    state
        .reader
        .prunes(r.since)
        .map_err(|e| (ErrorKind::Internal, e.to_string()))
}
