//! Free space and the keep-free mark, as the scratch daemon reads them,
//! against `statvfs` here.

use super::scratch::Scratch;
use super::{Check, Outcome};

/// The scratch daemon's `storage` status against this process's own
/// `statvfs` of the same directory and the default mark.
pub fn free(s: &Scratch) -> Check {
    const G: &str = "free space and the keep-free mark are read";
    let (free, total) = match wakeful_platform::disk::space(s.dir()) {
        Ok(v) => v,
        Err(e) => return Check::new("space", G, Outcome::NotChecked, format!("statvfs: {e}")),
    };
    let status = match s.json(&["status"]) {
        Ok(v) => v,
        Err(e) => return Check::new("space", G, Outcome::Failed, e.to_string()),
    };
    let st = &status["storage"];
    let (Some(seen_free), Some(mark)) = (st["free_bytes"].as_u64(), st["keep_free_bytes"].as_u64())
    else {
        return Check::new(
            "space",
            G,
            Outcome::Failed,
            format!("the daemon's status has no free space: {st}"),
        );
    };
    let expected = wakeful_core::storage::KeepFree::default().bytes(total);
    let b = wakeful_core::storage::ByteSize;
    // Others write to the disk meanwhile: 5 % or 64 MiB apart is the same.
    let slack = (free / 20).max(64 << 20);
    let low = st["disk_low"].as_bool() == Some(true);
    let how = format!(
        "daemon: {} free, mark {} (5 % of {}, at most 1 GiB: {}); statvfs here: {} free",
        b(seen_free),
        b(mark),
        b(total),
        b(expected),
        b(free)
    );
    if seen_free.abs_diff(free) > slack || mark != expected {
        Check::new("space", G, Outcome::Failed, how)
            .fix("report it with the output of `wakeful doctor --selftest --json`")
    } else if low || seen_free < mark {
        Check::new("space", G, Outcome::Failed, format!("{how}; the disk is below the mark"))
            .fix("free space on the filesystem of the state directory (output files stop growing below the mark)")
    } else {
        Check::new("space", G, Outcome::Ok, how)
    }
}
