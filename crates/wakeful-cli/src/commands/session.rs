//! A session's consumers, its digest and `wakeful session end`.

use wakeful_client::Paths;

use crate::render::{self, print_list, show};
use crate::{ask, Failure};

pub(super) async fn consumers(
    paths: &Paths,
    session: Option<String>,
    json: bool,
) -> Result<u8, Failure> {
    let list = ask(paths, wakeful_protocol::ListConsumers { session }).await?;
    print_list(
        &list,
        json,
        "no consumers yet (a consumer appears with its first wait)",
        render::consumer_table,
    )?;
    Ok(0)
}

pub(super) async fn digest(paths: &Paths, session: String, json: bool) -> Result<u8, Failure> {
    let d = ask(paths, wakeful_protocol::GetDigest { session }).await?;
    show(&d, json, |d| {
        match d.text(wakeful_core::digest::Reader::Cli) {
            Some(text) => outln!("{text}"),
            None => Ok(()),
        }
    })
}

pub(super) async fn session_end(paths: &Paths, session: String, json: bool) -> Result<u8, Failure> {
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
