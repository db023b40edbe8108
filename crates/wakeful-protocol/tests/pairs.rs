//! Golden request/reply pairs (`tests/fixtures/pairs.jsonl`: a request
//! line, then the line that ends its answer): each request reads as it was
//! written, and the reply decodes into the type the request names
//! ([`Call::Reply`], [`Stream::End`]) and encodes back to the same bytes
//! (a result's keys in sorted order, as the daemon has always sent them:
//! it goes through `serde_json::Value`).

// Helpers outside #[test] functions unwrap too (clippy.toml allows it only
// inside them).
#![allow(clippy::unwrap_used)]

use serde::de::DeserializeOwned;
use serde::Serialize;
use wakeful_protocol::{decode_ok, Call, Envelope, Reply, Request, Stream};

/// Decodes `reply` as `T` and encodes it again.
fn again<T: Serialize + DeserializeOwned>(reply: Reply) -> String {
    let typed: T = decode_ok(reply).unwrap();
    serde_json::to_string(&Reply::ok(&typed).unwrap()).unwrap()
}

fn call<C: Call>(_: &C, reply: Reply) -> String {
    again::<C::Reply>(reply)
}

fn stream<S: Stream>(_: &S, reply: Reply) -> String {
    again::<S::End>(reply)
}

#[test]
fn each_reply_decodes_into_the_type_its_request_names() {
    let golden = include_str!("fixtures/pairs.jsonl");
    let lines: Vec<&str> = golden.lines().collect();
    assert!(lines.len() >= 20 && lines.len().is_multiple_of(2));
    for pair in lines.chunks(2) {
        let (request_line, reply_line) = (pair[0], pair[1]);
        let envelope: Envelope = serde_json::from_str(request_line).unwrap();
        assert_eq!(serde_json::to_string(&envelope).unwrap(), request_line);
        let reply: Reply = serde_json::from_str(reply_line).unwrap();
        let back = match &envelope.request {
            Request::Start(r) => call(r, reply),
            Request::SessionEnd(r) => call(r, reply),
            Request::Shutdown(r) => call(r, reply),
            Request::Upgrade(r) => call(r, reply),
            Request::WakeClear(r) => call(r, reply),
            Request::WakeShow(r) => call(r, reply),
            Request::WakeCheck(r) => call(r, reply),
            Request::Import(r) => call(r, reply),
            Request::Consumers(r) => call(r, reply),
            Request::Run(r) => call(r, reply),
            Request::Events(r) => stream(r, reply),
            Request::Wait(r) => stream(r, reply),
            Request::TaskCreate(r) => call(r, reply),
            Request::TaskGet(r) => call(r, reply),
            Request::TaskHand(r) => call(r, reply),
            Request::TaskCancel(r) => call(r, reply),
            Request::EventSubscribe(r) => call(r, reply),
            Request::EventUnsubscribe(r) => call(r, reply),
            other => panic!("no pair for {}", other.op()),
        };
        assert_eq!(back, reply_line, "the reply to {request_line}");
    }
}

#[test]
fn a_result_of_another_type_is_refused_not_guessed() {
    let reply: Reply = serde_json::from_str(r#"{"type":"ok","result":{"acked":44}}"#).unwrap();
    let e = <wakeful_protocol::ShowWake as Call>::decode(reply.clone()).unwrap_err();
    assert!(
        matches!(e, wakeful_protocol::ReplyError::Unexpected(_)),
        "{e:?}"
    );
    let e = <wakeful_protocol::EndSession as Call>::decode(reply).unwrap_err();
    assert!(
        matches!(e, wakeful_protocol::ReplyError::Unexpected(_)),
        "{e:?}"
    );
    let refused: Reply =
        serde_json::from_str(r#"{"type":"error","kind":"not_found","message":"no"}"#).unwrap();
    assert!(matches!(
        <wakeful_protocol::GetMonitor as Call>::decode(refused),
        Err(wakeful_protocol::ReplyError::Refused {
            kind: wakeful_protocol::ErrorKind::NotFound,
            ..
        })
    ));
}
