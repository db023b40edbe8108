#!/usr/bin/env python3
"""Live-view benchmarks for wakeful: the cost of `wakeful tui` and `wakeful web`
(with one headless Chromium on its page) under a load of ~1,000 events/s, and
what they do to an agent's line -> `events --follow` latency.

Usage:
    cargo build --release -p wakeful-cli
    python3 bench/view_bench.py [target/release/wakeful] [--monitors 400]
                                [--rate 1000] [--seconds 10] [--keep]

Needs tmux and chromium (Debian packages). One run, one temporary
WAKEFUL_HOME, three phases side by side:

  base  the load alone
  tui   the load + `wakeful tui --all-sessions` in a 160x45 tmux pane
  web   the load + `wakeful web` + headless Chromium showing its page

The load: a monitor gets at most 20 events in a burst, then 1 a second (the
rate limit, SPEC section 4), so 1,000 events/s cannot come from a few
monitors. Each phase starts --monitors fresh monitors (`cat FIFO`,
--batch-ms 0) and the script writes --rate lines a second round-robin into
their FIFOs, one write(2) per line: with 400 monitors each gets 2.5 lines/s,
so their bursts carry ~1,000 events/s for ~13 s (then suppression sets in).
The events/s the daemon actually wrote in the window is measured (its
last_seq) and printed; that is the rate the views had to show.

Latency: 10 more monitors (`cat FIFO`, --batch-ms 0, session "probe") get a
probe line every 200 ms in rotation (0.5/s each: never rate limited) while
`wakeful --json --session probe events --follow` runs for the whole run; the
time from the write(2) to the follower printing the line is one sample.

Measured per phase over the load window: CPU of the view process (utime +
stime from /proc, % of one core), its peak RSS (VmHWM), Chromium's CPU (all
processes of its group), the daemon's CPU, the TUI's draws per second (the
TUI writes a JSON line of counters every second when WAKEFUL_TUI_STATS names
a file), and the probe latency (median, p99, max). Python 3.11 standard
library only; everything started is stopped at the end (an alarm enforces
the wall limit).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# Shared with the other benchmarks (bench/benchlib.py, same folder).
from benchlib import BenchTimeout, kill_by_env, pct

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
WALL_LIMIT_S = 300
PROBES = 10
PROBE_EVERY_S = 0.2


def _alarm(_signum, _frame):
    raise BenchTimeout(f"benchmark exceeded {WALL_LIMIT_S} s")


def cpu_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0


def group_pids(pgid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                out.append(int(d))
        except (OSError, IndexError):
            continue
    return out


def group_ticks(pgid: int) -> int:
    return sum(cpu_ticks(p) for p in group_pids(pgid))


def status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Home:
    def __init__(self, exe: str, max_active: int):
        self.exe = exe
        self.dir = Path(tempfile.mkdtemp(prefix="wkb-view-"))
        (self.dir / "config.toml").write_text(
            f"[limits]\nmax_active_per_session = {max_active}\nmax_connections_per_process = 64\n"
        )
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("WAKEFUL_SESSION", "CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID")
        }
        self.env["WAKEFUL_HOME"] = str(self.dir)
        self.children: list[subprocess.Popen] = []

    def run(self, *args: str, timeout: float = 30) -> str:
        p = subprocess.run(
            [self.exe, *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if p.returncode != 0:
            raise RuntimeError(f"wakeful {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
        return p.stdout

    def json(self, *args: str):
        return json.loads(self.run("--json", *args))

    def popen(self, argv: list[str], **kw) -> subprocess.Popen:
        p = subprocess.Popen(argv, env=self.env, start_new_session=True, **kw)
        self.children.append(p)
        return p

    def socket_path(self) -> str:
        return str(self.dir / "wakeful.sock")


class Daemon:
    """A protocol connection for fast starts (no CLI process per monitor)."""

    def __init__(self, home: Home):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(home.socket_path())
        self.f = self.s.makefile("rwb")

    def call(self, request: dict):
        request = dict(request, v=1)
        self.f.write(json.dumps(request).encode() + b"\n")
        self.f.flush()
        reply = json.loads(self.f.readline())
        if reply["type"] != "ok":
            raise RuntimeError(f"{request['op']}: {reply}")
        return reply["result"]

    def start_cat(self, session: str, fifo: Path, description: str) -> str:
        r = self.call(
            {
                "op": "start",
                "session": session,
                "spec": {
                    "source": {"kind": "command", "command": f"exec cat {fifo}"},
                    "description": description,
                    "batch_ms": 0,
                    "timeout_ms": 3_600_000,
                },
                "env": {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                "cwd": "/tmp",
            }
        )
        return r["id"]


def open_writers(fifos: list[Path]) -> list[int]:
    fds = []
    for p in fifos:
        deadline = time.monotonic() + 20
        while True:
            try:
                fds.append(os.open(p, os.O_WRONLY | os.O_NONBLOCK))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no reader opened {p}")
                time.sleep(0.005)
    return fds


class Follower:
    """`events --follow --json` of the probe session; arrival times by token."""

    def __init__(self, home: Home):
        self.proc = home.popen(
            [home.exe, "--json", "--session", "probe", "events", "--follow"],
            stdout=subprocess.PIPE,
        )
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        fd = self.proc.stdout.fileno()
        buf = b""
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            now = time.monotonic_ns()
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                for l in e.get("lines") or []:
                    if l.startswith("probe-"):
                        with self.lock:
                            self.seen.setdefault(l, now)


def run_phase(name: str, home: Home, daemon: Daemon, args, probe_fds: list[int],
              follower: Follower, probe_counter: list[int], start_view) -> dict:
    session = f"load-{name}"
    fifo_dir = home.dir / f"fifo-{name}"
    fifo_dir.mkdir()
    fifos = []
    for i in range(args.monitors):
        p = fifo_dir / f"{i}.fifo"
        os.mkfifo(p)
        fifos.append(p)
    for i, p in enumerate(fifos):
        daemon.start_cat(session, p, f"load {name} {i}")
    fds = open_writers(fifos)
    view = start_view() if start_view else None
    time.sleep(args.settle)  # let the view catch up with history before measuring

    daemon_pid = int(home.json("status")["pid"])
    seq0 = int(home.json("status")["last_seq"])
    t0 = time.monotonic()
    view_cpu0 = view["cpu"]() if view else 0
    daemon_cpu0 = cpu_ticks(daemon_pid)
    sent: dict[str, int] = {}
    written = 0
    next_probe = t0
    line_no = 0
    while True:
        now = time.monotonic()
        elapsed = now - t0
        if elapsed >= args.seconds:
            break
        due = int(elapsed * args.rate)
        while written < due:
            fd = fds[written % len(fds)]
            line_no += 1
            try:
                os.write(fd, f"load {line_no} {'x' * 40}\n".encode())
            except BlockingIOError:
                pass  # the monitor is behind; the line is not counted as written
            written += 1
        if now >= next_probe:
            k = probe_counter[0]
            probe_counter[0] += 1
            token = f"probe-{name}-{k}"
            sent[token] = time.monotonic_ns()
            os.write(probe_fds[k % len(probe_fds)], (token + "\n").encode())
            next_probe += PROBE_EVERY_S
        time.sleep(0.0005)
    window = time.monotonic() - t0
    view_cpu1 = view["cpu"]() if view else 0
    daemon_cpu1 = cpu_ticks(daemon_pid)
    seq1 = int(home.json("status")["last_seq"])
    # Let the last probes arrive.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        with follower.lock:
            if all(t in follower.seen for t in sent):
                break
        time.sleep(0.01)
    with follower.lock:
        lat_ms = [(follower.seen[t] - s) / 1e6 for t, s in sent.items() if t in follower.seen]
    lost = len(sent) - len(lat_ms)
    result = {
        "phase": name,
        "window_s": window,
        "lines_written_per_s": written / window,
        "events_per_s": (seq1 - seq0) / window,
        "daemon_cpu_pct": 100 * (daemon_cpu1 - daemon_cpu0) / CLK_TCK / window,
        "latency_ms": (statistics.median(lat_ms), pct(lat_ms, 99), max(lat_ms)) if lat_ms else None,
        "probes": len(sent),
        "probes_lost": lost,
    }
    if view:
        result.update(view["finish"](view_cpu1 - view_cpu0, window))
    for fd in fds:
        os.close(fd)
    daemon.call({"op": "session_end", "session": session})
    return result


def tui_view(home: Home, exe: str, stats: Path):
    sock = f"wkb-view-{os.getpid()}"
    cmd = f"exec env WAKEFUL_HOME={home.dir} WAKEFUL_TUI_STATS={stats} {exe} tui --all-sessions"
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "v", "-x", "160", "-y", "45", cmd], check=True)
    pid = int(subprocess.run(["tmux", "-L", sock, "display", "-p", "-t", "v", "#{pane_pid}"],
                             capture_output=True, text=True, check=True).stdout)

    def finish(ticks: int, window: float) -> dict:
        rows = [json.loads(l) for l in stats.read_text().splitlines() if l.strip()]
        per_s = [b["draws"] - a["draws"] for a, b in zip(rows, rows[1:])]
        ev_s = [b["events"] - a["events"] for a, b in zip(rows, rows[1:])]
        out = {
            "view": "tui",
            "view_cpu_pct": 100 * ticks / CLK_TCK / window,
            "view_rss_mb": status_kb(pid, "VmRSS") / 1024,
            "view_peak_rss_mb": status_kb(pid, "VmHWM") / 1024,
            "draws_per_s_max": max(per_s) if per_s else None,
            "tui_events_per_s_max": max(ev_s) if ev_s else None,
        }
        subprocess.run(["tmux", "-L", sock, "send-keys", "-t", "v", "q"], check=False)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
            time.sleep(0.05)
        subprocess.run(["tmux", "-L", sock, "kill-server"], check=False, capture_output=True)
        return out

    return {"cpu": lambda: cpu_ticks(pid), "finish": finish}


def web_view(home: Home, exe: str):
    web = home.popen([exe, "web", "--port", "0"], stdout=subprocess.PIPE, text=True)
    url = web.stdout.readline().strip()
    profile = tempfile.mkdtemp(prefix="wkb-chromium-")
    chromium = home.popen(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--disable-dev-shm-usage", "--window-size=1400,900",
         f"--user-data-dir={profile}", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    state = {}

    def cpu() -> int:
        state.setdefault("chromium0", group_ticks(chromium.pid))
        state["chromium1"] = group_ticks(chromium.pid)
        return cpu_ticks(web.pid)

    def finish(ticks: int, window: float) -> dict:
        out = {
            "view": "web",
            "view_cpu_pct": 100 * ticks / CLK_TCK / window,
            "view_rss_mb": status_kb(web.pid, "VmRSS") / 1024,
            "view_peak_rss_mb": status_kb(web.pid, "VmHWM") / 1024,
            "chromium_cpu_pct": 100 * (state["chromium1"] - state["chromium0"]) / CLK_TCK / window,
            "chromium_rss_mb": sum(status_kb(p, "VmRSS") for p in group_pids(chromium.pid)) / 1024,
        }
        for p in (chromium, web):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
        shutil.rmtree(profile, ignore_errors=True)
        return out

    return {"cpu": cpu, "finish": finish}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exe", nargs="?", default=str(REPO / "target/release/wakeful"))
    ap.add_argument("--monitors", type=int, default=400)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--settle", type=float, default=3)
    ap.add_argument("--phases", default="base,tui,web", help="which phases, comma-separated")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    exe = os.path.abspath(args.exe)
    for tool in ("tmux", "chromium"):
        if not shutil.which(tool):
            print(f"{tool} is needed (apt-get install {tool})", file=sys.stderr)
            return 2
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(WALL_LIMIT_S)
    home = Home(exe, max_active=args.monitors + PROBES + 10)
    results = []
    try:
        home.run("status")  # starts the daemon
        daemon = Daemon(home)
        probe_dir = home.dir / "probe"
        probe_dir.mkdir()
        probe_fifos = [probe_dir / f"{i}.fifo" for i in range(PROBES)]
        for i, p in enumerate(probe_fifos):
            os.mkfifo(p)
            daemon.start_cat("probe", p, f"probe {i}")
        probe_fds = open_writers(probe_fifos)
        follower = Follower(home)
        time.sleep(0.5)
        counter = [0]
        stats = home.dir / "tui-stats.jsonl"
        for name, view in (
            ("base", None),
            ("tui", lambda: tui_view(home, exe, stats)),
            ("web", lambda: web_view(home, exe)),
        ):
            if name not in args.phases.split(","):
                continue
            r = run_phase(name, home, daemon, args, probe_fds, follower, counter, view)
            results.append(r)
            print(json.dumps(r), file=sys.stderr)
    finally:
        for p in home.children:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in home.children:
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        subprocess.run([exe, "daemon", "stop"], env=home.env, capture_output=True, timeout=30)
        left = kill_by_env("WAKEFUL_HOME", str(home.dir))
        if left:
            print(f"killed {left} leftover processes", file=sys.stderr)
        if not args.keep:
            shutil.rmtree(home.dir, ignore_errors=True)

    print(f"\nwakeful {exe}; {args.monitors} load monitors per phase, {args.rate} lines/s offered for {args.seconds:g} s; "
          f"{os.cpu_count()} cores\n")
    print("| phase | events/s written | view CPU (% of a core) | view RSS (peak) | Chromium CPU | TUI draws/s (max) | daemon CPU | line → `events --follow` p50 / p99 / max |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        lat = r["latency_ms"]
        lat_s = f"{lat[0]:.2f} / {lat[1]:.2f} / {lat[2]:.2f} ms ({r['probes']} probes, {r['probes_lost']} lost)" if lat else "–"
        view_cpu = f"{r['view_cpu_pct']:.1f} %" if "view_cpu_pct" in r else "–"
        rss = f"{r['view_rss_mb']:.1f} MB ({r['view_peak_rss_mb']:.1f} MB)" if "view_rss_mb" in r else "–"
        chrome = f"{r['chromium_cpu_pct']:.1f} % ({r['chromium_rss_mb']:.0f} MB)" if "chromium_cpu_pct" in r else "–"
        draws = str(r.get("draws_per_s_max")) if r.get("draws_per_s_max") is not None else "–"
        print(f"| {r['phase']} | {r['events_per_s']:.0f} | {view_cpu} | {rss} | {chrome} | {draws} | {r['daemon_cpu_pct']:.1f} % | {lat_s} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
