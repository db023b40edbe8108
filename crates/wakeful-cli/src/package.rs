//! What a package needs: shell completions, man pages, and a systemd user
//! unit for those who want the daemon always up (it starts on demand
//! without one).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::{exit, Failure};

/// `wakeful completions SHELL`.
pub fn completions(shell: clap_complete::Shell) -> Result<u8, Failure> {
    let mut cmd = crate::cli::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "wakeful", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(0)
}

/// `wakeful man [--dir DIR]`: the main page on stdout, or a page per
/// command (wakeful.1, wakeful-start.1, wakeful-daemon-stop.1, …) in DIR.
pub fn man(dir: Option<&Path>, json: bool) -> Result<u8, Failure> {
    let mut cmd = crate::cli::Cli::command().disable_help_subcommand(true);
    cmd.build();
    let Some(dir) = dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut page)?;
        let mut out = std::io::stdout().lock();
        out.write_all(&page)?;
        out.flush()?;
        return Ok(0);
    };
    let cannot = |e: std::io::Error| {
        Failure::new(
            exit::FAILURE,
            format!("cannot write man pages to {}: {e}", dir.display()),
        )
    };
    std::fs::create_dir_all(dir).map_err(cannot)?;
    let mut written = Vec::new();
    let mut todo = vec![cmd];
    while let Some(cmd) = todo.pop() {
        todo.extend(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
        written.push(
            clap_mangen::Man::new(cmd)
                .generate_to(dir)
                .map_err(cannot)?,
        );
    }
    written.sort();
    if json {
        crate::render::print_json(&written)?;
    } else {
        for p in &written {
            outln!("{}", p.display())?;
        }
    }
    Ok(0)
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

/// The man pages a unit may cite.
const MAN_PAGES: [&str; 2] = ["wakeful", "wakeful-daemon"];

/// The man pages of [`MAN_PAGES`] that `man` finds now: a unit cites only
/// those (`systemd-analyze verify` fails on a `Documentation=man:` page
/// that is not installed, as after `cargo install`).
fn installed_man_pages() -> Vec<&'static str> {
    MAN_PAGES
        .into_iter()
        .filter(|page| {
            std::process::Command::new("man")
                .args(["-w", page])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect()
}

/// The text of `wakeful.service` for `exe` (with `home` as WAKEFUL_HOME),
/// citing the man pages `man_pages` (section 1) in `Documentation=`.
pub fn unit_text(exe: &Path, home: Option<&Path>, man_pages: &[&str]) -> String {
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
        let assignment = format!("WAKEFUL_HOME={}", home.display());
        // Environment= takes a quoted assignment; `%` is a specifier.
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
    text
}

/// The label of the launchd agent.
pub const LAUNCHD_LABEL: &str = "dev.wakeful.daemon";

/// Text escaped for an XML plist string.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The text of the launchd agent `dev.wakeful.daemon.plist` for `exe`
/// (with `home` as WAKEFUL_HOME), its stdout and stderr appended to
/// `log`: the macOS counterpart of [`unit_text`]. Started at login
/// (`RunAtLoad`), started again when it exits other than cleanly
/// (`KeepAlive.SuccessfulExit = false`), 2 s apart (`ThrottleInterval`);
/// launchd stops it with SIGTERM, and the daemon stops its monitors itself
/// (`ExitTimeOut` 30 s before SIGKILL).
pub fn launchd_plist(exe: &Path, home: Option<&Path>, log: &Path) -> String {
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
    text
}

fn wakeful_home() -> Result<Option<PathBuf>, Failure> {
    Ok(std::env::var_os("WAKEFUL_HOME")
        .filter(|h| !h.is_empty())
        .map(|h| std::path::absolute(PathBuf::from(h)))
        .transpose()?)
}

/// `wakeful daemon install --format systemd --print`: the unit on stdout.
pub fn unit_print() -> Result<u8, Failure> {
    let exe = std::env::current_exe()?;
    let home = wakeful_home()?;
    let text = unit_text(&exe, home.as_deref(), &installed_man_pages());
    std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes())?;
    Ok(0)
}

/// `wakeful daemon install --format launchd [--dir DIR] [--print]`.
pub fn launchd_install(dir: Option<PathBuf>, print: bool, json: bool) -> Result<u8, Failure> {
    let exe = std::env::current_exe()?;
    let home = wakeful_home()?;
    let state = wakeful_client::Paths::from_env()
        .map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?
        .state_dir;
    let text = launchd_plist(&exe, home.as_deref(), &state.join("launchd.log"));
    if print {
        std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes())?;
        return Ok(0);
    }
    let dir = dir
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join("Library").join("LaunchAgents"))
        })
        .ok_or_else(|| {
            Failure::new(
                exit::FAILURE,
                "cannot tell where launch agents go (HOME is not set); give --dir",
            )
        })?;
    let path = dir.join(format!("{LAUNCHD_LABEL}.plist"));
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&path, text))
        .map_err(|e| {
            Failure::new(
                exit::FAILURE,
                format!("cannot write {}: {e}", path.display()),
            )
        })?;
    if json {
        crate::render::print_json(&serde_json::json!({"agent": path}))?;
    } else {
        outln!("wrote {}", path.display())?;
        outln!(
            "load it: launchctl bootstrap gui/$(id -u) {}",
            path.display()
        )?;
        outln!("(stop a daemon started on demand first: wakeful daemon stop)")?;
    }
    Ok(0)
}

/// Where systemd looks for user units.
fn user_unit_dir() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("systemd").join("user"))
}

/// `wakeful daemon install [--dir DIR]`.
pub fn daemon_install(dir: Option<PathBuf>, json: bool) -> Result<u8, Failure> {
    let dir = dir.or_else(user_unit_dir).ok_or_else(|| {
        Failure::new(
            exit::FAILURE,
            "cannot tell where user units go (neither XDG_CONFIG_HOME nor HOME is set); give --dir",
        )
    })?;
    let exe = std::env::current_exe()?;
    let home = std::env::var_os("WAKEFUL_HOME")
        .filter(|h| !h.is_empty())
        .map(|h| std::path::absolute(PathBuf::from(h)))
        .transpose()?;
    let path = dir.join("wakeful.service");
    let pages = installed_man_pages();
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&path, unit_text(&exe, home.as_deref(), &pages)))
        .map_err(|e| {
            Failure::new(
                exit::FAILURE,
                format!("cannot write {}: {e}", path.display()),
            )
        })?;
    if json {
        crate::render::print_json(&serde_json::json!({"unit": path, "man_pages": pages}))?;
    } else {
        outln!("wrote {}", path.display())?;
        if pages.len() < MAN_PAGES.len() {
            outln!("(its Documentation= cites only the man pages man finds; install them with `wakeful man --dir ~/.local/share/man/man1` and run `wakeful daemon install` again to cite them)")?;
        }
        outln!("enable it: systemctl --user daemon-reload && systemctl --user enable --now wakeful.service")?;
        outln!("(stop a daemon started on demand first: wakeful daemon stop)")?;
    }
    Ok(0)
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
        let text = unit_text(Path::new("/b/wakeful"), Some(Path::new("/h/a b")), &[]);
        assert!(!text.contains("Documentation="), "{text}");
        let cited = unit_text(Path::new("/b/wakeful"), None, &MAN_PAGES);
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
}
