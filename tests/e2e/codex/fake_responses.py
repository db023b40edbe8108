#!/usr/bin/env python3
"""A fake OpenAI Responses API for driving the real Codex CLI offline (stdlib only).

Written for wakeful's Codex end-to-end test (tests/e2e/codex/run.py); checked with Codex
0.171.0 (`codex app-server`, `codex exec`, `codex queue`).

Usage:  fake_responses.py --log FILE [--rules JSON] [--port N]
        fake_responses.py --dump FILE          (summarise a request log)

The port actually bound (0 = any free one, the default) is printed alone on the first line
of stdout.  Point Codex at it with a model provider whose `base_url` is
`http://127.0.0.1:PORT/v1` and `wire_api = "responses"`: Codex POSTs `/v1/responses` and
reads a server-sent-event stream.

How a request is answered (stateless, so threads and turns may interleave freely):
  - a request whose last input item is a tool's output (the follow-up of a tool call)
    gets the assistant message "done";
  - otherwise the request starts a turn: the text of its newest user message is matched
    against the rules, in order, and the first match answers:
        {"match": REGEX, "shell": COMMAND}   a call of Codex's shell tool running COMMAND
        {"match": REGEX, "text": TEXT}       an assistant message TEXT
    and with no match the answer is the assistant message "ok".
  - requests without tools (side requests, e.g. a title) get "ok", or, when they ask for
    JSON output, a small object matching the schema.

Every request is logged to the --log file as one JSON line:
  {"i": n, "t": seconds since start, "path", "thread": header thread-id,
   "turn": turn_id from the x-codex-turn-metadata header, "kind": "turn" | "tool-output"
   | "side", "user": newest user message text, "answer": what was answered,
   "body": the request body}
"""
import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from fake_model import JsonHandler, log, serve, turn_answer  # noqa: E402


def text_of(content):
    if isinstance(content, str):
        return content
    return "\n".join(c.get("text", "") for c in content or [] if isinstance(c, dict))


def newest_user_text(body):
    items = body.get("input")
    if isinstance(items, str):
        return items
    for item in reversed(items or []):
        if isinstance(item, dict) and item.get("role") == "user" \
                and item.get("type", "message") == "message":
            return text_of(item.get("content"))
    return ""


def is_tool_output(item):
    return isinstance(item, dict) and str(item.get("type", "")).endswith("_call_output")


def sample(schema):
    """A small value matching a JSON schema."""
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        return {k: sample(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "Fake title"


def shell_call(body, command):
    """Codex's shell tool as this request offers it: (name, arguments)."""
    names = {t.get("name") for t in body.get("tools") or []}
    if "exec_command" in names:
        return "exec_command", {"cmd": command, "yield_time_ms": 60000}
    if "shell_command" in names:
        return "shell_command", {"command": command}
    return "shell", {"command": ["bash", "-lc", command]}


def decide(body):
    """(kind, answer) for a request."""
    if not body.get("tools"):
        fmt = (body.get("text") or {}).get("format") or {}
        if fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), dict):
            return "side", {"text": json.dumps(sample(fmt["schema"]))}
        return "side", {"text": "ok"}
    items = body.get("input") or []
    if isinstance(items, list) and items and is_tool_output(items[-1]):
        return "tool-output", {"text": "done"}
    return turn_answer(newest_user_text(body))


def output_item(body, answer):
    if "shell" in answer:
        name, args = shell_call(body, answer["shell"])
        return {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:20],
                "call_id": "call_" + uuid.uuid4().hex[:20], "name": name,
                "arguments": json.dumps(args), "status": "completed"}
    return {"type": "message", "id": "msg_" + uuid.uuid4().hex[:20], "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": answer["text"], "annotations": []}]}


def sse(body, item):
    rid = "resp_" + uuid.uuid4().hex[:20]
    base = {"id": rid, "object": "response", "created_at": int(time.time()),
            "model": body.get("model", "gpt-fake"), "status": "in_progress", "output": []}
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 15}
    events = [("response.created", {"type": "response.created", "response": base}),
              ("response.output_item.added", {"type": "response.output_item.added",
                                              "output_index": 0, "item": item})]
    if item["type"] == "message":
        events.append(("response.output_text.delta", {
            "type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
            "content_index": 0, "delta": item["content"][0]["text"]}))
    events += [("response.output_item.done", {"type": "response.output_item.done",
                                              "output_index": 0, "item": item}),
               ("response.completed", {"type": "response.completed", "response": dict(
                   base, status="completed", output=[item], usage=usage)})]
    return "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()


class Handler(JsonHandler):
    def do_GET(self):
        if self.path.split("?")[0].endswith("/models"):
            return self.reply(b'{"models": [], "data": []}')
        self.reply(b"{}")

    def do_POST(self):
        body = self.body()
        if not self.path.split("?")[0].endswith("/responses"):
            return self.reply(b"{}")
        kind, answer = decide(body)
        try:
            turn = json.loads(self.headers.get("x-codex-turn-metadata") or "{}").get("turn_id")
        except ValueError:
            turn = None
        log({"path": self.path, "thread": self.headers.get("thread-id"), "turn": turn,
             "kind": kind, "user": newest_user_text(body), "answer": answer, "body": body})
        item = output_item(body, answer)
        if body.get("stream") is False:
            return self.reply(json.dumps({"id": "resp_x", "object": "response",
                                          "status": "completed", "output": [item]}).encode())
        self.reply(sse(body, item), "text/event-stream")


def dump(e):
    return (f"[{e['i']} +{e['t']}s] thread={e['thread']} turn={e['turn']} {e['kind']} "
            f"user={e['user'][-100:]!r} answer={e['answer']}")


if __name__ == "__main__":
    sys.exit(serve(__doc__, Handler, dump))
