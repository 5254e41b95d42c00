"""Benchmark (b): 64 concurrent hook events (8 sessions × 8 events) against one data root.

Method: a fresh temporary home; 8 sessions are activated first (SessionStart, not timed). For
each session 8 user turns are appended to its transcript, then all 64 UserPromptSubmit hooks are
started at once as real `cm hook codex` processes. Each one's wall time runs from spawn until exit.
A sampler thread reads /proc every 2 ms and records how many `session-drain` processes of this
home are alive. Afterwards the store must hold 64 prompt candidates and 64 inbox rows (0 lost).
Usage: `python bench/concurrent_hooks.py [--rounds 5] [--write]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import (
    CM,
    FAILURES,
    drain_pids,
    machine,
    rollout_line,
    session_meta,
    summary,
    timed_run,
    wait_no_drain,
    write_section,
)

SESSIONS = 8
EVENTS = 8


def _session_events(s: int, path: str, work: str) -> list[tuple[dict, list[dict]]]:
    """8 hook events of one session, each with the transcript records written before it fires."""
    base = {"session_id": f"s{s}", "transcript_path": path, "cwd": work}
    events: list[tuple[dict, list[dict]]] = [(dict(base, hook_event_name="SessionStart", source="startup"), [])]
    for turn in ("t1", "t2"):
        user = {"type": "event_msg", "payload": {"type": "item_completed", "turn_id": turn, "item": {
            "type": "UserMessage", "id": f"u-{turn}", "content": [{"type": "text", "text": f"session {s} {turn}"}]}}}
        events.append((dict(base, hook_event_name="UserPromptSubmit", turn_id=turn, prompt=f"session {s} {turn}"),
                       [{"type": "event_msg", "payload": {"type": "task_started", "turn_id": turn}}, user]))
        events.append((dict(base, hook_event_name="PostToolUse", turn_id=turn, tool_name="Bash"),
                       [{"type": "response_item", "payload": {"type": "function_call_output", "call_id": f"c-{turn}", "output": "ok"}}]))
        events.append((dict(base, hook_event_name="Stop", turn_id=turn),
                       [{"type": "event_msg", "payload": {"type": "task_complete", "turn_id": turn}}]))
    events.append((dict(base, hook_event_name="SessionEnd", reason="other"), []))
    return events


def one_round(root: str, burst: bool) -> dict:
    """Sessions mode: 8 sessions run concurrently, each firing its 8 events in order (as a host
    waits for each hook). Burst mode: 8 sessions are activated first, then 64 UserPromptSubmit
    hooks start at once (a CPU-bound stress figure, not a host pattern)."""
    home, work = os.path.join(root, "home"), os.path.join(root, "work")
    os.makedirs(work)
    env = dict(os.environ, COMMON_MEMORY_HOST_INSTANCE="bench:1")
    paths = []
    for s in range(SESSIONS):
        path = os.path.join(root, f"rollout-{s}.jsonl")
        with open(path, "w") as handle:
            handle.write(session_meta(f"s{s}") + "\n")
        paths.append(path)
    most, seen, stop = [0], set(), threading.Event()

    def sample() -> None:
        while not stop.is_set():
            pids = drain_pids(home)
            most[0] = max(most[0], len(pids))
            seen.update(pids)
            time.sleep(0.002)

    walls: list[float] = []
    failures = [0]
    lock = threading.Lock()
    expected_prompts = SESSIONS * (EVENTS if burst else 2)

    def fire(payload: dict) -> None:
        ms, code = timed_run([CM, "hook", "codex", "--home", home], json.dumps(payload).encode(), env)
        with lock:
            walls.append(ms)
            failures[0] += code != 0

    sampler = threading.Thread(target=sample)
    if not burst:
        sampler.start()

        def run_session(s: int) -> None:
            for payload, records in _session_events(s, paths[s], work):
                with open(paths[s], "a") as handle:
                    handle.writelines(rollout_line(r) + "\n" for r in records)
                fire(payload)

        threads = [threading.Thread(target=run_session, args=(s,)) for s in range(SESSIONS)]
    else:
        for s in range(SESSIONS):
            start = {"session_id": f"s{s}", "transcript_path": paths[s], "cwd": work,
                     "hook_event_name": "SessionStart", "source": "startup"}
            assert timed_run([CM, "hook", "codex", "--home", home], json.dumps(start).encode(), env)[1] == 0
            with open(paths[s], "a") as handle:
                for e in range(EVENTS):
                    handle.write(rollout_line({"type": "event_msg", "payload": {"type": "task_started", "turn_id": f"t{e}"}}) + "\n")
        wait_no_drain(home)
        sampler.start()
        threads = [threading.Thread(target=fire, args=({"session_id": f"s{s}", "transcript_path": paths[s], "cwd": work,
                                                          "turn_id": f"t{e}", "hook_event_name": "UserPromptSubmit",
                                                          "prompt": f"s{s} turn {e}"},))
                   for s in range(SESSIONS) for e in range(EVENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wait_no_drain(home)
    stop.set()
    sampler.join()
    db = sqlite3.connect(os.path.join(home, "data", "runtime.sqlite"))
    # Admission records outlive consumption (the drain deletes consumed inbox rows meanwhile).
    candidates = db.execute("SELECT COUNT(*) FROM codex_candidates").fetchone()[0]
    admitted = db.execute("SELECT COUNT(*) FROM admitted_events").fetchone()[0]
    db.close()
    expected_events = SESSIONS * EVENTS + (SESSIONS if burst else 0)  # burst mode activates first
    lost = (expected_prompts - candidates) + (expected_events - admitted)
    return {"walls": walls, "failures": failures[0], "lost": lost, "max_drains": most[0], "drains_spawned": len(seen)}


def _run(rounds: int, burst: bool) -> dict:
    walls, failures, lost, most, spawned = [], 0, 0, 0, []
    for _ in range(rounds):
        root = tempfile.mkdtemp(prefix="cm-bench-conc-")
        try:
            result = one_round(root, burst)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        walls += result["walls"]
        failures += result["failures"]
        lost += result["lost"]
        most = max(most, result["max_drains"])
        spawned.append(result["drains_spawned"])
    return {"s": summary(walls), "failures": failures, "lost": lost, "most": most, "spawned": spawned}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    sessions, burst = _run(args.rounds, burst=False), _run(args.rounds, burst=True)

    def row(name: str, r: dict) -> str:
        s = r["s"]
        return (f"| {name} | {s['n']} | {r['failures']} | {r['lost']} | {s['median']:.0f} / {s['p95']:.0f} / "
                f"{s['p99']:.0f} / {s['max']:.0f} | {r['most']} | {', '.join(map(str, r['spawned']))} |")

    body = "\n".join([
        f"Machine: {machine()}; {args.rounds} rounds per mode.",
        "",
        "| mode | hook runs | failures | lost | wall median / p95 / p99 / max (ms) | most drains alive (2 ms sampling) | drains spawned per round |",
        "|---|---:|---:|---:|---|---:|---|",
        row("8 sessions × 8 events, sessions concurrent, events in order", sessions),
        row("burst: 64 UserPromptSubmit started at once", burst),
        "",
        f"Target (sessions mode): 0 failures, 0 lost, p99 ≤ 500 ms, exactly one drain alive: "
        f"**{'met' if sessions['failures'] == 0 and sessions['lost'] == 0 and sessions['s']['p99'] <= 500 and sessions['most'] == 1 else 'NOT met'}**.",
    ])
    print(body)
    for line in sorted(set(FAILURES)):
        print("failure seen:", line)
    if args.write:
        write_section("concurrent_hooks", body)


if __name__ == "__main__":
    main()
