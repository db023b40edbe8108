//! Which MCP era `wakeful mcp` speaks, and its answer to a 2026-07-28
//! client's `server/discover` probe.
//!
//! MCP 2026-07-28 has no `initialize` and no session: every request carries
//! its version in `_meta`, and nothing reaches a client outside the
//! responses to its requests (notifications flow only inside a
//! `subscriptions/listen` stream). Channel push, the way wakeful wakes an
//! idle Claude Code session, is an unsolicited notification of a session,
//! so it needs a legacy (`initialize`) connection — Claude Code 2.1.332
//! skips channels on a modern one ("connection negotiated a modern protocol
//! revision with no unsolicited notification path"). Claude Code, like the
//! MCP Python SDK 2.3 client, is dual-era: it probes with `server/discover`
//! first and stays modern if the server answers with a `DiscoverResult`.
//!
//! So `wakeful mcp` is a legacy server, and it answers the probe the way
//! the 2026-07-28 stdio binding tells dual-era clients to recognise one: a
//! JSON-RPC error that is not a modern error (here `-32601`, method not
//! found, whose message names the revisions to use with `initialize`). A
//! dual-era client falls back to `initialize` and gets the session with
//! channel push; a modern-only client gets an error it can show. A probe
//! without the `_meta` 2026-07-28 requires gets `-32602`, and a request
//! other than `server/discover` that names a revision in `_meta` gets
//! `-32022` with the supported revisions (both answered by [`rmcp`]).

use std::borrow::Cow;

use rmcp::model::{ClientRequest, ErrorCode, ProtocolVersion, ServerConfig, ServerResult};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, Service};
use rmcp::ErrorData;
use serde_json::json;

use crate::server::WakefulServer;

/// The message of the answer to `server/discover`.
pub const DISCOVER_MESSAGE: &str = "Method not found: server/discover. wakeful speaks the MCP revisions that open with initialize (2024-11-05 to 2025-11-25): its channel push needs the session that initialize opens. Send initialize.";

/// [`WakefulServer`] as the transport sees it: every request goes to the
/// server, except `server/discover`, which gets the legacy answer (see the
/// module docs).
pub struct Legacy(pub WakefulServer);

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

impl Service<RoleServer> for Legacy {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        if matches!(request, ClientRequest::DiscoverRequest(_)) {
            self.0.note_discovered();
            return Err(discover_error());
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
