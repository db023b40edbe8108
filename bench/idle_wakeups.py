#!/usr/bin/env python3
"""Wake-ups of an idle wakeful daemon (issue 40, part 3).

Starts a daemon in a temporary WAKEFUL_HOME with N sleeping monitors
(`sleep 100000` commands), waits for it to settle, then counts the
daemon's context switches (voluntary + nonvoluntary, summed over all its
threads from /proc/PID/task/*/status) over a window. With --baseline it
measures an older binary the same way, side by side in one run.

    bench/idle_wakeups.py --bin target/release/wakeful [--baseline OLD] \
        [--monitors 200] [--window 60] [--settle 30]

Python 3 standard library only; Linux (/proc).
"""

import argparse
import glob
import json
import os
import subprocess
import tempfile
import time


def switches(pid):
    """Context switches of every thread of `pid`, and the thread count."""
    total = 0
    threads = 0
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            with open(status) as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
            threads += 1
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return total, threads


def run(binary, monitors, window, settle):
    home = tempfile.mkdtemp(prefix="wk-idle-", dir="/tmp")
    env = dict(os.environ, WAKEFUL_HOME=home, WAKEFUL_SESSION="idle-bench")
    for key in ("CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID"):
        env.pop(key, None)

    def wk(*args, session="idle-bench"):
        # A session holds a few persistent monitors at most: one each.
        return subprocess.run([binary, *args], env=dict(env, WAKEFUL_SESSION=session), check=True,
                              capture_output=True, text=True,
                              stdin=subprocess.DEVNULL).stdout

    try:
        for i in range(monitors):
            wk("start", "-d", f"sleeper {i}", "--persistent",
               "--", "sleep 100000", session=f"idle-bench-{i}")
        status = json.loads(wk("--json", "status"))
        pid = status["pid"]
        time.sleep(settle)  # let start-up work (folds, the first size check) end
        before, threads = switches(pid)
        t0 = time.monotonic()
        time.sleep(window)
        after, _ = switches(pid)
        elapsed = time.monotonic() - t0
        return {"binary": binary, "monitors": monitors, "threads": threads,
                "window_s": round(elapsed, 1), "wakeups": after - before}
    finally:
        subprocess.run([binary, "daemon", "stop"], env=env, capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=60)
        subprocess.run(["rm", "-rf", home])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default="target/release/wakeful", help="the build measured")
    p.add_argument("--baseline", help="an older build, measured the same way")
    p.add_argument("--monitors", type=int, default=200)
    p.add_argument("--window", type=float, default=60.0, help="seconds counted")
    p.add_argument("--settle", type=float, default=30.0,
                   help="seconds before counting: start-up writes arm one size check 10 s "
                        "later, and tokio's blocking threads end 10 s after their last use")
    a = p.parse_args()
    builds = [("baseline", a.baseline)] if a.baseline else []
    builds.append(("this", a.bin))
    for name, binary in builds:
        r = run(binary, a.monitors, a.window, a.settle)
        print(f"{name:9} {r['wakeups']:6} wake-ups in {r['window_s']} s "
              f"({r['monitors']} sleeping monitors, {r['threads']} threads)  {binary}")


if __name__ == "__main__":
    main()
