//! Wake routes: delivering a session's events to its agent as a new turn.
//!
//! A session with a route (set with `wakeful wake set`, from a `[[wake]]`
//! table of config.toml, or automatically for sessions started inside Codex)
//! has one *waker* task. It follows the session's events through the consumer
//! `wake`, asks the pure [`WakeMachine`] what to deliver, hands each wake to
//! the route's adapter (in `wakeful-agents`), and moves the consumer's cursor only when the
//! adapter says the agent accepted it. See [`wakeful_core::wake_machine`] for the
//! single-flight, coalescing, retry and give-up rules.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::watch;
use wakeful_core::journal::JournalEntry;
use wakeful_core::present;
use wakeful_core::wake_machine::{Outcome, WakeAction, WakeMachine, WakeState};
use wakeful_engine::{MonitorRegistry, NetPolicy};
use wakeful_protocol::{RouteSource, WakeDelivery, WakeStatus};
use wakeful_store::StoreReader;

use wakeful_agents::wake_adapters::{self as adapters, Adapter, Wake};

/// The consumer whose cursor wakes move.
pub const CONSUMER: &str = wakeful_protocol::consumer::WAKE;
/// Most events written out in one wake's text.
const MAX_EVENTS_IN_TEXT: usize = 50;
/// Longest wake text.
const MAX_TEXT: usize = 32 * 1024;
/// Longest text of one event in a wake.
const MAX_EVENT_TEXT: usize = 8 * 1024;

/// What a waker publishes about its delivery.
#[derive(Debug, Clone)]
struct Published {
    delivery: WakeDelivery,
    acked_seq: u64,
    wakes_delivered: u64,
    last_error: Option<String>,
    recent: std::collections::VecDeque<wakeful_protocol::DeliveryAttempt>,
}

impl Default for Published {
    fn default() -> Self {
        Published {
            delivery: WakeDelivery::Idle,
            acked_seq: 0,
            wakes_delivered: 0,
            last_error: None,
            recent: Default::default(),
        }
    }
}

struct Waker {
    route: Adapter,
    source: RouteSource,
    status: Arc<Mutex<Published>>,
    stop: watch::Sender<bool>,
}

/// Why a route could not be set ([`Wakes::set`]).
#[derive(Debug, thiserror::Error)]
pub enum SetRouteError {
    /// The route's options cannot be used.
    #[error("{0}")]
    Route(#[from] wakeful_protocol::route::RouteError),
    /// The route cannot be written as JSON.
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    /// The store could not record it.
    #[error("{0}")]
    Record(#[from] wakeful_engine::StartError),
    /// It was removed while it was set.
    #[error("the route of session {session} vanished while it was set")]
    Vanished {
        /// The session.
        session: String,
    },
}

/// Every session's waker.
pub struct Wakes {
    wakers: Mutex<HashMap<String, Waker>>,
    registry: MonitorRegistry,
    reader: StoreReader,
    policy: NetPolicy,
    /// Give sessions detected inside Codex the `codex` route.
    pub auto_codex: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Wakes {
    /// No routes yet.
    pub fn new(
        registry: MonitorRegistry,
        reader: StoreReader,
        policy: NetPolicy,
        auto_codex: bool,
    ) -> Self {
        Wakes {
            wakers: Mutex::new(HashMap::new()),
            registry,
            reader,
            policy,
            auto_codex,
        }
    }

    /// The network policy every outbound request follows.
    pub(crate) fn policy(&self) -> &NetPolicy {
        &self.policy
    }

    /// Whether `session` has a route.
    pub fn has_route(&self, session: &str) -> bool {
        lock(&self.wakers).contains_key(session)
    }

    /// Routes `session` through `route`, replacing its waker. Routes that were
    /// `Set` or `Auto` are kept in the store.
    pub async fn set(
        &self,
        session: &str,
        route: Adapter,
        source: RouteSource,
    ) -> Result<WakeStatus, SetRouteError> {
        route.validate()?;
        route.check_session(session)?;
        if source != RouteSource::Config {
            let text = serde_json::to_string(&route).map_err(SetRouteError::Json)?;
            self.registry
                .record(JournalEntry::WakeRoute {
                    session: session.to_string(),
                    route: Some(text),
                })
                .await?;
        }
        self.spawn(session, route, source);
        self.show(session).ok_or_else(|| SetRouteError::Vanished {
            session: session.to_string(),
        })
    }

    /// Removes a session's route; `false` when it had none. Routes from the
    /// configuration file come back when the daemon restarts.
    pub async fn clear(&self, session: &str) -> bool {
        let removed = lock(&self.wakers).remove(session);
        let _ = self
            .registry
            .record(JournalEntry::WakeRoute {
                session: session.to_string(),
                route: None,
            })
            .await;
        match removed {
            Some(w) => {
                w.stop.send_replace(true);
                true
            }
            None => false,
        }
    }

    /// The route and its delivery state, as `wake show --json` prints it.
    pub fn show(&self, session: &str) -> Option<WakeStatus> {
        let wakers = lock(&self.wakers);
        let w = wakers.get(session)?;
        let p = lock(&w.status).clone();
        Some(WakeStatus {
            session: session.to_string(),
            route: w.route.clone(),
            source: w.source,
            delivery: p.delivery,
            acked_seq: p.acked_seq,
            wakes_delivered: p.wakes_delivered,
            last_error: p.last_error,
            recent: p.recent.into(),
        })
    }

    /// Sessions whose last wake is undelivered.
    pub fn undelivered(&self) -> Vec<String> {
        lock(&self.wakers)
            .iter()
            .filter(|(_, w)| matches!(lock(&w.status).delivery, WakeDelivery::Undelivered { .. }))
            .map(|(s, _)| s.clone())
            .collect()
    }

    fn spawn(&self, session: &str, route: Adapter, source: RouteSource) {
        let (stop, stop_rx) = watch::channel(false);
        let status = Arc::new(Mutex::new(Published::default()));
        let old = lock(&self.wakers).insert(
            session.to_string(),
            Waker {
                route: route.clone(),
                source,
                status: status.clone(),
                stop,
            },
        );
        if let Some(old) = old {
            old.stop.send_replace(true);
        }
        let task = WakerTask {
            session: session.to_string(),
            route,
            registry: self.registry.clone(),
            reader: self.reader.clone(),
            policy: self.policy.clone(),
            status,
        };
        tokio::spawn(task.run(stop_rx));
    }

    /// Starts routes from the configuration and the store (stored ones win).
    pub fn start_all(&self, from_config: Vec<(String, Adapter)>) {
        for (session, route) in from_config {
            self.spawn(&session, route, RouteSource::Config);
        }
        match self.reader.wake_routes() {
            Ok(stored) => {
                for (session, text) in stored {
                    match serde_json::from_str::<Adapter>(&text) {
                        Ok(route) => self.spawn(&session, route, RouteSource::Set),
                        Err(e) => {
                            tracing::error!("stored wake route of {session} is unreadable: {e}")
                        }
                    }
                }
            }
            Err(e) => tracing::error!("cannot read wake routes: {e}"),
        }
    }
}

/// A waker's state between events.
struct Progress {
    machine: WakeMachine,
    last_error: String,
    delivered: u64,
    /// What the route's adapter remembers between attempts.
    memory: adapters::Memory,
    /// The last attempts, newest last.
    recent: std::collections::VecDeque<wakeful_protocol::DeliveryAttempt>,
}

impl Progress {
    /// Keeps one attempt in the bounded history `wake show` reports.
    fn record(&mut self, wake_id: &str, attempt: u32, from: u64, to: u64, outcome: &Outcome) {
        let (name, detail) = match outcome {
            Outcome::Accepted => ("accepted", None),
            Outcome::Queued(d) => ("queued", Some(d.clone())),
            Outcome::Refused(e) => ("refused", Some(e.clone())),
            Outcome::Failed(e) => ("failed", Some(e.clone())),
        };
        if self.recent.len() == wakeful_protocol::reply::MAX_RECENT_DELIVERIES {
            self.recent.pop_front();
        }
        self.recent.push_back(wakeful_protocol::DeliveryAttempt {
            wake_id: wake_id.to_string(),
            attempt,
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            events_from: from,
            events_to: to,
            outcome: name.to_string(),
            detail,
        });
    }
}

struct WakerTask {
    session: String,
    route: Adapter,
    registry: MonitorRegistry,
    reader: StoreReader,
    policy: NetPolicy,
    status: Arc<Mutex<Published>>,
}

impl WakerTask {
    async fn run(self, mut stop: watch::Receiver<bool>) {
        let acked = self.reader.cursor(&self.session, CONSUMER).unwrap_or(0);
        let mut st = Progress {
            machine: WakeMachine::new(acked),
            last_error: String::new(),
            delivered: 0,
            memory: adapters::Memory::default(),
            recent: Default::default(),
        };
        // The session's events, from the hub: no store query per event.
        let mut events = self
            .registry
            .hub()
            .follow(wakeful_engine::Filter::session(&self.session), acked);
        // The last event that wakes: a wake carries every event up to it;
        // events after it that do not wake wait for the next one that does.
        let mut wake_to = acked;
        loop {
            while let Ok(Some(e)) = events.try_next() {
                if e.event.wakes {
                    wake_to = e.seq();
                }
            }
            let actions = st.machine.on_events(Instant::now(), wake_to);
            if !self.execute(&mut st, actions).await {
                return;
            }
            let deadline = st
                .machine
                .next_deadline()
                .map(tokio::time::Instant::from_std);
            tokio::select! {
                next = events.next() => match next {
                    Ok(e) => {
                        if e.event.wakes {
                            wake_to = e.seq();
                        }
                    }
                    Err(wakeful_engine::FollowError::Closed) => return,
                    Err(e) => {
                        tracing::error!("wake route of session {}: {e}", self.session);
                        return;
                    }
                },
                _ = sleep_until_opt(deadline), if deadline.is_some() => {
                    let due = st.machine.on_tick(Instant::now());
                    if !self.execute(&mut st, due).await {
                        return;
                    }
                }
                _ = stop.changed() => return,
            }
        }
    }

    /// Carries out the machine's actions, and those their outcomes bring, in
    /// order. `false` when the daemon is stopping.
    async fn execute(&self, st: &mut Progress, actions: Vec<WakeAction>) -> bool {
        let mut queue: std::collections::VecDeque<WakeAction> = actions.into();
        while let Some(action) = queue.pop_front() {
            match action {
                WakeAction::Ack { seq } => {
                    let ack = JournalEntry::Ack {
                        session: self.session.clone(),
                        consumer: CONSUMER.to_string(),
                        seq,
                    };
                    if self.registry.record(ack).await.is_err() {
                        return false;
                    }
                    st.delivered += 1;
                }
                WakeAction::Deliver {
                    wake_id,
                    from,
                    to,
                    attempt,
                } => {
                    self.publish(st);
                    let outcome = self
                        .deliver(&wake_id, from, to, attempt, &mut st.memory)
                        .await;
                    match &outcome {
                        Outcome::Refused(e) | Outcome::Failed(e) => {
                            tracing::warn!(
                                "wake {wake_id} of session {} (attempt {attempt}): {e}",
                                self.session
                            );
                            st.last_error = e.clone();
                        }
                        Outcome::Queued(detail) => tracing::info!(
                            "wake {wake_id} of session {} (check {attempt}): {detail}",
                            self.session
                        ),
                        Outcome::Accepted => {}
                    }
                    st.record(&wake_id, attempt, from, to, &outcome);
                    queue.extend(st.machine.on_outcome(Instant::now(), outcome));
                }
            }
        }
        self.publish(st);
        true
    }

    fn publish(&self, st: &Progress) {
        let machine = &st.machine;
        let delivery = match machine.state() {
            WakeState::Idle => WakeDelivery::Idle,
            WakeState::Delivering { wake_id } => WakeDelivery::Delivering { wake_id },
            WakeState::Retrying {
                wake_id,
                attempts,
                next_at,
                ..
            } => WakeDelivery::Retrying {
                wake_id,
                attempts,
                next_attempt_in_ms: next_at
                    .saturating_duration_since(Instant::now())
                    .as_millis() as u64,
            },
            WakeState::Queued {
                wake_id,
                checks,
                next_at,
                detail,
            } => WakeDelivery::Queued {
                wake_id,
                checks,
                next_check_in_ms: next_at
                    .saturating_duration_since(Instant::now())
                    .as_millis() as u64,
                detail,
            },
            WakeState::Undelivered {
                wake_id,
                reason,
                events_from,
                events_to,
            } => WakeDelivery::Undelivered {
                wake_id,
                reason,
                events_from,
                events_to,
            },
        };
        let last_error = match machine.state() {
            WakeState::Retrying { last_error, .. } => Some(last_error),
            _ => (!st.last_error.is_empty()).then(|| st.last_error.clone()),
        };
        *lock(&self.status) = Published {
            delivery,
            acked_seq: machine.acked(),
            wakes_delivered: st.delivered,
            last_error,
            recent: st.recent.clone(),
        };
    }

    async fn deliver(
        &self,
        wake_id: &str,
        from: u64,
        to: u64,
        attempt: u32,
        memory: &mut adapters::Memory,
    ) -> Outcome {
        let events = match self.reader.events_after(
            Some(&self.session),
            None,
            from - 1,
            MAX_EVENTS_IN_TEXT + 1,
        ) {
            Ok(e) => e,
            Err(e) => return Outcome::Refused(e.to_string()),
        };
        let in_wake: Vec<(wakeful_core::Event, Option<String>)> = events
            .into_iter()
            .filter(|e| e.seq <= to)
            .take(MAX_EVENTS_IN_TEXT)
            .map(|e| {
                let description = self.registry.get(&e.monitor_id).map(|m| m.description);
                (e, description)
            })
            .collect();
        let (mut text, n) = present::batch(&in_wake, MAX_TEXT, MAX_EVENT_TEXT, Some(wake_id));
        let shown: Vec<&wakeful_core::Event> = in_wake.iter().take(n).map(|(e, _)| e).collect();
        if let Some(last) = shown.last() {
            if last.seq < to {
                text.push_str(&format!(
                    "\n(more events up to #{to}: `wakeful events --session {} --after {}`)",
                    self.session, last.seq
                ));
            }
        }
        let json_events: Vec<Value> = shown
            .iter()
            .filter_map(|e| serde_json::to_value(e).ok())
            .collect();
        let wake = Wake {
            session: &self.session,
            wake_id,
            text: &text,
            events: &json_events,
        };
        tracing::info!(
            "delivering {wake_id} of session {} (attempt {attempt})",
            self.session
        );
        adapters::deliver(&self.route, &wake, &self.policy, memory).await
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
