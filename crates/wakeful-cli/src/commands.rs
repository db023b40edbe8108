//! One function per command: build the request, talk to the daemon, print.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::AsFd;

use serde_json::json;
use wakeful_client::{connect, connect_existing, ClientError, Connection, ErrorKind, Paths};
use wakeful_core::{EventBody, MonitorInfo, MonitorSpec, MonitorStopReason};
use wakeful_protocol::{OutputForm, StartResult, WakeDelivery, WakeStatus};

use crate::cli::{
    Cli, Command, DaemonAction, DaemonArgs, HookCommand, PluginCommand, SessionCommand,
    TerminalCommand, WaitArgs, WakeAdapterArgs, WakeCommand,
};
use crate::render::{print_json, print_list, show};
use crate::{ask, exit, render, Failure};

/// Runs the parsed command line; returns the exit code.
pub async fn run(cli: Cli) -> Result<u8, Failure> {
    let paths = Paths::from_env().map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?;
    // In Gemini CLI's shell, where nothing names the session, it is the one
    // the Gemini process's hooks recorded (wakeful_agents::gemini).
    let (session, gemini_session) = {
        use wakeful_core::session::{resolve, Known, Source, COMMAND, DEFAULT_SESSION};
        let env = |k: &str| std::env::var(k).ok();
        let recorded = || wakeful_agents::gemini::shell_session(&paths);
        let known = Known::new(cli.session.as_deref(), &env).recorded(&recorded);
        match resolve(&COMMAND, &known) {
            Some((s, Source::Recorded)) => (s.clone(), Some(s)),
            Some((s, _)) => (s, None),
            None => (DEFAULT_SESSION.to_string(), None),
        }
    };
    let json = cli.json;
    match cli.command {
        Command::Start {
            monitor,
            source,
            host,
            command,
        } => {
            let spec = spec_of(&monitor, &source, command)?;
            start(&paths, session, spec, host, json).await
        }
        Command::Watch {
            monitor,
            source,
            command,
        } => watch(&paths, session, spec_of(&monitor, &source, command)?, json).await,
        Command::Run {
            until,
            description,
            command,
        } => run_terminal(&paths, session, until, description, command.join(" "), json).await,
        Command::Wake(cmd) => wake(&paths, session, cmd, json).await,
        Command::Validate { path } => crate::plugin_cmd::validate(&path, json),
        Command::Plugin(PluginCommand::Start { dir }) => {
            crate::plugin_cmd::start(
                &paths,
                session,
                &dir,
                wakeful_agents::claude_code::plugin::Which::Always,
                json,
            )
            .await
        }
        Command::Plugin(PluginCommand::Skill { dir, skill }) => {
            crate::plugin_cmd::start(
                &paths,
                session,
                &dir,
                wakeful_agents::claude_code::plugin::Which::Skill(skill),
                json,
            )
            .await
        }
        Command::Terminal(TerminalCommand::List { all_sessions }) => {
            terminal_list(&paths, (!all_sessions).then_some(session), json).await
        }
        Command::Terminal(TerminalCommand::Kill { id }) => terminal_kill(&paths, id, json).await,
        Command::Terminal(TerminalCommand::Output { id, range }) => {
            crate::output::terminal_output(&paths, id, &range).await
        }
        Command::List {
            all_sessions,
            all_hosts: true,
        } => list_all_hosts(&paths, (!all_sessions).then_some(session), json).await,
        Command::List {
            all_sessions,
            all_hosts: false,
        } => list(&paths, (!all_sessions).then_some(session), json).await,
        Command::Stop { id } => stop(&paths, id, json).await,
        Command::Consumers { all_sessions } => {
            consumers(&paths, (!all_sessions).then_some(session), json).await
        }
        Command::Events { after, follow } => events(&paths, session, after, follow, json).await,
        Command::Wait(mut args) => {
            if args.consumer.is_none() && gemini_session.is_some() {
                args.consumer = Some(wakeful_agents::gemini::CONSUMER.to_string());
            }
            wait(&paths, session, args, json).await
        }
        Command::Output { id, range } => crate::output::output(&paths, id, &range).await,
        Command::Session(SessionCommand::End { session }) => {
            session_end(&paths, session, json).await
        }
        Command::Status => status(&paths, json).await,
        Command::Prune { dry_run } => crate::storage::prune(&paths, dry_run, json).await,
        Command::Cluster(crate::cli::ClusterCommand::Status) => cluster_status(&paths, json).await,
        Command::Doctor { selftest: true } => crate::doctor::selftest(json).await,
        Command::Doctor { selftest: false } => crate::doctor::doctor(&paths, session, json).await,
        Command::Digest => digest(&paths, session, json).await,
        Command::Daemon(args) => daemon(paths, args, json).await,
        Command::AcpProxy { wake_on, agent } => {
            let env = |k: &str| std::env::var(k).ok();
            let known = wakeful_core::session::Known::new(cli.session.as_deref(), &env);
            let session = wakeful_core::session::resolve(&wakeful_core::session::ACP, &known)
                .map(|(s, _)| s)
                .unwrap_or_else(wakeful_acp::new_session_name);
            let opts = wakeful_acp::Options {
                agent,
                session,
                wake_on: wake_on.map(|w| w.to_string()),
            };
            wakeful_acp::run(paths, opts)
                .await
                .map_err(|e| Failure::new(e.exit_code(), e.to_string()))
        }
        Command::Mcp { protocol } => {
            let protocol = match protocol {
                Some(p) => p,
                None => mcp_protocol_from_config(&paths)?,
            };
            wakeful_mcp::serve_stdio(
                paths,
                wakeful_mcp::SessionChoice::new(cli.session.as_deref(), |k| std::env::var(k).ok()),
                protocol,
                wakeful_agents::claude_code::channels::enabled_above_me(),
            )
            .await
        }
        .map(|()| 0)
        .map_err(|e| Failure::new(exit::FAILURE, e.to_string())),
        Command::Tui { all_sessions } => {
            let scope = if all_sessions {
                wakeful_view::app::Scope::All
            } else {
                wakeful_view::app::Scope::Session(session)
            };
            let config = wakeful_view::load_config(&paths.config_file).map_err(view_failure)?;
            let errors = wakeful_view::error_regex(&config).map_err(view_failure)?;
            wakeful_view::tui::run(paths, scope, errors)
                .await
                .map(|()| 0)
                .map_err(view_failure)
        }
        Command::Web {
            port,
            open,
            write_deadline_ms,
            keep_alive_ms,
            ring,
        } => {
            let options = wakeful_view::web::WebOptions {
                port,
                write_deadline: std::time::Duration::from_millis(write_deadline_ms.max(1)),
                keep_alive: std::time::Duration::from_millis(keep_alive_ms.max(1)),
                ring: ring.max(1),
            };
            web(paths, options, open, json).await
        }
        Command::Hook(command) => hook(&paths, cli.session.as_deref(), command).await,
        Command::Integrate(crate::cli::IntegrateCommand::ClaudeCode) => {
            crate::integrate::claude_code(&paths, json)
        }
        Command::Integrate(crate::cli::IntegrateCommand::Gemini { project }) => {
            crate::integrate::gemini(project.as_deref(), json)
        }
        Command::Integrate(crate::cli::IntegrateCommand::Codex {
            hooks,
            project,
            remove,
        }) => crate::integrate::codex(hooks, project.as_deref(), remove, json),
        Command::Export {
            monitor,
            since,
            format,
            output,
            otlp_endpoint,
        } => {
            let sel = crate::export::Selection {
                session,
                monitor,
                since,
            };
            crate::export::export(&paths, sel, format, output, otlp_endpoint).await
        }
        Command::Import { file } => crate::export::import(&paths, &file, json).await,
        Command::Replay {
            file,
            monitor,
            speed,
            description,
            filter,
            timeout_ms,
        } => {
            let args = crate::export::ReplayArgs {
                file,
                monitor,
                speed,
                description,
                filter,
                timeout_ms,
            };
            crate::export::replay(&paths, session, args, json).await
        }
        Command::Completions { shell } => crate::package::completions(shell),
        Command::Man { dir } => crate::package::man(dir.as_deref(), json),
    }
}

/// `wakeful hook …`: the hooks of [`wakeful_agents::claude_code`],
/// [`wakeful_agents::gemini`] and [`wakeful_agents::codex::hooks`]. A hook's
/// failures exit 1 (never 2, which Claude Code reads as "show this to the
/// model" and Gemini CLI and Codex as "block").
async fn hook(paths: &Paths, session: Option<&str>, command: HookCommand) -> Result<u8, Failure> {
    use wakeful_agents::codex::hooks as codex;
    use wakeful_agents::{claude_code, gemini};
    let result = match command {
        HookCommand::Monitor { consumer } => claude_code::monitor(paths, session, &consumer).await,
        HookCommand::Rewake {
            consumer,
            timeout_ms,
        } => claude_code::rewake(paths, session, &consumer, timeout_ms).await,
        HookCommand::Stop { consumer } => claude_code::stop(paths, session, &consumer).await,
        HookCommand::SessionStart => claude_code::session_start(paths, session).await,
        HookCommand::GeminiSessionStart => gemini::session_start(paths, session).await,
        HookCommand::GeminiAfterTool { consumer } => {
            gemini::after_tool(paths, session, &consumer).await
        }
        HookCommand::GeminiAfterAgent { consumer } => {
            gemini::after_agent(paths, session, &consumer).await
        }
        HookCommand::CodexSessionStart => codex::session_start(paths, session).await,
        HookCommand::CodexStop { consumer } => codex::stop(paths, session, &consumer).await,
    };
    match result {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("wakeful hook: {}", Failure::from(e).message);
            Ok(exit::FAILURE)
        }
    }
}

/// `wakeful web`: serve until Ctrl-C or SIGTERM.
async fn web(
    paths: Paths,
    options: wakeful_view::web::WebOptions,
    open: bool,
    json: bool,
) -> Result<u8, Failure> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let config = wakeful_view::load_config(&paths.config_file).map_err(view_failure)?;
    let errors = wakeful_view::error_regex(&config).map_err(view_failure)?;
    let running = wakeful_view::web::serve(paths, options, errors)
        .await
        .map_err(view_failure)?;
    if json {
        print_json(&json!({"url": running.url, "port": running.addr.port()}))?;
    } else {
        outln!("{}", running.url)?;
    }
    if open {
        // Best effort: a desktop may have no xdg-open.
        let child = std::process::Command::new("xdg-open")
            .arg(&running.url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match child {
            // Collected when it exits, so it leaves no zombie.
            Ok(mut child) => drop(std::thread::spawn(move || child.wait())),
            Err(e) => eprintln!("wakeful: could not run xdg-open ({e}); open the URL yourself"),
        }
    }
    tokio::select! {
        r = running.wait() => r.map(|()| 0).map_err(view_failure),
        _ = interrupt.recv() => Ok(0),
        _ = terminate.recv() => Ok(0),
    }
}

/// A view that could not run: usage (no terminal, bad `[view]`) exits 2.
/// `[mcp] protocol` of config.toml, else `auto`. A file that cannot be
/// read or parsed is an error that names it (the daemon would refuse it
/// too).
fn mcp_protocol_from_config(paths: &Paths) -> Result<wakeful_mcp::era::Protocol, Failure> {
    let path = &paths.config_file;
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => {
            return Err(Failure::new(
                exit::FAILURE,
                format!("cannot read {}: {e}", path.display()),
            ))
        }
    };
    let config = wakeful_daemon::config::Config::parse(&text).map_err(|e| {
        Failure::new(
            exit::USAGE,
            format!(
                "{}: {e}; fix it, or give `wakeful mcp --protocol`",
                path.display()
            ),
        )
    })?;
    config
        .mcp
        .protocol
        .map(|p| p.as_str().parse::<wakeful_mcp::era::Protocol>())
        .transpose()
        .map(Option::unwrap_or_default)
        .map_err(|e| Failure::new(exit::USAGE, e.to_string()))
}

fn view_failure(e: wakeful_view::ViewError) -> Failure {
    let code = match e {
        wakeful_view::ViewError::NoTerminal | wakeful_view::ViewError::Config { .. } => exit::USAGE,
        _ => exit::FAILURE,
    };
    Failure::new(code, e.to_string())
}

/// The spec that `start`/`watch` flags and command words describe.
fn spec_of(
    monitor: &crate::monitor_args::MonitorArgs,
    source: &crate::monitor_args::SourceArgs,
    command: Vec<String>,
) -> Result<MonitorSpec, Failure> {
    let watched = source
        .to_source(command)
        .map_err(|e| Failure::new(exit::USAGE, e.to_string()))?;
    let mut spec = monitor.to_spec(watched);
    source.timer.apply(&mut spec);
    Ok(spec)
}

/// Checks the spec locally so that invalid input exits 2 without starting
/// (or even contacting) the daemon.
fn check(spec: &MonitorSpec) -> Result<(), Failure> {
    spec.validate()
        .map(|_| ())
        .map_err(|e| Failure::new(exit::USAGE, e.to_string()))
}

fn client_env() -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    // Under `wakeful acp-proxy` the proxy delivers the session's events; a
    // Codex agent's CODEX_THREAD_ID would give the session a `codex` wake
    // route too, and every event would be delivered twice.
    if env.contains_key(wakeful_acp::PROXY_ENV) {
        env.remove(wakeful_core::session::CODEX_THREAD_ID);
    }
    env
}

async fn start_request(
    paths: &Paths,
    session: String,
    spec: MonitorSpec,
    host: Option<String>,
) -> Result<(Connection, StartResult), Failure> {
    check(&spec)?;
    let cwd = std::env::current_dir()?;
    let mut conn = connect(paths).await?;
    let result: StartResult = conn
        .call(wakeful_protocol::StartMonitor {
            session,
            spec: Box::new(spec),
            env: client_env(),
            cwd,
            host,
        })
        .await?;
    Ok((conn, result))
}

async fn start(
    paths: &Paths,
    session: String,
    spec: MonitorSpec,
    host: Option<String>,
    json: bool,
) -> Result<u8, Failure> {
    let (_, r) = start_request(paths, session, spec, host).await?;
    if json {
        print_json(&json!({
            "id": r.id,
            "session": r.session,
            "already_running": r.already_running,
            "output_path": r.output_path,
            "wake": r.wake,
        }))?;
    } else {
        if r.already_running {
            outln!("{} (already running)", r.id)?;
        } else {
            outln!("{}", r.id)?;
        }
        say_wake(&r.wake);
    }
    Ok(0)
}

/// On stderr (stdout holds only the id, for scripts): when no wake will
/// come, say so and what to do.
fn say_wake(wake: &wakeful_protocol::WakeInfo) {
    if !wake.live {
        eprintln!("wakeful: {}", wake.reason);
    }
}

async fn watch(
    paths: &Paths,
    session: String,
    spec: MonitorSpec,
    json: bool,
) -> Result<u8, Failure> {
    use render::{watch_exit_code, WatchEnd};
    let persistent = spec.persistent;
    let detach_on_interrupt = spec.key.is_some() || persistent;
    // Before the monitor starts, so that a signal never finds the default
    // action (death without stopping the monitor).
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let (conn, started) = start_request(paths, session.clone(), spec, None).await?;
    let request_after = |after, write_to| wakeful_protocol::ReadEvents {
        session: session.clone(),
        after,
        follow: true,
        monitor: Some(started.id.clone()),
        write_to,
        ..Default::default()
    };
    let request = |write_to| request_after(started.after_seq, write_to);
    let form = if json {
        OutputForm::Json
    } else {
        OutputForm::Watch
    };
    // A pipe or a socket: the daemon writes the monitor's output to it
    // itself, and sends its final event here too.
    let handover = wakeful_client::handover::stdout_for_daemon();
    let mut handed = handover.is_some();
    let mut events = match &handover {
        Some(fd) => {
            conn.events_with_fds(request(Some(form)), &[fd.as_fd()])
                .await?
        }
        None => conn.events(request(None)).await?,
    };
    drop(handover);
    loop {
        let next = tokio::select! {
            r = events.next() => r,
            _ = interrupt.recv() => {
                let_go(paths, &started.id, detach_on_interrupt, true).await;
                return Ok(watch_exit_code(WatchEnd::Interrupted));
            }
            _ = terminate.recv() => {
                let_go(paths, &started.id, detach_on_interrupt, true).await;
                return Ok(watch_exit_code(WatchEnd::Terminated));
            }
        };
        match next {
            Ok(Some(e)) if handed => {
                // The final event; the daemon has written it already.
                if let Some(code) = watch_end_code(&e.decode()?) {
                    return Ok(code);
                }
            }
            Err(ClientError::Refused {
                kind: ErrorKind::OutputClosed,
                ..
            }) => {
                // Nobody reads our output any more: let the monitor go as on
                // Ctrl-C, quietly (exit 141).
                let_go(paths, &started.id, detach_on_interrupt, false).await;
                return Ok(watch_exit_code(WatchEnd::StdoutClosed));
            }
            Err(ClientError::Upgraded { after }) if handed => {
                // The daemon was upgraded: hand stdout to the new one.
                let Some(fd) = wakeful_client::handover::stdout_for_daemon() else {
                    return Err(ClientError::Closed.into());
                };
                events = wakeful_client::connect_existing(paths)
                    .await
                    .map_err(ClientError::from)?
                    .events_with_fds(request_after(after, Some(form)), &[fd.as_fd()])
                    .await?;
            }
            Err(ClientError::Refused {
                kind: ErrorKind::Invalid,
                ..
            }) if handed => {
                // A daemon that cannot write there: relay.
                handed = false;
                events.connection().send(request(None)).await?;
            }
            Ok(Some(e)) => {
                let event = e.decode()?;
                let mut out = std::io::stdout().lock();
                let written = if json {
                    writeln!(out, "{}", e.json)
                } else {
                    render::watch_plain(&mut out, &event)
                };
                if let Err(e) = written.and_then(|_| out.flush()) {
                    drop(out);
                    // Nobody reads our output any more: let the monitor go as
                    // on Ctrl-C; a closed pipe ends quietly (exit 141).
                    let closed = e.kind() == std::io::ErrorKind::BrokenPipe;
                    let_go(paths, &started.id, detach_on_interrupt, !closed).await;
                    if closed {
                        return Ok(watch_exit_code(WatchEnd::StdoutClosed));
                    }
                    return Err(e.into());
                }
                if let Some(code) = watch_end_code(&event) {
                    return Ok(code);
                }
            }
            Ok(None) => {}
            Err(ClientError::Closed) => {
                // A daemon that stops may close the stream before the final
                // event reached it; a monitor that is not persistent ended
                // with it (`daemon_stopped`).
                if !persistent && connect_existing(paths).await.is_err() {
                    eprintln!(
                        "wakeful: the daemon stopped while {} ran; `wakeful events` shows its end",
                        started.id
                    );
                    return Ok(watch_exit_code(WatchEnd::Stopped(
                        &MonitorStopReason::DaemonStopped,
                    )));
                }
                return Err(Failure::new(
                    exit::FAILURE,
                    format!(
                        "the daemon closed the stream of {}; `wakeful events` has everything",
                        started.id
                    ),
                ));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// `watch`'s exit code when `event` is its monitor's final one.
fn watch_end_code(event: &wakeful_core::Event) -> Option<u8> {
    use render::{watch_exit_code, WatchEnd};
    match &event.body {
        EventBody::MonitorStopped { reason, .. } => {
            Some(watch_exit_code(WatchEnd::Stopped(reason)))
        }
        EventBody::MonitorFailed { .. } => Some(watch_exit_code(WatchEnd::Failed)),
        _ => None,
    }
}

/// Ends `watch`'s hold on monitor `id`: stops it, or with `detach` leaves it
/// running (and, with `say`, says so on stderr).
async fn let_go(paths: &Paths, id: &str, detach: bool, say: bool) {
    if detach {
        if say {
            eprintln!(
                "wakeful: detached from {id}; it keeps running (`wakeful stop {id}` ends it)"
            );
        }
        return;
    }
    if let Ok(mut conn) = connect_existing(paths).await {
        let _ = conn
            .call(wakeful_protocol::StopMonitor { id: id.to_string() })
            .await;
    }
}

async fn list(paths: &Paths, session: Option<String>, json: bool) -> Result<u8, Failure> {
    let mut conn = connect(paths).await?;
    let list: Vec<MonitorInfo> = conn
        .call(wakeful_protocol::ListMonitors {
            session: session.clone(),
        })
        .await?;
    if !print_list(
        &list,
        json,
        "no monitors (active, or ended within the last hour)",
        render::monitor_table,
    )? {
        return Ok(0);
    }
    if let Some(session) = session {
        let w: Option<WakeStatus> = conn
            .call(wakeful_protocol::ShowWake {
                session: session.clone(),
            })
            .await?;
        if let Some(WakeDelivery::Undelivered {
            events_from,
            events_to,
            reason,
            ..
        }) = w.map(|w| w.delivery)
        {
            outln!(
                "wake undelivered: events #{events_from}–#{events_to} of session {session} did not reach the agent ({}); they go with the next wake",
                wakeful_core::present::one_line(&reason)
            )?;
        }
    }
    Ok(0)
}

async fn list_all_hosts(paths: &Paths, session: Option<String>, json: bool) -> Result<u8, Failure> {
    let list = ask(paths, wakeful_protocol::ListClusterMonitors { session }).await?;
    print_list(
        &list,
        json,
        "no monitors on any host (active, or ended within the last hour)",
        render::host_monitor_table,
    )?;
    Ok(0)
}

async fn cluster_status(paths: &Paths, json: bool) -> Result<u8, Failure> {
    let s = ask(paths, wakeful_protocol::GetClusterStatus {}).await?;
    show(&s, json, |s| {
        render::cluster_status(&mut std::io::stdout().lock(), s)
    })
}

async fn consumers(paths: &Paths, session: Option<String>, json: bool) -> Result<u8, Failure> {
    let list = ask(paths, wakeful_protocol::ListConsumers { session }).await?;
    print_list(
        &list,
        json,
        "no consumers yet (a consumer appears with its first wait)",
        render::consumer_table,
    )?;
    Ok(0)
}

async fn stop(paths: &Paths, id: String, json: bool) -> Result<u8, Failure> {
    let info = ask(paths, wakeful_protocol::StopMonitor { id }).await?;
    show(&info, json, |i| outln!("stopped {}", i.id))
}

async fn events(
    paths: &Paths,
    session: String,
    after: u64,
    follow: bool,
    json: bool,
) -> Result<u8, Failure> {
    let request = |after, write_to| wakeful_protocol::ReadEvents {
        session: session.clone(),
        after,
        follow,
        write_to,
        ..Default::default()
    };
    let mut after = after;
    while let Some(stdout) = wakeful_client::handover::stdout_for_daemon() {
        let form = if json {
            OutputForm::Json
        } else {
            OutputForm::Plain
        };
        let mut handed = connect(paths)
            .await?
            .events_with_fds(request(after, Some(form)), &[stdout.as_fd()])
            .await?;
        drop(stdout);
        match handed.next().await {
            // The daemon was upgraded: hand stdout to the new one.
            Err(ClientError::Upgraded { after: last }) => {
                after = last;
                continue;
            }
            Ok(None) | Err(ClientError::Closed) => return Ok(0),
            Err(ClientError::Refused {
                kind: ErrorKind::OutputClosed,
                ..
            }) => {
                let closed = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
                return Err(Failure::closed_stdout(&closed));
            }
            // A daemon that cannot write there (or does not know how): this
            // process relays the events.
            Err(ClientError::Refused {
                kind: ErrorKind::Invalid,
                ..
            }) => break,
            Err(e) => return Err(e.into()),
            Ok(Some(e)) => {
                let m = format!("unexpected reply from the daemon: {e:?}");
                return Err(Failure::new(exit::FAILURE, m));
            }
        }
    }
    let mut events = connect(paths).await?.events(request(after, None)).await?;
    // Events that came together are written together.
    let mut ready = Vec::new();
    loop {
        let end = match events.next().await {
            Ok(Some(e)) => add_event(&mut ready, &e.json, json).map(|()| false)?,
            Ok(None) | Err(ClientError::Closed) => true,
            Err(e) => return Err(e.into()),
        };
        if end || !events.has_buffered() {
            let mut out = std::io::stdout().lock();
            out.write_all(&ready)?;
            out.flush()?;
            ready.clear();
        }
        if end {
            return Ok(0);
        }
    }
}

/// Adds an event to what is about to be printed: its JSON as the daemon
/// sent it (`--json`), or its plain line.
fn add_event(out: &mut Vec<u8>, json_text: &str, json: bool) -> Result<(), Failure> {
    if json {
        out.extend_from_slice(json_text.as_bytes());
    } else {
        let e = wakeful_client::stream::decode(json_text)?;
        out.extend_from_slice(wakeful_core::present::plain_line(&e).as_bytes());
    }
    out.push(b'\n');
    Ok(())
}

async fn wait(paths: &Paths, session: String, args: WaitArgs, json: bool) -> Result<u8, Failure> {
    let WaitArgs {
        timeout_ms,
        consumer,
        follow,
        exclusive,
        all,
        monitor,
    } = args;
    let consumer = consumer.unwrap_or_else(|| {
        monitor
            .clone()
            .unwrap_or_else(|| wakeful_protocol::consumer::DEFAULT.into())
    });
    let request = wakeful_protocol::WaitEvents {
        session,
        consumer,
        timeout_ms,
        follow,
        exclusive,
        all,
        monitor,
        ..Default::default()
    };
    let mut waiter = connect(paths).await?.waiter(request).await?;
    loop {
        let batch = match waiter.wait().await {
            Ok(Some(batch)) => batch,
            Ok(None) => return Ok(0),
            Err(ClientError::Refused { kind, message })
                if kind == ErrorKind::Superseded || (kind == ErrorKind::Timeout && !json) =>
            {
                eprintln!("wakeful: {message}");
                return Ok(kind.exit_code());
            }
            Err(ClientError::Closed) => return Err(Failure::new(
                exit::FAILURE,
                "the daemon closed the connection; run wait again (nothing acknowledged is lost)",
            )),
            Err(e) => return Err(e.into()),
        };
        let mut text = Vec::new();
        for e in &batch.json {
            add_event(&mut text, e, json)?;
        }
        // Acknowledge only what has really been handed on: on a closed
        // stdout nothing is acknowledged.
        let mut out = std::io::stdout().lock();
        out.write_all(&text)?;
        out.flush()?;
        drop(out);
        waiter.ack(batch).await?;
    }
}

async fn digest(paths: &Paths, session: String, json: bool) -> Result<u8, Failure> {
    let d = ask(paths, wakeful_protocol::GetDigest { session }).await?;
    show(&d, json, |d| {
        match d.text(wakeful_core::digest::Reader::Cli) {
            Some(text) => outln!("{text}"),
            None => Ok(()),
        }
    })
}

async fn session_end(paths: &Paths, session: String, json: bool) -> Result<u8, Failure> {
    let request = wakeful_protocol::EndSession {
        session: session.clone(),
    };
    let v = ask(paths, request).await?;
    show(&v, json, |v| {
        let ids = &v.stopped;
        outln!(
            "session {session}: stopped {} monitor(s){}{}",
            ids.len(),
            if ids.is_empty() { "" } else { ": " },
            ids.join(", ")
        )
    })
}

async fn status(paths: &Paths, json: bool) -> Result<u8, Failure> {
    let s = ask(paths, wakeful_protocol::GetStatus {}).await?;
    if json {
        print_json(&s)?;
    } else {
        outln!("pid:              {}", s.pid)?;
        outln!("version:          {} (protocol {})", s.version, s.protocol)?;
        if s.version != wakeful_client::VERSION {
            outln!(
                "                  this wakeful is {}: requests the daemon does not know fail with both versions named; `wakeful daemon upgrade` moves the daemon to this version while every monitor goes on running",
                wakeful_client::VERSION
            )?;
        }
        if let Some(from) = &s.upgraded_from {
            outln!(
                "upgraded:         {} time{}, last from {from}",
                s.upgrades,
                if s.upgrades == 1 { "" } else { "s" }
            )?;
        }
        outln!("socket:           {}", s.socket.display())?;
        outln!("state dir:        {}", s.state_dir.display())?;
        outln!(
            "monitors running: {} (in {} sessions)",
            s.monitors_running,
            s.sessions_active
        )?;
        outln!("recently ended:   {}", s.monitors_recently_ended)?;
        outln!("last event seq:   {}", s.last_seq)?;
        outln!(
            "connections:      {} (limit of open files {})",
            s.connections,
            s.max_open_files
        )?;
        if s.accept_errors > 0 || s.connections_refused > 0 {
            outln!(
                "accept errors:    {}{} — refused {} connection(s) with `busy` (see {})",
                s.accept_errors,
                s.last_accept_error
                    .as_deref()
                    .map(|e| format!(", last: {e}"))
                    .unwrap_or_default(),
                s.connections_refused,
                paths.daemon_log().display()
            )?;
        }
        if s.journal_failures > 0 {
            outln!(
                "store failures:   {} (retried; see {})",
                s.journal_failures,
                paths.daemon_log().display()
            )?;
        }
        if s.wakes_undelivered > 0 {
            outln!(
                "wakes undelivered: {} session(s) (`wakeful wake show --session S`)",
                s.wakes_undelivered
            )?;
        }
        if let Some(storage) = &s.storage {
            crate::storage::status_lines(&mut std::io::stdout().lock(), storage)?;
        }
        if let Some(link) = &s.cluster {
            render::link_lines(&mut std::io::stdout().lock(), link)?;
        }
    }
    Ok(0)
}

async fn daemon(paths: Paths, args: DaemonArgs, json: bool) -> Result<u8, Failure> {
    match args.action {
        Some(DaemonAction::Stop) => match wakeful_client::stop_daemon(&paths).await? {
            None => {
                outln!(
                    "no wakeful daemon is running for {}",
                    paths.runtime_dir.display()
                )?;
                Ok(0)
            }
            Some(v) if json => {
                print_json(&v)?;
                Ok(0)
            }
            Some(v) => {
                outln!("stopped the wakeful daemon (pid {})", v.pid)?;
                Ok(0)
            }
        },
        Some(DaemonAction::Install { dir, format, print }) => {
            crate::package::daemon_install(format, dir, print, json)
        }
        Some(DaemonAction::Upgrade { binary }) => crate::upgrade::run(&paths, binary, json).await,
        Some(DaemonAction::HandoverCheck) => crate::upgrade::check(),
        None if args.foreground => serve_daemon(paths, args.ready_fd).await,
        None => status(&paths, json).await,
    }
}

/// `wakeful daemon --foreground`: runs the daemon in this process.
pub(crate) async fn serve_daemon(paths: Paths, ready_fd: Option<i32>) -> Result<u8, Failure> {
    {
        {
            // Started by a client: the log file only (stdio is /dev/null).
            // Run by a person: the log file and this terminal.
            let by_client = ready_fd.is_some();
            if let Err(e) = paths
                .prepare()
                .map_err(std::io::Error::other)
                .and_then(|()| wakeful_daemon::log::init(&paths.daemon_log(), !by_client))
            {
                eprintln!(
                    "wakeful: cannot open the daemon log {}: {e}",
                    paths.daemon_log().display()
                );
            }
            let ready = ready_fd
                .map(wakeful_daemon::Readiness::from_fd)
                .unwrap_or_default();
            match wakeful_daemon::run(paths, ready).await {
                Ok(()) => Ok(0),
                Err(wakeful_daemon::DaemonError::AlreadyRunning(socket)) => {
                    eprintln!("wakeful: a daemon is already running (socket {socket})");
                    Ok(0)
                }
                Err(e) => Err(Failure::new(exit::FAILURE, e.to_string())),
            }
        }
    }
}

async fn run_terminal(
    paths: &Paths,
    session: String,
    until: Option<wakeful_core::Until>,
    description: Option<String>,
    command: String,
    json: bool,
) -> Result<u8, Failure> {
    if command.trim().is_empty() {
        return Err(Failure::new(
            exit::USAGE,
            "give the command to run after `--`",
        ));
    }
    let cwd = std::env::current_dir()?;
    let request = wakeful_protocol::RunRequest {
        session,
        command,
        env: client_env(),
        cwd,
        until,
        description,
    };
    let r = ask(paths, request).await?;
    if json {
        print_json(&r)?;
    } else {
        match &r.monitor_id {
            Some(m) => outln!("{} (monitor {m})", r.id)?,
            None => outln!("{}", r.id)?,
        }
        if r.monitor_id.is_some() {
            say_wake(&r.wake);
        }
    }
    Ok(0)
}

async fn terminal_list(paths: &Paths, session: Option<String>, json: bool) -> Result<u8, Failure> {
    let list = ask(paths, wakeful_protocol::ListTerminals { session }).await?;
    print_list(&list, json, "no terminals", render::terminal_table)?;
    Ok(0)
}

async fn terminal_kill(paths: &Paths, id: String, json: bool) -> Result<u8, Failure> {
    let t = ask(paths, wakeful_protocol::KillTerminal { id }).await?;
    show(&t, json, |t| outln!("killed {}", t.id))
}

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

async fn wake(paths: &Paths, session: String, cmd: WakeCommand, json: bool) -> Result<u8, Failure> {
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
