//! `wakeful status` and `wakeful cluster status`.

use wakeful_client::Paths;

use crate::render::{self, print_json, show};
use crate::{ask, Failure};

pub(super) async fn status(paths: &Paths, json: bool) -> Result<u8, Failure> {
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

pub(super) async fn cluster_status(paths: &Paths, json: bool) -> Result<u8, Failure> {
    let s = ask(paths, wakeful_protocol::GetClusterStatus {}).await?;
    show(&s, json, |s| {
        render::cluster_status(&mut std::io::stdout().lock(), s)
    })
}
