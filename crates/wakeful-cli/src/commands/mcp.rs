//! `wakeful mcp`: which protocol era it speaks when the command line does not
//! say.

use wakeful_client::Paths;

use crate::{exit, Failure};

/// `[mcp] protocol` of config.toml, else `auto`. A file that cannot be
/// read or parsed is an error that names it (the daemon would refuse it
/// too).
pub(super) fn mcp_protocol_from_config(
    paths: &Paths,
) -> Result<wakeful_mcp::era::Protocol, Failure> {
    let path = &paths.config_file;
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => {
            return Err(Failure::new(
                exit::FAILURE,
                format!("cannot read {}: {e}", path.display()),
            ))
        }
    };
    let config = wakeful_daemon::config::Config::parse(&text).map_err(|e| {
        Failure::new(
            exit::USAGE,
            format!(
                "{}: {e}; fix it, or give `wakeful mcp --protocol`",
                path.display()
            ),
        )
    })?;
    config
        .mcp
        .protocol
        .map(|p| p.as_str().parse::<wakeful_mcp::era::Protocol>())
        .transpose()
        .map(Option::unwrap_or_default)
        .map_err(|e| Failure::new(exit::USAGE, e.to_string()))
}
