#!/usr/bin/env python3
"""A fake of the Anthropic Messages API for the Claude Code end-to-end tests.

Claude Code (or anything built on it, such as the Claude Agent SDK) is pointed at it with
    ANTHROPIC_API_KEY=sk-ant-dummy ANTHROPIC_BASE_URL=http://127.0.0.1:PORT
It answers `POST /v1/messages` (streamed as server-sent events, or as one JSON body),
`/v1/messages/count_tokens`, and any other request with an empty JSON object, and logs
every request, so that a test can assert on what reached the model and when.

Usage: fake_anthropic.py [--port N] [--log FILE] [--script JSON|@FILE] [--done TEXT]
  --port    0 (the default) takes a free port; the port is printed alone on stdout's first line
  --log     JSONL, one line per messages request (default: requests.jsonl):
              i          0-based index
              ts         wall-clock seconds (time.time()) when the request arrived
              main_loop  true when the request offers tools (a turn of the agent; title
                         generation and other side requests offer none)
              new        the text of every message after the assistant's last one (role
                         user, or system: how Claude Code sends background notifications)
              step       what the fake answered
              body       the request as sent
  --script  the answers, a JSON list of steps (also from $FAKE_SCRIPT):
              {"text": "..."}                      end the turn with this text
              {"tool": NAME, "input": {...}}       call a tool
            A step with "when": REGEX waits for a main-loop request whose new input
            (`new` above) matches; requests before it get the --done text. A step without "when"
            is taken by the next main-loop request. Side requests never take a step.
  --done    the answer once the script is used up, or while a step waits (default "ok")
Standard library only.
"""
import argparse
import json
import os
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def texts(content):
    """Every text of a message's content: a string, text blocks, tool_result blocks."""
    if isinstance(content, str):
        return [content]
    out = []
    for block in content or []:
        if isinstance(block, dict):
            if block.get("type") == "text":
                out.append(block.get("text", ""))
            elif block.get("type") == "tool_result":
                out += texts(block.get("content"))
    return out


def new_input(body):
    """The text of every message after the assistant's last one: what is new in this
    request (the prompt or tool results, and the notifications that came with them;
    Claude Code 2.1.332 sends background-task notifications as messages of role "system"
    inside `messages`)."""
    new = []
    for m in body.get("messages", []):
        if m.get("role") == "assistant":
            new = []
        else:
            new += texts(m.get("content"))
    return "\n".join(new)


class Model:
    """The script and the log; one lock, since Claude Code sends requests in parallel."""

    def __init__(self, script, done, log):
        self.script, self.done, self.log = list(script), done, log
        self.lock = threading.Lock()
        self.count = 0

    def answer(self, path, body):
        main_loop = bool(body.get("tools"))
        new = new_input(body)
        with self.lock:
            step = {"text": self.done}
            if main_loop and self.script:
                when = self.script[0].get("when")
                if when is None or re.search(when, new):
                    step = self.script.pop(0)
            entry = {"i": self.count, "ts": time.time(), "path": path, "main_loop": main_loop,
                     "new": new, "step": step, "body": body}
            self.count += 1
            with open(self.log, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")
        return step


def message_events(step, model):
    """The SSE events of one assistant message answering with `step`."""
    if "tool" in step:
        block = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}",
                 "name": step["tool"], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(step.get("input", {}))}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": step.get("text", "")}
        stop = "end_turn"
    usage = {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    message = {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
               "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": usage}
    return [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 5},
                           "delta": {"stop_reason": stop, "stop_sequence": None}}),
        ("message_stop", {"type": "message_stop"}),
    ]


def whole_message(step, model):
    """The same answer as one JSON body (a request without `stream`)."""
    events = dict(message_events(step, model))
    message = events["message_start"]["message"]
    block = events["content_block_start"]["content_block"]
    delta = events["content_block_delta"]["delta"]
    if block["type"] == "tool_use":
        block = dict(block, input=json.loads(delta["partial_json"]))
    else:
        block = dict(block, text=delta["text"])
    return dict(message, content=[block], stop_reason=events["message_delta"]["delta"]["stop_reason"])


def handler(model):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, body, ctype="application/json"):
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_HEAD(self):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            self.reply({})

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?")[0]
            if path.endswith("/count_tokens"):
                return self.reply({"input_tokens": 10})
            if not path.endswith("/v1/messages"):
                return self.reply({})
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"unreadable": raw.decode(errors="replace")}
            step = model.answer(path, body)
            name = body.get("model", "claude-fake")
            if not body.get("stream"):
                return self.reply(whole_message(step, name))
            sse = "".join(f"event: {kind}\ndata: {json.dumps(data)}\n\n"
                          for kind, data in message_events(step, name))
            self.reply(sse.encode(), "text/event-stream")

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--log", default="requests.jsonl")
    ap.add_argument("--script", default=os.environ.get("FAKE_SCRIPT") or "[]")
    ap.add_argument("--done", default="ok")
    args = ap.parse_args()
    script = args.script
    if script.startswith("@"):
        with open(script[1:], encoding="utf-8") as f:
            script = f.read()
    model = Model(json.loads(script), args.done, args.log)
    server = ThreadingHTTPServer((args.host, args.port), handler(model))
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
