//! The handlers, called without a socket: a daemon state on a temporary
//! directory, a typed request in, the typed result (or failure) out.

use std::collections::BTreeMap;

use wakeful_core::MonitorSpec;
use wakeful_protocol::{
    CheckWake, ClearWake, EndSession, ErrorKind, GetClusterStatus, GetMonitor, GetStatus,
    GetTerminal, Import, ListClusterMonitors, ListConsumers, ListMonitors, ListPrunes,
    ListTerminals, Prune, RunRequest, ShowWake, StartMonitor, StopMonitor, PROTOCOL_VERSION,
};

use super::{admin, cluster, monitors, terminals, wait, wakes};
use crate::state::testing::{state, TestState};

fn start_request(t: &TestState, session: &str, command: &str) -> StartMonitor {
    StartMonitor {
        session: session.into(),
        spec: Box::new(MonitorSpec::command(command, "a test monitor")),
        env: BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]),
        cwd: t.dir.path().to_path_buf(),
        host: None,
    }
}

#[tokio::test]
async fn status_of_a_fresh_daemon() {
    let t = state();
    let s = admin::status(&t.state, GetStatus {}).unwrap();
    assert_eq!(s.protocol, PROTOCOL_VERSION);
    assert_eq!(s.pid, std::process::id());
    assert_eq!(
        (s.monitors_running, s.sessions_active, s.last_seq),
        (0, 0, 0)
    );
    assert_eq!(s.state_dir, t.dir.path());
    assert!(s.cluster.is_none());
    assert!(s.storage.is_some());
}

#[tokio::test]
async fn a_monitor_is_started_listed_got_and_stopped() {
    let t = state();
    let started = monitors::start(&t.state, start_request(&t, "s", "sleep 30"))
        .await
        .unwrap();
    assert_eq!(started.session, "s");
    assert!(!started.already_running);
    assert!(started.id.starts_with("mon-"), "{}", started.id);
    assert!(!started.wake.live, "nothing waits: {:?}", started.wake);

    let mine = monitors::list(
        &t.state,
        ListMonitors {
            session: Some("s".into()),
        },
    )
    .unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].id, started.id);
    let others = monitors::list(
        &t.state,
        ListMonitors {
            session: Some("other".into()),
        },
    )
    .unwrap();
    assert!(others.is_empty());

    let got = monitors::get(
        &t.state,
        GetMonitor {
            id: started.id.clone(),
        },
    )
    .unwrap();
    assert!(got.is_active());

    let stopped = monitors::stop(
        &t.state,
        &StopMonitor {
            id: started.id.clone(),
        },
    )
    .await
    .unwrap();
    assert!(!stopped.is_active());
    let s = admin::status(&t.state, GetStatus {}).unwrap();
    assert_eq!(s.monitors_running, 0);
    assert!(s.last_seq >= 2, "started and stopped: {}", s.last_seq);
}

#[tokio::test]
async fn an_invalid_spec_is_refused_as_invalid() {
    let t = state();
    let mut r = start_request(&t, "s", "true");
    r.spec.timeout_ms = Some(1000);
    r.spec.persistent = true;
    let (kind, message) = monitors::start(&t.state, r).await.unwrap_err();
    assert_eq!(kind, ErrorKind::Invalid, "{message}");
}

#[tokio::test]
async fn an_unknown_monitor_is_not_found() {
    let t = state();
    let (kind, message) = monitors::get(&t.state, GetMonitor { id: "mon-x".into() }).unwrap_err();
    assert_eq!(kind, ErrorKind::NotFound);
    assert!(message.contains("mon-x"), "{message}");
    let (kind, _) = monitors::stop(&t.state, &StopMonitor { id: "mon-x".into() })
        .await
        .unwrap_err();
    assert_eq!(kind, ErrorKind::NotFound);
    // Without a cluster link, not here is not anywhere.
    let (kind, message) =
        cluster::stop(&t.state, StopMonitor { id: "mon-x".into() }, "gone".into())
            .await
            .unwrap_err();
    assert_eq!((kind, message.as_str()), (ErrorKind::NotFound, "gone"));
}

#[tokio::test]
async fn ending_a_session_stops_its_monitors_only() {
    let t = state();
    let a = monitors::start(&t.state, start_request(&t, "s", "sleep 30"))
        .await
        .unwrap();
    let b = monitors::start(&t.state, start_request(&t, "keep", "sleep 30"))
        .await
        .unwrap();
    let ended = monitors::end_session(
        &t.state,
        EndSession {
            session: "s".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(ended.session, "s");
    assert_eq!(ended.stopped, vec![a.id]);
    let kept = monitors::get(&t.state, GetMonitor { id: b.id.clone() }).unwrap();
    assert!(kept.is_active());
    monitors::stop(&t.state, &StopMonitor { id: b.id })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_session_without_route_shows_none_and_clears_nothing() {
    let t = state();
    let session = || "s".to_string();
    assert_eq!(
        wakes::show(&t.state, ShowWake { session: session() }).unwrap(),
        None
    );
    let report = wakes::check(&t.state, CheckWake { session: session() }).unwrap();
    assert_eq!(report.session, "s");
    assert!(!report.wake.live);
    let cleared = wakes::clear(&t.state, ClearWake { session: session() })
        .await
        .unwrap();
    assert!(!cleared.cleared);
    assert!(wait::consumers(&t.state, ListConsumers { session: None })
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn terminals_unknown_or_in_a_missing_directory() {
    let t = state();
    assert!(terminals::list(&t.state, ListTerminals { session: None })
        .unwrap()
        .is_empty());
    let (kind, _) = terminals::get(
        &t.state,
        GetTerminal {
            id: "term-x".into(),
        },
    )
    .unwrap_err();
    assert_eq!(kind, ErrorKind::NotFound);
    let (kind, message) = terminals::run(
        &t.state,
        RunRequest {
            session: "s".into(),
            command: "true".into(),
            env: BTreeMap::new(),
            cwd: t.dir.path().join("nowhere"),
            until: None,
            description: None,
        },
    )
    .await
    .unwrap_err();
    assert_eq!(kind, ErrorKind::Invalid);
    assert!(message.contains("does not exist"), "{message}");
}

#[tokio::test]
async fn store_requests_on_an_empty_store() {
    let t = state();
    let imported = admin::import(
        &t.state,
        Import {
            events: vec![],
            monitors: vec![],
        },
    )
    .await
    .unwrap();
    assert_eq!(
        (imported.imported, imported.skipped, imported.monitors),
        (0, 0, 0)
    );
    assert!(admin::prunes(&t.state, ListPrunes { since: None })
        .unwrap()
        .is_empty());
    let dry = admin::prune(&t.state, Prune { dry_run: true })
        .await
        .unwrap();
    assert!(dry.dry_run);
    assert!(dry.monitors.is_empty());
}

#[tokio::test]
async fn cluster_requests_without_a_link_say_how_to_add_one() {
    let t = state();
    let (kind, message) = cluster::status(&t.state, GetClusterStatus {})
        .await
        .unwrap_err();
    assert_eq!(kind, ErrorKind::Invalid);
    assert!(message.contains("[cluster]"), "{message}");
    let (kind, _) = cluster::monitors(&t.state, ListClusterMonitors { session: None })
        .await
        .unwrap_err();
    assert_eq!(kind, ErrorKind::Invalid);
    let mut r = start_request(&t, "s", "true");
    r.host = Some("elsewhere".into());
    let (kind, _) = cluster::start(&t.state, "elsewhere", r).await.unwrap_err();
    assert_eq!(kind, ErrorKind::Invalid);
}

mod tasks {
    use super::*;
    use crate::server::tasks::{self, PER_SESSION};
    use wakeful_protocol::{CancelTask, CreateTask, GetTask, HandTask, TaskInfo};

    fn create(session: &str, ttl_ms: u64) -> CreateTask {
        CreateTask {
            session: session.into(),
            consumer: "mcp".into(),
            timeout_ms: Some(60_000),
            all: false,
            ttl_ms,
            note: None,
        }
    }

    fn get(session: &str, id: &str, wait_ms: u64) -> GetTask {
        GetTask {
            session: session.into(),
            id: id.into(),
            wait_ms: Some(wait_ms),
        }
    }

    /// Waits (one deadline) until task `id` ended; its info.
    async fn ended(t: &TestState, id: &str) -> TaskInfo {
        let info = tasks::get(&t.state, get("s", id, 20_000)).await.unwrap();
        assert_ne!(info.status, "working", "{info:?}");
        info
    }

    fn acked(t: &TestState) -> u64 {
        wait::consumers(
            &t.state,
            ListConsumers {
                session: Some("s".into()),
            },
        )
        .unwrap()
        .iter()
        .find(|c| c.consumer == "mcp")
        .map_or(0, |c| c.acked_seq)
    }

    #[tokio::test]
    async fn a_task_completes_with_the_wait_and_its_hand_over_acknowledges() {
        let t = state();
        let task = tasks::create(
            &t.state,
            CreateTask {
                note: Some("{\"kept\":1}".into()),
                ..create("s", 60_000)
            },
        )
        .await
        .unwrap();
        assert_eq!(task.status, "working");
        assert_eq!(task.note.as_deref(), Some("{\"kept\":1}"));
        assert_eq!(task.id.len(), 32, "128 random bits: {}", task.id);
        monitors::start(&t.state, start_request(&t, "s", "echo task-line"))
            .await
            .unwrap();
        let done = ended(&t, &task.id).await;
        assert_eq!(done.status, "completed");
        assert!(!done.events.is_empty());
        assert!(!done.handed);
        assert_eq!(acked(&t), 0, "nothing is acknowledged before the hand-over");
        let last = done.events.last().unwrap().seq;
        let handed = tasks::hand(
            &t.state,
            HandTask {
                session: "s".into(),
                id: task.id.clone(),
                keep: done.events.len(),
            },
        )
        .unwrap();
        assert!(handed.handed);
        // The runner acknowledges once told: wait for the cursor.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while acked(&t) != last {
            assert!(std::time::Instant::now() < deadline, "never acknowledged");
            tokio::task::yield_now().await;
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        // A second get gives the same outcome again and acknowledges nothing more.
        let again = tasks::get(&t.state, get("s", &task.id, 0)).await.unwrap();
        assert_eq!(again.events, done.events);
        assert!(again.handed);
    }

    #[tokio::test]
    async fn a_task_never_handed_over_acknowledges_nothing_and_its_events_go_to_the_next_reader() {
        let t = state();
        let first = tasks::create(&t.state, create("s", 1_000)).await.unwrap();
        monitors::start(&t.state, start_request(&t, "s", "echo held"))
            .await
            .unwrap();
        let held = ended(&t, &first.id).await;
        assert_eq!(held.status, "completed");
        // Its time runs out: it is forgotten, and the next task gets the same
        // events (they were never acknowledged).
        let next = tasks::create(&t.state, create("s", 60_000)).await.unwrap();
        let got = ended(&t, &next.id).await;
        assert_eq!(got.events.first(), held.events.first());
        assert_eq!(acked(&t), 0);
        let gone = tasks::get(&t.state, get("s", &first.id, 0)).await;
        assert_eq!(gone.unwrap_err().0, ErrorKind::NotFound);
    }

    #[tokio::test]
    async fn a_cancelled_task_takes_nothing_and_cannot_be_cancelled_twice() {
        let t = state();
        let task = tasks::create(&t.state, create("s", 60_000)).await.unwrap();
        let cancel = CancelTask {
            session: "s".into(),
            id: task.id.clone(),
        };
        assert_eq!(
            tasks::cancel(&t.state, cancel.clone()).unwrap().status,
            "cancelled"
        );
        let (kind, message) = tasks::cancel(&t.state, cancel).unwrap_err();
        assert_eq!(kind, ErrorKind::Invalid);
        assert!(message.contains("already cancelled"), "{message}");
        // Its wait left: a new task gets the next events.
        let next = tasks::create(&t.state, create("s", 60_000)).await.unwrap();
        monitors::start(&t.state, start_request(&t, "s", "echo after"))
            .await
            .unwrap();
        assert_eq!(ended(&t, &next.id).await.status, "completed");
        let info = tasks::get(&t.state, get("s", &task.id, 0)).await.unwrap();
        assert_eq!(info.status, "cancelled");
        assert!(info.events.is_empty());
    }

    #[tokio::test]
    async fn unknown_expired_and_other_sessions_tasks_look_the_same() {
        let t = state();
        let task = tasks::create(&t.state, create("s", 60_000)).await.unwrap();
        let mut errors = Vec::new();
        for (session, id) in [("other", task.id.as_str()), ("s", "0123abcd")] {
            errors.push(tasks::get(&t.state, get(session, id, 0)).await.unwrap_err());
            errors.push(
                tasks::cancel(
                    &t.state,
                    CancelTask {
                        session: session.into(),
                        id: id.into(),
                    },
                )
                .unwrap_err(),
            );
        }
        for e in &errors {
            assert_eq!(e, &(ErrorKind::NotFound, "unknown task id".to_string()));
        }
    }

    #[tokio::test]
    async fn a_session_holds_a_limited_number_of_tasks_and_bad_ttls_are_refused() {
        let t = state();
        for _ in 0..PER_SESSION {
            tasks::create(&t.state, create("s", 60_000)).await.unwrap();
        }
        let (kind, message) = tasks::create(&t.state, create("s", 60_000))
            .await
            .unwrap_err();
        assert_eq!(kind, ErrorKind::Limit);
        assert!(message.contains(&PER_SESSION.to_string()), "{message}");
        tasks::create(&t.state, create("other", 60_000))
            .await
            .unwrap();
        for ttl in [0, tasks::MAX_TTL_MS + 1] {
            let (kind, _) = tasks::create(&t.state, create("x", ttl)).await.unwrap_err();
            assert_eq!(kind, ErrorKind::Invalid);
        }
    }
}
