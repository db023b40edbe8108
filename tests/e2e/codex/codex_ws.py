#!/usr/bin/env python3
"""A JSON-RPC client for Codex's app-server control socket, stdlib only (used by run.py to
create threads and run turns the way Codex's TUI would).

The socket ($CODEX_HOME/app-server-control/app-server-control.sock) speaks WebSocket
(RFC 6455) over a Unix stream socket, one JSON-RPC message per text frame.

    c = ControlClient(sock_path, log_path)
    c.initialize()
    tid = c.request("thread/start", {"cwd": d})["thread"]["id"]
    c.request("turn/start", {...}); c.wait_for(lambda m: m["method"] == "turn/completed", 60)
    c.close()

Every message in both directions is logged as JSONL {"t", "dir", "msg"}.
"""
import base64
import json
import os
import queue
import socket
import struct
import threading
import time


class ControlClient:
    def __init__(self, sock_path, log_path, timeout=10):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(sock_path)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((
            "GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: " + key + "\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("control socket closed during the handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise ConnectionError("handshake refused: " + head.decode(errors="replace"))
        self.sock.settimeout(None)
        self.log = open(log_path, "a")
        self.lock = threading.Lock()
        self.next_id = 0
        self.pending = {}
        self.events = queue.Queue()
        self.seen = []  # every notification, in order
        threading.Thread(target=self._reader, daemon=True).start()

    # -- framing --------------------------------------------------------------------------
    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _send_frame(self, opcode, payload):
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        with self.lock:
            self.sock.sendall(head + mask + body)

    def _read_message(self):
        parts, first_op = [], None
        while True:
            b0, b1 = self._recv_exact(2)
            fin, op = b0 & 0x80, b0 & 0x0F
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._recv_exact(8))[0]
            mask = self._recv_exact(4) if b1 & 0x80 else None
            data = self._recv_exact(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if op == 0x9:  # ping
                self._send_frame(0xA, data)
                continue
            if op == 0xA:
                continue
            if op == 0x8:
                raise EOFError
            if op in (0x1, 0x2):
                first_op, parts = op, [data]
            else:
                parts.append(data)
            if fin:
                return b"".join(parts)

    # -- JSON-RPC -------------------------------------------------------------------------
    def _write_log(self, direction, msg):
        self.log.write(json.dumps({"t": round(time.time(), 3), "dir": direction, "msg": msg}) + "\n")
        self.log.flush()

    def send(self, msg):
        self._write_log("send", msg)
        self._send_frame(0x1, json.dumps(msg).encode())

    def _reader(self):
        try:
            while True:
                msg = json.loads(self._read_message())
                self._write_log("recv", msg)
                if "method" in msg and "id" in msg:
                    self.send({"jsonrpc": "2.0", "id": msg["id"],
                               "error": {"code": -32601, "message": "not supported"}})
                elif "method" in msg:
                    self.seen.append(msg)
                    self.events.put(msg)
                elif msg.get("id") in self.pending:
                    self.pending.pop(msg["id"]).put(msg)
        except (EOFError, OSError, ValueError):
            self.events.put({"method": "__eof__"})

    def request(self, method, params, timeout=60, raise_error=True):
        self.next_id += 1
        rid = self.next_id
        box = queue.Queue()
        self.pending[rid] = box
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        msg = box.get(timeout=timeout)
        if "error" in msg:
            if raise_error:
                raise RuntimeError(f"{method}: {msg['error']}")
            return msg
        return msg["result"]

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def initialize(self, name="wakeful-e2e"):
        res = self.request("initialize", {"clientInfo": {"name": name, "version": "0.1.0"},
                                          "capabilities": {"experimentalApi": True}})
        self.notify("initialized")
        return res

    def wait_for(self, pred, timeout):
        end = time.time() + timeout
        while True:
            left = end - time.time()
            if left <= 0:
                raise TimeoutError("no matching notification")
            try:
                msg = self.events.get(timeout=left)
            except queue.Empty:
                raise TimeoutError("no matching notification")
            if msg["method"] == "__eof__":
                raise EOFError("control socket closed")
            if pred(msg):
                return msg

    def close(self):
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()
