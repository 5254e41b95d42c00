"""`cm eval` on an agent-CLI runtime (issue 33): a user whose Memory Agent is Claude Code scores
that runtime on the synthetic worlds; each world's temporary home runs the same CLI (its own
login, the user's environment), with no key anywhere.

The real Claude Code (2.1.328), offline, pointed at the project's loopback fake model playing the
careful policy through cm's MCP tools. Never skipped: without node/npm it fails saying what to
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
from support import agenthosts

from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(600)


def test_cm_eval_scores_claude_code_as_the_memory_agent(tmp_path):
    claude = agenthosts.claude_binary()
    with fakemodel.running(str(tmp_path / "model"), {"policy": "careful"}) as fake:
        scratch = tmp_path / "scratchhome"
        agenthosts.write_claude_settings(scratch, None)
        env = eval_env(str(tmp_path))
        env.update({k: v for k, v in agenthosts.claude_env(scratch, env["COMMON_MEMORY_HOME"], fake.root_url).items()
                    if k not in ("COMMON_MEMORY_HOME",)})
        env["TMPDIR"] = str(tmp_path / "tmp")
        done = subprocess.run([CM, "config", "init", "--agent", "claude-code", "--agent-path", str(claude)], env=env,
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        proc = subprocess.run([CM, "eval", "--world", "remember-preferences", "--yes", "--json"], env=env,
                              capture_output=True, text=True, timeout=540, stdin=subprocess.DEVNULL)
        agent = [r for r in fake.model_requests() if "memory_task_v1" in json.dumps(r["body"])]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["model"]["api"] == "agent-cli" and "claude-code" in report["model"]["label"], report["model"]
    (world,) = report["worlds"]
    assert world["status"] == "passed", world
    assert report["score"]["percent"] == 100.0
    # The Memory Agent really ran through Claude Code: its requests carry cm's tools as mcp__cm__*.
    assert agent and all(any(t.get("name", "").startswith("mcp__cm__") for t in r["body"].get("tools") or [])
                         for r in agent)
    # Every world's temporary home is gone (Claude Code keeps its own scratch files in TMPDIR).
    assert [n for n in os.listdir(tmp_path / "tmp") if n.startswith("cm-")] == []
    assert not os.path.exists(Path(env["COMMON_MEMORY_HOME"]) / "data"), "the user's own memory is never touched"
