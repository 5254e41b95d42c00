"""Benchmark (issue 6): `cm mcp` time to answer `initialize`, `memory_read` latency, `cm show` wall time.

Method: a fresh temporary home whose Profile and Preferences each hold about 8 KiB (the Writer's
soft budget). (1) Spawn `cm mcp --capability read --global` (and the relay profile) and time from
spawn until the `initialize` response line arrives on stdout, then close stdin and reap it; one
process per run. (2) In one read process, time `tools/call memory_read {}` round trips over the raw
stdio wire (newline-delimited JSON-RPC, what Codex sends), after a few warm-up calls. (3) Time
`cm show --plain` from spawn until exit with stdout at EOF. Usage:
`python bench/mcp.py [--runs 20] [--calls 200] [--write]` (``--write`` updates docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, machine, summary, timed_run, write_section

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "cm-bench", "version": "0"}}}


def _prepare(root: str) -> tuple[str, dict[str, str]]:
    home = os.path.join(root, "home")
    env = dict(os.environ, COMMON_MEMORY_HOME=home)
    subprocess.run([CM, "config", "init"], env=env, check=True, capture_output=True)
    memory = os.path.join(home, "data", "memory")
    os.makedirs(memory, mode=0o700)
    for name, title in (("profile", "Profile"), ("preferences", "Preferences")):
        sections = "".join(f"## Topic {i}\n" + "A remembered detail about the user. " * 6 + "\n\n" for i in range(36))
        with open(os.path.join(memory, f"{name}.md"), "w", encoding="utf-8") as handle:
            handle.write(f"# {title}\n\n{sections}")
    return home, env


def _spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([CM, "mcp", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)


def _send(proc: subprocess.Popen, message: dict) -> None:
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _close(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def time_to_initialize(args: list[str], env: dict[str, str], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        proc = _spawn(args, env)
        _send(proc, INITIALIZE)
        reply = json.loads(proc.stdout.readline())
        samples.append((time.perf_counter() - started) * 1000)
        assert reply.get("id") == 1 and "result" in reply, reply
        _close(proc)
    return samples


def read_latency(env: dict[str, str], calls: int) -> tuple[list[float], int]:
    proc = _spawn(["--capability", "read", "--global"], env)
    try:
        _send(proc, INITIALIZE)
        proc.stdout.readline()
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        samples, size = [], 0
        for n in range(calls + 5):
            started = time.perf_counter()
            _send(proc, {"jsonrpc": "2.0", "id": n + 2, "method": "tools/call",
                         "params": {"name": "memory_read", "arguments": {}}})
            line = proc.stdout.readline()
            elapsed = (time.perf_counter() - started) * 1000
            reply = json.loads(line)
            assert reply["result"]["isError"] is False, reply
            size = len(line)
            if n >= 5:  # the first calls warm up the worker threads
                samples.append(elapsed)
        return samples, size
    finally:
        _close(proc)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="cm-bench-mcp-")
    try:
        home, env = _prepare(root)
        read_init = summary(time_to_initialize(["--capability", "read", "--global"], env, args.runs))
        relay_init = summary(time_to_initialize(["--client-id", "bench", "--capability", "relay", "--global",
                                                 "--accept-client-reported-user-turns"], env, args.runs))
        latency, size = read_latency(env, args.calls)
        read = summary(latency)
        shows = []
        for _ in range(args.runs):
            ms, code = timed_run([CM, "show", "--plain"], b"", env)
            assert code == 0, "cm show failed"
            shows.append(ms)
        show = summary(shows)
        rows = [
            ("`cm mcp --capability read`: spawn → `initialize` answered", read_init),
            ("`cm mcp --capability relay`: spawn → `initialize` answered", relay_init),
            (f"`memory_read {{}}` round trip over stdio ({size // 1024} KiB reply)", read),
            ("`cm show --plain` wall time", show),
        ]
        body = "\n".join([
            f"Machine: {machine()}; {args.runs} processes per startup row, {args.calls} calls in one process "
            "for `memory_read`; Profile and Preferences hold about 8 KiB each.",
            "",
            "| measurement | n | median (ms) | p95 (ms) | max (ms) |",
            "|---|---:|---:|---:|---:|",
            *(f"| {name} | {s['n']} | {s['median']:.1f} | {s['p95']:.1f} | {s['max']:.1f} |" for name, s in rows),
        ])
        print(body)
        if args.write:
            write_section("mcp", body)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
