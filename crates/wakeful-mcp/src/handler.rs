//! The MCP dispatch: which method or tool goes where.
//!
//! [`WakefulServer`]'s [`ServerHandler`] answers the handshake
//! (`initialize`, `server/discover`) and sends every request on: a tool
//! call to the server's tools ([`crate::server`]), or, when the request
//! declares the tasks extension, to a background task ([`crate::tasks`]),
//! as are `tasks/get` and `tasks/cancel`; `events/*` to [`crate::events`].
//! A `subscriptions/listen` stream stays open here, for the
//! `notifications/tasks` of the connection's tasks.
//!
//! [`Era`] stands between it and the transport: it answers a
//! `server/discover` probe that
//! [`Protocol::modern_for`](crate::era::Protocol::modern_for) sends to the
//! legacy handshake ([`crate::era`] says which client gets which era).
//!
//! Only `serve_stdio` uses this module: it sits on top of `server`, `tasks`
//! and `events`, and none of them imports it.

use std::borrow::Cow;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientRequest, CustomRequest,
    CustomResult, DiscoverResult, ErrorCode, ExperimentalCapabilities, GetTaskParams,
    GetTaskResult, Implementation, InitializeRequestParams, InitializeResult, JsonObject,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    ServerResult, SubscriptionFilter, Tool,
};
use rmcp::service::{
    NotificationContext, RequestContext, RoleServer, Service, SubscriptionContext,
};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{json, Value};

use crate::server::{tool_result, wants_wait, WakefulServer, INSTRUCTIONS, INSTRUCTIONS_TASKS};
use crate::tools::{MONITOR_START, MONITOR_WAIT};
use crate::{channel, events, tasks};

impl ServerHandler for WakefulServer {
    fn get_info(&self) -> ServerConfig {
        let mut experimental = ExperimentalCapabilities::new();
        experimental.insert(channel::CAPABILITY.to_string(), JsonObject::new());
        let mut capabilities = ServerCapabilities::builder()
            .enable_experimental_with(experimental)
            .enable_tools()
            .enable_tasks()
            .build();
        let (id, settings) = events::capability();
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(id, settings);
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("wakeful", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    /// The revisions of the server's [`crate::era::Protocol`] (a
    /// `server/discover` probe that should fall back is answered by
    /// [`Era`]).
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(self.protocol().versions())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        self.note_start_seq().await;
        let mut result = self.negotiate_initialize(&request)?;
        // The tasks extension is a 2026-07-28 matter; MCP Events is served
        // on both eras.
        let (id, settings) = events::capability();
        result.capabilities.extensions = Some([(id, settings)].into_iter().collect());
        Ok(result)
    }

    /// The answer to a probe that stays on 2026-07-28: the revisions served,
    /// the tools and the tasks extension, without the channel capability
    /// (a modern connection has no channel).
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let mut info = ServerHandler::get_info(self);
        info.capabilities.experimental = None;
        info.instructions = Some(INSTRUCTIONS_TASKS.into());
        Ok(DiscoverResult::from_server_info(
            self.protocol().versions().to_vec(),
            info,
        ))
    }

    /// Opens a `subscriptions/listen` stream: it is acknowledged with the
    /// categories wakeful sends (none of the list categories: its tool list
    /// never changes) and stays open until the client cancels it. While it
    /// is open, the tasks this connection creates are pushed on it as
    /// `notifications/tasks` when they end ([`crate::tasks`]).
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::default())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let request = context.request_context();
        let id = request.id.clone();
        self.listeners().open(id.clone(), request.peer.clone());
        context.cancelled().await;
        self.listeners().close(&id);
        Ok(())
    }

    /// A task of the request's session, kept by the daemon
    /// ([`crate::tasks`]); an id that is unknown, expired or another
    /// session's gets the same error, which says no more.
    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let session = self.session_for(&context.meta.0 .0);
        self.task_get(request.task_id, &session, context.id.clone())
            .await
    }

    /// Cancels a working task: it acknowledges nothing.
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let session = self.session_for(&context.meta.0 .0);
        self.task_cancel(request.task_id, &session).await
    }

    /// MCP Events (`events/*`, [`crate::events`]); anything else is not
    /// found.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        events::handle(self, request, context).await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.start_push(&context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools().to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // A client that skipped `notifications/initialized` still gets push;
        // a client that sent its requests without `initialize` (each with its
        // version in `_meta`) has no session, so no peer info, and gets none:
        // nothing may reach it outside its requests.
        if context.peer.peer_info().is_some() {
            self.start_push(&context.peer);
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        let call = self.call_for(&context);
        // A wait whose request declares the tasks extension runs in the
        // background (crate::tasks); a legacy request never does.
        if request.name == MONITOR_WAIT && tasks::declared(&context) {
            return Ok(match self.monitor_wait_task(args, &call.session).await {
                Ok(task) => task.into(),
                Err(bad) => bad.into(),
            });
        }
        let start_task =
            request.name == MONITOR_START && wants_wait(&args) && tasks::declared(&context);
        if start_task {
            return Ok(match self.monitor_start_task(args, &call).await {
                Ok(task) => task.into(),
                Err(bad) => bad.into(),
            });
        }
        let digest = self.first_digest(&call.session).await;
        let Some(result) = self.call(&request.name, args, &call).await else {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{}`; wakeful's tools are {}",
                    request.name,
                    self.tools()
                        .iter()
                        .map(|t| t.name.as_ref())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None,
            ));
        };
        // The first call for a session carries its digest (`digest`).
        let result = result.map(|mut value| {
            if let (Some(text), Some(obj)) = (digest, value.as_object_mut()) {
                obj.insert("digest".into(), Value::String(text));
            }
            value
        });
        Ok(tool_result(result).into())
    }
}

/// The message of the answer to `server/discover`.
pub const DISCOVER_MESSAGE: &str = "Method not found: server/discover. wakeful speaks the MCP revisions that open with initialize (2024-11-05 to 2025-11-25): its channel push needs the session that initialize opens. Send initialize.";

/// [`WakefulServer`] as the transport sees it: every request goes to the
/// server, except a `server/discover` probe that
/// [`Protocol::modern_for`](crate::era::Protocol::modern_for) sends to the
/// legacy handshake, which gets [`discover_error`].
pub struct Era(pub WakefulServer);

/// The error that answers `server/discover`.
pub fn discover_error() -> ErrorData {
    let versions: Vec<&str> =
        ProtocolVersion::known_up_to(&ProtocolVersion::LATEST_WITH_INITIALIZE)
            .iter()
            .map(ProtocolVersion::as_str)
            .collect();
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        DISCOVER_MESSAGE,
        Some(json!({ "initializeVersions": versions })),
    )
}

impl Service<RoleServer> for Era {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        if matches!(request, ClientRequest::DiscoverRequest(_)) {
            self.0.note_discovered();
            if !self
                .0
                .protocol()
                .modern_for(&context.meta, self.0.claude_channels())
            {
                return Err(discover_error());
            }
        }
        <WakefulServer as Service<RoleServer>>::handle_request(&self.0, request, context).await
    }

    async fn handle_notification(
        &self,
        notification: rmcp::model::ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        <WakefulServer as Service<RoleServer>>::handle_notification(&self.0, notification, context)
            .await
    }

    fn get_info(&self) -> ServerConfig {
        <WakefulServer as Service<RoleServer>>::get_info(&self.0)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        <WakefulServer as Service<RoleServer>>::supported_protocol_versions(&self.0)
    }
}
