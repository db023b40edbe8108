//! A small HTTP/1.1 client for the wake adapters (OpenCode, webhooks) and
//! the OTLP export, on hyper. The host is resolved once and the address that passed the network
//! policy is the one connected to (TLS for `https`, with the host name for
//! SNI and certificate checks), so a DNS answer that changes between check
//! and connect cannot reach a refused address.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::NetPolicy;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// How long one request may take, connection included.
const TIMEOUT: Duration = Duration::from_secs(20);

/// A response: status and body.
#[derive(Debug)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// The body, as text (lossy).
    pub body: String,
    /// The `Location` header, when there is one (a redirect).
    pub location: Option<String>,
}

/// Where a redirect of a request to `url` points: the `Location` (an
/// absolute URL, or a path on `url`'s host), and, when its host is or
/// resolves to a loopback or link-local address, that address. Redirects
/// are never followed; this says what the refusal should name.
pub async fn redirect_target(url: &str, location: &str) -> (String, Option<std::net::IpAddr>) {
    let absolute = if location.starts_with("http://") || location.starts_with("https://") {
        location.to_string()
    } else {
        match parse(url) {
            Ok(t) => format!(
                "{}://{}:{}{}",
                if t.tls { "https" } else { "http" },
                if t.host.contains(':') {
                    format!("[{}]", t.host)
                } else {
                    t.host.clone()
                },
                t.port,
                if location.starts_with('/') {
                    location.to_string()
                } else {
                    format!("/{location}")
                }
            ),
            Err(_) => location.to_string(),
        }
    };
    let inner = match parse(&absolute) {
        Ok(t) => tokio::net::lookup_host((t.host.as_str(), t.port))
            .await
            .map(|addrs| addrs.map(|a| a.ip()).find(|ip| loopback_or_link_local(*ip)))
            .unwrap_or(None),
        Err(_) => None,
    };
    (absolute, inner)
}

/// A loopback (127.0.0.0/8, ::1) or link-local (169.254.0.0/16, fe80::/10:
/// cloud metadata endpoints live there) address, IPv4-mapped ones too.
pub fn loopback_or_link_local(ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.is_loopback() || v4.is_link_local(),
            None => v6.is_loopback() || (v6.segments()[0] & 0xffc0) == 0xfe80,
        },
    }
}

/// Why a request failed before a response came. Each message says what
/// happened; [`HttpError::is_retryable`] says whether trying again later
/// can help.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The URL cannot be requested (its scheme, credentials, host or port).
    #[error("{0}")]
    Url(String),
    /// The network policy refuses every address of the host: only a change
    /// of `[network] allow` in config.toml lets it through.
    #[error("{0}")]
    Refused(String),
    /// The request failed on its way (resolving, connecting, TLS, HTTP, the
    /// time limit).
    #[error("{0}")]
    Transport(String),
}

impl HttpError {
    /// Whether the same request may succeed later (a transport failure);
    /// a bad URL or a refusal by the policy stays what it is.
    pub fn is_retryable(&self) -> bool {
        matches!(self, HttpError::Transport(_))
    }
}

/// Which addresses may be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Loopback too, whatever the policy (a local agent server, e.g. OpenCode).
    LoopbackAndPolicy,
    /// Only what the policy allows.
    Policy,
}

struct Target {
    tls: bool,
    host: String,
    port: u16,
    path: String,
}

fn parse(url: &str) -> Result<Target, HttpError> {
    let (tls, rest) = if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else {
        return Err(HttpError::Url(format!(
            "{url}: only http:// and https:// URLs are accepted"
        )));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err(HttpError::Url(format!(
            "{url}: credentials in the URL are not accepted"
        )));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, p) = v6
            .split_once(']')
            .ok_or_else(|| HttpError::Url(format!("{url}: bad IPv6 host")))?;
        (h.to_string(), p.strip_prefix(':').map(str::to_string))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.to_string())),
            None => (authority.to_string(), None),
        }
    };
    let port = match port {
        Some(p) => p
            .parse()
            .map_err(|_| HttpError::Url(format!("{url}: bad port `{p}`")))?,
        None => {
            if tls {
                443
            } else {
                80
            }
        }
    };
    if host.is_empty() {
        return Err(HttpError::Url(format!("{url}: no host")));
    }
    Ok(Target {
        tls,
        host,
        port,
        path: path.to_string(),
    })
}

async fn resolve(t: &Target, policy: &NetPolicy, reach: Reach) -> Result<SocketAddr, HttpError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((t.host.as_str(), t.port))
        .await
        .map_err(|e| HttpError::Transport(format!("cannot resolve {}: {e}", t.host)))?
        .collect();
    let mut refused = vec![];
    for a in &addrs {
        let loopback_ok = reach == Reach::LoopbackAndPolicy && a.ip().is_loopback();
        match policy.refusal(a.ip()) {
            None => return Ok(*a),
            Some(_) if loopback_ok => return Ok(*a),
            Some(why) => refused.push(format!("{} ({why})", a.ip())),
        }
    }
    Err(HttpError::Refused(format!(
        "refused to connect to {}: {}; only a person can allow such addresses, in config.toml: [network] allow = [\"CIDR\"]",
        t.host,
        if refused.is_empty() { "no address".into() } else { refused.join(", ") }
    )))
}

/// Sends one request and reads the whole response.
pub async fn request(
    method: &str,
    url: &str,
    json_body: Option<&serde_json::Value>,
    policy: &NetPolicy,
    reach: Reach,
) -> Result<Response, HttpError> {
    let body = json_body.map(|v| v.to_string());
    send_within(method, url, body, &[], policy, reach).await
}

/// POSTs `body`, exactly these bytes, as `application/json` with the extra
/// `headers` (a signed webhook: the signature covers the bytes sent), and
/// reads the whole response. Redirects are not followed.
pub async fn post_json(
    url: &str,
    body: String,
    headers: &[(&str, &str)],
    policy: &NetPolicy,
    reach: Reach,
) -> Result<Response, HttpError> {
    send_within("POST", url, Some(body), headers, policy, reach).await
}

/// Whether `url` could be requested under `policy`: its form, and an
/// address of its host that the policy allows (what [`request`] checks
/// before it connects). Nothing is sent.
pub async fn check(url: &str, policy: &NetPolicy, reach: Reach) -> Result<(), HttpError> {
    let target = parse(url)?;
    resolve(&target, policy, reach).await.map(|_| ())
}

async fn send_within(
    method: &str,
    url: &str,
    body: Option<String>,
    headers: &[(&str, &str)],
    policy: &NetPolicy,
    reach: Reach,
) -> Result<Response, HttpError> {
    tokio::time::timeout(
        TIMEOUT,
        request_inner(method, url, body, headers, policy, reach),
    )
    .await
    .map_err(|_| {
        HttpError::Transport(format!(
            "{method} {url} timed out after {}s",
            TIMEOUT.as_secs()
        ))
    })?
}

async fn request_inner(
    method: &str,
    url: &str,
    json_body: Option<String>,
    headers: &[(&str, &str)],
    policy: &NetPolicy,
    reach: Reach,
) -> Result<Response, HttpError> {
    let target = parse(url)?;
    let addr = resolve(&target, policy, reach).await?;
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| HttpError::Transport(format!("cannot connect to {addr}: {e}")))?;
    let has_body = json_body.is_some();
    let body = json_body.unwrap_or_default();
    let host_header = if (target.tls && target.port == 443) || (!target.tls && target.port == 80) {
        target.host.clone()
    } else {
        format!("{}:{}", target.host, target.port)
    };
    let mut builder = Request::builder()
        .method(method)
        .uri(&target.path)
        .header("host", host_header)
        .header("user-agent", concat!("wakeful/", env!("CARGO_PKG_VERSION")));
    if has_body {
        builder = builder.header("content-type", "application/json");
    }
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let req = builder
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| HttpError::Transport(format!("cannot build the request: {e}")))?;
    if target.tls {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from(target.host.clone())
            .map_err(|e| HttpError::Transport(format!("bad TLS name {}: {e}", target.host)))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| HttpError::Transport(format!("TLS with {} failed: {e}", target.host)))?;
        send(TokioIo::new(tls), req).await
    } else {
        send(TokioIo::new(tcp), req).await
    }
}

async fn send<T>(io: T, req: Request<Full<Bytes>>) -> Result<Response, HttpError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| HttpError::Transport(format!("HTTP handshake failed: {e}")))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| HttpError::Transport(format!("HTTP request failed: {e}")))?;
    let status = resp.status().as_u16();
    let location = resp
        .headers()
        .get(hyper::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| HttpError::Transport(format!("reading the HTTP response failed: {e}")))?
        .to_bytes();
    Ok(Response {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
        location,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        let t = parse("http://127.0.0.1:4096/session/x/prompt_async?directory=/a").unwrap();
        assert_eq!((t.tls, t.host.as_str(), t.port), (false, "127.0.0.1", 4096));
        assert_eq!(t.path, "/session/x/prompt_async?directory=/a");
        let t = parse("https://hooks.example.com").unwrap();
        assert_eq!((t.tls, t.port, t.path.as_str()), (true, 443, "/"));
        let t = parse("http://[::1]:8080/x").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 8080));
        assert!(parse("ftp://x").is_err());
        assert!(parse("http://u:p@x/").is_err());
    }

    #[tokio::test]
    async fn redirects_name_their_target_and_loopback_or_link_local() {
        let (to, inner) = redirect_target("https://hooks.example.com/a", "/b").await;
        assert_eq!(to, "https://hooks.example.com:443/b");
        assert_eq!(inner, None);
        let (_, inner) =
            redirect_target("https://hooks.example.com/a", "http://127.0.0.1:9/x").await;
        assert_eq!(inner, Some("127.0.0.1".parse().unwrap()));
        let (_, inner) =
            redirect_target("https://x/", "http://169.254.169.254/latest/meta-data/").await;
        assert_eq!(inner, Some("169.254.169.254".parse().unwrap()));
        let (_, inner) = redirect_target("https://x/", "http://[::ffff:127.0.0.1]/").await;
        assert!(inner.is_some());
        assert!(loopback_or_link_local("fe80::1".parse().unwrap()));
        assert!(!loopback_or_link_local("93.184.216.34".parse().unwrap()));
    }

    #[tokio::test]
    async fn only_a_transport_failure_is_worth_a_retry() {
        let policy = NetPolicy::new(&[]).unwrap();
        let bad = request("GET", "ftp://x/", None, &policy, Reach::Policy).await;
        assert!(matches!(bad, Err(HttpError::Url(_))), "{bad:?}");
        assert!(!bad.unwrap_err().is_retryable());
        // Loopback is refused by the default policy on this reach.
        let refused = request("GET", "http://127.0.0.1:9/", None, &policy, Reach::Policy).await;
        assert!(matches!(refused, Err(HttpError::Refused(_))), "{refused:?}");
        assert!(!refused.unwrap_err().is_retryable());
        // Allowed (a local agent server) but nothing listens: a retry may help.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/");
        let down = request("GET", &url, None, &policy, Reach::LoopbackAndPolicy).await;
        assert!(matches!(down, Err(HttpError::Transport(_))), "{down:?}");
        assert!(down.unwrap_err().is_retryable());
    }
}
