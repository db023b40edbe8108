//! `wakeful prune`, and the store's lines of `wakeful status`
//! (docs/STORAGE.md).

use std::io::Write;

use wakeful_client::Paths;
use wakeful_core::storage::ByteSize;
use wakeful_protocol::{PruneResult, StorageStatus};

use crate::Failure;

/// Runs `wakeful prune [--dry-run]`.
pub async fn prune(paths: &Paths, dry_run: bool, json: bool) -> Result<u8, Failure> {
    let r = crate::ask(paths, wakeful_protocol::Prune { dry_run }).await?;
    crate::render::show(&r, json, |r| prune_lines(&mut std::io::stdout().lock(), r))
}

/// What a prune did (or would do), for a person.
pub fn prune_lines(out: &mut impl Write, r: &PruneResult) -> std::io::Result<()> {
    let before = ByteSize(r.database_bytes + r.output_bytes);
    if r.monitors.is_empty() && r.outputs.is_empty() {
        return writeln!(
            out,
            "nothing to prune: the store takes {before} (database {}, output files {}), within its caps, and no ended monitor is past max_age",
            ByteSize(r.database_bytes),
            ByteSize(r.output_bytes)
        );
    }
    if r.dry_run {
        writeln!(
            out,
            "would prune {} events of {} monitors{} (about {}); the store takes {before} now",
            r.record.events,
            r.monitors.len(),
            if r.outputs.is_empty() {
                String::new()
            } else {
                format!(" and the output files of {} more", r.outputs.len())
            },
            ByteSize(r.record.bytes)
        )?;
    } else {
        writeln!(out, "{}", r.record)?;
    }
    for m in &r.monitors {
        let cause = match m.cause {
            wakeful_core::storage::PruneCause::Age => "ended before max_age",
            wakeful_core::storage::PruneCause::Size => "over max_size",
            wakeful_core::storage::PruneCause::OutputTotal => "over output_total",
        };
        writeln!(out, "  {}  {cause}", m.id)?;
    }
    for id in &r.outputs {
        writeln!(out, "  {id}  output files only (over output_total)")?;
    }
    Ok(())
}

/// The store's lines of `wakeful status`.
pub fn status_lines(out: &mut impl Write, s: &StorageStatus) -> std::io::Result<()> {
    writeln!(
        out,
        "store:            {} of {} (database {}, output files {} of {}); ended monitors kept {}",
        ByteSize(s.database_bytes + s.output_bytes),
        ByteSize(s.max_size),
        ByteSize(s.database_bytes),
        ByteSize(s.output_bytes),
        ByteSize(s.output_total),
        s.max_age
    )?;
    let disk = if s.disk_full {
        " — FULL: nothing that must write is started; free some space"
    } else if s.disk_low {
        " — LOW: output files are not growing (lines are counted, events recorded)"
    } else {
        ""
    };
    writeln!(
        out,
        "disk:             {} free, {} kept free{disk}",
        ByteSize(s.free_bytes),
        ByteSize(s.keep_free_bytes)
    )?;
    if s.output_not_written_bytes > 0 {
        writeln!(
            out,
            "not written:      {} of output (disk low) since the daemon started",
            ByteSize(s.output_not_written_bytes)
        )?;
    }
    match &s.last_prune {
        Some(p) => writeln!(
            out,
            "last prune:       {} at {}",
            p,
            p.at.format("%Y-%m-%d %H:%M:%S UTC")
        ),
        None => writeln!(out, "last prune:       none yet"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use wakeful_core::storage::{PruneCause, PruneRecord};

    fn status() -> StorageStatus {
        StorageStatus {
            database_bytes: 10 << 20,
            output_bytes: 30 << 20,
            max_size: 2 << 30,
            max_age: "7d".into(),
            output_max: 64 << 20,
            output_total: 1 << 30,
            free_bytes: 5 << 20,
            keep_free_bytes: 16 << 20,
            disk_low: true,
            disk_full: false,
            output_not_written_bytes: 3 << 20,
            last_prune: Some(PruneRecord {
                at: chrono::Utc.with_ymd_and_hms(2026, 12, 3, 9, 0, 0).unwrap(),
                events: 120,
                monitors: 2,
                outputs: 0,
                bytes: 1 << 20,
                causes: vec![PruneCause::Age],
                oldest_kept_seq: Some(500),
                oldest_kept_at: None,
                running_events: 0,
                running_monitors: 0,
            }),
            pruned_events: 120,
            pruned_monitors: 2,
            pruned_bytes: 1 << 20,
            oldest_seq: Some(500),
        }
    }

    #[test]
    fn status_says_what_the_store_takes_and_what_the_disk_does() {
        let mut out = Vec::new();
        status_lines(&mut out, &status()).unwrap();
        insta::assert_snapshot!(String::from_utf8(out).unwrap());
    }
}
