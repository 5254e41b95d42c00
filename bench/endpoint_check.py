"""Benchmark (issue 36): what the endpoint check adds to `cm config init`.

Method: cm's fake model on loopback (`cmrunner.synthetic.fakemodel`, which lists its models and
answers the check's tool call), then `cm config init --preset ollama --base-url <fake> --model
fake-model` into a fresh home, alternately with and without `--skip-check`. Each figure is the
spawn-to-exit wall time of the real console script; the requests per checked run are counted from
the fake's log (the model list, then the two requests of the tool-call round trip).
Usage: `python bench/endpoint_check.py [--runs 7] [--write]`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, machine, summary, write_section

from cmrunner.synthetic import fakemodel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    times: dict[str, list[float]] = {"check": [], "skip": []}
    with tempfile.TemporaryDirectory() as tmp, fakemodel.running(os.path.join(tmp, "fake")) as fake:
        for run in range(args.runs):
            for mode in ("check", "skip"):
                argv = [CM, "config", "init", "--home", os.path.join(tmp, f"{mode}-{run}"), "--preset", "ollama",
                        "--base-url", fake.base_url, "--model", "fake-model"] + (["--skip-check"] if mode == "skip" else [])
                started = time.monotonic()
                proc = subprocess.run(argv, capture_output=True, timeout=120)
                times[mode].append((time.monotonic() - started) * 1000)
                if proc.returncode != 0:
                    raise SystemExit(proc.stderr.decode())
        per_run = len(fake.requests()) / args.runs
    rows = [("checked (model list + tool-call round trip)", summary(times["check"])),
            ("`--skip-check`", summary(times["skip"]))]
    body = f"{machine()}; load average at the end {os.getloadavg()[0]:.2f}.\n\n" \
           "| `cm config init` | runs | median ms | p95 ms | max ms |\n|---|---|---|---|---|\n" + \
           "".join(f"| {name} | {s['n']} | {s['median']:.0f} | {s['p95']:.0f} | {s['max']:.0f} |\n" for name, s in rows) + \
           f"\nRequests per checked run: {per_run:g} (one GET /models, two POSTs).\n"
    print(body)
    if args.write:
        write_section("endpoint-check", body)


if __name__ == "__main__":
    main()
