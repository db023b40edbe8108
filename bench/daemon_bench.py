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

(d), with --flood: `seq 10000000` as a monitor (`wakeful watch`, `output_max`
    256 MiB so that the output is kept whole): its output (`wakeful output --raw`)
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
--headline runs only the equal-wake-ups comparison, side by side: a monitored
    `cat FIFO` (the script writes the line into the FIFO) read by `events
    --follow`, through `wakeful mcp`, by its own `wakeful watch` and by `wait
    --follow`, and a followed file the script appends to; against the script
    appending the line to a file that `tail -n0 -F | grep --line-buffered`
    follows. Each row says how many processes wake on the line's way (the
    script's read included): three on each side for `events`, the channel
    and `watch` (`cat`, the daemon, the reader; `events`, `wakeful mcp` and
    `watch` hand their stdout to the daemon), as for `tail` and `grep`.
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
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (  # noqa: E402
    CLK_TCK,
    CPU_PIDS,
    RATIOS,
    PATH_NAMES,
    BASELINE_NAMES,
    REPO,
    BenchTimeout,
    Home,
    fmt,
    file_latency,
    interleaved,
    pct,
    print_targets,
    ratios,
    summary_us,
    tailgrep_latency,
    wakeful_latency,
)

WALL_LIMIT_S = 400
LAT_MONITORS = 20  # rotation for the batch_ms=0 latency sample (more with --samples > 300)
SAMPLES_PER_MONITOR = 15  # within the rate limit's burst of 20
MAX_ACTIVE = 250



def _alarm(_signum, _frame):
    raise BenchTimeout(f"benchmark exceeded {WALL_LIMIT_S} s")



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
    # The output file is kept in segments (docs/STORAGE.md): `output --raw`
    # reads them in order, byte for byte.
    mon_id = home.json("list")[0]["id"]
    raw = subprocess.run([home.exe, "output", mon_id, "--raw"], env=home.env, capture_output=True, timeout=120).stdout
    got = hashlib.sha256(raw).hexdigest()
    # The peak, and what is resident now split into the process's own
    # memory (heap, stacks) and pages of files it maps (its binary, libc).
    status = {}
    for line in open(f"/proc/{home.daemon_pid}/status"):
        key, _, value = line.partition(":")
        if key in ("VmHWM", "RssAnon", "RssFile"):
            status[key] = int(value.split()[0])
    hwm_kib = status.get("VmHWM", 0)
    return {
        "lines": lines,
        "sha_equal": got == want,
        "delivered": delivered,
        "suppressed": suppressed,
        "wakeful_s": wk_s,
        "pipeline_s": pipe_s,
        "baseline_s": base_s,
        "peak_rss_mib": hwm_kib / 1024,
        "anon_mib": status.get("RssAnon", 0) / 1024,
        "file_mib": status.get("RssFile", 0) / 1024,
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
    ap.add_argument(
        "--headline",
        action="store_true",
        help="only the equal-wake-ups comparison (docs/BENCHMARKS.md's headline): each reader "
        "against a script appending to a file that `tail -F | grep` follows, with the processes "
        "woken on each side",
    )
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
        if args.headline:
            print("\nheadline: equal wake-ups ...", flush=True)
            res["h"] = headline(new_home, close, args.runs, args.samples)
            raise StopIteration
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
            # 10,000,000 lines are 78.9 MB: over the default cap of one output
            # file (64 MiB, which keeps the head and the newest lines), so the
            # byte-for-byte check gets a cap that holds them all.
            (hd.dir / "config.toml").write_text('[store]\noutput_max = "256MiB"\n')
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


# The headline's paths: (key, what reads the line, processes woken from the
# write to the script's read, which ones). The baseline is last.
HEADLINE = (
    ("h_cli", "`cat FIFO` monitor → `events --follow`", 3, "`cat`, the daemon, the reader (`events` handed its stdout over)"),
    ("h_cli_rr", "the same, the monitors round-robin (each `cat` cold between its lines)", 3, "`cat`, the daemon, the reader"),
    ("h_mcp", "`cat FIFO` monitor → `wakeful mcp` channel notification", 3, "`cat`, the daemon, the reader (`wakeful mcp` handed its stdout over)"),
    ("h_watch", "`wakeful watch -- cat FIFO`", 3, "`cat`, the daemon, the reader (`watch` handed its stdout over)"),
    ("h_wait", "`cat FIFO` monitor → `wait --follow`", 4, "`cat`, the daemon, `wait`, the reader"),
    ("h_file", "append to a `--file` monitor's file → `events --follow`", 2, "the daemon, the reader"),
    ("h_tail", "append to a file → `tail -n0 -F FILE \\| grep --line-buffered`", 3, "`tail`, `grep`, the reader"),
)


def headline(new_home, close, runs: int, n: int) -> dict:
    """The equal-wake-ups comparison, side by side in one run: a monitored
    `cat FIFO` whose FIFO this script writes a line into, read by `events
    --follow`, through `wakeful mcp`, by the `watch` that started it and by
    `wait --follow`, and a followed file this script appends to; against
    this script appending the line to a file that one `tail -F | grep
    --line-buffered` follows. The monitors take the samples in turn (each
    its share in a row, within its rate limit's burst), so that a monitor's
    `cat` is as warm as the one `tail` is all along. Samples of every run
    pooled."""
    n_mon = max(1, math.ceil(n / SAMPLES_PER_MONITOR))
    out: dict = {}
    for run in range(runs):
        if runs > 1:
            print(f"    run {run + 1} of {runs} ...", flush=True)
        h = new_home("head", MAX_ACTIVE)
        CPU_PIDS.clear()
        one = interleaved(
            {
                "h_cli": wakeful_latency(h, n_mon, n, 0, 0.010, "hc", "hc", in_turn=True),
                "h_cli_rr": wakeful_latency(h, n_mon, n, 0, 0.010, "hr", "hr"),
                "h_mcp": wakeful_latency(h, n_mon, n, 0, 0.010, "hm", "hm", via="mcp", in_turn=True),
                "h_watch": wakeful_latency(h, n_mon, n, 0, 0.010, "hw", "hw", via="watch", in_turn=True),
                "h_wait": wakeful_latency(h, n_mon, n, 0, 0.010, "hq", "hq", via="wait", in_turn=True),
                "h_file": file_latency(h, n_mon, n, 0.010, "hf", in_turn=True),
                "h_tail": tailgrep_latency(h, n, 0.010),
            },
            0.010 / 8,
        )
        close(h)
        for key, r in one.items():
            pooled = out.setdefault(key, {"samples": [], "lost": 0, "suppressed": 0, "runs": []})
            pooled["samples"] += r["samples"]
            pooled["lost"] += r["lost"]
            pooled["suppressed"] += r.get("suppressed", 0)
            pooled["runs"].append(r["samples"])
    return out


def print_headline(h: dict) -> None:
    base = h["h_tail"]["samples"]
    b50, b95 = statistics.median(base), pct(base, 95)
    print("### Equal wake-ups: line written → line read (µs)\n")
    print("| path | processes woken | samples | median | p95 | p99 | ÷ `tail -F \\| grep`: median / p95 | each run's median ratio | lost | suppressed |")
    print("|---|---|---:|---:|---:|---:|---|---|---:|---:|")
    for key, name, woken, which in HEADLINE:
        r = h.get(key)
        if not r or not r["samples"]:
            print(f"| {name} | {woken}: {which} | 0 | — | — | — | — | — | {r['lost'] if r else '—'} | — |")
            continue
        s = r["samples"]
        m, p95, p99 = statistics.median(s) / 1000, pct(s, 95) / 1000, pct(s, 99) / 1000
        if key == "h_tail":
            ratio, each = "(baseline)", ""
        else:
            ratio = f"{statistics.median(s) / b50:.2f} / {pct(s, 95) / b95:.2f}"
            each = ", ".join(
                f"{statistics.median(a) / statistics.median(b):.2f}"
                for a, b in zip(r["runs"], h["h_tail"]["runs"])
                if a and b
            )
        sup = r["suppressed"] if key != "h_tail" else "—"
        print(f"| {name} | {woken}: {which} | {len(s)} | {fmt(m)} | {fmt(p95)} | {fmt(p99)} | {ratio} | {each} | {r['lost']} | {sup} |")
    print()


def print_report(res: dict, notes: list[str], elapsed: float, n: int) -> None:
    print()
    if "h" in res:
        print_headline(res["h"])
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
        print("| output file sha256 = generator's | delivered + suppressed | daemon peak RSS (MiB); after: anon + file | `watch` wall (s) | `started` → `stopped` (s) | `seq \\| cat \\| cat > file` (s) | throughput ratio (wall / pipeline) |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        print(f"| {d['sha_equal']} | {d['delivered']:,} + {d['suppressed']:,} = {d['delivered'] + d['suppressed']:,} | {d['peak_rss_mib']:.1f}; {d['anon_mib']:.1f} + {d['file_mib']:.1f} | {d['wakeful_s']:.2f} | {d['pipeline_s']:.2f} | {d['baseline_s']:.2f} | {d['baseline_s'] / d['wakeful_s']:.2f} / {d['baseline_s'] / max(d['pipeline_s'], 0.001):.2f} |")
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
    if "h" in res:
        print(f"Samples: {n} a path and run, each monitor its {SAMPLES_PER_MONITOR} in a row after 1 warm-up line (within the rate limit: burst 20, 1/s); rounds in a new random order, every path once a round.")
    else:
        print(f"Latency sample: {n} requested; each latency monitor got 1 warm-up line and ≤ {math.ceil(n / LAT_MONITORS)} samples, within the rate limit (burst 20, 1/s).")
    print(f"Total wall time: {elapsed:.1f} s; load average at end: {open('/proc/loadavg').read().split()[0]}.")
    for note in notes:
        print(f"NOTE: {note}")


if __name__ == "__main__":
    sys.exit(main())
