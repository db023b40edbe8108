//! Terminals: `run`, `terminal_list`, `terminal_get`, `terminal_kill`,
//! `terminal_wait`.

use wakeful_core::terminal::TerminalInfo;
use wakeful_core::MonitorSpec;
use wakeful_engine::StartOptions;
use wakeful_protocol::{
    ErrorKind, GetTerminal, KillTerminal, ListTerminals, RunRequest, RunResult, WaitTerminal,
};

use super::conn::Handled;
use super::monitors::start_error;
use crate::state::{Failure, State};

/// Live terminals, then those the store remembers from earlier daemons
/// (ended within the last hour).
fn terminals(state: &State) -> Vec<TerminalInfo> {
    let mut list = state.registry.terminals().list();
    let cutoff = chrono::Utc::now() - chrono::Duration::hours(1);
    if let Ok(stored) = state.reader.terminals() {
        for t in stored {
            let recent = t.ended_at.is_some_and(|e| e >= cutoff);
            if recent && !list.iter().any(|l| l.id == t.id) {
                list.push(t);
            }
        }
    }
    list
}

fn not_found(id: &str) -> Failure {
    (
        ErrorKind::NotFound,
        format!("terminal {id} not found; `wakeful terminal list` shows them"),
    )
}

/// `terminal_list`.
pub(crate) fn list(state: &State, r: ListTerminals) -> Handled<ListTerminals> {
    Ok(terminals(state)
        .into_iter()
        .filter(|t| r.session.as_ref().is_none_or(|s| &t.session == s))
        .collect())
}

/// `terminal_get`.
pub(crate) fn get(state: &State, r: GetTerminal) -> Handled<GetTerminal> {
    terminals(state)
        .into_iter()
        .find(|t| t.id == r.id)
        .ok_or_else(|| not_found(&r.id))
}

/// `terminal_kill`: stops its command, once it ended.
pub(crate) async fn kill(state: &State, r: KillTerminal) -> Handled<KillTerminal> {
    let t = state
        .registry
        .terminals()
        .kill(&r.id)
        .await
        .map_err(|_| not_found(&r.id))?;
    state
        .registry
        .sync_within(wakeful_engine::registry::REGISTER_WAIT)
        .await;
    Ok(t)
}

/// `terminal_wait`: until its command ended.
pub(crate) async fn wait(state: &State, r: WaitTerminal) -> Handled<WaitTerminal> {
    match state.registry.terminals().wait(&r.id).await {
        Ok(t) => Ok(t),
        Err(_) => terminals(state)
            .into_iter()
            .find(|t| t.id == r.id)
            .ok_or_else(|| not_found(&r.id)),
    }
}

/// `run`: a terminal, and with `until` a monitor attached to it.
pub(crate) async fn run(state: &State, run: RunRequest) -> Handled<RunRequest> {
    let RunRequest {
        session,
        command,
        env,
        cwd,
        until,
        description,
    } = run;
    state
        .storage
        .writable("start a terminal")
        .map_err(|m| (ErrorKind::DiskFull, m.to_string()))?;
    // Check the monitor's parameters before starting anything.
    let monitor_spec = until.map(|until| {
        let mut spec =
            MonitorSpec::command(command.clone(), description.clone().unwrap_or_default());
        if spec.description.is_empty() {
            spec.description = spec.source.default_description();
        }
        spec.until = Some(until);
        spec
    });
    if let Some(spec) = &monitor_spec {
        spec.validate()
            .map_err(|e| (ErrorKind::Invalid, e.to_string()))?;
    }
    if !cwd.is_dir() {
        return Err((
            ErrorKind::Invalid,
            format!("working directory {} does not exist", cwd.display()),
        ));
    }
    // With a monitor to attach, hold the output back until it is attached,
    // so that it sees every line.
    let (gate_tx, gate_rx) = tokio::sync::oneshot::channel();
    let gate = monitor_spec.as_ref().map(|_| gate_rx);
    let term = state
        .registry
        .terminals()
        .run_gated(
            &session,
            &command,
            Some(env.clone()),
            Some(cwd.clone()),
            gate,
        )
        .await
        .map_err(|e| (ErrorKind::Invalid, e.to_string()))?;
    let mut monitor_id = None;
    if let Some(mut spec) = monitor_spec {
        spec.source = wakeful_core::Source::Terminal {
            terminal_id: term.id.clone(),
        };
        let opts = StartOptions {
            session: Some(session.clone()),
            base_env: Some(env),
            base_cwd: Some(cwd),
            ..StartOptions::default()
        };
        let started = state.registry.start_with(spec, opts).await;
        let _ = gate_tx.send(());
        match started {
            Ok(s) => monitor_id = Some(s.info.id),
            Err(e) => {
                let _ = state.registry.terminals().kill(&term.id).await;
                return Err((start_error(&e), e.to_string()));
            }
        }
    }
    Ok(RunResult {
        wake: state.wake_report(&session).wake,
        id: term.id,
        session,
        output_path: term.output_path,
        monitor_id,
    })
}
