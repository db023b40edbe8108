//! Doctor's checks of a Codex wake route: that the `codex` program runs,
//! whether its app-server's control socket listens (a wake then starts a
//! turn; otherwise it is queued), and whether a `codex exec` run holds the
//! thread (wakes into it are refused).

use std::path::Path;

use super::probe;
use crate::doctor_check::{Check, Level, PROBE};

/// The checks of a Codex route named `name`: `binary` is the route's
/// program (`codex` on `PATH` when `None`), `codex_home` its `CODEX_HOME`,
/// `thread` the thread it wakes.
pub async fn route(
    name: &str,
    binary: Option<&Path>,
    codex_home: Option<&Path>,
    thread: &str,
) -> Vec<Check> {
    let mut out = target(codex_home, thread).await;
    out.push(version(name, binary, thread).await);
    out
}

/// `codex --version`, within [`PROBE`].
async fn version(name: &str, binary: Option<&Path>, thread: &str) -> Check {
    let program = super::program(binary);
    let version = tokio::time::timeout(
        PROBE,
        tokio::process::Command::new(&program)
            .arg("--version")
            .kill_on_drop(true)
            .output(),
    )
    .await;
    match version {
        Ok(Ok(o)) if o.status.success() => Check::new(
            name,
            Level::Ok,
            format!(
                "{} runs ({}); thread {thread}",
                program.display(),
                String::from_utf8_lossy(&o.stdout).trim()
            ),
        ),
        Ok(Ok(o)) => Check::problem(
            name,
            format!("`{} --version` exited with {}", program.display(), o.status),
            "reinstall Codex (`npm install -g @openai/codex`) or give its path: `wakeful wake set codex --binary PATH`",
        ),
        Ok(Err(e)) => Check::problem(
            name,
            format!("cannot run {}: {e}", program.display()),
            "install Codex or give its path: `wakeful wake set codex --binary PATH`",
        ),
        Err(_) => Check::problem(
            name,
            format!(
                "`{} --version` did not answer within {} s",
                program.display(),
                PROBE.as_secs()
            ),
            "check the Codex installation",
        ),
    }
}

/// Codex's side of the route: its app-server control socket (through
/// which a wake starts a turn) and who holds the thread.
async fn target(route_home: Option<&Path>, thread: &str) -> Vec<Check> {
    let name = "codex app-server";
    let Some(home) = probe::codex_home(route_home) else {
        return vec![Check::new(
            name,
            Level::Info,
            "no CODEX_HOME and no HOME: cannot look for Codex's app-server",
        )];
    };
    let socket = probe::control_socket(&home);
    let mut out = Vec::new();
    let up = tokio::time::timeout(PROBE, tokio::net::UnixStream::connect(&socket)).await;
    out.push(match up {
        Ok(Ok(_)) => Check::new(
            name,
            Level::Ok,
            format!(
                "{} accepts connections: a wake starts a turn and is acknowledged when it has",
                socket.display()
            ),
        ),
        _ => Check::new(
            name,
            Level::Info,
            format!(
                "nothing listens at {}: wakes go to `codex queue` and wait (state `queued`) until Codex's app-server runs",
                socket.display()
            ),
        ),
    });
    if let Some(holder) = probe::thread_holder(&home, thread) {
        if holder.is_exec() {
            out.push(Check::problem(
                "codex thread",
                format!(
                    "thread {thread} is written by a `codex exec` run (pid {}): wakes into it are refused, since exec drops queued messages",
                    holder.pid
                ),
                "route the session to an interactive thread (`wakeful wake set codex --thread ID`), or wait for the exec run to end",
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The route's checks for `program`, with a fresh `CODEX_HOME`.
    async fn checks_for(program: &str, home: &Path) -> Vec<Check> {
        route("route codex", Some(Path::new(program)), Some(home), "t1").await
    }

    #[tokio::test]
    async fn a_missing_program_is_a_problem_and_no_socket_is_info() {
        let home = tempfile::tempdir().unwrap();
        let checks = checks_for("/nonexistent/codex", home.path()).await;
        assert_eq!(checks[0].name, "codex app-server");
        assert_eq!(checks[0].level, Level::Info, "{checks:?}");
        assert_eq!(checks[1].level, Level::Problem, "{checks:?}");
        assert!(
            checks[1].detail.contains("/nonexistent/codex"),
            "{checks:?}"
        );
        assert!(checks[1].fix.is_some());
    }

    #[tokio::test]
    async fn a_program_that_runs_is_ok() {
        // `true --version` exits 0 and prints nothing.
        let home = tempfile::tempdir().unwrap();
        let checks = checks_for("true", home.path()).await;
        let last = checks.last().unwrap();
        assert_eq!(last.level, Level::Ok, "{checks:?}");
        assert!(last.detail.contains("thread t1"), "{last:?}");
    }

    #[tokio::test]
    async fn a_listening_app_server_socket_is_ok() {
        let home = tempfile::tempdir().unwrap();
        let socket = probe::control_socket(home.path());
        std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
        let _listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let checks = checks_for("true", home.path()).await;
        assert_eq!(checks[0].name, "codex app-server");
        assert_eq!(checks[0].level, Level::Ok, "{checks:?}");
        assert!(
            checks[0].detail.contains("accepts connections"),
            "{checks:?}"
        );
    }
}
