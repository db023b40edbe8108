//! Making event text safe to show to a model (SPEC §4: "control characters
//! and ANSI escapes are escaped or stripped wherever events are shown to a
//! model").

/// Removes ANSI escape sequences (CSI, OSC and two-byte escapes) and control
/// characters other than newline and tab.
pub fn sanitize_for_model(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.peek() {
                Some('[') => {
                    chars.next();
                    // CSI: parameters and intermediates, then one final byte in @..~
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    chars.next();
                    // OSC: until BEL or ESC \
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                Some(_) => {
                    chars.next();
                }
                None => {}
            },
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Which monitor an event is from and what it is, on one line, safe to show
/// a model: `mon-… "description" · 3 lines (output lines 4–6)`, or
/// `mon-… · stopped`.
pub fn event_label(event: &crate::Event, description: Option<&str>) -> String {
    let name = match description.map(|d| sanitize_for_model(d).replace('\n', " ")) {
        Some(d) if !d.trim().is_empty() => format!("{} \"{}\"", event.monitor_id, d.trim()),
        _ => event.monitor_id.clone(),
    };
    let what = match &event.body {
        crate::EventBody::MonitorEvent {
            lines,
            from_line,
            to_line,
        } => {
            let n = lines.len();
            format!(
                "{n} line{} (output lines {from_line}–{to_line})",
                if n == 1 { "" } else { "s" }
            )
        }
        _ => event.kind().as_str().to_string(),
    };
    format!("{name} · {what}")
}

/// Cuts `text` to at most `max` bytes at a char boundary, saying how many
/// bytes of the source's output are not shown. Lines that were already cut
/// in the event (`…[truncated N bytes]`, see [`crate::lines`]) count with
/// their full length: a 10 MB line shown as 16 KiB reports the 10 MB it
/// leaves out, not the 48 KiB of event text.
pub fn cap(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    // Never cut inside a truncation note: the note goes with the cut part.
    for (start, _) in text.match_indices(TRUNCATED_PREFIX) {
        let end = text[start..]
            .find(']')
            .map_or(text.len(), |e| start + e + 1);
        if start < cut && cut < end {
            cut = start;
            break;
        }
    }
    let removed = &text[cut..];
    let mut hidden = removed.len() as u64;
    let mut rest = removed;
    while let Some(at) = rest.find(TRUNCATED_PREFIX) {
        let after = &rest[at + TRUNCATED_PREFIX.len()..];
        let Some(end) = after.find(" bytes]") else {
            break;
        };
        if let Ok(n) = after[..end].parse::<u64>() {
            let note = TRUNCATED_PREFIX.len() + end + " bytes]".len();
            hidden = hidden - note as u64 + n;
        }
        rest = &after[end..];
    }
    format!("{}…[{hidden} more bytes cut]", &text[..cut])
}

/// How [`crate::lines`] marks a line cut in its event.
const TRUNCATED_PREFIX: &str = "…[truncated ";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_ansi_and_controls() {
        assert_eq!(
            sanitize_for_model("\u{1b}[31merror\u{1b}[0m: x\u{7}\r\n\tok\u{1b}]0;title\u{7}!"),
            "error: x\n\tok!"
        );
    }

    #[test]
    fn caps_at_char_boundary() {
        assert_eq!(cap("héllo", 2), "h…[5 more bytes cut]");
        assert_eq!(cap("abc", 3), "abc");
    }

    #[test]
    fn a_line_cut_before_counts_with_its_full_length() {
        // A 10 MB line as its event carries it: 64 KiB and a note.
        let total: u64 = 10 * 1024 * 1024;
        let shown = 64 * 1024;
        let text = format!(
            "{}…[truncated {} bytes]",
            "x".repeat(shown),
            total - shown as u64
        );
        let capped = cap(&text, 16 * 1024);
        assert!(capped.starts_with(&"x".repeat(16 * 1024)));
        assert_eq!(
            &capped[16 * 1024..],
            format!("…[{} more bytes cut]", total - 16 * 1024)
        );
        // Cut inside the note: the note goes, its count stays exact.
        let capped = cap(&text, shown + 5);
        assert_eq!(
            &capped[shown..],
            format!("…[{} more bytes cut]", total - shown as u64)
        );
        // Two lines, the first cut before, the cut in the second.
        let text = format!("{}…[truncated 100 bytes]\nabcdef", "y".repeat(10));
        let capped = cap(&text, text.len() - 3);
        assert!(capped.ends_with("abc…[3 more bytes cut]"), "{capped}");
        let capped = cap(&text, 5);
        // 5 more y, the 100 truncated bytes, the newline, abcdef.
        assert_eq!(capped, "yyyyy…[112 more bytes cut]");
    }
}
