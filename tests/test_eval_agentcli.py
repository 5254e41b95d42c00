"""`cm eval` on an agent-CLI runtime (issue 33): a user whose Memory Agent is Claude Code, Codex or
Gemini CLI scores that runtime on the synthetic worlds; each world's temporary home runs the same
CLI (its own login, the user's environment), with no key anywhere.

Each real CLI (Claude Code 2.1.328, Codex 0.169.0, Gemini CLI 0.61.0), offline, pointed at the
project's loopback fake model playing the careful policy through cm's MCP tools. Never skipped: without node/npm it fails saying what to
install.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import CM
from eval_support import eval_env
from support import agentcli_world

from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("agent", agentcli_world.AGENTS)
def test_cm_eval_scores_an_agent_cli_as_the_memory_agent(agent, tmp_path):
    cli = agentcli_world.binary(agent)
    with fakemodel.running(str(tmp_path / "model"), {"policy": "careful"}) as fake:
        env = eval_env(str(tmp_path))
        env.update({k: v for k, v in agentcli_world.host_env(agent, tmp_path, env["COMMON_MEMORY_HOME"], fake).items()
                    if k not in ("COMMON_MEMORY_HOME",)})
        env["TMPDIR"] = str(tmp_path / "tmp")
        done = subprocess.run([CM, "config", "init", *agentcli_world.init_args(agent, str(cli))], env=env,
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        proc = subprocess.run([CM, "eval", "--world", "remember-preferences", "--yes", "--json"], env=env,
                              capture_output=True, text=True, timeout=540, stdin=subprocess.DEVNULL)
        agent_requests = agentcli_world.agent_requests(fake)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["model"]["api"] == "agent-cli" and agent in report["model"]["label"], report["model"]
    (world,) = report["worlds"]
    assert world["status"] == "passed", world
    assert report["score"]["percent"] == 100.0
    # The Memory Agent really ran through the CLI: its requests offer cm's tools (the submission too).
    assert agent_requests and all("submit_memory_decision" in json.dumps(r["body"].get("tools"))
                                  for r in agent_requests)
    # Every world's temporary home is gone (the CLI keeps its own scratch files in TMPDIR).
    assert [n for n in os.listdir(tmp_path / "tmp") if n.startswith("cm-")] == []
    assert not os.path.exists(Path(env["COMMON_MEMORY_HOME"]) / "data"), "the user's own memory is never touched"
