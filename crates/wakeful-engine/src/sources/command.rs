//! The command source: `sh -c COMMAND` through the process driver. A stop
//! terminates everything the command started, and the source keeps handing
//! out what it still prints until its exit status is known.

use wakeful_core::machine::SourceEnd;
use wakeful_core::MonitorSpec;

use crate::process::driver::{ProcEnd, ProcEvent, ProcessDriver, SpawnRequest};
use crate::source::{monitor_cwd, Ended, HandedProcess, Input, InputSource, Launch};

/// The spawn request of a command monitor, poll run or terminal.
pub(crate) fn spawn_request<'a>(
    spec: &'a MonitorSpec,
    command: &'a str,
    launch: &'a Launch,
    id: &'a str,
    session: &'a str,
) -> SpawnRequest<'a> {
    SpawnRequest {
        command,
        base_env: launch.base_env.as_ref(),
        extra_env: &spec.env,
        cwd: monitor_cwd(spec, launch),
        id,
        session,
        die_with_parent: launch.die_with_parent,
        containers: launch.containers.as_ref(),
        wide_stdout: true,
        grace: launch.grace,
        drain: launch.drain,
    }
}

/// The end of a command being collected (kept across cancelled calls).
type Finishing = std::pin::Pin<Box<dyn std::future::Future<Output = ProcEnd> + Send>>;

/// A running command; see the module docs.
pub(crate) struct CommandSource {
    proc: Option<ProcessDriver>,
    finishing: Option<Finishing>,
    pid: i32,
    start_ticks: u64,
}

impl CommandSource {
    /// Starts the command.
    pub(crate) fn spawn(
        spec: &MonitorSpec,
        command: &str,
        launch: &Launch,
        id: &str,
        session: &str,
    ) -> std::io::Result<Self> {
        let proc = ProcessDriver::spawn(spawn_request(spec, command, launch, id, session))?;
        Ok(CommandSource {
            pid: proc.pid(),
            start_ticks: proc.start_ticks(),
            proc: Some(proc),
            finishing: None,
        })
    }

    /// Goes on with a command handed over by the program this process ran
    /// before (an upgrade).
    pub(crate) fn adopt(
        handed: &HandedProcess,
        launch: &Launch,
        id: &str,
    ) -> std::io::Result<Self> {
        let proc = ProcessDriver::adopt(
            handed,
            id,
            launch.grace,
            launch.drain,
            launch.containers.as_ref(),
        )?;
        Ok(CommandSource {
            pid: proc.pid(),
            start_ticks: proc.start_ticks(),
            proc: Some(proc),
            finishing: None,
        })
    }

    /// Process id (and group id) of its `sh`.
    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }

    /// Start time of its `sh`, in clock ticks after boot.
    pub(crate) fn start_ticks(&self) -> u64 {
        self.start_ticks
    }
}

impl InputSource for CommandSource {
    async fn next(&mut self) -> Input<'_> {
        if self.finishing.is_none() {
            let Some(proc) = self.proc.as_mut() else {
                return Input::End(SourceEnd::Exited(0).into());
            };
            match proc.next().await {
                Some(ProcEvent::Data(stream, n)) => {
                    return match self.proc.as_ref() {
                        Some(p) => Input::Chunk(stream, p.data(stream, n)),
                        None => Input::Nothing,
                    }
                }
                Some(ProcEvent::Eof(stream)) => return Input::Flush(stream),
                Some(ProcEvent::Exited) => return Input::Nothing,
                None => {
                    if let Some(p) = self.proc.take() {
                        self.finishing = Some(Box::pin(p.finish()));
                    }
                }
            }
        }
        // Collecting the end may take a grace period; a call cancelled
        // meanwhile resumes it on the next call.
        match self.finishing.as_mut() {
            Some(f) => {
                let ProcEnd {
                    end,
                    survivors,
                    unverified,
                } = f.await;
                self.finishing = None;
                Input::End(Ended {
                    end,
                    survivors,
                    unverified,
                })
            }
            None => Input::End(SourceEnd::Exited(0).into()),
        }
    }

    fn stop(&mut self) -> bool {
        match self.proc.as_mut() {
            Some(p) => {
                p.stop();
                true
            }
            None => false,
        }
    }

    fn hand_over(&mut self) -> Option<HandedProcess> {
        if self.finishing.is_some() {
            return None;
        }
        self.proc.as_ref().and_then(|p| p.hand_over())
    }

    async fn close(&mut self) {
        // Nothing of the command may outlive its monitor.
        if let Some(mut p) = self.proc.take() {
            p.stop();
            let _ = p.finish().await;
        }
        if let Some(f) = self.finishing.take() {
            let _ = f.await;
        }
    }
}
