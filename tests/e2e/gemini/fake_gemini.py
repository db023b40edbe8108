#!/usr/bin/env python3
"""A fake Gemini API (generativelanguage v1beta) for driving the real Gemini CLI offline.

Standard library only. Written for wakeful's Gemini end-to-end test
(tests/e2e/gemini/run.py); checked with Gemini CLI 0.61.0.

Usage:  fake_gemini.py --log FILE [--rules JSON] [--port N]
        fake_gemini.py --dump FILE          (summarise a request log)

The port actually bound (0 = any free one, the default) is printed alone on the first line
of stdout. Point Gemini CLI at it with GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT and
GEMINI_API_KEY=<anything> (settings: security.auth.selectedType = "gemini-api-key"):
it POSTs /v1beta/models/<model>:streamGenerateContent?alt=sse (the agent's turns, read as
server-sent events) and /v1beta/models/<model>:generateContent (side requests: the model
router's classifier, titles, summaries).

How a request is answered (stateless):
  - a request without tools (a side request) gets a small JSON object matching its
    response schema when it asks for JSON (the router's classifier gets a low complexity
    score), otherwise the text "ok";
  - a request whose newest content is a function response (the follow-up of a tool call)
    gets the text "done";
  - otherwise the text of the newest user content is matched against the rules, in
    order, and the first match answers:
        {"match": REGEX, "shell": COMMAND}   a call of run_shell_command running COMMAND
        {"match": REGEX, "text": TEXT}       the text TEXT
    and with no match the answer is the text "ok".

Every request is logged to the --log file as one JSON line:
  {"i": n, "t": seconds since start, "path", "kind": "turn" | "tool-output" | "side",
   "user": text of the newest content, "answer": what was answered, "body": the body}
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from fake_model import JsonHandler, log, serve, turn_answer  # noqa: E402


def content_text(content):
    """The text of a content: its text parts, and the output of its function responses."""
    out = []
    for part in (content or {}).get("parts") or []:
        if not isinstance(part, dict):
            continue
        if "text" in part:
            out.append(str(part["text"]))
        if "functionResponse" in part:
            out.append(json.dumps(part["functionResponse"].get("response")))
    return "\n".join(out)


def newest(body):
    contents = body.get("contents") or []
    return contents[-1] if contents and isinstance(contents[-1], dict) else {}


def is_function_response(content):
    return any(isinstance(p, dict) and "functionResponse" in p
               for p in content.get("parts") or [])


def sample(schema):
    """A small value matching a JSON schema (Gemini's OBJECT/STRING/… spelling too)."""
    kind = schema.get("type")
    kind = (kind[0] if isinstance(kind, list) else kind or "").lower()
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        return {k: sample(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return max(schema.get("minimum", 1), 1)
    if kind == "boolean":
        return False
    return "simple"


def side_answer(body):
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if isinstance(schema, dict):
        return json.dumps(sample(schema))
    if config.get("responseMimeType") == "application/json":
        text = content_text(newest(body))
        if "complexity_score" in json.dumps(body):
            return json.dumps({"complexity_reasoning": "simple", "complexity_score": 1})
        return "{}" if text else "{}"
    return "ok"


def decide(body):
    """(kind, answer) for a request."""
    if not body.get("tools"):
        return "side", {"text": side_answer(body)}
    last = newest(body)
    if is_function_response(last):
        return "tool-output", {"text": "done"}
    return turn_answer(content_text(last))


def response(answer):
    if "shell" in answer:
        part = {"functionCall": {"name": "run_shell_command",
                                 "args": {"command": answer["shell"],
                                          "description": "run a command"}}}
    else:
        part = {"text": answer["text"]}
    return {"candidates": [{"content": {"role": "model", "parts": [part]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                              "totalTokenCount": 15},
            "modelVersion": "gemini-fake"}


class Handler(JsonHandler):
    def do_GET(self):
        log({"path": self.path, "kind": "get", "user": "", "answer": None, "body": None})
        self.reply(b'{"models": []}')

    def do_POST(self):
        body = self.body()
        path = self.path.split("?")[0]
        if path.endswith(":countTokens"):
            log({"path": self.path, "kind": "count", "user": "", "answer": None, "body": body})
            return self.reply(b'{"totalTokens": 10}')
        if not (path.endswith(":generateContent") or path.endswith(":streamGenerateContent")):
            log({"path": self.path, "kind": "other", "user": "", "answer": None, "body": body})
            return self.reply(b"{}")
        kind, answer = decide(body)
        log({"path": self.path, "kind": kind, "user": content_text(newest(body)),
             "answer": answer, "body": body})
        data = json.dumps(response(answer))
        if path.endswith(":streamGenerateContent"):
            return self.reply(f"data: {data}\r\n\r\n".encode(), "text/event-stream")
        self.reply(data.encode())


def dump(e):
    return (f"[{e['i']} +{e['t']}s] {e['kind']} {e['path'].split('/')[-1]} "
            f"user={e['user'][-120:]!r} answer={e['answer']}")


if __name__ == "__main__":
    sys.exit(serve(__doc__, Handler, dump))
