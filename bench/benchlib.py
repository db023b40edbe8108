"""Shared pieces of wakeful's benchmark scripts (bench/*.py).

A temporary `WAKEFUL_HOME` with everything started under it ([`Home`]), a
line reader with timeouts, CPU time from /proc, percentiles, and the latency
paths that several scripts measure side by side ([`interleaved`]): `cat FIFO`
monitors read by `events --follow`, from the socket or through `wakeful mcp`
([`wakeful_latency`]), followed files ([`file_latency`]) and the
`tail -F | grep` baselines ([`tailgrep_latency`]), with the names and ratio
rows the reports print. Python 3.11 standard library only.
"""

from __future__ import annotations

import json
import math
import os
import select
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchTimeout(Exception):
    pass



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
    script from the socket ("socket"), through `wakeful mcp` ("mcp"), by
    `wakeful wait --follow` ("wait"; it does not hand its stdout over, so
    its process is one more wake-up on a line's way), or each by the
    `wakeful watch` that started it ("watch"; one watch process a monitor,
    each handing its stdout over, as `events` does). The
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
    readers: list[LineReader] = []
    for k in range(n_monitors):
        k_flags = [f.replace("{k}", str(k)) for f in flags]
        if via == "watch":
            # `watch` starts the monitor and prints its events until it ends.
            watcher = home.popen(
                [home.exe, "--json", "--session", session, "watch", "--timeout-ms", "3600000", *k_flags, "--", commands[k]],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                bufsize=0,
            )
            readers.append(LineReader(watcher.stdout.fileno()))
            # Its `started` event says the monitor is there.
            while json.loads(readers[-1].readline(10) or b'{"kind":"started"}').get("kind") != "started":
                pass
        else:
            home.start(session, commands[k], *k_flags)
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
    elif via == "watch":
        reader = None  # each monitor's own, in `readers`
        unwrap = lambda obj: obj  # noqa: E731
    else:
        if via == "wait":
            # A lossless stream of the session's waking events: the `wait`
            # process reads them from the socket and prints each batch.
            argv = [home.exe, "--json", "--session", session, "wait", "--follow", "--consumer", f"{tag}-wait"]
        else:
            argv = [home.exe, "--json", "--session", session, "events", "--follow", "--after", str(after)]
        follower = home.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
        wakeful.append(follower.pid)
        reader = LineReader(follower.stdout.fileno())
        unwrap = lambda obj: obj  # noqa: E731
    if via != "watch":
        readers = [reader] * n_monitors
    stats = {"suppressed": 0, "lost": 0, "coalesced": 0}

    def probe(k: int, text: str) -> int | None:
        fd, reader = fifos[k], readers[k]
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

    for k in range(len(fifos)):  # warm-up: one line per monitor
        probe(k, f"{tag}-warm-{k:04d}")
        time.sleep(gap_s)  # the first sample must not fall into a batch window
    stats["lost"] = 0
    samples = []
    for i in range(n_samples):
        dt = probe(monitor_of(i, n_monitors, n_samples, in_turn), f"{tag}-probe-{i:06d}")
        if dt is not None:
            samples.append(dt)
        yield  # the driver sleeps the gap (and probes the other paths)
    # Anything still in flight (a late `suppressed` report) counts too.
    for reader in dict.fromkeys(readers):
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


# The event hub's targets (set in the history of docs/BENCHMARKS.md): a bound on the ratio, median
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
