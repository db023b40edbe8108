//! Knowing that a response reached the client.
//!
//! `monitor_wait` acknowledges events (moves the consumer's cursor) only
//! once the response that carries them was written to the client: not when
//! the tool returns, since the MCP service drops the response of a request
//! the client cancelled (`notifications/cancelled`, the user pressed Esc),
//! and not if writing fails. [`Written`] wraps the transport: after it has
//! written (and flushed) the response to a request, it fires the signal
//! registered for that request with [`Receipts::expect`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::{JsonRpcMessage, RequestId};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Signals waiting for the response to a request to be written.
#[derive(Clone, Default)]
pub struct Receipts {
    waiting: Arc<Mutex<HashMap<RequestId, oneshot::Sender<()>>>>,
    /// Cancelled once the client closed its end of stdin: it shut the
    /// server down and reads nothing any more.
    gone: CancellationToken,
}

impl Receipts {
    fn lock(&self) -> MutexGuard<'_, HashMap<RequestId, oneshot::Sender<()>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A receiver that completes once the response to request `id` was
    /// written to the client, and is dropped (completes with an error) when
    /// it never will be: the request was cancelled, writing failed, or the
    /// client has gone (closed stdin).
    pub fn expect(&self, id: RequestId) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        if !self.gone.is_cancelled() {
            self.lock().insert(id, tx);
        }
        rx
    }

    /// Cancelled when the client has gone: it closed stdin, the stdio way
    /// of shutting an MCP server down, and will read no response.
    pub fn client_gone(&self) -> CancellationToken {
        self.gone.clone()
    }

    /// The client closed stdin: no response counts as read any more.
    fn close(&self) {
        self.gone.cancel();
        self.lock().clear();
    }

    /// Forgets request `id` (its response will not be written).
    pub fn forget(&self, id: &RequestId) {
        self.lock().remove(id);
    }

    fn written(&self, id: &RequestId, ok: bool) {
        if let Some(tx) = self.lock().remove(id) {
            if ok && !self.gone.is_cancelled() {
                let _ = tx.send(());
            }
        }
    }
}

/// A transport that reports written responses to its [`Receipts`].
pub struct Written<T> {
    inner: T,
    receipts: Receipts,
}

impl<T> Written<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, receipts: Receipts) -> Self {
        Written { inner, receipts }
    }
}

impl<T> Transport<RoleServer> for Written<T>
where
    T: Transport<RoleServer>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let id = match &item {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        let sent = self.inner.send(item);
        let receipts = self.receipts.clone();
        async move {
            let result = sent.await;
            if let Some(id) = id {
                receipts.written(&id, result.is_ok());
            }
            result
        }
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        let receipts = self.receipts.clone();
        let next = self.inner.receive();
        async move {
            let message = next.await;
            if message.is_none() {
                // End of stdin: the client shut the server down.
                receipts.close();
            }
            message
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
