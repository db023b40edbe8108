//! Terminals (docs/CONTRACT.md §5): managed commands that outlive the monitors watching
//! them.
//!
//! A terminal runs `sh -c COMMAND` in its own process group and writes its
//! output file like a monitor does. Up to
//! [`MAX_MONITORS_PER_TERMINAL`] monitors attach to it; each gets every chunk
//! the command prints after it attached, through a bounded channel (a slow
//! monitor slows the terminal's reading rather than losing output). Stopping a
//! monitor only detaches it; [`Terminals::kill`] stops the command (SIGTERM to
//! the group, grace, SIGKILL). When the command ends, every attached monitor
//! ends with its exit status.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::Utc;
use tokio::sync::{mpsc, watch};
use wakeful_core::journal::JournalEntry;
use wakeful_core::lines::{LineSplitter, Piece};
use wakeful_core::machine::SourceEnd;
use wakeful_core::terminal::{TerminalInfo, MAX_MONITORS_PER_TERMINAL};
use wakeful_core::{MonitorSpec, MonitorState, MonitorStopReason, Stream};

use crate::output_writer::OutputFile;
use crate::process::driver::{ProcEvent, ProcessDriver};
use crate::source::{Input, InputSource, Launch};
use crate::sources::command::spawn_request;

/// Chunks buffered per attached monitor.
const ATTACH_QUEUE: usize = 256;

enum TermMsg {
    Chunk(Stream, Vec<u8>),
    End(SourceEnd),
}

struct TermEntry {
    info: Arc<Mutex<TerminalInfo>>,
    subscribers: Arc<Mutex<Vec<mpsc::Sender<TermMsg>>>>,
    kill_tx: watch::Sender<bool>,
    done: watch::Receiver<bool>,
}

/// The terminals of one registry.
#[derive(Clone)]
pub struct Terminals {
    inner: Arc<Mutex<HashMap<String, TermEntry>>>,
    output_dir: PathBuf,
    launch: Launch,
    journal: crate::hub::Hub,
    output: Arc<crate::output_writer::OutputBudget>,
}

/// Why a monitor cannot attach to a terminal (the `failed` reason of the
/// monitor).
#[derive(Debug, thiserror::Error)]
pub(crate) enum AttachError {
    /// No terminal has this id.
    #[error("terminal {id} not found; `wakeful terminal list` shows them")]
    NotFound {
        /// The terminal id.
        id: String,
    },
    /// The terminal has ended.
    #[error("terminal {id} has already ended")]
    Ended {
        /// The terminal id.
        id: String,
    },
    /// [`MAX_MONITORS_PER_TERMINAL`] monitors are attached already.
    #[error("terminal {id} already has {MAX_MONITORS_PER_TERMINAL} monitors attached (the limit); stop one first")]
    Full {
        /// The terminal id.
        id: String,
    },
}

/// Why a terminal request failed.
#[derive(Debug, thiserror::Error)]
pub enum TerminalError {
    /// No such terminal.
    #[error("terminal {0} not found; `wakeful terminal list` shows them")]
    NotFound(String),
    /// The command could not start.
    #[error("could not start the terminal command: {0}")]
    Spawn(String),
    /// The output file could not be opened.
    #[error("cannot open the terminal's output file {path}: {source}")]
    Output {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Invalid command text or working directory.
    #[error(transparent)]
    Invalid(#[from] wakeful_core::ParamError),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Terminals {
    pub(crate) fn new(
        output_dir: PathBuf,
        launch: Launch,
        journal: crate::hub::Hub,
        output: Arc<crate::output_writer::OutputBudget>,
    ) -> Self {
        Terminals {
            inner: Arc::new(Mutex::new(HashMap::new())),
            output_dir,
            launch,
            journal,
            output,
        }
    }

    /// Starts `command` as a terminal of `session`, with the caller's
    /// environment and working directory.
    pub async fn run(
        &self,
        session: &str,
        command: &str,
        base_env: Option<std::collections::BTreeMap<String, String>>,
        base_cwd: Option<PathBuf>,
    ) -> Result<TerminalInfo, TerminalError> {
        self.run_gated(session, command, base_env, base_cwd, None)
            .await
    }

    /// Like [`Terminals::run`]; the command's output is not read (it waits
    /// in the pipe) until `gate` fires or is dropped, so that monitors
    /// attached in between see it from its first byte.
    pub async fn run_gated(
        &self,
        session: &str,
        command: &str,
        base_env: Option<std::collections::BTreeMap<String, String>>,
        base_cwd: Option<PathBuf>,
        gate: Option<tokio::sync::oneshot::Receiver<()>>,
    ) -> Result<TerminalInfo, TerminalError> {
        let spec = MonitorSpec::command(command, "terminal");
        spec.validate()?;
        let id = crate::id::new_id("term");
        let output_path = self.output_dir.join(format!("{id}.log"));
        let file = OutputFile::open(&output_path, &self.output).map_err(|source| {
            TerminalError::Output {
                path: output_path.clone(),
                source,
            }
        })?;
        let mut launch = self.launch.clone();
        launch.base_env = base_env;
        launch.base_cwd = base_cwd;
        let proc = ProcessDriver::spawn(spawn_request(&spec, command, &launch, &id, session))
            .map_err(|e| TerminalError::Spawn(e.to_string()))?;
        let pid = Some(proc.pid());
        let info = TerminalInfo {
            id: id.clone(),
            session: session.to_string(),
            command: command.to_string(),
            state: MonitorState::Running,
            exit: None,
            started_at: Utc::now(),
            ended_at: None,
            output_path,
            monitors: 0,
            pid,
            survivors: Vec::new(),
        };
        let shared = Arc::new(Mutex::new(info.clone()));
        let subscribers = Arc::new(Mutex::new(Vec::new()));
        let (kill_tx, kill_rx) = watch::channel(false);
        let (done_tx, done_rx) = watch::channel(false);
        lock(&self.inner).insert(
            id,
            TermEntry {
                info: shared.clone(),
                subscribers: subscribers.clone(),
                kill_tx,
                done: done_rx,
            },
        );
        let journal = self.journal.clone();
        let _ = journal
            .append(vec![JournalEntry::Terminal(info.clone())])
            .await;
        tokio::spawn(async move {
            if let Some(gate) = gate {
                let _ = gate.await;
            }
            let (end, survivors) = pump(proc, file, &subscribers, kill_rx).await;
            {
                let mut i = lock(&shared);
                i.state = MonitorState::Ended;
                i.ended_at = Some(Utc::now());
                i.survivors = survivors;
                i.exit = match &end {
                    SourceEnd::Exited(code) => Some(MonitorStopReason::ExitCode { code: *code }),
                    SourceEnd::Signaled(signal) => {
                        Some(MonitorStopReason::Signal { signal: *signal })
                    }
                    SourceEnd::Ended(r) => Some(r.clone()),
                    SourceEnd::Failed(_) => None,
                };
            }
            let ended = lock(&shared).clone();
            let subs: Vec<_> = lock(&subscribers).drain(..).collect();
            for s in subs {
                let _ = s.send(TermMsg::End(end.clone())).await;
            }
            // Ended now; its row follows (a store that cannot write, a
            // full disk, keeps no `kill` waiting for it).
            let _ = done_tx.send(true);
            let _ = journal.append(vec![JournalEntry::Terminal(ended)]).await;
        });
        Ok(info)
    }

    /// Every terminal, running first.
    pub fn list(&self) -> Vec<TerminalInfo> {
        let map = lock(&self.inner);
        let mut v: Vec<TerminalInfo> = map
            .values()
            .map(|e| {
                let mut i = lock(&e.info).clone();
                i.monitors = lock(&e.subscribers)
                    .iter()
                    .filter(|s| !s.is_closed())
                    .count();
                i
            })
            .collect();
        v.sort_by(|a, b| {
            (a.state != MonitorState::Running)
                .cmp(&(b.state != MonitorState::Running))
                .then(a.started_at.cmp(&b.started_at))
        });
        v
    }

    /// One terminal.
    pub fn get(&self, id: &str) -> Option<TerminalInfo> {
        self.list().into_iter().find(|t| t.id == id)
    }

    /// Stops the command (its whole group) and waits until it ended.
    pub async fn kill(&self, id: &str) -> Result<TerminalInfo, TerminalError> {
        let (mut done, kill_tx) = {
            let map = lock(&self.inner);
            let e = map
                .get(id)
                .ok_or_else(|| TerminalError::NotFound(id.to_string()))?;
            (e.done.clone(), e.kill_tx.clone())
        };
        kill_tx.send_replace(true);
        let _ = done.wait_for(|d| *d).await;
        self.get(id)
            .ok_or_else(|| TerminalError::NotFound(id.to_string()))
    }

    /// Waits until terminal `id` ended.
    pub async fn wait(&self, id: &str) -> Result<TerminalInfo, TerminalError> {
        let mut done = {
            let map = lock(&self.inner);
            map.get(id)
                .ok_or_else(|| TerminalError::NotFound(id.to_string()))?
                .done
                .clone()
        };
        let _ = done.wait_for(|d| *d).await;
        self.get(id)
            .ok_or_else(|| TerminalError::NotFound(id.to_string()))
    }

    /// Kills every running terminal (the owner is shutting down).
    pub async fn kill_all(&self) {
        let ids: Vec<String> = self
            .list()
            .into_iter()
            .filter(|t| t.state == MonitorState::Running)
            .map(|t| t.id)
            .collect();
        for id in ids {
            let _ = self.kill(&id).await;
        }
    }

    /// Attaches a monitor; refuses a fifth one and ended terminals.
    pub(crate) fn attach(&self, id: &str) -> Result<TerminalSource, AttachError> {
        let map = lock(&self.inner);
        let e = map
            .get(id)
            .ok_or_else(|| AttachError::NotFound { id: id.to_string() })?;
        if lock(&e.info).state != MonitorState::Running {
            return Err(AttachError::Ended { id: id.to_string() });
        }
        let mut subs = lock(&e.subscribers);
        subs.retain(|s| !s.is_closed());
        if subs.len() >= MAX_MONITORS_PER_TERMINAL {
            return Err(AttachError::Full { id: id.to_string() });
        }
        let (tx, rx) = mpsc::channel(ATTACH_QUEUE);
        subs.push(tx);
        Ok(TerminalSource {
            rx,
            current: Vec::new(),
        })
    }

    /// How many monitors are attached to `id` now.
    pub fn attached(&self, id: &str) -> usize {
        self.get(id).map_or(0, |t| t.monitors)
    }
}

/// Reads the command's output into the file and every attached monitor
/// until it ended (or was killed); returns how it ended and which of its
/// processes survived.
async fn pump(
    mut proc: ProcessDriver,
    mut file: OutputFile,
    subscribers: &Mutex<Vec<mpsc::Sender<TermMsg>>>,
    mut kill_rx: watch::Receiver<bool>,
) -> (SourceEnd, Vec<i32>) {
    let mut splitters = [LineSplitter::new(), LineSplitter::new()];
    loop {
        let stopping = proc.stopping();
        let (stream, chunk) = tokio::select! {
            _ = kill_rx.wait_for(|k| *k), if !stopping => {
                proc.stop();
                continue;
            }
            ev = proc.next() => match ev {
                None => break,
                Some(ProcEvent::Exited) => continue,
                Some(ProcEvent::Eof(stream)) => (stream, Vec::new()),
                Some(ProcEvent::Data(stream, n)) => (stream, proc.data(stream, n).to_vec()),
            },
        };
        let s = &mut splitters[usize::from(stream == Stream::Stderr)];
        let mut write = |p: Piece<'_>| {
            let _ = file.write(stream, &p);
        };
        if chunk.is_empty() {
            s.finish(&mut write);
        } else {
            s.push(&chunk, &mut write);
        }
        let _ = file.flush();
        if chunk.is_empty() {
            continue;
        }
        let subs: Vec<_> = lock(subscribers).iter().cloned().collect();
        for sub in subs {
            // A monitor that detached is simply skipped.
            let _ = sub.send(TermMsg::Chunk(stream, chunk.clone())).await;
        }
    }
    let ended = proc.finish().await;
    (ended.end, ended.survivors)
}

/// An attached monitor's end of a terminal.
pub(crate) struct TerminalSource {
    rx: mpsc::Receiver<TermMsg>,
    /// The chunk handed out last.
    current: Vec<u8>,
}

impl InputSource for TerminalSource {
    async fn next(&mut self) -> Input<'_> {
        match self.rx.recv().await {
            Some(TermMsg::Chunk(stream, bytes)) => {
                self.current = bytes;
                Input::Chunk(stream, &self.current)
            }
            Some(TermMsg::End(end)) => Input::End(end.into()),
            None => Input::End(SourceEnd::Failed("the terminal is gone".into()).into()),
        }
    }
}
