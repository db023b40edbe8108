//! Issue 40: an output file's cap keeps what it promises at every size,
//! with the real binary: the head and the newest lines are kept, no file
//! passes its share, and the `output_dropped` events name exactly the
//! lines that were dropped.
// A test's helpers may unwrap too: a failure is the test's (clippy.toml
// allows it only inside #[test] functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Home;

/// The lines of `wakeful output` under `output_max = cap`, for
/// `seq 1 count` run to its end; checks them, the files and the events.
fn seq_under_cap(cap: &str, cap_bytes: u64, count: u64) {
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        format!("[store]\noutput_max = \"{cap}\"\n"),
    )
    .unwrap();
    let seq = format!("seq 1 {count}");
    let out = home
        .cmd(&["--json", "watch", "--until", "exit", "--", &seq])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let first: serde_json::Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    let id = first["monitor_id"].as_str().unwrap().to_string();

    // `wakeful output`: the head, one marker naming the gap, the newest
    // lines up to the last.
    let text = home.ok(&["output", &id]);
    let lines: Vec<&str> = text.lines().collect();
    let marker = lines
        .iter()
        .position(|l| l.starts_with("[wakeful: output lines "))
        .unwrap_or_else(|| panic!("{cap}: no marker in {} lines", lines.len()));
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("[wakeful:")).count(),
        1,
        "{cap}: one marker"
    );
    for (i, l) in lines[..marker].iter().enumerate() {
        assert_eq!(*l, (i + 1).to_string(), "{cap}: head line {}", i + 1);
    }
    let range = lines[marker]
        .strip_prefix("[wakeful: output lines ")
        .and_then(|r| r.split(' ').next())
        .unwrap();
    let (from, to) = range.split_once('–').unwrap();
    let (from, to): (u64, u64) = (from.parse().unwrap(), to.parse().unwrap());
    assert_eq!(
        from,
        marker as u64 + 1,
        "{cap}: the marker follows the head"
    );
    for (i, l) in lines[marker + 1..].iter().enumerate() {
        assert_eq!(
            *l,
            (to + 1 + i as u64).to_string(),
            "{cap}: after the marker"
        );
    }
    assert_eq!(
        lines.last().copied(),
        Some(count.to_string().as_str()),
        "{cap}: the newest line is kept"
    );
    assert!(
        lines.len() - 1 > 100,
        "{cap}: some newest lines are kept, not just the last"
    );

    // The files: none past a segment, all within the cap.
    let segment = (cap_bytes / 8).max(16 * 1024);
    let mut kept = 0;
    for e in std::fs::read_dir(home.path().join("output")).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        if !name.starts_with(&id) || name.ends_with(".manifest") {
            continue;
        }
        let len = e.metadata().unwrap().len();
        assert!(len <= segment, "{cap}: {name} holds {len} bytes");
        kept += len;
    }
    assert!(kept <= cap_bytes, "{cap}: {kept} bytes kept");

    // The events name exactly the gap, nothing else.
    let mut ranges: Vec<(u64, u64, u64)> = home
        .json_lines(&["events"])
        .iter()
        .filter(|e| e["kind"] == "output_dropped" && e["monitor_id"] == id.as_str())
        .map(|e| {
            assert_eq!(e["reason"], "cap", "{e}");
            (
                e["from_line"].as_u64().unwrap(),
                e["to_line"].as_u64().unwrap(),
                e["count"].as_u64().unwrap(),
            )
        })
        .collect();
    ranges.sort_unstable();
    assert!(!ranges.is_empty(), "{cap}: no output_dropped event");
    let mut next = from;
    for (a, b, n) in &ranges {
        assert_eq!(*a, next, "{cap}: events {ranges:?} vs gap {from}–{to}");
        assert_eq!(*n, b - a + 1, "{cap}: {ranges:?}");
        next = b + 1;
    }
    assert_eq!(next, to + 1, "{cap}: events {ranges:?} vs gap {from}–{to}");
}

#[test]
fn the_smallest_cap_keeps_the_head_the_newest_lines_and_says_exactly_what_it_dropped() {
    seq_under_cap("64KiB", 64 << 10, 300_000);
}

#[test]
fn other_caps_keep_it_too() {
    seq_under_cap("200KiB", 200 << 10, 300_000);
    seq_under_cap("1MiB", 1 << 20, 1_000_000);
}
