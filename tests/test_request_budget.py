"""Every request is bounded: the per-request byte budget, the per-attempt byte budget, sources sized
before the agent starts (SOURCE_TOO_LARGE), and a 5 MB import whose cost grows linearly."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from agent_support import configure_remote, job_row, make_agent, policy, run_once
from conftest import run_cm, wait_no_drain
from writer_support import admit

from cmrunner.agentrt import budget
from cmrunner.core import config as config_mod
from cmrunner.core.configdefs import DEFAULT_MAX_REQUEST_BYTES
from cmrunner.synthetic import fakemodel

SMALL = 32_768  # the smallest remote.maxRequestBytes config.json accepts


def _run(home, tmp_path, script, texts, **remote):
    with fakemodel.running(str(tmp_path / "fm"), script) as fm:
        paths, cfg = configure_remote(home, fm.base_url, **remote)
        for n, text in enumerate(texts):
            admit(paths, text, f"e{n}")
        outcome = run_once(paths, cfg, make_agent(cfg))
        log = fm.model_requests()
    return paths, outcome, log


def _states(paths) -> list[tuple[str, str | None]]:
    conn = sqlite3.connect(paths.db)
    try:
        return conn.execute("SELECT state, issue FROM observations ORDER BY id").fetchall()
    finally:
        conn.close()


def test_a_growing_conversation_stops_before_the_request_budget(home, tmp_path):
    # Each reply's own arguments stay in the conversation (a read returns the text once per attempt,
    # so a re-read no longer grows it): 15 KB of working notes per turn.
    notes = {"tool_calls": [{"name": "record_working_notes", "arguments": {"notes": "word " * 3000}}]}
    script = {"replies": [notes] * 10, "default": notes}
    paths, outcome, log = _run(home, tmp_path, script, ["word " * 2000], maxRequestBytes=SMALL)
    assert (outcome.state, outcome.code) == ("dead", "REQUEST_TOO_LARGE")
    assert job_row(paths)[2] == {"stage": "request", "reason": "request_budget", "retryable": False}
    assert 2 <= len(log) < 10 and max(r["bytes"] for r in log) <= SMALL, [r["bytes"] for r in log]


def test_an_attempt_stops_at_its_byte_budget(home, tmp_path):
    idle = {"tool_calls": [{"name": "processing_state", "arguments": {}}]}
    paths, outcome, log = _run(home, tmp_path, {"replies": [], "default": idle}, ["I like tabs."],
                               maxRequestBytes=SMALL, maxAgentTurns=1024)
    assert (outcome.state, outcome.code) == ("dead", "ATTEMPT_BUDGET_EXHAUSTED")
    assert job_row(paths)[2] == {"stage": "request", "reason": "attempt_budget", "retryable": False}
    sent = sum(r["bytes"] for r in log)
    assert sent <= budget.attempt_bytes(SMALL) < sent + max(r["bytes"] for r in log) * 2, (sent, len(log))


def test_a_source_no_request_can_hold_is_set_aside_and_the_rest_goes_on(home, tmp_path):
    huge, small = "long words here " * 2000, "I prefer tabs over spaces."
    paths, outcome, log = _run(home, tmp_path, policy(), [huge, small], maxRequestBytes=SMALL)
    assert outcome.state == "committed"
    assert _states(paths) == [("quarantined", "SOURCE_TOO_LARGE"), ("processed", None)]
    assert log and all("long words here" not in json.dumps(r["body"]) for r in log)
    assert max(r["bytes"] for r in log) <= SMALL


def _document(title: str, size: int) -> str:
    """A valid memory document of about ``size`` bytes, as a person might grow one."""
    lines = [f"# {title}", ""]
    n = 0
    while sum(len(line) + 1 for line in lines) < size:
        n += 1
        lines += [f"## Topic {n}", f"Notes on topic {n}: the build runs on the shared runner, \"quoted\" here."]
    return "\n".join(lines) + "\n"


def test_the_source_limit_never_drops_below_its_floor_whatever_the_documents():
    room = SMALL - budget.REQUEST_RESERVE
    assert budget.source_limit(SMALL, []) == room
    assert budget.source_limit(SMALL, ["x" * 3000]) == room - 2 * budget.wire_bytes("x" * 3000)  # above the floor
    for documents in (["x" * 5000] * 2, ["\"" * 16_384] * 3, ["y" * 1_048_576]):
        assert budget.source_limit(SMALL, documents) == room // budget.SOURCE_SHARE_MIN > 0
    assert budget.job_limit(SMALL, ["\"" * 16_384] * 3) == room // budget.SOURCE_SHARE_MIN
    default = DEFAULT_MAX_REQUEST_BYTES - budget.REQUEST_RESERVE
    assert budget.source_limit(DEFAULT_MAX_REQUEST_BYTES, ["\"" * 16_384] * 3) == default // budget.SOURCE_SHARE_MIN


def test_large_documents_do_not_set_every_new_turn_aside(home, tmp_path):
    """Documents taking more than the request budget leaves (twice, read and written back) made the
    source limit negative: each new turn, however short, was quarantined SOURCE_TOO_LARGE, and as no
    job could commit, forever. The turn goes through; the request still fits the budget."""
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url, maxRequestBytes=SMALL)
        documents = [_document("Profile", 5_000), _document("Preferences", 5_000)]
        for target, text in zip(("profile", "preferences"), documents, strict=True):
            os.makedirs(os.path.dirname(paths.document(target)), exist_ok=True)
            with open(paths.document(target), "w", encoding="utf-8") as handle:
                handle.write(text)
        assert SMALL - budget.REQUEST_RESERVE - 2 * sum(map(budget.wire_bytes, documents)) < 0  # the old limit
        admit(paths, "I prefer tabs over spaces.", "e0")
        outcome = run_once(paths, cfg, make_agent(cfg))
        log = fm.model_requests()
    assert outcome.state == "committed", outcome
    assert _states(paths) == [("processed", None)]
    assert "I prefer tabs over spaces." in open(paths.document("profile"), encoding="utf-8").read()
    assert log and max(r["bytes"] for r in log) <= SMALL


def test_sources_beyond_one_job_wait_for_the_next_whole(home, tmp_path):
    texts = [f"Note {n}: " + "the cache keeps each module small " * 480 for n in range(5)]  # ~16 KB each, 80 in all
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        paths, cfg = configure_remote(home, fm.base_url)
        for n, text in enumerate(texts):
            admit(paths, text, f"e{n}")
        first = run_once(paths, cfg, make_agent(cfg))
        after_first = _states(paths)
        while run_once(paths, cfg, make_agent(cfg)) is not None:
            pass
        log = fm.model_requests()
    assert first.state == "ignored"
    processed = [s for s, _ in after_first if s == "processed"]
    assert 1 <= len(processed) < 5 and all(s in ("processed", "pending") for s, _ in after_first)
    assert _states(paths) == [("processed", None)] * 5
    assert max(r["bytes"] for r in log) <= DEFAULT_MAX_REQUEST_BYTES


def _markdown(size: int) -> str:
    words = ["the", "build", "cache", "keeps", "each", "module", "small", "and", "we", "review", "tests", "before", "merging", "so", "newcomers", "find", "context", "quickly", "without", "asking"]
    parts, total, n = ["# Handbook\n\n"], 12, 0
    while total < size:
        piece = f"## Chapter {n // 10 + 1}\n\n" if n % 10 == 0 else \
            " ".join(words[(n + i) % len(words)] for i in range(60)).capitalize() + ".\n\n"
        parts.append(piece)
        total += len(piece)
        n += 1
    return "".join(parts)


@pytest.mark.timeout(1500)
def test_a_5_mb_import_costs_linearly_through_the_real_drain(home, tmp_path):
    """The issue's case: before, one 5 MB file re-sent a growing conversation up to 1.9 MB per
    request until the daily cap. Now every request stays within the budget and what is sent stays
    a small multiple of the file (docs/benchmarks.md: about 3.6x)."""
    path = tmp_path / "handbook.md"
    path.write_text(_markdown(5_000_000), encoding="utf-8")
    size = path.stat().st_size
    with fakemodel.running(str(tmp_path / "fm"), {"policy": "ignore"}, lifetime_seconds=1500) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        data = config_mod.load(home).data
        data["spend"] = {"requestsPerHour": None, "tokensPerDay": None, "tokensPerMonth": None}
        config_mod.save(home, data)
        proc = run_cm(["import", str(path), "--no-wait", "--yes"], timeout=600)
        assert proc.returncode == 0, proc.stderr
        plan = proc.stdout.decode().splitlines()[0]
        parts = int(plan.split("plan: ", 1)[1].split(" part", 1)[0])
        wait_no_drain(home, timeout=1400)
        log = fm.model_requests()
    states = _states(paths)
    assert len(states) == parts > 60 and all(s == ("processed", None) for s in states), states[:3]
    sizes = [r["bytes"] for r in log]
    assert max(sizes) <= DEFAULT_MAX_REQUEST_BYTES and max(sizes) <= 3 * budget.JOB_SOURCE_BYTES
    assert sum(sizes) <= 5 * size, (sum(sizes), size)  # linear: before it was 4.2x by the cap, after 22 requests
    assert len(log) <= 4 * parts
    assert os.path.getsize(paths.db) > 0
