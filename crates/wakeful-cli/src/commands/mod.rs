//! One function per command: build the request, talk to the daemon, print.
//! [`run`] dispatches to one module per verb family.

mod daemon;
mod events;
mod hook;
mod mcp;
mod monitors;
mod session;
mod start;
mod status;
mod terminal;
mod wake_route;
mod web;

use wakeful_client::Paths;

use crate::cli::{Cli, Command, PluginCommand, SessionCommand, TerminalCommand};
use crate::{exit, Failure};
use daemon::daemon;
pub(crate) use daemon::serve_daemon;
use events::{events, wait};
use hook::hook;
use mcp::mcp_protocol_from_config;
use monitors::{list, list_all_hosts, stop};
use session::{consumers, digest, session_end};
use start::{spec_of, start, watch};
use status::{cluster_status, status};
use terminal::{run_terminal, terminal_kill, terminal_list};
use wake_route::wake;
use web::{view_failure, web};

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
            crate::output_cmd::terminal_output(&paths, id, &range).await
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
        Command::Output { id, range } => crate::output_cmd::output(&paths, id, &range).await,
        Command::Session(SessionCommand::End { session }) => {
            session_end(&paths, session, json).await
        }
        Command::Status => status(&paths, json).await,
        Command::Prune { dry_run } => crate::storage::prune(&paths, dry_run, json).await,
        Command::Cluster(crate::cli::ClusterCommand::Status) => cluster_status(&paths, json).await,
        Command::Doctor { selftest: true } => crate::doctor_cmd::selftest(json).await,
        Command::Doctor { selftest: false } => {
            crate::doctor_cmd::doctor(&paths, session, json).await
        }
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
