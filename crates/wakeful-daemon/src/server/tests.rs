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
