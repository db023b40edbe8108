//! The ways into an agent (docs/agents/README.md, *Wake routes*): how a wake is handed to
//! Codex, OpenCode, an argv template, or a webhook, and what counts as
//! accepted, refused (retry) or failed (no retry).

use std::collections::BTreeMap;
use std::path::PathBuf;

use wakeful_core::wake_machine::Outcome;
use wakeful_engine::NetPolicy;

use wakeful_engine::net::http::{self, Reach};
pub use wakeful_protocol::WakeAdapter as Adapter;

pub use crate::delivery::Wake;
use crate::delivery::{http_refusal, run};

/// What adapters remember between the attempts of one session's wakes.
#[derive(Debug, Default)]
pub struct Memory {
    /// The Codex adapter's.
    pub codex: crate::codex::wake_adapter::Memory,
}

/// Hands `wake` to the agent through `adapter`.
pub async fn deliver(
    adapter: &Adapter,
    wake: &Wake<'_>,
    policy: &NetPolicy,
    memory: &mut Memory,
) -> Outcome {
    match adapter {
        Adapter::Codex {
            thread,
            binary,
            codex_home,
        } => {
            let thread = thread.as_deref().unwrap_or(wake.session);
            crate::codex::wake_adapter::deliver(
                thread,
                binary.as_deref(),
                codex_home.as_deref(),
                wake,
                &mut memory.codex,
            )
            .await
        }
        Adapter::Exec {
            argv,
            busy_exit_codes,
        } => {
            let args = match Adapter::exec_args(argv, wake.session, wake.wake_id, wake.text) {
                Ok(args) => args,
                Err(e) => return Outcome::Failed(e.to_string()),
            };
            let Some((program, args)) = args.split_first() else {
                return Outcome::Failed("the exec route has no program".into());
            };
            let program = PathBuf::from(program);
            match run(&program, args, &BTreeMap::new()).await {
                Ok((0, _)) => Outcome::Accepted,
                Ok((code, err)) if busy_exit_codes.contains(&code) => {
                    Outcome::Refused(format!("busy (exit {code}): {err}"))
                }
                Ok((code, err)) => Outcome::Failed(format!("exited {code}: {err}")),
                Err(e) => Outcome::Failed(e.to_string()),
            }
        }
        Adapter::Opencode {
            url,
            opencode_session,
            directory,
        } => {
            crate::opencode::deliver(
                url,
                opencode_session.as_deref(),
                directory.as_deref(),
                wake,
                policy,
            )
            .await
        }
        Adapter::Webhook { url } => {
            let body = serde_json::json!({
                "wake_id": wake.wake_id,
                "session": wake.session,
                "text": wake.text,
                "events": wake.events,
            });
            match http::request("POST", url, Some(&body), policy, Reach::Policy).await {
                Ok(r) if (200..300).contains(&r.status) => Outcome::Accepted,
                // Never followed: the body would go where the webhook
                // points, past the network policy's check of the URL.
                Ok(r) if (300..400).contains(&r.status) => {
                    let location = r.location.as_deref().unwrap_or("");
                    let (to, inner) = http::redirect_target(url, location).await;
                    Outcome::Failed(match inner {
                        Some(ip) => format!(
                            "webhook answered HTTP {} with a redirect to {to}, a loopback or link-local address ({ip}): refused; wakeful never follows a webhook's redirect",
                            r.status
                        ),
                        None => format!(
                            "webhook answered HTTP {} with a redirect to {to}; wakeful does not follow a webhook's redirects: set the route's URL to where it should post (`wakeful wake set webhook --url URL`)",
                            r.status
                        ),
                    })
                }
                Ok(r) => http_refusal("webhook", r),
                Err(e) if e.is_retryable() => Outcome::Refused(e.to_string()),
                Err(e) => Outcome::Failed(e.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_round_trip_as_tagged_json_and_toml() {
        let a = Adapter::Exec {
            argv: vec!["notify".into(), "{session}".into(), "{text}".into()],
            busy_exit_codes: vec![75],
        };
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(
            json,
            r#"{"adapter":"exec","argv":["notify","{session}","{text}"],"busy_exit_codes":[75]}"#
        );
        assert_eq!(serde_json::from_str::<Adapter>(&json).unwrap(), a);
        let t: Adapter =
            toml::from_str("adapter = \"codex\"\nbinary = \"/usr/local/bin/codex\"\n").unwrap();
        assert!(matches!(
            t,
            Adapter::Codex {
                binary: Some(_),
                ..
            }
        ));
        assert!(toml::from_str::<Adapter>("adapter = \"codex\"\nbinray = \"x\"\n").is_err());
        assert!(Adapter::Exec {
            argv: vec![],
            busy_exit_codes: vec![]
        }
        .validate()
        .is_err());
        assert!(Adapter::Webhook {
            url: "ftp://x".into()
        }
        .validate()
        .is_err());
    }

    #[tokio::test]
    async fn exec_substitutes_inside_single_arguments_never_a_shell() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("args");
        let pwned = dir.path().join("pwned");
        let adapter = Adapter::Exec {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                "printf '%s\\n' \"$@\" > \"$0\"".into(),
                out.display().to_string(),
                "{session}".into(),
                "id={wake_id}".into(),
                "{text}".into(),
            ],
            busy_exit_codes: vec![],
        };
        let text = format!(
            "line; $(touch {}) `touch {}`",
            pwned.display(),
            pwned.display()
        );
        let wake = Wake {
            session: "s 1",
            wake_id: "wake-1-2",
            text: &text,
            events: &[],
        };
        assert_eq!(
            deliver(
                &adapter,
                &wake,
                &NetPolicy::default(),
                &mut Memory::default()
            )
            .await,
            Outcome::Accepted
        );
        let got = std::fs::read_to_string(&out).unwrap();
        assert_eq!(got, format!("s 1\nid=wake-1-2\n{text}\n"));
        assert!(!pwned.exists());
        let busy = Adapter::Exec {
            argv: vec!["/bin/sh".into(), "-c".into(), "exit 75".into()],
            busy_exit_codes: vec![75],
        };
        assert!(matches!(
            deliver(&busy, &wake, &NetPolicy::default(), &mut Memory::default()).await,
            Outcome::Refused(_)
        ));
        let broken = Adapter::Exec {
            argv: vec!["/nonexistent/x".into()],
            busy_exit_codes: vec![],
        };
        assert!(matches!(
            deliver(
                &broken,
                &wake,
                &NetPolicy::default(),
                &mut Memory::default()
            )
            .await,
            Outcome::Failed(_)
        ));
    }
}
