//! `kill -9` of the scratch daemon while a command prints: no event lost,
//! none repeated. Every event a reader saw before the kill is there after
//! it under the same seq; the stored lines are `n1..nK` once each.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::follow::Reader;
use super::scratch::{missing, Scratch};
use super::{Check, Outcome};

const G: &str = "kill -9 of the daemon loses and repeats no event";

/// The numbered lines of a `lines` event.
fn numbers(e: &Value) -> Vec<u64> {
    e["lines"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|l| l.as_str()?.strip_prefix('n')?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Pure: what is wrong with the events stored after the kill, given those
/// a reader saw before it (`seq → numbers`). `None` when nothing.
pub fn judge(seen: &BTreeMap<u64, Vec<u64>>, stored: &[Value]) -> Option<String> {
    let seqs: Vec<u64> = stored.iter().filter_map(|e| e["seq"].as_u64()).collect();
    if seqs.windows(2).any(|w| w[0] >= w[1]) {
        return Some(format!("seqs not strictly increasing: {seqs:?}"));
    }
    let by_seq: BTreeMap<u64, Vec<u64>> = stored
        .iter()
        .filter(|e| e["kind"] == "lines")
        .filter_map(|e| Some((e["seq"].as_u64()?, numbers(e))))
        .collect();
    for (seq, n) in seen {
        if by_seq.get(seq) != Some(n) {
            return Some(format!(
                "event {seq} (lines {n:?}) seen before the kill is not there after it"
            ));
        }
    }
    let all: Vec<u64> = by_seq.values().flatten().copied().collect();
    let expected: Vec<u64> = (1..=all.len() as u64).collect();
    if all != expected {
        return Some(format!(
            "stored lines are not n1..n{} once each: {all:?}",
            all.len()
        ));
    }
    None
}

/// A command printing `n1`, `n2`, … every 10 ms; the daemon SIGKILLed once
/// a reader saw 12 lines; the next daemon's events compared.
pub fn no_loss(s: &Scratch, brk: Option<&str>) -> Check {
    if let Some(why) = missing(&["sleep"]) {
        return Check::new("crash", G, Outcome::NotChecked, why);
    }
    let word = format!("{}4", s.tag());
    // The break: one line printed twice.
    let dup = if brk == Some("crash") {
        "echo n1; "
    } else {
        ""
    };
    let command = format!(
        ": {word}; echo n1; {dup}i=1; while [ $i -lt 3000 ]; do i=$((i+1)); echo n$i; sleep 0.01; done"
    );
    let reader = match Reader::events(s) {
        Ok(r) => r,
        Err(e) => return Check::new("crash", G, Outcome::Failed, e.to_string()),
    };
    let id = match s.start(&command) {
        Ok(id) => id,
        Err(e) => return Check::new("crash", G, Outcome::Failed, e.to_string()),
    };
    let mut seen = BTreeMap::new();
    let mut count = 0;
    while count < 12 {
        let Some((_, line)) = reader.wait(Duration::from_secs(5), |l| l.contains(&id)) else {
            return Check::new(
                "crash",
                G,
                Outcome::Failed,
                format!("the reader saw {count} lines of 12 within 5 s"),
            );
        };
        let Ok(e) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if e["kind"] == "lines" {
            if let Some(seq) = e["seq"].as_u64() {
                count += numbers(&e).len();
                seen.insert(seq, numbers(&e));
            }
        }
    }
    if let Err(e) = s.kill_daemon() {
        return Check::new("crash", G, Outcome::NotChecked, e.to_string());
    }
    drop(reader);
    // The next daemon starts with this request and ends the monitor.
    let stored = match s
        .ended(&id, Duration::from_secs(10))
        .and_then(|_| s.events_of(&id))
    {
        Ok(v) => v,
        Err(e) => return Check::new("crash", G, Outcome::Failed, e.to_string()),
    };
    match judge(&seen, &stored) {
        None => Check::new(
            "crash",
            G,
            Outcome::Ok,
            format!(
                "SIGKILL after a reader saw {count} lines in {} events: all there after, same seqs; {} lines stored, each once",
                seen.len(),
                stored.iter().map(|e| numbers(e).len()).sum::<usize>()
            ),
        ),
        Some(why) => Check::new("crash", G, Outcome::Failed, why)
            .fix("report it with the output of `wakeful doctor --selftest --json` and the scratch daemon.log"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(seq: u64, lines: &[&str]) -> Value {
        json!({"seq": seq, "kind": "lines", "lines": lines})
    }

    #[test]
    fn the_same_events_after_the_kill_are_fine() {
        let seen = BTreeMap::from([(2, vec![1]), (3, vec![2, 3])]);
        let stored = [
            json!({"seq": 1, "kind": "started"}),
            ev(2, &["n1"]),
            ev(3, &["n2", "n3"]),
            ev(5, &["n4"]),
        ];
        assert_eq!(judge(&seen, &stored), None);
    }

    #[test]
    fn a_lost_a_repeated_or_a_renumbered_event_is_named() {
        let seen = BTreeMap::from([(2, vec![1]), (3, vec![2])]);
        assert!(judge(&seen, &[ev(2, &["n1"])]).is_some_and(|w| w.contains("event 3")));
        assert!(judge(&seen, &[ev(2, &["n1"]), ev(4, &["n2"])]).is_some());
        let repeated = judge(&seen, &[ev(2, &["n1"]), ev(3, &["n2"]), ev(4, &["n2"])]);
        assert!(repeated.is_some_and(|w| w.contains("once each")));
        let gap = judge(&BTreeMap::new(), &[ev(2, &["n1"]), ev(3, &["n3"])]);
        assert!(gap.is_some());
        let order = judge(&BTreeMap::new(), &[ev(3, &["n1"]), ev(2, &["n2"])]);
        assert!(order.is_some_and(|w| w.contains("seqs")));
    }
}
