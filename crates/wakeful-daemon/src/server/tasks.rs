//! `task_create`, `task_get`, `task_cancel`, `task_hand`: background tasks,
//! each a `wait` that the daemon runs and keeps for a client (an MCP client
//! that speaks the tasks extension) which fetches its outcome later by id.
//!
//! A task's wait is an ordinary `wait` of its session and consumer, served
//! as any client's is, over one end of a socket pair whose other end the
//! task's runner reads ([`wakeful_client::Connection::from_stream`]): it
//! takes its turn with the consumer's other waiters, and what it holds is
//! acknowledged only when the task's client was handed it
//! ([`HandTask`]). A cancel, a time to live that runs out, or a daemon that
//! stops drops the pair unacknowledged, and the consumer's next reader gets
//! those events. The book of tasks (`task_book`, around the pure
//! [`wakeful_core::task::Book`]) is kept in the daemon's state; this module
//! answers the requests and runs the waits beside it.

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use wakeful_client::{ClientError, Connection, ErrorKind as ClientKind};
use wakeful_core::Event;
use wakeful_protocol::{CancelTask, CreateTask, ErrorKind, GetTask, HandTask, WaitEvents};

use super::conn::Handled;
use crate::state::State;
use crate::task_book::{failure, Decision, Outcome, Runner};
use crate::upgrade::HandedTask;

pub use crate::task_book::PER_SESSION;

/// The longest `ttl_ms` a task may ask for: a day.
pub const MAX_TTL_MS: u64 = 24 * 60 * 60 * 1000;

/// How long a task stays to be fetched again after its outcome was handed
/// over (its events are acknowledged then; a client that asks again gets
/// the same outcome).
pub const HANDED_KEEP_MS: u64 = 10 * 60 * 1000;

/// The longest a `task_get` may wait for its task to end.
pub const MAX_GET_WAIT_MS: u64 = 10 * 60 * 1000;

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// 128 random bits, hex: an id no other client can guess.
fn new_id() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `task_create`: see [`CreateTask`].
pub(crate) async fn create(state: &Arc<State>, r: CreateTask) -> Handled<CreateTask> {
    if r.ttl_ms == 0 || r.ttl_ms > MAX_TTL_MS {
        return Err((
            ErrorKind::Invalid,
            format!(
                "ttl_ms {} is out of range: give 1 to {MAX_TTL_MS} (a day)",
                r.ttl_ms
            ),
        ));
    }
    let id = new_id().map_err(|e| {
        (
            ErrorKind::Internal,
            format!("cannot draw a task id from /dev/urandom: {e}"),
        )
    })?;
    let now = now_ms();
    let tasks = &state.tasks;
    tasks.expire(now);
    tasks
        .book()
        .create(id.clone(), r.session.clone(), r.ttl_ms, now)
        .map_err(failure)?;
    tasks.specs().insert(id.clone(), r.clone());
    let created = tasks.info(&id, &r.session, now)?;
    start_runner(state, id, r);
    Ok(created)
}

/// Starts the runner of task `id`, whose wait `r` asks for.
fn start_runner(state: &Arc<State>, id: String, r: CreateTask) {
    let (cancel, cancelled) = oneshot::channel();
    let (decide, decided) = oneshot::channel();
    state.tasks.runners().insert(
        id.clone(),
        Runner {
            cancel: Some(cancel),
            decide: Some(decide),
        },
    );
    tokio::spawn(run(state.clone(), id, r, cancelled, decided));
}

/// Goes on with the tasks the program before this one handed over: those
/// with an outcome are kept as they were; the others run their wait again
/// for what is left of their time.
pub(crate) fn adopt(state: &Arc<State>, handed: Vec<HandedTask>) {
    let now = now_ms();
    for t in handed {
        let id = t.id.clone();
        if let Some(request) = state.tasks.restore(t, now) {
            start_runner(state, id, request);
        }
    }
    state.tasks.bump();
}

/// Runs task `id`'s wait until it has an outcome, then holds what it took
/// until the client was handed it (acknowledge), or it was cancelled, or
/// its time ran out (let go).
async fn run(
    state: Arc<State>,
    id: String,
    r: CreateTask,
    mut cancelled: oneshot::Receiver<()>,
    decided: oneshot::Receiver<Decision>,
) {
    let ttl = Duration::from_millis(r.ttl_ms);
    let expiry = tokio::time::Instant::now() + ttl;
    let waited = async {
        let (ours, theirs) = tokio::net::UnixStream::pair().map_err(ClientError::from)?;
        let served = state.clone();
        tokio::spawn(async move {
            if let Err(e) = super::serve_internal(theirs, served).await {
                tracing::debug!("a task's wait ended: {e}");
            }
        });
        let mut waiter = Connection::from_stream(ours)
            .waiter(WaitEvents {
                session: r.session.clone(),
                consumer: r.consumer.clone(),
                timeout_ms: r.timeout_ms,
                all: r.all,
                ..Default::default()
            })
            .await?;
        let batch = waiter.wait().await;
        Ok::<_, ClientError>((waiter, batch))
    };
    let outcome = tokio::select! {
        w = waited => w,
        _ = &mut cancelled => return finish(&state, &id),
        _ = tokio::time::sleep_until(expiry) => return finish(&state, &id),
    };
    let now = now_ms();
    let (waiter, batch) = match outcome {
        Ok((waiter, Ok(Some(batch)))) => (Some(waiter), Some(batch)),
        Ok((_, Ok(None))) => (None, None),
        Ok((
            _,
            Err(ClientError::Refused {
                kind: ClientKind::Timeout,
                ..
            }),
        )) => {
            state
                .tasks
                .book()
                .complete(&id, Outcome::TimedOut(r.timeout_ms.unwrap_or(0)), now);
            state.tasks.bump();
            return finish(&state, &id);
        }
        // The daemon hands over: the task goes on in the next program.
        Ok((_, Err(_))) | Err(_) if state.is_upgrading() => return finish(&state, &id),
        Ok((_, Err(e))) | Err(e) => {
            state.tasks.book().fail(&id, e.to_string(), now);
            state.tasks.bump();
            return finish(&state, &id);
        }
    };
    let events: Vec<Event> = batch
        .as_ref()
        .map(|b| b.events.iter().map(|(e, _)| e.clone()).collect())
        .unwrap_or_default();
    state
        .tasks
        .book()
        .complete(&id, Outcome::Events(events), now);
    state.tasks.bump();
    let (Some(waiter), Some(mut batch)) = (waiter, batch) else {
        return finish(&state, &id);
    };
    // Hold the batch (the consumer's other waiters wait their turn) until
    // the client was handed it, or the task is cancelled or expires, or
    // the daemon hands over (the next program runs the wait again).
    let mut upgrading = state.upgrading.subscribe();
    tokio::select! {
        _ = async { upgrading.wait_for(|u| *u).await.is_ok() } => {}
        d = decided => {
            if let Ok(Decision::Hand(keep @ 1..)) = d {
                batch.keep(keep);
                if let Err(e) = waiter.ack_last(batch).await {
                    tracing::warn!("task {id}: could not acknowledge its events: {e}");
                }
            }
        }
        _ = tokio::time::sleep_until(expiry) => {}
    }
    finish(&state, &id);
}

/// A runner's end: it holds nothing any more.
fn finish(state: &State, id: &str) {
    state.tasks.runners().remove(id);
}

/// `task_get`: see [`GetTask`].
pub(crate) async fn get(state: &State, r: GetTask) -> Handled<GetTask> {
    let tasks = &state.tasks;
    let wait = Duration::from_millis(r.wait_ms.unwrap_or(0).min(MAX_GET_WAIT_MS));
    let deadline = tokio::time::Instant::now() + wait;
    let mut changed = tasks.changes();
    let mut upgrading = state.upgrading.subscribe();
    loop {
        let now = now_ms();
        let found = tasks.info(&r.id, &r.session, now)?;
        if found.status != "working" || wait.is_zero() {
            return Ok(found);
        }
        tokio::select! {
            c = changed.changed() => if c.is_err() { return Ok(found) },
            _ = tokio::time::sleep_until(deadline) => return Ok(found),
            // The daemon hands over: answer now, the client asks the next
            // program.
            _ = async { upgrading.wait_for(|u| *u).await.is_ok() } => return Ok(found),
        }
    }
}

/// `task_cancel`: see [`CancelTask`].
pub(crate) fn cancel(state: &State, r: CancelTask) -> Handled<CancelTask> {
    let tasks = &state.tasks;
    let now = now_ms();
    tasks
        .book()
        .cancel(&r.id, &r.session, now)
        .map_err(failure)?;
    if let Some(runner) = tasks.runners().get_mut(&r.id) {
        if let Some(cancel) = runner.cancel.take() {
            let _ = cancel.send(());
        }
    }
    tasks.bump();
    tasks.info(&r.id, &r.session, now)
}

/// `task_hand`: see [`HandTask`].
pub(crate) fn hand(state: &State, r: HandTask) -> Handled<HandTask> {
    let tasks = &state.tasks;
    let now = now_ms();
    if tasks.book().hand(&r.id, &r.session, now, HANDED_KEEP_MS) {
        if let Some(runner) = tasks.runners().get_mut(&r.id) {
            if let Some(decide) = runner.decide.take() {
                let _ = decide.send(Decision::Hand(r.keep));
            }
        }
        tasks.bump();
    }
    tasks.info(&r.id, &r.session, now)
}
