//! How a service manager keeps the daemon up from login: the systemd user
//! unit (`wakeful.service`) and, on macOS, the launchd agent
//! (`dev.wakeful.daemon.plist`). The daemon also starts on demand without
//! either; these are for persistent monitors that should be re-armed at
//! login. Both run `EXE daemon --foreground` and let the daemon stop its
//! monitors itself on SIGTERM (30 s before the manager kills it).
//!
//! [`ServiceFile`] says which file, what it holds and where it goes;
//! [`ServiceFile::install`] writes it. What to tell the user is the
//! caller's.

use std::path::{Path, PathBuf};

/// The label of the launchd agent (and the stem of its file name).
pub const LAUNCHD_LABEL: &str = "dev.wakeful.daemon";

/// The systemd unit's file name.
pub const UNIT_NAME: &str = "wakeful.service";

/// Which service manager's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    /// A systemd user unit.
    Systemd,
    /// A launchd agent (macOS).
    Launchd,
}

impl Manager {
    /// This system's own: launchd on macOS, systemd elsewhere.
    pub fn native() -> Self {
        if cfg!(target_os = "macos") {
            Manager::Launchd
        } else {
            Manager::Systemd
        }
    }

    /// Where this manager looks for a user's files, from the environment
    /// (`XDG_CONFIG_HOME` or `HOME` for systemd, `HOME` for launchd);
    /// `None` when it names no place.
    pub fn default_dir(self, env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
        let home = || env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        match self {
            Manager::Systemd => env("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .or_else(|| home().map(|h| h.join(".config")))
                .map(|c| c.join("systemd").join("user")),
            Manager::Launchd => home().map(|h| h.join("Library").join("LaunchAgents")),
        }
    }

    /// The file's name.
    pub fn file_name(self) -> String {
        match self {
            Manager::Systemd => UNIT_NAME.to_string(),
            Manager::Launchd => format!("{LAUNCHD_LABEL}.plist"),
        }
    }
}

/// A service file for one daemon.
#[derive(Debug, Clone)]
pub struct ServiceFile {
    /// Which manager reads it.
    pub manager: Manager,
    /// Its text.
    pub text: String,
}

/// A service file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {source}", path.display())]
pub struct InstallError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub source: std::io::Error,
}

impl ServiceFile {
    /// The systemd unit for `exe` (with `home` as `WAKEFUL_HOME`), citing
    /// the man pages `man_pages` (section 1) in `Documentation=`: only
    /// pages that are installed, since `systemd-analyze verify` fails on
    /// one that is not.
    pub fn systemd(exe: &Path, home: Option<&Path>, man_pages: &[&str]) -> Self {
        let mut text = String::from(
            "# Written by `wakeful daemon install`. The daemon also starts on demand\n\
             # without this unit; this keeps it up (and its persistent monitors) from login.\n\
             [Unit]\n\
             Description=wakeful daemon: monitors for AI coding agents\n",
        );
        if !man_pages.is_empty() {
            let cited: Vec<String> = man_pages.iter().map(|p| format!("man:{p}(1)")).collect();
            text.push_str(&format!("Documentation={}\n", cited.join(" ")));
        }
        text.push_str("\n[Service]\nType=simple\n");
        text.push_str(&format!(
            "ExecStart={} daemon --foreground\n",
            unit_word(&exe.display().to_string())
        ));
        if let Some(home) = home {
            // Environment= takes a quoted assignment; `%` is a specifier.
            let assignment = format!("WAKEFUL_HOME={}", home.display());
            text.push_str(&format!(
                "Environment=\"{}\"\n",
                assignment
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('%', "%%")
            ));
        }
        text.push_str(
            "Restart=on-failure\n\
             RestartSec=2\n\
             # SIGTERM to the daemon only: it stops its monitors itself (persistent ones are\n\
             # re-armed at the next start, the others end with daemon_stopped).\n\
             KillMode=mixed\n\
             TimeoutStopSec=30\n\
             \n\
             [Install]\n\
             WantedBy=default.target\n",
        );
        ServiceFile {
            manager: Manager::Systemd,
            text,
        }
    }

    /// The launchd agent for `exe` (with `home` as `WAKEFUL_HOME`), its
    /// stdout and stderr appended to `log`. Started at login (`RunAtLoad`),
    /// started again when it exits other than cleanly
    /// (`KeepAlive.SuccessfulExit = false`), 2 s apart
    /// (`ThrottleInterval`); `ExitTimeOut` 30 s between SIGTERM and SIGKILL.
    pub fn launchd(exe: &Path, home: Option<&Path>, log: &Path) -> Self {
        let mut text = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
             <!-- Written by `wakeful daemon install`. The daemon also starts on demand\n     \
             without this agent; this keeps it up (and its persistent monitors) from login. -->\n\
             <plist version=\"1.0\">\n<dict>\n",
        );
        text.push_str(&format!(
            "  <key>Label</key>\n  <string>{LAUNCHD_LABEL}</string>\n"
        ));
        text.push_str("  <key>ProgramArguments</key>\n  <array>\n");
        for arg in [exe.display().to_string().as_str(), "daemon", "--foreground"] {
            text.push_str(&format!("    <string>{}</string>\n", xml(arg)));
        }
        text.push_str("  </array>\n");
        if let Some(home) = home {
            text.push_str(&format!(
                "  <key>EnvironmentVariables</key>\n  <dict>\n    <key>WAKEFUL_HOME</key>\n    <string>{}</string>\n  </dict>\n",
                xml(&home.display().to_string())
            ));
        }
        let log = xml(&log.display().to_string());
        text.push_str(&format!(
            "  <key>RunAtLoad</key>\n  <true/>\n\
             \x20 <key>KeepAlive</key>\n  <dict>\n    <key>SuccessfulExit</key>\n    <false/>\n  </dict>\n\
             \x20 <key>ThrottleInterval</key>\n  <integer>2</integer>\n\
             \x20 <key>ExitTimeOut</key>\n  <integer>30</integer>\n\
             \x20 <key>ProcessType</key>\n  <string>Background</string>\n\
             \x20 <key>StandardOutPath</key>\n  <string>{log}</string>\n\
             \x20 <key>StandardErrorPath</key>\n  <string>{log}</string>\n\
             </dict>\n</plist>\n"
        ));
        ServiceFile {
            manager: Manager::Launchd,
            text,
        }
    }

    /// Writes the file into `dir` (made if missing) and says where.
    pub fn install(&self, dir: &Path) -> Result<PathBuf, InstallError> {
        let path = dir.join(self.manager.file_name());
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&path, &self.text))
            .map_err(|source| InstallError {
                path: path.clone(),
                source,
            })?;
        Ok(path)
    }
}

/// A word of a systemd unit's command line: quoted when it must be, with
/// `%` (specifiers) and `$` (variables) escaped.
fn unit_word(word: &str) -> String {
    let escaped = word
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%")
        .replace('$', "$$");
    if escaped.is_empty() || escaped.contains(|c: char| c.is_whitespace() || c == ';' || c == '\'')
    {
        format!("\"{escaped}\"")
    } else {
        escaped
    }
}

/// Text escaped for an XML plist string.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_words_are_quoted_and_escaped() {
        assert_eq!(unit_word("/usr/bin/wakeful"), "/usr/bin/wakeful");
        assert_eq!(
            unit_word("/opt/my tools/wakeful"),
            "\"/opt/my tools/wakeful\""
        );
        assert_eq!(unit_word("/x/100%/$HOME"), "/x/100%%/$$HOME");
        let text =
            ServiceFile::systemd(Path::new("/b/wakeful"), Some(Path::new("/h/a b")), &[]).text;
        assert!(!text.contains("Documentation="), "{text}");
        let cited = ServiceFile::systemd(
            Path::new("/b/wakeful"),
            None,
            &["wakeful", "wakeful-daemon"],
        )
        .text;
        assert!(
            cited.contains("Documentation=man:wakeful(1) man:wakeful-daemon(1)\n"),
            "{cited}"
        );
        assert!(
            text.contains("ExecStart=/b/wakeful daemon --foreground\n"),
            "{text}"
        );
        assert!(
            text.contains("Environment=\"WAKEFUL_HOME=/h/a b\"\n"),
            "{text}"
        );
        assert!(text.contains("Restart=on-failure\n"));
    }

    #[test]
    fn plist_strings_are_escaped() {
        let text = ServiceFile::launchd(
            Path::new("/Apps/a&b/wakeful"),
            Some(Path::new("/h/<x>")),
            Path::new("/s/launchd.log"),
        )
        .text;
        assert!(
            text.contains("<string>/Apps/a&amp;b/wakeful</string>"),
            "{text}"
        );
        assert!(text.contains("<string>/h/&lt;x&gt;</string>"), "{text}");
        assert!(text.contains("<string>/s/launchd.log</string>"), "{text}");
    }

    #[test]
    fn default_dirs_follow_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let home = env(&[("HOME", "/home/u")]);
        assert_eq!(
            Manager::Systemd.default_dir(home),
            Some(PathBuf::from("/home/u/.config/systemd/user"))
        );
        assert_eq!(
            Manager::Launchd.default_dir(home),
            Some(PathBuf::from("/home/u/Library/LaunchAgents"))
        );
        let xdg = env(&[("HOME", "/home/u"), ("XDG_CONFIG_HOME", "/cfg")]);
        assert_eq!(
            Manager::Systemd.default_dir(xdg),
            Some(PathBuf::from("/cfg/systemd/user"))
        );
        // A relative XDG_CONFIG_HOME is ignored, as the XDG spec says.
        let rel = env(&[("HOME", "/home/u"), ("XDG_CONFIG_HOME", "cfg")]);
        assert_eq!(
            Manager::Systemd.default_dir(rel),
            Some(PathBuf::from("/home/u/.config/systemd/user"))
        );
        assert_eq!(Manager::Launchd.default_dir(env(&[])), None);
    }

    #[test]
    fn install_writes_the_file_and_says_why_it_could_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = ServiceFile::systemd(Path::new("/b/wakeful"), None, &[]);
        let path = file.install(&dir.path().join("a/b")).unwrap();
        assert_eq!(path, dir.path().join("a/b/wakeful.service"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), file.text);
        // A file where the directory should be.
        let blocker = dir.path().join("blocker");
        std::fs::write(&blocker, "").unwrap();
        let e = file.install(&blocker).unwrap_err();
        assert_eq!(e.path, blocker.join("wakeful.service"));
        assert!(e.to_string().starts_with("cannot write "), "{e}");
    }
}
