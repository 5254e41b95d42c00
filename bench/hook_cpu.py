"""Benchmark: CPU time of one `cm hook codex` UserPromptSubmit per pinned form, beside the floor (issue 35).

Why CPU time: on a shared machine a hook's wall time is mostly waiting for a core, which dilutes
any hook/floor ratio towards 1; the CPU a process spends (user + sys) is far less sensitive to
the load. Method: a fresh temporary home with one activated Codex session per installation; each
round appends one 4 KiB transcript record and runs, in turn, the floor of `bench/hook_latency.py`
(`python -I -S`, sqlite3, one WAL+FULL commit, detached spawn), the pinned form
`python -I -S <installed cmrunner>/__main__.py hook codex`, the form before issue 35
`python -I -m cmrunner hook codex`, and, with `--before PYTHON`, that other installation's
`-I -m` form (e.g. main before a change, in its own venv) on a home of its own. A run's CPU is
`getrusage(RUSAGE_CHILDREN)` after it minus before it (the detached drains it spawns are not its
children and are not counted). Medians of `--runs` rounds. Usage:
`python bench/hook_cpu.py [--runs 100] [--before /path/to/other/venv/bin/python]`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import machine, rollout_line, session_meta, wait_no_drain
from hook_latency import FLOOR, MODULE, PINNED, make_floor_db


def _cpu_run(argv: list[str], stdin: bytes, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed: {proc.stderr.decode('utf-8', 'replace')[-300:]}")
    return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--before", help="another installation's interpreter, timed in its -I -m form")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="cm-bench-cpu-")
    try:
        env = dict(os.environ, COMMON_MEMORY_HOST_INSTANCE="bench:1")
        forms = {"pinned": PINNED, "module": MODULE}
        if args.before:
            forms["before"] = [args.before, "-I", "-m", "cmrunner"]
        homes, transcripts = {}, {}
        for name, form in forms.items():
            homes[name] = os.path.join(root, f"home-{name}")
            transcripts[name] = os.path.join(root, f"rollout-{name}.jsonl")
            with open(transcripts[name], "w") as handle:
                handle.write(session_meta("bench") + "\n")
            work = os.path.join(root, "work")
            os.makedirs(work, exist_ok=True)
            start = {"session_id": "bench", "transcript_path": transcripts[name], "cwd": work,
                     "hook_event_name": "SessionStart", "source": "startup"}
            _cpu_run([*form, "hook", "codex", "--home", homes[name]], json.dumps(start).encode(), env)
        floor_db = make_floor_db(root)
        load_before = os.getloadavg()[0]
        cpu: dict[str, list[float]] = {"floor": [], **{name: [] for name in forms}}
        filler = "x" * 4000
        for n in range(args.runs):
            cpu["floor"].append(_cpu_run([sys.executable, "-I", "-S", "-c", FLOOR, floor_db, "x" * 70, sys.executable],
                                         b"", {}))
            for name, form in forms.items():
                record = {"type": "event_msg", "payload": {"type": "item_completed", "turn_id": f"t{n}", "item": {
                    "type": "UserMessage", "content": [{"type": "text", "text": filler}]}}}
                with open(transcripts[name], "a") as handle:
                    handle.write(rollout_line(record) + "\n")
                prompt = {"session_id": "bench", "transcript_path": transcripts[name], "cwd": os.path.join(root, "work"),
                          "hook_event_name": "UserPromptSubmit", "turn_id": f"t{n}", "prompt": f"prompt {n}"}
                cpu[name].append(_cpu_run([*form, "hook", "codex", "--home", homes[name]],
                                          json.dumps(prompt).encode(), env))
        for name in forms:
            wait_no_drain(homes[name])
        floor = statistics.median(cpu["floor"])
        labels = {"floor": "floor: `python -I -S`, sqlite3, one WAL+FULL commit, detached spawn",
                  "pinned": "`python -I -S …/cmrunner/__main__.py hook codex` (the pinned form)",
                  "module": "`python -I -m cmrunner hook codex` (the form before issue 35)",
                  "before": f"`{args.before} -I -m cmrunner hook codex` (--before)"}
        print(f"Machine: {machine()}; {args.runs} alternating rounds; load average {load_before:.1f} before, "
              f"{os.getloadavg()[0]:.1f} after.\n")
        print("| CPU time per run (user + sys), median | ms | / floor |\n|---|---:|---:|")
        for name, values in cpu.items():
            print(f"| {labels[name]} | {statistics.median(values):.1f} | {statistics.median(values) / floor:.2f}× |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
