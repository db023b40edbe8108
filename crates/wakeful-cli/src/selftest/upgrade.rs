//! An upgrade keeps a command running: `wakeful daemon upgrade` of the
//! scratch daemon onto this same binary (a real handover and exec), while
//! a counter prints a line every 10 ms; the command's process stays, and
//! its lines come once each, in order.

use std::time::Duration;

use serde_json::Value;

use super::scratch::{missing, until, Scratch};
use super::{Check, Outcome};

const G: &str = "an upgrade keeps every monitor running";

/// Counter values a monitor's events carry, `suppressed` ranges included
/// (the counter's value is its output-file line number).
fn numbers(events: &[Value]) -> Vec<u64> {
    let mut out = Vec::new();
    for e in events {
        match e["kind"].as_str() {
            Some("lines") => out.extend(
                e["lines"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|l| l.as_str()?.trim().parse::<u64>().ok()),
            ),
            Some("suppressed") => {
                if let (Some(a), Some(b)) = (e["from_line"].as_u64(), e["to_line"].as_u64()) {
                    out.extend(a..=b);
                }
            }
            _ => {}
        }
    }
    out
}

/// The first place where `numbers` is not 1, 2, 3, …, if any.
fn first_gap(numbers: &[u64]) -> Option<(usize, u64)> {
    numbers
        .iter()
        .enumerate()
        .find(|(i, n)| **n != *i as u64 + 1)
        .map(|(i, n)| (i, *n))
}

/// Two upgrades in a row under a 10 ms counter.
pub fn keeps_running(s: &Scratch, exe: &std::path::Path, brk: Option<&str>) -> Check {
    if let Some(why) = missing(&["sleep"]) {
        return Check::new("upgrade", G, Outcome::NotChecked, why);
    }
    let word = format!("{}4", s.tag());
    let command =
        format!("i=0; while :; do i=$((i+1)); echo $i; sleep 0.01; done # counter-{word}");
    let id = match s.start(&command) {
        Ok(id) => id,
        Err(e) => return Check::new("upgrade", G, Outcome::Failed, e.to_string()),
    };
    let leader = || {
        s.tagged(&format!("counter-{word}"))
            .into_iter()
            .find(|p| p.pgrp == p.pid && p.is_live())
            .map(|p| p.pid)
    };
    let mut before = None;
    if !until(Duration::from_secs(5), || {
        before = leader();
        before.is_some()
    }) {
        return Check::new(
            "upgrade",
            G,
            Outcome::Failed,
            format!("monitor {id} did not start its counter"),
        );
    }
    if brk == Some("upgrade") {
        // The break: the command does not outlive the upgrade.
        if let Some(pid) = before {
            super::scratch::kill9(pid);
        }
    }
    let started = std::time::Instant::now();
    for _ in 0..2 {
        let out = s
            .cmd(&["daemon", "upgrade", "--binary", &exe.to_string_lossy()])
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                return Check::new(
                    "upgrade",
                    G,
                    Outcome::Failed,
                    format!(
                        "`wakeful daemon upgrade` failed: {}",
                        String::from_utf8_lossy(&o.stderr).trim()
                    ),
                )
                .fix("report it with the output of `wakeful doctor --selftest --json` and the daemon log")
            }
            Err(e) => return Check::new("upgrade", G, Outcome::NotChecked, e.to_string()),
        }
    }
    let took = started.elapsed();
    let after = leader();
    let _ = s.cmd(&["stop", &id]).output();
    let events = match s.ended(&id, Duration::from_secs(10)) {
        Ok(_) => s.events_of(&id).unwrap_or_default(),
        Err(e) => return Check::new("upgrade", G, Outcome::Failed, e.to_string()),
    };
    if after.is_none() || after != before {
        return Check::new(
            "upgrade",
            G,
            Outcome::Failed,
            format!(
                "the counter's process ({}) did not outlive two upgrades",
                before.map_or("?".into(), |p| p.to_string())
            ),
        )
        .fix("keep using `wakeful daemon stop` to change versions here (running monitors stop; persistent ones are re-armed), and report it");
    }
    let n = numbers(&events);
    if let Some((i, got)) = first_gap(&n) {
        return Check::new(
            "upgrade",
            G,
            Outcome::Failed,
            format!(
                "line {} of the counter came as {got}: a line was lost or repeated across the upgrades ({} lines)",
                i + 1,
                n.len()
            ),
        );
    }
    let starts = events.iter().filter(|e| e["kind"] == "started").count();
    Check::new(
        "upgrade",
        G,
        if starts == 1 { Outcome::Ok } else { Outcome::Failed },
        format!(
            "two `daemon upgrade`s in {} ms under a 10 ms counter: the same process, lines 1–{} once each, in order",
            took.as_millis(),
            n.len()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_gap_or_a_repeat_is_found_and_suppressed_ranges_count() {
        let events = [
            json!({"kind": "lines", "lines": ["1", "2"]}),
            json!({"kind": "suppressed", "from_line": 3, "to_line": 5}),
            json!({"kind": "lines", "lines": ["6"]}),
        ];
        assert_eq!(numbers(&events), [1, 2, 3, 4, 5, 6]);
        assert_eq!(first_gap(&[1, 2, 3]), None);
        assert_eq!(first_gap(&[1, 2, 2, 3]), Some((2, 2)));
        assert_eq!(first_gap(&[1, 3]), Some((1, 3)));
    }
}
