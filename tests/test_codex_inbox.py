"""The drain's Codex inbox consumer: real captured sessions replayed through the real hook and drain."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess

import pytest
from conftest import CM, Transcript, db_rows, event, hook_env, run_cm, run_hook, wait_no_drain

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "codex")


def as_version(data: bytes, version: str) -> tuple[bytes, int]:
    """A captured transcript as if a different Codex had written it: its session_meta's cli_version
    rewritten; returns the body and how many bytes the first line grew (hook sizes shift by it)."""
    head, rest = data.split(b"\n", 1)
    meta = json.loads(head)
    meta["payload"]["cli_version"] = version
    new_head = json.dumps(meta, separators=(",", ":"), ensure_ascii=False).encode()
    return new_head + b"\n" + rest, len(new_head) - len(head)


def replay(name: str, home: str, tmp_path, env: dict | None = None, version: str | None = None,
           extra: bytes = b"") -> list[str]:
    """Feed a captured session to the real hook, growing the transcript as Codex did; returns prompts.

    ``version`` rewrites the session_meta's Codex version; ``extra`` lines are inserted right after
    the transcript's state at the first UserPromptSubmit (so every later hook carries them)."""
    data = open(os.path.join(FIXTURES, f"{name}.jsonl"), "rb").read()
    shift = 0
    if version is not None:
        data, shift = as_version(data, version)
    hooks = [json.loads(line) for line in open(os.path.join(FIXTURES, f"{name}.hooks.jsonl"))]
    if extra:
        at = next(h["transcript_bytes_at_hook"] for h in hooks if h["payload"]["hook_event_name"] == "UserPromptSubmit")
        data = data[: at + shift] + extra + data[at + shift:]
        for h in hooks:
            if h["transcript_bytes_at_hook"] > at:
                h["transcript_bytes_at_hook"] += len(extra)
    path = str(tmp_path / f"{name}.jsonl")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    prompts = []
    written = 0

    def grow(to: int) -> None:
        # Codex only ever appends; rewriting the file would race with a drain reading it.
        nonlocal written
        if to > written:
            with open(path, "ab") as handle:
                handle.write(data[written:to])
            written = to

    open(path, "wb").close()
    for entry in hooks:
        payload = dict(entry["payload"], transcript_path=path, cwd=str(work))
        grow(entry["transcript_bytes_at_hook"] + shift)
        proc = run_hook(home, payload, env=env)
        if payload["hook_event_name"] == "UserPromptSubmit":
            prompts.append(payload["prompt"])
        assert proc.returncode in (0, 1), proc.stderr
    grow(len(data))
    return prompts


def drain(home: str) -> None:
    # A drain a hook spawned may still hold the lease; the foreground drain would then exit at once
    # and leave the last transcript lines (written after the final hook, as Codex does) to nobody.
    wait_no_drain(home)
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



def test_an_interrupted_turn_is_explained_and_can_be_released_on_purpose(home, tmp_path):
    replay("interrupted", home, tmp_path)
    drain(home)
    [group] = json.loads(run_cm(["status", "--json"]).stdout)["problems"]["quarantined"]
    assert (group["code"], group["releasable"]) == ("INTERRUPTED_TURN", True)
    assert "`cm release --code INTERRUPTED_TURN`" in group["remedy"]
    [(text, *_)] = user_observations(home)
    proc = run_cm(["release", "--code", "INTERRUPTED_TURN"])
    assert proc.returncode == 0, proc.stderr
    assert text.encode() not in proc.stdout + proc.stderr
    assert user_observations(home) == [(text, "pending", None, 0)], "the same words, back in the queue"


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
    flushed = run_cm(["flush"])  # a flush does not seal an unfinished batch either
    assert flushed.returncode == 0, flushed.stderr
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

        deadline = time.monotonic() + 10  # polled: only bounds a hang
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
    assert status["isolatedSessions"][0]["reason"].startswith("the session's host records could not be matched")
    assert status["isolatedSessions"][0]["remedy"] == f"`cm session-drain --recover {recovery_id}`"
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


@pytest.mark.parametrize(("name", "version"), [("simple", "0.170.0"), ("app_server", "1.0.0"),
                                               ("legacy-0.153.4-shell_tool", "0.170.0")])
def test_a_newer_codex_than_any_verified_one_is_captured_and_settles(home, tmp_path, name, version):
    prompts = replay(name, home, tmp_path, version=version)
    assert db_rows(home, "SELECT COUNT(*) FROM host_activations") == [(1,)]
    drain(home)
    got = user_observations(home)
    assert [g[0] for g in got] == prompts and prompts
    assert all(g[1] == "pending" and g[3] for g in got), got
    assert db_rows(home, "SELECT COUNT(*) FROM codex_failures") == [(0,)]
    assert db_rows(home, "SELECT COUNT(*) FROM codex_inbox") == [(0,)]
    assert set(db_rows(home, "SELECT state FROM session_turns")) == {("settled",)}


def test_an_unknown_record_of_a_newer_codex_fails_closed_for_that_session_only(home, tmp_path):
    unknown = json.dumps({"timestamp": "2026-11-30T01:06:09.000Z", "type": "event_msg",
                          "payload": {"type": "turn_thoughts_v2", "text": "a shape no allowlist knows"}}).encode() + b"\n"
    newer = tmp_path / "newer"
    newer.mkdir()
    replay("simple", home, newer, version="0.170.0", extra=unknown)
    other = tmp_path / "other"
    other.mkdir()
    good = replay("shell_tool", home, other, version="0.170.0")
    drain(home)
    assert db_rows(home, "SELECT issue FROM codex_failures") == [("CODEX_UNKNOWN_TRANSCRIPT",)]
    # the other session of the same newer Codex is captured in full; the failed one disclosed nothing
    assert [g[0] for g in user_observations(home)] == good
    assert db_rows(home, "SELECT COUNT(*) FROM codex_inbox WHERE session_id IN"
                         " (SELECT session_id FROM codex_failures)")[0][0] >= 1
    status = run_cm(["status", "--json"])
    assert "a shape no allowlist knows" not in status.stdout.decode()


def test_flush_succeeds_while_a_live_session_holds_unsealed_turns(home, tmp_path, workdir):
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    assert run_hook(home, event("SessionStart", transcript, workdir, source="startup")).returncode == 0
    _turns(home, transcript, workdir, 1, 3)
    drain(home)
    assert db_rows(home, "SELECT COUNT(*) FROM observations WHERE state = 'buffered'") == [(3,)]
    proc = run_cm(["flush"])
    out = proc.stdout.decode()
    assert proc.returncode == 0, (out, proc.stderr)
    assert "remaining: nothing" in out
    assert "3 turns wait in open sessions" in out
    assert db_rows(home, "SELECT COUNT(*) FROM session_batches") == [(0,)]  # still not sealed by a flush


def test_flush_fails_on_unsealed_turns_of_an_isolated_session(home, tmp_path, workdir):
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    assert run_hook(home, event("SessionStart", transcript, workdir, source="startup")).returncode == 0
    _turns(home, transcript, workdir, 1, 2)
    drain(home)  # the two settled turns are consumed before the unknown record arrives
    transcript.append({"type": "event_msg", "payload": {"type": "brand_new_thing"}})
    assert run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id="turn-03",
                                prompt="prompt 3")).returncode == 0
    drain(home)
    assert db_rows(home, "SELECT issue FROM codex_failures") == [("CODEX_UNKNOWN_TRANSCRIPT",)]
    proc = run_cm(["flush"])
    assert proc.returncode == 1
    assert "buffered 2" in proc.stdout.decode() and "open sessions" not in proc.stdout.decode()
    assert "incomplete" in proc.stderr.decode()
