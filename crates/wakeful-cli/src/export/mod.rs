//! `wakeful export`, `wakeful import` and `wakeful replay`: a monitor's life
//! kept as a file (docs/EXPORT.md), loaded elsewhere, or re-run. The
//! formats: [`jsonl`] (wakeful's own, which import reads), [`otlp`]
//! (OpenTelemetry) and [`asciicast`] (a terminal recording).

pub mod asciicast;
pub mod jsonl;
pub mod otlp;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use wakeful_client::{connect, ClientError, Connection, Paths};
use wakeful_core::export::{origin, Export, ExportHeader, EXPORT_FORMAT_VERSION};
use wakeful_core::{Event, MonitorInfo, MonitorSpec, ReplaySpeed, Source};
use wakeful_protocol::{ImportResult, ImportedEvent, StartResult};

use crate::cli::ExportFormat;
use crate::{exit, Failure};

/// Events sent to the daemon per `import` request.
const IMPORT_BATCH: usize = 500;
/// About the most bytes of events per `import` request.
const IMPORT_BATCH_BYTES: usize = 8 * 1024 * 1024;

/// This machine's host name (part of every exported event's origin).
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at
    // most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name = if rc == 0 {
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    };
    if name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}

/// Which events to export.
pub struct Selection {
    /// The session (unless `monitor` is given).
    pub session: String,
    /// Only this monitor's events.
    pub monitor: Option<String>,
    /// Only events at or after this time.
    pub since: Option<DateTime<Utc>>,
}

async fn get_monitor(conn: &mut Connection, id: &str) -> Result<MonitorInfo, Failure> {
    Ok(conn
        .call(wakeful_protocol::GetMonitor { id: id.to_string() })
        .await?)
}

/// Reads the selected events and their monitors from the daemon.
pub async fn collect(paths: &Paths, sel: Selection) -> Result<Export, Failure> {
    let mut conn = connect(paths).await?;
    let session = match &sel.monitor {
        Some(id) => get_monitor(&mut conn, id).await?.session,
        None => sel.session.clone(),
    };
    let request = wakeful_protocol::ReadEvents {
        session: session.clone(),
        monitor: sel.monitor.clone(),
        ..Default::default()
    };
    let mut stream = conn.events(request).await?;
    let mut events = Vec::new();
    loop {
        match stream.next().await {
            Ok(Some(e)) => {
                let event = e.decode()?;
                if sel.since.is_none_or(|t| event.ts >= t) {
                    events.push(event);
                }
            }
            Ok(None) => break,
            Err(ClientError::Closed) => {
                return Err(Failure::new(
                    exit::FAILURE,
                    "the daemon closed the connection before the last event; export again",
                ))
            }
            Err(e) => return Err(e.into()),
        }
    }
    let conn = stream.connection();
    let mut ids: Vec<&str> = Vec::new();
    for e in &events {
        if !ids.contains(&e.monitor_id.as_str()) {
            ids.push(&e.monitor_id);
        }
    }
    let mut monitors = Vec::new();
    for id in ids {
        // A monitor the store no longer knows is exported with its events only.
        if let Ok(m) = get_monitor(conn, id).await {
            monitors.push(m);
        }
    }
    // The prunes since the exported time (all, without --since): what
    // the log no longer holds.
    let prunes = conn
        .call(wakeful_protocol::ListPrunes { since: sel.since })
        .await
        .unwrap_or_default();
    let header = ExportHeader {
        wakeful_export: EXPORT_FORMAT_VERSION,
        wakeful_version: crate::VERSION.to_string(),
        host: host_name(),
        exported_at: Utc::now(),
        session: Some(session),
        monitor: sel.monitor,
        since: sel.since,
    };
    Ok(Export {
        header,
        events,
        monitors,
        prunes,
    })
}

/// `wakeful export`.
pub async fn export(
    paths: &Paths,
    sel: Selection,
    format: ExportFormat,
    output: Option<PathBuf>,
    otlp_endpoint: Option<String>,
) -> Result<u8, Failure> {
    if otlp_endpoint.is_some() && format != ExportFormat::Otlp {
        return Err(Failure::new(
            exit::USAGE,
            "--otlp-endpoint posts OpenTelemetry data: use it with --format otlp",
        ));
    }
    let x = collect(paths, sel).await?;
    let mut bytes = Vec::new();
    match format {
        ExportFormat::Jsonl => jsonl::write(&mut bytes, &x)?,
        ExportFormat::Otlp => {
            let (traces, logs) = otlp::requests(&x);
            if let Some(url) = &otlp_endpoint {
                otlp::post(paths, url, &traces, &logs).await?;
            }
            if otlp_endpoint.is_none() || output.is_some() {
                writeln!(bytes, "{traces}")?;
                writeln!(bytes, "{logs}")?;
            }
        }
        ExportFormat::Asciicast => asciicast::write(&mut bytes, &x)?,
    }
    match output {
        Some(path) if path.as_os_str() != "-" => std::fs::write(&path, &bytes).map_err(|e| {
            Failure::new(
                exit::FAILURE,
                format!("cannot write {}: {e}", path.display()),
            )
        })?,
        _ if bytes.is_empty() => {}
        _ => {
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes)?;
            out.flush()?;
        }
    }
    Ok(0)
}

/// `wakeful import`.
pub async fn import(paths: &Paths, file: &Path, json: bool) -> Result<u8, Failure> {
    let export = jsonl::read_file(file)?;
    let host = export.header.host.clone();
    let mut conn = connect(paths).await?;
    let mut total = ImportResult {
        imported: 0,
        skipped: 0,
        monitors: 0,
    };
    let mut monitors = export.monitors;
    let mut events = export.events.into_iter().peekable();
    // Monitors go with the first batch (an export without events still
    // brings its monitors).
    while events.peek().is_some() || !monitors.is_empty() {
        // At most IMPORT_BATCH events and about IMPORT_BATCH_BYTES of them
        // per request (always at least one).
        let mut batch: Vec<ImportedEvent> = Vec::new();
        let mut bytes = 0;
        while let Some(event) = events.next_if(|e| {
            batch.is_empty()
                || (batch.len() < IMPORT_BATCH && bytes + e.text.len() * 2 < IMPORT_BATCH_BYTES)
        }) {
            bytes += event.text.len() * 2 + 256;
            batch.push(ImportedEvent {
                origin: origin(&host, event.seq),
                event,
            });
        }
        let r: ImportResult = conn
            .call(wakeful_protocol::Import {
                events: batch,
                monitors: std::mem::take(&mut monitors),
            })
            .await?;
        total.imported += r.imported;
        total.skipped += r.skipped;
        total.monitors += r.monitors;
    }
    if json {
        crate::render::print_json(&total)?;
    } else {
        outln!(
            "imported {} event(s) and {} monitor(s) from {} (host {host}); {} event(s) already here",
            total.imported,
            total.monitors,
            file.display(),
            total.skipped
        )?;
    }
    Ok(0)
}

/// What `wakeful replay` was asked.
pub struct ReplayArgs {
    /// The export file.
    pub file: PathBuf,
    /// The recorded monitor to replay.
    pub monitor: Option<String>,
    /// How much faster than recorded.
    pub speed: f64,
    /// The replay monitor's description.
    pub description: Option<String>,
    /// Its filter.
    pub filter: Option<String>,
    /// Its timeout.
    pub timeout_ms: Option<u64>,
}

/// The monitor of `export` to replay: the one asked for, else the only
/// one with events.
fn replay_target<'a>(export: &'a Export, asked: Option<&'a str>) -> Result<&'a str, Failure> {
    if let Some(id) = asked {
        return Ok(id);
    }
    match export.monitor_ids().as_slice() {
        [one] => Ok(one),
        [] => Err(Failure::new(
            exit::USAGE,
            "the file holds no events: nothing to replay",
        )),
        many => Err(Failure::new(
            exit::USAGE,
            format!(
                "the file holds events of {} monitors ({}); choose one with --monitor ID",
                many.len(),
                many.join(", ")
            ),
        )),
    }
}

/// `wakeful replay`: starts a replay monitor in the session.
pub async fn replay(
    paths: &Paths,
    session: String,
    args: ReplayArgs,
    json: bool,
) -> Result<u8, Failure> {
    let export = jsonl::read_file(&args.file)?;
    let id = replay_target(&export, args.monitor.as_deref())?.to_string();
    let events: Vec<&Event> = export.events_of(&id).collect();
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return Err(Failure::new(
            exit::USAGE,
            format!("{} holds no events of monitor {id}", args.file.display()),
        ));
    };
    let recorded = export.monitor(&id);
    let description = args.description.unwrap_or_else(|| {
        let what = recorded.map_or(id.clone(), |m| m.description.clone());
        format!("replay of {what}")
            .chars()
            .take(wakeful_core::params::MAX_DESCRIPTION_CHARS)
            .collect()
    });
    let file = std::path::absolute(&args.file)?;
    let mut spec = MonitorSpec::command("", description);
    spec.source = Source::Replay {
        file,
        monitor: id.clone(),
        speed: ReplaySpeed(args.speed),
    };
    spec.filter = args.filter;
    // Long enough for the whole recording at this speed, within the limits.
    let span_ms = (last.ts - first.ts).num_milliseconds().max(0) as f64 / args.speed;
    spec.timeout_ms = Some(args.timeout_ms.unwrap_or_else(|| {
        (span_ms as u64).saturating_add(60_000).clamp(
            wakeful_core::params::DEFAULT_TIMEOUT_MS,
            wakeful_core::params::MAX_TIMEOUT_MS,
        )
    }));
    spec.validate()
        .map_err(|e| Failure::new(exit::USAGE, e.to_string()))?;
    let mut conn = connect(paths).await?;
    let r: StartResult = conn
        .call(wakeful_protocol::StartMonitor {
            session,
            spec: Box::new(spec),
            env: BTreeMap::new(),
            cwd: std::env::current_dir()?,
            host: None,
        })
        .await?;
    if json {
        crate::render::print_json(&serde_json::json!({
            "id": r.id,
            "session": r.session,
            "replay_of": id,
            "output_path": r.output_path,
        }))?;
    } else {
        outln!("{}", r.id)?;
    }
    Ok(0)
}
