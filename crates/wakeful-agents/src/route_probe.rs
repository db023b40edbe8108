//! The probe of a wake route's target, for `wakeful doctor`: is the program
//! of an `exec` or `codex` route installed (and, for Codex, its app-server
//! and the thread's lock), does the server of an `opencode` or `webhook`
//! route accept a connection. Each agent's own part is in its module
//! ([`crate::codex::route_check`]); this one picks it by the route's adapter.

use wakeful_protocol::WakeAdapter;

use crate::doctor_check::{Check, Level, PROBE};

/// Probes the target of `session`'s wake route `adapter`: the program of an `exec`
/// or `codex` route (and, for Codex, its app-server and the thread's
/// lock: [`crate::codex::route_check::route`]), the server of an `opencode` or
/// `webhook` route (does it accept a connection within [`PROBE`]).
pub async fn probe(session: &str, adapter: &WakeAdapter) -> Vec<Check> {
    let name = format!("route {}", adapter.name());
    let path = std::env::var_os("PATH");
    let mut out = Vec::new();
    match adapter {
        WakeAdapter::Exec { .. } | WakeAdapter::Codex { .. } => {
            if let Err(e) = adapter.check_programs(path.as_deref()) {
                out.push(Check::problem(
                    &name,
                    e.to_string(),
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
                    crate::codex::route_check::route(
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
                    if matches!(adapter, wakeful_protocol::WakeAdapter::Opencode { .. }) {
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
        let found = probe("s1", &exec("sh")).await;
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].level, Level::Ok, "{found:?}");
        let gone = probe("s1", &exec("/nonexistent/wake-me")).await;
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
        let up = probe("s1", &hook(port)).await;
        assert_eq!(up[0].level, Level::Ok, "{up:?}");
        assert!(up[0].detail.contains("accepts connections"), "{up:?}");
        // A port that is bound but not listening refuses connections, and
        // no other test can take it meanwhile (a dropped listener's port can
        // be bound again at once).
        let closed = tokio::net::TcpSocket::new_v4().unwrap();
        closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let down_port = closed.local_addr().unwrap().port();
        let down = probe("s1", &hook(down_port)).await;
        assert_eq!(down[0].level, Level::Problem, "{down:?}");
        assert!(
            down[0].detail.starts_with("nothing answers at 127.0.0.1:"),
            "{down:?}"
        );
        let opencode = probe(
            "s1",
            &WakeAdapter::Opencode {
                url: format!("http://127.0.0.1:{down_port}"),
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
