"""The configuration `cm codex-config` generates, exercised by the real Codex CLI (0.169.0).

The profile file is saved where Codex expects it, its six hooks are trusted the way Codex computes
trust (the hash `cm doctor` checks, written to ``hooks.state`` as the /hooks screen would), and
``codex exec --profile common-memory`` runs against the loopback fake model, which calls cm's
read-only MCP ``memory_read``. Never skipped: missing node/npm fails with what to install.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from conftest import db_rows, run_cm, settle
from support import hosts

from cmrunner.manage import doctor
from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(300)


def test_generated_profile_hooks_fire_and_the_read_mcp_serves_memory_read(home, tmp_path):
    memory = Path(home) / "data" / "memory"
    memory.mkdir(parents=True)
    (memory / "profile.md").write_text("# Profile\n\n## Name\nThe user is Ada Lovelace-5521.\n")
    script = {"replies": [{"tool_calls": [{"name": "memory_read", "namespace": "mcp__common_memory",
                                           "arguments": {}}]}],
              "default": {"text": "You are Ada."}}
    codex = hosts.codex_binary()
    with fakemodel.running(str(tmp_path / "fake"), script) as fake:
        codex_home = tmp_path / "codexhome"
        config = hosts.write_codex_home(str(codex_home), fake.base_url)
        generated = run_cm(["--home", home, "codex-config"])
        assert generated.returncode == 0, generated.stderr
        profile_path = codex_home / "common-memory.config.toml"
        profile_path.write_bytes(generated.stdout)
        profile = tomllib.loads(generated.stdout.decode())
        trust = []
        for event, groups in profile["hooks"].items():
            key = f"{profile_path}:{doctor.event_snake(event)}:0:0"
            trust.append(f'[hooks.state."{key}"]\ntrusted_hash = "{doctor.trust_hash(event, groups[0], groups[0]["hooks"][0])}"\n')
        with open(config, "a", encoding="utf-8") as handle:
            handle.write("\n" + "\n".join(trust))
        report = json.loads(run_cm(["--home", home, "doctor", "--codex-home", str(codex_home), "--json"]).stdout)
        states = {c["name"]: c["state"] for c in report}
        assert states["hook trust"] == "ok", report

        work = tmp_path / "work"
        work.mkdir()
        env = hosts.codex_env(str(codex_home), str(tmp_path / "scratch"), {"CM_TEST_DRAIN_LINGER_MS": "0"})
        env.pop("COMMON_MEMORY_HOST_INSTANCE", None)
        done = hosts.run_codex_exec(codex, ["--profile", "common-memory", "Who am I?"], str(work), env)
        assert done.returncode == 0, done.stderr[-2000:]
        requests = fake.model_requests()

    settle(home)  # the drain consumes the admitted prompt after codex exits; on a loaded machine, later
    # The hooks fired: SessionStart injected memory and the prompt was admitted.
    first = json.dumps([i for i in requests[0]["body"]["input"] if i.get("role") == "developer"])
    assert "Ada Lovelace-5521" in first and "common-memory-data" in first
    assert db_rows(home, "SELECT COUNT(*) FROM host_activations") == [(1,)]
    assert [r[0] for r in db_rows(home, "SELECT text FROM observations")] == ["Who am I?"]
    # The model saw cm's read tool and called it; the tool's answer reached the model.
    tools = json.dumps(requests[0]["body"]["tools"])
    assert "memory_read" in tools and "memory_init" not in tools
    outputs = [i for i in requests[1]["body"]["input"] if i.get("type") == "function_call_output"]
    assert outputs and "Ada Lovelace-5521" in json.dumps(outputs)
