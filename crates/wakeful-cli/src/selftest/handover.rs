//! The stdout handover (the daemon writes events to the reader's pipe
//! itself) and the MCP frame lock (two writers of one stdout never
//! interleave a frame).

use std::process::{Command, Stdio};
use std::time::Duration;

use super::follow::Reader;
use super::scratch::{Scratch, ScratchError};
use super::{Check, Outcome};

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// `events --follow` with its stdout a pipe, then SIGSTOPped: a line
/// appended to a followed file must still reach the pipe, which only the
/// daemon can then write.
pub fn stdout(s: &Scratch, brk: Option<&str>, backend: wakeful_platform::Backend) -> Check {
    const G: &str = "stdout handed over to the daemon";
    let word = format!("{}7", s.tag());
    let file = s.dir().join(format!("hand-{word}.log"));
    let mut cmd = s.cmd(&["--json", "events", "--follow"]);
    if brk == Some("handover") {
        // The break: a client that cannot reopen its stdout relays.
        cmd.env("WAKEFUL_PLATFORM", "posix");
    }
    let setup = || -> Result<Reader, ScratchError> {
        std::fs::write(&file, b"")?;
        s.json(&[
            "start",
            "--batch-ms",
            "0",
            "--file",
            &file.display().to_string(),
        ])?;
        Ok(Reader::spawn(cmd)?)
    };
    let reader = match setup() {
        Ok(r) => r,
        Err(e) => return Check::new("handover", G, Outcome::Failed, e.to_string()),
    };
    // Caught up and attached: a first line comes through the client alive.
    let first = format!("first {word}");
    let wrote = std::fs::write(&file, format!("{first}\n"));
    if wrote.is_err()
        || reader
            .wait(Duration::from_secs(5), |l| l.contains(&first))
            .is_none()
    {
        return Check::new(
            "handover",
            G,
            Outcome::Failed,
            "`events --follow` showed no line within 5 s",
        );
    }
    signal(reader.pid(), "-STOP");
    let second = format!("second {word}");
    let seen = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{second}\n").as_bytes()))
        .is_ok()
        && reader
            .wait(Duration::from_secs(3), |l| l.contains(&second))
            .is_some();
    signal(reader.pid(), "-CONT");
    match (seen, backend.name()) {
        (true, _) => Check::new(
            "handover",
            G,
            Outcome::Ok,
            "a line reached the pipe of a SIGSTOPped `events --follow`: the daemon wrote it",
        ),
        (false, "linux") => Check::new(
            "handover",
            G,
            Outcome::Failed,
            "no line reached the pipe while `events --follow` was stopped: the client relays instead of the daemon writing",
        )
        .fix("nothing is lost (the client relays, one process hop more); report it with `wakeful doctor --selftest --json`"),
        (false, b) => Check::new(
            "handover",
            G,
            Outcome::Limit,
            format!("backend {b}: a pipe cannot be reopened, so the client relays (same events, one process hop more), as documented"),
        ),
    }
}

/// Two sides of one frame lock (the one `wakeful mcp` keeps and the one
/// it hands the daemon): while one holds it, the other cannot take it.
pub fn frame_lock(brk: Option<&str>, backend: wakeful_platform::Backend) -> Check {
    const G: &str = "the MCP frame lock excludes the other writer";
    use wakeful_protocol::FrameLock;
    let (mine, other) = match FrameLock::create() {
        Ok(pair) => pair,
        Err(e) if backend.name() != "linux" => {
            return Check::new(
                "framelock",
                G,
                Outcome::Limit,
                format!("backend {}: no frame lock ({e}); `wakeful mcp` relays channel events instead of handing its stdout over", backend.name()),
            )
        }
        Err(e) => {
            return Check::new("framelock", G, Outcome::Failed, format!("FrameLock::create: {e}"))
                .fix("`wakeful mcp` relays instead (nothing is lost); report it with `wakeful doctor --selftest --json`")
        }
    };
    let theirs = match FrameLock::from_handed(other) {
        Ok(l) => l,
        Err(e) => return Check::new("framelock", G, Outcome::Failed, e.to_string()),
    };
    let held = if brk == Some("framelock") {
        Ok(true) // The break: the first writer never takes it.
    } else {
        mine.lock_blocking().map(|_| true)
    };
    let result = held.and_then(|_| {
        let while_held = theirs.try_lock()?;
        mine.unlock()?;
        let after = theirs.try_lock()?;
        theirs.unlock()?;
        Ok((while_held, after))
    });
    match result {
        Ok((false, true)) => Check::new(
            "framelock",
            G,
            Outcome::Ok,
            "held by one side, refused to the other; taken once let go",
        ),
        Ok((while_held, after)) => Check::new(
            "framelock",
            G,
            Outcome::Failed,
            format!("the other side could take it while held: {while_held}; after it was let go: {after}"),
        )
        .fix("frames of `wakeful mcp` and the daemon could interleave: run `wakeful mcp` with WAKEFUL_PLATFORM=posix (it relays) and report it"),
        Err(e) => Check::new("framelock", G, Outcome::Failed, e.to_string()),
    }
}
