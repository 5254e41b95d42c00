"""`cm status`: paths, counts and the drain, without creating or writing anything."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess

from conftest import CM, Transcript, event, hook_env, run_cm, run_cm_terminal, run_hook
from drain_support import drain_env, start_drain, write_script
from history_support import SAID, SCRIPT, run_commits
from writer_support import admit

from cmrunner.core import config as config_mod, envfile


def test_status_on_a_fresh_home_creates_nothing(home):
    proc = run_cm(["status", "--json"])
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["config"]["exists"] is False
    assert report["paths"]["database"] == os.path.join(home, "data", "runtime.sqlite")
    assert report["store"]["exists"] is False and report["drain"] == {"alive": False}
    assert report["history"] is None
    assert not os.path.exists(home)
    text = run_cm(["status"]).stdout.decode()
    assert "not configured" in text and "not created yet" in text
    assert not os.path.exists(home)


def test_status_counts_inbox_and_shows_key_presence_not_value(home, tmp_path, workdir, quiet_drain):
    data = config_mod.default_config(home)
    data["remote"] = {"provider": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1", "model": "m",
                      "apiKeyEnv": "COMMON_MEMORY_API_KEY", "proxy": {"mode": "direct"}}
    config_mod.save(home, data)
    envfile.update(home, {"COMMON_MEMORY_API_KEY": "sk-test-very-secret-value"})
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    assert run_hook(home, event("SessionStart", transcript, workdir, source="startup")).returncode == 0
    transcript.user_turn("t1", "hi")
    assert run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="t1", prompt="hi")).returncode == 0
    proc = run_cm(["status", "--json"])
    assert b"very-secret" not in proc.stdout
    report = json.loads(proc.stdout)
    assert report["inbox"] == {"codex": 2, "pi": 0, "candidates": 1, "hooks": 0}
    assert report["hookRejections"] == []
    assert report["model"]["apiKeyConfigured"] is True
    assert report["store"]["schemaVersion"] == report["store"]["codeSchemaVersion"]
    text = run_cm(["status"]).stdout.decode()
    assert "inbox:       codex 2" in text and "key configured" in text and "very-secret" not in text


def test_status_reports_a_live_drain(home):
    # The drain lingers 20 s, twice the polling deadline, so it is alive whenever status is asked.
    drain = subprocess.Popen([CM, "session-drain", "--home", home], env=hook_env(CM_TEST_DRAIN_LINGER_MS="20000"))
    try:
        import time

        deadline = time.monotonic() + 10
        while True:
            report = json.loads(run_cm(["status", "--json"]).stdout)
            if report["drain"]["alive"]:
                break
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert report["drain"]["pid"] == drain.pid
    finally:
        drain.terminate()
        drain.wait(timeout=10)


def test_status_reports_an_invalid_config(home):
    os.makedirs(home)
    with open(os.path.join(home, "config.json"), "w") as handle:
        handle.write('{"schemaVersion": 2}')
    report = json.loads(run_cm(["status", "--json"]).stdout)
    assert report["config"]["error"]["code"] == "CONFIG_INVALID"


def test_configuration_text_reaches_a_terminal_escaped(home):
    data = config_mod.default_config(home)
    data["remote"] = {"provider": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1",
                      "model": "m\x1b]0;owned\x07\u202eevil", "apiKeyEnv": "COMMON_MEMORY_API_KEY",
                      "proxy": {"mode": "direct"}}
    config_mod.save(home, data)
    out = run_cm_terminal(["status"])
    assert "model:       m^[]0;owned^G\\u202eevil at http://127.0.0.1:9/v1" in out
    assert not any(c in out for c in "\x1b\x07\u202e")
    assert "m\x1b]0;owned\x07\u202eevil" in run_cm(["status"]).stdout.decode(), "a pipe gets the value unchanged"


def _store_bytes(db: str) -> list[bytes | None]:
    found = []
    for path in (db, db + "-wal"):
        try:
            with open(path, "rb") as handle:
                found.append(handle.read())
        except FileNotFoundError:
            found.append(None)
    return found


def _status(home: str) -> tuple[dict, str]:
    proc = run_cm(["status", "--json", "--home", home])
    assert proc.returncode == 0, proc.stderr
    text = run_cm(["status", "--home", home]).stdout.decode()
    return json.loads(proc.stdout), next(line for line in text.splitlines() if line.startswith("history:"))


def test_status_counts_history_versions_and_the_trash_read_only(home, tmp_path):
    paths, _after = run_commits(home, tmp_path, count=2)  # put, then correct: two versions, nothing removed
    report, line = _status(home)
    assert report["history"] == {"versions": 2, "trashed": 0, "oldestTrashedAt": None, "oldestExpiresAt": None,
                                 "trashRetentionDays": 30}
    assert line == "history:     2 section version(s) recorded (`cm history`); trash empty"

    admit(paths, SAID[2], "e3", batch="b3")  # and forget it: a third version, the section in the trash
    drain = start_drain(home, drain_env(write_script(str(tmp_path), SCRIPT), str(tmp_path / "calls")))
    assert drain.wait(timeout=60) == 0, drain.stderr.read()
    [entry] = json.loads(run_cm(["trash", "--json", "--home", home]).stdout)
    assert len(json.loads(run_cm(["history", "--json", "--home", home]).stdout)) == 3
    stored = _store_bytes(paths.db)
    report, line = _status(home)
    assert _store_bytes(paths.db) == stored, "status only reads"
    assert report["history"]["versions"] == 3 and report["history"]["trashed"] == 1
    assert report["history"]["oldestTrashedAt"] == entry["removedAt"]
    assert report["history"]["oldestExpiresAt"] == entry["expiresAt"]
    assert line == (f"history:     3 section version(s) recorded (`cm history`); trash: 1 section(s), the oldest "
                    f"kept until {entry['expiresAt'][:10]} (`cm trash`)")

    conn = sqlite3.connect(paths.db)
    conn.execute("UPDATE trash SET removed_at = removed_at - ?", (31 * 86_400_000,))
    conn.commit()
    conn.close()
    _report, line = _status(home)
    assert line.endswith("the oldest past its retention, purged when the next drain starts (`cm trash`)")
