"""Benchmarks of the session path: inbox consumption throughput and the hook with a 1 MiB tail.

(1) Consumption: one Codex session of 1,000 turns. SessionStart goes through the real hook; then
    each turn's two inbox rows (UserPromptSubmit with its candidate, Stop with the user message,
    the assistant reply and task_complete) are written as the hook writes them, straight into the
    store (the hook's own cost is measured separately). The drain's consumer then runs in this
    process until the inbox is empty: turns per second = 1,000 / wall time (100 batches sealed).
(2) Hook with a 1 MiB tail: for each run a fresh session is activated, 1 MiB of complete
    transcript lines is appended, and the timed `cm hook codex` UserPromptSubmit admits it
    (wall time from spawn to exit). The drain runs as in production.
Usage: `python bench/sessions.py [--runs 40] [--write]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import CM, machine, summary, timed_run, wait_no_drain, write_section

from cmrunner.capture.admission import sha256_text
from cmrunner.capture.codex_consumer import CodexInbox
from cmrunner.core import config as config_mod, store
from cmrunner.core.home import DataPaths

STAMP = "2026-11-30T00:00:00.000Z"


def _line(record: dict) -> bytes:
    return json.dumps({"timestamp": STAMP, **record}).encode() + b"\n"


def _env() -> dict[str, str]:
    env = dict(os.environ, COMMON_MEMORY_HOST_INSTANCE="bench:1")
    return env


def consumption(turns: int = 1000) -> float:
    root = tempfile.mkdtemp(prefix="cm-bench-sessions-")
    try:
        home, work = os.path.join(root, "home"), os.path.join(root, "work")
        os.mkdir(work)
        path = os.path.join(root, "rollout.jsonl")
        with open(path, "wb") as handle:
            handle.write(_line({"type": "session_meta", "payload": {"id": "bench", "cli_version": "0.169.0"}}))
        start = {"session_id": "bench", "transcript_path": path, "cwd": work, "hook_event_name": "SessionStart",
                 "source": "startup"}
        assert timed_run([CM, "hook", "codex", "--home", home], json.dumps(start).encode(), _env())[1] == 0
        wait_no_drain(home)
        cfg = config_mod.load(home)
        paths = DataPaths(cfg.data_root)
        conn = store.open_store(paths)
        session_id, offset = conn.execute("SELECT session_id, offset FROM codex_cursors").fetchone()
        rows = []
        for n in range(turns):
            turn, prompt = f"turn-{n:04d}", f"user prompt number {n}"
            first = _line({"type": "event_msg", "payload": {"type": "task_started", "turn_id": turn}})
            second = b"".join([
                _line({"type": "event_msg", "payload": {"type": "item_completed", "turn_id": turn, "item": {
                    "type": "UserMessage", "id": f"u{n}", "content": [{"type": "text", "text": prompt}]}}}),
                _line({"type": "event_msg", "payload": {"type": "item_completed", "turn_id": turn, "item": {
                    "type": "AgentMessage", "id": f"a{n}", "content": [{"type": "Text", "text": f"answer {n}"}]}}}),
                _line({"type": "event_msg", "payload": {"type": "task_complete", "turn_id": turn}}),
            ])
            rows.append((session_id, "UserPromptSubmit", turn, offset, offset + len(first), first, prompt))
            offset += len(first)
            rows.append((session_id, "Stop", turn, offset, offset + len(second), second, None))
            offset += len(second)
        with store.immediate(conn):
            for sid, name, turn, begin, end, body, prompt in rows:
                conn.execute('INSERT INTO codex_inbox(session_id, event, turn_id, start, "end", body, envelope, scope,'
                             " received_at) VALUES (?, ?, ?, ?, ?, ?, '{}', 'global', 0)",
                             (sid, name, turn, begin, end, body))
                if prompt:
                    conn.execute("INSERT INTO codex_candidates VALUES (?, ?, ?, ?, 'global', 0)",
                                 (sid, turn, sha256_text(prompt), prompt))
        consumer = CodexInbox(cfg)
        started = time.perf_counter()
        while consumer.step(conn):
            pass
        elapsed = time.perf_counter() - started
        sealed = conn.execute("SELECT COUNT(*) FROM session_batches").fetchone()[0]
        pending = conn.execute("SELECT COUNT(*) FROM observations WHERE state = 'pending'").fetchone()[0]
        conn.close()
        assert sealed == turns // 10 and pending == turns, (sealed, pending)
        return turns / elapsed
    finally:
        shutil.rmtree(root, ignore_errors=True)


def big_tail(runs: int) -> dict:
    root = tempfile.mkdtemp(prefix="cm-bench-bigtail-")
    try:
        home, work = os.path.join(root, "home"), os.path.join(root, "work")
        os.mkdir(work)
        output = "x" * (64 * 1024 - 200)
        walls = []
        for n in range(runs):
            path = os.path.join(root, f"rollout-{n}.jsonl")
            with open(path, "wb") as handle:
                handle.write(_line({"type": "session_meta", "payload": {"id": f"s{n}", "cli_version": "0.169.0"}}))
            common = {"session_id": f"s{n}", "transcript_path": path, "cwd": work}
            start = dict(common, hook_event_name="SessionStart", source="startup")
            assert timed_run([CM, "hook", "codex", "--home", home], json.dumps(start).encode(), _env())[1] == 0
            with open(path, "ab") as handle:
                written = 0
                while written < 1 << 20:
                    line = _line({"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c",
                                                                       "output": output}})
                    handle.write(line)
                    written += len(line)
            prompt = dict(common, hook_event_name="UserPromptSubmit", turn_id="t", prompt="after a big tool output")
            ms, code = timed_run([CM, "hook", "codex", "--home", home], json.dumps(prompt).encode(), _env())
            assert code == 0
            walls.append(ms)
        wait_no_drain(home)
        return summary(walls)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rate = consumption()
    tail = big_tail(args.runs)
    body = "\n".join([
        f"Machine: {machine()}.",
        "",
        "| measurement | result |",
        "|---|---|",
        f"| inbox consumption, one 1,000-turn Codex session (2,000 rows, 100 batches sealed) | **{rate:.0f} turns/s** |",
        f"| `cm hook codex` UserPromptSubmit admitting a 1 MiB transcript tail ({tail['n']} runs) | median {tail['median']:.1f} ms, p95 {tail['p95']:.1f} ms, max {tail['max']:.1f} ms |",
    ])
    print(body)
    if args.write:
        write_section("sessions", body)


if __name__ == "__main__":
    main()
