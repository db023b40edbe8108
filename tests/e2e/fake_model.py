"""What the fake model APIs of the end-to-end tests share (stdlib only).

tests/e2e/codex/fake_responses.py (the OpenAI Responses API, for Codex) and
tests/e2e/gemini/fake_gemini.py (the Gemini API) answer differently shaped requests the
same way: a turn's newest user text is matched against --rules, every request is logged
as one JSON line, and the bound port is printed alone on stdout's first line. This
module holds that part: the request log, the rule match, the JSON/SSE reply and the
command line (`--log FILE [--rules JSON] [--port N]`, or `--dump FILE`).
"""

import argparse
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

START = time.time()
LOCK = threading.Lock()
STATE = {"n": 0, "log": None, "rules": []}


def log(entry):
    """Appends one request to the log: `i` (its number), `t` (seconds since start) and `ts`
    (seconds since the epoch, for latencies measured by another process) first."""
    with LOCK:
        now = time.time()
        entry = dict(i=STATE["n"], t=round(now - START, 3), ts=round(now, 4), **entry)
        STATE["n"] += 1
        with open(STATE["log"], "a") as f:
            f.write(json.dumps(entry) + "\n")


def turn_answer(user):
    """The answer of a turn whose newest user text is `user`: the first rule that matches,
    as ("turn", {"shell": COMMAND} or {"text": TEXT}); "ok" when none does."""
    for rule in STATE["rules"]:
        if re.search(rule["match"], user):
            if "shell" in rule:
                return "turn", {"shell": rule["shell"]}
            return "turn", {"text": rule.get("text", "ok")}
    return "turn", {"text": "ok"}


class JsonHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, quiet, and a `reply` with its length."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, data, ctype="application/json"):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        """The request's JSON body ({} when it is not JSON)."""
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            return json.loads(raw)
        except ValueError:
            return {}


def serve(doc, handler, dump):
    """The command line of a fake: serve `handler` on 127.0.0.1, or `dump` a log."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--port", type=int, default=0, help="0: any free port (the default)")
    ap.add_argument("--log", help="request log (JSONL)")
    ap.add_argument("--rules", default="[]", help="JSON list of rules (see the fake's docs)")
    ap.add_argument("--dump", metavar="LOG", help="summarise a request log and exit")
    args = ap.parse_args()
    if args.dump:
        for line in open(args.dump):
            print(dump(json.loads(line)))
        return 0
    if not args.log:
        ap.error("--log is required")
    STATE["log"] = args.log
    STATE["rules"] = json.loads(args.rules)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
