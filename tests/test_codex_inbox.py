"""The drain's Codex inbox consumer: real captured sessions replayed through the real hook and drain."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess

import pytest
from conftest import CM, Transcript, db_rows, event, hook_env, run_cm, run_hook, wait_no_drain

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "codex")


def replay(name: str, home: str, tmp_path, env: dict | None = None) -> list[str]:
    """Feed a captured session to the real hook, growing the transcript as Codex did; returns prompts."""
    data = open(os.path.join(FIXTURES, f"{name}.jsonl"), "rb").read()
    path = str(tmp_path / f"{name}.jsonl")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    prompts = []
    for line in open(os.path.join(FIXTURES, f"{name}.hooks.jsonl")):
        entry = json.loads(line)
        payload = dict(entry["payload"], transcript_path=path, cwd=str(work))
        with open(path, "wb") as handle:
            handle.write(data[: entry["transcript_bytes_at_hook"]])
        proc = run_hook(home, payload, env=env)
        if payload["hook_event_name"] == "UserPromptSubmit":
            prompts.append(payload["prompt"])
        assert proc.returncode in (0, 1), proc.stderr
    with open(path, "wb") as handle:
        handle.write(data)
    return prompts


def drain(home: str) -> None:
    proc = subprocess.run([CM, "session-drain", "--home", home], env=hook_env(), capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    wait_no_drain(home)


def user_observations(home: str) -> list[tuple]:
    return db_rows(home, "SELECT text, state, issue, batch_id IS NOT NULL FROM observations ORDER BY id")


@pytest.mark.parametrize("name", ["simple", "legacy-0.153.4-simple", "shell_tool", "text_and_tool", "mcp_tool",
                                  "compaction", "stop_block", "legacy-0.153.4-app_server"])
def test_captured_sessions_become_exactly_the_typed_prompts(home, tmp_path, name):
    prompts = replay(name, home, tmp_path)
    drain(home)
    got = user_observations(home)
    assert [g[0] for g in got] == prompts
    assert all(g[1] == "pending" and g[3] for g in got), got  # sealed by the real SessionEnd
    assert db_rows(home, "SELECT COUNT(*) FROM codex_inbox") == [(0,)]
    assert db_rows(home, "SELECT COUNT(*) FROM codex_failures") == [(0,)]
    assert db_rows(home, "SELECT COUNT(*) FROM session_batches") == [(1,)]
    assistant = db_rows(home, "SELECT COUNT(*) FROM session_messages WHERE role = 'assistant'")[0][0]
    assert assistant >= 1


def test_app_server_session_of_three_turns(home, tmp_path):
    prompts = replay("app_server", home, tmp_path)
    drain(home)
    assert [g[0] for g in user_observations(home)] == prompts and len(prompts) == 3
    assert db_rows(home, "SELECT state FROM session_turns ORDER BY id") == [("settled",)] * 3


def test_interrupted_turn_is_not_evidence(home, tmp_path):
    replay("interrupted", home, tmp_path)
    drain(home)
    assert [(g[1], g[2]) for g in user_observations(home)] == [("quarantined", "INTERRUPTED_TURN")]
    assert db_rows(home, "SELECT COUNT(*) FROM session_batches") == [(0,)]


def test_blocked_prompt_leaves_no_evidence(home, tmp_path):
    replay("blocked", home, tmp_path)
    drain(home)
    assert user_observations(home) == []


def test_image_turn_is_quarantined_as_unsupported_content(home, tmp_path):
    replay("image", home, tmp_path)
    drain(home)
    (text, state, issue, _), = user_observations(home)
    assert (state, issue) == ("quarantined", "UNSUPPORTED_SOURCE")


def _turns(home: str, transcript: Transcript, workdir: str, start: int, count: int) -> None:
    for n in range(start, start + count):
        turn = f"turn-{n:02d}"
        assert run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id=turn,
                                    prompt=f"prompt {n}")).returncode == 0
        transcript.user_turn(turn, f"prompt {n}")
        transcript.reply(turn, f"answer {n}")
        assert run_hook(home, event("Stop", transcript, workdir, turn_id=turn)).returncode == 0


def test_twenty_one_turns_seal_ten_ten_and_a_tail(home, tmp_path, workdir):
    transcript = Transcript(str(tmp_path / "long.jsonl"), "long-1")
    assert run_hook(home, event("SessionStart", transcript, workdir, source="startup")).returncode == 0
    _turns(home, transcript, workdir, 1, 21)
    drain(home)
    sizes = [r[0] for r in db_rows(home, "SELECT COUNT(*) FROM observations WHERE batch_id IS NOT NULL"
                                         " GROUP BY batch_id ORDER BY MIN(id)")]
    assert sizes == [10, 10]
    assert db_rows(home, "SELECT COUNT(*) FROM observations WHERE state = 'buffered'") == [(1,)]
    assert run_hook(home, event("SessionEnd", transcript, workdir, reason="other")).returncode == 0
    drain(home)
    sizes = [r[0] for r in db_rows(home, "SELECT COUNT(*) FROM observations GROUP BY batch_id ORDER BY MIN(id)")]
    assert sizes == [10, 10, 1]
    texts = [r[0] for r in db_rows(home, "SELECT text FROM observations ORDER BY id")]
    assert texts == [f"prompt {n}" for n in range(1, 22)]


def test_compact_and_resume_do_not_seal(home, tmp_path, workdir):
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    assert run_hook(home, event("SessionStart", transcript, workdir, source="startup")).returncode == 0
    _turns(home, transcript, workdir, 1, 3)
    assert run_hook(home, event("SessionStart", transcript, workdir, source="compact")).returncode == 0
    _turns(home, transcript, workdir, 4, 2)
    drain(home)
    assert db_rows(home, "SELECT COUNT(*) FROM session_batches") == [(0,)]
    assert db_rows(home, "SELECT COUNT(*) FROM observations WHERE state = 'buffered'") == [(5,)]
    run_cm(["flush"])  # a flush does not seal an unfinished batch either
    assert db_rows(home, "SELECT COUNT(*) FROM session_batches") == [(0,)]


def test_stop_before_the_final_record_settles_through_the_watch(home, tmp_path, workdir):
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    assert run_hook(home, event("SessionStart", transcript, workdir, source="startup")).returncode == 0
    assert run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="t1", prompt="hello")).returncode == 0
    transcript.user_turn("t1", "hello")
    transcript.reply("t1", "hi", complete=False)
    env = hook_env(CM_TEST_DRAIN_LINGER_MS="0")
    drain_proc = subprocess.Popen([CM, "session-drain", "--home", home], env=env)
    try:
        assert run_hook(home, event("Stop", transcript, workdir, turn_id="t1")).returncode == 0
        import time

        deadline = time.monotonic() + 10
        while not db_rows(home, "SELECT 1 FROM codex_watches"):
            assert time.monotonic() < deadline, "the Stop row should leave a watch"
            time.sleep(0.02)
        transcript.complete("t1")  # Codex writes task_complete after the Stop hook returned
        while db_rows(home, "SELECT state FROM session_turns") != [("settled",)]:
            assert time.monotonic() < deadline, "the watch should settle the turn without another prompt"
            time.sleep(0.02)
    finally:
        drain_proc.wait(timeout=70)
    assert db_rows(home, "SELECT COUNT(*) FROM codex_watches") == [(0,)]


def test_unconfirmed_delivery_isolates_only_that_session(home, tmp_path, workdir):
    bad = Transcript(str(tmp_path / "bad.jsonl"), "bad-1")
    good = Transcript(str(tmp_path / "good.jsonl"), "good-1")
    for t in (bad, good):
        assert run_hook(home, event("SessionStart", t, workdir, source="startup")).returncode == 0
    assert run_hook(home, event("UserPromptSubmit", bad, workdir, turn_id="t1", prompt="what I typed")).returncode == 0
    bad.user_turn("t1", "something else entirely")  # transformed between prompt and delivery
    bad.reply("t1", "ok")
    assert run_hook(home, event("Stop", bad, workdir, turn_id="t1")).returncode == 0
    _turns(home, good, workdir, 1, 1)
    drain(home)
    (issue, recovery_id), = db_rows(home, "SELECT issue, recovery_id FROM codex_failures")
    assert issue == "CODEX_UNCONFIRMED_DELIVERY"
    assert [r[0] for r in db_rows(home, "SELECT text FROM observations")] == ["prompt 1"]
    status = json.loads(run_cm(["status", "--json"]).stdout)
    assert status["isolatedSessions"][0]["recoveryId"] == recovery_id
    assert "something else" not in json.dumps(status)
    kept = db_rows(home, "SELECT COUNT(*) FROM codex_inbox")[0][0]
    assert kept >= 1, "the isolated session's evidence stays in the inbox"
    proc = subprocess.run([CM, "session-drain", "--home", home, "--recover", recovery_id], env=hook_env(),
                          capture_output=True, timeout=60)
    assert proc.returncode == 0
    # still unconfirmed: isolated again under a new recovery id, nothing lost
    assert db_rows(home, "SELECT issue FROM codex_failures") == [("CODEX_UNCONFIRMED_DELIVERY",)]
    assert db_rows(home, "SELECT COUNT(*) FROM codex_inbox")[0][0] == kept
    unknown = subprocess.run([CM, "session-drain", "--home", home, "--recover", "nope"], env=hook_env(),
                             capture_output=True, timeout=60)
    assert unknown.returncode == 1 and unknown.stderr.decode().startswith("cm: CODEX_RECOVERY_UNAVAILABLE: ")


def test_unknown_record_fails_closed(home, tmp_path, workdir):
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    assert run_hook(home, event("SessionStart", transcript, workdir, source="startup")).returncode == 0
    transcript.append({"type": "event_msg", "payload": {"type": "brand_new_thing"}})
    assert run_hook(home, event("Stop", transcript, workdir, turn_id="t1")).returncode == 0
    drain(home)
    assert db_rows(home, "SELECT issue FROM codex_failures") == [("CODEX_UNKNOWN_TRANSCRIPT",)]
    conn = sqlite3.connect(os.path.join(home, "data", "runtime.sqlite"))
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
