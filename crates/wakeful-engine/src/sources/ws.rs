//! The WebSocket source.
//!
//! - Each text frame is a line; a frame holding several lines gives several.
//! - A binary frame becomes `[binary frame: N bytes]`.
//! - A frame (or message) over 1 MiB ends the monitor with `ws_frame_too_large`.
//! - A close ends it with `ws_closed` and the close code (1005 when the server
//!   sent none, 1006 when the connection dropped without a close).
//! - A refused or failed connection makes the monitor `failed` with the reason.
//!
//! The host is resolved once; the first resolved address the [`NetPolicy`]
//! accepts is the one connected to (TLS and the handshake then run over that
//! very TCP stream), so a DNS answer that changes between check and connect
//! (rebinding) cannot reach a refused address.

use futures_util::StreamExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::CapacityError;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use wakeful_core::machine::SourceEnd;
use wakeful_core::{MonitorStopReason, Stream};

use crate::net::NetPolicy;
use crate::source::{Input, InputSource};

/// Largest frame or message accepted.
pub const MAX_FRAME: usize = 1024 * 1024;
/// How long connecting (TCP, TLS, handshake) may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// A connected WebSocket source.
pub(crate) struct WsSource {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// The last frame handed out.
    buf: Vec<u8>,
}

fn install_crypto() {
    // Several monitors may race here; only the first install counts, and any
    // installed provider will do.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Why a WebSocket monitor could not connect (its `failed` reason).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    /// Not a WebSocket URL.
    #[error("invalid WebSocket URL {url}: {source}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: Box<WsError>,
    },
    /// Subprotocols that cannot go in a header.
    #[error("invalid subprotocols: {0}")]
    Protocols(#[source] tokio_tungstenite::tungstenite::http::header::InvalidHeaderValue),
    /// The URL has no host.
    #[error("{url} has no host")]
    NoHost {
        /// The URL.
        url: String,
    },
    /// The host name does not resolve.
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        /// The host.
        host: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Every address of the host is one the network policy refuses.
    #[error("refused to connect to {host}: {}; only a person can allow such addresses, in config.toml: [network] allow = [\"CIDR\"]", if refused.is_empty() { "no address".to_string() } else { refused.join(", ") })]
    Refused {
        /// The host.
        host: String,
        /// Each address refused, with why.
        refused: Vec<String>,
    },
    /// The TCP connection failed.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The WebSocket handshake failed.
    #[error("WebSocket handshake with {url} failed: {source}")]
    Handshake {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: Box<WsError>,
    },
    /// Connecting took longer than [`CONNECT_TIMEOUT`].
    #[error("connecting to {url} timed out after {}s", CONNECT_TIMEOUT.as_secs())]
    Timeout {
        /// The URL.
        url: String,
    },
}

impl WsSource {
    /// Resolves, checks and connects. Errors are the `failed` reason.
    pub(crate) async fn connect(
        url: &str,
        protocols: &[String],
        policy: &NetPolicy,
    ) -> Result<Self, ConnectError> {
        install_crypto();
        let mut request = url.into_client_request().map_err(|e| ConnectError::Url {
            url: url.to_string(),
            source: Box::new(e),
        })?;
        if !protocols.is_empty() {
            let value =
                HeaderValue::from_str(&protocols.join(", ")).map_err(ConnectError::Protocols)?;
            request
                .headers_mut()
                .insert("Sec-WebSocket-Protocol", value);
        }
        let uri = request.uri().clone();
        let host = uri
            .host()
            .ok_or_else(|| ConnectError::NoHost {
                url: url.to_string(),
            })?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let tls = uri.scheme_str() == Some("wss");
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|source| ConnectError::Resolve {
                host: host.clone(),
                source,
            })?
            .collect();
        let mut refused = Vec::new();
        let addr = addrs
            .iter()
            .copied()
            .find(|a| match policy.refusal(a.ip()) {
                None => true,
                Some(why) => {
                    refused.push(format!("{} ({why})", a.ip()));
                    false
                }
            })
            .ok_or_else(|| ConnectError::Refused {
                host: host.clone(),
                refused: refused.clone(),
            })?;
        let connect = async {
            let tcp = TcpStream::connect(addr)
                .await
                .map_err(|source| ConnectError::Connect { addr, source })?;
            let config = WebSocketConfig::default()
                .max_frame_size(Some(MAX_FRAME))
                .max_message_size(Some(MAX_FRAME));
            tokio_tungstenite::client_async_tls_with_config(request, tcp, Some(config), None)
                .await
                .map_err(|e| ConnectError::Handshake {
                    url: url.to_string(),
                    source: Box::new(e),
                })
        };
        let (ws, _response) = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| ConnectError::Timeout {
                url: url.to_string(),
            })??;
        Ok(WsSource {
            ws,
            buf: Vec::new(),
        })
    }
}

impl InputSource for WsSource {
    async fn next(&mut self) -> Input<'_> {
        loop {
            let msg = match self.ws.next().await {
                None => return closed(1006),
                Some(Ok(m)) => m,
                Some(Err(WsError::Capacity(CapacityError::MessageTooLong { .. })))
                | Some(Err(WsError::Capacity(_))) => {
                    return Input::End(SourceEnd::Ended(MonitorStopReason::WsFrameTooLarge).into())
                }
                Some(Err(WsError::ConnectionClosed)) | Some(Err(WsError::AlreadyClosed)) => {
                    return closed(1006)
                }
                Some(Err(e)) => {
                    return Input::End(SourceEnd::Failed(format!("WebSocket error: {e}")).into())
                }
            };
            match msg {
                Message::Text(t) => {
                    self.buf.clear();
                    self.buf.extend_from_slice(t.as_bytes());
                    if self.buf.last() != Some(&b'\n') {
                        self.buf.push(b'\n');
                    }
                    return Input::Chunk(Stream::Stdout, &self.buf);
                }
                Message::Binary(b) => {
                    self.buf.clear();
                    self.buf.extend_from_slice(
                        format!("[binary frame: {} bytes]\n", b.len()).as_bytes(),
                    );
                    return Input::Chunk(Stream::Stdout, &self.buf);
                }
                Message::Close(frame) => {
                    return closed(frame.map_or(1005, |f| u16::from(f.code)));
                }
                // Pings are answered by the library; pongs and raw frames
                // carry nothing for the agent.
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
            }
        }
    }

    async fn close(&mut self) {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), self.ws.close(None)).await;
    }
}

fn closed(code: u16) -> Input<'static> {
    Input::End(SourceEnd::Ended(MonitorStopReason::WsClosed { code }).into())
}
