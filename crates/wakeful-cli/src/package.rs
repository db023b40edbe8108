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
        crate::commands::print_json(&written)?;
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

/// The text of `wakeful.service` for `exe` (with `home` as WAKEFUL_HOME).
pub fn unit_text(exe: &Path, home: Option<&Path>) -> String {
    let mut text = String::from(
        "# Written by `wakeful daemon install`. The daemon also starts on demand\n\
         # without this unit; this keeps it up (and its persistent monitors) from login.\n\
         [Unit]\n\
         Description=wakeful daemon: monitors for AI coding agents\n\
         Documentation=man:wakeful(1) man:wakeful-daemon(1)\n\
         \n\
         [Service]\n\
         Type=simple\n",
    );
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
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&path, unit_text(&exe, home.as_deref())))
        .map_err(|e| {
            Failure::new(
                exit::FAILURE,
                format!("cannot write {}: {e}", path.display()),
            )
        })?;
    if json {
        crate::commands::print_json(&serde_json::json!({"unit": path}))?;
    } else {
        outln!("wrote {}", path.display())?;
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
        let text = unit_text(Path::new("/b/wakeful"), Some(Path::new("/h/a b")));
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
