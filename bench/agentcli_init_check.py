"""Benchmark (issue 36): what the agent-CLI check adds to `cm config init --agent`.

Method: per CLI (Claude Code, Codex, Gemini CLI, the versions the tests cache in
``~/.cache/cm-test-hosts``), cm's fake model on loopback (``cmrunner.synthetic.fakemodel``, answering
every request with a short text) as the CLI's provider, offline, in the environment
``bench/agentcli_tokens.py`` builds for it; then `cm config init --agent <cli> --agent-path <binary>`
into a fresh home, alternately checked (one confined headless run of the CLI on the network test's
one-line task) and with ``--skip-check``. Each figure is the spawn-to-exit wall time of the real
console script. The model requests per checked run are counted from the fake's log.
Usage: ``python bench/agentcli_init_check.py [--runs 5] [--write]``.
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
from agentcli_tokens import BINARIES, GEMINI_MODEL, _setup

from cmrunner.synthetic import fakemodel


def measure(agent: str, runs: int) -> tuple[dict[str, list[float]], float]:
    times: dict[str, list[float]] = {"check": [], "skip": []}
    root = tempfile.mkdtemp(prefix="cm-bench-init-")
    try:
        with fakemodel.running(os.path.join(root, "model"), {"replies": [], "default": {"text": "OK"}},
                               lifetime_seconds=900) as model:
            _home, env = _setup(agent, root, model)
            extra = ["--model", GEMINI_MODEL] if agent == "gemini" else []
            for run in range(runs):
                for mode in ("check", "skip"):
                    argv = [CM, "config", "init", "--home", os.path.join(root, f"{mode}-{run}"), "--agent", agent,
                            "--agent-path", BINARIES[agent], *extra] + (["--skip-check"] if mode == "skip" else [])
                    started = time.monotonic()
                    proc = subprocess.run(argv, capture_output=True, env=env, timeout=180, stdin=subprocess.DEVNULL)
                    times[mode].append((time.monotonic() - started) * 1000)
                    if proc.returncode != 0:
                        raise SystemExit(proc.stderr.decode())
            per_run = len(model.model_requests()) / runs
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return times, per_run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rows = []
    for agent in BINARIES:
        times, per_run = measure(agent, args.runs)
        rows.append((agent, "checked", summary(times["check"]), f"{per_run:g}"))
        rows.append((agent, "`--skip-check`", summary(times["skip"]), "0"))
    body = f"{machine()}; load average at the end {os.getloadavg()[0]:.2f}.\n\n" \
           "| `cm config init --agent` | mode | runs | median ms | p95 ms | max ms | model requests per run |\n" \
           "|---|---|---|---|---|---|---|\n" + \
           "".join(f"| {agent} | {mode} | {s['n']} | {s['median']:.0f} | {s['p95']:.0f} | {s['max']:.0f} | {n} |\n"
                   for agent, mode, s, n in rows)
    print(body)
    if args.write:
        write_section("agentcli-init-check", body)


if __name__ == "__main__":
    main()
