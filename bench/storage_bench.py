#!/usr/bin/env python3
"""Storage benchmarks for wakeful (docs/STORAGE.md): bytes on disk, and a soak.

Usage:
    cargo build --release -p wakeful-cli
    python3 bench/storage_bench.py [target/release/wakeful] [--minutes 30] [--skip-soak]
        [--upgrade-every SECONDS]

(1) Bytes on disk per million lines, side by side with the plain way of keeping
    them (`seq … > file`): a monitor prints 1,000,000 lines of 40 bytes
    (`wakeful watch --until exit`, and with the default rate limit as a plain
    monitor, whose flood is suppressed); the state directory's database, WAL,
    redo log and output files are measured once it ended, against the plain
    file the same command writes. Also with `[store] output_max = "16MiB"`:
    the cap keeps the head and the newest lines.

(2) A soak: `--monitors` (50) monitors at mixed rates — a tenth each at 1, 10,
    100, 1,000 and 5,000 lines a second, and the rest short ones that end and
    are started again every 20 s (so that retention has ended monitors to
    prune) — for `--minutes` with small caps (output_max 1 MiB, output_total
    24 MiB, max_size 48 MiB, max_age 2 min). Every 30 s: the state
    directory's bytes on disk, the daemon's RSS and open descriptors. At the
    start (after a minute) and at the end, line latency: a monitored `cat
    FIFO` read by `events --follow` against a line the script appends to a
    file that `tail -F | grep --line-buffered` follows, side by side
    (interleaved, random order); 300 samples a window.

Prints a Markdown report. Python 3.11 standard library only; the helpers are
benchlib's.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as db  # noqa: E402

LINE = "line %08g of a build log, some text\n"  # 40 bytes with the number


def du(path: Path) -> int:
    """Bytes the files under `path` take on disk (allocated blocks)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def parts(path: Path) -> dict:
    """The state directory's bytes on disk by kind of file (docs/STORAGE.md)."""
    out = {"db": 0, "wal": 0, "redo": 0, "output": 0, "log": 0, "other": 0}
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                n = os.lstat(os.path.join(root, f)).st_blocks * 512
            except FileNotFoundError:
                continue
            if f == "wakeful.db":
                k = "db"
            elif f == "wakeful.db-wal":
                k = "wal"
            elif f == "wakeful.db-redo":
                k = "redo"
            elif os.path.basename(root) == "output":
                k = "output"
            elif f.startswith("daemon.log"):
                k = "log"
            else:
                k = "other"
            out[k] += n
    return out


def store_bytes(home: db.Home) -> dict:
    out = {"database": 0, "output": 0}
    for name in ("wakeful.db", "wakeful.db-wal", "wakeful.db-redo"):
        p = home.dir / name
        if p.exists():
            out["database"] += p.stat().st_blocks * 512
    out["output"] = du(home.dir / "output")
    return out


def million(exe: str, config: str, watch: bool) -> dict:
    home = db.Home(exe, "million")
    (home.dir / "config.toml").write_text(config)
    cmd = f"seq -f {shlex.quote(LINE.strip())} 1 1000000"
    t0 = time.monotonic()
    if watch:
        home.run("watch", "--until", "exit", "-d", "million", "--", cmd, timeout=600)
    else:
        home.json("start", "-d", "million", "--", cmd)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if all(m["state"] == "ended" for m in home.json("list")):
                break
            time.sleep(0.2)
    took = time.monotonic() - t0
    home.status()
    # Everything in the tables, the WAL checkpointed: what stays on disk.
    home.run("prune")
    sizes = store_bytes(home)
    events = len(home.run("--json", "events").stdout.splitlines())
    plain = home.dir / "plain.log"
    subprocess.run(["sh", "-c", f"{cmd} > {shlex.quote(str(plain))}"], check=True)
    sizes["plain"] = plain.stat().st_blocks * 512
    sizes["events"] = events
    sizes["seconds"] = took
    home.close(keep=False)
    return sizes


def rss_fds(pid: int) -> tuple[int, int]:
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def latency_window(home: db.Home, tag: str, samples: int) -> dict:
    paths = {
        "wakeful": db.wakeful_latency(home, 10, samples, 0, 0.01, "lat", tag),
        "tail": db.tailgrep_latency(home, samples, 0.01),
    }
    res = db.interleaved(paths, 0.001)
    out = {}
    for k, v in res.items():
        s = sorted(v["samples"])
        out[k] = {"median_us": db.pct(s, 50) / 1000, "p99_us": db.pct(s, 99) / 1000, "n": len(s)}
    return out


def soak(exe: str, minutes: float, monitors: int, upgrade_every: float = 0) -> dict:
    home = db.Home(exe, "soak")
    (home.dir / "config.toml").write_text(
        "[limits]\nmax_active_per_session = 200\n"
        "[store]\noutput_max = \"1MiB\"\noutput_total = \"24MiB\"\n"
        "max_size = \"48MiB\"\nmax_age = \"2m\"\nkeep_free = \"1MiB\"\n"
    )
    rates = [1, 10, 100, 1000, 5000]
    steady = monitors // 2
    for i in range(steady):
        rate = rates[i % len(rates)]
        per = max(1, rate // 10)
        cmd = f"i=0; while :; do i=$((i+1)); seq -f \"m{i} line %g $i\" 1 {per}; sleep 0.1; done"
        home.json("--session", "soak", "start", "--persistent", "-d", f"steady-{rate}-{i}", "--", cmd)
    st = home.status()
    pid = st["pid"]
    short = monitors - steady
    samples = []
    t0 = time.monotonic()
    end = t0 + minutes * 60
    next_batch = t0
    next_sample = t0
    windows = {}
    started_short = 0
    upgrades = []
    next_upgrade = t0 + upgrade_every if upgrade_every else None
    while time.monotonic() < end:
        now = time.monotonic()
        if next_upgrade is not None and now >= next_upgrade:
            # `wakeful daemon upgrade` onto the same build: a real handover
            # of every running monitor (the daemon's pid stays).
            u0 = time.monotonic()
            r = subprocess.run([exe, "daemon", "upgrade"], env=home.env, capture_output=True, text=True)
            upgrades.append({"t": u0 - t0, "ms": (time.monotonic() - u0) * 1000, "ok": r.returncode == 0,
                             "said": (r.stdout + r.stderr).strip()})
            next_upgrade = time.monotonic() + upgrade_every
        if now >= next_batch:
            for j in range(short):
                home.json(
                    "--session", "short", "start", "-d", f"short-{started_short}",
                    "--", "seq -f 'short line %g' 1 20000; sleep 15",
                )
                started_short += 1
            next_batch = now + 20
        if now >= next_sample:
            rss, fds = rss_fds(pid)
            samples.append({"t": now - t0, "disk": du(home.dir), "parts": parts(home.dir), "rss": rss, "fds": fds})
            next_sample = now + 30
        if "start" not in windows and now - t0 >= 60:
            windows["start"] = latency_window(home, "w0", 300)
        if "end" not in windows and end - now <= 90:
            windows["end"] = latency_window(home, "w1", 300)
        time.sleep(0.5)
    rss, fds = rss_fds(pid)
    samples.append(
        {"t": time.monotonic() - t0, "disk": du(home.dir), "parts": parts(home.dir), "rss": rss, "fds": fds}
    )
    status = home.json("status")
    home.close(keep=False)
    return {"samples": samples, "windows": windows, "status": status, "short": started_short,
            "upgrades": upgrades, "pid": pid}


def mib(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("exe", nargs="?", default="target/release/wakeful")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--monitors", type=int, default=50)
    ap.add_argument("--skip-soak", action="store_true")
    ap.add_argument("--skip-million", action="store_true")
    ap.add_argument("--upgrade-every", type=float, default=0,
                    help="seconds between `wakeful daemon upgrade`s during the soak (0: none)")
    args = ap.parse_args()
    exe = str(Path(args.exe).resolve())
    print(f"# storage_bench ({subprocess.run([exe, '--version'], capture_output=True, text=True).stdout.strip()})\n")
    if not args.skip_million:
        print("## Bytes on disk per million lines (40-byte lines)\n")
        print("| run | database | output files | total | plain file | total ÷ plain | events | time |")
        print("|---|---|---|---|---|---|---|---|")
        for name, config, watch in [
            ("`watch --until exit` (one final event)", "", True),
            ("plain monitor, default rate limit (flood suppressed)", "", False),
            ("plain monitor, `output_max = \"16MiB\"`", "[store]\noutput_max = \"16MiB\"\n", False),
        ]:
            r = million(exe, config, watch)
            total = r["database"] + r["output"]
            print(
                f"| {name} | {mib(r['database'])} | {mib(r['output'])} | {mib(total)} | "
                f"{mib(r['plain'])} | {total / r['plain']:.2f}× | {r['events']} | {r['seconds']:.1f} s |"
            )
        print()
    if not args.skip_soak:
        r = soak(exe, args.minutes, args.monitors, args.upgrade_every)
        s = r["samples"]
        print(f"## Soak: {args.monitors} monitors, {args.minutes:g} min, {r['short']} short monitors started\n")
        print("| t (min) | state dir on disk | database | WAL | redo | output files | daemon log | daemon RSS | open fds |")
        print("|---|---|---|---|---|---|---|---|---|")
        step = max(1, len(s) // 12)
        for row in s[::step] + ([s[-1]] if (len(s) - 1) % step else []):
            p = row["parts"]
            print(
                f"| {row['t'] / 60:.1f} | {mib(row['disk'])} | {mib(p['db'])} | {mib(p['wal'])} | "
                f"{mib(p['redo'])} | {mib(p['output'])} | {mib(p['log'])} | {mib(row['rss'])} | {row['fds']} |"
            )
        half = s[len(s) // 2:]
        print(
            f"\nSecond half: disk {mib(min(x['disk'] for x in half))}–{mib(max(x['disk'] for x in half))}, "
            f"RSS {mib(min(x['rss'] for x in half))}–{mib(max(x['rss'] for x in half))}, "
            f"fds {min(x['fds'] for x in half)}–{max(x['fds'] for x in half)}."
        )
        ups = r["upgrades"]
        if ups:
            ms = sorted(u["ms"] for u in ups)
            failed = [u for u in ups if not u["ok"]]
            print(
                f"Upgrades: {len(ups)} (`wakeful daemon upgrade` every {args.upgrade_every:g} s), "
                f"{len(failed)} failed; each took {ms[len(ms) // 2]:.0f} ms median, {ms[-1]:.0f} ms at most "
                f"(the command's whole run: check, handover, exec, the new program's first answer); "
                f"the daemon's pid {'stayed' if r['status']['pid'] == r['pid'] else 'CHANGED'} "
                f"({r['pid']}), `status` says {r['status'].get('upgrades')} upgrades, "
                f"{r['status'].get('monitors_running')} monitors running at the end."
            )
            for u in failed[:3]:
                print(f"  failed at {u['t'] / 60:.1f} min: {u['said']}")
        st = r["status"].get("storage", {})
        lp = st.get("last_prune") or {}
        print(
            f"Pruned in all: {st.get('pruned_events', 0)} events of {st.get('pruned_monitors', 0)} monitors "
            f"({mib(st.get('pruned_bytes', 0))}); last: {lp.get('at', '—')}.\n"
        )
        print("| window | wakeful median / p99 (µs) | tail -F \\| grep median / p99 (µs) | ratio median / p99 |")
        print("|---|---|---|---|")
        for name in ("start", "end"):
            w = r["windows"].get(name)
            if not w:
                continue
            a, b = w["wakeful"], w["tail"]
            print(
                f"| {name} | {a['median_us']:.0f} / {a['p99_us']:.0f} | {b['median_us']:.0f} / {b['p99_us']:.0f} | "
                f"{a['median_us'] / b['median_us']:.2f} / {a['p99_us'] / b['p99_us']:.2f} |"
            )
        ws, we = r["windows"].get("start"), r["windows"].get("end")
        if ws and we:
            drift = (we["wakeful"]["median_us"] / we["tail"]["median_us"]) / (
                ws["wakeful"]["median_us"] / ws["tail"]["median_us"]
            )
            print(f"\nRatio at the end ÷ ratio at the start (median): {drift:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
