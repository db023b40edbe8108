//! `wakeful web`: the live view in a browser.

use serde_json::json;
use wakeful_client::Paths;

use crate::render::print_json;
use crate::Failure;

/// `wakeful web`: serve until Ctrl-C or SIGTERM.
pub(super) async fn web(
    paths: Paths,
    options: wakeful_view::web::WebOptions,
    open: bool,
    json: bool,
) -> Result<u8, Failure> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let config = wakeful_view::load_config(&paths.config_file).map_err(view_failure)?;
    let errors = wakeful_view::error_regex(&config).map_err(view_failure)?;
    let running = wakeful_view::web::serve(paths, options, errors)
        .await
        .map_err(view_failure)?;
    if json {
        print_json(&json!({"url": running.url, "port": running.addr.port()}))?;
    } else {
        outln!("{}", running.url)?;
    }
    if open {
        // Best effort: a desktop may have no xdg-open.
        let child = std::process::Command::new("xdg-open")
            .arg(&running.url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match child {
            // Collected when it exits, so it leaves no zombie.
            Ok(mut child) => drop(std::thread::spawn(move || child.wait())),
            Err(e) => eprintln!("wakeful: could not run xdg-open ({e}); open the URL yourself"),
        }
    }
    tokio::select! {
        r = running.wait() => r.map(|()| 0).map_err(view_failure),
        _ = interrupt.recv() => Ok(0),
        _ = terminate.recv() => Ok(0),
    }
}

/// A view that could not run: usage (no terminal, bad `[view]`) exits 2.
pub(super) fn view_failure(e: wakeful_view::ViewError) -> Failure {
    let code = match e {
        wakeful_view::ViewError::NoTerminal | wakeful_view::ViewError::Config { .. } => {
            crate::exit::USAGE
        }
        _ => crate::exit::FAILURE,
    };
    Failure::new(code, e.to_string())
}
