"""``cm demo``: the whole loop on a fresh temporary home, against a clearly labelled synthetic model.

It starts the synthetic model (``cmrunner.synthetic.fakemodel``, 127.0.0.1 only, bounded
lifetime) in its "diligent model" mode, writes a configuration that points at it (a throwaway key
that is not a secret), then plays a short Codex session through the real ``cm hook codex`` entry
as subprocesses: SessionStart, two prompts each with their Stop, SessionEnd. The hooks spawn the
real detached drain, which consumes the inbox, seals the session's batch, runs the real Memory
Agent over the Responses protocol against the synthetic model and commits. The demo then prints
the resulting Markdown, what ``cm show`` gives consumers, and the receipt — and plays a second
session to show its SessionStart injection carrying the new memory.

It never touches an existing home (a new temporary folder, removed at the end unless ``keep``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from cmrunner.core import config as config_mod, envfile
from cmrunner.core.home import DataPaths
from cmrunner.synthetic import fakemodel
from cmrunner.views import status as status_mod

PROMPTS = ("I prefer tabs over spaces in Go code.", "My main project is a small Rust CLI called tidewatch.")
STAMP = "2026-11-30T00:00:00.000Z"
KEY_NAME = "COMMON_MEMORY_API_KEY"


def _line(record: dict) -> str:
    return json.dumps({"timestamp": STAMP, **record}, separators=(",", ":")) + "\n"


class _Session:
    """A Codex-shaped session: a transcript file and the hook events Codex would send."""

    def __init__(self, root: str, name: str, home: str, work: str) -> None:
        self.path = os.path.join(root, f"rollout-{name}.jsonl")
        self.name, self.home, self.work = name, home, work
        self.env = dict(os.environ, COMMON_MEMORY_HOST_INSTANCE=f"demo:{name}")
        with open(self.path, "w", encoding="utf-8") as handle:
            handle.write(_line({"type": "session_meta", "payload": {"id": name, "cli_version": "0.169.0"}}))

    def write(self, *records: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.writelines(_line(record) for record in records)

    def hook(self, name: str, **fields: object) -> tuple[int, dict, float]:
        event = {"session_id": self.name, "transcript_path": self.path, "cwd": self.work, "hook_event_name": name,
                 **fields}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-I", "-m", "cmrunner", "hook", "codex", "--home", self.home],
                              input=json.dumps(event).encode(), capture_output=True, env=self.env, timeout=30)
        elapsed = (time.perf_counter() - started) * 1000
        out = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else {}
        return done.returncode, out, elapsed

    def turn(self, n: int, prompt: str) -> Iterator[str]:
        turn = f"{self.name}-turn-{n}"
        self.write({"type": "event_msg", "payload": {"type": "task_started", "turn_id": turn}})
        code, _, ms = self.hook("UserPromptSubmit", turn_id=turn, prompt=prompt)
        yield f"  UserPromptSubmit  exit {code}, {ms:5.1f} ms   you: {prompt}"
        self.write(
            {"type": "event_msg", "payload": {"type": "item_completed", "turn_id": turn, "item": {
                "type": "UserMessage", "id": f"u{n}", "content": [{"type": "text", "text": prompt}]}}},
            {"type": "event_msg", "payload": {"type": "item_completed", "turn_id": turn, "item": {
                "type": "AgentMessage", "id": f"a{n}", "content": [{"type": "Text", "text": "Noted."}]}}},
            {"type": "event_msg", "payload": {"type": "task_complete", "turn_id": turn}},
        )
        code, _, ms = self.hook("Stop", turn_id=turn)
        yield f"  Stop              exit {code}, {ms:5.1f} ms"


def _wait_for_drain(home: str, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        report = status_mod.gather(home)
        if not report["drain"]["alive"] and not report["inbox"]["codex"] \
                and not report["observations"].get("pending") and not report["observations"].get("claimed"):
            return True
        time.sleep(0.1)
    return False


def run(keep: bool = False) -> Iterator[str]:
    started = time.perf_counter()
    root = tempfile.mkdtemp(prefix="cm-demo-")
    home, work = os.path.join(root, "home"), os.path.join(root, "work")
    os.mkdir(work)
    try:
        with fakemodel.running(os.path.join(root, "synthetic-model"), {"policy": "remember_user_turns"}) as model:
            data = config_mod.default_config(home)
            data["remote"] = {"provider": "openai-compatible", "baseUrl": model.base_url,
                              "model": "synthetic-demo-model", "apiKeyEnv": KEY_NAME, "apiKeySource": "private-env",
                              "api": "responses", "proxy": {"mode": "direct"}}
            config_mod.save(home, data)
            envfile.update(home, {KEY_NAME: "demo-key-not-a-secret"})
            paths = DataPaths(data["dataRoot"])
            yield f"home:        {home} (temporary; your own home is never touched)"
            yield f"model:       SYNTHETIC — cm's own fake model at {model.base_url} (no network, no key)"
            yield "session 1:   a Codex session, played through the real `cm hook codex`"
            first = _Session(root, "demo-1", home, work)
            code, _, ms = first.hook("SessionStart", source="startup")
            yield f"  SessionStart      exit {code}, {ms:5.1f} ms   (memory is empty so far)"
            for n, prompt in enumerate(PROMPTS, start=1):
                yield from first.turn(n, prompt)
            code, _, ms = first.hook("SessionEnd", reason="other")
            yield f"  SessionEnd        exit {code}, {ms:5.1f} ms   (a real end seals the session's batch)"
            settled = _wait_for_drain(home)
            yield f"drain:       {'consumed the inbox, ran the Memory Agent and committed' if settled else 'STILL BUSY after 60 s'}"
            calls = len(model.model_requests())
            yield f"             the Memory Agent made {calls} model requests (reading through cm's tools, then one decision)"
            yield ""
            for target in ("profile", "preferences"):
                path = paths.document(target)
                if os.path.exists(path):
                    yield f"----- {path}"
                    yield open(path, encoding="utf-8").read().rstrip("\n")
            yield ""
            show = subprocess.run([sys.executable, "-I", "-m", "cmrunner", "--home", home, "show", "--plain"],
                                  capture_output=True, text=True, timeout=60)
            yield "----- cm show --plain (exactly what consumers receive)"
            yield show.stdout.rstrip("\n")
            yield ""
            receipts = sorted(os.listdir(paths.receipts)) if os.path.isdir(paths.receipts) else []
            for name in receipts:
                yield f"----- receipt {name} (ids and hashes only)"
                yield json.dumps(json.load(open(os.path.join(paths.receipts, name))), indent=2)
            yield ""
            second = _Session(root, "demo-2", home, work)
            code, out, ms = second.hook("SessionStart", source="startup")
            block = out.get("hookSpecificOutput", {}).get("additionalContext", "")
            carried = all(prompt in block for prompt in PROMPTS)
            yield (f"session 2:   SessionStart exit {code}, {ms:.1f} ms — its injected memory "
                   f"{'carries what session 1 said' if carried else 'does NOT carry session 1'}")
        yield f"total:       {time.perf_counter() - started:.1f} s"
    finally:
        if keep:
            yield f"kept:        {root}"
        else:
            shutil.rmtree(root, ignore_errors=True)
