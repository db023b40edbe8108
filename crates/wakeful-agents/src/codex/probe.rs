//! What wakeful can tell of Codex without speaking to it: where its
//! app-server control socket is, and which process holds a thread's writer
//! lock. `wakeful doctor` and the wake adapter ([`super::wake_adapter`]) both ask.

use std::path::{Path, PathBuf};

/// The control socket of the app-server daemon under a `CODEX_HOME`.
pub fn control_socket(codex_home: &Path) -> PathBuf {
    codex_home
        .join("app-server-control")
        .join("app-server-control.sock")
}

/// `CODEX_HOME` as Codex finds it: the route's, else `$CODEX_HOME`, else
/// `~/.codex`.
pub fn codex_home(route_home: Option<&Path>) -> Option<PathBuf> {
    if let Some(h) = route_home {
        return Some(h.to_path_buf());
    }
    if let Some(h) = std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()) {
        return Some(PathBuf::from(h));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".codex"))
}

/// The process that holds a thread (Codex's writer lock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its pid.
    pub pid: u32,
    /// Its command line.
    pub argv: Vec<String>,
}

impl Holder {
    /// Whether it is a `codex exec` run.
    pub fn is_exec(&self) -> bool {
        is_codex_exec(&self.argv)
    }

    /// Whether it is an app-server listening on the control socket (the
    /// daemon, `--listen unix://`), which runs queued messages itself.
    pub fn is_control_app_server(&self) -> bool {
        self.argv.iter().any(|a| a == "app-server")
            && self
                .argv
                .iter()
                .any(|a| a == "--managed-daemon" || a.starts_with("unix://"))
    }

    /// Its pid and the start of its command line, for messages.
    pub fn describe(&self) -> String {
        let cmd: String = self.argv.join(" ").chars().take(120).collect();
        format!("pid {}: {cmd}", self.pid)
    }
}

/// Whether a command line runs `codex exec` (or its alias `codex e`): the
/// first argument that is not an option (or an option's value) names the
/// subcommand.
pub fn is_codex_exec(argv: &[String]) -> bool {
    const WITH_VALUE: &[&str] = &[
        "-c",
        "--config",
        "--enable",
        "--disable",
        "-p",
        "--profile",
        "-m",
        "--model",
        "-C",
        "--cd",
        "-s",
        "--sandbox",
        "-a",
        "--ask-for-approval",
        "-i",
        "--image",
        "--add-dir",
        "--local-provider",
        "--remote",
        "--remote-auth-token-env",
    ];
    let Some(program) = argv.first() else {
        return false;
    };
    let name = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    // `node …/bin/codex.js exec …` (the npm launcher) or the native binary.
    let args: &[String] = if name == "node" || name.starts_with("node") {
        match argv.get(1) {
            Some(script) if script.contains("codex") => &argv[2..],
            _ => return false,
        }
    } else if name.starts_with("codex") {
        &argv[1..]
    } else {
        return false;
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if WITH_VALUE.contains(&a.as_str()) {
            it.next();
        } else if a.starts_with('-') {
            continue;
        } else {
            return a == "exec" || a == "e";
        }
    }
    false
}

/// Who holds Codex's writer lock of `thread`
/// (`$CODEX_HOME/thread-writer-locks/<thread>.lock`, an `flock`), read from
/// the kernel's lock table (`wakeful_platform::fd::locks_table`) without
/// touching the lock. `None` when nobody does or it
/// cannot be told.
pub fn thread_holder(codex_home: &Path, thread: &str) -> Option<Holder> {
    use std::os::unix::fs::MetadataExt;
    if thread.contains('/') || thread.contains("..") {
        return None;
    }
    let lock = codex_home
        .join("thread-writer-locks")
        .join(format!("{thread}.lock"));
    let meta = std::fs::metadata(&lock).ok()?;
    let locks = wakeful_platform::fd::locks_table()?;
    let pid = lock_holder(&locks, meta.dev(), meta.ino())?;
    let argv = wakeful_platform::tree::cmdline(i32::try_from(pid).ok()?)?;
    Some(Holder { pid, argv })
}

/// The pid holding a lock on the file `(dev, ino)`, from the text of
/// the lock table (Linux's `/proc/locks` format) (`1: FLOCK  ADVISORY  WRITE 4135 fe:00:10021313 0 EOF`;
/// waiters, marked `->`, are skipped).
// `dev_t` is u64 on Linux, i32 on macOS (where there is no such table).
#[allow(clippy::unnecessary_cast)]
pub fn lock_holder(proc_locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let dev = dev as libc::dev_t;
    let (major, minor) = (libc::major(dev) as u64, libc::minor(dev) as u64);
    proc_locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) == Some(&"->") {
            return None;
        }
        let at = fields.iter().position(|f| f.matches(':').count() == 2)?;
        let mut parts = fields[at].split(':');
        let maj = u64::from_str_radix(parts.next()?, 16).ok()?;
        let min = u64::from_str_radix(parts.next()?, 16).ok()?;
        let inode: u64 = parts.next()?.parse().ok()?;
        if (maj, min, inode) != (major, minor, ino) {
            return None;
        }
        fields.get(at.checked_sub(1)?)?.parse().ok()
    })
}
