//! What a package needs: shell completions, man pages, and the service
//! file (systemd unit or launchd agent, written by `wakeful daemon
//! install`) for those who want the daemon always up (it starts on demand
//! without one).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use wakeful_daemon::service::{Manager, ServiceFile};

use crate::cli::ServiceFormat;
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

/// `wakeful daemon install [--format systemd|launchd] [--dir DIR] [--print]`:
/// the service file ([`wakeful_daemon::service`]) for this binary and
/// `WAKEFUL_HOME`, on stdout or written where its manager looks.
pub fn daemon_install(
    format: Option<ServiceFormat>,
    dir: Option<PathBuf>,
    print: bool,
    json: bool,
) -> Result<u8, Failure> {
    let manager = match format {
        Some(ServiceFormat::Launchd) => Manager::Launchd,
        Some(ServiceFormat::Systemd) => Manager::Systemd,
        None => Manager::native(),
    };
    let exe = std::env::current_exe()?;
    let home = std::env::var_os("WAKEFUL_HOME")
        .filter(|h| !h.is_empty())
        .map(|h| std::path::absolute(PathBuf::from(h)))
        .transpose()?;
    let (file, pages) = match manager {
        Manager::Systemd => {
            let pages = installed_man_pages();
            (ServiceFile::systemd(&exe, home.as_deref(), &pages), pages)
        }
        Manager::Launchd => {
            let paths = wakeful_client::Paths::from_env()
                .map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?;
            let log = paths.state_dir.join("launchd.log");
            (ServiceFile::launchd(&exe, home.as_deref(), &log), vec![])
        }
    };
    if print {
        std::io::stdout().lock().write_all(file.text.as_bytes())?;
        return Ok(0);
    }
    let dir = dir
        .or_else(|| manager.default_dir(|k| std::env::var(k).ok()))
        .ok_or_else(|| {
            Failure::new(
                exit::FAILURE,
                "cannot tell where the service file goes (HOME is not set); give --dir",
            )
        })?;
    let path = file.install(&dir).map_err(|e| {
        Failure::new(
            exit::FAILURE,
            format!("{e}; give --dir to write it elsewhere"),
        )
    })?;
    match manager {
        Manager::Systemd if json => {
            crate::render::print_json(&serde_json::json!({"unit": path, "man_pages": pages}))?;
        }
        Manager::Launchd if json => {
            crate::render::print_json(&serde_json::json!({"agent": path}))?;
        }
        Manager::Systemd => {
            outln!("wrote {}", path.display())?;
            if pages.len() < MAN_PAGES.len() {
                outln!("(its Documentation= cites only the man pages man finds; install them with `wakeful man --dir ~/.local/share/man/man1` and run `wakeful daemon install` again to cite them)")?;
            }
            outln!("enable it: systemctl --user daemon-reload && systemctl --user enable --now wakeful.service")?;
        }
        Manager::Launchd => {
            outln!("wrote {}", path.display())?;
            outln!(
                "load it: launchctl bootstrap gui/$(id -u) {}",
                path.display()
            )?;
        }
    }
    if !json {
        outln!("(stop a daemon started on demand first: wakeful daemon stop)")?;
    }
    Ok(0)
}
