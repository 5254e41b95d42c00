"""End to end with the real Codex CLI (0.169.0, installed from npm into a cache outside the repo).

Codex runs offline against the project's own fake model on 127.0.0.1, with cm's hooks in its
``hooks.json`` trusted the way a user would (``codex app-server``: hooks/list + config/batchWrite).
If node or npm is missing these tests fail with what to install; they are never skipped.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import CM, db_rows, settle
from support import hosts

from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def codex() -> Path:
    return hosts.codex_binary()


class CodexSetup:
    def __init__(self, codex: Path, home: str, root: Path, fake: fakemodel.FakeModel) -> None:
        self.codex, self.home, self.fake = codex, home, fake
        self.work = root / "work"
        self.work.mkdir(exist_ok=True)
        self.codex_home = str(root / "codexhome")
        hooks = hosts.codex_hooks(hosts.cm_hook_command(CM, home))
        hosts.write_codex_home(self.codex_home, fake.base_url, hooks=hooks)
        self.env = hosts.codex_env(self.codex_home, str(root / "scratchhome"),
                                   {"COMMON_MEMORY_HOME": home, "CM_TEST_DRAIN_LINGER_MS": "0"})
        self.env.pop("COMMON_MEMORY_HOST_INSTANCE", None)  # the hook must find the real Codex process
        listed = hosts.trust_hooks(codex, self.env, str(self.work))
        assert len(listed) == len(hosts.CM_EVENTS)  # every cm hook discovered and trusted

    def exec(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = hosts.run_codex_exec(self.codex, list(args), str(self.work), self.env)
        assert done.returncode == 0, done.stderr[-2000:]
        return done


@pytest.fixture
def setup(codex, home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        yield CodexSetup(codex, home, tmp_path, fake)



def batches(home: str) -> list[list[str]]:
    rows = db_rows(home, "SELECT batch_id, text FROM observations WHERE batch_id IS NOT NULL ORDER BY id")
    grouped: dict[str, list[str]] = {}
    for batch, text in rows:
        grouped.setdefault(batch, []).append(text)
    return list(grouped.values())


def test_twenty_one_turns_in_one_codex_process_seal_ten_ten_one(setup, home):
    prompts = [f"Remember fact number {n} about my setup." for n in range(1, 22)]
    server = hosts.AppServer(setup.codex, setup.env, str(setup.work))
    try:
        server.call("initialize", {"clientInfo": {"name": "cm-e2e", "version": "0"}})
        server.notify("initialized")
        thread = server.call("thread/start", {"cwd": str(setup.work)})["thread"]["id"]
        for prompt in prompts:
            server.notifications.clear()
            server.call("turn/start", {"threadId": thread, "input": [{"type": "text", "text": prompt}]})
            server.wait_for("turn/completed", 60)
    finally:
        server.close()
    settle(home)
    assert batches(home) == [prompts[:10], prompts[10:20], prompts[20:]]
    assert db_rows(home, "SELECT COUNT(*) FROM codex_failures") == [(0,)]
    assert db_rows(home, "SELECT COUNT(*) FROM observations WHERE state != 'pending'") == [(0,)]


def test_separate_exec_runs_and_a_resume_are_separate_activations(setup, home):
    setup.exec("My favourite language is OCaml.")
    setup.exec("I work from Lisbon.")
    setup.exec("resume", "--last", "I prefer dark themes.")
    settle(home)
    assert batches(home) == [["My favourite language is OCaml."], ["I work from Lisbon."], ["I prefer dark themes."]]
    assert len(db_rows(home, "SELECT id FROM sessions")) == 3


def test_session_start_injection_reaches_the_model(setup, home):
    memory = Path(home) / "data" / "memory"
    memory.mkdir(parents=True, exist_ok=True)
    (memory / "profile.md").write_text("# Profile\n\n## Editor\nThe user edits with kakoune-7731.\n")
    setup.exec("Which editor do I use?")
    first = setup.fake.model_requests()[0]["body"]
    developer = [item for item in first["input"] if item.get("role") == "developer"]
    texts = json.dumps(developer)
    assert "kakoune-7731" in texts and "common-memory-data" in texts
    # The block's last line says how fresh it is (issue 26); this session's own turn is not captured yet.
    assert "Memory state: updated just now; no turns waiting to be processed." in texts


def test_the_next_session_is_told_of_turns_no_drain_has_read_yet(setup, home, quiet_drain):
    """Issue 26: a busy drain (here a stand-in holding the lease) has not read the first session's
    turn from the inbox; the next real Codex session's injected block still counts it."""
    setup.exec("Please remember that I deploy with Nomad.")
    assert db_rows(home, "SELECT COUNT(*) FROM observations") == [(0,)], "the turn is still in the inbox"
    seen = len(setup.fake.model_requests())
    setup.exec("How do I deploy?")
    first = setup.fake.model_requests()[seen]["body"]
    developer = json.dumps([item for item in first["input"] if item.get("role") == "developer"])
    assert "common-memory-data" in developer
    assert "Memory state: no memory saved yet; 1 turn still being processed." in developer


def test_an_interrupted_turn_is_not_evidence(codex, home, tmp_path):
    # The SIGINT follows an event (the model request arrived), not a delay, and the reply stalls
    # 20 s, so the interrupt lands mid-turn at any load.
    script = {"replies": [{"text": "thinking slowly", "delay_seconds": 20}], "default": {"text": "ok"}}
    with fakemodel.running(str(tmp_path / "fake"), script) as fake:
        setup = CodexSetup(codex, home, tmp_path, fake)
        process = hosts.start_codex_exec(codex, ["Please remember I like tea."], str(setup.work), setup.env)
        deadline = time.monotonic() + 60
        while not fake.model_requests():
            assert time.monotonic() < deadline, "codex never called the model"
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        finally:
            hosts.stop(process)
    settle(home)
    rows = db_rows(home, "SELECT text, state, issue FROM observations")
    assert rows == [("Please remember I like tea.", "quarantined", "INTERRUPTED_TURN")]
    assert batches(home) == []


def test_full_loop_what_one_codex_session_says_the_next_one_knows(codex, home, tmp_path):
    """Codex → hooks → drain → Memory Agent (synthetic model, Responses) → Markdown → next SessionStart."""
    from agent_support import configure_remote

    with fakemodel.running(str(tmp_path / "agent-model"), {"policy": "remember_user_turns"}) as agent_model, \
            fakemodel.running(str(tmp_path / "codex-model"), {"replies": [], "default": {"text": "Noted."}}) as fake:
        configure_remote(home, agent_model.base_url)
        setup = CodexSetup(codex, home, tmp_path, fake)
        setup.exec("Remember that my cat is called Miso-3357.")
        deadline = time.monotonic() + 60
        profile = Path(home) / "data" / "memory" / "profile.md"
        while not (profile.exists() and "Miso-3357" in profile.read_text()):
            assert time.monotonic() < deadline, "the drain did not commit the session's memory"
            time.sleep(0.1)
        assert any(r["body"] and "submit_memory_decision" in json.dumps(r["body"]) for r in agent_model.model_requests())
        before = len(fake.model_requests())
        setup.exec("What is my cat called?")
        first_of_second = fake.model_requests()[before]["body"]
        developer = json.dumps([i for i in first_of_second["input"] if i.get("role") == "developer"])
        assert "Miso-3357" in developer
        settle(home)  # while the synthetic model is still up: the second session is work too


def test_a_slash_word_and_a_bang_prompt_the_model_received_are_turns(setup, home):
    """The Claude Code / Gemini rule (hooks/slashcommands.py) holds here without a name list: Codex
    evidence is the user message its rollout records as sent, so a `/word` or `!…` that `codex exec`
    sends to the model as text is a turn."""
    words = ["/home is full, clean it-4417", "!du -sh ~/cache-7781 says it is huge"]
    for text in words:
        setup.exec(text)
    requests = [json.dumps(r["body"]) for r in setup.fake.model_requests()]
    assert all(any(json.dumps(text)[1:-1] in r for r in requests) for text in words)  # sent as text
    settle(home)
    assert db_rows(home, "SELECT text, state FROM observations ORDER BY id") == [(t, "pending") for t in words]
