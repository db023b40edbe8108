//! A connection to the daemon, started on demand.
//!
//! [`connect`] tries the socket; when nobody answers it starts
//! `wakeful daemon --foreground` (this executable, or `WAKEFUL_DAEMON_EXE`)
//! fully detached and waits for its readiness line. Two clients racing both
//! start a daemon; the daemon's locks let exactly one of them run, the other
//! waits until the first accepts connections and says so, and both clients
//! connect to it.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

use wakeful_protocol::{
    Call, DaemonInfo, Envelope, ErrorKind, Paths, PathsError, Reply, ReplyError, Request,
    PROTOCOL_VERSION,
};

/// How long a client waits for a daemon it started to accept connections.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`stop_daemon`] waits for the daemon to be gone: as long as a
/// service manager gives it between SIGTERM and SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// Why talking to the daemon failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No daemon answered and none could be started.
    #[error("the wakeful daemon could not be started (a client waits up to {}s): {detail}; see {log}", START_TIMEOUT.as_secs())]
    NotStarted {
        /// What went wrong, from the daemon log if possible.
        detail: String,
        /// The daemon log.
        log: PathBuf,
    },
    /// The state directories could not be prepared.
    #[error(transparent)]
    Paths(#[from] PathsError),
    /// The connection broke.
    #[error("lost the connection to the wakeful daemon: {0}; run the command again (the daemon restarts on demand)")]
    Io(#[from] std::io::Error),
    /// The daemon sent something this client does not understand.
    #[error(
        "unexpected reply from the daemon: {0}; is the daemon the same version (`wakeful status`)?"
    )]
    Protocol(String),
    /// The daemon still held its lock after this long ([`wait_gone`]).
    #[error("the daemon did not stop within {:?}; see `wakeful status` and the daemon log", .0)]
    NotStopped(Duration),
    /// The daemon that wrote a stream's events to a descriptor handed over
    /// is being replaced by another build (`wakeful daemon upgrade`):
    /// hand the descriptor over again, asking for the events after
    /// `after` (a stream without descriptors reconnects by itself).
    #[error("the wakeful daemon was upgraded; ask again for the events after seq {after}")]
    Upgraded {
        /// The seq of the last event written.
        after: u64,
    },
    /// The daemon closed the connection before the end of its answer.
    #[error("lost the connection to the wakeful daemon: the daemon closed the connection; run the command again (the daemon restarts on demand)")]
    Closed,
    /// The running daemon is another version, and it did not understand
    /// the request (an older daemon and a newer client, or the reverse).
    #[error("this wakeful is {client} but the running daemon is {daemon}, which cannot serve `{op}` ({detail}). Run `wakeful daemon upgrade` to move the daemon to this version: every running monitor goes on (if the daemon is too old to upgrade, `wakeful daemon stop` and run the command again: running monitors stop, persistent ones are re-armed). Or finish with the wakeful of version {daemon} first")]
    Skew {
        /// This client's version.
        client: String,
        /// The daemon's version.
        daemon: String,
        /// The request it could not serve.
        op: String,
        /// What it said.
        detail: String,
    },
    /// The daemon refused the request.
    #[error("{message}")]
    Refused {
        /// The kind (decides the exit code).
        kind: ErrorKind,
        /// The daemon's message.
        message: String,
    },
}

impl ClientError {
    /// The command-line exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            ClientError::Refused { kind, .. } => kind.exit_code(),
            _ => 1,
        }
    }
}

/// One request line, versioned.
fn encode(request: Request) -> Result<Vec<u8>, ClientError> {
    let mut line = serde_json::to_vec(&Envelope {
        v: PROTOCOL_VERSION,
        request,
    })
    .map_err(|e| ClientError::Protocol(e.to_string()))?;
    line.push(b'\n');
    Ok(line)
}

/// An open connection.
pub struct Connection {
    reader: Lines<BufReader<OwnedReadHalf>>,
    writer: OwnedWriteHalf,
    /// The daemon's version, as it recorded it when it started (`None`
    /// when unknown): a request it does not understand is then named a
    /// version skew ([`ClientError::Skew`]), never a parse error.
    daemon_version: Option<String>,
    /// The state directory it was made for (a stream reconnects there
    /// after an upgrade); `None` for a connection over a given stream.
    paths: Option<Paths>,
}

/// This client's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version the daemon of `paths` recorded, if it did.
fn recorded_version(paths: &Paths) -> Option<String> {
    let bytes = std::fs::read(paths.daemon_info()).ok()?;
    serde_json::from_slice::<DaemonInfo>(&bytes)
        .ok()
        .map(|i| i.version)
}

/// Whether a daemon's answer says that it did not understand a request:
/// an `invalid` error naming an unknown `op` or field, or a `version`
/// error.
fn not_understood(kind: ErrorKind, message: &str) -> bool {
    kind == ErrorKind::Version
        || (kind == ErrorKind::Invalid
            && (message.contains("unknown variant") || message.contains("unknown field")))
}

impl Connection {
    /// Sends one request.
    pub async fn send(&mut self, request: impl Into<Request>) -> Result<(), ClientError> {
        let line = encode(request.into())?;
        self.writer.write_all(&line).await?;
        Ok(())
    }

    /// Sends one request with descriptors (`SCM_RIGHTS`) for the daemon to
    /// use: [`wakeful_protocol::ReadEvents`]'s `write_to` writes the events
    /// to the first (and, for `channel`, locks the second around each write).
    pub async fn send_with_fds(
        &mut self,
        request: impl Into<Request>,
        fds: &[std::os::fd::BorrowedFd<'_>],
    ) -> Result<(), ClientError> {
        use nix::sys::socket::{sendmsg, ControlMessage, UnixAddr};
        use std::os::fd::AsRawFd;
        let line = encode(request.into())?;
        let socket: &UnixStream = self.writer.as_ref();
        let fds: Vec<i32> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
        let sent = loop {
            socket.writable().await?;
            // The descriptor rides with the first bytes of the request.
            let attempt = socket.try_io(tokio::io::Interest::WRITABLE, || {
                sendmsg::<UnixAddr>(
                    socket.as_raw_fd(),
                    &[std::io::IoSlice::new(&line)],
                    &[ControlMessage::ScmRights(&fds)],
                    wakeful_platform::fd::send_no_signal(),
                    None,
                )
                .map_err(std::io::Error::from)
            });
            match attempt {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e.into()),
            }
        };
        self.writer.write_all(&line[sent..]).await?;
        Ok(())
    }

    /// The next reply; `Ok(None)` when the daemon closed the connection.
    pub async fn next(&mut self) -> Result<Option<Reply>, ClientError> {
        match self.reader.next_line().await? {
            None => Ok(None),
            Some(line) => serde_json::from_str(&line)
                .map(Some)
                .map_err(|e| ClientError::Protocol(format!("{e}: {line}"))),
        }
    }

    /// The next line, undecoded; `Ok(None)` when the daemon closed the
    /// connection.
    pub(crate) async fn next_line(&mut self) -> Result<Option<String>, ClientError> {
        Ok(self.reader.next_line().await?)
    }

    /// Whether more of the daemon's lines are already read and waiting.
    pub(crate) fn has_buffered(&mut self) -> bool {
        !self.reader.get_mut().buffer().is_empty()
    }

    /// Sends a request and returns the result of its single `ok` reply,
    /// as the type the request names ([`Call::Reply`]). When the daemon is
    /// another version and did not understand the request (or its reply
    /// cannot be read), the error says so ([`ClientError::Skew`]).
    pub async fn call<C: Call>(&mut self, request: C) -> Result<C::Reply, ClientError> {
        let request: Request = request.into();
        let op = request.op();
        self.send(request).await?;
        let result = match self.next().await {
            Ok(Some(reply)) => C::decode(reply).map_err(ClientError::from),
            Ok(None) => Err(ClientError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            ))),
            Err(e) => Err(e),
        };
        result.map_err(|e| self.name_skew(op, e))
    }

    /// The daemon's version as it recorded it, when known.
    pub fn daemon_version(&self) -> Option<&str> {
        self.daemon_version.as_deref()
    }

    /// `e` as a [`ClientError::Skew`] when the daemon is another version and
    /// `e` says it did not understand `op`; `e` otherwise.
    pub(crate) fn name_skew(&self, op: &str, e: ClientError) -> ClientError {
        let Some(daemon) = self.daemon_version.as_deref().filter(|v| *v != VERSION) else {
            return e;
        };
        let detail = match &e {
            ClientError::Refused { kind, message } if not_understood(*kind, message) => {
                message.clone()
            }
            ClientError::Protocol(m) => m.clone(),
            _ => return e,
        };
        ClientError::Skew {
            client: VERSION.to_string(),
            daemon: daemon.to_string(),
            op: op.to_string(),
            detail,
        }
    }

    /// The same connection, told the daemon's version.
    pub(crate) fn knowing(mut self, version: Option<String>) -> Connection {
        self.daemon_version = version;
        self
    }
}

impl From<ReplyError> for ClientError {
    fn from(e: ReplyError) -> Self {
        match e {
            ReplyError::Refused { kind, message } => ClientError::Refused { kind, message },
            ReplyError::Unexpected(m) => ClientError::Protocol(m),
        }
    }
}

/// Connects to a running daemon, without starting one: at this client's
/// socket, else at the socket the daemon of this state directory recorded
/// (a client may see another runtime directory than the daemon's starter).
pub async fn connect_existing(paths: &Paths) -> std::io::Result<Connection> {
    let first = match connect_at(&paths.socket()).await {
        Ok(c) => return Ok(c.knowing(recorded_version(paths)).at(paths)),
        Err(e) => e,
    };
    match recorded_socket(paths) {
        Some(socket) if socket != paths.socket() => connect_at(&socket)
            .await
            .map(|c| c.knowing(recorded_version(paths)).at(paths)),
        _ => Err(first),
    }
}

/// How long a stream ended by an upgrade tries to reach the daemon again.
/// The socket stays open across the upgrade, so the first try normally
/// connects; this covers a daemon that is gone.
pub const RESUME_WAIT: Duration = Duration::from_secs(5);

/// Connects again to the daemon of `paths` after an upgrade ended a
/// stream (never starts one): tries for up to [`RESUME_WAIT`].
pub(crate) async fn reconnect(paths: &Paths) -> Result<Connection, ClientError> {
    let deadline = tokio::time::Instant::now() + RESUME_WAIT;
    let mut pause = Duration::from_millis(10);
    loop {
        match connect_existing(paths).await {
            Ok(c) => return Ok(c),
            Err(e) if tokio::time::Instant::now() + pause >= deadline => return Err(e.into()),
            Err(_) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
        }
    }
}

pub(crate) async fn connect_at(socket: &std::path::Path) -> std::io::Result<Connection> {
    Ok(Connection::from_stream(UnixStream::connect(socket).await?))
}

impl Connection {
    /// A connection over `stream`, already connected to something that
    /// serves the daemon's protocol: the daemon uses it for the waits it
    /// runs itself (one end of a socket pair whose other end it serves as
    /// any client's connection).
    pub fn from_stream(stream: UnixStream) -> Connection {
        let (r, w) = stream.into_split();
        Connection {
            reader: BufReader::new(r).lines(),
            writer: w,
            daemon_version: None,
            paths: None,
        }
    }

    /// The state directory it was made for, when known.
    pub(crate) fn paths(&self) -> Option<&Paths> {
        self.paths.as_ref()
    }

    fn at(mut self, paths: &Paths) -> Connection {
        self.paths = Some(paths.clone());
        self
    }
}

/// The socket recorded by the daemon of this state directory, if any.
fn recorded_socket(paths: &Paths) -> Option<PathBuf> {
    let bytes = std::fs::read(paths.daemon_info()).ok()?;
    serde_json::from_slice::<DaemonInfo>(&bytes)
        .ok()
        .map(|i| i.socket)
}

/// Connects to the daemon, starting it when it is not running.
///
/// The daemon is started fully detached: `wakeful daemon --foreground
/// --ready-fd N` is forked twice (so it is not this process's child, nor in
/// its process tree), in a session and process group of its own, with
/// stdin, stdout and stderr on `/dev/null` (it logs to its log file), in
/// `/`. It tells on a pipe when it accepts connections (or why it could
/// not start, or that another daemon already serves this state directory),
/// so the client waits for that one line instead of polling the socket.
pub async fn connect(paths: &Paths) -> Result<Connection, ClientError> {
    if let Ok(c) = connect_existing(paths).await {
        return Ok(c);
    }
    paths.prepare()?;
    let ready = spawn_daemon()?;
    let line = tokio::time::timeout(
        START_TIMEOUT,
        tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(ready), &mut line)
                .map(|_| line)
        }),
    )
    .await;
    let line = match line {
        Ok(Ok(Ok(line))) => line,
        Ok(Ok(Err(e))) => return Err(not_started(paths, e.to_string())),
        Ok(Err(e)) => return Err(not_started(paths, e.to_string())),
        Err(_) => return Err(not_started(paths, "no answer".into())),
    };
    let line = line.trim_end();
    let socket = match line.split_once(' ') {
        Some(("ready" | "running", socket)) => PathBuf::from(socket),
        Some(("error", message)) => return Err(not_started(paths, message.to_string())),
        _ => {
            return Err(not_started(
                paths,
                "it exited without saying why".to_string(),
            ))
        }
    };
    connect_at(&socket)
        .await
        .map(|c| c.knowing(recorded_version(paths)).at(paths))
        .map_err(|e| not_started(paths, format!("its socket {}: {e}", socket.display())))
}

fn not_started(paths: &Paths, detail: String) -> ClientError {
    let detail = match log_tail(paths) {
        Some(tail) if detail.contains("without saying") || detail == "no answer" => {
            format!("{detail}; its log ends: {tail}")
        }
        _ => detail,
    };
    ClientError::NotStarted {
        detail,
        log: paths.daemon_log(),
    }
}

/// Starts the daemon detached (see [`connect`]); returns the read end of
/// its readiness pipe.
fn spawn_daemon() -> Result<std::fs::File, ClientError> {
    use std::os::fd::{AsRawFd, OwnedFd};
    let exe = match std::env::var_os("WAKEFUL_DAEMON_EXE") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe()?,
    };
    let (read, write): (OwnedFd, OwnedFd) = wakeful_platform::fd::pipe_cloexec()?;
    let write_fd = write.as_raw_fd();
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("daemon")
        .arg("--foreground")
        .arg("--ready-fd")
        .arg(write_fd.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .current_dir("/");
    // SAFETY: between fork and exec the closure only makes async-signal-safe
    // system calls (setsid, fork, _exit, fcntl, signal), allocates nothing
    // and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            // A session (and process group) of its own: no signal of the
            // starter's terminal, group or session reaches it.
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            // Fork again and let the middle process exit at once: the daemon
            // is then nobody's child here, so no tree kill of the starter
            // (Claude Code tearing down its hooks) reaches it either.
            match libc::fork() {
                -1 => return Err(std::io::Error::last_os_error()),
                0 => {}
                _ => libc::_exit(0),
            }
            // And lead a session and group of its own again (the middle
            // process led the first one).
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            // The readiness pipe survives the exec.
            if libc::fcntl(write_fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut middle = cmd.spawn()?;
    // The middle process exits at once; collect it.
    let _ = middle.wait();
    drop(write);
    Ok(std::fs::File::from(read))
}

fn log_tail(paths: &Paths) -> Option<String> {
    let text = std::fs::read_to_string(paths.daemon_log()).ok()?;
    let last: Vec<&str> = text.lines().rev().take(3).collect();
    if last.is_empty() {
        return None;
    }
    Some(last.into_iter().rev().collect::<Vec<_>>().join(" / "))
}

/// The session's resume digest from a running daemon (never starts one);
/// `None` when no daemon answers.
pub async fn digest(paths: &Paths, session: &str) -> Option<wakeful_protocol::Digest> {
    let mut conn = connect_existing(paths).await.ok()?;
    conn.call(wakeful_protocol::GetDigest {
        session: session.to_string(),
    })
    .await
    .ok()
}

/// Asks a running daemon to stop and waits until it has stopped every
/// monitor and exited ([`wait_gone`], at most [`STOP_TIMEOUT`]); `None`
/// when no daemon was running.
pub async fn stop_daemon(
    paths: &Paths,
) -> Result<Option<wakeful_protocol::ShutdownResult>, ClientError> {
    let Ok(mut conn) = connect_existing(paths).await else {
        return Ok(None);
    };
    let stopped = conn.call(wakeful_protocol::Shutdown {}).await?;
    wait_gone(paths, STOP_TIMEOUT).await?;
    Ok(Some(stopped))
}

/// Waits until no daemon holds this state directory's lock file, at most
/// `limit`. A daemon holds it until its last thread has exited (after its
/// socket is closed and its monitors are stopped), so a lock that can be
/// taken is the notice that the daemon is gone, with no polling; no lock
/// file means no daemon ever ran. The lock is let go at once.
///
/// The wait blocks in `flock(2)` on a thread of its own, not on the
/// runtime's blocking pool: past `limit` that thread is left to end when
/// the daemon does, and a runtime being dropped never waits for it.
pub async fn wait_gone(paths: &Paths, limit: Duration) -> Result<(), ClientError> {
    let file = match std::fs::File::options().write(true).open(paths.lock_file()) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("wakeful-wait-gone".into())
        .spawn(move || {
            let taken = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
                .map(drop)
                .map_err(|(_, e)| std::io::Error::from(e));
            let _ = tx.send(taken);
        })?;
    match tokio::time::timeout(limit, rx).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(e))) => Err(e.into()),
        Ok(Err(_)) | Err(_) => Err(ClientError::NotStopped(limit)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths_in(dir: &std::path::Path) -> Paths {
        let home = dir.to_path_buf();
        Paths::from_vars(|k| (k == "WAKEFUL_HOME").then(|| home.clone())).unwrap()
    }

    /// Holds the lock file as a running daemon does.
    fn hold_lock(paths: &Paths) -> nix::fcntl::Flock<std::fs::File> {
        let file = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(paths.lock_file())
            .unwrap();
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).unwrap()
    }

    #[test]
    fn wait_gone_ends_when_the_lock_is_free_and_never_holds_up_the_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let paths = paths_in(dir.path());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // No lock file: no daemon ever ran here.
        rt.block_on(wait_gone(&paths, Duration::from_secs(5)))
            .unwrap();
        // A daemon that does not let go: the limit, then an error that says
        // how long it waited.
        let held = hold_lock(&paths);
        let e = rt
            .block_on(wait_gone(&paths, Duration::from_millis(200)))
            .unwrap_err();
        assert!(matches!(e, ClientError::NotStopped(d) if d == Duration::from_millis(200)));
        assert!(e.to_string().contains("did not stop within 200ms"), "{e}");
        // The runtime goes away at once though the waiting thread is still
        // blocked on the held lock.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(rt);
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(5))
            .expect("dropping the runtime waited for the blocked thread");
        // Let go: the next wait ends without reaching its limit.
        drop(held);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let t0 = std::time::Instant::now();
        rt.block_on(wait_gone(&paths, Duration::from_secs(10)))
            .unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }
}
