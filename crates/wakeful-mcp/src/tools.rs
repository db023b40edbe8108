//! The tool list: names, descriptions that teach an agent how to watch well
//! (docs/CONTRACT.md §1), and the JSON schema of each tool's arguments ([`crate::args`]).

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::Value;

use crate::args::{
    MonitorEventsArgs, MonitorListArgs, MonitorStartArgs, MonitorStopArgs, MonitorWaitArgs,
    TerminalRunArgs,
};

/// `monitor_start`.
pub const MONITOR_START: &str = "monitor_start";
/// `monitor_list`.
pub const MONITOR_LIST: &str = "monitor_list";
/// `monitor_stop`.
pub const MONITOR_STOP: &str = "monitor_stop";
/// `monitor_events`.
pub const MONITOR_EVENTS: &str = "monitor_events";
/// `monitor_wait`.
pub const MONITOR_WAIT: &str = "monitor_wait";
/// `terminal_run`.
pub const TERMINAL_RUN: &str = "terminal_run";

const START_DESCRIPTION: &str = "\
Start a background monitor. wakeful runs `command` (sh -c, in its own process group) outside this conversation (or, instead of a command: follows a `file` like tail -F, reads a `ws` WebSocket, watches a `terminal`; with `every_ms` it runs the command periodically and reports only changes); every stdout line goes to the monitor's output file and lines that pass `filter` become events for this session. Events come to you by themselves (as <channel source=\"wakeful\"> messages in Claude Code, or from monitor_wait): do not poll, sleep or re-run the command to check on it.
How to watch well:
- Filter inside wakeful with `filter` (a regex), not with `| grep` in the command: grep, sed and awk without line buffering hold lines back for minutes, and silence is not success.
- Make the filter match failure signatures too, not only the success line, e.g. \"ready|listening|error|FAIL|panic|Traceback\". A command that dies is always reported by a `stopped` event with its exit code and last lines.
- For a job that should finish (build, test suite), use `until: \"exit\"`: one event when it ends, with the exit code and the last 20 lines. `until: \"match:<regex>\"` stops at the first matching line.
- Follow log files with `tail -F` (survives rotation), never `tail -f`; trigger on content, never on modification times.
- Give a `key` to anything you may start again. Starting with a key that an active monitor of this session holds returns that monitor (`already_running: true`) and starts no duplicate. After `[Monitor timed out — re-arm if needed.]`, re-arm by calling monitor_start again with the same key.
- Default timeout 300000 ms (1000–3600000); `persistent: true` for none (it also survives daemon restarts).
- A burst of more than 20 events is rate-limited: a `suppressed` event gives the number and output-file line range of the lines held back. Read them from the output file (`output_path`, complete and never rate-limited) instead of re-running the command.
- Wake on what matters: `wake_on: \"fail\"` (or `exit`, `match:<regex>`) records every event but wakes you only for those; the others come with the next one that wakes. `expect_within_ms` reports a monitor that went quiet (a `silent` event) without stopping it.
Returns {id, session, already_running, output_path, wake}. `wake.live: false` means nothing will wake you: call monitor_wait before ending your turn.";

const LIST_DESCRIPTION: &str = "\
List this session's monitors: active first, then those that ended within the last hour, with state, stop_reason, event and line counts, and output_path. `all_sessions: true` lists every session's. Use it to find an id or to check what runs before starting something; you do not need it to learn about new output, which comes as events.";

const STOP_DESCRIPTION: &str = "\
Stop an active monitor: its whole process group is ended (no orphaned `tail` or `grep`), and its final `stopped` event is written. Returns the ended monitor. An unknown or already ended id is an error. A monitor that timed out or exited needs no stop.";

const EVENTS_DESCRIPTION: &str = "\
Read this session's events with a seq greater than `after` (default 0: from the beginning), oldest first, at most `limit` (default 100). Read-only: nothing is acknowledged, so it is safe for catching up or re-reading. The result's `last_seq` is the `after` of the next call; `more: true` says there are more. Do not call it in a loop to wait for output: channel messages or monitor_wait bring new events.";

const WAIT_DESCRIPTION: &str = "\
Block until this session has an event that wakes (every event, unless its monitor was started with `wake_on`) that monitor_wait has not returned yet, then return it with the unreturned events before it and acknowledge them: each event is returned once. `all: true` also returns, at once, events that do not wake. Gives up after `timeout_ms` (default 50000, 0–600000; 0 checks without blocking) with `timed_out: true`. Use it when your client does not show <channel source=\"wakeful\"> messages (Codex, Gemini CLI, Qwen Code, …): after starting monitors, call monitor_wait instead of polling, sleeping or re-running commands. When `more: true`, call it again at once. Keep timeout_ms below your client's tool-call timeout (Codex: 60 s unless tool_timeout_sec is raised); the default stays below 120 s because Claude Code moves a tool call that runs longer to the background. A request with `_meta.progressToken` gets `notifications/progress` every 10 s while it waits, so a client whose timeout restarts on progress can wait longer. A request that declares the MCP tasks extension (MCP 2026-07-28: Claude Code, FastMCP) runs as a background task instead: the call returns at once, the client is told when events came, and the wait lasts `timeout_ms` or, without it, 6 hours.";

const TERMINAL_DESCRIPTION: &str = "\
Start a managed long-running command (a terminal: a dev server, a long build) outside this conversation and return its id (term-…) at once. With `until` (`exit`, `match:<regex>`, `after:<ms>`) a monitor is attached from the command's first byte, and it wakes you once: e.g. `{\"command\": \"make release-check\", \"until\": \"exit\"}` brings one event with the exit code and the last 20 lines. Attach more monitors with monitor_start `terminal: <id>` (at most 4 per terminal); stopping a monitor leaves the command running; when the command ends, its monitors end with its exit status. Returns {id, session, output_path, monitor_id, wake} (`wake.live: false`: nothing will wake you; call monitor_wait before ending your turn).";

/// What the `monitor_start` input schema says about its sources. JSON
/// Schema could say it with `oneOf`, but clients refuse tool schemas with a
/// top-level `oneOf`/`anyOf`/`allOf` (the Anthropic API among them), so the
/// rule is stated here and in each source's description, and the server
/// enforces it.
const START_SCHEMA_DESCRIPTION: &str = "Give exactly one source: `command` (with `every_ms` for a poll), `ws`, `file`, `terminal`, a timer (`in`, `at` or `cron`), or a process (`pid`). None, or more than one, is an error that starts nothing. `description` is always required.";

/// Adds a top-level `description` to an input schema.
fn described(schema: Arc<JsonObject>, description: &str) -> Arc<JsonObject> {
    let mut object = (*schema).clone();
    object.insert("description".into(), Value::from(description));
    Arc::new(object)
}

/// Every tool this server offers, in a stable order.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            MONITOR_START,
            START_DESCRIPTION,
            described(
                input_schema::<MonitorStartArgs>(&["description"]),
                START_SCHEMA_DESCRIPTION,
            ),
        )
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(true),
        ),
        Tool::new(
            MONITOR_LIST,
            LIST_DESCRIPTION,
            input_schema::<MonitorListArgs>(&[]),
        )
        .with_annotations(ToolAnnotations::new().read_only(true).open_world(false)),
        Tool::new(
            MONITOR_STOP,
            STOP_DESCRIPTION,
            input_schema::<MonitorStopArgs>(&["id"]),
        )
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(false),
        ),
        Tool::new(
            MONITOR_EVENTS,
            EVENTS_DESCRIPTION,
            input_schema::<MonitorEventsArgs>(&[]),
        )
        .with_annotations(ToolAnnotations::new().read_only(true).open_world(false)),
        Tool::new(
            MONITOR_WAIT,
            WAIT_DESCRIPTION,
            input_schema::<MonitorWaitArgs>(&[]),
        )
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
        Tool::new(
            TERMINAL_RUN,
            TERMINAL_DESCRIPTION,
            input_schema::<TerminalRunArgs>(&["command"]),
        )
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(true),
        ),
    ]
}

/// The input schema of `T`, in the plain form every MCP client accepts: an
/// object schema whose optional properties are simply not `required` (no
/// `"null"` types), without `$schema`, titles or integer formats, and with
/// `required` listing exactly `required`.
pub fn input_schema<T: JsonSchema>(required: &[&str]) -> Arc<JsonObject> {
    let schema = SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = Value::from(schema);
    simplify(&mut value);
    let mut object = match value {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    };
    object.remove("$schema");
    object.remove("title");
    object.remove("description");
    object.insert("type".into(), Value::from("object"));
    object
        .entry("properties")
        .or_insert_with(|| Value::Object(JsonObject::new()));
    object.remove("required");
    if !required.is_empty() {
        object.insert(
            "required".into(),
            Value::Array(required.iter().map(|r| Value::from(*r)).collect()),
        );
    }
    Arc::new(object)
}

fn simplify(value: &mut Value) {
    match value {
        Value::Object(o) => {
            if let Some(Value::Array(types)) = o.get("type") {
                let non_null: Vec<Value> = types
                    .iter()
                    .filter(|t| t.as_str() != Some("null"))
                    .cloned()
                    .collect();
                if non_null.len() == 1 {
                    o.insert("type".into(), non_null[0].clone());
                }
            }
            if o.get("type").and_then(Value::as_str) == Some("integer") {
                o.remove("format");
            }
            o.remove("title");
            for v in o.values_mut() {
                simplify(v);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(simplify),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_plain_objects() {
        for tool in tools() {
            let s = Value::Object(tool.input_schema.as_ref().clone());
            assert_eq!(s["type"], "object", "{}", tool.name);
            assert_eq!(s["additionalProperties"], false, "{}", tool.name);
            let text = s.to_string();
            assert!(!text.contains("null"), "{}: {text}", tool.name);
            assert!(!text.contains("uint"), "{}: {text}", tool.name);
        }
        let start = Value::Object(
            tools()
                .into_iter()
                .find(|t| t.name == MONITOR_START)
                .unwrap()
                .input_schema
                .as_ref()
                .clone(),
        );
        assert_eq!(start["properties"]["timeout_ms"]["minimum"], 1000);
        assert_eq!(start["properties"]["timeout_ms"]["maximum"], 3_600_000);
        assert_eq!(
            start["properties"]["stderr"]["enum"],
            serde_json::json!(["file", "events"])
        );
        // Exactly one source, of several fields: none of them is required,
        // and the schema says why.
        assert_eq!(start["required"], serde_json::json!(["description"]));
        assert!(start["description"]
            .as_str()
            .unwrap()
            .contains("exactly one source"));
        for source in ["command", "ws", "file", "terminal"] {
            assert!(start["properties"][source]["description"]
                .as_str()
                .unwrap()
                .starts_with("Source (one of command, ws, file, terminal)"));
        }
    }
}
