//! Property tests (issue #31, point 11) of the socket frame parser: lines
//! come out the same whatever pieces the bytes arrive in, a line longer
//! than the limit is passed over and never held, and no request line —
//! of any bytes — makes the parser panic.
//!
//! Bounded in CI by proptest's default of 256 cases a property; for a
//! longer run: `PROPTEST_CASES=100000 cargo test -p wakeful-protocol --test
//! properties` (docs/SECURITY.md).
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use wakeful_protocol::frame::{parse_request, FrameError, Framer};
use wakeful_protocol::{
    Envelope, ErrorKind, ReadEvents, Request, ShowWake, StopMonitor, PROTOCOL_VERSION,
};

fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Bytes with many newlines, carriage returns and non-UTF-8 bytes.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            3 => proptest::sample::select(b"ab{}\"\n\r".to_vec()),
            1 => any::<u8>(),
        ],
        0..400,
    )
}

/// What the lines of `bytes` should be, for a limit of `max`.
fn expected(bytes: &[u8], max: usize) -> Vec<Result<String, FrameError>> {
    let mut out = Vec::new();
    let mut parts: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let last = parts.pop().unwrap_or_default();
    for part in parts {
        out.push(line(part, max));
    }
    if !last.is_empty() {
        out.push(line(last, max));
    }
    out
}

fn line(part: &[u8], max: usize) -> Result<String, FrameError> {
    if part.len() > max {
        return Err(FrameError::TooLong { max });
    }
    let part = part.strip_suffix(b"\r").unwrap_or(part);
    String::from_utf8(part.to_vec()).map_err(|_| FrameError::NotUtf8)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn lines_are_the_same_in_any_pieces_and_never_held_past_the_limit(
        bytes in stream(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..20),
        max in 1usize..64,
    ) {
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        at.push(0);
        at.push(bytes.len());
        at.sort_unstable();
        let mut f = Framer::new(max);
        let mut got = Vec::new();
        for w in at.windows(2) {
            let piece = &bytes[w[0]..w[1]];
            f.push(piece);
            while let Some(l) = f.next_line() {
                got.push(l);
            }
            // Never more than the limit and one piece of a line held.
            prop_assert!(f.held() <= max + piece.len(), "{} held", f.held());
        }
        got.extend(f.finish());
        // A line too long may be reported before its end came: once.
        prop_assert_eq!(got, expected(&bytes, max));
    }

    #[test]
    fn any_line_is_a_request_or_a_reason_never_a_panic(bytes in stream()) {
        let text = String::from_utf8_lossy(&bytes);
        if let Err((kind, message)) = parse_request(&text) {
            prop_assert!(matches!(kind, ErrorKind::Invalid | ErrorKind::Version));
            prop_assert!(message.starts_with("invalid request") || message.starts_with("protocol version"));
        }
    }

    #[test]
    fn a_request_reads_back_as_it_was_sent(
        session in "\\PC{0,40}",
        after in any::<u64>(),
        follow in any::<bool>(),
        id in "[a-z0-9-]{1,20}",
    ) {
        for request in [
            Request::Events(ReadEvents { session: session.clone(), after, follow, monitor: None, wakes_agent: false, write_to: None, describe: false }),
            Request::Stop(StopMonitor { id: id.clone() }),
            Request::WakeShow(ShowWake { session: session.clone() }),
        ] {
            let line = serde_json::to_string(&Envelope { v: PROTOCOL_VERSION, request: request.clone() }).unwrap();
            prop_assert!(!line.contains('\n'));
            let mut f = Framer::new(wakeful_protocol::frame::MAX_REQUEST_BYTES);
            f.push(line.as_bytes());
            f.push(b"\n");
            let framed = f.next_line().unwrap().unwrap();
            let back = parse_request(&framed).unwrap();
            prop_assert_eq!(serde_json::to_value(&back).unwrap(), serde_json::to_value(&request).unwrap());
        }
    }
}
