//! `wakeful run` and `wakeful terminal list|kill`: terminals the daemon runs.

use wakeful_client::Paths;

use super::start::{client_env, say_wake};
use crate::render::{self, print_json, print_list, show};
use crate::{ask, exit, Failure};

pub(super) async fn run_terminal(
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

pub(super) async fn terminal_list(
    paths: &Paths,
    session: Option<String>,
    json: bool,
) -> Result<u8, Failure> {
    let list = ask(paths, wakeful_protocol::ListTerminals { session }).await?;
    print_list(&list, json, "no terminals", render::terminal_table)?;
    Ok(0)
}

pub(super) async fn terminal_kill(paths: &Paths, id: String, json: bool) -> Result<u8, Failure> {
    let t = ask(paths, wakeful_protocol::KillTerminal { id }).await?;
    show(&t, json, |t| outln!("killed {}", t.id))
}
