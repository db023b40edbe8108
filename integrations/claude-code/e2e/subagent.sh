#!/usr/bin/env bash
# A monitor started inside a Claude Code subagent is awaited by that subagent
# (skills/wakeful/SKILL.md, "In a subagent"), and the main conversation still
# gets each of its events once. Real Claude Code TUI (tests/e2e/claude-code/tui.py)
# against the project's fake model API; nothing leaves the machine.
#
# Usage: [CLAUDE_BIN=…] [OUT=/tmp/wksa] subagent.sh [path/to/wakeful]
#
# The fake model: the main conversation calls the Agent tool; the subagent
# runs, in one Bash call,
#   id=$(wakeful start --wake-on exit -d sub-build -- 'sleep 2; echo sub-line-$((70+7))') &&
#   wakeful wait --monitor "$id" --timeout-ms 60000
# Checks, from the requests the fake recorded: the subagent's Bash result
# holds every event of its monitor (started, the line, stopped), and the
# events reach the main conversation once each (through the Stop hook or
# the rewake hook or the bridge, whichever). Exit 0 when both hold.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
PLUGIN=$(cd "$HERE/.." && pwd -P)
TUI=$(cd "$HERE/../../.." && pwd -P)/tests/e2e/claude-code/tui.py
CLAUDE_BIN=${CLAUDE_BIN:-${WAKEFUL_CLAUDE_BIN:-$PLUGIN/../../target/claude-e2e/npm/node_modules/.bin/claude}}
OUT=${OUT:-/tmp/wksa}
WAKEFUL=$(cd "$(dirname "${1:-$PLUGIN/../../target/debug/wakeful}")" && pwd -P)/$(basename "${1:-wakeful}")
[ -x "$WAKEFUL" ] || { echo "subagent.sh: $WAKEFUL is not executable; cargo build -p wakeful-cli first" >&2; exit 2; }
[ -x "$CLAUDE_BIN" ] || { echo "subagent.sh: set CLAUDE_BIN to Claude Code 2.1.332" >&2; exit 2; }
mkdir -p "$OUT/bin" && cp "$WAKEFUL" "$OUT/bin/wakeful"
rm -rf "$OUT/wk"
SCRIPT=$(python3 - <<'PY'
import json
cmd = ("id=$(wakeful start --wake-on exit -d sub-build -- 'sleep 2; echo sub-line-$((70+7))')"
       " && wakeful wait --monitor \"$id\" --timeout-ms 60000")
print(json.dumps([
    {"when": "start the subagent", "tool": "Agent",
     "input": {"description": "build watcher", "subagent_type": "general-purpose",
               "prompt": "SUBAGENT-TASK: start the build monitor and wait for it"}},
    {"when": "SUBAGENT-TASK", "tool": "Bash",
     "input": {"command": cmd, "description": "start a monitor and wait for it"}},
]))
PY
)
PATH=$OUT/bin:$PATH python3 "$TUI" --claude "$CLAUDE_BIN" --plugin-dir "$PLUGIN" --out "$OUT/run" --wait 40 \
  --env "WAKEFUL_HOME=$OUT/wk" --prompt 'start the subagent' --until 'build watcher' --script "$SCRIPT"
WAKEFUL_HOME=$OUT/wk "$OUT/bin/wakeful" daemon stop >/dev/null 2>&1
python3 - "$OUT/run/requests.jsonl" <<'PY'
import json, sys

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

reqs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
main = [r for r in reqs if r.get("main_loop")]
def convo(r):  # the subagent's conversation starts with its prompt
    first = "\n".join(texts(r["body"]["messages"][0]["content"]))
    return "sub" if "SUBAGENT-TASK" in first else "main"
def user_text(r):
    # User messages only: a Stop hook's block also leaves a system entry
    # with the same text beside its user reminder (one delivery, two texts).
    return "\n".join(t for m in r["body"]["messages"] if m.get("role") == "user"
                     for t in texts(m.get("content")))
fail = []
sub = [r for r in main if convo(r) == "sub"]
result = max((user_text(r) for r in sub), key=len, default="")
for want in ("started: sub-build", "sub-line-77", "sub-build: exited with code 0"):
    n = result.count(want)
    print(f"subagent's wait returned {want!r}: {n}x")
    if n != 1:
        fail.append(f"the subagent saw {want!r} {n} times")
# In the main conversation: every request resends the history, so the most
# any request holds is how often it was delivered.
seen = {}
for r in (r for r in main if convo(r) == "main"):
    t = user_text(r)
    for want in ("started: sub-build", "sub-line-77", "sub-build: exited with code 0"):
        seen[want] = max(seen.get(want, 0), t.count(want))
for want, n in seen.items():
    print(f"main conversation got {want!r}: {n}x")
    if n != 1:
        fail.append(f"the main conversation got {want!r} {n} times")
for f in fail:
    print("subagent.sh: " + f, file=sys.stderr)
sys.exit(1 if fail else 0)
PY
