//! A connection to the daemon, started on demand.
//!
//! [`connect`] tries the socket; when nobody answers it starts
//! `wakeful daemon --foreground` (this executable, or `WAKEFUL_DAEMON_EXE`)
//! in a session of its own, with its stderr appended to the daemon log, and
//! waits for the socket to accept. Two clients racing both start a daemon;
//! the daemon's lock lets exactly one of them run, and both clients connect
//! to it.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

use wakeful_protocol::{Envelope, ErrorKind, Paths, PathsError, Reply, Request, PROTOCOL_VERSION};

/// How long a client waits for a daemon it started to accept connections.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Why talking to the daemon failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No daemon answered and none could be started.
    #[error("the wakeful daemon did not start within {}s: {detail}; see {log}", START_TIMEOUT.as_secs())]
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

/// An open connection.
pub struct Connection {
    reader: Lines<BufReader<OwnedReadHalf>>,
    writer: OwnedWriteHalf,
}

impl Connection {
    /// Sends one request.
    pub async fn send(&mut self, request: Request) -> Result<(), ClientError> {
        let mut line = serde_json::to_vec(&Envelope {
            v: PROTOCOL_VERSION,
            request,
        })
        .map_err(|e| ClientError::Protocol(e.to_string()))?;
        line.push(b'\n');
        self.writer.write_all(&line).await?;
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

    /// Sends a request and returns the result of its single `ok` reply.
    pub async fn call(&mut self, request: Request) -> Result<serde_json::Value, ClientError> {
        self.send(request).await?;
        match self.next().await? {
            Some(Reply::Ok { result }) => Ok(result),
            Some(Reply::Error { kind, message }) => Err(ClientError::Refused { kind, message }),
            Some(other) => Err(ClientError::Protocol(format!("{other:?}"))),
            None => Err(ClientError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            ))),
        }
    }

    /// Like [`Connection::call`], decoding the result.
    pub async fn call_as<T: serde::de::DeserializeOwned>(
        &mut self,
        request: Request,
    ) -> Result<T, ClientError> {
        let v = self.call(request).await?;
        serde_json::from_value(v).map_err(|e| ClientError::Protocol(e.to_string()))
    }
}

/// Connects to a running daemon, without starting one.
pub async fn connect_existing(paths: &Paths) -> std::io::Result<Connection> {
    let stream = UnixStream::connect(paths.socket()).await?;
    let (r, w) = stream.into_split();
    Ok(Connection {
        reader: BufReader::new(r).lines(),
        writer: w,
    })
}

/// Connects to the daemon, starting it when it is not running.
pub async fn connect(paths: &Paths) -> Result<Connection, ClientError> {
    if let Ok(c) = connect_existing(paths).await {
        return Ok(c);
    }
    paths.prepare()?;
    let mut child = spawn_daemon(paths)?;
    let deadline = tokio::time::Instant::now() + START_TIMEOUT;
    let mut pause = Duration::from_millis(2);
    loop {
        match connect_existing(paths).await {
            Ok(c) => return Ok(c),
            Err(e) => {
                // A daemon that failed on its own (bad config) says why in
                // its log; one that lost the lock race exits 0 while the
                // winner comes up, so keep trying until the deadline.
                let failed = matches!(child.try_wait(), Ok(Some(s)) if !s.success());
                if failed || tokio::time::Instant::now() >= deadline {
                    return Err(ClientError::NotStarted {
                        detail: log_tail(paths).unwrap_or_else(|| e.to_string()),
                        log: paths.daemon_log(),
                    });
                }
            }
        }
        // Bounded backoff while the daemon binds its socket.
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

fn spawn_daemon(paths: &Paths) -> Result<std::process::Child, ClientError> {
    let exe = match std::env::var_os("WAKEFUL_DAEMON_EXE") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe()?,
    };
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(paths.daemon_log())?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("daemon")
        .arg("--foreground")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .current_dir("/");
    // SAFETY: setsid is async-signal-safe; it detaches the daemon from the
    // client's session and terminal so it outlives the client.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    Ok(cmd.spawn()?)
}

fn log_tail(paths: &Paths) -> Option<String> {
    let text = std::fs::read_to_string(paths.daemon_log()).ok()?;
    let last: Vec<&str> = text.lines().rev().take(3).collect();
    if last.is_empty() {
        return None;
    }
    Some(last.into_iter().rev().collect::<Vec<_>>().join(" / "))
}
