//! The thread that starts every command, and the only one that may replace
//! the program (`wakeful daemon upgrade`).
//!
//! Linux sends a command's parent-death signal (`die_with_parent`,
//! `PR_SET_PDEATHSIG`) when the *thread* that started it ends, not the
//! process. `execve` ends every thread but the caller. A daemon that
//! replaces its program without killing its commands must therefore have
//! started them all from the thread that calls `execve`, and that thread
//! must be the one that starts them in the next program too: the process's
//! main thread ([`serve`]). Without [`serve`] (the embeddable registry),
//! commands are started in place and nothing can replace the program.
//!
//! ```no_run
//! let runtime = tokio::runtime::Runtime::new()?;
//! // This thread now starts every command; the future runs on the runtime.
//! let out = wakeful_engine::process::spawner::serve(&runtime, async { 42 });
//! assert_eq!(out, Some(42));
//! # Ok::<(), std::io::Error>(())
//! ```

use std::ffi::CString;
use std::future::Future;
use std::os::fd::RawFd;
use std::sync::mpsc;
use std::sync::OnceLock;

use nix::fcntl::{fcntl, FcntlArg, FdFlag};

type Job = Box<dyn FnOnce() + Send>;

enum Msg {
    Job(Job),
    Done,
}

static JOBS: OnceLock<mpsc::Sender<Msg>> = OnceLock::new();

/// Runs `daemon` on `runtime` while this thread starts every command and
/// runs [`replace_program`], until `daemon` ends. Returns its
/// output (`None` if it panicked). Call it once per process, from the main
/// thread; a second call runs `daemon` without a spawner.
pub fn serve<F>(runtime: &tokio::runtime::Runtime, daemon: F) -> Option<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    if JOBS.set(tx.clone()).is_err() {
        return runtime.block_on(runtime.spawn(daemon)).ok();
    }
    let _entered = runtime.enter();
    let task = runtime.spawn(async move {
        let out = daemon.await;
        let _ = tx.send(Msg::Done);
        out
    });
    while let Ok(Msg::Job(job)) = rx.recv() {
        job();
    }
    runtime.block_on(task).ok()
}

/// Whether commands are started by a [`serve`] thread.
pub fn is_serving() -> bool {
    JOBS.get().is_some()
}

/// Runs `f` on the spawner thread (in place when there is none) and
/// returns what it returned. Blocks the caller for as long as `f` runs.
pub(crate) fn on_spawner<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    let Some(jobs) = JOBS.get() else {
        return f();
    };
    let (rtx, rrx) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let _ = rtx.send(f());
    });
    match jobs.send(Msg::Job(job)) {
        Ok(()) => {}
        // The spawner has stopped (the daemon is ending): in place.
        Err(mpsc::SendError(Msg::Job(job))) => job(),
        Err(mpsc::SendError(Msg::Done)) => {}
    }
    rrx.recv().unwrap_or_else(|_| {
        Err(std::io::Error::other(
            "the thread that starts commands is gone",
        ))
    })
}

/// Replaces this process's program with `program` (`argv`, `env`), from
/// the spawner thread, keeping descriptors `keep` open across the exec
/// (every other descriptor is close-on-exec). Returns only on failure,
/// with every descriptor as it was.
pub fn replace_program(
    program: &std::path::Path,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    keep: Vec<RawFd>,
) -> std::io::Error {
    if !is_serving() {
        return std::io::Error::other(
            "this process cannot replace its program: its commands were not started from its main thread",
        );
    }
    let program = program.to_path_buf();
    let done = on_spawner(move || {
        let c = |s: &str| CString::new(s).map_err(std::io::Error::other);
        let path = c(&program.to_string_lossy())?;
        let argv = argv.iter().map(|a| c(a)).collect::<Result<Vec<_>, _>>()?;
        let env = env
            .iter()
            .map(|(k, v)| c(&format!("{k}={v}")))
            .collect::<Result<Vec<_>, _>>()?;
        for fd in &keep {
            set_cloexec(*fd, false)?;
        }
        let err = match nix::unistd::execve(&path, &argv, &env) {
            Err(e) => std::io::Error::from(e),
            Ok(never) => match never {},
        };
        for fd in &keep {
            let _ = set_cloexec(*fd, true);
        }
        Err(err)
    });
    match done {
        Err(e) => e,
        Ok(()) => std::io::Error::other("the program was not replaced"),
    }
}

fn set_cloexec(fd: RawFd, on: bool) -> std::io::Result<()> {
    let flags = if on {
        FdFlag::FD_CLOEXEC
    } else {
        FdFlag::empty()
    };
    fcntl(fd, FcntlArg::F_SETFD(flags))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_spawner_jobs_run_in_place_and_nothing_replaces_the_program() {
        let me = std::thread::current().id();
        let ran_on = on_spawner(move || Ok(std::thread::current().id())).unwrap();
        assert_eq!(ran_on, me);
        let e = replace_program(std::path::Path::new("/bin/true"), vec![], vec![], vec![]);
        assert!(e.to_string().contains("cannot replace its program"), "{e}");
    }
}
