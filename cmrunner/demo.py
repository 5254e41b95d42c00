"""``cm demo``: a capture round trip on a fresh temporary home.

It writes a capture-only configuration, registers a project, writes a small Codex-shaped
transcript, fires SessionStart → UserPromptSubmit → Stop → SessionEnd through the real
``cm hook codex`` entry as subprocesses (the host identity is passed explicitly, as a bridge
would), waits for the detached drain to finish, and reports what the session cache holds. It
never touches the user's own home.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from cmrunner import config as config_mod, projects, status as status_mod
from cmrunner.home import DataPaths

SESSION = "01demo00-0000-7000-8000-000000000001"
TURN = "01demo00-0000-7000-8000-0000000000t1"


def _line(record: dict) -> str:
    return json.dumps({"timestamp": "2026-11-30T00:00:00.000Z", **record}, separators=(",", ":")) + "\n"


def _hook(home: str, event: dict, env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-I", "-m", "cmrunner", "hook", "codex", "--home", home],
        input=json.dumps(event).encode(), capture_output=True, env=env, timeout=30,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def run(keep: bool = False) -> Iterator[str]:
    root = tempfile.mkdtemp(prefix="cm-demo-")
    home = os.path.join(root, "home")
    work = os.path.join(root, "work")
    os.mkdir(work)
    try:
        data = config_mod.default_config(home)
        config_mod.save(home, data)
        paths = DataPaths(data["dataRoot"])
        project = projects.register(paths, work, "Demo project")
        yield f"home:        {home} (capture-only configuration: no model)"
        yield f"project:     {project.id} -> {work}"
        transcript = os.path.join(root, "rollout-demo.jsonl")
        with open(transcript, "w", encoding="utf-8") as handle:
            handle.write(_line({"type": "session_meta", "payload": {"id": SESSION, "cli_version": "0.169.0"}}))
        env = dict(os.environ, COMMON_MEMORY_HOST_INSTANCE="demo:host:1")
        common = {"session_id": SESSION, "transcript_path": transcript, "cwd": work}
        steps: list[tuple[dict, list[dict]]] = [
            ({**common, "hook_event_name": "SessionStart", "source": "startup"}, []),
            ({**common, "hook_event_name": "UserPromptSubmit", "turn_id": TURN,
              "prompt": "I prefer tabs over spaces in Go code."},
             [{"type": "event_msg", "payload": {"type": "task_started", "turn_id": TURN}},
              {"type": "event_msg", "payload": {"type": "item_completed", "turn_id": TURN, "item": {
                  "type": "UserMessage", "content": [{"type": "text", "text": "I prefer tabs over spaces in Go code."}]}}}]),
            ({**common, "hook_event_name": "Stop", "turn_id": TURN},
             [{"type": "event_msg", "payload": {"type": "task_complete", "turn_id": TURN}}]),
            ({**common, "hook_event_name": "SessionEnd", "reason": "other"}, []),
        ]
        for event, lines in steps:
            with open(transcript, "a", encoding="utf-8") as handle:
                handle.writelines(_line(record) for record in lines)
            started = time.perf_counter()
            code, out, err = _hook(home, event, env)
            elapsed = (time.perf_counter() - started) * 1000
            answer = "context injected" if "additionalContext" in out else out.strip() or "(no output)"
            yield f"hook {event['hook_event_name']:<17} exit {code} in {elapsed:5.1f} ms: {answer}{err.strip()}"
        deadline = time.monotonic() + 15
        while status_mod.gather(home)["drain"]["alive"] and time.monotonic() < deadline:
            time.sleep(0.05)
        report = status_mod.gather(home)
        yield f"drain:       {'still running' if report['drain']['alive'] else 'ran and exited'}"
        conn = sqlite3.connect(f"file:{paths.db}?mode=ro", uri=True)
        try:
            for text, state, batch in conn.execute("SELECT text, state, batch_id FROM observations ORDER BY id"):
                sealed = "sealed into a batch" if batch else "not sealed"
                yield f"captured:    {text!r} ({state}, {sealed})"
            left = conn.execute("SELECT COUNT(*) FROM codex_inbox").fetchone()[0]
            yield f"inbox:       {left} rows left unconsumed"
        finally:
            conn.close()
        yield "next:        with a model configured, the drain's Writer turns the sealed batch into Markdown"
    finally:
        if keep:
            yield f"kept:        {root}"
        else:
            shutil.rmtree(root, ignore_errors=True)
