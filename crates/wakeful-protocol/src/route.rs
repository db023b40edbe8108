//! Wake routes: which adapter delivers a session's events to its agent,
//! with its options, and how those are checked.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A session's wake route: which adapter, with its options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "adapter", rename_all = "snake_case", deny_unknown_fields)]
pub enum WakeAdapter {
    /// A Codex thread, through the app-server control socket under
    /// `CODEX_HOME` (`thread/queue/add`, accepted when the turn carrying the
    /// wake starts), else `codex queue --thread <id> --message <text>`.
    Codex {
        /// The thread (default: the session name, which is `CODEX_THREAD_ID`
        /// for sessions detected inside Codex).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<String>,
        /// The `codex` executable for `codex queue` (default: `codex` on PATH).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binary: Option<PathBuf>,
        /// `CODEX_HOME` (default: the daemon's `$CODEX_HOME`, else
        /// `~/.codex`): the control socket's place, and `codex queue`'s.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        codex_home: Option<PathBuf>,
    },
    /// An OpenCode server: `POST {url}/session/{id}/prompt_async`.
    Opencode {
        /// The server, e.g. `http://127.0.0.1:4096`.
        url: String,
        /// The OpenCode session id (default: the wakeful session name).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        opencode_session: Option<String>,
        /// The project directory (`?directory=`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        directory: Option<String>,
    },
    /// Any command: an argv template whose elements may contain `{session}`,
    /// `{text}` and `{wake_id}`; each is substituted inside its one argument,
    /// never through a shell.
    Exec {
        /// The template; the first element is the program.
        argv: Vec<String>,
        /// Exit codes that mean "busy, retry later". Exit 0 is accepted;
        /// any other code is a failure (no retry).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        busy_exit_codes: Vec<i32>,
    },
    /// `POST` a JSON body `{wake_id, session, text, events}` to a URL.
    Webhook {
        /// The URL (http or https).
        url: String,
    },
}

impl WakeAdapter {
    /// The adapter's name.
    pub fn name(&self) -> &'static str {
        match self {
            WakeAdapter::Codex { .. } => "codex",
            WakeAdapter::Opencode { .. } => "opencode",
            WakeAdapter::Exec { .. } => "exec",
            WakeAdapter::Webhook { .. } => "webhook",
        }
    }

    /// Checks the options (before a route is stored). Pure: nothing is
    /// looked up; [`WakeAdapter::check_programs`] checks that the programs
    /// exist.
    pub fn validate(&self) -> Result<(), RouteError> {
        match self {
            WakeAdapter::Exec { argv, .. } if argv.is_empty() || argv[0].is_empty() => {
                Err(RouteError::NoProgram)
            }
            WakeAdapter::Exec {
                busy_exit_codes, ..
            } => match busy_exit_codes.iter().find(|c| !(1..=255).contains(*c)) {
                Some(&code) => Err(RouteError::BusyExitCode { code }),
                None => Ok(()),
            },
            WakeAdapter::Opencode { url, .. } | WakeAdapter::Webhook { url } => check_url(url),
            WakeAdapter::Codex {
                binary: Some(b), ..
            } if b.as_os_str().is_empty() => Err(RouteError::EmptyBinary),
            WakeAdapter::Codex { .. } => Ok(()),
        }
    }

    /// Checks that the route can carry `session` without it turning into
    /// an option of the program it runs: an exec argument that begins with
    /// `{session}` (or a codex route without `--thread`, whose thread is
    /// the session) and a session id that begins with `-` would hand the
    /// program `--help` or `--dangerously-skip-permissions` as an option.
    pub fn check_session(&self, session: &str) -> Result<(), RouteError> {
        if !session.starts_with('-') {
            return Ok(());
        }
        let refused = |how: &'static str| {
            Err(RouteError::SessionOption {
                session: session.to_string(),
                how,
            })
        };
        match self {
            WakeAdapter::Exec { argv, .. }
                if argv.iter().skip(1).any(|a| a.starts_with("{session}")) =>
            {
                refused("the exec route's {session} would put")
            }
            WakeAdapter::Codex { thread: None, .. } => refused("`codex queue --thread` would get"),
            _ => Ok(()),
        }
    }

    /// An exec route's arguments for one wake: `{session}`, `{wake_id}`
    /// and `{text}` replaced in each (never split, never through a shell).
    /// An argument whose template begins with a placeholder and whose value
    /// begins with `-` is refused: the program would read it as an option.
    pub fn exec_args(
        argv: &[String],
        session: &str,
        wake_id: &str,
        text: &str,
    ) -> Result<Vec<String>, RouteError> {
        let subst = |s: &str| {
            s.replace("{session}", session)
                .replace("{wake_id}", wake_id)
                .replace("{text}", text)
        };
        argv.iter()
            .enumerate()
            .map(|(i, template)| {
                let value = subst(template);
                let placed = PLACEHOLDERS.iter().any(|h| template.starts_with(h));
                if i > 0 && placed && !template.starts_with('-') && value.starts_with('-') {
                    let name = PLACEHOLDERS
                        .iter()
                        .find(|h| template.starts_with(*h))
                        .copied()
                        .unwrap_or("a placeholder");
                    return Err(RouteError::ArgumentOption {
                        index: i,
                        template: template.clone(),
                        placeholder: name,
                    });
                }
                Ok(value)
            })
            .collect()
    }

    /// Checks that the programs the route runs can be run: the exec
    /// program and the codex binary, searched in `path` (a `PATH` value)
    /// unless given with a `/`; a relative path is taken from the current
    /// directory. An exec program with a placeholder is not checked. Reads
    /// the file system, unlike [`WakeAdapter::validate`].
    pub fn check_programs(&self, path: Option<&OsStr>) -> Result<(), ProgramError> {
        match self {
            WakeAdapter::Exec { argv, .. } => match argv.first() {
                Some(p) if !PLACEHOLDERS.iter().any(|h| p.contains(h)) => {
                    find_program(Path::new(p), path).map(drop)
                }
                _ => Ok(()),
            },
            WakeAdapter::Codex { binary, .. } => {
                let program = binary.as_deref().unwrap_or(Path::new("codex"));
                find_program(program, path).map(drop).map_err(|e| {
                    if binary.is_none() {
                        ProgramError::NoCodex(Box::new(e))
                    } else {
                        e
                    }
                })
            }
            WakeAdapter::Opencode { .. } | WakeAdapter::Webhook { .. } => Ok(()),
        }
    }
}

impl WakeAdapter {
    /// The host and port a network adapter (opencode, webhook) talks to,
    /// for a reachability probe; `None` for the others or a URL that does
    /// not parse.
    pub fn endpoint(&self) -> Option<(String, u16)> {
        let url = match self {
            WakeAdapter::Opencode { url, .. } | WakeAdapter::Webhook { url } => url,
            _ => return None,
        };
        let uri: http::Uri = url.parse().ok()?;
        let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("https") {
                443
            } else {
                80
            });
        Some((host.to_string(), port))
    }
}

/// Why a wake route's options cannot be used ([`WakeAdapter::validate`],
/// [`WakeAdapter::check_session`], [`WakeAdapter::exec_args`]); each says
/// what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// An exec route without a program.
    #[error("the exec adapter needs a program: `wakeful wake set exec -- PROGRAM ARGS...`")]
    NoProgram,
    /// A busy exit code outside 1–255.
    #[error("busy exit code {code} cannot happen: an exit code that means busy is a number from 1 to 255 (0 means accepted)")]
    BusyExitCode {
        /// The code given.
        code: i32,
    },
    /// A codex route whose binary is the empty path.
    #[error("the codex binary is empty: give its path, or leave it out for `codex` on PATH")]
    EmptyBinary,
    /// An opencode or webhook URL that is not an http(s) URL with a host.
    #[error("`{url}` is not a usable URL: {why}; give an http:// or https:// URL with a host, e.g. http://127.0.0.1:4096")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// A session id beginning with `-` where the program reads options.
    #[error("session `{session}` begins with `-`: {how} it where the program reads options, so it could act as one; use a session id that does not begin with `-`")]
    SessionOption {
        /// The session id.
        session: String,
        /// Where the route would put it.
        how: &'static str,
    },
    /// An exec argument whose placeholder's value would begin with `-`.
    #[error("argument {index} of the exec route ({template}) would begin with `-` ({placeholder} begins with it) and the program could read it as an option; nothing was run")]
    ArgumentOption {
        /// The argument's index in the argv (the program is 0).
        index: usize,
        /// Its template.
        template: String,
        /// The placeholder it begins with.
        placeholder: &'static str,
    },
}

/// Why a program a route runs cannot be run ([`find_program`],
/// [`WakeAdapter::check_programs`]); each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    /// A path that cannot be looked at.
    #[error("cannot run {}: {source}", program.display())]
    Unreadable {
        /// The program's path.
        program: PathBuf,
        /// Why it cannot be looked at.
        #[source]
        source: std::io::Error,
    },
    /// A path that is a directory.
    #[error("cannot run {}: it is a directory", program.display())]
    Directory {
        /// The program's path.
        program: PathBuf,
    },
    /// A file without execute permission.
    #[error("cannot run {}: it is not executable (chmod +x {})", program.display(), program.display())]
    NotExecutable {
        /// The program's path.
        program: PathBuf,
    },
    /// A name found in no directory of `PATH`.
    #[error("{} was not found on PATH ({path}); install it, or give its path", program.display())]
    NotFound {
        /// The program's name.
        program: PathBuf,
        /// The `PATH` searched, or `PATH is not set`.
        path: String,
    },
    /// The default `codex` of a codex route is not found.
    #[error("{0}; install Codex, or give its path with --binary")]
    NoCodex(#[source] Box<ProgramError>),
}

/// What the exec adapter substitutes in its argv.
const PLACEHOLDERS: [&str; 3] = ["{session}", "{text}", "{wake_id}"];

/// An http or https URL with a host, parsed by a real URI parser.
fn check_url(url: &str) -> Result<(), RouteError> {
    let bad = |why: &str| {
        Err(RouteError::Url {
            url: url.to_string(),
            why: why.to_string(),
        })
    };
    let uri: http::Uri = match url.parse() {
        Ok(u) => u,
        Err(e) => return bad(&e.to_string()),
    };
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return bad(&format!("the scheme is {other}, not http or https")),
        None => return bad("it has no scheme"),
    }
    let Some(authority) = uri.authority() else {
        return bad("it has no host");
    };
    if authority.host().is_empty() {
        return bad("it has no host");
    }
    if authority.as_str().contains('@') {
        return bad("credentials in the URL are not accepted");
    }
    // The parser keeps a port it cannot read as none; look at it here.
    if let Some((_, port)) = authority.as_str().rsplit_once(':') {
        if !port.contains(']') && port.parse::<u16>().is_err() {
            return bad("the port is not a number from 0 to 65535");
        }
    }
    Ok(())
}

/// Where `program` is: itself when it holds a `/` (relative to the current
/// directory), else the first executable file of that name in the
/// directories of `path` (a `PATH` value; an empty entry is the current
/// directory). The error says what is wrong and what to do.
pub fn find_program(program: &Path, path: Option<&OsStr>) -> Result<PathBuf, ProgramError> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.as_os_str().as_encoded_bytes().contains(&b'/') {
        return match std::fs::metadata(program) {
            Err(source) => Err(ProgramError::Unreadable {
                program: program.to_path_buf(),
                source,
            }),
            Ok(_) if executable(program) => Ok(program.to_path_buf()),
            Ok(m) if m.is_dir() => Err(ProgramError::Directory {
                program: program.to_path_buf(),
            }),
            Ok(_) => Err(ProgramError::NotExecutable {
                program: program.to_path_buf(),
            }),
        };
    }
    let dirs: Vec<PathBuf> = path
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    dirs.iter()
        .map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".").join(program)
            } else {
                d.join(program)
            }
        })
        .find(|p| executable(p))
        .ok_or_else(|| ProgramError::NotFound {
            program: program.to_path_buf(),
            path: path
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|| "PATH is not set".into()),
        })
}
