"""Benchmark (issue 32): `cm agents install|remove claude-code` on a big `~/.claude.json`.

Method: a temporary HOME holds `~/.claude/settings.json` (a small user file) and a `~/.claude.json`
of the given size built by `tests/support/claudestate.py` (Claude Code's per-project history
layout, two-space indent, seeded). Each run spawns the real `cm agents install claude-code`, then
`cm agents remove claude-code`, as subprocesses with a fresh cm home, and records wall time
(spawn to exit) and the child's peak RSS (`os.wait4`). Both must exit 0 and the file must come
back byte for byte. The time includes interpreter start-up, reading and parsing the file, the
transaction's copies (journal and backup, each fsynced) and the final fsynced write.
Prints a markdown table (`--write` puts it into docs/benchmarks.md).
Usage: `python bench/agents_settings.py [--sizes 1,16,64] [--runs 3] [--write]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, machine, write_section
from support.claudestate import state_text


def run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall ms and peak RSS MiB of one `cm` run (it must succeed)."""
    started = time.perf_counter()
    proc = subprocess.Popen([CM, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = (time.perf_counter() - started) * 1000
    err = proc.stderr.read() if proc.stderr else b""
    if status != 0:
        raise RuntimeError(f"cm {' '.join(args)} failed: {err.decode()[-500:]}")
    return elapsed, usage.ru_maxrss / 1024


def measure(size_mib: int, runs: int) -> dict[str, list[float]]:
    text = state_text(size_mib << 20).encode("utf-8")
    results: dict[str, list[float]] = {"install ms": [], "install MiB": [], "remove ms": [], "remove MiB": []}
    for _ in range(runs):
        tmp = tempfile.mkdtemp(prefix="cm-bench-settings-")
        try:
            user = os.path.join(tmp, "user")
            os.makedirs(os.path.join(user, ".claude"))
            state = os.path.join(user, ".claude.json")
            with open(state, "wb") as handle:
                handle.write(text)
            with open(os.path.join(user, ".claude", "settings.json"), "w") as handle:
                handle.write('{\n  "model": "opus"\n}\n')
            env = {"HOME": user, "PATH": "/usr/bin:/bin", "COMMON_MEMORY_HOME": os.path.join(tmp, "cmhome")}
            for action in ("install", "remove"):
                ms, mib = run(["agents", action, "claude-code"], env)
                results[f"{action} ms"].append(ms)
                results[f"{action} MiB"].append(mib)
            with open(state, "rb") as handle:
                if handle.read() != text:
                    raise RuntimeError("remove did not give back the file byte for byte")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,16,64", help="sizes of ~/.claude.json in MiB")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    lines = [f"Machine: {machine()}, measured {time.strftime('%Y-%m-%d')}.", "",
             "| `~/.claude.json` | runs | install median ms | install max ms | install peak RSS MiB "
             "| remove median ms | remove max ms | remove peak RSS MiB |", "|---|---|---|---|---|---|---|---|"]
    for size in (int(s) for s in args.sizes.split(",")):
        r = measure(size, args.runs)
        lines.append(f"| {size} MiB | {args.runs} | {statistics.median(r['install ms']):.0f} | "
                     f"{max(r['install ms']):.0f} | {max(r['install MiB']):.0f} | "
                     f"{statistics.median(r['remove ms']):.0f} | {max(r['remove ms']):.0f} | "
                     f"{max(r['remove MiB']):.0f} |")
        print(lines[-1], flush=True)
    body = "\n".join(lines)
    print(body)
    if args.write:
        write_section("agents_settings", body)


if __name__ == "__main__":
    main()
