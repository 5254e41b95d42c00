"""Shared helpers for the benchmark scripts: percentiles, process sampling, writing results."""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS_MD = os.path.join(ROOT, "docs", "benchmarks.md")
CM = os.path.join(os.path.dirname(sys.executable), "cm")

sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.procs import drain_pids, wait_no_drain  # noqa: E402,F401 - one /proc scanner for tests and benches


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values_ms: list[float]) -> dict[str, float]:
    return {"n": len(values_ms), "median": statistics.median(values_ms), "p95": percentile(values_ms, 95),
            "p99": percentile(values_ms, 99), "max": max(values_ms)}


def machine() -> str:
    cpu = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{os.cpu_count()} cores ({cpu}), Linux {platform.release()}, Python {platform.python_version()}, "
            f"measured {time.strftime('%Y-%m-%d')}")


STAMP = "2026-11-30T00:00:00.000Z"


def rollout_line(record: dict) -> str:
    """One Codex rollout line as Codex 0.169 writes it (every row carries a UTC timestamp)."""
    return json.dumps({"timestamp": STAMP, **record})


def session_meta(session: str) -> str:
    return rollout_line({"type": "session_meta", "payload": {"id": session, "cli_version": "0.169.0"}})


FAILURES: list[str] = []


def timed_run(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, int]:
    """Wall time (ms) from spawn until the process exits and its stdout reaches EOF."""
    started = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, timeout=60)
    if proc.returncode != 0:
        FAILURES.append(proc.stderr.decode("utf-8", "replace").strip()[:200])
    return (time.perf_counter() - started) * 1000, proc.returncode


def write_section(name: str, body: str, path: str = BENCHMARKS_MD) -> None:
    """Replace the block between ``<!-- bench:name -->`` markers in docs/benchmarks.md (or ``path``)."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    block = f"{start}\n{body.rstrip()}\n{end}"
    if start in text:
        text = re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _m: block, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def compact_size(value: object) -> int:
    """Bytes of ``value`` serialized compactly, as the Memory Agent sends a request body."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def wait_idle(home: str, seconds: float = 300, poll: float = 0.1) -> None:
    """Until the home's drain has ended and nothing waits in the Codex inbox or the queue."""
    from cmrunner.views import status as status_mod

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        report = status_mod.gather(home)
        obs = report["observations"]
        if not report["drain"]["alive"] and not report["inbox"]["codex"] and not obs.get("pending") \
                and not obs.get("claimed"):
            return
        time.sleep(poll)
    raise RuntimeError("the drain did not settle")


def play_codex_session(root: str, home: str, prompts: tuple[str, ...], reply: str, session_id: str) -> None:
    """One Codex session through real ``cm hook codex`` subprocesses (``codexplay``: SessionStart,
    UserPromptSubmit and Stop per prompt, SessionEnd) in a fresh ``<root>/work``; the hooks start
    the real detached drain. Raises when a hook exits non-zero; returns once the home is idle."""
    from cmrunner.synthetic import codexplay

    work = os.path.join(root, "work")
    os.mkdir(work)
    session = codexplay.Session(root, session_id, home, work)
    results = [session.start()]
    for n, prompt in enumerate(prompts, start=1):
        results += session.turn(n, prompt, reply)
    results.append(session.end())
    failed = [r for r in results if r.code != 0]
    if failed:
        raise RuntimeError(f"a hook exited {failed[0].code}")
    wait_idle(home, 600)
