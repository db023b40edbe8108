//! The jsonl export (docs/EXPORT.md): written by `wakeful export`, read by
//! `wakeful import` and `wakeful replay`.

use std::io::Write;
use std::path::Path;

use wakeful_core::export::{Export, MonitorRecord};

use crate::{exit, Failure};

fn json_err(e: serde_json::Error) -> Failure {
    Failure::new(exit::FAILURE, format!("cannot encode the export: {e}"))
}

/// Writes `x` as jsonl.
pub fn write(out: &mut impl Write, x: &Export) -> Result<(), Failure> {
    writeln!(
        out,
        "{}",
        serde_json::to_string(&x.header).map_err(json_err)?
    )?;
    for e in &x.events {
        writeln!(out, "{}", serde_json::to_string(e).map_err(json_err)?)?;
    }
    for m in &x.monitors {
        let record = MonitorRecord { monitor: m.clone() };
        writeln!(out, "{}", serde_json::to_string(&record).map_err(json_err)?)?;
    }
    for p in &x.prunes {
        let record = wakeful_core::export::PruneRecordLine { prune: p.clone() };
        writeln!(out, "{}", serde_json::to_string(&record).map_err(json_err)?)?;
    }
    Ok(())
}

/// Reads and checks the whole export before anything is sent (a file
/// that breaks the format's rules changes nothing).
pub fn read_file(file: &Path) -> Result<Export, Failure> {
    let read = if file.as_os_str() == "-" {
        Export::read(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(file).map_err(|e| {
            Failure::new(
                exit::FAILURE,
                format!("cannot read {}: {e}", file.display()),
            )
        })?;
        Export::read(std::io::BufReader::new(f))
    };
    read.map_err(|e| match e {
        wakeful_core::export::ExportError::Io(e) => Failure::new(
            exit::FAILURE,
            format!("cannot read {}: {e}", file.display()),
        ),
        e => Failure::new(exit::USAGE, format!("{}: {e}", file.display())),
    })
}
