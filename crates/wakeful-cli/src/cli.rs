//! The command-line grammar (docs/CONTRACT.md §7), with help and examples for every
//! command.

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};

use crate::monitor_args::{busy_exit_code, non_negative, MonitorArgs, SourceArgs};

/// The command line (its help text is the `about` below: clap prefers an
/// explicit `about` to this comment).
#[derive(Debug, Parser)]
#[command(
    name = "wakeful",
    version = crate::VERSION,
    about = "Monitors for AI coding agents: background watchers whose output lines become events that wake the agent.",
    long_about = "Monitors for AI coding agents.\n\nA daemon (started on demand) owns background watchers; every line they print goes to an output file, and lines that pass a monitor's filter become events in a durable, ordered log. Agents read the log with `wait` (block until something happens), `events`, `watch`, or the MCP server.\n\nState lives in $WAKEFUL_HOME when set, else in the XDG directories (~/.local/state/wakeful, $XDG_RUNTIME_DIR/wakeful, ~/.config/wakeful/config.toml).",
    after_help = "Examples:\n  wakeful watch --until exit -- cargo test          # run, print, exit with its code\n  wakeful start -d 'api errors' --filter 'ERROR|panic' -- tail -F api.log\n  wakeful wait --timeout-ms 600000                  # block until the session has new events\n  wakeful list\n  wakeful stop mon-abc123\n\nExit codes: 0 ok · 1 failure · 2 invalid input · 3 not found · 4 limit exceeded · 124 wait timed out · 141 stdout closed by its reader (`| head`), said nothing"
)]
pub struct Cli {
    /// Machine-readable output (event streams: one JSON object a line).
    #[arg(long, global = true)]
    pub json: bool,
    /// The session [default: $WAKEFUL_SESSION, $CLAUDE_CODE_SESSION_ID, $CODEX_THREAD_ID, "default"].
    #[arg(long, global = true, value_name = "SESSION")]
    pub session: Option<String>,
    // No doc comment: clap would read one as help text.
    #[allow(missing_docs)]
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a monitor in the daemon (a command, or --ws, --file, --every, --terminal); print its id.
    #[command(
        after_help = "Examples:\n  wakeful start -d 'build' --until exit -- make -j8\n  wakeful start -d 'test failures' --filter 'FAIL|panicked' --timeout-ms 900000 -- cargo test\n  wakeful start -d 'dev server' --key devserver --persistent -- npm run dev\n  wakeful start -d 'api errors' --filter 'ERROR|panic' --file /var/log/api.log\n  wakeful start -d 'deploy status' --every 30000 -- curl -fsS https://example.com/status\n  wakeful start -d 'ticker' --ws wss://example.com/feed --protocol v1\n  wakeful start -d 'build done' --terminal term-abc --until exit"
    )]
    Start {
        #[command(flatten)]
        monitor: MonitorArgs,
        #[command(flatten)]
        source: SourceArgs,
        /// Start it on this host of the cluster ([cluster] in config.toml,
        /// docs/CLUSTER.md); that host must have `accept_remote = true`. Its
        /// events come back here. Refused: exit 2; unreachable: exit 1.
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
        /// The shell command (run with `sh -c`); not with --ws, --file, --terminal.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Start a monitor (or re-attach to the one holding --key) and print its
    /// events until it ends; exits with the command's exit code.
    #[command(
        after_help = "Exit codes (how the monitor ended):\n  N      the command exited with code N (0 for 0)\n  128+N  the command was killed by signal N\n  124    timeout or idle timeout ([Monitor timed out — re-arm if needed.])\n  143    the monitor was stopped (wakeful stop, session end, daemon stop), or watch got SIGTERM\n  130    watch got SIGINT (Ctrl-C)\n  141    the reader of watch's output went away\n  1      the source failed (cannot start, file directory missing, connection refused), a WebSocket closed with a code other than 1000/1001 or sent a frame too large\n  0      --until match or after met, --max-events reached, a WebSocket closed normally (1000/1001)\nOn Ctrl-C, SIGTERM or a closed stdout the monitor is stopped, unless it has a --key or is --persistent (then watch only detaches).\nPlain output: the command's lines, one a line, without control characters or escape sequences; other events as \"[wakeful] <text>\"; --json gives the text exactly.\n\nExamples:\n  wakeful watch --until exit -- cargo build --release\n  wakeful watch -d 'errors' --filter 'error|warning' -- cargo build\n  wakeful watch --key logs --persistent -- tail -F app.log   # as a Claude Code Monitor command"
    )]
    Watch {
        #[command(flatten)]
        monitor: MonitorArgs,
        #[command(flatten)]
        source: SourceArgs,
        /// The shell command (run with `sh -c`); not with --ws, --file, --terminal.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Start a managed command (a terminal); print its id at once. With
    /// --until, also attach a monitor that wakes the session once.
    #[command(
        after_help = "Examples:\n  wakeful run --until exit -- make release-check   # one wake, with the exit code and last lines\n  wakeful run -- npm run dev                        # then: wakeful start --terminal term-… --filter error\n  wakeful run --until 'match:listening on' -- ./server"
    )]
    Run {
        /// Attach a monitor that stops on `exit`, `match:REGEX` or `after:MS`.
        #[arg(long, value_name = "exit|match:RE|after:MS")]
        until: Option<wakeful_core::Until>,
        /// The attached monitor's description (default: the command).
        #[arg(long, short = 'd')]
        description: Option<String>,
        /// The shell command (run with `sh -c`).
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Check a Claude Code plugin's monitors (a plugin directory or a
    /// monitors.json file): errors exit 2, warnings alone exit 0.
    #[command(
        after_help = "Checks what `claude plugin validate` skips: monitors.json's strict schema, `when`, unique names, paths, ${user_config.*}, and lints for monitors that go silently deaf (unbuffered grep/sed/awk in pipelines, head -n/grep -m one-shots, tail -f, success-only filters, mtime triggers, unquoted ${CLAUDE_PLUGIN_ROOT}, trailing &, skill names without the plugin namespace).\n\nExamples:\n  wakeful validate ./my-plugin\n  wakeful validate --json ./my-plugin/monitors/monitors.json"
    )]
    Validate {
        /// A plugin directory or a monitors.json file.
        path: std::path::PathBuf,
    },
    /// Run a Claude Code plugin's monitors for any agent.
    #[command(
        subcommand,
        after_help = "Examples:\n  wakeful plugin start ./my-plugin\n  wakeful plugin skill ./my-plugin my-plugin:debug"
    )]
    Plugin(PluginCommand),
    /// Terminals started with `wakeful run`.
    #[command(
        subcommand,
        after_help = "Examples:\n  wakeful terminal list\n  wakeful terminal output term-4k2x9q0abc --follow\n  wakeful terminal kill term-4k2x9q0abc"
    )]
    Terminal(TerminalCommand),
    /// How the session's events wake its agent (a new turn) when nobody is
    /// reading them: Codex, OpenCode, any command, a webhook.
    #[command(
        subcommand,
        after_help = "Examples:\n  wakeful wake set codex --thread \"$CODEX_THREAD_ID\"\n  wakeful wake set exec -- notify-send wakeful {text}\n  wakeful wake show --json\n  wakeful wake clear"
    )]
    Wake(WakeCommand),
    /// List monitors: active first, then those that ended in the last hour.
    #[command(
        after_help = "Examples:\n  wakeful list\n  wakeful list --all-sessions --json\n  wakeful list --all-hosts          # every host of the cluster (docs/CLUSTER.md)"
    )]
    List {
        /// Every session's monitors, not only this session's.
        #[arg(long)]
        all_sessions: bool,
        /// The monitors of every host of the cluster, as each host last
        /// published them (needs [cluster] in config.toml).
        #[arg(long)]
        all_hosts: bool,
    },
    /// Consumers of the session's events: where each acknowledged up to, how
    /// many events it has not acknowledged, and how many waiters it has now.
    #[command(
        after_help = "Consumers are named readers with a durable cursor: `default` (wakeful wait), `mcp` (monitor_wait), `claude` (the Claude Code plugin), `wake` (wake routes), or any --consumer NAME.\n\nExamples:\n  wakeful consumers\n  wakeful consumers --all-sessions --json"
    )]
    Consumers {
        /// Every session's consumers.
        #[arg(long)]
        all_sessions: bool,
    },
    /// Stop an active monitor (its whole process group).
    #[command(
        after_help = "Exit code 3 when the id is unknown or the monitor already ended.\n\nExample:\n  wakeful stop mon-4k2x9q0abc"
    )]
    Stop {
        /// The monitor id.
        id: String,
    },
    /// Print the session's events (read-only: no cursor moves).
    #[command(
        after_help = "Plain output: \"<seq> <monitor-id> <text>\" a line (newlines in text shown as \\n, control characters and escape sequences removed); --json gives the text exactly.\n\nExamples:\n  wakeful events\n  wakeful events --after 120 --follow --json"
    )]
    Events {
        /// Only events with a seq greater than this.
        #[arg(long, value_name = "SEQ", default_value_t = 0, value_parser = non_negative, allow_negative_numbers = true)]
        after: u64,
        /// Keep printing new events as they come.
        #[arg(long)]
        follow: bool,
    },
    /// Block until the session has an event that wakes (see --wake-on) this
    /// consumer has not acknowledged; print it with the unacknowledged events
    /// before it and acknowledge them.
    #[command(
        after_help = "Exit code 124 when --timeout-ms passes with nothing to return.\nEvents of monitors started with --wake-on exit|fail|match:RE that do not wake are handed out with the next event that wakes; --all hands them out at once.\nPlain output as `wakeful events`: \"<seq> <monitor-id> <text>\" a line, sanitized; --json gives the text exactly.\nWith --follow it keeps going: a lossless stream (re-run after a disconnect and nothing is missed or repeated).\n\nExamples:\n  wakeful wait --timeout-ms 600000\n  wakeful wait --consumer ci --json\n  wakeful wait --follow              # one line per event, forever\n  wakeful wait --monitor mon-4k2x9q0abc --timeout-ms 540000   # a subagent waiting for its own monitor"
    )]
    Wait(WaitArgs),
    /// Print a monitor's output file (every line, never rate-limited).
    #[command(
        after_help = "Each line is printed without control characters or escape sequences (one printed line per line of the file); --raw prints the bytes as they are.\n\nExamples:\n  wakeful output mon-4k2x9q0abc\n  wakeful output mon-4k2x9q0abc --from-line 120 --to-line 180\n  wakeful output mon-4k2x9q0abc --follow\n  wakeful output mon-4k2x9q0abc --raw > build.log   # byte-exact copy"
    )]
    Output {
        /// The monitor id.
        id: String,
        #[command(flatten)]
        range: LineRange,
    },
    /// Session commands.
    #[command(subcommand, after_help = "Example:\n  wakeful session end my-session")]
    Session(SessionCommand),
    /// Daemon facts: pid, version, socket, state directory, monitor counts,
    /// and the cluster link when there is one.
    #[command(after_help = "Example:\n  wakeful status --json")]
    Status,
    /// The cluster of hosts ([cluster] in config.toml, docs/CLUSTER.md).
    #[command(subcommand, after_help = "Example:\n  wakeful cluster status")]
    Cluster(ClusterCommand),
    /// Remove ended monitors past `[store] max_age` (events, rows, output
    /// files), then what the size caps call for, oldest first, and give the
    /// space back. The daemon does this by itself; this does it now.
    #[command(
        after_help = "Running monitors are never pruned, nor events younger than max_age while the store is within max_size (docs/STORAGE.md). Every prune is logged, shown by `wakeful status`, and kept as a record that `wakeful export` includes.\n\nExamples:\n  wakeful prune --dry-run   # what would go\n  wakeful prune\n  wakeful prune --json"
    )]
    Prune {
        /// Only say what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Will a wake reach this session's agent? Checks the daemon, the state
    /// directory, what is attached to the session, the wake route's target
    /// and the Claude Code plugin, and prints a fix for each problem.
    #[command(
        after_help = "Exit 0 only when a wake would arrive now (a waiter, the Claude Code plugin, an MCP client that shows channel notifications, or a working wake route whose target can take it) and no check found a problem; 1 otherwise.\n\nExamples:\n  wakeful doctor\n  wakeful doctor --session my-agent --json\n  wakeful doctor --selftest   # the guarantees, proved on this machine (exit 0 held, 1 failed, 3 limit)"
    )]
    Doctor {
        /// Prove wakeful's guarantees on this machine instead: a scratch
        /// daemon of its own in a temporary state directory (the user's is
        /// never touched), a table of guarantee, result and how it was
        /// checked. Exit 0 when every guarantee held, 1 when one failed, 3
        /// when one is only a limit here or could not be checked.
        #[arg(long)]
        selftest: bool,
    },
    /// What an agent coming back (a new, resumed or compacted session) should
    /// know: the session's running monitors, those that ended since it last
    /// saw their events, and how to read them.
    #[command(
        after_help = "Prints nothing when no monitor runs and none ended unseen. --json gives the digest's fields.\n\nExample:\n  wakeful digest --session my-agent"
    )]
    Digest,
    /// Run the daemon (normally started on demand by any command).
    #[command(
        after_help = "Examples:\n  wakeful daemon               # start it in the background if it is not running\n  wakeful daemon --foreground  # run it in this terminal\n  wakeful daemon stop"
    )]
    Daemon(DaemonArgs),
    /// Live terminal view of monitors and events: a table with activity
    /// sparklines, a following events pane, search, stop in place.
    #[command(
        after_help = "Read-only: it never acknowledges, so it never takes an event from an agent. It stays open when every monitor ended and reconnects after a daemon restart (no gap, no duplicate). Press ? inside for the keys; [view] error_regex in config.toml sets what `e` jumps to.\n\nExamples:\n  wakeful tui\n  wakeful tui --session my-agent\n  wakeful tui --all-sessions"
    )]
    Tui {
        /// Every session's monitors and events.
        #[arg(long, conflicts_with = "session")]
        all_sessions: bool,
    },
    /// Live view in a browser: sessions, monitors with activity sparklines,
    /// events as they come, output files, stop; served on 127.0.0.1 only.
    #[command(
        after_help = "Prints http://127.0.0.1:PORT/?token=…: open it (the token is good once: it becomes a separate session in an HttpOnly cookie named after the port; requests without it get 401, a foreign Host header 403, a stop or an API request from another origin, another port of localhost included, 403; see docs/SECURITY.md). Read-only but for the stop button: it never acknowledges. Runs until Ctrl-C.\n\nExamples:\n  wakeful web --open\n  wakeful web --port 8765"
    )]
    Web {
        /// The port on 127.0.0.1 (0: any free port).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Open the URL with xdg-open (when there is one).
        #[arg(long)]
        open: bool,
        /// Close a browser connection whose writes made no progress for this long.
        #[arg(long, hide = true, default_value_t = 10_000)]
        write_deadline_ms: u64,
        /// Comment on an idle event stream this often.
        #[arg(long, hide = true, default_value_t = 15_000)]
        keep_alive_ms: u64,
        /// Recent events kept in memory for browsers.
        #[arg(long, hide = true, default_value_t = 20_000)]
        ring: usize,
    },
    /// The agent an ACP editor (Zed, JetBrains) launches: runs AGENT_COMMAND,
    /// forwards every message, and prompts the idle session with its events.
    #[command(
        name = "acp-proxy",
        after_help = "Started by an editor, not by hand. See docs/agents/acp.md.\nThe agent gets WAKEFUL_SESSION (this proxy's session: --session, else acp-<random>), so monitors its shell starts land in it; --wake-on becomes the default --wake-on of those monitors (WAKEFUL_WAKE_ON).\nWhen the editor closes stdin the agent's stdin is closed, and after 3 s its process group is ended (SIGTERM, SIGKILL 2 s later); exit 0.\n\nExamples:\n  wakeful acp-proxy -- npx -y @zed-industries/codex-acp\n  wakeful acp-proxy --wake-on fail -- claude-agent-acp"
    )]
    AcpProxy {
        /// Default `--wake-on` of the monitors the agent starts.
        #[arg(long, value_name = "any|exit|fail|match:RE")]
        wake_on: Option<wakeful_core::WakeOn>,
        /// The agent's command and its arguments (run directly, not through a shell).
        #[arg(last = true, required = true, value_name = "AGENT_COMMAND")]
        agent: Vec<String>,
    },
    /// MCP server on stdin/stdout (tools monitor_*, Claude Code channel push).
    #[command(
        after_help = "Started by an MCP client, not by hand. See docs/agents/mcp.md.\n\nProtocol (--protocol, else WAKEFUL_MCP_PROTOCOL, else [mcp] protocol in config.toml):\n  auto        (default) MCP 2026-07-28 for clients that declare the tasks extension (monitor_wait runs as a background task that wakes the client when it ends), Claude Code included; the legacy handshake (initialize, channel push) for a Claude Code started with --channels or --dangerously-load-development-channels, and for the other clients\n  2026-07-28  always MCP 2026-07-28 when the client probes with server/discover (Claude Code then has no channel)\n  2025-11-25  only the revisions with initialize (2024-11-05 to 2025-11-25)\n\nExamples:\n  claude mcp add wakeful -- wakeful mcp\n  .mcp.json: {\"mcpServers\": {\"wakeful\": {\"command\": \"wakeful\", \"args\": [\"mcp\"]}}}\n  wakeful mcp --session my-agent       # events of that session\n  wakeful mcp --protocol 2025-11-25    # the legacy handshake only"
    )]
    Mcp {
        /// Which MCP revisions to serve: auto, 2026-07-28 or 2025-11-25.
        #[arg(
            long,
            env = "WAKEFUL_MCP_PROTOCOL",
            value_name = "auto|2026-07-28|2025-11-25"
        )]
        protocol: Option<wakeful_mcp::era::Protocol>,
    },
    /// Hooks and the monitor of the Claude Code plugin (integrations/claude-code):
    /// they bring the session's events to Claude, each once (consumer `claude`).
    #[command(
        subcommand,
        after_help = "Run by the Claude Code plugin (integrations/claude-code), not by hand.\n\nExamples:\n  wakeful hook monitor                       # the plugin monitor: one line per event\n  echo '{\"session_id\":\"S\"}' | wakeful hook stop"
    )]
    Hook(HookCommand),
    /// Set wakeful up for an agent.
    #[command(subcommand, after_help = "Example:\n  wakeful integrate claude-code")]
    Integrate(IntegrateCommand),
    /// Export the session's events (or one monitor's): JSON Lines to keep,
    /// share, import and replay; OpenTelemetry (OTLP/JSON) traces and logs;
    /// or an asciicast recording of a monitor's output.
    #[command(
        after_help = "Formats:\n  jsonl      a header line, the events exactly as `events --json` prints them, then one {\"monitor\": …} line per monitor (docs/EXPORT.md); `wakeful import` and `wakeful replay` read it\n  otlp       two lines: an OTLP/JSON ExportTraceServiceRequest (one span per monitor) and an ExportLogsServiceRequest (one log record per event, in its monitor's span); the session is gen_ai.conversation.id\n  asciicast  one monitor's output lines as an asciicast v2 recording with the recorded timing (`asciinema play FILE`)\n\nExamples:\n  wakeful export -o session.jsonl\n  wakeful export --monitor mon-4k2x9q0abc --since 2h -o incident.jsonl\n  wakeful export --format otlp --otlp-endpoint http://127.0.0.1:4318\n  wakeful export --format asciicast --monitor mon-4k2x9q0abc -o build.cast && asciinema play build.cast"
    )]
    Export {
        /// Only this monitor's events (its session, whatever --session says).
        #[arg(long, value_name = "ID")]
        monitor: Option<String>,
        /// Only events at or after TIME: RFC 3339 (2026-11-30T12:00:00Z) or
        /// a duration ago (90s, 30m, 2h, 7d).
        #[arg(long, value_name = "TIME", value_parser = parse_since)]
        since: Option<chrono::DateTime<chrono::Utc>>,
        /// What to write.
        #[arg(long, value_enum, default_value = "jsonl")]
        format: ExportFormat,
        /// Write to FILE instead of stdout.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<std::path::PathBuf>,
        /// With --format otlp: post to an OpenTelemetry collector at URL over
        /// OTLP/HTTP (JSON to URL/v1/traces and URL/v1/logs) instead of
        /// printing (unless -o is given too). Private and loopback addresses
        /// only as `[network] allow` in config.toml permits.
        #[arg(long, value_name = "URL")]
        otlp_endpoint: Option<String>,
    },
    /// Load a `wakeful export --format jsonl` file into this state directory
    /// (through the daemon; importing twice stores nothing twice).
    #[command(
        after_help = "Each event gets this log's next seq and keeps everything else; its origin (exporting host and seq) is stored, so an event is imported once. Its monitors are listed as ended. Events of this directory's own monitors are passed over.\n\nExamples:\n  wakeful import session.jsonl\n  WAKEFUL_HOME=/tmp/review wakeful import incident.jsonl && WAKEFUL_HOME=/tmp/review wakeful events --session s1"
    )]
    Import {
        /// The file (`-` for stdin).
        file: std::path::PathBuf,
    },
    /// Re-emit an exported monitor's lines into the session as a new
    /// monitor (source kind `replay`), with the recorded timing divided by
    /// --speed: rehearse an agent's reaction to a real incident offline.
    #[command(
        after_help = "The replay is a monitor like any other: its filter, --until, batching and rate limit apply, its lines go to its output file, it wakes the session's agent. Every event it emits carries \"replayed\": true, and its started event names the recorded monitor and when it ran. It ends the way the recording ended (e.g. exit code 1), at the recorded time.\n\nExamples:\n  wakeful replay incident.jsonl\n  wakeful replay session.jsonl --monitor mon-4k2x9q0abc --speed 10 --session rehearsal\n  wakeful replay incident.jsonl --filter 'ERROR|panic' --json"
    )]
    Replay {
        /// A `wakeful export --format jsonl` file.
        file: std::path::PathBuf,
        /// The monitor to replay (needed when the file holds several).
        #[arg(long, value_name = "ID")]
        monitor: Option<String>,
        /// How much faster than recorded (1: as recorded; 0.01–1000).
        #[arg(long, value_name = "X", default_value_t = 1.0)]
        speed: f64,
        /// The replay monitor's description [default: "replay of <recorded description>"].
        #[arg(long, short = 'd')]
        description: Option<String>,
        /// Only lines matching this regex become events.
        #[arg(long, value_name = "REGEX")]
        filter: Option<String>,
        /// Stop after this many milliseconds [default: long enough for the recording at this speed, up to 3600000].
        #[arg(long, value_name = "MS", value_parser = non_negative, allow_negative_numbers = true)]
        timeout_ms: Option<u64>,
    },
    /// Print a shell completion script.
    #[command(
        after_help = "Setup:\n  bash:  wakeful completions bash > ~/.local/share/bash-completion/completions/wakeful\n  zsh:   wakeful completions zsh > ~/.zfunc/_wakeful   # with fpath+=~/.zfunc before compinit\n  fish:  wakeful completions fish > ~/.config/fish/completions/wakeful.fish"
    )]
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the man page, or write one page per command to a directory.
    #[command(
        after_help = "Examples:\n  wakeful man | man -l -\n  wakeful man --dir ~/.local/share/man/man1 && man wakeful-watch"
    )]
    Man {
        /// Write wakeful.1 and a page per subcommand (wakeful-start.1, …) here.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

/// What `wakeful daemon install` writes (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServiceFormat {
    /// A systemd user unit.
    Systemd,
    /// A launchd agent plist.
    Launchd,
}

/// What `wakeful export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// JSON Lines: header, events, monitor records.
    Jsonl,
    /// OTLP/JSON traces and logs.
    Otlp,
    /// An asciicast v2 recording of one monitor's output.
    Asciicast,
}

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Start the plugin's `when: "always"` monitors as persistent monitors
    /// (idempotent: keyed by plugin and monitor name).
    #[command(
        after_help = "The command gets CLAUDE_PLUGIN_ROOT, CLAUDE_PLUGIN_DATA (a data directory under the state directory) and CLAUDE_PROJECT_DIR (the current directory) as environment variables, expanded by the shell; nothing is spliced into the command text.\n\nExample:\n  wakeful plugin start ~/.claude/plugins/my-plugin"
    )]
    Start {
        /// The plugin directory.
        dir: std::path::PathBuf,
    },
    /// Start the plugin's `on-skill-invoke:SKILL` monitors (SKILL or PLUGIN:SKILL).
    #[command(after_help = "Example:\n  wakeful plugin skill ./my-plugin my-plugin:debug")]
    Skill {
        /// The plugin directory.
        dir: std::path::PathBuf,
        /// The skill, as `SKILL` or `<plugin>:SKILL`.
        skill: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum WakeCommand {
    /// Route the session's events to its agent (replaces its route).
    #[command(
        after_help = "At most one wake is in flight per session; events arriving meanwhile join the next wake. A refused delivery is retried (1 s doubling to 60 s) for up to 15 minutes, then shown as undelivered; its events stay for the next wake.\nA route that cannot work is refused (exit 2, nothing set): a program not found on PATH or not executable, codex not found, a URL that is not http:// or https:// with a host.\n\nExamples:\n  wakeful wake set codex --thread \"$CODEX_THREAD_ID\"\n  wakeful wake set opencode --url http://127.0.0.1:4096 --opencode-session ses_123\n  wakeful wake set exec --busy-exit-code 75 -- notify-send wakeful {text}\n  wakeful wake set exec -- claude -p --resume {session} {text}\n  wakeful wake set webhook --url https://hooks.example.com/agent"
    )]
    Set {
        #[command(subcommand)]
        adapter: WakeAdapterArgs,
    },
    /// The session's route and delivery state (idle, retrying, undelivered…).
    #[command(after_help = "Example:\n  wakeful wake show --json")]
    Show,
    /// Remove the session's route.
    #[command(after_help = "Example:\n  wakeful wake clear --session my-session")]
    Clear,
}

#[derive(Debug, Subcommand)]
pub enum WakeAdapterArgs {
    /// A Codex thread, through Codex's app-server (idle, a turn starts; busy,
    /// it runs after the current turn; not loaded, the thread is resumed);
    /// accepted once the turn carrying the wake has started. Without the
    /// app-server: `codex queue`, shown as queued until it is confirmed.
    #[command(
        after_help = "Example:\n  wakeful wake set codex --thread 019a8d3e-…  --codex-home ~/.codex"
    )]
    Codex {
        /// The Codex thread [default: the session name].
        #[arg(long)]
        thread: Option<String>,
        /// The codex executable, for `codex queue` [default: codex on PATH].
        #[arg(long, value_name = "PATH")]
        binary: Option<std::path::PathBuf>,
        /// CODEX_HOME: where the app-server's control socket is, and for
        /// `codex queue` [default: $CODEX_HOME, else ~/.codex].
        #[arg(long, value_name = "DIR")]
        codex_home: Option<std::path::PathBuf>,
    },
    /// An OpenCode server: POST {url}/session/{id}/prompt_async.
    #[command(
        after_help = "Example:\n  wakeful wake set opencode --url http://127.0.0.1:4096 --opencode-session ses_123 --directory ~/src/app"
    )]
    Opencode {
        /// The server, e.g. http://127.0.0.1:4096 (loopback is allowed).
        #[arg(long)]
        url: String,
        /// The OpenCode session id [default: the session name].
        #[arg(long, value_name = "ID")]
        opencode_session: Option<String>,
        /// The project directory OpenCode runs in.
        #[arg(long, value_name = "DIR")]
        directory: Option<String>,
    },
    /// Any program: ARGV with {session}, {text} and {wake_id} substituted
    /// inside single arguments (never through a shell). Exit 0 = accepted.
    #[command(
        after_help = "Examples:\n  wakeful wake set exec -- gemini -p {text} --resume {session}\n  wakeful wake set exec --busy-exit-code 75 -- ./notify-agent.sh {session} {wake_id} {text}"
    )]
    Exec {
        /// An exit code (1–255) that means "busy, retry later" (repeat for
        /// more); other non-zero codes are failures.
        #[arg(long = "busy-exit-code", value_name = "N", value_parser = busy_exit_code, allow_negative_numbers = true)]
        busy_exit_codes: Vec<i32>,
        /// The program and its arguments.
        #[arg(last = true, required = true, value_name = "ARGV")]
        argv: Vec<String>,
    },
    /// POST {wake_id, session, text, events} as JSON to a URL (private
    /// addresses only as allowed by [network] in config.toml).
    #[command(
        after_help = "Example:\n  wakeful wake set webhook --url https://hooks.example.com/agent"
    )]
    Webhook {
        /// The URL.
        #[arg(long)]
        url: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TerminalCommand {
    /// List terminals: running first.
    #[command(after_help = "Example:\n  wakeful terminal list --json")]
    List {
        /// Every session's terminals.
        #[arg(long)]
        all_sessions: bool,
    },
    /// Stop a terminal's command (its whole process group); its monitors end
    /// with its status.
    #[command(after_help = "Example:\n  wakeful terminal kill term-4k2x9q0abc")]
    Kill {
        /// The terminal id.
        id: String,
    },
    /// Print a terminal's output file.
    #[command(
        after_help = "Each line is printed without control characters or escape sequences; --raw prints the bytes as they are.\n\nExamples:\n  wakeful terminal output term-4k2x9q0abc --from-line 10\n  wakeful terminal output term-4k2x9q0abc --follow\n  wakeful terminal output term-4k2x9q0abc --raw"
    )]
    Output {
        /// The terminal id.
        id: String,
        #[command(flatten)]
        range: LineRange,
    },
}

/// Which lines of an output file to print (monitors and terminals alike).
#[derive(Debug, Clone, Args)]
pub struct LineRange {
    /// First line to print (1-based).
    #[arg(long, value_name = "A", value_parser = non_negative, allow_negative_numbers = true)]
    pub from_line: Option<u64>,
    /// Last line to print.
    #[arg(long, value_name = "B", value_parser = non_negative, allow_negative_numbers = true)]
    pub to_line: Option<u64>,
    /// Keep printing new lines until the monitor (or terminal command) ends.
    #[arg(long)]
    pub follow: bool,
    /// Print the file's bytes as they are. Without it each line is decoded
    /// as UTF-8 (U+FFFD for invalid bytes) and loses its control characters
    /// and escape sequences, so it cannot act on the terminal.
    #[arg(long)]
    pub raw: bool,
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Stop every active monitor of SESSION (`session_ended`).
    #[command(after_help = "Example:\n  wakeful session end my-session")]
    End {
        /// The session.
        session: String,
    },
}

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Run in this process instead of in the background.
    #[arg(long)]
    pub foreground: bool,
    /// (Internal) the descriptor on which a client that started this
    /// daemon waits for its readiness line.
    #[arg(long, hide = true, value_name = "FD", requires = "foreground")]
    pub ready_fd: Option<i32>,
    #[command(subcommand)]
    pub action: Option<DaemonAction>,
}

#[derive(Debug, Subcommand)]
pub enum DaemonAction {
    /// Stop the running daemon. Persistent monitors are re-armed when it
    /// starts again; the others end with `daemon_stopped`.
    #[command(after_help = "Example:\n  wakeful daemon stop")]
    Stop,
    /// Replace the running daemon with this build (or BINARY) while every
    /// monitor goes on running: the same ids, the same processes, their
    /// output in the same files, no event lost or repeated; streaming
    /// clients reconnect by themselves.
    #[command(
        after_help = "The new program is checked first (`BINARY daemon handover-check`); if it does not answer as a wakeful build that can take the monitors over, nothing changes and the daemon keeps running. Running terminals (`wakeful run`) cannot be handed over yet: the upgrade is refused while one runs.\n\nExamples:\n  npm install -g wakeful && wakeful daemon upgrade\n  wakeful daemon upgrade --binary /opt/wakeful/bin/wakeful"
    )]
    Upgrade {
        /// The new program [default: this `wakeful`].
        #[arg(long, value_name = "PATH")]
        binary: Option<std::path::PathBuf>,
    },
    /// (Internal) say which handover this build reads, for an upgrade's
    /// check.
    #[command(hide = true)]
    HandoverCheck,
    /// Write a systemd user unit (wakeful.service) — on macOS a launchd
    /// agent (~/Library/LaunchAgents/dev.wakeful.daemon.plist) — that keeps
    /// the daemon up. Not needed: any command starts the daemon on demand.
    #[command(
        after_help = "The unit runs this executable as `daemon --foreground` (with WAKEFUL_HOME when it is set), restarts it on failure, and lets it stop its monitors itself (KillMode=mixed).\n\nExample:\n  wakeful daemon install && systemctl --user daemon-reload && systemctl --user enable --now wakeful.service"
    )]
    Install {
        /// Where to write wakeful.service [default: $XDG_CONFIG_HOME/systemd/user, else ~/.config/systemd/user; launchd: ~/Library/LaunchAgents].
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
        /// What to write: a systemd user unit or a launchd agent plist
        /// [default: launchd on macOS, systemd elsewhere].
        #[arg(long)]
        format: Option<ServiceFormat>,
        /// Print it on stdout instead of writing it.
        #[arg(long)]
        print: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// The plugin monitor: follows the session's events and prints one line
    /// per event (each line becomes a Claude Code notification). Never ends on
    /// its own; reconnects when the daemon restarts.
    #[command(
        after_help = "Plain output: \"[wakeful <monitor-id> \"<description>\" · <what>] <text>\" a line, newlines in the text written as \\n.\n\nExample (monitors/monitors.json):\n  \"command\": \"exec wakeful hook monitor\""
    )]
    Monitor {
        /// Whose cursor to read and move.
        #[arg(long, value_name = "NAME", default_value = wakeful_agents::claude_code::CONSUMER)]
        consumer: String,
    },
    /// An `asyncRewake` hook (SessionStart, Stop): waits for the session's
    /// events; with events, prints them on stderr and exits 2 (wakes Claude).
    /// A newer rewake hook of the session makes it give up (exit 0). Under a
    /// Claude Code print run (`claude -p`), which waits for this hook, it
    /// exits 0 at once.
    #[command(
        after_help = "Reads the hook input (JSON with session_id) on stdin. Exit 0: superseded, timed out, the daemon went away, or a print run. Exit 1: an error (never 2).\n\nPrint run: the Claude Code process ($CLAUDE_PID, else the nearest ancestor named claude) has -p, --print, --init-only or --sdk-url in its arguments, or its stdout is not a terminal, and no --input-format stream-json. WAKEFUL_CLAUDE_MODE=print or =interactive overrides the detection.\n\nExample (hooks/hooks.json):\n  {\"type\": \"command\", \"command\": \"exec wakeful hook rewake\", \"asyncRewake\": true, \"timeout\": 86400}"
    )]
    Rewake {
        /// Whose cursor to read and move.
        #[arg(long, value_name = "NAME", default_value = wakeful_agents::claude_code::CONSUMER)]
        consumer: String,
        /// Give up (exit 0) after this long; keep it under the hook's timeout.
        #[arg(long, value_name = "MS", default_value_t = wakeful_agents::claude_code::REWAKE_TIMEOUT_MS)]
        timeout_ms: u64,
    },
    /// A Stop hook: hands over the session's unacknowledged events without
    /// waiting, as {"decision":"block","reason":…}; nothing when there are
    /// none or when the input's stop_hook_active is true.
    #[command(
        after_help = "Reads the hook input (JSON with session_id, stop_hook_active) on stdin. Exit 0, or 1 on an error.\n\nExample (hooks/hooks.json):\n  {\"type\": \"command\", \"command\": \"exec wakeful hook stop\"}"
    )]
    Stop {
        /// Whose cursor to read and move.
        #[arg(long, value_name = "NAME", default_value = wakeful_agents::claude_code::CONSUMER)]
        consumer: String,
    },
    /// A SessionStart hook: keeps one session for the Claude Code process
    /// across /clear and exports it to its Bash commands (WAKEFUL_SESSION,
    /// through $CLAUDE_ENV_FILE).
    #[command(
        after_help = "Example (as Claude Code runs it):\n  echo '{\"session_id\":\"S\",\"hook_event_name\":\"SessionStart\"}' | wakeful hook session-start"
    )]
    SessionStart,
    /// Gemini CLI's SessionStart hook: records the session of the Gemini
    /// process and prints the resume digest as additionalContext.
    #[command(
        after_help = "Reads the hook input (JSON with session_id) on stdin; prints {\"hookSpecificOutput\":{\"hookEventName\":\"SessionStart\",\"additionalContext\":…}}, or nothing when there is nothing to say. Exit 0, or 1 on an error (never 2).\n\nInstalled by `wakeful integrate gemini`."
    )]
    GeminiSessionStart,
    /// Gemini CLI's AfterTool hook: appends the session's events that wake
    /// (and the quieter ones before them) to the tool's result, without
    /// waiting; nothing when there are none.
    #[command(
        after_help = "Reads the hook input (JSON with session_id) on stdin; prints {\"hookSpecificOutput\":{\"hookEventName\":\"AfterTool\",\"additionalContext\":…}}. Exit 0, or 1 on an error (never 2).\n\nInstalled by `wakeful integrate gemini`."
    )]
    GeminiAfterTool {
        /// Whose cursor to read and move.
        #[arg(long, value_name = "NAME", default_value = wakeful_agents::gemini::CONSUMER)]
        consumer: String,
    },
    /// Gemini CLI's AfterAgent hook: at the end of a turn, hands over every
    /// unacknowledged event as {"decision":"deny","reason":…}, which Gemini
    /// sends back as a new prompt; nothing when there are none or when the
    /// input's stop_hook_active is true.
    #[command(
        after_help = "Reads the hook input (JSON with session_id, stop_hook_active) on stdin. Exit 0, or 1 on an error (never 2).\n\nInstalled by `wakeful integrate gemini`."
    )]
    GeminiAfterAgent {
        /// Whose cursor to read and move.
        #[arg(long, value_name = "NAME", default_value = wakeful_agents::gemini::CONSUMER)]
        consumer: String,
    },
    /// Codex's SessionStart hook: prints the session's resume digest as
    /// additionalContext.
    #[command(
        after_help = "Reads the hook input (JSON with session_id, the thread id) on stdin; prints {\"hookSpecificOutput\":{\"hookEventName\":\"SessionStart\",\"additionalContext\":…}}, or nothing when there is nothing to say. Exit 0, or 1 on an error (never 2).\n\nInstalled by `wakeful integrate codex --hooks`."
    )]
    CodexSessionStart,
    /// Codex's Stop hook: at the end of a turn, hands over the session's
    /// unacknowledged events as {"decision":"block","reason":…}, which Codex
    /// gives the model to go on with in the same turn; nothing when there
    /// are none, when the session's codex wake route already delivers them,
    /// or when the input's stop_hook_active is true (Codex's loop guard).
    #[command(
        after_help = "Reads the hook input (JSON with session_id, stop_hook_active) on stdin. Never starts the daemon or waits. Exit 0, or 1 on an error (never 2).\n\nInstalled by `wakeful integrate codex --hooks`."
    )]
    CodexStop {
        /// Whose cursor to read and move.
        #[arg(long, value_name = "NAME", default_value = wakeful_agents::codex::hooks::CONSUMER)]
        consumer: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum IntegrateCommand {
    /// Write the Claude Code plugin (monitor, hooks, MCP server, skill) to the
    /// state directory and print how to load or install it.
    #[command(
        after_help = "Writes <state dir>/integrations/claude-code/ (overwritten on every run) and a marketplace in <state dir>/integrations/.\n\nExamples:\n  wakeful integrate claude-code\n  claude --plugin-dir \"$(wakeful integrate claude-code --json | jq -r .path)\""
    )]
    ClaudeCode,
    /// Add wakeful's hooks to Gemini CLI's settings.json: the resume digest
    /// at SessionStart, events after each tool call (AfterTool) and at the
    /// end of a turn (AfterAgent, sent back as a new prompt).
    #[command(
        after_help = "Edits ~/.gemini/settings.json ($GEMINI_CLI_HOME/.gemini/settings.json when set), or <DIR>/.gemini/settings.json with --project DIR. Only wakeful's own hooks (named wakeful-*) are added or replaced; comments, key order and every other setting stay. Nothing is written when they are up to date; otherwise the file is first copied to settings.json.wakeful-backup-<UTC time>. A file that is not valid JSON (comments allowed) is not changed.\n\nExamples:\n  wakeful integrate gemini\n  wakeful integrate gemini --project . --json"
    )]
    Gemini {
        /// Install into this project's .gemini/settings.json instead of the
        /// user's (Gemini runs project hooks only in trusted folders).
        #[arg(long, value_name = "DIR")]
        project: Option<std::path::PathBuf>,
    },
    /// Add wakeful's hooks to Codex's config.toml: the resume digest at
    /// SessionStart, and at the end of each turn (Stop) the events that came
    /// during it, with which the turn goes on.
    #[command(
        after_help = "Edits $CODEX_HOME/config.toml (~/.codex/config.toml without CODEX_HOME), or <DIR>/.codex/config.toml with --project DIR. wakeful's hooks are one block between `# BEGIN wakeful hooks` and `# END wakeful hooks` lines, appended once and replaced in place; everything else stays byte for byte. Nothing is written when the block is current; otherwise the file is first copied to config.toml.wakeful-backup-<UTC time>. A file that is not valid TOML is not changed.\n\nCodex runs new hooks only once you trusted them (it asks at start), or under --dangerously-bypass-hook-trust.\n\nExamples:\n  wakeful integrate codex --hooks\n  wakeful integrate codex --hooks --remove"
    )]
    Codex {
        /// Install the SessionStart and Stop hooks (the only Codex
        /// integration this command writes; the MCP server and the wake
        /// route need no installer, see docs/agents/codex.md).
        #[arg(long)]
        hooks: bool,
        /// Edit this project's .codex/config.toml instead of the user's.
        #[arg(long, value_name = "DIR")]
        project: Option<std::path::PathBuf>,
        /// Take wakeful's hooks out again.
        #[arg(long, requires = "hooks")]
        remove: bool,
    },
}

/// `wakeful wait`.
#[derive(Debug, Clone, clap::Args)]
pub struct WaitArgs {
    /// Give up after this many milliseconds (exit 124).
    #[arg(long, value_name = "MS", value_parser = non_negative, allow_negative_numbers = true)]
    pub timeout_ms: Option<u64>,
    /// Whose cursor to read and move [default: default; with --monitor the
    /// monitor id; in Gemini CLI's shell with the wakeful hooks installed:
    /// gemini, the hooks' consumer, so that no event reaches the model
    /// twice].
    #[arg(long, value_name = "NAME")]
    pub consumer: Option<String>,
    /// Keep waiting and printing after each batch.
    #[arg(long)]
    pub follow: bool,
    /// Be the consumer's only waiter: an older `--exclusive` waiter of the
    /// same session and consumer gives up and exits 0 (one waiter per
    /// session, as hooks need).
    #[arg(long)]
    pub exclusive: bool,
    /// Return events that do not wake too, without waiting for one that
    /// does (what an agent reads at the end of its turn).
    #[arg(long)]
    pub all: bool,
    /// Only this monitor's events (a subagent waiting for the monitor it
    /// started). Without --consumer, the consumer is the monitor id, so
    /// that no other reader's cursor skips the other monitors' events.
    #[arg(long, value_name = "ID")]
    pub monitor: Option<String>,
}

/// `wakeful cluster …`.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// This host's link, and every host seen: last heartbeat, events waiting
    /// to ship, import lag.
    #[command(
        after_help = "Exit 1 when the link is down.\n\nExample:\n  wakeful cluster status --json"
    )]
    Status,
}

/// A `--since` value that is neither a time nor a duration ago.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is neither an RFC 3339 time (2026-11-30T12:00:00Z) nor a duration ago (90s, 30m, 2h, 7d)")]
pub struct SinceError {
    /// The value given.
    pub text: String,
}

/// `--since`: RFC 3339, or a duration ago (`90s`, `30m`, `2h`, `7d`).
pub fn parse_since(s: &str) -> Result<DateTime<Utc>, SinceError> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    let bad = || SinceError {
        text: s.to_string(),
    };
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = s.split_at(split);
    let n: i64 = n.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "s" => n,
        "m" => n.checked_mul(60).ok_or_else(bad)?,
        "h" => n.checked_mul(3600).ok_or_else(bad)?,
        "d" => n.checked_mul(86_400).ok_or_else(bad)?,
        _ => return Err(bad()),
    };
    let ago = chrono::Duration::try_seconds(seconds).ok_or_else(bad)?;
    Utc::now().checked_sub_signed(ago).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_times_and_durations_ago() {
        let t = parse_since("2026-11-30T12:00:00Z").unwrap();
        assert_eq!(
            wakeful_core::event::format_ts(&t),
            "2026-11-30T12:00:00.000Z"
        );
        let two_hours = parse_since("2h").unwrap();
        let ago = Utc::now() - two_hours;
        assert!((ago.num_seconds() - 7200).abs() <= 2, "{ago}");
        for bad in ["", "2", "h", "2w", "-2h", "yesterday", "99999999999999999d"] {
            assert!(parse_since(bad).is_err(), "{bad}");
        }
    }
}
