#!/usr/bin/env python3
"""Makes docs/img/tui.png: `wakeful tui` on a few demo monitors, in tmux,
captured with its colours (capture-pane -e), drawn as HTML and photographed
by headless Chromium.

Usage: python3 docs/img/tui_screenshot.py [target/release/wakeful]
Needs tmux and chromium. Everything it starts is stopped at the end.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PALETTE = ["#1e1e1e", "#e05561", "#8cc265", "#d18f52", "#4aa5f0", "#c162de", "#42b3c2", "#d7dae0"]
BRIGHT = ["#5c6370", "#ff616e", "#a5e075", "#f0a45d", "#4dc4ff", "#de73ff", "#4cd1e0", "#e6e6e6"]
FG, BG = "#d7dae0", "#1e1e1e"


def to_html(text: str) -> str:
    out = []
    fg, bg, bold, ul, rev = None, None, False, False, False
    for part in re.split(r"(\x1b\[[0-9;]*m)", text):
        m = re.fullmatch(r"\x1b\[([0-9;]*)m", part)
        if m:
            codes = [int(c) if c else 0 for c in m.group(1).split(";")]
            i = 0
            while i < len(codes):
                c = codes[i]
                if c == 0:
                    fg, bg, bold, ul, rev = None, None, False, False, False
                elif c == 1:
                    bold = True
                elif c == 4:
                    ul = True
                elif c == 7:
                    rev = True
                elif c == 22:
                    bold = False
                elif c == 24:
                    ul = False
                elif c == 27:
                    rev = False
                elif 30 <= c <= 37:
                    fg = PALETTE[c - 30]
                elif 90 <= c <= 97:
                    fg = BRIGHT[c - 90]
                elif c == 39:
                    fg = None
                elif 40 <= c <= 47:
                    bg = PALETTE[c - 40]
                elif 100 <= c <= 107:
                    bg = BRIGHT[c - 100]
                elif c == 49:
                    bg = None
                elif c in (38, 48) and i + 2 < len(codes) and codes[i + 1] == 5:
                    n = codes[i + 2]
                    col = PALETTE[n] if n < 8 else BRIGHT[n - 8] if n < 16 else None
                    if c == 38:
                        fg = col
                    else:
                        bg = col
                    i += 2
                i += 1
            continue
        if not part:
            continue
        f, b = fg or FG, bg or BG
        if rev:
            f, b = b, f
        style = f"color:{f};background:{b};" + ("font-weight:bold;" if bold else "") + ("text-decoration:underline;" if ul else "")
        out.append(f'<span style="{style}">{html.escape(part)}</span>')
    return "".join(out)


def main() -> int:
    exe = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else REPO / "target/release/wakeful")
    home = Path(tempfile.mkdtemp(prefix="wk-shot-"))
    env = dict(os.environ, WAKEFUL_HOME=str(home), WAKEFUL_SESSION="demo")
    sock = f"wk-shot-{os.getpid()}"
    profile = tempfile.mkdtemp(prefix="wk-shot-chromium-")

    def wk(*args: str) -> str:
        return subprocess.run([exe, *args], env=env, capture_output=True, text=True, check=True).stdout.strip()

    try:
        wk("start", "-d", "unit tests", "--until", "exit", "--",
           "echo 'running 42 tests'; echo 'test store::append ... ok'; echo 'test store::recover ... FAILED'; "
           "echo 'error: test failed, to rerun pass `-p store --lib`'; exit 101")
        wk("start", "-d", "dev server", "--", "echo 'listening on :8080'; i=0; while true; do i=$((i+1)); "
           "echo \"GET /api/items 200 ${i}ms\"; sleep 0.7; done")
        wk("start", "-d", "api errors", "--filter", "ERROR|panic", "--", "i=0; while true; do i=$((i+1)); "
           "echo \"INFO request $i\"; [ $((i % 9)) = 0 ] && echo \"ERROR upstream timeout (request $i)\"; sleep 0.2; done")
        wk("start", "-d", "log flood", "--", "i=0; while [ $i -lt 4000 ]; do i=$((i+1)); echo \"flood line $i\"; done; sleep 600")
        time.sleep(4)
        cmd = f"exec env WAKEFUL_HOME={home} WAKEFUL_SESSION=demo {exe} tui"
        subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "v", "-x", "150", "-y", "38", cmd], check=True)
        time.sleep(2.5)
        subprocess.run(["tmux", "-L", sock, "send-keys", "-t", "v", "/", "GET", "Enter"], check=True)
        time.sleep(1.2)
        screen = subprocess.run(["tmux", "-L", sock, "capture-pane", "-e", "-p", "-t", "v"],
                                capture_output=True, text=True, check=True).stdout
        page = home / "tui.html"
        page.write_text(
            "<!doctype html><meta charset=utf-8><style>body{margin:0;background:%s}"
            "pre{margin:0;padding:10px;font:14px/1.25 'DejaVu Sans Mono',monospace;color:%s}</style><pre>%s</pre>"
            % (BG, FG, to_html(screen.rstrip("\n")))
        )
        out = HERE / "tui.png"
        subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}",
             "--window-size=1290,700", f"--screenshot={out}", page.as_uri()],
            check=True, capture_output=True, timeout=60,
        )
        print(out)
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
        subprocess.run([exe, "daemon", "stop"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(profile, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
