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

/// Cuts `text` to at most `max` bytes at a char boundary, saying how much was
/// cut.
pub fn cap(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…[{} more bytes cut]", &text[..cut], text.len() - cut)
}

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
}
