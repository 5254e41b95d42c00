"""Seeded hostile input on every entry (issue 22), then the poisoned-queue health check.

``tests/support/hostile.py`` generates and runs the cases (real ``cm`` processes: ``hook codex``,
``hook work``, ``capture``, ``import``, and thousands of calls over one ``cm mcp`` stdio
session). Asserted: no traceback, no INTERNAL_ERROR, no exit code but 0 or 1, every MCP line
answered (by its id, or with id null when the id cannot be read), nothing admitted
from an input that must be refused (admission count and markers in the store's files), no
session a drain had to set aside as UNEXPECTED_FAILURE (each would be a cm bug it met), a final
drain that ends cleanly, and a valid Pi session admitted after the fuzz committed by the next
``cm flush``, which runs to its end (exit 1 only for buffered turns of fuzzed sessions that were
set aside: the flush rule counts those). ``bench/fuzz.py`` runs the same at a larger size.
"""

from __future__ import annotations

import json
import subprocess

from agent_support import policy
from conftest import CM, db_rows, hook_env, run_cm, wait_no_drain
from support import hostile
from writer_support import configure

from cmrunner.core import config as config_mod
from cmrunner.synthetic import fakemodel

SEED = 22


def test_hostile_input_on_every_entry_admits_nothing_wrong_and_stops_nothing(home, tmp_path):
    configure(home)
    mcp_home = str(tmp_path / "mcp-home")
    configure(mcp_home)
    root = tmp_path / "fuzz"
    root.mkdir()
    env = hook_env(COMMON_MEMORY_HOST_INSTANCE="codex:fuzz:1")
    tally, markers = hostile.run_all(CM, home, str(root), env, SEED, hooks=78, captures=60, mcp=2500, imports=12,
                                     mcp_env=dict(env, COMMON_MEMORY_HOME=mcp_home))

    assert tally.total >= 2500 and set(tally.cases) == {"codex", "work", "capture", "mcp", "import"}
    assert tally.exits[("codex", 0)] >= 5 and tally.exits[("capture", 0)] >= 5, "the fuzz reached past the door"
    assert tally.tracebacks == []
    assert tally.internal == []
    assert tally.bad_exit == []
    assert tally.unanswered == [], f"{len(tally.unanswered)} MCP lines got no answer: {tally.unanswered[:5]}"
    assert tally.admitted_bad == []
    assert markers and hostile.markers_in_store(home, markers) == []
    assert hostile.markers_in_store(mcp_home, markers) == []

    wait_no_drain(home, timeout=60)
    drained = subprocess.run([CM, "session-drain", "--home", home], env=env, capture_output=True, timeout=120)
    assert drained.returncode == 0, drained.stderr
    assert hostile.isolated_unexpected(home) == []

    # The health check: a valid session admitted after the fuzz is committed by the next flush.
    text = "After the fuzz I still use helix as my editor"
    for event_id, name, payload in (
            ("h1", "input", {"text": text, "source": "interactive", "hasImages": False}),
            ("h2", "message_end", {"role": "user", "text": text, "hasImages": False, "timestamp": 1795995559356}),
            ("h3", "agent_end", {"aborted": False}), ("h4", "session_shutdown", {"reason": "quit"})):
        event = {"version": 1, "sessionId": "health", "eventId": event_id, "event": name, "cwd": str(root),
                 "hostInstance": "pi:health:1", "payload": payload}
        assert run_cm(["capture", "--home", home], json.dumps(event).encode()).returncode == 0
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        data = config_mod.load(home).data
        data["remote"] = {"provider": "openai-compatible", "baseUrl": fm.base_url, "model": "fake-model",
                          "apiKeyEnv": "CM_FUZZ_KEY", "api": "responses", "proxy": {"mode": "direct"}}
        config_mod.save(home, data)
        from cmrunner.core import envfile

        envfile.update(home, {"CM_FUZZ_KEY": "sk-fuzz-not-a-real-key"})
        flushed = run_cm(["flush"], env=env, timeout=300)
    assert db_rows(home, "SELECT state FROM observations WHERE text = ?", (text,)) == [("processed",)]
    # The flush ran to its end: it is only "incomplete" (exit 1) for what the fuzz left in sessions
    # that were set aside or never ended (buffered), which no flush may seal.
    out = (flushed.stdout + flushed.stderr).decode()
    # The drain the health turn's capture spawned may still be running when the flush starts; the
    # flush then follows it, and that drain commits the turn (asserted above) instead of the flush.
    followed = b"the running drain it followed processed the queue" in flushed.stdout
    assert b"committed" in flushed.stdout or followed, out
    assert "DRAIN_CRASHED" not in out and "Traceback" not in out, out
    assert flushed.returncode == 0 or (flushed.stderr == b"flush incomplete: see `cm status`\n"
                                       and out.count("remaining: buffered") == 1), out
    report = json.loads(run_cm(["status", "--json"]).stdout)
    assert report["lastDrainFailure"] is None
