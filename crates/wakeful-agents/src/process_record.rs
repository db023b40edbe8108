//! One wakeful session per agent process: the first hook of an agent
//! process (Claude Code, Gemini CLI) records the session id it sees under
//! `<state dir>/<agent>/processes/<pid>`, as `<start time> <session>`, and
//! later hooks and commands of the same process read it back. The start
//! time (the platform layer's `tree::start_time`) tells a live process from an earlier one
//! with the same pid; records of processes that are gone are removed when
//! a new one is written.

use std::path::{Path, PathBuf};

use wakeful_client::Paths;

/// A process record: `<start time> <session>`.
pub fn parse_record(text: &str) -> Option<(u64, String)> {
    let (start, session) = text.trim().split_once(' ')?;
    let session = session.trim();
    (!session.is_empty()).then(|| Some((start.parse().ok()?, session.to_string())))?
}

/// The start time of a live process (in the platform backend's unit).
pub fn process_start(pid: u32) -> Option<u64> {
    wakeful_platform::tree::start_time(i32::try_from(pid).ok()?)
}

/// The folder of an agent's process records (`agent`: `claude-code`,
/// `gemini`).
pub fn records_dir(paths: &Paths, agent: &str) -> PathBuf {
    paths.state_dir.join(agent).join("processes")
}

/// The session recorded for process `pid` of `agent`, if the record is of
/// that very process (same start time). Reads only.
pub fn recorded(paths: &Paths, agent: &str, pid: u32) -> Option<String> {
    let start = process_start(pid)?;
    let text = std::fs::read_to_string(records_dir(paths, agent).join(pid.to_string())).ok()?;
    let (s, session) = parse_record(&text)?;
    (s == start).then_some(session)
}

/// The session recorded for process `pid` of `agent`, or, when there is
/// none yet, `current`, which is then recorded. `None` when the process
/// cannot be read. A failure to write is reported on stderr (prefixed
/// with `who`) and `current` is used.
pub fn recorded_or_record(
    paths: &Paths,
    agent: &str,
    pid: u32,
    current: &str,
    who: &str,
) -> Option<String> {
    let start = process_start(pid)?;
    let dir = records_dir(paths, agent);
    let file = dir.join(pid.to_string());
    if let Some((s, session)) = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| parse_record(&t))
    {
        if s == start {
            return Some(session);
        }
    }
    if let Err(e) = write_record(paths, &dir, &file, start, current) {
        eprintln!("{who}: cannot record the session of process {pid}: {e}");
    }
    Some(current.to_string())
}

fn write_record(
    paths: &Paths,
    dir: &Path,
    file: &Path,
    start: u64,
    session: &str,
) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    paths.prepare().map_err(std::io::Error::other)?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // Records of processes that are gone (or whose pid was reused) go.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let live = std::fs::read_to_string(entry.path())
                .ok()
                .and_then(|t| parse_record(&t))
                .is_some_and(|(s, _)| process_start(pid) == Some(s));
            if !live {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let tmp = dir.join(format!(
        ".{}.{}",
        file.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("record"),
        std::process::id()
    ));
    std::fs::write(&tmp, format!("{start} {session}\n"))?;
    std::fs::rename(&tmp, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_start_time() {
        assert_eq!(
            parse_record("987654 sess-1\n"),
            Some((987654, "sess-1".into()))
        );
        assert_eq!(parse_record("x sess"), None);
        assert_eq!(parse_record("12 "), None);
        assert!(process_start(std::process::id()).is_some());
    }
}
