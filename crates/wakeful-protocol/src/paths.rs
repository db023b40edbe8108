//! Where wakeful keeps its state, socket and configuration (docs/CONTRACT.md §7, §10).
//!
//! With `WAKEFUL_HOME` set, everything lives in that one directory. Without
//! it, the XDG base directories are used: state in `$XDG_STATE_HOME/wakeful`
//! (default `~/.local/state/wakeful`), the socket in
//! `$XDG_RUNTIME_DIR/wakeful` (default: the state directory), and the
//! configuration in `$XDG_CONFIG_HOME/wakeful/config.toml` (default
//! `~/.config/wakeful/config.toml`).

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The directories and files of one wakeful installation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// Database, output files, logs.
    pub state_dir: PathBuf,
    /// Holds the socket; mode 0700.
    pub runtime_dir: PathBuf,
    /// `config.toml`.
    pub config_file: PathBuf,
}

/// Why the paths cannot be determined or prepared.
#[derive(Debug, thiserror::Error)]
pub enum PathsError {
    /// Neither `WAKEFUL_HOME` nor `HOME` is set.
    #[error("cannot tell where to keep state: set WAKEFUL_HOME (or HOME)")]
    NoHome,
    /// A directory could not be created or secured.
    #[error("cannot prepare directory {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl Paths {
    /// From this process's environment.
    pub fn from_env() -> Result<Self, PathsError> {
        Self::from_vars(|k| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
    }

    /// From the given variable lookup (for tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<PathBuf>) -> Result<Self, PathsError> {
        if let Some(home) = var("WAKEFUL_HOME") {
            return Ok(Paths {
                state_dir: home.clone(),
                runtime_dir: home.clone(),
                config_file: home.join("config.toml"),
            });
        }
        let home = var("HOME").ok_or(PathsError::NoHome)?;
        let state_dir = var("XDG_STATE_HOME")
            .unwrap_or_else(|| home.join(".local/state"))
            .join("wakeful");
        let runtime_dir = var("XDG_RUNTIME_DIR")
            .map(|d| d.join("wakeful"))
            .unwrap_or_else(|| state_dir.clone());
        let config_file = var("XDG_CONFIG_HOME")
            .unwrap_or_else(|| home.join(".config"))
            .join("wakeful/config.toml");
        Ok(Paths {
            state_dir,
            runtime_dir,
            config_file,
        })
    }

    /// The daemon's socket.
    pub fn socket(&self) -> PathBuf {
        self.runtime_dir.join("wakeful.sock")
    }

    /// The lock that makes one daemon per state directory (so per
    /// database, whatever runtime directory its clients see).
    pub fn lock_file(&self) -> PathBuf {
        self.state_dir.join("daemon.lock")
    }

    /// Held by a daemon while it starts, until it accepts connections: a
    /// second daemon that waits for it knows the first one is ready.
    pub fn start_lock_file(&self) -> PathBuf {
        self.state_dir.join("daemon.start.lock")
    }

    /// Where the running daemon records its pid and socket, for clients
    /// that see another runtime directory (a different `XDG_RUNTIME_DIR`).
    pub fn daemon_info(&self) -> PathBuf {
        self.state_dir.join("daemon.json")
    }

    /// The SQLite database.
    pub fn database(&self) -> PathBuf {
        self.state_dir.join("wakeful.db")
    }

    /// Where monitors' output files go.
    pub fn output_dir(&self) -> PathBuf {
        self.state_dir.join("output")
    }

    /// The daemon's log (its stderr when started on demand).
    pub fn daemon_log(&self) -> PathBuf {
        self.state_dir.join("daemon.log")
    }

    /// Creates the state and runtime directories (mode 0700) and makes sure
    /// the runtime directory is not accessible to others.
    pub fn prepare(&self) -> Result<(), PathsError> {
        for dir in [&self.state_dir, &self.runtime_dir] {
            make_private_dir(dir)?;
        }
        Ok(())
    }
}

fn make_private_dir(dir: &Path) -> Result<(), PathsError> {
    let err = |source| PathsError::Dir {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(err)?;
    let meta = std::fs::metadata(dir).map_err(err)?;
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<PathBuf> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| PathBuf::from(v))
        }
    }

    #[test]
    fn wakeful_home_holds_everything() {
        let p = Paths::from_vars(vars(&[("WAKEFUL_HOME", "/w"), ("HOME", "/h")])).unwrap();
        assert_eq!(p.socket(), PathBuf::from("/w/wakeful.sock"));
        assert_eq!(p.config_file, PathBuf::from("/w/config.toml"));
        assert_eq!(p.database(), PathBuf::from("/w/wakeful.db"));
    }

    #[test]
    fn xdg_defaults() {
        let p = Paths::from_vars(vars(&[("HOME", "/h")])).unwrap();
        assert_eq!(p.state_dir, PathBuf::from("/h/.local/state/wakeful"));
        assert_eq!(p.runtime_dir, p.state_dir);
        assert_eq!(
            p.config_file,
            PathBuf::from("/h/.config/wakeful/config.toml")
        );
        let p =
            Paths::from_vars(vars(&[("HOME", "/h"), ("XDG_RUNTIME_DIR", "/run/user/1")])).unwrap();
        assert_eq!(
            p.socket(),
            PathBuf::from("/run/user/1/wakeful/wakeful.sock")
        );
    }

    #[test]
    fn prepare_secures_directories() {
        let d = tempfile_dir();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        let p = Paths {
            state_dir: d.join("s"),
            runtime_dir: d.clone(),
            config_file: d.join("c"),
        };
        p.prepare().unwrap();
        for dir in [&p.state_dir, &p.runtime_dir] {
            assert_eq!(
                std::fs::metadata(dir).unwrap().permissions().mode() & 0o777,
                0o700
            );
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("wakeful-paths-{}-{}", std::process::id(), line!()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
