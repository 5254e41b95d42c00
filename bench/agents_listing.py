"""Benchmark (issue 35): how long `cm agents` takes to list the hosts, first and later.

Method: a temporary PATH holding only the real Codex CLI 0.169.0, Claude Code 2.1.328 and Gemini
CLI 0.61.0 (the test hosts' cache, installed on first use), a temporary HOME and cm home. "First"
runs `cm agents` after deleting cm's host-version cache, so each host's `--version` runs (all at
once); "later" runs it again with the cache in place, as every listing after the first does until
a host binary changes. Each figure is the spawn-to-exit wall time of the real console script.
Usage: `python bench/agents_listing.py [--runs 7] [--write]`.
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
from support import hosts
from support.agenthosts import claude_binary, gemini_binary


def _once(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    elapsed = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"cm agents failed: {proc.stderr.decode(errors='replace')[-400:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--write", action="store_true", help="put the table into docs/benchmarks.md")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="cm-bench-agents-")
    try:
        bin_dir, user, home = (os.path.join(scratch, name) for name in ("bin", "user", "home"))
        for path in (bin_dir, user):
            os.mkdir(path)
        os.mkdir(home, 0o700)
        for binary in (hosts.codex_binary(), claude_binary(), gemini_binary()):
            os.symlink(binary, os.path.join(bin_dir, binary.name))
        env = {"HOME": user, "PATH": f"{bin_dir}:/usr/bin:/bin", "LANG": "C.UTF-8"}
        argv = [CM, "--home", home, "agents"]
        cache = os.path.join(home, "cache", "host-versions.json")
        first, later = [], []
        for _ in range(args.runs):
            if os.path.exists(cache):
                os.unlink(cache)
            first.append(_once(argv, env))
            later.append(_once(argv, env))
        rows = [("first listing (each host's `--version` runs)", summary(first)),
                ("later listings (versions from the cache)", summary(later))]
        table = ["| `cm agents` | runs | median ms | p95 ms | max ms |", "|---|---|---|---|---|"]
        table += [f"| {name} | {s['n']} | {s['median']:.0f} | {s['p95']:.0f} | {s['max']:.0f} |" for name, s in rows]
        body = "\n".join([f"Measured on {machine()}; load average at the end "
                          f"{os.getloadavg()[0]:.2f}.", "", *table])
        print(body)
        if args.write:
            write_section("agents-listing", body)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
