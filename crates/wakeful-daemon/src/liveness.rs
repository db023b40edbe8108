//! Whether a wake will come, decided from what is attached to a session now:
//! waiters of its consumers, MCP channel pushers whose client shows channel
//! notifications, and its wake route's last outcome. Pure: the server
//! gathers the facts, [`assess`] judges them.

use wakeful_protocol::{
    Consumer, WakeDelivery, WakeInfo, WakePath, WakeReport, WakeStatus, WakeVia,
};

/// What is attached to a session now.
#[derive(Debug, Default)]
pub struct Attached<'a> {
    /// (consumer, waiters attached now), for consumers with waiters.
    pub waiters: Vec<(Consumer, usize)>,
    /// Event streams that push to an agent woken by them (MCP channel).
    pub channel_pushers: usize,
    /// The session's wake route and where its delivery stands.
    pub route: Option<&'a WakeStatus>,
}

/// The path a consumer's waiters stand for.
fn waiter_path(consumer: &Consumer) -> (WakeVia, String) {
    match consumer {
        Consumer::Claude => (
            WakeVia::ClaudeCode,
            "the Claude Code plugin (monitor bridge or rewake hook, consumer `claude`) is waiting: events wake the session".into(),
        ),
        Consumer::Mcp => (
            WakeVia::MonitorWait,
            "a monitor_wait call (consumer `mcp`) is waiting: events end it".into(),
        ),
        other => (
            WakeVia::Wait(other.clone()),
            format!("`wakeful wait --consumer {other}` is waiting: events go to it"),
        ),
    }
}

/// The verdict and every path looked at.
pub fn assess(session: &str, attached: &Attached<'_>) -> WakeReport {
    let mut paths = Vec::new();
    // The plugin first: it is what wakes an idle session.
    // A consumer named after a monitor (`wait --monitor`) waits for that
    // monitor only: it delivers nothing else of the session.
    let mut waiters: Vec<(Consumer, usize)> = attached
        .waiters
        .iter()
        .filter(|(c, n)| *n > 0 && !c.is_one_monitor())
        .cloned()
        .collect();
    waiters.sort_by_key(|(c, _)| (*c != Consumer::Claude, c.name().to_string()));
    for (consumer, n) in waiters {
        let (path, detail) = waiter_path(&consumer);
        let detail = if n > 1 {
            format!("{detail} ({n} waiters)")
        } else {
            detail
        };
        paths.push(WakePath {
            path,
            live: true,
            detail,
        });
    }
    if attached.channel_pushers > 0 {
        paths.push(WakePath {
            path: WakeVia::McpChannel,
            live: true,
            detail: "an MCP client that shows channel notifications follows this session: events wake it".into(),
        });
    }
    if let Some(route) = attached.route {
        paths.push(route_path(route));
    }
    let wake = match paths.iter().find(|p| p.live) {
        Some(p) => WakeInfo {
            route: p.path.clone(),
            live: true,
            reason: p.detail.clone(),
        },
        None => {
            let why = paths.first().map_or_else(
                || format!("no waiter, channel or wake route is attached to session `{session}`"),
                |p| p.detail.clone(),
            );
            WakeInfo {
                route: paths.first().map_or(WakeVia::None, |p| p.path.clone()),
                live: false,
                reason: format!(
                    "nothing will wake you: {why}. Call `wakeful wait --session {session}` (or the monitor_wait tool) before ending your turn, or `wakeful doctor --session {session}` to see what is missing."
                ),
            }
        }
    };
    WakeReport {
        session: session.to_string(),
        wake,
        paths,
    }
}

/// A wake route is live while its last delivery was accepted, or none was
/// tried yet (its target was checked when the route was set).
fn route_path(route: &WakeStatus) -> WakePath {
    let name = route.route.name().to_string();
    let (live, detail) = match &route.delivery {
        WakeDelivery::Idle | WakeDelivery::Delivering { .. } => match (&route.last_error, route.wakes_delivered) {
            (Some(e), 0) => (false, format!("the {name} wake route failed its last delivery: {e}")),
            (_, 0) => (true, format!("the {name} wake route delivers events as a new turn (set; no wake delivered yet)")),
            (_, n) => (true, format!("the {name} wake route delivers events as a new turn ({n} wakes accepted)")),
        },
        WakeDelivery::Retrying { attempts, .. } => (
            false,
            format!(
                "the {name} wake route's target refused or failed {attempts} attempt(s){}; it keeps retrying",
                route.last_error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default()
            ),
        ),
        // The agent holds the wake and runs it when its current turn ends.
        WakeDelivery::Queued { detail, .. } => (
            true,
            format!("the {name} wake route's last wake is queued by the agent, its turn not started yet ({detail})"),
        ),
        WakeDelivery::Undelivered { reason, .. } => (
            false,
            format!("the {name} wake route gave up its last wake: {reason}"),
        ),
    };
    WakePath {
        path: WakeVia::Route(name),
        live,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wakeful_protocol::{RouteSource, WakeAdapter};

    fn route(delivery: WakeDelivery, delivered: u64, error: Option<&str>) -> WakeStatus {
        WakeStatus {
            session: "s".into(),
            route: WakeAdapter::Exec {
                argv: vec!["/bin/true".into()],
                busy_exit_codes: vec![],
            },
            source: RouteSource::Set,
            delivery,
            acked_seq: 0,
            wakes_delivered: delivered,
            last_error: error.map(str::to_string),
            recent: vec![],
        }
    }

    #[test]
    fn nothing_attached_is_not_live_and_says_what_to_do() {
        let r = assess("s", &Attached::default());
        assert!(!r.wake.live);
        assert_eq!(r.wake.route, WakeVia::None);
        assert!(r
            .wake
            .reason
            .starts_with("nothing will wake you: no waiter"));
        assert!(r.wake.reason.contains("`wakeful wait --session s`"));
        assert!(r.paths.is_empty());
    }

    #[test]
    fn the_plugin_comes_first_among_live_paths() {
        let a = Attached {
            waiters: vec![
                (Consumer::Default, 1),
                (Consumer::Claude, 2),
                (Consumer::Named("idle".into()), 0),
            ],
            channel_pushers: 1,
            route: None,
        };
        let r = assess("s", &a);
        assert!(r.wake.live);
        assert_eq!(r.wake.route, WakeVia::ClaudeCode);
        let names: Vec<String> = r.paths.iter().map(|p| p.path.name()).collect();
        assert_eq!(names, ["claude-code", "wait:default", "mcp-channel"]);
        assert!(r.paths[0].detail.ends_with("(2 waiters)"));
    }

    #[test]
    fn a_route_is_live_until_its_delivery_fails() {
        let ok = route(WakeDelivery::Idle, 3, None);
        let r = assess(
            "s",
            &Attached {
                route: Some(&ok),
                ..Default::default()
            },
        );
        assert!(r.wake.live);
        assert_eq!(r.wake.route, WakeVia::Route("exec".into()));
        let fresh = route(WakeDelivery::Idle, 0, None);
        assert!(
            assess(
                "s",
                &Attached {
                    route: Some(&fresh),
                    ..Default::default()
                }
            )
            .wake
            .live
        );
        let failing = route(
            WakeDelivery::Retrying {
                wake_id: "w".into(),
                attempts: 2,
                next_attempt_in_ms: 100,
            },
            0,
            Some("connection refused"),
        );
        let r = assess(
            "s",
            &Attached {
                route: Some(&failing),
                ..Default::default()
            },
        );
        assert!(!r.wake.live);
        assert_eq!(r.wake.route, WakeVia::Route("exec".into()));
        assert!(
            r.wake.reason.contains("connection refused"),
            "{}",
            r.wake.reason
        );
        assert!(r.wake.reason.contains("before ending your turn"));
        let gave_up = route(
            WakeDelivery::Undelivered {
                wake_id: "w".into(),
                reason: "program not found".into(),
                events_from: 1,
                events_to: 2,
            },
            0,
            None,
        );
        assert!(
            !assess(
                "s",
                &Attached {
                    route: Some(&gave_up),
                    ..Default::default()
                }
            )
            .wake
            .live
        );
        // A waiter makes it live all the same.
        let a = Attached {
            waiters: vec![(Consumer::Mcp, 1)],
            route: Some(&gave_up),
            ..Default::default()
        };
        let r = assess("s", &a);
        assert!(r.wake.live);
        assert_eq!(r.wake.route, WakeVia::MonitorWait);
    }
}
