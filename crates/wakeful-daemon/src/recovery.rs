//! After a crash: what the dead daemon left behind.
//!
//! The daemon starts commands with `PR_SET_PDEATHSIG`, so each monitor's `sh`
//! dies with it, but grandchildren (`tail -F x | grep y`, `sleep &`) may
//! live on. On start, the new daemon kills every live process that belongs to
//! a monitor its store still lists as running: a process belongs to monitor
//! `M` when its environment carries `WAKEFUL_MONITOR_ID=M` (every descendant
//! inherits it), or when it is in the recorded process group and started no
//! earlier than the recorded process (a descendant that cleared its
//! environment). Then persistent monitors are re-armed and the others end
//! with `daemon_stopped`.

use chrono::Utc;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use wakeful_core::journal::{Journal, JournalEntry};
use wakeful_core::{EventBody, MonitorStopReason, PendingEvent};
use wakeful_engine::process::{all_processes, has_env, ProcInfo};
use wakeful_engine::{MonitorRegistry, StartOptions};

use crate::DaemonError;

/// Kills what is left of monitor `monitor_id` (recorded process group
/// `pgid`, started at `start_ticks`). Returns how many processes were killed.
pub fn kill_leftovers(monitor_id: &str, pgid: Option<i32>, start_ticks: Option<u64>) -> usize {
    let me = std::process::id() as i32;
    let victims: Vec<ProcInfo> = all_processes()
        .into_iter()
        .filter(|p| p.is_live() && p.pid != me)
        .filter(|p| {
            let in_group = pgid.is_some_and(|g| g > 1 && p.pgrp == g)
                && start_ticks.is_some_and(|t| p.start_ticks >= t);
            in_group || has_env(p.pid, "WAKEFUL_MONITOR_ID", monitor_id)
        })
        .collect();
    for p in &victims {
        let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
    }
    victims.len()
}

/// A monitor to go on with, as the store keeps it, and what an upgrade
/// handed over of it.
pub(crate) type ToAdopt = (wakeful_store::StoredMonitor, wakeful_engine::HandedMonitor);

/// Kills leftovers of monitors the store lists as running, ends the
/// non-persistent ones with `daemon_stopped`, and returns the persistent ones
/// to re-arm; those an upgrade handed over (`handed`) are left running and
/// returned to go on with.
pub(crate) fn recover(
    writer: &mut wakeful_store::StoreWriter,
    reader: &wakeful_store::StoreReader,
    containers: Option<&wakeful_platform::tree::ContainerRoot>,
    handed: &[wakeful_engine::HandedMonitor],
) -> Result<(Vec<wakeful_store::StoredMonitor>, Vec<ToAdopt>), DaemonError> {
    let mut rearm = Vec::new();
    let mut adopt = Vec::new();
    let mut batch = Vec::new();
    for m in reader.running_monitors()? {
        if let Some(h) = handed.iter().find(|h| h.id == m.info.id) {
            adopt.push((m, h.clone()));
            continue;
        }
        let killed = kill_leftovers(&m.info.id, m.pid, m.start_ticks)
            + containers.map_or(0, |c| c.clean_up(&m.info.id));
        if killed > 0 {
            tracing::warn!(
                "killed {killed} leftover processes of monitor {}",
                m.info.id
            );
        }
        if m.info.persistent {
            rearm.push(m);
            continue;
        }
        batch.push(JournalEntry::Event(PendingEvent {
            session: m.info.session.clone(),
            monitor_id: m.info.id.clone(),
            ts: Utc::now(),
            text: format!(
                "{}: daemon stopped (the wakeful daemon ended while this monitor ran; start it again if still needed)",
                m.info.description
            ),
            body: EventBody::MonitorStopped {
                reason: MonitorStopReason::DaemonStopped,
                last_lines: vec![],
                survivors: vec![],
                unverified: None,
            },
            wakes: true,
            replayed: matches!(m.info.source, wakeful_core::Source::Replay { .. }),
            host: None,
        }));
    }
    for mut t in reader.terminals()? {
        if t.state != wakeful_core::MonitorState::Running {
            continue;
        }
        kill_leftovers(&t.id, t.pid, None);
        if let Some(c) = containers {
            c.clean_up(&t.id);
        }
        t.state = wakeful_core::MonitorState::Ended;
        t.exit = Some(MonitorStopReason::DaemonStopped);
        t.ended_at = Some(Utc::now());
        t.monitors = 0;
        batch.push(JournalEntry::Terminal(t));
    }
    if !batch.is_empty() {
        writer.append(&mut batch)?;
    }
    Ok((rearm, adopt))
}

/// Starts the persistent monitors a crash or a stop left, under their ids.
pub(crate) async fn rearm(registry: &MonitorRegistry, to_rearm: Vec<wakeful_store::StoredMonitor>) {
    for m in to_rearm {
        start_again(registry, m, None).await;
    }
}

/// Goes on with the monitors an upgrade handed over, under their ids.
pub(crate) async fn adopt(registry: &MonitorRegistry, to_adopt: Vec<ToAdopt>) {
    for (m, handed) in to_adopt {
        start_again(registry, m, Some(handed)).await;
    }
}

/// Starts `m` again under its id and session: re-armed, or going on with
/// the command an upgrade `handed` over.
async fn start_again(
    registry: &MonitorRegistry,
    m: wakeful_store::StoredMonitor,
    handed: Option<wakeful_engine::HandedMonitor>,
) {
    let how = if handed.is_some() {
        "go on with"
    } else {
        "re-arm"
    };
    let opts = StartOptions {
        session: Some(m.info.session.clone()),
        id: Some(m.info.id.clone()),
        rearm: handed.is_none(),
        base_env: m.base_env,
        base_cwd: m.base_cwd,
        adopt: handed,
    };
    if let Err(e) = registry.start_with(m.spec, opts).await {
        tracing::error!("cannot {how} monitor {}: {e}", m.info.id);
    }
}
