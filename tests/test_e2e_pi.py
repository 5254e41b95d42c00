"""End to end with the real Pi coding agent (0.73.1, from npm into a cache outside the repo).

Pi runs in RPC mode against the project's fake model on 127.0.0.1 with cm's own bridge extension
(the installed ``cmrunner/bridge/pi-extension/index.ts``) loaded by ``-e``; print and JSON mode are
in ``test_e2e_pi_print.py``. If node or npm is
missing these tests fail with what to install; they are never skipped.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import CM, db_rows, settle
from support import hosts

import cmrunner.bridge
from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(300)
BRIDGE = os.path.join(os.path.dirname(cmrunner.bridge.__file__), "pi-extension", "index.ts")


@pytest.fixture(scope="module")
def pi() -> Path:
    return hosts.pi_binary()


class PiRpc:
    """``pi --mode rpc`` as a child: JSONL commands in, responses and events out (bounded waits)."""

    def __init__(self, pi: Path, home: str, root: Path, base_url: str) -> None:
        agent_dir = hosts.write_pi_agent(root / "piagent", base_url)
        self.work = root / "work"
        self.work.mkdir(exist_ok=True)
        env = hosts.pi_env(agent_dir, root / "scratchhome", CM, home)
        self.process = subprocess.Popen(
            [str(pi), "--mode", "rpc", "--no-extensions", "-e", BRIDGE, "--provider", "fake", "--model", "fake-model",
             "--session-dir", str(root / "pisessions")],
            cwd=self.work, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.seq = 0

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def _next(self, deadline: float) -> dict:
        try:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError("pi did not answer in time") from None
        if not line:
            raise AssertionError(f"pi exited with {self.process.poll()}")
        try:
            return json.loads(line)
        except ValueError:
            return {}

    def command(self, body: dict, until_event: str | None = None, timeout: float = 60) -> dict:
        self.seq += 1
        rid = f"r{self.seq}"
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"id": rid, **body}).encode() + b"\n")
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        response = None
        while True:
            message = self._next(deadline)
            if message.get("type") == "response" and message.get("id") == rid:
                response = message
                assert response.get("success"), response
                if until_event is None:
                    return response
            elif until_event and message.get("type") == until_event and response is not None:
                return response

    def prompt(self, text: str) -> None:
        self.command({"type": "prompt", "message": text}, until_event="agent_end")

    def quit(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(20)
        finally:
            hosts.stop(self.process)



def test_pi_session_turns_become_evidence_and_memory_reaches_the_system_prompt(pi, home, tmp_path):
    memory = Path(home) / "data" / "memory"
    memory.mkdir(parents=True, exist_ok=True)
    (memory / "profile.md").write_text("# Profile\n\n## Shell\nThe user's shell is nushell-4410.\n")
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        rpc = PiRpc(pi, home, tmp_path, fake.base_url)
        try:
            rpc.prompt("I always use two-space indentation.")
            rpc.prompt("My main project is a Rust CLI.")
        finally:
            rpc.quit()
        requests = fake.model_requests()
    settle(home)
    rows = db_rows(home, "SELECT text, source, state, batch_id IS NOT NULL FROM observations ORDER BY id")
    assert rows == [("I always use two-space indentation.", "rpc", "pending", 1),
                    ("My main project is a Rust CLI.", "rpc", "pending", 1)]
    assert len({r[0] for r in db_rows(home, "SELECT batch_id FROM observations")}) == 1  # the quit sealed the tail
    system = [m for m in requests[0]["body"]["messages"] if m["role"] == "system"]
    assert "## Common Memory" in json.dumps(system) and "nushell-4410" in json.dumps(system)
    assert all("nushell-4410" in json.dumps(r["body"]["messages"][0]) for r in requests)  # frozen, every turn


def test_fork_and_new_session_keep_batches_per_session(pi, home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        rpc = PiRpc(pi, home, tmp_path, fake.base_url)
        try:
            rpc.prompt("First session fact.")
            messages = rpc.command({"type": "get_fork_messages"})["data"]["messages"]
            rpc.command({"type": "fork", "entryId": messages[0]["entryId"]})
            rpc.prompt("Fact said in the fork.")
            rpc.command({"type": "new_session"})
            rpc.prompt("Fact said in a brand new session.")
        finally:
            rpc.quit()
    settle(home)
    by_session: dict[str, list[str]] = {}
    for namespace, text in db_rows(home, "SELECT namespace, text FROM observations ORDER BY id"):
        by_session.setdefault(namespace, []).append(text)
    assert sorted(by_session.values()) == sorted([["First session fact."], ["Fact said in the fork."],
                                                  ["Fact said in a brand new session."]])
    # Only the session alive at quit is sealed; the others keep their cache for a later real exit.
    sealed = db_rows(home, "SELECT text FROM observations WHERE batch_id IS NOT NULL")
    assert sealed == [("Fact said in a brand new session.",)]


def test_full_loop_what_one_pi_session_says_the_next_system_prompt_carries(pi, home, tmp_path):
    """Pi → bridge → cm capture → drain → Memory Agent (synthetic model, Chat) → Markdown → next Pi."""
    from agent_support import configure_remote

    with fakemodel.running(str(tmp_path / "agent-model"), {"policy": "remember_user_turns"}) as agent_model, \
            fakemodel.running(str(tmp_path / "pi-model"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        configure_remote(home, agent_model.base_url, api="chat_completions")
        rpc = PiRpc(pi, home, tmp_path, fake.base_url)
        try:
            rpc.prompt("My favourite tea is genmaicha-8812.")
        finally:
            rpc.quit()
        deadline = time.monotonic() + 60  # polled: only bounds a hang
        profile = Path(home) / "data" / "memory" / "profile.md"
        while not (profile.exists() and "genmaicha-8812" in profile.read_text()):
            assert time.monotonic() < deadline, "the drain did not commit the Pi session's memory"
            time.sleep(0.1)
        assert any("/chat/completions" in r["path"] for r in agent_model.model_requests())
        before = len(fake.model_requests())
        second = PiRpc(pi, home, tmp_path, fake.base_url)
        try:
            second.prompt("Which tea do I like?")
        finally:
            second.quit()
        system = [m for m in fake.model_requests()[before]["body"]["messages"] if m["role"] == "system"]
        assert "genmaicha-8812" in json.dumps(system)
        settle(home)  # while the synthetic model is still up: the second session is work too
