"""A Codex-shaped session player: a rollout transcript plus the real ``cm hook codex`` subprocesses.

Contract:
- ``Session(root, name, home, cwd)`` creates ``<root>/rollout-<name>.jsonl`` with the
  ``session_meta`` line Codex 0.169 writes first; every line carries one fixed UTC timestamp.
- ``hook(event, **fields)`` sends one hook event exactly as Codex would: the pinned form
  ``python -I -S <this cmrunner>/__main__.py hook codex --home <home>`` as a subprocess, the event JSON on stdin, host instance
  ``play:<name>`` in ``COMMON_MEMORY_HOST_INSTANCE``. It returns a ``HookResult`` (exit code,
  parsed stdout, milliseconds); it never raises on a hook failure, the caller decides.
- ``turn(n, user, assistant)`` plays one interaction the way Codex orders it: ``task_started`` in
  the transcript, UserPromptSubmit, the user and assistant messages and ``task_complete``, then
  Stop. ``start()`` is SessionStart (``startup``) and ``end()`` SessionEnd: a real end seals the
  session's batch for the drain.
Used by ``cm demo``, ``cm eval`` and ``bench/agent_cost.py``. Stdlib only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import NamedTuple

STAMP = "2026-11-30T00:00:00.000Z"
HOOK_TIMEOUT = 30
# The pinned hook form of this installation (cmrunner.manage.hostconfig.Pins.hook_argv): its __main__.py.
ENTRY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "__main__.py")


def _line(record: dict) -> str:
    return json.dumps({"timestamp": STAMP, **record}, separators=(",", ":")) + "\n"


class HookResult(NamedTuple):
    code: int
    out: dict
    ms: float
    stderr: str


class Session:
    """A Codex session: a transcript file and the hook events Codex would send for it."""

    def __init__(self, root: str, name: str, home: str, cwd: str) -> None:
        self.path = os.path.join(root, f"rollout-{name}.jsonl")
        self.name, self.home, self.cwd = name, home, cwd
        self.env = dict(os.environ, COMMON_MEMORY_HOST_INSTANCE=f"play:{name}")
        with open(self.path, "w", encoding="utf-8") as handle:
            handle.write(_line({"type": "session_meta", "payload": {"id": name, "cli_version": "0.169.0"}}))

    def write(self, *records: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.writelines(_line(record) for record in records)

    def hook(self, event: str, **fields: object) -> HookResult:
        body = {"session_id": self.name, "transcript_path": self.path, "cwd": self.cwd, "hook_event_name": event,
                **fields}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-I", "-S", ENTRY, "hook", "codex", "--home", self.home],
                              input=json.dumps(body).encode(), capture_output=True, env=self.env,
                              timeout=HOOK_TIMEOUT)
        elapsed = (time.perf_counter() - started) * 1000
        out = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else {}
        return HookResult(done.returncode, out, elapsed, done.stderr.decode("utf-8", "replace").strip())

    def start(self) -> HookResult:
        return self.hook("SessionStart", source="startup")

    def turn(self, n: int, user: str, assistant: str = "Noted.") -> tuple[HookResult, HookResult]:
        """One interaction; the UserPromptSubmit and Stop results."""
        turn = f"{self.name}-turn-{n}"
        self.write({"type": "event_msg", "payload": {"type": "task_started", "turn_id": turn}})
        prompt = self.hook("UserPromptSubmit", turn_id=turn, prompt=user)
        self.write(
            {"type": "event_msg", "payload": {"type": "item_completed", "turn_id": turn, "item": {
                "type": "UserMessage", "id": f"u{n}", "content": [{"type": "text", "text": user}]}}},
            {"type": "event_msg", "payload": {"type": "item_completed", "turn_id": turn, "item": {
                "type": "AgentMessage", "id": f"a{n}", "content": [{"type": "Text", "text": assistant}]}}},
            {"type": "event_msg", "payload": {"type": "task_complete", "turn_id": turn}},
        )
        return prompt, self.hook("Stop", turn_id=turn)

    def end(self) -> HookResult:
        return self.hook("SessionEnd", reason="other")
