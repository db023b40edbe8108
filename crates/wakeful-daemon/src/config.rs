//! `config.toml` (docs/CONTRACT.md §10): defaults and limits, and which private network
//! addresses sources may reach. Unknown keys are errors, so a typo never
//! silently keeps a default.

use std::path::Path;

use serde::Deserialize;
use wakeful_core::storage::{ByteSize, KeepFree, OutputCaps, Retention, Span};

/// The whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The platform backend (`"linux"`, `"posix"`; docs/PLATFORMS.md):
    /// the system's own when absent. `WAKEFUL_PLATFORM` wins over it.
    #[serde(default)]
    pub platform: Option<String>,
    /// Limits.
    #[serde(default)]
    pub limits: Limits,
    /// How monitors are stopped.
    #[serde(default)]
    pub monitors: MonitorDefaults,
    /// The store.
    #[serde(default)]
    pub store: StoreOptions,
    /// Which private addresses network sources may reach.
    #[serde(default)]
    pub network: Network,
    /// Wake routes: `[[wake]]` tables with `session`, `adapter` and the
    /// adapter's options (see `wakeful wake set --help`).
    #[serde(default)]
    pub wake: Vec<toml::Table>,
    /// Wake behaviour.
    #[serde(default)]
    pub wake_options: WakeOptions,
    /// The live views (`wakeful tui`, `wakeful web`), which read this table
    /// themselves; the daemon only checks it.
    #[serde(default)]
    pub view: wakeful_protocol::view::ViewConfig,
    /// The cluster link (docs/CLUSTER.md); none by default: nothing of it
    /// runs.
    #[serde(default)]
    pub cluster: Option<wakeful_cluster::ClusterConfig>,
    /// `wakeful mcp`, which reads this table itself; the daemon only checks
    /// it.
    #[serde(default)]
    pub mcp: McpOptions,
}

/// `[mcp]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpOptions {
    /// Which MCP revisions `wakeful mcp` serves when neither `--protocol`
    /// nor `WAKEFUL_MCP_PROTOCOL` says: `auto` (the default), `2026-07-28`
    /// or `2025-11-25`.
    pub protocol: Option<McpProtocol>,
}

/// A value of `[mcp] protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum McpProtocol {
    /// `auto`.
    #[serde(rename = "auto")]
    Auto,
    /// `2026-07-28`.
    #[serde(rename = "2026-07-28")]
    Modern,
    /// `2025-11-25`.
    #[serde(rename = "2025-11-25")]
    Legacy,
}

impl McpProtocol {
    /// The value as the file spells it (and `--protocol` takes it).
    pub fn as_str(self) -> &'static str {
        match self {
            McpProtocol::Auto => "auto",
            McpProtocol::Modern => "2026-07-28",
            McpProtocol::Legacy => "2025-11-25",
        }
    }
}

/// `[wake_options]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WakeOptions {
    /// A monitor started inside Codex (`CODEX_THREAD_ID` set) in a session
    /// without a route gives it the `codex` route (default true).
    pub auto_codex: bool,
}

impl Default for WakeOptions {
    fn default() -> Self {
        WakeOptions { auto_codex: true }
    }
}

/// `[limits]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Most active monitors per session (default 8).
    pub max_active_per_session: usize,
    /// Most connections one client process may hold open at once (default
    /// 64); the next one is refused with a `busy` error.
    pub max_connections_per_process: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_active_per_session: 8,
            max_connections_per_process: 64,
        }
    }
}

/// `[monitors]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MonitorDefaults {
    /// Milliseconds between SIGTERM and SIGKILL when a monitor stops
    /// (default 2000).
    pub grace_ms: u64,
    /// Start each command in a cgroup v2 of its own where one can be
    /// created (default true); the process tree and the environment marker
    /// find a command's processes either way.
    pub cgroups: bool,
}

impl Default for MonitorDefaults {
    fn default() -> Self {
        MonitorDefaults {
            grace_ms: 2_000,
            cgroups: true,
        }
    }
}

/// `[store]`: how long events are kept and how much disk the store may
/// take (docs/STORAGE.md).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreOptions {
    /// Milliseconds an event waits in the redo log (durable already) before
    /// it is put into the database's tables, in one transaction with every
    /// other waiting event (default 1000). Reads never see the difference.
    pub fold_delay_ms: u64,
    /// Ended monitors older than this are pruned: events, row, output
    /// files (default `7d`).
    pub max_age: Span,
    /// The database plus every output file: over it, ended monitors are
    /// pruned oldest first, whatever their age (default `2GiB`).
    pub max_size: ByteSize,
    /// One monitor's (or terminal's) output file: past it, the oldest
    /// segment but the first goes (default `64MiB`).
    pub output_max: ByteSize,
    /// All output files: running ones share it (each gets at most this
    /// divided by how many run), ended ones' files are pruned past it
    /// (default `1GiB`).
    pub output_total: ByteSize,
    /// Free space the state directory's filesystem keeps: below it,
    /// output files stop growing, and what is not written is counted and
    /// reported (default `5%`, at most 1 GiB).
    pub keep_free: KeepFree,
}

impl Default for StoreOptions {
    fn default() -> Self {
        let retention = Retention::default();
        let caps = OutputCaps::default();
        StoreOptions {
            fold_delay_ms: wakeful_engine::DEFAULT_FOLD_DELAY.as_millis() as u64,
            max_age: retention.max_age,
            max_size: ByteSize(retention.max_size),
            output_max: ByteSize(caps.per_file),
            output_total: ByteSize(caps.total),
            keep_free: KeepFree::default(),
        }
    }
}

impl StoreOptions {
    /// What a prune keeps.
    pub fn retention(&self) -> Retention {
        Retention {
            max_age: self.max_age,
            max_size: self.max_size.0,
            output_total: self.output_total.0,
        }
    }

    /// The output files' caps.
    pub fn output_caps(&self) -> OutputCaps {
        OutputCaps {
            per_file: self.output_max.0,
            total: self.output_total.0,
        }
    }

    fn validate(&self) -> Result<(), StoreConfigError> {
        const MIN_OUTPUT: u64 = 64 * 1024;
        if self.output_max.0 < MIN_OUTPUT {
            return Err(StoreConfigError::OutputMax {
                output_max: self.output_max,
            });
        }
        if self.output_total.0 < self.output_max.0 {
            return Err(StoreConfigError::OutputTotal {
                output_total: self.output_total,
                output_max: self.output_max,
            });
        }
        if self.max_size.0 < self.output_total.0 {
            return Err(StoreConfigError::MaxSize {
                max_size: self.max_size,
                output_total: self.output_total,
            });
        }
        if self.max_age.0 < std::time::Duration::from_secs(1) {
            return Err(StoreConfigError::MaxAge);
        }
        Ok(())
    }
}

/// Why the sizes of `[store]` do not fit together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreConfigError {
    /// `output_max` below 64 KiB.
    #[error("store.output_max must be at least 64KiB (it is {output_max})")]
    OutputMax {
        /// The value given.
        output_max: ByteSize,
    },
    /// `output_total` below `output_max`.
    #[error(
        "store.output_total ({output_total}) must be at least store.output_max ({output_max})"
    )]
    OutputTotal {
        /// The total given.
        output_total: ByteSize,
        /// The cap of one file.
        output_max: ByteSize,
    },
    /// `max_size` below `output_total`.
    #[error("store.max_size ({max_size}) must be at least store.output_total ({output_total}): it covers the database and the output files")]
    MaxSize {
        /// The size given.
        max_size: ByteSize,
        /// The output files' total.
        output_total: ByteSize,
    },
    /// `max_age` under a second.
    #[error("store.max_age must be at least 1s")]
    MaxAge,
}

/// Why the text of a configuration file is not a usable configuration
/// ([`Config::parse`], and the programs [`Config::load`] checks); each says
/// what to fix.
#[derive(Debug, thiserror::Error)]
pub enum InvalidConfig {
    /// Not TOML of this configuration (with line and column).
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    /// `limits.max_active_per_session = 0`.
    #[error("limits.max_active_per_session must be at least 1")]
    MaxActive,
    /// `[store]` sizes that do not fit together.
    #[error("{0}")]
    Store(#[from] StoreConfigError),
    /// A `[[wake]]` table that cannot be used.
    #[error("{0}")]
    Wake(#[from] WakeTableError),
    /// `view.error_regex` is not a regex.
    #[error("view.error_regex is not a valid regex: {0}")]
    ErrorRegex(#[source] regex::Error),
    /// `[cluster]` cannot be used.
    #[error("{0}")]
    Cluster(#[from] wakeful_cluster::config::ClusterConfigError),
}

/// Why a `[[wake]]` table cannot be used; `table` counts from 1.
#[derive(Debug, thiserror::Error)]
pub enum WakeTableError {
    /// No `session`.
    #[error("[[wake]] table {table} needs `session = \"...\"`")]
    NoSession {
        /// Which table.
        table: usize,
    },
    /// Not a route's table.
    #[error("[[wake]] table {table} (session {session}): {source}")]
    Table {
        /// Which table.
        table: usize,
        /// Its session.
        session: String,
        /// What the TOML reader said.
        #[source]
        source: toml::de::Error,
    },
    /// A route whose options cannot be used.
    #[error("[[wake]] table {table} (session {session}): {source}")]
    Route {
        /// Which table.
        table: usize,
        /// Its session.
        session: String,
        /// Why.
        #[source]
        source: wakeful_protocol::route::RouteError,
    },
    /// A route whose program cannot be run.
    #[error("[[wake]] table {table} (session {session}): {source}")]
    Program {
        /// Which table.
        table: usize,
        /// Its session.
        session: String,
        /// Why.
        #[source]
        source: wakeful_protocol::route::ProgramError,
    },
}

/// `[network]`: only a person editing this file can allow private
/// addresses; no flag or tool call can.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Network {
    /// CIDR blocks that network sources may connect to although they are
    /// loopback, private, link-local or otherwise non-public.
    pub allow: Vec<String>,
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not valid.
    #[error("{path} is invalid: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What the TOML parser said (with line and column).
        message: String,
    },
    /// The file's settings break the rules of [`Config::parse`].
    #[error("{path} is invalid: {source}")]
    Rules {
        /// The file.
        path: String,
        /// Which rule, and what to fix.
        #[source]
        source: Box<InvalidConfig>,
    },
}

impl Config {
    /// Loads `path`; a missing file means all defaults. Besides parsing, it
    /// checks that the programs of `[[wake]]` routes can be run (on this
    /// process's `PATH`).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.display().to_string(),
                    source,
                })
            }
        };
        Self::parse(&text)
            .and_then(|config| {
                config.check_wake_programs(std::env::var_os("PATH").as_deref())?;
                Ok(config)
            })
            .map_err(|source| ConfigError::Rules {
                path: path.display().to_string(),
                source: Box::new(source),
            })
    }

    /// Checks that each `[[wake]]` route's program (exec program, codex
    /// binary) is found on `path` (a `PATH` value) or, given with a `/`, is
    /// an executable file, and that its session cannot become an option of
    /// that program ([`wakeful_protocol::WakeAdapter::check_session`]).
    pub fn check_wake_programs(
        &self,
        path: Option<&std::ffi::OsStr>,
    ) -> Result<(), WakeTableError> {
        for (i, (session, route)) in self.wake_routes()?.iter().enumerate() {
            route
                .check_session(session)
                .map_err(|source| WakeTableError::Route {
                    table: i + 1,
                    session: session.clone(),
                    source,
                })?;
            route
                .check_programs(path)
                .map_err(|source| WakeTableError::Program {
                    table: i + 1,
                    session: session.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// Parses the text of a configuration file.
    pub fn parse(text: &str) -> Result<Config, InvalidConfig> {
        let config: Config = toml::from_str(text)?;
        if config.limits.max_active_per_session == 0 {
            return Err(InvalidConfig::MaxActive);
        }
        config.store.validate()?;
        config.wake_routes()?;
        regex::Regex::new(&config.view.error_regex).map_err(InvalidConfig::ErrorRegex)?;
        if let Some(cluster) = &config.cluster {
            cluster.validate()?;
        }
        Ok(config)
    }

    /// The `[[wake]]` tables as (session, route).
    pub fn wake_routes(
        &self,
    ) -> Result<Vec<(String, wakeful_protocol::WakeAdapter)>, WakeTableError> {
        self.wake
            .iter()
            .enumerate()
            .map(|(i, table)| {
                let mut table = table.clone();
                let session = match table.remove("session") {
                    Some(toml::Value::String(s)) if !s.is_empty() => s,
                    _ => return Err(WakeTableError::NoSession { table: i + 1 }),
                };
                let route: wakeful_protocol::WakeAdapter = toml::Value::Table(table)
                    .try_into()
                    .map_err(|source| WakeTableError::Table {
                        table: i + 1,
                        session: session.clone(),
                        source,
                    })?;
                route.validate().map_err(|source| WakeTableError::Route {
                    table: i + 1,
                    session: session.clone(),
                    source,
                })?;
                Ok((session, route))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(Config::parse("").unwrap(), Config::default());
        let c = Config::parse(
            "[limits]\nmax_active_per_session = 3\n[monitors]\ngrace_ms = 500\n[network]\nallow = [\"127.0.0.0/8\"]\n",
        )
        .unwrap();
        assert_eq!(c.limits.max_active_per_session, 3);
        assert_eq!(c.monitors.grace_ms, 500);
        assert_eq!(c.network.allow, ["127.0.0.0/8"]);
    }

    #[test]
    fn the_mcp_protocol_key_takes_the_three_modes_and_nothing_else() {
        for mode in ["auto", "2026-07-28", "2025-11-25"] {
            let c = Config::parse(&format!("[mcp]\nprotocol = \"{mode}\"\n")).unwrap();
            assert_eq!(c.mcp.protocol.unwrap().as_str(), mode);
        }
        assert_eq!(Config::parse("").unwrap().mcp.protocol, None);
        let e = Config::parse("[mcp]\nprotocol = \"2025-06-18\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("auto") && e.contains("2026-07-28"), "{e}");
    }

    #[test]
    fn wake_tables() {
        let c = Config::parse(
            "[[wake]]\nsession = \"s1\"\nadapter = \"exec\"\nargv = [\"notify-send\", \"{text}\"]\n\n[wake_options]\nauto_codex = false\n",
        )
        .unwrap();
        let routes = c.wake_routes().unwrap();
        assert_eq!(routes[0].0, "s1");
        assert_eq!(routes[0].1.name(), "exec");
        assert!(!c.wake_options.auto_codex);
        assert!(Config::parse("[[wake]]\nadapter = \"codex\"\n")
            .unwrap_err()
            .to_string()
            .contains("session"));
        assert!(Config::parse("[[wake]]\nsession = \"s\"\nadapter = \"pager\"\n").is_err());
    }

    #[test]
    fn wake_programs_must_be_found() {
        let c = Config::parse(
            "[[wake]]\nsession = \"s1\"\nadapter = \"exec\"\nargv = [\"sh\", \"-c\", \"true\"]\n\n[[wake]]\nsession = \"s2\"\nadapter = \"exec\"\nargv = [\"wakeful-no-such-program\", \"{text}\"]\n",
        )
        .unwrap();
        let path = std::ffi::OsStr::new("/usr/bin:/bin");
        let err = c.check_wake_programs(Some(path)).unwrap_err().to_string();
        assert!(
            err.contains("[[wake]] table 2 (session s2)")
                && err.contains("wakeful-no-such-program was not found on PATH"),
            "{err}"
        );
        let c = Config::parse(
            "[[wake]]\nsession = \"s\"\nadapter = \"codex\"\nbinary = \"/nonexistent/codex\"\n",
        )
        .unwrap();
        assert!(c
            .check_wake_programs(Some(path))
            .unwrap_err()
            .to_string()
            .contains("/nonexistent/codex"));
        // URLs are checked while parsing.
        let err =
            Config::parse("[[wake]]\nsession = \"s\"\nadapter = \"webhook\"\nurl = \"http://\"\n")
                .unwrap_err()
                .to_string();
        assert!(err.contains("not a usable URL"), "{err}");
    }

    #[test]
    fn view_error_regex() {
        assert_eq!(
            Config::default().view.error_regex,
            wakeful_protocol::view::DEFAULT_ERROR_REGEX
        );
        let c = Config::parse("[view]\nerror_regex = \"ERR|WARN\"\n").unwrap();
        assert_eq!(c.view.error_regex, "ERR|WARN");
        let err = Config::parse("[view]\nerror_regex = \"(\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("view.error_regex"), "{err}");
        assert!(Config::parse("[view]\ncolour = 1\n").is_err());
    }

    #[test]
    fn the_cluster_table() {
        assert_eq!(Config::parse("").unwrap().cluster, None);
        let c = Config::parse(
            "[cluster]\nurl = \"nats://127.0.0.1:4222\"\nhost = \"a\"\naccept_remote = true\n",
        )
        .unwrap();
        let cluster = c.cluster.unwrap();
        assert_eq!(cluster.host(), "a");
        assert!(cluster.accept_remote);
        let err = Config::parse("[cluster]\nhost = \"a\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("url"), "{err}");
        let err = Config::parse("[cluster]\nurl = \"nats://x:1\"\n[cluster.tls]\nkey = \"/k\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("both cert and key"), "{err}");
    }

    #[test]
    fn the_store_table() {
        let d = Config::parse("").unwrap().store;
        assert_eq!(d.max_age, Span::days(7));
        assert_eq!(d.output_max, ByteSize::mib(64));
        let c = Config::parse(
            "[store]\nmax_age = \"36h\"\nmax_size = \"500MiB\"\noutput_max = \"1MiB\"\noutput_total = \"100MiB\"\nkeep_free = \"10%\"\n",
        )
        .unwrap()
        .store;
        assert_eq!(c.max_age.0.as_secs(), 36 * 3600);
        assert_eq!(c.retention().max_size, 500 << 20);
        assert_eq!(c.output_caps().per_file, 1 << 20);
        assert_eq!(c.keep_free.bytes(1000 << 20), 100 << 20);
        let c = Config::parse("[store]\nkeep_free = 1048576\nmax_age = 60\n").unwrap();
        assert_eq!(c.store.keep_free.bytes(1 << 40), 1 << 20);
        assert_eq!(c.store.max_age.0.as_secs(), 60);
        for (bad, says) in [
            ("max_age = \"a week\"", "not a duration"),
            ("max_size = \"lots\"", "not a size"),
            ("keep_free = \"150%\"", "percentage"),
            ("output_max = \"1KiB\"", "at least 64KiB"),
            ("output_total = \"1MiB\"", "at least store.output_max"),
            ("max_size = \"512MiB\"", "at least store.output_total"),
            ("retention = \"7d\"", "retention"),
        ] {
            let err = Config::parse(&format!("[store]\n{bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn typos_are_errors() {
        let err = Config::parse("[limits]\nmax_active = 3\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_active"), "{err}");
        assert!(Config::parse("[limits]\nmax_active_per_session = 0\n").is_err());
    }
}
