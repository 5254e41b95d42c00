"""Benchmark: peak memory of one ``cm flush`` whose provider floods every attempt.

The synthetic model answers every request with an 80 MiB stream: small text deltas (``flood``) or
one 80 MiB ``data:`` line that never ends (``line``). ``remote.deadlineMs`` is 3000. The flush
makes five attempts (each ends ``INVALID_RESPONSE`` at a provider bound; the backoffs of 1, 2, 4
and 8 s fit its 10 s wait bound, the fifth retry's 16 s does not). Measured per case over
``--runs`` flushes: the ``cm flush`` child's own peak RSS (``ru_maxrss`` from ``os.wait4``: the
model server is not counted), its wall time, the attempts the job made and the requests the model
saw. Usage: `python bench/flush_memory.py [--runs N] [--label after] [--write]`.
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
from _util import CM, machine, write_section
from provider import _home

from cmrunner.core import store
from cmrunner.synthetic import fakemodel

STREAM = 80 * 1024 * 1024
CASES = {"80 MiB of text deltas": {"text": "x", "flood": STREAM},
         "one 80 MiB SSE line": {"text": "x", "line": STREAM}}


def one(reply: dict) -> dict:
    root = tempfile.mkdtemp(prefix="cm-bench-flushmem-")
    try:
        script = {"replies": [], "default": reply}
        with fakemodel.running(os.path.join(root, "model"), script, lifetime_seconds=600) as model:
            home, paths = _home(root, model.base_url, "responses", 3000)
            env = dict(os.environ, COMMON_MEMORY_HOME=home, COMMON_MEMORY_HOST_INSTANCE="bench")
            started = time.perf_counter()
            proc = subprocess.Popen([CM, "flush"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            _pid, _status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, nobody else's
            wall = time.perf_counter() - started
            requests = len(model.model_requests())
        conn = store.connect(paths.db, 1000)
        try:
            attempts = conn.execute("SELECT attempts FROM jobs").fetchone()[0]
        finally:
            conn.close()
        return {"rss_mib": usage.ru_maxrss / 1024, "wall_s": wall, "attempts": attempts, "requests": requests}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--label", default="after")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rows = []
    for name, reply in CASES.items():
        found = [one(reply) for _ in range(args.runs)]
        peaks = sorted(r["rss_mib"] for r in found)
        walls = sorted(r["wall_s"] for r in found)
        rows.append(f"| {name} | {args.runs} | {peaks[0]:.0f} | {peaks[len(peaks) // 2]:.0f} | {peaks[-1]:.0f} | "
                    f"{walls[len(walls) // 2]:.1f} | {', '.join(str(r['attempts']) for r in found)} | "
                    f"{', '.join(str(r['requests']) for r in found)} |")
        print(rows[-1], flush=True)
    body = "\n".join([
        f"Machine: {machine()}. Label: {args.label}.",
        "",
        "| every answer | runs | peak RSS min (MiB) | median | max | wall median (s) | attempts | model requests |",
        "|---|---:|---:|---:|---:|---:|---|---|",
        *rows,
    ])
    print(body)
    if args.write:
        write_section(f"flush-memory-{args.label}", body)


if __name__ == "__main__":
    main()
