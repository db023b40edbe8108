//! `[cluster]` in `config.toml`: where NATS is, who this host is, how to
//! authenticate, and whether other hosts may start and stop monitors here.
//!
//! ```toml
//! [cluster]
//! url = "nats://nats.example.net:4222"   # several: "nats://a:4222,nats://b:4222"
//! host = "build-1"                       # default: this machine's hostname
//! creds = "/home/me/.config/wakeful/wakeful.creds"   # or: token = "…"
//! accept_remote = false                  # `start --host` / `stop` from other hosts
//! domain = "hub"                         # through a leaf node: the hub's JetStream domain
//!
//! [cluster.tls]                          # TLS with rustls (ring)
//! ca = "/etc/wakeful/ca.pem"
//! cert = "/etc/wakeful/client.pem"       # client certificate and key: both or neither
//! key = "/etc/wakeful/client-key.pem"
//! ```

use std::path::PathBuf;

use serde::Deserialize;

pub use wakeful_core::export::{check_host, MAX_HOST_LEN};

/// `[cluster]`; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The NATS server URL, or several separated by commas.
    pub url: String,
    /// This host's name in the cluster (default: the hostname).
    #[serde(default)]
    pub host: Option<String>,
    /// A NATS credentials file (JWT and NKey seed).
    #[serde(default)]
    pub creds: Option<PathBuf>,
    /// A token, for a server configured with `authorization { token }`.
    #[serde(default)]
    pub token: Option<String>,
    /// TLS settings; `tls://` URLs or a `[cluster.tls]` table turn TLS on.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// The JetStream domain of the server that holds the stream, when this
    /// host connects to a leaf node without JetStream of its own (the
    /// hub's `jetstream { domain: … }`; docs/CLUSTER.md, leaf nodes).
    #[serde(default)]
    pub domain: Option<String>,
    /// Whether other hosts may start monitors here (`wakeful start --host`)
    /// and stop this host's monitors (default false).
    #[serde(default)]
    pub accept_remote: bool,
    /// Milliseconds between heartbeats (default 5000; 100–60000).
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_ms: u64,
    /// How long the stream keeps events, in hours (default 168: a week).
    /// A host that stays away longer misses what the stream let go.
    #[serde(default = "default_retention_hours")]
    pub retention_hours: u64,
}

/// `[cluster.tls]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM file of the certificate authorities to trust (besides none).
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// PEM file of this host's client certificate.
    #[serde(default)]
    pub cert: Option<PathBuf>,
    /// PEM file of its private key.
    #[serde(default)]
    pub key: Option<PathBuf>,
}

fn default_heartbeat_ms() -> u64 {
    5_000
}

fn default_retention_hours() -> u64 {
    168
}

impl ClusterConfig {
    /// Checks what can be checked without a network: URLs, the host name,
    /// credentials and TLS files, ranges. The message says what to fix.
    pub fn validate(&self) -> Result<(), ClusterConfigError> {
        let urls = self.urls();
        if urls.is_empty() {
            return Err(ClusterConfigError::NoUrl);
        }
        for u in &urls {
            u.parse::<async_nats::ServerAddr>()
                .map_err(|source| ClusterConfigError::Url {
                    url: u.clone(),
                    source,
                })?;
        }
        check_host(&self.host()).map_err(ClusterConfigError::Host)?;
        if self.creds.is_some() && self.token.is_some() {
            return Err(ClusterConfigError::CredsAndToken);
        }
        if let Some(d) = &self.domain {
            if d.is_empty()
                || !d
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(ClusterConfigError::Domain { domain: d.clone() });
            }
        }
        if self.token.as_deref() == Some("") {
            return Err(ClusterConfigError::EmptyToken);
        }
        if let Some(creds) = &self.creds {
            readable(creds, "creds")?;
        }
        if let Some(tls) = &self.tls {
            match (&tls.cert, &tls.key) {
                (Some(_), None) | (None, Some(_)) => return Err(ClusterConfigError::CertAndKey),
                _ => {}
            }
            for (what, path) in [("ca", &tls.ca), ("cert", &tls.cert), ("key", &tls.key)] {
                if let Some(p) = path {
                    readable(p, &format!("tls.{what}"))?;
                }
            }
        }
        if !(100..=60_000).contains(&self.heartbeat_ms) {
            return Err(ClusterConfigError::Heartbeat {
                ms: self.heartbeat_ms,
            });
        }
        if self.retention_hours == 0 {
            return Err(ClusterConfigError::Retention);
        }
        Ok(())
    }

    /// The configured server URLs.
    pub fn urls(&self) -> Vec<String> {
        self.url
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(String::from)
            .collect()
    }

    /// This host's name: `host`, else the machine's hostname.
    pub fn host(&self) -> String {
        self.host.clone().unwrap_or_else(hostname)
    }
}

fn readable(path: &std::path::Path, what: &str) -> Result<(), ClusterConfigError> {
    std::fs::File::open(path)
        .map(|_| ())
        .map_err(|source| ClusterConfigError::Unreadable {
            what: what.to_string(),
            path: path.to_path_buf(),
            source,
        })
}

/// Why `[cluster]` cannot be used ([`ClusterConfig::validate`]); each says
/// what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ClusterConfigError {
    /// No URL.
    #[error("[cluster] url is empty: give the NATS server, e.g. url = \"nats://127.0.0.1:4222\"")]
    NoUrl,
    /// A URL that is not a NATS server address.
    #[error("[cluster] url {url:?} is not a NATS server address ({source}); e.g. nats://host:4222 or tls://host:4222")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A host name that cannot be used.
    #[error("[cluster] {0}")]
    Host(#[source] wakeful_core::export::HostError),
    /// Both `creds` and `token`.
    #[error("[cluster] has both creds and token: keep one")]
    CredsAndToken,
    /// A JetStream domain that is not one.
    #[error("[cluster] domain {domain:?} must be letters, digits, `_` or `-` (the hub's `jetstream {{ domain: … }}`)")]
    Domain {
        /// The domain given.
        domain: String,
    },
    /// An empty token.
    #[error("[cluster] token is empty")]
    EmptyToken,
    /// A credentials or TLS file that cannot be read.
    #[error("[cluster] {what} {}: {source}", path.display())]
    Unreadable {
        /// Which setting (`creds`, `tls.ca` …).
        what: String,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A client certificate without its key, or a key without its
    /// certificate.
    #[error("[cluster.tls] needs both cert and key, or neither")]
    CertAndKey,
    /// A heartbeat outside 100–60000 ms.
    #[error("[cluster] heartbeat_ms must be within 100–60000, not {ms}")]
    Heartbeat {
        /// The value given.
        ms: u64,
    },
    /// A retention of 0 hours.
    #[error("[cluster] retention_hours must be at least 1")]
    Retention,
}

/// The machine's hostname (`localhost` when it has none).
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ClusterConfig, Box<dyn std::error::Error>> {
        let c: ClusterConfig = toml::from_str(text)?;
        c.validate()?;
        Ok(c)
    }

    #[test]
    fn defaults_and_errors() {
        let c = parse("url = \"nats://127.0.0.1:4222\"\nhost = \"a\"\n").unwrap();
        assert_eq!(c.host(), "a");
        assert!(!c.accept_remote);
        assert_eq!(c.heartbeat_ms, 5000);
        assert_eq!(c.urls(), ["nats://127.0.0.1:4222"]);
        let c = parse("url = \"nats://x:1, tls://y:2\"\n").unwrap();
        assert_eq!(c.urls().len(), 2);
        assert!(!c.host().is_empty());
        let err = |t: &str| parse(t).unwrap_err().to_string();
        assert!(err("url = \"\"").contains("url is empty"));
        assert!(err("url = \"nats://x:1\"\nhost = \"a b\"").contains("no spaces"));
        assert!(err("url = \"nats://x:1\"\nhost = \"a/b\"").contains("`/`"));
        assert!(
            err("url = \"nats://x:1\"\ntoken = \"t\"\ncreds = \"/etc/hostname\"")
                .contains("both creds and token")
        );
        assert!(
            err("url = \"nats://x:1\"\ncreds = \"/nonexistent/x.creds\"")
                .contains("/nonexistent/x.creds")
        );
        assert!(err("url = \"nats://x:1\"\n[tls]\ncert = \"/etc/hostname\"")
            .contains("both cert and key"));
        assert!(err("url = \"nats://x:1\"\nheartbeat_ms = 5").contains("heartbeat_ms"));
        assert!(err("url = \"nats://x:1\"\nhots = \"a\"").contains("hots"));
        assert!(err("url = \"nats://x:1\"\naccept_remote = \"yes\"").contains("accept_remote"));
    }
}
