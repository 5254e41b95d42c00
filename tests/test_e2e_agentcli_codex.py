"""End to end: the real Codex CLI (0.169.0) as the Memory Agent's runtime, offline (issue 33).

One loopback fake model (policy mode, Responses API) serves the user's own `codex exec` sessions
(plain text) and the Memory Agent's `codex exec` run (cm's tools in the `mcp__cm` namespace, the
diligent policy). The user's CODEX_HOME holds the fake provider and cm's trusted hooks; cm is set
up with `cm config init --agent codex` (no key). Never skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import db_rows, settle
from support import agentcli_world, hosts

from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(300)
CM_TOOLS = {"inspect_ingest", "read_ingest", "inspect_memory", "processing_state", "record_working_notes",
            "submit_memory_decision"}
SHELL_TOOLS = {"exec_command", "write_stdin", "shell", "apply_patch", "web_search", "spawn_agent"}


@pytest.fixture(scope="module")
def codex() -> Path:
    return hosts.codex_binary()


class Setup(agentcli_world.World):
    """A CODEX_HOME with the fake provider and cm's trusted hooks, and cm's Memory Agent set to that
    same Codex."""

    def __init__(self, codex: Path, home: str, root: Path, fake: fakemodel.FakeModel) -> None:
        super().__init__("codex", codex, home, root, fake)
        assert len(hosts.trust_hooks(codex, self.env, str(self.work))) == len(hosts.CM_EVENTS)

    def session(self, prompt: str) -> None:
        done = hosts.run_codex_exec(self.cli, [prompt], str(self.work), self.env)
        assert done.returncode == 0, done.stderr[-2000:]


def _tools(request: dict) -> set[str]:
    names = set()
    for tool in request["body"].get("tools") or []:
        if tool.get("type") == "namespace":
            names |= {f"{tool['name']}.{t.get('name')}" for t in tool.get("tools") or []}
        else:
            names.add(tool.get("name"))
    return names


def test_codex_runs_the_memory_agent_and_the_next_session_knows(codex, home, tmp_path):
    with fakemodel.running(str(tmp_path / "model"), {"policy": "remember_user_turns"}) as fake:
        setup = Setup(codex, home, tmp_path, fake)
        setup.session("Please remember that my build tool is Bazel-6618.")
        settle(home)
        flushed = setup.flush()
        assert flushed.returncode == 0, flushed.stdout + flushed.stderr
        assert "Bazel-6618" in (Path(home) / "data" / "memory" / "profile.md").read_text()
        agent = setup.agent_requests()
        assert agent
        offered = set().union(*(_tools(r) for r in agent))
        assert {f"mcp__cm.{t}" for t in CM_TOOLS} <= offered, offered
        assert not offered & SHELL_TOOLS and not any(n.startswith("mcp__") and not n.startswith("mcp__cm.")
                                                     for n in offered), offered
        assert db_rows(home, "SELECT state FROM jobs") == [("done",)]
        assert db_rows(home, "SELECT text FROM observations ORDER BY id") == [
            ("Please remember that my build tool is Bazel-6618.",)]
        assert not any("common-memory-data" in json.dumps(r["body"]) for r in agent)
        rows = db_rows(home, "SELECT host, api, token_source, input_tokens, outcome FROM ledger")
        assert len(rows) == 1 and rows[0][:3] == ("codex", "agent-cli", "provider") and rows[0][3] > 0, rows
        before = len(fake.model_requests())
        setup.session("Which build tool do I use?")
        assert "Bazel-6618" in json.dumps(fake.model_requests()[before]["body"])
        settle(home)


def test_a_shell_call_the_model_makes_executes_nothing(codex, home, tmp_path):
    proof = tmp_path / "shell-ran"
    script = {"policy": "remember_user_turns", "inject": {"first": {"tool_calls": [
        {"name": "exec_command", "arguments": {"cmd": f"touch {proof}"}, "call_id": "call_x1"},
        {"name": "shell", "arguments": {"command": ["touch", str(proof)]}, "call_id": "call_x2"}]}}}
    with fakemodel.running(str(tmp_path / "model"), script) as fake:
        setup = Setup(codex, home, tmp_path, fake)
        setup.session("Please remember that my linter is ruff-7702.")
        settle(home)
        flushed = setup.flush()
        assert flushed.returncode == 0, flushed.stdout + flushed.stderr
        answered = {i.get("call_id") for r in setup.agent_requests() for i in r["body"].get("input") or []
                    if i.get("type") == "function_call_output"}
    assert {"call_x1", "call_x2"} <= answered  # Codex got both calls and answered them without running them
    assert not proof.exists()
    assert "ruff-7702" in (Path(home) / "data" / "memory" / "profile.md").read_text()
    settle(home)
