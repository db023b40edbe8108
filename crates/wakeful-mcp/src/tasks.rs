//! `monitor_wait` as a background task (the MCP tasks extension,
//! `io.modelcontextprotocol/tasks`).
//!
//! When a `tools/call` of `monitor_wait` declares the extension in its
//! `_meta` (a 2026-07-28 request), the answer is a task
//! (`resultType: "task"`) instead of a blocking wait: the client (Claude
//! Code 2.1.332 moves it to the background at once, and starts a new turn
//! when it completes) follows it with `tasks/get`, whose result, once the
//! task is `completed`, is exactly what a plain `monitor_wait` returns.
//!
//! The daemon keeps the task (`task_create`), not this process: a restarted
//! `wakeful mcp` (or a resumed client) can still fetch it by its id within
//! its time to live. The events of a task are acknowledged once the
//! response of a `tasks/get` that carried them was written to the client
//! (`task_hand`); a cancel, a time to live that runs out, or a client that
//! never asks acknowledges nothing, and those events go to the consumer's
//! next reader. docs/agents/mcp.md, "Monitors as tasks", has the rules.

use std::time::Duration;

use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject, RequestId, Task,
    TaskPayload, TaskStatus,
};
use rmcp::ErrorData;
use serde_json::Value;
use wakeful_client::{ClientError, ErrorKind};
use wakeful_protocol::{CancelTask, CreateTask, GetTask, HandTask, TaskInfo};

use crate::args::MonitorWaitArgs;
use crate::results;
use crate::server::{Page, ToolError, WakefulServer};
use crate::CONSUMER;

/// How long a task's wait lasts when `monitor_wait` names no `timeout_ms`:
/// six hours, then the task completes with `timed_out: true` (a wait that
/// runs in the background costs the client nothing while it waits).
pub const TASK_WAIT_MS: u64 = 6 * 60 * 60 * 1000;

/// How long a completed task stays to be fetched after its wait could have
/// ended at the latest: its time to live is its wait plus this.
pub const HOLD_MS: u64 = 60 * 60 * 1000;

/// The `pollIntervalMs` of every task: Claude Code 2.1.332 polls no more
/// often than every 250 ms whatever the server says, and a `tasks/get` is
/// one lookup in the daemon's memory.
pub const POLL_INTERVAL_MS: u64 = 250;

/// At most this many tasks of one connection are followed for
/// `notifications/tasks` at once (each holds a daemon connection while it
/// works); the others are learned by polling `tasks/get`.
pub const MAX_FOLLOWED: usize = 4;

/// How long one follow request waits in the daemon before it asks again.
const FOLLOW_WAIT_MS: u64 = 10 * 60 * 1000;

/// How long an answered `tasks/get` waits for its response to be written
/// before it gives up acknowledging.
const RECEIPT_DEADLINE: Duration = Duration::from_secs(5);

/// Whether the request declares the tasks extension in its own `_meta` (a
/// 2026-07-28 request; the legacy handshake's capabilities never make a
/// call a task).
pub fn declared(context: &rmcp::service::RequestContext<rmcp::service::RoleServer>) -> bool {
    context
        .meta
        .client_capabilities()
        .is_some_and(|c| c.supports_tasks())
}

/// A bad argument (or a failure before the task exists) as a plain tool
/// error.
fn bad(e: impl Into<ToolError>) -> CallToolResult {
    crate::server::tool_result(Err(e.into()))
}

/// Why a task request failed: the error the client gets.
fn daemon_error(e: ClientError) -> ErrorData {
    match e {
        ClientError::Refused {
            kind: ErrorKind::NotFound,
            ..
        } => unknown_task(),
        ClientError::Refused {
            kind: ErrorKind::Invalid,
            message,
        } => ErrorData::invalid_params(message, None),
        other => ErrorData::internal_error(other.to_string(), None),
    }
}

/// The error for a task id this session does not hold (unknown, expired,
/// or another session's): the same for all, so it reveals nothing.
pub fn unknown_task() -> ErrorData {
    ErrorData::invalid_params("unknown task id", None)
}

fn timestamp(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn status(s: &str) -> TaskStatus {
    match s {
        "completed" => TaskStatus::Completed,
        "failed" => TaskStatus::Failed,
        "cancelled" => TaskStatus::Cancelled,
        _ => TaskStatus::Working,
    }
}

/// The task's base fields as MCP shows them.
fn task(info: &TaskInfo) -> Task {
    let mut task = Task::new(
        info.id.clone(),
        status(&info.status),
        timestamp(info.created_ms),
        timestamp(info.updated_ms),
    )
    .with_ttl_ms(info.ttl_ms)
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    if info.status == "working" {
        task = task.with_status_message("waiting for the session's next event that wakes");
    }
    task
}

/// A completed task's tool result, exactly as a plain `monitor_wait`
/// returns it, and how many of its events it carries (the rest stay for
/// the next reader).
fn completed(info: &TaskInfo) -> (CallToolResult, usize) {
    let (value, keep) = match info.timed_out_ms {
        Some(ms) => (
            results::to_value(&results::Waited::timed_out(ms)).map_err(ToolError::Encode),
            0,
        ),
        None => {
            let mut page = Page::new(usize::MAX);
            let more = !info.events.iter().all(|e| page.add(e));
            let keep = page.events.len();
            (
                results::to_value(&results::Waited::batch(page.events, page.last_seq, more))
                    .map_err(ToolError::Encode),
                keep,
            )
        }
    };
    (
        crate::server::tool_result(results::with_monitor(value, info.note.as_deref())),
        keep,
    )
}

fn object(result: &CallToolResult) -> JsonObject {
    match serde_json::to_value(result) {
        Ok(Value::Object(o)) => o,
        _ => JsonObject::new(),
    }
}

impl WakefulServer {
    /// Starts `monitor_wait` as a task of `session`; a bad argument is a
    /// plain tool error, and starts nothing.
    pub(crate) async fn monitor_wait_task(
        &self,
        args: Value,
        session: &str,
    ) -> Result<CreateTaskResult, CallToolResult> {
        let args: MonitorWaitArgs =
            crate::server::parse(crate::tools::MONITOR_WAIT, args).map_err(bad)?;
        self.wait_task(&args, session, None).await
    }

    /// Starts a monitor (`monitor_start` with `wait: true`) and a task that
    /// waits for the session's next event that wakes; the task's result
    /// carries the start result under `monitor`.
    pub(crate) async fn monitor_start_task(
        &self,
        args: Value,
        call: &crate::server::Call,
    ) -> Result<CreateTaskResult, CallToolResult> {
        let started = self.monitor_start(args, call).await.map_err(bad)?;
        let note = serde_json::to_string(&started).ok();
        self.wait_task(&MonitorWaitArgs::default(), &call.session, note)
            .await
    }

    async fn wait_task(
        &self,
        args: &MonitorWaitArgs,
        session: &str,
        note: Option<String>,
    ) -> Result<CreateTaskResult, CallToolResult> {
        let timeout_ms = match args.timeout_ms {
            Some(_) => args.timeout_ms().map_err(bad)?,
            None => TASK_WAIT_MS,
        };
        let mut conn = self.connect().await.map_err(bad)?;
        let info = conn
            .call(CreateTask {
                session: session.to_string(),
                consumer: CONSUMER.to_string(),
                timeout_ms: Some(timeout_ms),
                all: args.all.unwrap_or(false),
                ttl_ms: timeout_ms + HOLD_MS,
                note,
            })
            .await
            .map_err(|e| bad(ToolError::Daemon(e)))?;
        self.follow(info.id.clone(), session.to_string());
        Ok(CreateTaskResult::new(task(&info)))
    }

    /// `tasks/get`: the task of `session`; a completed one carries its
    /// result, and once this response (`id`) was written, its events are
    /// acknowledged.
    pub(crate) async fn task_get(
        &self,
        task_id: String,
        session: &str,
        id: RequestId,
    ) -> Result<GetTaskResult, ErrorData> {
        let mut conn = self
            .connect()
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let info = conn
            .call(GetTask {
                session: session.to_string(),
                id: task_id,
                wait_ms: None,
            })
            .await
            .map_err(daemon_error)?;
        let (task, keep) = detailed(&info);
        if let (Some(keep), false) = (keep, info.handed) {
            self.hand_when_written(id, session, &info, keep);
        }
        Ok(GetTaskResult::new(task))
    }

    /// Follows task `id` of `session` while a listen stream is open, and
    /// pushes `notifications/tasks` when it ends; a completed task's events
    /// are acknowledged once the notification was written.
    pub(crate) fn follow(&self, id: String, session: String) {
        if !self.listeners().follow(MAX_FOLLOWED) {
            return;
        }
        let server = self.clone();
        tokio::spawn(async move {
            server.follow_until_ended(&id, &session).await;
            server.listeners().unfollow();
        });
    }

    async fn follow_until_ended(&self, id: &str, session: &str) {
        let Ok(mut conn) = self.connect().await else {
            return;
        };
        // A daemon upgraded meanwhile closes the connection: the next
        // program has the task; ask it (a few times at most in a row).
        let mut lost = 0;
        let info = loop {
            let got = conn
                .call(GetTask {
                    session: session.to_string(),
                    id: id.to_string(),
                    wait_ms: Some(FOLLOW_WAIT_MS),
                })
                .await;
            match got {
                Ok(info) if info.status != "working" => break info,
                Ok(_) => lost = 0,
                Err(_) if lost < 3 => {
                    lost += 1;
                    match self.connect().await {
                        Ok(c) => conn = c,
                        Err(_) => return,
                    }
                }
                Err(_) => return,
            }
        };
        let (task, keep) = detailed(&info);
        if self.listeners().notify(&task).await {
            if let (Some(keep), false) = (keep, info.handed) {
                let _ = conn
                    .call(HandTask {
                        session: session.to_string(),
                        id: id.to_string(),
                        keep,
                    })
                    .await;
            }
        }
    }
}

/// Task `info` as MCP shows it, and for a completed one, how many events
/// its result carries.
fn detailed(info: &TaskInfo) -> (DetailedTask, Option<usize>) {
    let mut keep = None;
    let payload = match info.status.as_str() {
        "completed" => {
            let (result, n) = completed(info);
            keep = Some(n);
            TaskPayload::Completed {
                result: object(&result),
            }
        }
        "failed" => {
            let mut error = JsonObject::new();
            error.insert("code".into(), Value::from(-32603));
            error.insert(
                "message".into(),
                Value::from(info.error.clone().unwrap_or_default()),
            );
            TaskPayload::Failed { error }
        }
        "cancelled" => TaskPayload::Cancelled,
        _ => TaskPayload::Working,
    };
    (DetailedTask::new(task(info), payload), keep)
}

impl WakefulServer {
    /// Acknowledges task `info`'s first `keep` events once the response
    /// `id` was written to the client.
    fn hand_when_written(&self, id: RequestId, session: &str, info: &TaskInfo, keep: usize) {
        let receipt = self.receipts().expect(id.clone());
        let receipts = self.receipts();
        let server = self.clone();
        let hand = HandTask {
            session: session.to_string(),
            id: info.id.clone(),
            keep,
        };
        tokio::spawn(async move {
            let written = matches!(
                tokio::time::timeout(RECEIPT_DEADLINE, receipt).await,
                Ok(Ok(()))
            );
            receipts.forget(&id);
            if !written {
                return;
            }
            if let Ok(mut conn) = server.connect().await {
                let _ = conn.call(hand).await;
            }
        });
    }

    /// `tasks/cancel`: ends a working task; it acknowledges nothing.
    pub(crate) async fn task_cancel(
        &self,
        task_id: String,
        session: &str,
    ) -> Result<(), ErrorData> {
        let mut conn = self
            .connect()
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        conn.call(CancelTask {
            session: session.to_string(),
            id: task_id,
        })
        .await
        .map(|_| ())
        .map_err(daemon_error)
    }
}
