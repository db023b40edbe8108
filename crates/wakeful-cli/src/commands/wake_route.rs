//! `wakeful wake set|show|clear`: a session's wake route.

use wakeful_client::Paths;
use wakeful_protocol::{WakeDelivery, WakeStatus};

use crate::cli::{WakeAdapterArgs, WakeCommand};
use crate::render::{print_json, show};
use crate::{ask, exit, Failure};

/// The route `wake set` asks for, checked here (exit 2, the daemon is not
/// even contacted) as the daemon would, and for the programs it runs on this
/// client's PATH. Relative program paths become absolute: the daemon runs
/// them from `/`.
fn wake_route(adapter: WakeAdapterArgs) -> Result<wakeful_protocol::WakeAdapter, Failure> {
    use wakeful_protocol::WakeAdapter;
    let cwd = std::env::current_dir()?;
    let absolute = |p: std::path::PathBuf| {
        if p.is_relative() && p.as_os_str().as_encoded_bytes().contains(&b'/') {
            // Without the `.` components (`./notify.sh`).
            cwd.join(p).components().collect()
        } else {
            p
        }
    };
    let route = match adapter {
        WakeAdapterArgs::Codex {
            thread,
            binary,
            codex_home,
        } => WakeAdapter::Codex {
            thread,
            binary: binary.map(absolute),
            codex_home: codex_home.map(|h| cwd.join(h)),
        },
        WakeAdapterArgs::Opencode {
            url,
            opencode_session,
            directory,
        } => WakeAdapter::Opencode {
            url,
            opencode_session,
            directory,
        },
        WakeAdapterArgs::Exec {
            busy_exit_codes,
            mut argv,
        } => {
            if let Some(program) = argv.first_mut() {
                *program = absolute(std::path::PathBuf::from(&*program))
                    .display()
                    .to_string();
            }
            WakeAdapter::Exec {
                argv,
                busy_exit_codes,
            }
        }
        WakeAdapterArgs::Webhook { url } => WakeAdapter::Webhook { url },
    };
    let refused = |e: &dyn std::fmt::Display| {
        Failure::new(exit::USAGE, format!("wake set {}: {e}", route.name()))
    };
    route.validate().map_err(|e| refused(&e))?;
    route
        .check_programs(std::env::var_os("PATH").as_deref())
        .map_err(|e| refused(&e))?;
    Ok(route)
}

pub(super) async fn wake(
    paths: &Paths,
    session: String,
    cmd: WakeCommand,
    json: bool,
) -> Result<u8, Failure> {
    match cmd {
        WakeCommand::Clear => {
            let request = wakeful_protocol::ClearWake {
                session: session.clone(),
            };
            let v = ask(paths, request).await?;
            show(&v, json, |v| {
                let done = if v.cleared { "cleared" } else { "was not set" };
                outln!("session {session}: route {done}")
            })?;
        }
        WakeCommand::Set { adapter } => {
            let route = wake_route(adapter)?;
            route.check_session(&session).map_err(|e| {
                Failure::new(exit::USAGE, format!("wake set {}: {e}", route.name()))
            })?;
            let request = wakeful_protocol::SetWake {
                session: session.clone(),
                route,
            };
            let v = ask(paths, request).await?;
            print_wake(Some(&v), &session, json)?;
        }
        WakeCommand::Show => {
            let request = wakeful_protocol::ShowWake {
                session: session.clone(),
            };
            let v = ask(paths, request).await?;
            print_wake(v.as_ref(), &session, json)?;
        }
    }
    Ok(0)
}

fn print_wake(v: Option<&WakeStatus>, session: &str, json: bool) -> Result<(), Failure> {
    if json {
        return print_json(&v);
    }
    let Some(v) = v else {
        outln!("session {session} has no wake route (`wakeful wake set --help`)")?;
        return Ok(());
    };
    let source = serde_json::to_value(v.source).unwrap_or_default();
    outln!("session:  {session}")?;
    outln!(
        "adapter:  {} ({})",
        v.route.name(),
        source.as_str().unwrap_or("?")
    )?;
    let mut rows: Vec<(&str, String)> = Vec::new();
    match &v.delivery {
        WakeDelivery::Idle => outln!("state:    idle")?,
        WakeDelivery::Delivering { wake_id } => {
            outln!("state:    delivering")?;
            rows.push(("wake_id", wake_id.clone()));
        }
        WakeDelivery::Retrying {
            wake_id,
            attempts,
            next_attempt_in_ms,
        } => {
            outln!("state:    retrying")?;
            rows.push(("wake_id", wake_id.clone()));
            rows.push(("attempts", attempts.to_string()));
            rows.push(("next_attempt_in_ms", next_attempt_in_ms.to_string()));
        }
        WakeDelivery::Queued {
            wake_id,
            checks,
            next_check_in_ms,
            detail,
        } => {
            outln!("state:    queued")?;
            rows.push(("wake_id", wake_id.clone()));
            rows.push(("detail", detail.clone()));
            rows.push(("checks", checks.to_string()));
            rows.push(("next_check_in_ms", next_check_in_ms.to_string()));
        }
        WakeDelivery::Undelivered {
            wake_id,
            reason,
            events_from,
            events_to,
        } => {
            outln!("state:    undelivered")?;
            rows.push(("wake_id", wake_id.clone()));
            rows.push(("reason", reason.clone()));
            rows.push(("events", format!("#{events_from}–#{events_to}")));
        }
    }
    if let Some(e) = &v.last_error {
        rows.push(("last_error", e.clone()));
    }
    rows.push(("acked_seq", v.acked_seq.to_string()));
    rows.push(("wakes_delivered", v.wakes_delivered.to_string()));
    for (key, value) in rows {
        // Values come from agents and servers: one sanitized line each.
        outln!(
            "{:<9} {}",
            format!("{key}:"),
            wakeful_core::present::one_line(&value)
        )?;
    }
    if !v.recent.is_empty() {
        outln!("recent deliveries (newest last):")?;
        for d in &v.recent {
            outln!(
                "  {} {} attempt {} events #{}–#{}: {}{}",
                d.at,
                d.wake_id,
                d.attempt,
                d.events_from,
                d.events_to,
                d.outcome,
                d.detail
                    .as_deref()
                    .map(|x| format!(" ({})", wakeful_core::present::one_line(x)))
                    .unwrap_or_default()
            )?;
        }
    }
    Ok(())
}
