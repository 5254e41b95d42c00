"""End to end: the real Gemini CLI (0.61.0) as the Memory Agent's runtime, offline (issue 33).

One loopback fake model (policy mode, Gemini generateContent) serves the user's own `gemini -p`
sessions (plain text) and the Memory Agent's `gemini -p` run (cm's tools through its MCP server,
the diligent policy). The scratch HOME's user settings hold the offline auth and cm's hooks
(`cm agents install gemini`); cm is set up with `cm config init --agent gemini` (no key). Never skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import CM, db_rows, settle
from support import agentcli_world, agenthosts

from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(300)
CM_TOOLS = {"inspect_ingest", "read_ingest", "inspect_memory", "processing_state", "record_working_notes",
            "submit_memory_decision"}


@pytest.fixture(scope="module")
def gemini() -> Path:
    return agenthosts.gemini_binary()


class Setup(agentcli_world.World):
    """A scratch HOME with Gemini CLI's offline auth and cm's hooks, and cm's Memory Agent set to
    that same Gemini CLI."""

    def __init__(self, gemini: Path, home: str, root: Path, fake: fakemodel.FakeModel) -> None:
        super().__init__("gemini", gemini, home, root, fake)
        agenthosts.install_hooks(CM, home, "gemini", self.env)

    def session(self, prompt: str) -> None:
        done = agenthosts.run(agenthosts.gemini_argv(self.cli, prompt), str(self.work), self.env)
        assert done.returncode == 0, done.stderr[-2000:]


def _tools(request: dict) -> set[str]:
    return {d.get("name") for t in request["body"].get("tools") or [] for d in t.get("functionDeclarations") or []}


def test_gemini_runs_the_memory_agent_and_the_next_session_knows(gemini, home, tmp_path):
    with fakemodel.running(str(tmp_path / "model"), {"policy": "remember_user_turns"}) as fake:
        setup = Setup(gemini, home, tmp_path, fake)
        setup.session("Please remember that my package manager is pnpm-5150.")
        flushed = setup.flush()
        assert flushed.returncode == 0, flushed.stdout + flushed.stderr
        assert "pnpm-5150" in (Path(home) / "data" / "memory" / "profile.md").read_text()
        agent = setup.agent_requests()
        assert agent
        # Only cm's tools: no shell, file, web or memory tool of Gemini's own.
        assert all(_tools(r) == {f"mcp_cm_{t}" for t in CM_TOOLS} for r in agent), [sorted(_tools(r)) for r in agent]
        assert db_rows(home, "SELECT state FROM jobs") == [("done",)]
        assert db_rows(home, "SELECT text FROM observations ORDER BY id") == [
            ("Please remember that my package manager is pnpm-5150.",)]
        assert not any("common-memory-data" in json.dumps(r["body"]) for r in agent)
        rows = db_rows(home, "SELECT host, api, token_source, input_tokens, outcome FROM ledger")
        assert len(rows) == 1 and rows[0][:3] == ("gemini", "agent-cli", "provider") and rows[0][3] > 0, rows
        before = len(fake.model_requests())
        setup.session("Which package manager do I use?")
        assert "pnpm-5150" in json.dumps(fake.model_requests()[before:])
        settle(home)


def test_a_shell_call_the_model_makes_executes_nothing(gemini, home, tmp_path):
    proof = tmp_path / "shell-ran"
    script = {"policy": "remember_user_turns", "inject": {"first": {"tool_calls": [
        {"name": "run_shell_command", "arguments": {"command": f"touch {proof}"}},
        {"name": "write_file", "arguments": {"file_path": str(proof), "content": "x"}}]}}}
    with fakemodel.running(str(tmp_path / "model"), script) as fake:
        setup = Setup(gemini, home, tmp_path, fake)
        setup.session("Please remember that my formatter is black-3301.")
        flushed = setup.flush()
        assert flushed.returncode == 0, flushed.stdout + flushed.stderr
        answered = [p["functionResponse"] for r in setup.agent_requests() for c in r["body"].get("contents") or []
                    for p in c.get("parts") or [] if "functionResponse" in p]
    # Gemini answered both calls, and ran neither: neither tool exists in this run.
    assert {"run_shell_command", "write_file"} <= {a.get("name") for a in answered}, answered
    assert not proof.exists()
    assert "black-3301" in (Path(home) / "data" / "memory" / "profile.md").read_text()
    settle(home)
