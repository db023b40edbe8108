//! `wakeful hook …`: the agents' hooks.

use wakeful_client::Paths;

use crate::cli::HookCommand;
use crate::{exit, Failure};

/// `wakeful hook …`: the hooks of [`wakeful_agents::claude_code`],
/// [`wakeful_agents::gemini`] and [`wakeful_agents::codex::hooks`]. A hook's
/// failures exit 1 (never 2, which Claude Code reads as "show this to the
/// model" and Gemini CLI and Codex as "block").
pub(super) async fn hook(
    paths: &Paths,
    session: Option<&str>,
    command: HookCommand,
) -> Result<u8, Failure> {
    use wakeful_agents::codex::hooks as codex;
    use wakeful_agents::{claude_code, gemini};
    let result = match command {
        HookCommand::Monitor { consumer } => claude_code::monitor(paths, session, &consumer).await,
        HookCommand::Rewake {
            consumer,
            timeout_ms,
        } => claude_code::rewake(paths, session, &consumer, timeout_ms).await,
        HookCommand::Stop { consumer } => claude_code::stop(paths, session, &consumer).await,
        HookCommand::SessionStart => claude_code::session_start(paths, session).await,
        HookCommand::GeminiSessionStart => gemini::session_start(paths, session).await,
        HookCommand::GeminiAfterTool { consumer } => {
            gemini::after_tool(paths, session, &consumer).await
        }
        HookCommand::GeminiAfterAgent { consumer } => {
            gemini::after_agent(paths, session, &consumer).await
        }
        HookCommand::CodexSessionStart => codex::session_start(paths, session).await,
        HookCommand::CodexStop { consumer } => codex::stop(paths, session, &consumer).await,
    };
    match result {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("wakeful hook: {}", Failure::from(e).message);
            Ok(exit::FAILURE)
        }
    }
}
