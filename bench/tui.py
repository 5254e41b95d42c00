"""Benchmark (issue 7): start-up time of `cm` to its first screen in a real terminal.

Method: a fresh temporary home configured with `cm config init` (a model, a key) and one without
any configuration. Each run starts the real `cm` console script in a new tmux pane (a real
pseudo-terminal, 100x32) and polls `tmux capture-pane` every 5 ms from the moment the pane is
created until the screen shows the Home title ("cm · Common Memory") or, unconfigured, the first
setup screen ("1/4 Provider"); then Escape quits it. The poll adds up to ~5 ms plus one
capture-pane call (~2 ms). For scale, `cm --version` (the click CLI without the UI) is timed as
spawn-to-exit. Prints a markdown table (`--write` puts it into docs/benchmarks.md).
Usage: `python bench/tui.py [--runs 10] [--write]` (needs tmux).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, machine, summary, write_section

HOME_TITLE = "cm · Common Memory"
SETUP_TITLE = "1/4 Provider"


def _tmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10)


def time_to_screen(home: str, needle: str, name: str) -> float:
    """Milliseconds from creating the pane running `cm` until ``needle`` is on its screen."""
    started = time.perf_counter()
    _tmux("new-session", "-d", "-s", name, "-x", "100", "-y", "32", "-e", f"COMMON_MEMORY_HOME={home}", CM)
    try:
        deadline = started + 20
        while time.perf_counter() < deadline:
            if needle in _tmux("capture-pane", "-p", "-t", name).stdout:
                return (time.perf_counter() - started) * 1000
            time.sleep(0.005)
        raise RuntimeError(f"{needle!r} did not appear within 20 s")
    finally:
        _tmux("send-keys", "-t", name, "Escape")
        time.sleep(0.2)
        _tmux("kill-session", "-t", name)


def time_version() -> float:
    started = time.perf_counter()
    subprocess.run([CM, "--version"], capture_output=True, check=True, timeout=30)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("bench/tui.py needs tmux (Debian: apt-get install tmux)")
    root = tempfile.mkdtemp(prefix="cm-bench-tui-")
    try:
        configured = os.path.join(root, "configured")
        env = dict(os.environ, COMMON_MEMORY_HOME=configured)
        subprocess.run([CM, "config", "init", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                        "--api-key-stdin"], input=b"sk-bench\n", env=env, check=True, capture_output=True)
        fresh = os.path.join(root, "fresh")
        rows = []
        for label, home, needle in (("`cm` → Home (configured)", configured, HOME_TITLE),
                                    ("`cm` → first setup screen (no configuration)", fresh, SETUP_TITLE)):
            time_to_screen(home, needle, f"cm-bench-warm-{os.getpid()}")  # warm the page cache
            values = [time_to_screen(home, needle, f"cm-bench-{os.getpid()}-{i}") for i in range(args.runs)]
            rows.append((label, summary(values)))
        rows.append(("`cm --version` (click CLI, no UI), spawn to exit", summary([time_version()
                                                                                 for _ in range(args.runs)])))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lines = [f"Machine: {machine()}.", "", "| start-up | runs | median ms | p95 ms | max ms |", "|---|---|---|---|---|"]
    lines += [f"| {label} | {s['n']} | {s['median']:.0f} | {s['p95']:.0f} | {s['max']:.0f} |" for label, s in rows]
    body = "\n".join(lines)
    print(body)
    if args.write:
        write_section("tui", body)


if __name__ == "__main__":
    main()
