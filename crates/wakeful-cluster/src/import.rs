//! Importing: the other hosts' events into this host's log.
//!
//! A durable pull consumer per host ([`subject::consumer_name`]) reads the
//! whole stream (`wakeful.ev.>`: NATS filters cannot leave out one host, so
//! this host's own messages are passed over here and acknowledged with the
//! rest). Messages come in batches of at most [`BATCH`]; each batch goes to
//! the daemon's import path in one hub commit — every event gets a new
//! local seq, keeps its origin `<host>/<seq>` (unique in the store, so a
//! redelivery is never stored twice) and gets `host` — and only then is the
//! batch's last message acknowledged (AckPolicy::All acknowledges the
//! batch). A daemon killed between the commit and the acknowledgement gets
//! the batch again, and stores none of it twice.
//!
//! Acknowledging a message acknowledges every earlier one, so a reader must
//! never acknowledge past messages it did not import: messages handed to an
//! earlier reader (a killed daemon, a broken pull) that were not
//! acknowledged would be. So each time the importer starts reading, and the
//! consumer has messages delivered but not acknowledged, it makes the
//! consumer again from its acknowledgement floor: those messages come again
//! at once, in order ([`start_after`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use futures_util::{FutureExt, StreamExt};
use wakeful_protocol::ImportedEvent;

use crate::directory::Setup;
use crate::shared::{Backoff, Node, Shared};
use crate::subject;

/// Most messages imported in one commit.
pub const BATCH: usize = 256;

/// What a message of the stream holds, for this host.
#[derive(Debug, PartialEq)]
pub enum Decoded {
    /// An event of another host, to import.
    Event(Box<ImportedEvent>),
    /// This host's own event: already in the log.
    Own,
    /// Not a wakeful event (why): acknowledged and counted, never imported.
    Bad(String),
}

/// Reads a stream message: its subject, its `Nats-Msg-Id` and its payload
/// (the event's JSON as its host stored it).
pub fn decode(subject: &str, msg_id: Option<&str>, payload: &[u8], own_host: &str) -> Decoded {
    let Some(parts) = subject::parse_event_subject(subject) else {
        return Decoded::Bad(format!("subject {subject} is not an event subject"));
    };
    if parts.host == own_host {
        return Decoded::Own;
    }
    let Some(origin) = msg_id else {
        return Decoded::Bad(format!("{subject} has no Nats-Msg-Id"));
    };
    let seq_ok = origin
        .strip_prefix(parts.host.as_str())
        .and_then(|r| r.strip_prefix('/'))
        .is_some_and(|s| s.parse::<u64>().is_ok());
    if !seq_ok {
        return Decoded::Bad(format!(
            "{subject}: Nats-Msg-Id {origin:?} is not <host>/<seq> of host {}",
            parts.host
        ));
    }
    let mut event: wakeful_core::Event = match serde_json::from_slice(payload) {
        Ok(e) => e,
        Err(e) => return Decoded::Bad(format!("{subject}: not an event: {e}")),
    };
    if event.session != parts.session || event.monitor_id != parts.monitor {
        return Decoded::Bad(format!(
            "{subject}: the event's session or monitor is not its subject's"
        ));
    }
    event.host = Some(parts.host);
    Decoded::Event(Box::new(ImportedEvent {
        origin: origin.to_string(),
        event,
    }))
}

/// Where a new reader must start: after the consumer's acknowledgement
/// floor when messages were handed out and not acknowledged (`Some`), or
/// where the consumer is (`None`).
pub fn start_after(ack_floor: u64, ack_pending: usize) -> Option<u64> {
    (ack_pending > 0).then_some(ack_floor)
}

fn consumer_config(host: &str, after: Option<u64>) -> consumer::pull::Config {
    let name = subject::consumer_name(host);
    let deliver_policy = match after {
        Some(floor) => consumer::DeliverPolicy::ByStartSequence {
            start_sequence: floor + 1,
        },
        None => consumer::DeliverPolicy::All,
    };
    consumer::pull::Config {
        durable_name: Some(name.clone()),
        name: Some(name),
        description: Some(format!(
            "wakeful: imports the other hosts' events into {host}"
        )),
        ack_policy: consumer::AckPolicy::All,
        deliver_policy,
        filter_subject: subject::EVENTS_ALL.into(),
        ack_wait: Duration::from_secs(30),
        max_ack_pending: 4 * BATCH as i64,
        ..Default::default()
    }
}

/// Imports until the daemon stops; see the module docs.
pub(crate) async fn run(
    shared: Arc<Shared>,
    _js: jetstream::Context,
    node: Arc<dyn Node>,
    setup: Setup,
) {
    let mut backoff = Backoff::new();
    loop {
        let ready = setup.get().await;
        shared.wait_up().await;
        let name = subject::consumer_name(&shared.host);
        if let Ok(info) = ready.stream.consumer_info(&name).await {
            if let Some(floor) = start_after(info.ack_floor.stream_sequence, info.num_ack_pending) {
                tracing::info!(
                    "cluster: {} messages were handed out and not acknowledged; reading again after stream seq {floor}",
                    info.num_ack_pending
                );
                let made = match ready.stream.delete_consumer(&name).await {
                    Ok(_) => ready
                        .stream
                        .create_consumer(consumer_config(&shared.host, Some(floor)))
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                if let Err(e) = made {
                    shared.error(format!("cannot make the import consumer again: {e}"));
                    backoff.wait().await;
                    continue;
                }
            }
        }
        let consumer: consumer::PullConsumer = match ready
            .stream
            .get_or_create_consumer(&name, consumer_config(&shared.host, None))
            .await
        {
            Ok(c) => c,
            Err(e) => {
                shared.error(format!("cannot make the import consumer: {e}"));
                if let Err(e) = setup.ensure_stream().await {
                    shared.error(format!("stream {}: {e}", subject::STREAM));
                }
                backoff.wait().await;
                continue;
            }
        };
        let messages = consumer
            .stream()
            .max_messages_per_batch(BATCH)
            .heartbeat(Duration::from_secs(5))
            .expires(Duration::from_secs(30))
            .messages()
            .await;
        let mut messages = match messages {
            Ok(m) => m,
            Err(e) => {
                shared.error(format!("cannot read the stream: {e}"));
                backoff.wait().await;
                continue;
            }
        };
        loop {
            let first = match messages.next().await {
                Some(Ok(m)) => m,
                Some(Err(e)) => {
                    shared.error(format!("reading the stream: {e}"));
                    break;
                }
                None => break,
            };
            backoff.reset();
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match messages.next().now_or_never() {
                    Some(Some(Ok(m))) => batch.push(m),
                    _ => break,
                }
            }
            if !import_batch(&shared, node.as_ref(), &batch).await {
                return;
            }
        }
        backoff.wait().await;
    }
}

/// Imports one batch and acknowledges it; false when the daemon is
/// stopping (nothing acknowledged: the stream hands it out again).
async fn import_batch(shared: &Shared, node: &dyn Node, batch: &[jetstream::Message]) -> bool {
    let mut events = Vec::with_capacity(batch.len());
    for m in batch {
        let msg_id = m
            .headers
            .as_ref()
            .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID))
            .map(|v| v.as_str());
        match decode(m.subject.as_str(), msg_id, &m.payload, &shared.host) {
            Decoded::Event(e) => events.push(*e),
            Decoded::Own => {
                shared.import_skipped.fetch_add(1, Ordering::SeqCst);
            }
            Decoded::Bad(why) => {
                shared.import_rejected.fetch_add(1, Ordering::SeqCst);
                shared.import_skipped.fetch_add(1, Ordering::SeqCst);
                shared.error(format!("passed over a message: {why}"));
            }
        }
    }
    if !events.is_empty() {
        match node.import(events).await {
            Ok(r) => {
                shared.imported.fetch_add(r.imported, Ordering::SeqCst);
                shared.import_skipped.fetch_add(r.skipped, Ordering::SeqCst);
            }
            Err(e) => {
                shared.error(format!("cannot import: {e}"));
                return false;
            }
        }
    }
    if let Some(last) = batch.last() {
        // AckPolicy::All: this acknowledges the whole batch. A lost
        // acknowledgement means a redelivery, which stores nothing twice.
        if let Err(e) = last.ack().await {
            shared.error(format!("cannot acknowledge imported events: {e}"));
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENT: &str = r#"{"seq":41,"session":"s.1","monitor_id":"mon-a","kind":"started","ts":"2026-11-30T12:00:00.000Z","text":"started"}"#;

    #[test]
    fn a_new_reader_starts_after_the_acknowledged_floor() {
        assert_eq!(start_after(41, 0), None);
        assert_eq!(start_after(41, 7), Some(41));
        assert!(matches!(
            consumer_config("a", Some(41)).deliver_policy,
            consumer::DeliverPolicy::ByStartSequence { start_sequence: 42 }
        ));
        assert_eq!(
            consumer_config("a", None).ack_policy,
            consumer::AckPolicy::All
        );
    }

    #[test]
    fn messages_of_other_hosts_become_imports() {
        let subj = subject::event_subject("s.1", "b", "mon-a");
        match decode(&subj, Some("b/41"), EVENT.as_bytes(), "a") {
            Decoded::Event(e) => {
                assert_eq!(e.origin, "b/41");
                assert_eq!(e.event.host.as_deref(), Some("b"));
                assert_eq!(e.event.session, "s.1");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            decode(&subj, Some("b/41"), EVENT.as_bytes(), "b"),
            Decoded::Own
        );
        let bad = |subj: &str, id: Option<&str>, payload: &str| {
            matches!(decode(subj, id, payload.as_bytes(), "a"), Decoded::Bad(_))
        };
        assert!(bad(&subj, None, EVENT));
        assert!(bad(&subj, Some("c/41"), EVENT));
        assert!(bad(&subj, Some("b/x"), EVENT));
        assert!(bad(&subj, Some("b/41"), "{}"));
        assert!(bad("wakeful.ev.x", Some("b/41"), EVENT));
        let other_session = subject::event_subject("s2", "b", "mon-a");
        assert!(bad(&other_session, Some("b/41"), EVENT));
    }
}
