#!/usr/bin/env bash
# The repository as a Claude Code plugin marketplace, end to end with the real
# Claude Code, offline: the plugin comes from npm (the `wakeful` package that
# packaging/dist.mjs makes, served by tests/e2e/npm/fake_registry.py in place
# of registry.npmjs.org) and brings its own binary; nothing named wakeful is
# on PATH.
#
# Usage: [CLAUDE_BIN=…] [OUT=/tmp/wkmp] marketplace.sh DIST
#   DIST: the output folder of `node packaging/dist.mjs` (default target/dist)
#
# Checks, in order:
#   1. `claude plugin validate` passes on the marketplace (the repository root)
#      and on the plugin inside the npm package;
#   2. `claude plugin marketplace add <this checkout>` and `claude plugin install
#      wakeful@wakeful` install the plugin from npm, with its platform package in
#      the plugin's node_modules (Claude Code runs `npm ci --ignore-scripts`
#      from the package's npm-shrinkwrap.json), plugin and binary one version;
#   3. an interactive session (tests/e2e/claude-code/tui.py, the fake model
#      API): the model runs `wakeful start` in Bash (the plugin's bin/ is on the
#      Bash tool's PATH) and ends its turn; the monitor's line, printed 3 s later,
#      wakes the idle session; the daemon is the plugin's binary;
#   4. `claude mcp add wakeful -- npx -y wakeful mcp` writes that server, and
#      `claude -p --mcp-config` with the same command calls its monitor_start tool
#      (npx fetches wakeful into an empty npm cache).
# Exit 0 when all hold.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../../.." && pwd -P)
TUI=$REPO/tests/e2e/claude-code/tui.py
FAKE=$REPO/tests/e2e/claude-code/fake_anthropic.py
CLAUDE_BIN=${CLAUDE_BIN:-${WAKEFUL_CLAUDE_BIN:-$REPO/target/claude-e2e/npm/node_modules/.bin/claude}}
OUT=${OUT:-/tmp/wkmp}
DIST=$(cd "${1:-$REPO/target/dist}" 2>/dev/null && pwd -P) || { echo "marketplace.sh: no DIST folder; run node packaging/dist.mjs" >&2; exit 2; }
[ -x "$CLAUDE_BIN" ] || { echo "marketplace.sh: set CLAUDE_BIN to Claude Code 2.1.332" >&2; exit 2; }
VERSION=$(node -p 'require(process.argv[1]).version' "$REPO/integrations/claude-code/.claude-plugin/plugin.json")
fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

rm -rf "$OUT" && mkdir -p "$OUT"/{cfg,home,project,wk,empty-plugin/.claude-plugin,npm-cache,npx-cache}
echo '{"name": "e2e-empty", "version": "0.0.0"}' >"$OUT/empty-plugin/.claude-plugin/plugin.json"
# No wakeful, no cargo: only what the system has.
CLEAN_PATH=/usr/local/bin:/usr/bin:/bin
if PATH=$CLEAN_PATH command -v wakeful >/dev/null; then echo "marketplace.sh: wakeful is on $CLEAN_PATH" >&2; exit 2; fi

python3 "$REPO/tests/e2e/npm/fake_registry.py" "$DIST/npm" --log "$OUT/registry.log" >"$OUT/registry.port" &
REG_PID=$!
trap 'kill $REG_PID 2>/dev/null; WAKEFUL_HOME=$OUT/wk "$PLUGIN_ROOT/bin/wakeful" daemon stop >/dev/null 2>&1' EXIT
for _ in $(seq 100); do [ -s "$OUT/registry.port" ] && break; sleep 0.1; done
REGISTRY=http://127.0.0.1:$(awk '{print $2}' "$OUT/registry.port")

# Claude Code's configuration folder, seeded as tui.py seeds HOME
# (onboarding done, the project trusted, the dummy key approved): the plugin is
# installed there first, and the session then uses it (CLAUDE_CONFIG_DIR).
python3 - "$OUT/cfg/.claude.json" "$OUT/project" <<'PY'
import json, sys
json.dump({"hasCompletedOnboarding": True, "theme": "dark",
           "projects": {sys.argv[2]: {"hasTrustDialogAccepted": True}},
           "customApiKeyResponses": {"approved": ["sk-ant-dummy"[-20:]], "rejected": []}},
          open(sys.argv[1], "w"))
PY
cc() {
  env -i PATH=$CLEAN_PATH HOME="$OUT/home" LANG=C.UTF-8 CLAUDE_CONFIG_DIR="$OUT/cfg" DISABLE_AUTOUPDATER=1 \
    npm_config_registry="$REGISTRY" npm_config_cache="$OUT/npm-cache" "$CLAUDE_BIN" "$@"
}

# 1. validate
if cc plugin validate "$REPO" >"$OUT/validate-marketplace.txt" 2>&1; then
  pass "claude plugin validate $REPO: $(grep -c '✔ Validation passed' "$OUT/validate-marketplace.txt") passed"
else fail "claude plugin validate $REPO: $(tail -5 "$OUT/validate-marketplace.txt")"; fi
mkdir -p "$OUT/pkg" && tar -xzf "$DIST/npm/wakeful-$VERSION.tgz" -C "$OUT/pkg"
if cc plugin validate "$OUT/pkg/package" >"$OUT/validate-plugin.txt" 2>&1; then
  pass "claude plugin validate of the npm package's plugin: passed"
else fail "claude plugin validate of the npm package: $(tail -5 "$OUT/validate-plugin.txt")"; fi

# 2. marketplace add + install
cc plugin marketplace add "$REPO" >"$OUT/marketplace-add.txt" 2>&1 || fail "marketplace add: $(cat "$OUT/marketplace-add.txt")"
if cc plugin install wakeful@wakeful >"$OUT/install.txt" 2>&1; then
  pass "claude plugin install wakeful@wakeful: $(tr -d '\r' <"$OUT/install.txt" | grep -o 'Successfully installed.*')"
else fail "plugin install: $(cat "$OUT/install.txt")"; fi
PLUGIN_ROOT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["plugins"]["wakeful@wakeful"][0]["installPath"])' \
  "$OUT/cfg/plugins/installed_plugins.json" 2>/dev/null)
said=$("$PLUGIN_ROOT/bin/wakeful" --version 2>&1)
native=$(ls -d "$PLUGIN_ROOT"/node_modules/@wakeful/*/ 2>/dev/null | xargs -n1 basename)
if [ "${said%% (*}" = "wakeful $VERSION" ] && [ -n "$native" ]; then
  pass "installed at $PLUGIN_ROOT: plugin $VERSION, its bin/wakeful says '$said' (node_modules/@wakeful/$native)"
else fail "the installed plugin's binary: '$said', platform packages '$native'"; fi

# 3. an idle session woken by a monitor line
SCRIPT='[{"when":"start the e2e monitor","tool":"Bash","input":{"command":"command -v wakeful; wakeful start -d e2e -- '"'"'sleep 3; echo e2e-wake-$((400+56))'"'"'","description":"start a wakeful monitor"}},{"text":"Started; I will be woken when it prints."}]'
PATH=$CLEAN_PATH python3 "$TUI" --claude "$CLAUDE_BIN" --plugin-dir "$OUT/empty-plugin" --out "$OUT/run" \
  --project "$OUT/project" --wait 30 --env "CLAUDE_CONFIG_DIR=$OUT/cfg" --env "WAKEFUL_HOME=$OUT/wk" \
  --env "npm_config_registry=$REGISTRY" --prompt 'start the e2e monitor' --script "$SCRIPT" \
  --until 'e2e-wake-456' -- --permission-mode acceptEdits --allowedTools Bash 2>&1 | tail -1
python3 - "$OUT/run/requests.jsonl" "$PLUGIN_ROOT" <<'PY' && pass "idle session woken: $(cat "$OUT/woke.txt")" || fail "no wake (see $OUT/run/requests.jsonl, $OUT/run/debug.log)"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def texts(c):
    if isinstance(c, str):
        return [c]
    out = []
    for b in c or []:
        if b.get("type") == "text":
            out.append(b.get("text", ""))
        elif b.get("type") == "tool_result":
            out += texts(b.get("content"))
    return out
main = [r for r in reqs if r["main_loop"]]
# The tool call ran the plugin's bin/wakeful (the Bash PATH), and its turn ended.
used = [r for r in main if any(sys.argv[2] + "/bin/wakeful" in t
        for m in r["body"]["messages"] for t in texts(m.get("content")))]
assert used, "the Bash tool did not find the plugin's wakeful"
after = main[main.index(used[0]) + 1:]
# A later request whose newest user message carries the line: a new turn.
woke = [r for r in after if "e2e-wake-456" in r["new"]]
assert woke, "the line did not start a turn"
start = reqs[0]["ts"]
with open(sys.argv[1].replace("run/requests.jsonl", "woke.txt"), "w") as f:
    f.write(f"request {woke[0]['i']} at +{woke[0]['ts'] - start:.2f}s, new input: "
            + woke[0]["new"].replace("\n", "\\n")[-160:])
PY
pid=$(WAKEFUL_HOME=$OUT/wk "$PLUGIN_ROOT/bin/wakeful" --json status 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])' 2>/dev/null)
exe=$(readlink "/proc/$pid/exe" 2>/dev/null)
case "$exe" in "$PLUGIN_ROOT"/node_modules/@wakeful/*/bin/wakeful) pass "the daemon (pid $pid) runs the plugin's binary $exe";;
  *) fail "the daemon runs '$exe', not the plugin's binary";; esac
WAKEFUL_HOME=$OUT/wk "$PLUGIN_ROOT/bin/wakeful" daemon stop >/dev/null 2>&1

# 4. claude mcp add … npx -y wakeful mcp, and claude -p --mcp-config
( cd "$OUT/project" && cc mcp add --scope project wakeful -- npx -y wakeful mcp ) >"$OUT/mcp-add.txt" 2>&1
if python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["mcpServers"]["wakeful"]; assert s["command"]=="npx" and s["args"]==["-y","wakeful","mcp"], s' \
  "$OUT/project/.mcp.json" 2>>"$OUT/mcp-add.txt"; then
  pass "claude mcp add wakeful -- npx -y wakeful mcp wrote $(tr -d '\n ' <"$OUT/project/.mcp.json")"
else fail "claude mcp add: $(cat "$OUT/mcp-add.txt")"; fi
FAKE_SCRIPT='[{"tool":"mcp__wakeful__monitor_start","input":{"command":"echo mcp-npx-line","description":"mcp-npx"}},{"text":"done"}]' \
  python3 "$FAKE" --port 0 --log "$OUT/p-requests.jsonl" >"$OUT/fake.port" 2>"$OUT/fake.log" &
FAKE_PID=$!
for _ in $(seq 100); do [ -s "$OUT/fake.port" ] && break; sleep 0.1; done
( cd "$OUT/project" && env -i PATH=$CLEAN_PATH HOME="$OUT/home" LANG=C.UTF-8 CLAUDE_CONFIG_DIR="$OUT/cfg" DISABLE_AUTOUPDATER=1 \
    npm_config_registry="$REGISTRY" npm_config_cache="$OUT/npx-cache" WAKEFUL_HOME="$OUT/wk" WAKEFUL_SESSION=mcp-npx \
    ANTHROPIC_API_KEY=sk-ant-dummy ANTHROPIC_BASE_URL="http://127.0.0.1:$(head -n1 "$OUT/fake.port")" \
    timeout 120 "$CLAUDE_BIN" -p go --mcp-config "$OUT/project/.mcp.json" --strict-mcp-config \
    --allowedTools mcp__wakeful__monitor_start </dev/null >"$OUT/p.stdout" 2>"$OUT/p.stderr" )
echo "claude -p exited $?" >>"$OUT/p.stdout"
kill $FAKE_PID 2>/dev/null
if python3 - "$OUT/p-requests.jsonl" <<'PY'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for r in reqs:
    for m in r["body"].get("messages", []):
        for b in m.get("content") if isinstance(m.get("content"), list) else []:
            if b.get("type") == "tool_result" and "mon-" in json.dumps(b.get("content")):
                print(json.dumps(b.get("content"))[:200])
                sys.exit(0)
sys.exit(1)
PY
then
  listed=$(WAKEFUL_HOME=$OUT/wk "$PLUGIN_ROOT/bin/wakeful" --session mcp-npx list 2>&1 | head -3)
  pass "claude -p --mcp-config (npx -y wakeful mcp) called monitor_start; wakeful list: $(echo "$listed" | tr '\n' ' ' | cut -c1-160)"
else fail "claude -p --mcp-config: no monitor_start result (see $OUT/p.stdout, $OUT/p.stderr)"; fi
grep -q "/@wakeful/linux-.*\.tgz 200" <(grep -n . "$OUT/registry.log") && echo "registry: $(grep -c ' 200$' "$OUT/registry.log") requests served"
WAKEFUL_HOME=$OUT/wk "$PLUGIN_ROOT/bin/wakeful" daemon stop >/dev/null 2>&1
[ $fails -eq 0 ] && echo "marketplace.sh: all checks passed (outputs in $OUT)" || echo "marketplace.sh: $fails check(s) failed (outputs in $OUT)"
[ $fails -eq 0 ]
