"""Benchmark (a): `cm hook codex` UserPromptSubmit with a 4 KiB transcript tail, next to the floor.

Method: a fresh temporary home with a capture-only configuration and one activated session. Each
round appends one 4 KiB transcript record, then runs, alternating so both see the same machine
state: (1) the real `cm` console script with a UserPromptSubmit event on stdin, (1b) the same through
`python -I -m cmrunner` (what `cm codex-config` pins), and (2) the floor,
`python -I -S -c …` that imports sqlite3, commits one row in WAL + synchronous=FULL, spawns a
detached child (`python -S -c pass`, new session, stdio on /dev/null) and exits. Wall time is from
spawn until exit with stdout at EOF (what Codex waits for). Drains spawned by hooks run as in
production (default linger). Usage: `python bench/hook_latency.py [--runs 200] [--write]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, machine, rollout_line, session_meta, summary, timed_run, wait_no_drain, write_section

FLOOR = """
import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=FULL")
c.execute("BEGIN IMMEDIATE"); c.execute("INSERT INTO t(body) VALUES (?)", (sys.argv[2],)); c.execute("COMMIT")
c.close()
null = os.open(os.devnull, os.O_RDWR)
os.posix_spawn(sys.argv[3], [sys.argv[3], "-S", "-c", "pass"], {}, setsid=True,
               file_actions=[(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="cm-bench-")
    try:
        home, work = os.path.join(root, "home"), os.path.join(root, "work")
        os.mkdir(work)
        env = dict(os.environ, COMMON_MEMORY_HOST_INSTANCE="bench:1")
        transcript = os.path.join(root, "rollout.jsonl")
        with open(transcript, "w") as handle:
            handle.write(session_meta("bench") + "\n")
        common = {"session_id": "bench", "transcript_path": transcript, "cwd": work}
        start = dict(common, hook_event_name="SessionStart", source="startup")
        ms, code = timed_run([CM, "hook", "codex", "--home", home], json.dumps(start).encode(), env)
        assert code == 0
        floor_db = os.path.join(root, "floor.sqlite")
        conn = sqlite3.connect(floor_db)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT)")
        conn.close()
        hook_ms: list[float] = []
        module_ms: list[float] = []
        floor_ms: list[float] = []
        filler = "x" * 4000
        for n in range(args.runs):
            record = {"type": "event_msg", "payload": {"type": "item_completed", "turn_id": f"t{n}", "item": {
                "type": "UserMessage", "content": [{"type": "text", "text": filler}]}}}
            line = rollout_line(record)
            line = line.replace(filler, filler[: 4096 - (len(line) - len(filler)) - 1])
            with open(transcript, "a") as handle:
                handle.write(line + "\n")  # exactly 4,096 bytes of new tail
            prompt = dict(common, hook_event_name="UserPromptSubmit", turn_id=f"t{n}", prompt=f"prompt {n}")
            ms, code = timed_run([CM, "hook", "codex", "--home", home], json.dumps(prompt).encode(), env)
            assert code == 0, "hook failed"
            hook_ms.append(ms)
            # The form `cm codex-config` pins into Codex's profile: the interpreter with -I -m.
            with open(transcript, "a") as handle:
                handle.write(line + "\n")
            prompt = dict(prompt, turn_id=f"m{n}")
            ms, code = timed_run([sys.executable, "-I", "-m", "cmrunner", "hook", "codex", "--home", home],
                                 json.dumps(prompt).encode(), env)
            assert code == 0, "hook failed"
            module_ms.append(ms)
            ms, code = timed_run([sys.executable, "-I", "-S", "-c", FLOOR, floor_db, "x" * 70, sys.executable], b"", {})
            assert code == 0, "floor failed"
            floor_ms.append(ms)
        wait_no_drain(home)
        hook, module, floor = summary(hook_ms), summary(module_ms), summary(floor_ms)
        ratio = hook["p95"] / floor["p95"]
        body = "\n".join([
            f"Machine: {machine()}; {args.runs} alternating runs of each.",
            "",
            "| command | median (ms) | p95 (ms) | max (ms) |",
            "|---|---:|---:|---:|",
            f"| `cm hook codex` UserPromptSubmit, 4 KiB tail (console script) | {hook['median']:.1f} | {hook['p95']:.1f} | {hook['max']:.1f} |",
            f"| `python -I -m cmrunner hook codex` (the form `cm codex-config` pins) | {module['median']:.1f} | {module['p95']:.1f} | {module['max']:.1f} |",
            f"| floor: `python -I -S`, sqlite3, one WAL+FULL commit, detached spawn | {floor['median']:.1f} | {floor['p95']:.1f} | {floor['max']:.1f} |",
            "",
            f"p95 ratio hook / floor: **{ratio:.2f}×** (target ≤ 2×); hook p95 target ≤ 60 ms: "
            f"**{'met' if hook['p95'] <= 60 else 'NOT met'}**.",
        ])
        print(body)
        if args.write:
            write_section("hook_latency", body)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
