//! Ids of monitors and terminals: a prefix, `-`, and 10 random base-32
//! characters (no `i`, `l`, `o`, `u`: nothing to misread).

/// A new monitor id: `mon-` and 10 random base-32 characters.
pub fn new_monitor_id() -> String {
    new_id("mon")
}

/// A new id with `prefix`: `prefix-` and 10 random base-32 characters.
pub fn new_id(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"0123456789abcdefghjkmnpqrstvwxyz";
    let mut s = String::with_capacity(prefix.len() + 11);
    s.push_str(prefix);
    s.push('-');
    for _ in 0..10 {
        s.push(ALPHABET[fastrand::usize(..ALPHABET.len())] as char);
    }
    s
}
