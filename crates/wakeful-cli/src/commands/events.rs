//! `wakeful events` and `wakeful wait`: a session's events, read or waited
//! for and acknowledged.

use std::io::Write;
use std::os::fd::AsFd;

use wakeful_client::{connect, ClientError, ErrorKind, Paths};
use wakeful_protocol::OutputForm;

use crate::cli::WaitArgs;
use crate::{exit, Failure};

pub(super) async fn events(
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

pub(super) async fn wait(
    paths: &Paths,
    session: String,
    args: WaitArgs,
    json: bool,
) -> Result<u8, Failure> {
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
