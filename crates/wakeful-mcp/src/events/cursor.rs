//! The opaque cursor of MCP Events: a position in one session's events
//! of one wakeful home.
//!
//! A cursor is `wk1.` followed by the unpadded URL-safe base64 of 24 bytes:
//! a 16-byte tag, the first bytes of SHA-256 over the state directory and
//! the session, then the seq (big-endian). The seq is global and never
//! reused, and the state directory is what a daemon restart keeps, so a
//! cursor stays valid across restarts; a cursor of another home or
//! session carries another tag and is refused like a malformed one, with
//! one error that says no more ([`BadCursor`]).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

/// What every cursor starts with (its format's version).
const PREFIX: &str = "wk1.";
/// Bytes of the tag.
const TAG: usize = 16;

/// A cursor that is malformed, or of another wakeful home or session. It
/// says nothing about which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid cursor: it is not one this server gave for this session; poll without a cursor to start from now")]
pub struct BadCursor;

/// Encodes and decodes the cursors of one session of one wakeful home.
#[derive(Clone)]
pub struct Cursors {
    tag: [u8; TAG],
}

impl Cursors {
    /// The cursors of `session` in the home whose state directory is
    /// `state_dir`.
    pub fn new(state_dir: &std::path::Path, session: &str) -> Cursors {
        let mut h = Sha256::new();
        h.update(b"wakeful mcp events cursor\0");
        h.update(state_dir.as_os_str().as_encoded_bytes());
        h.update(b"\0");
        h.update(session.as_bytes());
        let digest = h.finalize();
        let mut tag = [0u8; TAG];
        tag.copy_from_slice(&digest[..TAG]);
        Cursors { tag }
    }

    /// The cursor of the position after `seq`.
    pub fn encode(&self, seq: u64) -> String {
        let mut bytes = [0u8; TAG + 8];
        bytes[..TAG].copy_from_slice(&self.tag);
        bytes[TAG..].copy_from_slice(&seq.to_be_bytes());
        format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
    }

    /// The seq `cursor` stands after.
    pub fn decode(&self, cursor: &str) -> Result<u64, BadCursor> {
        let body = cursor.strip_prefix(PREFIX).ok_or(BadCursor)?;
        let bytes = URL_SAFE_NO_PAD.decode(body).map_err(|_| BadCursor)?;
        if bytes.len() != TAG + 8 || bytes[..TAG] != self.tag {
            return Err(BadCursor);
        }
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&bytes[TAG..]);
        Ok(u64::from_be_bytes(seq))
    }
}

/// A short stable name of the wakeful home of `state_dir` (12 hex digits),
/// the prefix of every `eventId` it gives: with the seq, an id no other
/// home or event shares.
pub fn home_id(state_dir: &std::path::Path) -> String {
    let mut h = Sha256::new();
    h.update(b"wakeful home\0");
    h.update(state_dir.as_os_str().as_encoded_bytes());
    h.finalize()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_cursor_decodes_to_its_seq_in_its_own_session_only() {
        let home = Path::new("/home/u/.local/state/wakeful");
        let mine = Cursors::new(home, "s1");
        for seq in [0, 1, 42, u64::MAX] {
            let c = mine.encode(seq);
            assert!(c.starts_with("wk1."), "{c}");
            assert_eq!(mine.decode(&c), Ok(seq));
        }
        // The same home and session later (a daemon restart) reads it too.
        assert_eq!(Cursors::new(home, "s1").decode(&mine.encode(7)), Ok(7));
        // Another session, another home: refused, and alike.
        let c = mine.encode(7);
        assert_eq!(Cursors::new(home, "s2").decode(&c), Err(BadCursor));
        assert_eq!(
            Cursors::new(Path::new("/other"), "s1").decode(&c),
            Err(BadCursor)
        );
    }

    #[test]
    fn malformed_cursors_get_the_same_error() {
        let mine = Cursors::new(Path::new("/h"), "s");
        let good = mine.encode(5);
        let flipped = {
            let mut b = good.clone().into_bytes();
            let last = b.len() - 1;
            b[last] = if b[last] == b'A' { b'B' } else { b'A' };
            String::from_utf8(b).unwrap()
        };
        for bad in [
            "",
            "5",
            "wk1.",
            "wk1.!!!!",
            "wk2.AAAA",
            &good[..good.len() - 2],
            &format!("{good}AA"),
        ] {
            assert_eq!(mine.decode(bad), Err(BadCursor), "{bad:?}");
        }
        // A changed seq byte is still well formed: it decodes to another
        // position of the same session, which reveals nothing either.
        assert!(mine.decode(&flipped).is_ok());
        let text = BadCursor.to_string();
        assert!(!text.contains('/') && !text.contains("s1"), "{text}");
    }

    #[test]
    fn the_home_id_is_short_stable_and_differs_per_home() {
        let a = home_id(Path::new("/a"));
        assert_eq!(a.len(), 12);
        assert_eq!(a, home_id(Path::new("/a")));
        assert_ne!(a, home_id(Path::new("/b")));
    }
}
