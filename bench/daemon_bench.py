#!/usr/bin/env python3
"""Daemon benchmarks for wakeful: event latency, `list` round trip, idle cost.

Usage:
    cargo build --release -p wakeful-cli
    python3 bench/daemon_bench.py [target/release/wakeful] [--samples 200] [--keep]

Three scenarios, measured side by side in one run; a Markdown table is printed
at the end (and nothing is written anywhere else).

(a) Latency: a line printed by a monitored command until `wakeful --json
    events --follow` prints it, versus a line appended to a file until
    `tail -n0 -F FILE | grep --line-buffered probe` prints it. The monitored
    command is `cat FIFO`; the script keeps each FIFO open for writing for the
    whole run, so one write(2) is the whole "print". Samples rotate over 20
    monitors with `--batch-ms 0` so that no monitor goes over its rate limit
    (burst 20 events, 1/s refill): each gets 1 warm-up line and N/20 samples.
    A second, smaller sample uses the default batch_ms (200) and >= 250 ms
    spacing, to show that a leading-edge line is not held back by the batch
    window. One more row reads the same stream straight from the socket (no
    CLI process), to separate the daemon's share from the client's. The
    paths are measured side by side: each round takes one sample of every
    path (wakeful's and the baselines), in a new random order, ~0.9 ms
    apart, so that the machine's drift over the run weighs on all alike.
(b) `wakeful list` with 100 running monitors (`sleep 600`): the whole CLI
    (exec + connect + round trip + print), and the bare socket round trip
    speaking the protocol from Python (persistent connection, and a new
    connection per request).
(c) Idle cost: daemon RSS, CPU and context switches (all threads) over a
    10 s window with 0 and with 200 idle monitors; then the wall time and
    daemon CPU of `wakeful session end` stopping those 200 monitors.

Every scenario gets a fresh temporary WAKEFUL_HOME (its daemon starts on
demand) and its daemon is stopped at the end; anything left over that carries
that WAKEFUL_HOME in its environment is killed. Python 3.11 standard library
only; the whole run takes a few minutes (an alarm enforces 400 s).

(d), with --flood: `seq 10000000` as a monitor (`wakeful watch`): the output file's
    sha256 against the generator's, delivered + suppressed lines against 10,000,000,
    the daemon's peak RSS, and the time to the final event against
    `seq 10000000 | cat | cat > file`.
(b) also: `list` over the socket and through the CLI with 1,000 running monitors.
(a) also: baselines of as many `tail -F | grep` pipelines as there are
    monitors, taking the samples round-robin as the monitors do. A single
    pipeline gets a line every ~10 ms and stays hot in the caches, while
    each monitor gets one every N × 10 ms; with as many pipelines, each
    pipeline waits as long between its lines as a monitor: like for like.
(a) also: the same monitors read through `wakeful mcp` as Claude Code channel
    notifications, and each path's ratio to the `tail -F | grep` baseline;
    the CPU time each side spends on a line (wakeful's processes against
    tail and grep), from /proc/PID/task/*/schedstat.
(a) also: monitors taken in turn instead of round-robin (`events --follow`,
    `wakeful mcp`, followed files): each monitor takes its share of the
    samples in a row, so that while its turn lasts it is as hot as the
    single pipeline is all along — the like-for-like comparison with that
    pipeline (only a turn's first line finds its monitor cold).
(a) also: one `tail -F` over as many files as monitors, each file with its
    own writer (`cat FIFO >> file`, or the script appending), `| grep`: the
    writers take the samples round-robin and are as cold between their
    lines as the monitors' `cat`, while the one reader stays as hot as the
    daemon — what one runs to watch that many jobs' logs without wakeful.
(a) also: monitors whose command only sleeps, the script writing each line
    into that command's stdout itself (`/proc/PID/fd/1`), round-robin, read
    by `events --follow` and through `wakeful mcp`: a line the command
    prints, with no `cat` relaying it — the same writer as the
    appended-file baselines (one `tail -F | grep`, one over as many files,
    as many pipelines), which it is compared with.
--samples-out FILE writes (a)'s raw samples (ns) by path and run, as JSON.
--runs K repeats (a) K times, each with a new daemon and new baselines: the
    rows pool all samples (a p99 of more samples), and each run's own ratios
    are listed with their range (how far one run's ratio can be trusted on
    this machine).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import select
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
WALL_LIMIT_S = 400
LAT_MONITORS = 20  # rotation for the batch_ms=0 latency sample (more with --samples > 300)
SAMPLES_PER_MONITOR = 15  # within the rate limit's burst of 20
MAX_ACTIVE = 250


class BenchTimeout(Exception):
    pass


def _alarm(_signum, _frame):
    raise BenchTimeout(f"benchmark exceeded {WALL_LIMIT_S} s")


# --------------------------------------------------------------------------
# helpers


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[k]


def cpu_ns(pid: int) -> int:
    """CPU time a process has used, all its threads, in ns (from
    /proc/PID/task/*/schedstat: no 10 ms tick resolution). 0 once it is gone."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return 0
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
            pass
    return total


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except FileNotFoundError:
        return []


# Processes whose CPU time per line is reported: a name and its pids, set by
# the latency paths (the daemon for wakeful's paths, tail and grep for each
# baseline).
CPU_PIDS: dict[str, list[int]] = {}


def summary_us(ns: list[int]) -> tuple[float, float, float]:
    us = [x / 1000 for x in ns]
    return statistics.median(us), pct(us, 99), max(us)


class LineReader:
    """Line reader on a raw fd, with timeouts (no Python-side buffering delay)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = b""

    def readline(self, timeout: float) -> bytes | None:
        deadline = time.monotonic() + timeout
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line, self.buf = self.buf[: i + 1], self.buf[i + 1 :]
                return line
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.fd], [], [], left)
            if not r:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise EOFError("stream closed")
            self.buf += chunk


class Home:
    """A temporary WAKEFUL_HOME and everything started under it."""

    def __init__(self, exe: str, name: str, max_active: int | None = None):
        self.exe = exe
        self.dir = Path(tempfile.mkdtemp(prefix=f"wkb-{name}-"))
        if max_active:
            (self.dir / "config.toml").write_text(
                f"[limits]\nmax_active_per_session = {max_active}\n"
            )
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k
            not in (
                "WAKEFUL_SESSION",
                "CLAUDE_CODE_SESSION_ID",
                "CODEX_THREAD_ID",
                "WAKEFUL_DAEMON_EXE",
            )
        }
        self.env["WAKEFUL_HOME"] = str(self.dir)
        self.children: list[subprocess.Popen] = []
        self.daemon_pid: int | None = None

    def run(self, *args: str, timeout: float = 20) -> subprocess.CompletedProcess:
        p = subprocess.run(
            [self.exe, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if p.returncode != 0:
            raise RuntimeError(
                f"wakeful {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}"
            )
        return p

    def json(self, *args: str) -> object:
        return json.loads(self.run("--json", *args).stdout)

    def popen(self, argv: list[str], **kw) -> subprocess.Popen:
        p = subprocess.Popen(argv, env=self.env, start_new_session=True, **kw)
        self.children.append(p)
        return p

    def status(self) -> dict:
        st = self.json("status")
        self.daemon_pid = int(st["pid"])
        return st

    def start(self, session: str, command: str, *flags: str) -> dict:
        return self.json("--session", session, "start", *flags, "--", command)

    def close(self, keep: bool) -> list[str]:
        """Stops the daemon and kills whatever this home started."""
        notes = []
        for p in self.children:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.children:
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=3)
        if (self.dir / "wakeful.sock").exists() or self.daemon_pid:
            try:
                subprocess.run(
                    [self.exe, "daemon", "stop"],
                    env=self.env,
                    capture_output=True,
                    timeout=15,
                )
            except subprocess.TimeoutExpired:
                notes.append(f"`wakeful daemon stop` timed out for {self.dir}")
        if self.daemon_pid:
            deadline = time.monotonic() + 10
            while alive(self.daemon_pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if alive(self.daemon_pid):
                notes.append(f"daemon {self.daemon_pid} still alive after stop; SIGKILL")
                try:
                    os.kill(self.daemon_pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        left = kill_by_env("WAKEFUL_HOME", str(self.dir))
        if left:
            notes.append(f"killed {left} leftover processes of {self.dir}")
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        return notes


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def kill_by_env(name: str, value: str) -> int:
    """Kills processes (of this user) whose environment has NAME=VALUE."""
    needle = f"{name}={value}".encode() + b"\0"
    me = os.getpid()
    n = 0
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read() + b"\0"
        except OSError:
            continue
        if b"\0" + needle in b"\0" + env:
            try:
                os.kill(int(d), signal.SIGKILL)
                n += 1
            except ProcessLookupError:
                pass
    return n


# --------------------------------------------------------------------------
# (a) latency


def wakeful_latency(
    home: Home,
    n_monitors: int,
    n_samples: int,
    batch_ms: int | None,
    gap_s: float,
    session: str,
    tag: str,
    via: str = "cli",
    in_turn: bool = False,
    direct: bool = False,
) -> dict:
    """`cat FIFO` monitors read by `events --follow` (`via` "cli"), by this
    script from the socket ("socket") or through `wakeful mcp` ("mcp"). The
    samples go round-robin over the monitors, or (`in_turn`) to one monitor
    after another, each taking its share in a row: a monitor is then as hot
    as the single pipeline while its turn lasts. With `direct`, no `cat`:
    each monitor's command writes its pid to a file and sleeps, and this
    script writes its lines into that command's stdout itself (opened
    through `/proc/PID/fd/1`) — a line printed by the command, with no
    process relaying it: the writer is this script on both sides, as in
    the appended-file baselines."""
    fifos = []
    commands = []
    for k in range(n_monitors):
        if direct:
            pid_file = home.dir / f"{tag}-pid-{k}"
            commands.append(f"echo $$ > {shlex.quote(str(pid_file))}; exec sleep 100000")
            continue
        path = home.dir / f"{tag}-fifo-{k}"
        os.mkfifo(path)
        # O_RDWR never blocks on a FIFO and keeps a writer for the whole run.
        fifos.append(os.open(path, os.O_RDWR))
        commands.append(f"cat {shlex.quote(str(path))}")
    flags = ["-d", f"{tag}-{{k}}"]
    if batch_ms is not None:
        flags += ["--batch-ms", str(batch_ms)]
    after = home.status()["last_seq"]
    for k in range(n_monitors):
        home.start(session, commands[k], *[f.replace("{k}", str(k)) for f in flags])
    if direct:
        # `start` returns once the command runs, but its shell may not have
        # written the pid yet: one deadline for all.
        deadline = time.monotonic() + 10.0
        for k in range(n_monitors):
            pid_file = home.dir / f"{tag}-pid-{k}"
            while not pid_file.exists() or not pid_file.read_text().strip():
                if time.monotonic() > deadline:
                    raise BenchTimeout(f"monitor {tag}-{k} never wrote its pid")
                time.sleep(0.01)
            fifos.append(os.open(f"/proc/{pid_file.read_text().strip()}/fd/1", os.O_WRONLY))
    wakeful = CPU_PIDS.setdefault("wakeful", [])
    if home.daemon_pid not in wakeful:
        wakeful.append(home.daemon_pid)
    if via == "socket":
        # The same stream without the CLI: the protocol spoken from Python.
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(home.dir / "wakeful.sock"))
        req = {"v": 1, "op": "events", "session": session, "after": after, "follow": True}
        conn.sendall(json.dumps(req).encode() + b"\n")
        reader = LineReader(conn.fileno())
        unwrap = lambda obj: obj.get("event", {})  # noqa: E731
    elif via == "mcp":
        # `wakeful mcp` as Claude Code runs it: events of its session are
        # pushed as notifications/claude/channel; the probe text is in
        # `content`, the kind in `meta`.
        env = dict(home.env, WAKEFUL_SESSION=session)
        server = subprocess.Popen(
            [home.exe, "mcp"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
            start_new_session=True,
        )
        home.children.append(server)
        wakeful.append(server.pid)
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        }
        server.stdin.write(json.dumps(init).encode() + b"\n")
        reader = LineReader(server.stdout.fileno())
        while json.loads(reader.readline(10) or b"{}").get("id") != 1:
            pass
        server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

        def unwrap(obj: dict) -> dict:
            if obj.get("method") != "notifications/claude/channel":
                return {}
            params = obj.get("params", {})
            return {"kind": params.get("meta", {}).get("kind"), "text": params.get("content", "")}
    else:
        follower = home.popen(
            [home.exe, "--json", "--session", session, "events", "--follow", "--after", str(after)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )
        wakeful.append(follower.pid)
        reader = LineReader(follower.stdout.fileno())
        unwrap = lambda obj: obj  # noqa: E731
    stats = {"suppressed": 0, "lost": 0, "coalesced": 0}

    def probe(fd: int, text: str) -> int | None:
        payload = (text + "\n").encode()
        t0 = time.perf_counter_ns()
        os.write(fd, payload)
        deadline = time.monotonic() + 3.0
        while True:
            line = reader.readline(max(0.0, deadline - time.monotonic()))
            t1 = time.perf_counter_ns()
            if line is None:
                stats["lost"] += 1
                return None
            ev = unwrap(json.loads(line))
            if ev.get("kind") == "suppressed":
                stats["suppressed"] += 1
            if text in ev.get("text", ""):
                if len(ev.get("lines", [1])) != 1 and ev.get("kind") == "lines":
                    stats["coalesced"] += 1
                return t1 - t0

    for k, fd in enumerate(fifos):  # warm-up: one line per monitor
        probe(fd, f"{tag}-warm-{k:04d}")
        time.sleep(gap_s)  # the first sample must not fall into a batch window
    stats["lost"] = 0
    samples = []
    for i in range(n_samples):
        dt = probe(fifos[monitor_of(i, n_monitors, n_samples, in_turn)], f"{tag}-probe-{i:06d}")
        if dt is not None:
            samples.append(dt)
        yield  # the driver sleeps the gap (and probes the other paths)
    # Anything still in flight (a late `suppressed` report) counts too.
    while (line := reader.readline(0.3)) is not None:
        if unwrap(json.loads(line)).get("kind") == "suppressed":
            stats["suppressed"] += 1
    for fd in fifos:
        os.close(fd)
    if via == "socket":
        conn.close()
    return {"samples": samples, **stats}


def tailgrep_latency(
    home: Home,
    n_samples: int,
    gap_s: float,
    via_cat: bool = False,
    n_pipes: int = 1,
    n_files: int = 1,
) -> dict:
    """`tail -n0 -F FILE | grep --line-buffered probe`. The script appends
    each line to FILE itself, or (`via_cat`) writes it into a FIFO that
    `cat FIFO >> FILE` copies: the same writer process as the wakeful
    monitors' `cat FIFO`, so both paths start with the same hop. With
    `n_pipes` > 1, that many pipelines (each its own file, `cat`, `tail` and
    `grep`) take the samples round-robin, as wakeful's monitors do: each
    pipeline then sits as long between its lines as a monitor does. With
    `n_files` > 1, one pipeline follows that many files (`tail -n0 -F F1 …
    FN | grep`), each with its own writer, and the samples go round-robin
    over the files: as many writers as monitors, each as cold between its
    lines as a monitor's `cat`, and one reader as hot as the daemon — what
    one would run to watch that many jobs' logs without wakeful."""
    tag = ("tail-cat" if via_cat else "tail") + (f"-x{n_pipes}" if n_pipes > 1 else "")
    tag += f"-f{n_files}" if n_files > 1 else ""
    fds, readers, pids = [], [], []
    for k in range(n_pipes):
        paths = [home.dir / f"{tag}-target-{k}-{f}.log" for f in range(n_files)]
        for f, path in enumerate(paths):
            path.write_bytes(b"")
            if via_cat:
                fifo = home.dir / f"{tag}-fifo-{k}-{f}"
                os.mkfifo(fifo)
                fds.append(os.open(fifo, os.O_RDWR))
                home.popen(
                    ["sh", "-c", f"exec cat {shlex.quote(str(fifo))} >> {shlex.quote(str(path))}"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            else:
                fds.append(os.open(path, os.O_WRONLY | os.O_APPEND))
        files = " ".join(shlex.quote(str(p)) for p in paths)
        pipeline = home.popen(
            ["sh", "-c", f"tail -n0 -F {files} | grep --line-buffered probe"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )
        reader = LineReader(pipeline.stdout.fileno())
        readers += [reader] * n_files
        # `sh -c 'tail … | grep …'` forks both; their CPU per line is reported.
        deadline = time.monotonic() + 5
        while len(kids := children(pipeline.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        pids += kids
    CPU_PIDS[tag] = pids
    # Warm-up: repeat until tail has opened the file and grep answers.
    for fd, reader in zip(fds, readers):
        for w in range(50):
            os.write(fd, f"probe-warm-{w}\n".encode())
            if reader.readline(0.1) is not None:
                break
        else:
            raise RuntimeError("tail -F | grep never answered")
        while reader.readline(0.1) is not None:
            pass
        time.sleep(gap_s)
    samples, lost = [], 0
    for i in range(n_samples):
        fd, reader = fds[i % len(fds)], readers[i % len(fds)]
        text = f"probe-{i:06d}"
        t0 = time.perf_counter_ns()
        os.write(fd, (text + "\n").encode())
        while True:
            line = reader.readline(3.0)
            t1 = time.perf_counter_ns()
            if line is None:
                lost += 1
                break
            if text.encode() in line:
                samples.append(t1 - t0)
                break
        yield
    for fd in fds:
        os.close(fd)
    return {"samples": samples, "lost": lost}


def monitor_of(i: int, n_monitors: int, n_samples: int, in_turn: bool) -> int:
    """The monitor that takes sample `i`: round-robin, or in turn (each its
    share of the samples in a row)."""
    if in_turn:
        return min(i // math.ceil(n_samples / n_monitors), n_monitors - 1)
    return i % n_monitors


def file_latency(
    home: Home, n_monitors: int, n_samples: int, gap_s: float, session: str, in_turn: bool = False
) -> dict:
    """`--file` monitors (inotify in the monitor's task), `--batch-ms 0`:
    the script appends a line to one of their files, the clock stops when
    `events --follow` prints it. Round-robin over `n_monitors` files (or,
    `in_turn`, one file after another, each its share in a row) keeps each
    monitor within the rate limit's burst."""
    paths = [home.dir / f"followed-{session}-{k}.log" for k in range(n_monitors)]
    for p in paths:
        p.write_bytes(b"")
    after = home.status()["last_seq"]
    for k, p in enumerate(paths):
        home.json("--session", session, "start", "--file", str(p), "-d", f"{session}-{k}", "--batch-ms", "0")
    follower = home.popen(
        [home.exe, "--json", "--session", session, "events", "--follow", "--after", str(after)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=0,
    )
    CPU_PIDS.setdefault("wakeful", []).append(follower.pid)
    reader = LineReader(follower.stdout.fileno())
    fds = [os.open(p, os.O_WRONLY | os.O_APPEND) for p in paths]
    stats = {"suppressed": 0, "lost": 0}

    def probe(fd: int, text: str) -> int | None:
        t0 = time.perf_counter_ns()
        os.write(fd, (text + "\n").encode())
        deadline = time.monotonic() + 3.0
        while True:
            line = reader.readline(max(0.0, deadline - time.monotonic()))
            t1 = time.perf_counter_ns()
            if line is None:
                stats["lost"] += 1
                return None
            ev = json.loads(line)
            if ev.get("kind") == "suppressed":
                stats["suppressed"] += 1
            if text in ev.get("text", ""):
                return t1 - t0

    for k, fd in enumerate(fds):
        probe(fd, f"file-warm-{k:04d}")
        time.sleep(gap_s)
    stats["lost"] = 0
    samples = []
    for i in range(n_samples):
        dt = probe(fds[monitor_of(i, n_monitors, n_samples, in_turn)], f"file-probe-{i:06d}")
        if dt is not None:
            samples.append(dt)
        yield
    for fd in fds:
        os.close(fd)
    return {"samples": samples, **stats}


def interleaved(paths: dict, gap_s: float, cpu: dict | None = None) -> dict:
    """Runs latency generators (each yields after a sample and returns its
    results) side by side: every round takes one sample of each path, in a
    new random order, `gap_s` apart — so that the machine's drift over the
    run weighs on every path alike and the ratios compare like with like.
    With `cpu`, it is filled with the CPU time (ns) each process group of
    CPU_PIDS used from the end of the first round (every path set up and
    warmed up) to the end of the last, and the rounds that took."""
    import random

    rng = random.Random(1)
    live, out = dict(paths), {}
    start: dict[str, int] = {}
    rounds = 0
    while live:
        if rounds == 1 and cpu is not None:
            start = {k: sum(cpu_ns(p) for p in pids) for k, pids in CPU_PIDS.items()}
        rounds += 1
        keys = list(live)
        rng.shuffle(keys)
        for k in keys:
            try:
                next(live[k])
            except StopIteration as done:
                out[k] = done.value
                del live[k]
            time.sleep(gap_s)
        if not live and cpu is not None:
            # The last round ended with the generators' own cleanup; the
            # processes are still there (they go with their home).
            cpu.update({k: sum(cpu_ns(p) for p in CPU_PIDS[k]) - v for k, v in start.items()})
            cpu["rounds"] = rounds - 2  # the rounds that took a sample, after the first
    return out


# --------------------------------------------------------------------------
# (b) list round trip


def recv_line(sock: socket.socket, buf: bytearray) -> bytes:
    while True:
        i = buf.find(b"\n")
        if i >= 0:
            line = bytes(buf[: i + 1])
            del buf[: i + 1]
            return line
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise EOFError("daemon closed the connection")
        buf += chunk


LIST_REQ = json.dumps({"v": 1, "op": "list", "session": None}).encode() + b"\n"


def socket_list(sock_path: Path, n: int, persistent: bool) -> tuple[list[int], int, int]:
    samples = []
    size = count = 0
    s = None
    buf = bytearray()
    for _ in range(n):
        t0 = time.perf_counter_ns()
        if s is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(str(sock_path))
            buf = bytearray()
        s.sendall(LIST_REQ)
        line = recv_line(s, buf)
        t1 = time.perf_counter_ns()
        samples.append(t1 - t0)
        if not persistent:
            s.close()
            s = None
        size = len(line)
    reply = json.loads(line)
    assert reply["type"] == "ok", reply
    count = len(reply["result"])
    if s is not None:
        s.close()
    return samples, size, count


def cli_list(home: Home, session: str, n: int) -> tuple[list[int], int]:
    samples, count = [], 0
    for _ in range(n):
        t0 = time.perf_counter_ns()
        p = home.run("--json", "--session", session, "list")
        t1 = time.perf_counter_ns()
        samples.append(t1 - t0)
        count = len(json.loads(p.stdout))
    return samples, count


# --------------------------------------------------------------------------
# (c) idle cost


def start_sleepers_socket(home: Home, session: str, n: int) -> None:
    """Starts `n` `sleep 600` monitors over one socket connection."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(home.dir / "wakeful.sock"))
    buf = bytearray()
    for k in range(n):
        req = {
            "v": 1,
            "op": "start",
            "session": session,
            "spec": {"source": {"kind": "command", "command": "sleep 600"}, "description": f"s{k}"},
            "env": {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            "cwd": "/",
        }
        conn.sendall(json.dumps(req).encode() + b"\n")
        reply = json.loads(recv_line(conn, buf))
        if reply.get("type") != "ok":
            raise RuntimeError(f"start {k}: {reply}")
    conn.close()


def flood(home: Home, lines: int) -> dict:
    """`seq N` as a monitor: its output file against the generator's bytes,
    delivered + suppressed against N, the daemon's peak RSS, and the time
    from start to the final event against `seq N | cat | cat > file`."""
    import hashlib

    home.status()
    gen = f"seq {lines}"
    want = hashlib.sha256(subprocess.run(["sh", "-c", gen], capture_output=True).stdout).hexdigest()
    plain = home.dir / "plain.out"
    t0 = time.perf_counter()
    subprocess.run(["sh", "-c", f"{gen} | cat | cat > {shlex.quote(str(plain))}"], check=True)
    base_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = subprocess.run(
        [home.exe, "--json", "watch", "--timeout-ms", "600000", "--", gen],
        env=home.env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    wk_s = time.perf_counter() - t0
    events = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    from datetime import datetime

    def ts(kind: str) -> float:
        e = next(e for e in events if e["kind"] == kind)
        return datetime.fromisoformat(e["ts"].replace("Z", "+00:00")).timestamp()

    # The pipeline alone, by the daemon's clock: `started` to `stopped`
    # (millisecond timestamps), without the CLI's start and printing.
    pipe_s = ts("stopped") - ts("started")
    delivered = sum(len(e.get("lines", [])) for e in events if e["kind"] == "lines")
    suppressed = sum(e.get("count", 0) for e in events if e["kind"] == "suppressed")
    out_path = home.json("list")[0]["output_path"]
    got = hashlib.sha256(Path(out_path).read_bytes()).hexdigest()
    hwm_kib = 0
    for line in open(f"/proc/{home.daemon_pid}/status"):
        if line.startswith("VmHWM:"):
            hwm_kib = int(line.split()[1])
    return {
        "lines": lines,
        "sha_equal": got == want,
        "delivered": delivered,
        "suppressed": suppressed,
        "wakeful_s": wk_s,
        "pipeline_s": pipe_s,
        "baseline_s": base_s,
        "peak_rss_mib": hwm_kib / 1024,
    }


def proc_snapshot(pid: int) -> dict:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state): utime is field 14, stime field 15.
    cpu_ticks = int(fields[11]) + int(fields[12])
    rss_kib = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_kib = int(line.split()[1])
    ctx = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            v = nv = 0
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        v = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        nv = int(line.split()[1])
            ctx[tid] = v + nv
        except FileNotFoundError:
            pass
    return {"t": time.monotonic(), "cpu": cpu_ticks, "rss_kib": rss_kib, "ctx": ctx}


def idle_window(pid: int, seconds: float) -> dict:
    a = proc_snapshot(pid)
    time.sleep(seconds)
    b = proc_snapshot(pid)
    wall = b["t"] - a["t"]
    switches = sum(b["ctx"][t] - a["ctx"].get(t, 0) for t in b["ctx"])
    return {
        "rss_mib": b["rss_kib"] / 1024,
        "cpu_pct": (b["cpu"] - a["cpu"]) / CLK_TCK / wall * 100,
        "ctx_per_s": switches / wall,
        "threads": len(b["ctx"]),
        "threads_gone": len(set(a["ctx"]) - set(b["ctx"])),
    }


def start_sleepers(home: Home, session: str, n: int, first: int = 0) -> list[int]:
    times = []
    for i in range(first, first + n):
        t0 = time.perf_counter_ns()
        home.start(session, "sleep 600", "-d", f"idle-{i}")
        times.append(time.perf_counter_ns() - t0)
    return times


# --------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wakeful", nargs="?", default=str(REPO / "target/release/wakeful"))
    ap.add_argument("--samples", type=int, default=200, help="latency samples (default 200)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary WAKEFUL_HOMEs")
    ap.add_argument("--flood", action="store_true", help="also (d): a 10,000,000-line flood")
    ap.add_argument("--latency-only", action="store_true", help="only (a), the latency rows")
    ap.add_argument("--samples-out", metavar="FILE", help="also write (a)'s samples (ns), by path and run, as JSON")
    ap.add_argument(
        "--runs",
        type=int,
        default=1,
        help="(a) this many times, each with a new daemon; the rows pool every run's samples "
        "and each run's own ratios are listed (default 1)",
    )
    args = ap.parse_args()
    # Each latency monitor stays within its rate limit's burst: a larger
    # sample (a steadier p99) takes more monitors.
    global LAT_MONITORS
    LAT_MONITORS = max(LAT_MONITORS, math.ceil(args.samples / SAMPLES_PER_MONITOR))
    # Every `tail -F` and every followed-file monitor holds an inotify
    # instance: past the user's limit, tail falls back to polling once a
    # second and the rows mean nothing.
    try:
        limit = int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    except (OSError, ValueError):
        limit = None
    needed = 4 * LAT_MONITORS + 4 + 8  # + the single tails (four) + headroom
    if limit is not None and needed > limit:
        print(
            f"--samples {args.samples} takes {LAT_MONITORS} monitors a path, and with the "
            f"round-robin baselines about {needed} inotify instances, over this machine's "
            f"limit of {limit} (fs.inotify.max_user_instances); take fewer samples a run "
            f"(400 or less) and more runs (--runs)",
            file=sys.stderr,
        )
        return 2
    exe = str(Path(args.wakeful).resolve())
    if not os.access(exe, os.X_OK):
        print(f"no wakeful binary at {exe}; build it with `cargo build --release -p wakeful-cli`", file=sys.stderr)
        return 2
    for tool in ("tail", "grep", "sh", "cat", "sleep"):
        if shutil.which(tool) is None:
            print(f"`{tool}` is required", file=sys.stderr)
            return 2

    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    tail_v = subprocess.run(["tail", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    grep_v = subprocess.run(["grep", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    cmd = " ".join(shlex.quote(a) for a in ["python3", *sys.argv])
    print(f"# wakeful daemon benchmark — {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    print(f"command: {cmd}")
    print(f"binary:  {exe} ({version})")
    print(f"machine: nproc={os.cpu_count()} · kernel {platform.release()} · {platform.machine()} · Python {platform.python_version()}")
    print(f"baseline: {tail_v}; {grep_v}")
    print(f"load average at start: {open('/proc/loadavg').read().split()[0]} (other work on the machine skews tails)")
    sys.stdout.flush()

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(WALL_LIMIT_S)
    t_start = time.monotonic()
    homes: list[Home] = []
    notes: list[str] = []
    res: dict = {}

    def new_home(name: str, max_active: int | None = None) -> Home:
        h = Home(exe, name, max_active)
        homes.append(h)
        return h

    def close(h: Home) -> None:
        notes.extend(h.close(args.keep))
        homes.remove(h)

    try:
        # (a) latency ---------------------------------------------------------
        print("\n(a) latency ...", flush=True)
        res["a_cpu"], res["a_runs"] = {}, []
        raw: list[dict] = []
        for run in range(args.runs):
            if args.runs > 1:
                print(f"    run {run + 1} of {args.runs} ...", flush=True)
            ha = new_home("lat", MAX_ACTIVE)
            CPU_PIDS.clear()
            cpu: dict = {}
            one = interleaved(
                {
                    "a0": wakeful_latency(ha, LAT_MONITORS, args.samples, 0, 0.010, "lat", "b0"),
                    "a0s": wakeful_latency(ha, LAT_MONITORS, args.samples, 0, 0.010, "lats", "bs", via="socket"),
                    "a0m": wakeful_latency(ha, LAT_MONITORS, args.samples, 0, 0.010, "latm", "bm", via="mcp"),
                    "a_tail": tailgrep_latency(ha, args.samples, 0.010),
                    "a_tailcat": tailgrep_latency(ha, args.samples, 0.010, via_cat=True),
                    "a_file": file_latency(ha, LAT_MONITORS, args.samples, 0.010, "latf"),
                    "a_tailx": tailgrep_latency(ha, args.samples, 0.010, n_pipes=LAT_MONITORS),
                    "a_tailcatx": tailgrep_latency(ha, args.samples, 0.010, via_cat=True, n_pipes=LAT_MONITORS),
                    "a_tailcatf": tailgrep_latency(ha, args.samples, 0.010, via_cat=True, n_files=LAT_MONITORS),
                    "a_tailf": tailgrep_latency(ha, args.samples, 0.010, n_files=LAT_MONITORS),
                    "a0t": wakeful_latency(ha, LAT_MONITORS, args.samples, 0, 0.010, "latt", "bt", in_turn=True),
                    "a0d": wakeful_latency(ha, LAT_MONITORS, args.samples, 0, 0.010, "latd", "bdir", direct=True),
                    "a0md": wakeful_latency(
                        ha, LAT_MONITORS, args.samples, 0, 0.010, "latmd", "bmdir", via="mcp", direct=True
                    ),
                    "a0mt": wakeful_latency(
                        ha, LAT_MONITORS, args.samples, 0, 0.010, "latmt", "bmt", via="mcp", in_turn=True
                    ),
                    "a_filet": file_latency(ha, LAT_MONITORS, args.samples, 0.010, "latft", in_turn=True),
                },
                0.010 / 11,
                cpu=cpu,
            )
            if run == 0:
                res["a_def"] = interleaved(
                    {"d": wakeful_latency(ha, 1, 20, None, 0.250, "latdef", "bd")}, 0.250
                )["d"]
            close(ha)
            res["a_runs"].append(ratios(one))
            raw.append({key: r["samples"] for key, r in one.items()})
            if args.samples_out:
                Path(args.samples_out).write_text(json.dumps(raw))
            for key, r in one.items():
                pooled = res.setdefault(key, {"samples": [], "lost": 0})
                pooled["samples"] += r["samples"]
                for k in ("lost", "suppressed", "coalesced"):
                    if k in r:
                        pooled[k] = pooled.get(k, 0) + r[k]
            for key, ns in cpu.items():
                res["a_cpu"][key] = res["a_cpu"].get(key, 0) + ns
        if args.latency_only:
            raise StopIteration

        # (d) a flood of 10,000,000 lines -------------------------------------
        if args.flood:
            print("(d) flood: 10,000,000 lines ...", flush=True)
            hd = new_home("flood")
            res["d"] = flood(hd, 10_000_000)
            close(hd)

        # (b) list round trip + (c) 200 idle monitors -------------------------
        print("(b) list round trip with 100 monitors ...", flush=True)
        hb = new_home("list", MAX_ACTIVE)
        hb.status()
        res["start_ns"] = start_sleepers(hb, "bench", 100)
        time.sleep(0.5)
        res["b_cli"] = cli_list(hb, "bench", 20)
        sock = hb.dir / "wakeful.sock"
        res["b_sock"] = socket_list(sock, 200, persistent=True)
        res["b_sock_new"] = socket_list(sock, 200, persistent=False)

        print("(c) idle cost: 200 monitors, 10 s; then session end ...", flush=True)
        res["start_ns"] += start_sleepers(hb, "bench", 100, first=100)
        st = hb.status()
        if st["monitors_running"] != 200:
            notes.append(f"expected 200 running monitors, status says {st['monitors_running']}")
        time.sleep(2.0)  # let start-up work (counters, started events) settle
        res["c200"] = idle_window(hb.daemon_pid, 10.0)
        res["b_sock200"] = socket_list(sock, 200, persistent=True)
        # Stopping them all: wall time and the daemon's CPU meanwhile.
        before = proc_snapshot(hb.daemon_pid)
        t0 = time.monotonic()
        hb.run("--session", "bench", "session", "end", "bench", timeout=60)
        res["end200_s"] = time.monotonic() - t0
        res["end200_cpu_s"] = (proc_snapshot(hb.daemon_pid)["cpu"] - before["cpu"]) / CLK_TCK
        close(hb)

        print("(b) list round trip with 1,000 monitors ...", flush=True)
        hk = new_home("list1000", 1000)
        hk.status()
        start_sleepers_socket(hk, "k", 1000)
        time.sleep(1.0)
        res["b_sock1000"] = socket_list(hk.dir / "wakeful.sock", 100, persistent=True)
        res["b_cli1000"] = cli_list(hk, "k", 10)
        hk.run("--session", "k", "session", "end", "k", timeout=90)
        close(hk)

        print("(c) idle cost: 0 monitors, 10 s ...", flush=True)
        hc = new_home("idle0")
        hc.status()
        time.sleep(2.0)
        res["c0"] = idle_window(hc.daemon_pid, 10.0)
        close(hc)
    except StopIteration:
        pass
    except BenchTimeout as e:
        notes.append(str(e))
        print(f"ERROR: {e}", file=sys.stderr)
    finally:
        signal.alarm(0)
        for h in list(homes):
            notes.extend(h.close(args.keep))

    elapsed = time.monotonic() - t_start
    print_report(res, notes, elapsed, args.samples)
    return 0 if not notes or all(n.startswith("killed") for n in notes) else 1


def fmt(x: float, unit: str = "") -> str:
    if x >= 100:
        return f"{x:,.0f}{unit}"
    if x >= 10:
        return f"{x:.1f}{unit}"
    return f"{x:.2f}{unit}"


# What each latency path and each baseline is called in the ratio rows.
PATH_NAMES = {
    "a0": "`events --follow`",
    "a0s": "socket",
    "a0m": "MCP channel",
    "a_file": "file source → `events --follow`",
    "a0t": "`events --follow`, monitors in turn",
    "a0d": "`events --follow`, the command's stdout written directly",
    "a0md": "MCP channel, the command's stdout written directly",
    "a0mt": "MCP channel, monitors in turn",
    "a_filet": "file source in turn → `events --follow`",
}
BASELINE_NAMES = {
    "a_tailcat": "`cat` → `tail -F \\| grep`",
    "a_tail": "`tail -F \\| grep`",
    "a_tailcatx": "as many `cat` → `tail -F \\| grep` as monitors",
    "a_tailx": "as many `tail -F \\| grep` as monitors",
    "a_tailcatf": "one `tail -F \\| grep` over as many `cat`-fed files as monitors",
    "a_tailf": "one `tail -F \\| grep` over as many files as monitors",
}
# The ratio rows: (path, its baseline), in the order they are printed.
RATIOS = (
    ("a0", "a_tailcat"),
    ("a0s", "a_tailcat"),
    ("a0m", "a_tailcat"),
    ("a0", "a_tail"),
    ("a_file", "a_tail"),
    ("a0", "a_tailcatx"),
    ("a0s", "a_tailcatx"),
    ("a0m", "a_tailcatx"),
    ("a_file", "a_tailx"),
    ("a0", "a_tailcatf"),
    ("a0m", "a_tailcatf"),
    ("a_file", "a_tailf"),
    ("a0t", "a_tailcat"),
    ("a0d", "a_tail"),
    ("a0d", "a_tailf"),
    ("a0d", "a_tailx"),
    ("a0md", "a_tail"),
    ("a0md", "a_tailf"),
    ("a0mt", "a_tailcat"),
    ("a_filet", "a_tail"),
)


# The event hub's targets (docs/BENCHMARKS.md): a bound on the ratio, median
# and p99, and the comparisons that check it. Like for like: both sides' writers
# as hot (a monitor's turn against the one pipeline) or as cold (27 monitors
# round-robin against 27 `cat`-fed files, in one `tail` or 27 pipelines), or
# the same writer (this script, writing into a command's stdout or appending
# to a file). The last row of each target sets 27 cold writers against one hot
# one: shown, not counted.
TARGETS = (
    ("line → `events --follow`", 1.0, (("a0t", "a_tailcat"), ("a0", "a_tailcatf"), ("a0", "a_tailcatx"), ("a0d", "a_tail"), ("a0d", "a_tailf")), ("a0", "a_tailcat")),
    ("line → MCP channel", 1.2, (("a0mt", "a_tailcat"), ("a0m", "a_tailcatf"), ("a0m", "a_tailcatx"), ("a0md", "a_tail"), ("a0md", "a_tailf")), ("a0m", "a_tailcat")),
    ("file source, append → reader", 1.0, (("a_filet", "a_tail"), ("a_file", "a_tailf"), ("a_file", "a_tailx")), ("a_file", "a_tail")),
)


def print_targets(samples: dict[str, list[float]]) -> None:
    """Each target's like-for-like comparisons, median / p99 ratio and
    whether both are within the bound, from samples pooled by path."""
    print("| target | comparison | median / p99 | within |")
    print("|---|---|---:|---|")
    for target, bound, like, unlike in TARGETS:
        for key, base in (*like, unlike):
            a, b = samples.get(key), samples.get(base)
            if not a or not b:
                continue
            med = statistics.median(a) / statistics.median(b)
            p99 = pct(a, 99) / pct(b, 99)
            within = "yes" if med <= bound and p99 <= bound else "no"
            if (key, base) == unlike:
                within += " (not like for like: one hot writer)"
            print(f"| {target} ≤ {bound:.1f}× | {PATH_NAMES[key]} ÷ {BASELINE_NAMES[base]} | {med:.2f} / {p99:.2f} | {within} |")


def ratios(res: dict) -> dict:
    """Each ratio row's (median, p99) ratio to its baseline, from `res`."""
    out = {}
    for key, base in RATIOS:
        r, b = res.get(key), res.get(base)
        if r and r["samples"] and b and b["samples"]:
            out[(PATH_NAMES[key], BASELINE_NAMES[base])] = (
                statistics.median(r["samples"]) / statistics.median(b["samples"]),
                pct(r["samples"], 99) / pct(b["samples"], 99),
            )
    return out


def print_report(res: dict, notes: list[str], elapsed: float, n: int) -> None:
    print()
    if "a0" in res:
        a0, ad, at = res["a0"], res["a_def"], res["a_tail"]
        print("### (a) Line-to-reader latency (µs)\n")
        print("| path | samples | median | p99 | max | lost | suppressed events |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        rows = [
            (f"wakeful: `cat FIFO` monitor → `events --follow` (batch_ms 0, {LAT_MONITORS} monitors round-robin)", a0),
            ("wakeful, same but read from the socket by Python (no CLI process in the path)", res.get("a0s")),
            ("wakeful: same monitors → `wakeful mcp` → `notifications/claude/channel`", res.get("a0m")),
            ("baseline: `cat FIFO >> file` → `tail -n0 -F | grep --line-buffered` (the same writer as the monitors)", res.get("a_tailcat")),
            (f"wakeful: append to a followed file (`--file`, {LAT_MONITORS} monitors round-robin) → `events --follow`", res.get("a_file")),
            ("baseline: append to file → `tail -n0 -F | grep --line-buffered`", at),
            (f"baseline: `cat FIFO >> file` → `tail -n0 -F | grep`, {LAT_MONITORS} pipelines round-robin (as many as monitors)", res.get("a_tailcatx")),
            (f"baseline: append to file → `tail -n0 -F | grep`, {LAT_MONITORS} pipelines round-robin", res.get("a_tailx")),
            (f"baseline: {LAT_MONITORS} `cat FIFO >> file` round-robin → one `tail -n0 -F` over the {LAT_MONITORS} files `| grep`", res.get("a_tailcatf")),
            (f"baseline: append to {LAT_MONITORS} files round-robin → one `tail -n0 -F` over them `| grep`", res.get("a_tailf")),
            (f"wakeful: `cat FIFO` monitors in turn ({LAT_MONITORS}, each its share of the samples in a row) → `events --follow`", res.get("a0t")),
            (f"wakeful: {LAT_MONITORS} monitors round-robin, the line written straight into the command's stdout (`/proc/PID/fd/1`, no `cat`) → `events --follow`", res.get("a0d")),
            ("wakeful: the same, written straight into the command's stdout → `wakeful mcp` → `notifications/claude/channel`", res.get("a0md")),
            ("wakeful: the same, in turn → `wakeful mcp` → `notifications/claude/channel`", res.get("a0mt")),
            (f"wakeful: followed files in turn ({LAT_MONITORS} monitors) → `events --follow`", res.get("a_filet")),
            ("wakeful: default batch_ms 200, one monitor, 250 ms gap (leading edge)", ad),
        ]
        for name, r in rows:
            if r is None:
                continue
            if r["samples"]:
                med, p99, mx = summary_us(r["samples"])
                print(f"| {name} | {len(r['samples'])} | {fmt(med)} | {fmt(p99)} | {fmt(mx)} | {r['lost']} | {r.get('suppressed', '—')} |")
            else:
                print(f"| {name} | 0 | — | — | — | {r['lost']} | {r.get('suppressed', '—')} |")
        runs = res.get("a_runs", [])
        pooled = f" (all {len(runs)} runs' samples)" if len(runs) > 1 else ""
        print(f"| ratio to its baseline{pooled} | | median | p99 | | | |")
        for (name, base_name), (med, p99) in ratios(res).items():
            print(f"| {name} ÷ {base_name} | | {med:.2f} | {p99:.2f} | | | |")
        if len(runs) > 1:
            print("\nEach run's own ratios (median / p99), and their range:\n")
            print("| ratio | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " | range |")
            print("|---|" + "---:|" * (len(runs) + 1))
            for key, base in RATIOS:
                name, base_name = PATH_NAMES[key], BASELINE_NAMES[base]
                got = [r[(name, base_name)] for r in runs if (name, base_name) in r]
                if len(got) != len(runs):
                    continue
                cells = " | ".join(f"{m:.2f} / {q:.2f}" for m, q in got)
                lo_m, hi_m = min(m for m, _ in got), max(m for m, _ in got)
                lo_p, hi_p = min(q for _, q in got), max(q for _, q in got)
                print(f"| {name} ÷ {base_name} | {cells} | {lo_m:.2f}–{hi_m:.2f} / {lo_p:.2f}–{hi_p:.2f} |")
        print("\nAgainst the targets (every run's samples):\n")
        print_targets({k: v["samples"] for k, v in res.items() if isinstance(v, dict) and "samples" in v})
        cpu = res.get("a_cpu") or {}
        if cpu.get("rounds"):
            rounds = cpu["rounds"]
            print(f"CPU time per line over the {rounds} rounds after each run's first (/proc/PID/task/*/schedstat), µs: "
                  f"wakeful (daemon, the five `events --follow` processes and the three `wakeful mcp`; 9 lines a round: "
                  f"`cat` ×5 paths + commands' stdout written directly ×2 + followed files ×2) "
                  f"{cpu.get('wakeful', 0) / 1000 / (9 * rounds):.1f} · "
                  f"`tail -F | grep` behind `cat` {cpu.get('tail-cat', 0) / 1000 / rounds:.1f} · "
                  f"`tail -F | grep` on an appended file {cpu.get('tail', 0) / 1000 / rounds:.1f} · "
                  f"the same, {LAT_MONITORS} pipelines round-robin: {cpu.get(f'tail-cat-x{LAT_MONITORS}', 0) / 1000 / rounds:.1f} · "
                  f"{cpu.get(f'tail-x{LAT_MONITORS}', 0) / 1000 / rounds:.1f}; "
                  f"one pipeline over {LAT_MONITORS} files: {cpu.get(f'tail-cat-f{LAT_MONITORS}', 0) / 1000 / rounds:.1f} · "
                  f"{cpu.get(f'tail-f{LAT_MONITORS}', 0) / 1000 / rounds:.1f}. "
                  "The writer (`cat`, or the script) is not counted on either side.")
        print()
    if "d" in res:
        d = res["d"]
        print("### (d) Flood: `seq 10000000` as a monitor\n")
        print("| output file sha256 = generator's | delivered + suppressed | daemon peak RSS (MiB) | `watch` wall (s) | `started` → `stopped` (s) | `seq \\| cat \\| cat > file` (s) | throughput ratio (wall / pipeline) |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        print(f"| {d['sha_equal']} | {d['delivered']:,} + {d['suppressed']:,} = {d['delivered'] + d['suppressed']:,} | {d['peak_rss_mib']:.1f} | {d['wakeful_s']:.2f} | {d['pipeline_s']:.2f} | {d['baseline_s']:.2f} | {d['baseline_s'] / d['wakeful_s']:.2f} / {d['baseline_s'] / max(d['pipeline_s'], 0.001):.2f} |")
        print()
    if "b_cli" in res:
        print("### (b) `list` round trip, 100 running monitors (ms)\n")
        print("| what | runs | median | p99 | max | reply |")
        print("|---|---:|---:|---:|---:|---|")
        cli, cnt = res["b_cli"]
        ms = [x / 1e6 for x in cli]
        print(f"| `wakeful --json list` (process exec + connect + round trip + print) | {len(ms)} | {fmt(statistics.median(ms))} | {fmt(pct(ms, 99))} | {fmt(max(ms))} | {cnt} monitors |")
        for key, label in (
            ("b_sock", "socket `list`, one persistent connection"),
            ("b_sock_new", "socket `list`, new connection per request"),
            ("b_sock200", "socket `list`, persistent connection, **200** monitors"),
            ("b_sock1000", "socket `list`, persistent connection, **1,000** monitors"),
        ):
            if key in res:
                s, size, cnt = res[key]
                ms = [x / 1e6 for x in s]
                print(f"| {label} | {len(ms)} | {fmt(statistics.median(ms), '')} | {fmt(pct(ms, 99))} | {fmt(max(ms))} | {cnt} monitors, {size / 1024:.0f} KiB |")
        if "b_cli1000" in res:
            cli, cnt = res["b_cli1000"]
            ms = [x / 1e6 for x in cli]
            print(f"| `wakeful --json list`, **1,000** monitors | {len(ms)} | {fmt(statistics.median(ms))} | {fmt(pct(ms, 99))} | {fmt(max(ms))} | {cnt} monitors |")
        if res.get("start_ns"):
            ms = [x / 1e6 for x in res["start_ns"]]
            print(f"| (for reference) `wakeful --json start -- sleep 600` | {len(ms)} | {fmt(statistics.median(ms))} | {fmt(pct(ms, 99))} | {fmt(max(ms))} | — |")
        print()
    if "c0" in res or "c200" in res:
        print("### (c) Idle daemon over a 10 s window\n")
        print("| idle monitors | RSS (MiB) | CPU % | context switches/s (all threads) | threads |")
        print("|---:|---:|---:|---:|---:|")
        for key, label in (("c0", "0"), ("c200", "200 (`sleep 600`)")):
            if key in res:
                r = res[key]
                gone = f" ({r['threads_gone']} exited)" if r["threads_gone"] else ""
                print(f"| {label} | {r['rss_mib']:.1f} | {r['cpu_pct']:.2f} | {r['ctx_per_s']:.1f} | {r['threads']}{gone} |")
        print()
        print(f"CPU is utime+stime of the daemon process from /proc/<pid>/stat (resolution 1/{CLK_TCK} s, i.e. {100 / CLK_TCK / 10:.2f} % over 10 s); monitored commands are not included.")
    if "end200_s" in res:
        print(f"`wakeful session end` of the 200 idle monitors took {res['end200_s']:.2f} s of wall time and {res['end200_cpu_s']:.2f} s of daemon CPU.")
    print(f"Latency sample: {n} requested; each latency monitor got 1 warm-up line and ≤ {math.ceil(n / LAT_MONITORS)} samples, within the rate limit (burst 20, 1/s).")
    print(f"Total wall time: {elapsed:.1f} s; load average at end: {open('/proc/loadavg').read().split()[0]}.")
    for note in notes:
        print(f"NOTE: {note}")


if __name__ == "__main__":
    sys.exit(main())
