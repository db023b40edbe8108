//! Golden stream frames (`tests/fixtures/streams.jsonl`: blocks of a
//! request line, then the lines of its stream: the daemon's replies and the
//! client's `ack`s, blocks apart by an empty line): every line reads as it
//! was written, event lines split into the event's JSON and the description
//! they carry and frame back to the same bytes, each monitor is described
//! the first time only ([`Descriptions`]), the lines fold into the item
//! type the request names ([`Stream::Item`]: events, or batches that end
//! at `last_seq`) and the end decodes into its [`Stream::End`].

// Helpers outside #[test] functions unwrap too (clippy.toml allows it only
// inside them).
#![allow(clippy::unwrap_used)]

use wakeful_protocol::{
    decode_ok, described_event_reply_line, event_of_line, event_reply_line, Batch, Descriptions,
    Envelope, Event, Reply, Request, Stream,
};

/// What one block's lines fold into: its events and, for a wait, its
/// batches (the item types the requests name).
#[derive(Default)]
struct Folded {
    events: Vec<(Event, Option<String>)>,
    batches: Vec<Batch>,
    end: Option<String>,
}

/// Decodes the end as `S::End` and encodes it again.
fn end<S: Stream>(_: &S, reply: Reply) -> String {
    let typed: S::End = decode_ok(reply).unwrap();
    serde_json::to_string(&Reply::ok(&typed).unwrap()).unwrap()
}

fn fold(request: &Request, lines: &[&str]) -> Folded {
    let mut folded = Folded::default();
    let mut described = Descriptions::default();
    let mut pending = Batch::default();
    for line in lines {
        if line.starts_with(r#"{"v":"#) {
            let ack: Envelope = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&ack).unwrap(), *line);
            let Request::Ack(ack) = ack.request else {
                panic!("{line}")
            };
            assert_eq!(ack.seq, folded.batches.last().unwrap().ack_seq());
            continue;
        }
        let reply: Reply = serde_json::from_str(line).unwrap();
        match reply {
            Reply::Event { event, description } => {
                let (json, sent) = event_of_line(line).unwrap();
                assert_eq!(sent, description);
                assert_eq!(serde_json::to_string(&event).unwrap(), json);
                let again = match &sent {
                    Some(d) => described_event_reply_line(json, d),
                    None => event_reply_line(json),
                };
                assert_eq!(std::str::from_utf8(&again).unwrap(), format!("{line}\n"));
                // The daemon's side: described the first time only, and
                // only when the request asked.
                let first = request
                    .describes()
                    .then(|| described.first(&event.monitor_id, || Some("d".into())))
                    .flatten();
                assert_eq!(first.is_some(), sent.is_some(), "{line}");
                pending.json.push(json.to_string());
                pending.events.push((event.clone(), sent.clone()));
                folded.events.push((event, sent));
            }
            Reply::Batch { last_seq } => {
                let mut batch = std::mem::take(&mut pending);
                batch.last_seq = last_seq;
                assert_eq!(batch.ack_seq(), last_seq);
                folded.batches.push(batch);
            }
            end_reply @ (Reply::Ok { .. } | Reply::Error { .. }) => {
                let back = match (request, &end_reply) {
                    (_, Reply::Error { .. }) => serde_json::to_string(&end_reply).unwrap(),
                    (Request::Events(r), _) => end(r, end_reply),
                    (Request::EventsAll(r), _) => end(r, end_reply),
                    (Request::Wait(r), _) => end(r, end_reply),
                    (other, _) => panic!("not a stream: {}", other.op()),
                };
                assert_eq!(back, *line);
                folded.end = Some(back);
            }
        }
    }
    folded
}

#[test]
fn each_stream_frame_reads_as_written_and_folds_into_its_items() {
    let golden = include_str!("fixtures/streams.jsonl");
    let blocks: Vec<Vec<&str>> = golden.split("\n\n").map(|b| b.lines().collect()).collect();
    assert_eq!(blocks.len(), 4);
    let mut folds = Vec::new();
    for block in &blocks {
        let envelope: Envelope = serde_json::from_str(block[0]).unwrap();
        assert_eq!(serde_json::to_string(&envelope).unwrap(), block[0]);
        let folded = fold(&envelope.request, &block[1..]);
        assert!(folded.end.is_some(), "{}", block[0]);
        folds.push(folded);
    }
    // `events` with `describe`: each monitor's description once, the
    // reader knows it for every event.
    let mut reader = Descriptions::default();
    let known: Vec<Option<String>> = folds[0]
        .events
        .iter()
        .map(|(e, sent)| reader.of(&e.monitor_id, sent.clone()))
        .collect();
    assert_eq!(
        known,
        [
            Some(r#"api "errors""#.to_string()),
            Some(r#"tests ,"description":"x""#.to_string()),
            Some(r#"api "errors""#.to_string()),
        ]
    );
    // `events_all` without `describe`: no description.
    assert!(folds[1].events.iter().all(|(_, d)| d.is_none()));
    assert!(folds[1].batches.is_empty());
    // `wait`: one batch up to its `last_seq`, acknowledged.
    let batch = &folds[2].batches[0];
    assert_eq!((batch.events.len(), batch.last_seq), (2, 5));
    let mut kept = batch.clone();
    kept.keep(1);
    assert_eq!(kept.ack_seq(), 3);
    // A wait that times out ends with its error, no batch.
    assert!(folds[3].batches.is_empty() && folds[3].events.is_empty());
}
