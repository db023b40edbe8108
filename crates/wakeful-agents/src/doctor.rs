//! What `wakeful doctor` reports: one [`Check`] per finding. The agent
//! modules add their own (`codex::doctor`, `claude_code::doctor`), so that
//! what doctor knows of an agent lives with the rest of that agent's code.

use std::time::Duration;

use serde::Serialize;
use wakeful_protocol::WakeAdapter;

/// How long a probe of an agent's program or server may take.
pub const PROBE: Duration = Duration::from_secs(3);

/// What one check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// It works.
    Ok,
    /// It does not, and a wake may not arrive: `fix` says what to do.
    Problem,
    /// Worth knowing; neither good nor bad.
    Info,
}

/// One finding of `wakeful doctor` (in `--json` output as it is here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What was checked (`codex app-server`, `claude code plugin`).
    pub name: String,
    /// What it found.
    pub level: Level,
    /// The finding, in a sentence.
    pub detail: String,
    /// What to do about a problem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    /// A finding without a fix.
    pub fn new(name: &str, level: Level, detail: impl Into<String>) -> Self {
        Check {
            name: name.to_string(),
            level,
            detail: detail.into(),
            fix: None,
        }
    }

    /// A problem and its fix.
    pub fn problem(name: &str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            fix: Some(fix.into()),
            ..Check::new(name, Level::Problem, detail)
        }
    }
}

/// Probes the target of `session`'s wake route `adapter`: the program of an `exec`
/// or `codex` route (and, for Codex, its app-server and the thread's
/// lock: [`crate::codex::doctor::route`]), the server of an `opencode` or
/// `webhook` route (does it accept a connection within [`PROBE`]).
pub async fn route(session: &str, adapter: &WakeAdapter) -> Vec<Check> {
    let name = format!("route {}", adapter.name());
    let path = std::env::var_os("PATH");
    let mut out = Vec::new();
    match adapter {
        WakeAdapter::Exec { .. } | WakeAdapter::Codex { .. } => {
            if let Err(e) = adapter.check_programs(path.as_deref()) {
                out.push(Check::problem(
                    &name,
                    e,
                    format!(
                        "install the program or set the route again with its path: `wakeful wake set {} --session {} …`",
                        adapter.name(),
                        session
                    ),
                ));
                return out;
            }
            if let WakeAdapter::Codex {
                thread,
                codex_home,
                binary,
                ..
            } = adapter
            {
                let thread = thread.clone().unwrap_or_else(|| session.to_string());
                out.extend(
                    crate::codex::doctor::route(
                        &name,
                        binary.as_deref(),
                        codex_home.as_deref(),
                        &thread,
                    )
                    .await,
                );
            } else {
                out.push(Check::new(&name, Level::Ok, "its program is installed"));
            }
        }
        WakeAdapter::Opencode { .. } | WakeAdapter::Webhook { .. } => {
            let Some((host, port)) = adapter.endpoint() else {
                out.push(Check::problem(
                    &name,
                    "its URL does not parse",
                    "set the route again with a valid URL",
                ));
                return out;
            };
            let probe =
                tokio::time::timeout(PROBE, tokio::net::TcpStream::connect((host.as_str(), port)))
                    .await;
            let target = format!("{host}:{port}");
            match probe {
                Ok(Ok(_)) => out.push(Check::new(&name, Level::Ok, format!("{target} accepts connections"))),
                Ok(Err(e)) => out.push(Check::problem(
                    &name,
                    format!("nothing answers at {target}: {e}"),
                    if adapter.name() == "opencode" {
                        "start the OpenCode server (`opencode serve --port PORT`) or set the route with its URL: `wakeful wake set opencode --url URL`"
                    } else {
                        "start the webhook's receiver or set the route with the right URL"
                    },
                )),
                Err(_) => out.push(Check::problem(
                    &name,
                    format!("{target} did not answer within {} s", PROBE.as_secs()),
                    "check that the server runs and that the network allows it",
                )),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(program: &str) -> WakeAdapter {
        WakeAdapter::Exec {
            argv: vec![program.into(), "{text}".into()],
            busy_exit_codes: vec![],
        }
    }

    #[tokio::test]
    async fn an_exec_route_needs_its_program() {
        let found = route("s1", &exec("sh")).await;
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].level, Level::Ok, "{found:?}");
        let gone = route("s1", &exec("/nonexistent/wake-me")).await;
        assert_eq!(gone[0].level, Level::Problem, "{gone:?}");
        assert!(
            gone[0].fix.as_deref().unwrap().contains("--session s1"),
            "{gone:?}"
        );
    }

    #[tokio::test]
    async fn a_webhook_route_needs_a_server_that_accepts() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hook = |port: u16| WakeAdapter::Webhook {
            url: format!("http://127.0.0.1:{port}/wake"),
        };
        let up = route("s1", &hook(port)).await;
        assert_eq!(up[0].level, Level::Ok, "{up:?}");
        assert!(up[0].detail.contains("accepts connections"), "{up:?}");
        drop(listener);
        let down = route("s1", &hook(port)).await;
        assert_eq!(down[0].level, Level::Problem, "{down:?}");
        assert!(
            down[0].detail.starts_with("nothing answers at 127.0.0.1:"),
            "{down:?}"
        );
        let opencode = route(
            "s1",
            &WakeAdapter::Opencode {
                url: format!("http://127.0.0.1:{port}"),
                opencode_session: None,
                directory: None,
            },
        )
        .await;
        assert!(
            opencode[0]
                .fix
                .as_deref()
                .unwrap()
                .contains("opencode serve"),
            "{opencode:?}"
        );
    }
}
