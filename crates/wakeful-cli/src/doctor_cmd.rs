//! `wakeful doctor`: will a wake arrive for this session, and if not, why
//! and what to do. It looks at the state directory, the daemon, what is
//! attached to the session (the daemon's `wake_check`), the wake route's
//! target, and the Claude Code plugin; it prints a fix for each problem and
//! exits 0 only when a wake would arrive and it found no problem (a wake
//! route whose program is gone, or whose server does not answer, does not
//! count as a way a wake arrives).

use std::path::Path;

use wakeful_agents::doctor_check::{Check, Level};
use wakeful_client::{connect_existing, ClientError, Paths};
use wakeful_protocol::{ConsumerInfo, Status, WakeReport, WakeStatus};

use crate::{exit, Failure};

/// Less free space than this in the state directory is a problem.
const LOW_SPACE: u64 = 100 * 1024 * 1024;

/// `wakeful doctor [--session S] [--json]`.
pub async fn doctor(paths: &Paths, session: String, json: bool) -> Result<u8, Failure> {
    let mut checks = vec![state_dir(paths), platform(paths)];
    let mut consumers = Vec::new();
    let report = match daemon(paths, &session).await {
        Ok((status, mut report, route, found)) => {
            consumers = found;
            checks.push(daemon_check(&status));
            checks.extend(status.storage.as_ref().map(store_check));
            checks.extend(webhooks_check(&status.event_webhooks));
            // The route's own target, probed here: a program that is gone
            // or a server that does not answer means no wake comes that way,
            // whatever its last delivery said.
            let mut target = Vec::new();
            if let Some(route) = &route {
                target = wakeful_agents::route_probe::probe(&route.session, &route.route).await;
                if let Some(broken) = target.iter().find(|c| c.level == Level::Problem) {
                    let name = route.route.name();
                    let via = wakeful_protocol::WakeVia::Route(name.to_string());
                    for p in report.paths.iter_mut().filter(|p| p.path == via && p.live) {
                        p.live = false;
                        p.detail =
                            format!("the {name} wake route cannot deliver: {}", broken.detail);
                    }
                    if report.wake.live && report.wake.route == via {
                        report.wake = match report.paths.iter().find(|p| p.live) {
                            Some(p) => wakeful_protocol::WakeInfo {
                                route: p.path.clone(),
                                live: true,
                                reason: p.detail.clone(),
                            },
                            None => wakeful_protocol::WakeInfo {
                                route: via,
                                live: false,
                                reason: format!(
                                    "nothing will wake you: the {name} wake route cannot deliver: {}",
                                    broken.detail
                                ),
                            },
                        };
                    }
                }
            }
            checks.extend(report.paths.iter().map(|p| {
                Check::new(
                    &format!("path {}", p.path),
                    if p.live { Level::Ok } else { Level::Problem },
                    p.detail.clone(),
                )
            }));
            checks.extend(target);
            Some(report)
        }
        Err(e) => {
            checks.push(Check::problem(
                "daemon",
                format!("no daemon answers at {}: {e}", paths.socket().display()),
                format!(
                    "any wakeful command starts it (`wakeful daemon` starts it now); if it does not stay up, read {}",
                    paths.state_dir.join("daemon.log").display()
                ),
            ));
            None
        }
    };
    let claude = consumers
        .iter()
        .find(|c| c.consumer == wakeful_agents::claude_code::CONSUMER);
    checks.extend(wakeful_agents::claude_code::plugin_check::checks(
        paths, &session, claude,
    ));
    let live = report.as_ref().is_some_and(|r| r.wake.live);
    let verdict = match &report {
        Some(r) if r.wake.live => Check::new(
            "wake",
            Level::Ok,
            format!(
                "a wake would arrive through {}: {}",
                r.wake.route, r.wake.reason
            ),
        ),
        Some(r) => Check::problem("wake", r.wake.reason.clone(), how_to_be_woken(&session)),
        None => Check::problem(
            "wake",
            "nothing will wake you: the daemon is not running",
            how_to_be_woken(&session),
        ),
    };
    checks.push(verdict);
    // The exit code follows the findings: any problem is one.
    let problems = checks.iter().filter(|c| c.level == Level::Problem).count();
    if json {
        let v = serde_json::json!({
            "session": session,
            "live": live,
            "problems": problems,
            "wake": report.as_ref().map(|r| &r.wake),
            "checks": checks,
        });
        outln!("{v}")?;
    } else {
        outln!("wakeful doctor · session `{session}`")?;
        for c in &checks {
            let tag = match c.level {
                Level::Ok => "ok     ",
                Level::Problem => "PROBLEM",
                Level::Info => "info   ",
            };
            outln!("  {tag}  {:<22} {}", c.name, c.detail)?;
            if let Some(fix) = &c.fix {
                outln!("  {:7}  {:<22} fix: {fix}", "", "")?;
            }
        }
        match (live, problems) {
            (true, 0) => outln!("A wake would arrive for session `{session}`.")?,
            (true, n) => outln!(
                "A wake would arrive for session `{session}`, but {n} problem{} above need{} fixing (exit 1).",
                if n == 1 { "" } else { "s" },
                if n == 1 { "s" } else { "" }
            )?,
            (false, _) => outln!("No wake would arrive for session `{session}` (exit 1).")?,
        }
    }
    Ok(if live && problems == 0 {
        0
    } else {
        exit::FAILURE
    })
}

/// What an agent can do to be woken.
fn how_to_be_woken(session: &str) -> String {
    format!(
        "before ending your turn, block on `wakeful wait --session {session}` (or the monitor_wait tool); in Claude Code, install the plugin (`wakeful integrate claude-code`); in Codex, start monitors from inside Codex (they route themselves) or `wakeful wake set codex --session {session}`; for any other agent, `wakeful wake set exec -- PROGRAM {{text}}` with a program that starts a turn"
    )
}

fn state_dir(paths: &Paths) -> Check {
    let dir = &paths.state_dir;
    if let Err(e) = paths.prepare() {
        return Check::problem(
            "state directory",
            e.to_string(),
            "point WAKEFUL_HOME (or XDG_STATE_HOME) at a directory you can write, or fix its permissions",
        );
    }
    let probe = dir.join(format!(".doctor-{}", std::process::id()));
    if let Err(e) = std::fs::write(&probe, b"") {
        return Check::problem(
            "state directory",
            format!("{} is not writable: {e}", dir.display()),
            "fix its permissions or free space, or point WAKEFUL_HOME elsewhere",
        );
    }
    let _ = std::fs::remove_file(&probe);
    match free_space(dir) {
        Some(free) if free < LOW_SPACE => Check::problem(
            "state directory",
            format!(
                "{}: only {} free",
                dir.display(),
                wakeful_core::storage::ByteSize(free)
            ),
            "free disk space: events and output files are written there",
        ),
        Some(free) => Check::new(
            "state directory",
            Level::Ok,
            format!(
                "{} (writable, {} free)",
                dir.display(),
                wakeful_core::storage::ByteSize(free)
            ),
        ),
        None => Check::new(
            "state directory",
            Level::Ok,
            format!("{} (writable)", dir.display()),
        ),
    }
}

fn free_space(dir: &Path) -> Option<u64> {
    wakeful_platform::disk::space(dir)
        .ok()
        .map(|(free, _)| free)
}

/// The platform backend the daemon uses (docs/PLATFORMS.md): what
/// `WAKEFUL_PLATFORM` says, else config.toml's `platform`, else the
/// system's own; with the posix backend, what it cannot guarantee.
fn platform(paths: &Paths) -> Check {
    let configured = wakeful_daemon::config::Config::load(&paths.config_file)
        .ok()
        .and_then(|c| c.platform);
    let from = match std::env::var("WAKEFUL_PLATFORM") {
        Ok(v) if !v.is_empty() => "WAKEFUL_PLATFORM",
        _ if configured.is_some() => "config.toml",
        _ => "this system's own",
    };
    match wakeful_platform::configure(configured.as_deref()) {
        Ok(b) if b.limits().is_empty() => Check::new(
            "platform",
            Level::Ok,
            format!("backend {} ({from}): stops find every process of a command", b.name()),
        ),
        Ok(b) => Check::new(
            "platform",
            Level::Info,
            format!(
                "backend {} ({from}); it cannot guarantee everything: {}; a stop that could not look everywhere says so in its final event and in `wakeful list` (`unverified`, with the pids it saw)",
                b.name(),
                b.limits().join("; ")
            ),
        ),
        Err(e) => Check::problem(
            "platform",
            e.to_string(),
            "set WAKEFUL_PLATFORM or config.toml's platform to linux or posix",
        ),
    }
}

/// What the daemon says: its status, the session's wake report, route and
/// consumers.
type DaemonFacts = (Status, WakeReport, Option<WakeStatus>, Vec<ConsumerInfo>);

async fn daemon(paths: &Paths, session: &str) -> Result<DaemonFacts, ClientError> {
    let mut conn = connect_existing(paths).await?;
    let status: Status = conn.call(wakeful_protocol::GetStatus {}).await?;
    let report: WakeReport = conn
        .call(wakeful_protocol::CheckWake {
            session: session.to_string(),
        })
        .await?;
    let route: Option<WakeStatus> = conn
        .call(wakeful_protocol::ShowWake {
            session: session.to_string(),
        })
        .await?;
    let consumers: Vec<ConsumerInfo> = conn
        .call(wakeful_protocol::ListConsumers {
            session: Some(session.to_string()),
        })
        .await?;
    Ok((status, report, route, consumers))
}

fn daemon_check(status: &Status) -> Check {
    let mine = env!("CARGO_PKG_VERSION");
    if status.version != mine {
        return Check::problem(
            "daemon",
            format!(
                "pid {} runs version {}, this command is {mine}",
                status.pid, status.version
            ),
            "restart it so both are the same: `wakeful daemon stop` (the next command starts the new one)",
        );
    }
    Check::new(
        "daemon",
        Level::Ok,
        format!(
            "pid {}, version {}, {} monitors running, socket {}",
            status.pid,
            status.version,
            status.monitors_running,
            status.socket.display()
        ),
    )
}

/// The webhook subscriptions of MCP Events (docs/agents/mcp.md): a problem
/// for each one given up; nothing when there are none.
fn webhooks_check(hooks: &[wakeful_protocol::EventSubscriptionInfo]) -> Option<Check> {
    if hooks.is_empty() {
        return None;
    }
    let given_up: Vec<String> = hooks
        .iter()
        .filter(|h| h.state != "active")
        .map(|h| {
            format!(
                "{} (session {}, {}): {}",
                h.id,
                h.session,
                h.url,
                h.last_error.as_deref().unwrap_or("given up")
            )
        })
        .collect();
    if given_up.is_empty() {
        let delivered: u64 = hooks.iter().map(|h| h.delivered).sum();
        return Some(Check::new(
            "webhooks",
            Level::Ok,
            format!(
                "{} MCP Events webhook subscriptions delivering ({delivered} delivered)",
                hooks.len()
            ),
        ));
    }
    Some(Check::problem(
        "webhooks",
        format!(
            "{} MCP Events webhook subscriptions given up, deliveries stopped: {}",
            given_up.len(),
            given_up.join("; ")
        ),
        "fix the receiver, then subscribe again with the same URL (events/subscribe refreshes it and resumes from where it stopped)",
    ))
}

/// What the store takes, and whether the disk lets it write (docs/STORAGE.md).
fn store_check(s: &wakeful_protocol::StorageStatus) -> Check {
    use wakeful_core::storage::ByteSize;
    let taken = format!(
        "{} of {} (database {}, output files {}), {} free, {} kept free",
        ByteSize(s.database_bytes + s.output_bytes),
        ByteSize(s.max_size),
        ByteSize(s.database_bytes),
        ByteSize(s.output_bytes),
        ByteSize(s.free_bytes),
        ByteSize(s.keep_free_bytes)
    );
    if s.disk_full {
        return Check::problem(
            "store",
            format!("the disk is full: {taken}; monitors cannot start and new events may wait"),
            "free space on the state directory's filesystem (`wakeful prune` removes ended monitors past max_age); the daemon resumes by itself",
        );
    }
    if s.disk_low {
        return Check::problem(
            "store",
            format!("the disk is low: {taken}; output files are not growing (their lines are counted, events still recorded)"),
            "free space on that filesystem, or lower `[store] keep_free` in config.toml",
        );
    }
    let pruned = s
        .last_prune
        .as_ref()
        .map(|p| format!("; last prune: {p}"))
        .unwrap_or_default();
    Check::new("store", Level::Ok, format!("{taken}{pruned}"))
}

/// `wakeful doctor --selftest [--json]`: the guarantees proved against a
/// scratch daemon started from this binary (`crate::selftest`).
pub async fn selftest(json: bool) -> Result<u8, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::new(exit::FAILURE, format!("where is this binary? {e}")))?;
    let (setting, checks) = tokio::task::spawn_blocking(move || crate::selftest::run(&exe))
        .await
        .map_err(|e| Failure::new(exit::FAILURE, format!("the self-test stopped: {e}")))?;
    if json {
        outln!("{}", crate::selftest::to_json(&setting, &checks))?;
    } else {
        outln!("{}", crate::selftest::render(&setting, &checks).trim_end())?;
    }
    Ok(crate::selftest::exit_code(&checks))
}
