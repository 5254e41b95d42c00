"""The disclosure ledger: one row per model request, whatever its outcome, with counts only.

Each outcome runs the real network Memory Agent against the loopback fake model (in process, where
one attempt's rows matter), and the fake model's own request log is the ground truth the ledger is
held to: how many requests, their bytes as received, the usage the model reported.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from agent_support import configure_remote, make_agent, policy, run_once
from conftest import db_rows, hook_env, run_cm
from writer_support import admit

from cmrunner.agentrt import tokencount
from cmrunner.core import ledger, store
from cmrunner.synthetic import fakemodel
from cmrunner.writer_proc import housekeeping

APIS = ["responses", "chat_completions"]
PLANTED = "my grandmother's lighthouse is painted vermilion"
COLUMNS = ("at, process, job_id, attempt, turn, host, model, api, scopes, provenance, request_bytes, response_bytes,"
           " input_tokens, cached_tokens, output_tokens, reasoning_tokens, token_source, duration_ms, outcome")


def _rows(paths) -> list[dict]:
    conn = store.connect(paths.db, 1000)
    try:
        cursor = conn.execute(f"SELECT {COLUMNS} FROM ledger ORDER BY id")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]
    finally:
        conn.close()


def _attempt(home, tmp_path, script, api="responses", agent_kwargs=None, text="I prefer tabs over spaces in Go."):
    with fakemodel.running(str(tmp_path / "fm"), script) as fm:
        paths, cfg = configure_remote(home, fm.base_url, api=api)
        admit(paths, text, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg, **(agent_kwargs or {})))
        log = fm.model_requests()
    return paths, outcome, log


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("reply", "outcome", "job_state", "accepted"), [
    (None, "ok", "committed", True),
    ({"error": {"status": 401}}, "AUTHENTICATION", "dead", False),
    ({"error": {"status": 429, "headers": {"Retry-After": "1"}}}, "RATE_LIMITED", "retry", False),
    ({"policy": True, "truncate": True}, "UNAVAILABLE", "retry", True),
    ({"policy": True, "truncate": "clean"}, "INVALID_RESPONSE", "retry", True),
    # 3 s of header delay against a 0.5 s timeout: load only makes the timeout likelier.
    ({"policy": True, "header_delay_seconds": 3}, "TIMEOUT", "retry", False),
], ids=["success", "401", "429", "cut-stream", "ended-early", "timeout"])
def test_every_request_of_an_attempt_leaves_exactly_one_row_with_its_outcome(home, tmp_path, api, reply, outcome,
                                                                              job_state, accepted):
    script = policy() if reply is None else policy(inject={"first": reply})
    timeouts = {"header_timeout": 0.5} if outcome == "TIMEOUT" else {}
    paths, result, log = _attempt(home, tmp_path, script, api, timeouts)
    assert result.state == job_state
    rows = _rows(paths)
    assert len(rows) == len(log), "one row per request the model received"
    assert [r["request_bytes"] for r in rows] == [r["bytes"] for r in log], "bytes sent, as the model received them"
    first = rows[0]
    assert first["outcome"] == outcome
    assert all(r["outcome"] == "ok" for r in rows[1:])
    assert {(r["process"], r["job_id"], r["attempt"]) for r in rows} == {("memory_agent", result.job_id, 1)}
    assert [r["turn"] for r in rows] == list(range(1, len(rows) + 1))
    assert (first["host"], first["model"], first["api"]) == ("127.0.0.1", "fake-model", api)
    assert (first["scopes"], first["provenance"]) == ("global", "user_explicit")
    assert first["duration_ms"] >= 0
    if outcome == "ok":
        assert [(r["input_tokens"], r["output_tokens"]) for r in rows] == \
            [(r["usage"]["input_tokens"], r["usage"]["output_tokens"]) for r in log]
        assert {r["token_source"] for r in rows} == {"provider"}
        assert all(r["response_bytes"] > 0 for r in rows)
    elif accepted:  # the provider took it (200) and the stream broke: its cost is estimated
        assert first["token_source"] in ("o200k_base", "bytes/4") and first["input_tokens"] > 0
    else:  # refused or never answered: nothing billed
        assert (first["input_tokens"], first["output_tokens"], first["token_source"]) == (0, 0, "none")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("raw", [None, {}, {"input_tokens": -5, "output_tokens": 3},
                                 {"input_tokens": "120", "output_tokens": 3}, {"input_tokens": 1.5, "output_tokens": 2},
                                 {"input_tokens": 10**12, "output_tokens": 4}, {"input_tokens": 10, "output_tokens": True},
                                 "lots"],
                         ids=["none", "empty", "negative", "string", "float", "absurd", "bool", "not-an-object"])
def test_usage_a_provider_cannot_have_meant_is_estimated_never_a_crash(home, tmp_path, api, raw):
    reported = raw if api == "responses" or not isinstance(raw, dict) else (
        {"prompt_tokens": raw.get("input_tokens"), "completion_tokens": raw.get("output_tokens")} if raw else {})
    paths, result, log = _attempt(home, tmp_path, policy(default={"policy": True, "raw_usage": reported}), api)
    assert result.state == "committed"
    rows = _rows(paths)
    assert len(rows) == len(log) and rows
    for row in rows:
        assert row["token_source"] == tokencount.estimate(b"x")[1], row
        assert row["input_tokens"] > 0 and row["output_tokens"] > 0, row
        assert row["cached_tokens"] is None and row["reasoning_tokens"] is None


@pytest.mark.parametrize("api", APIS)
def test_cached_and_reasoning_tokens_are_stored_as_the_provider_reported_them(home, tmp_path, api):
    inputs, outputs = ("input_tokens", "output_tokens") if api == "responses" else ("prompt_tokens", "completion_tokens")
    reported = {inputs: 1200, outputs: 300, f"{inputs}_details": {"cached_tokens": 800},
                f"{outputs}_details": {"reasoning_tokens": 120}}
    paths, result, log = _attempt(home, tmp_path, policy(default={"policy": True, "raw_usage": reported}), api)
    assert result.state == "committed"
    rows = _rows(paths)
    assert len(rows) == len(log) and rows
    assert {(r["input_tokens"], r["cached_tokens"], r["output_tokens"], r["reasoning_tokens"], r["token_source"])
            for r in rows} == {(1200, 800, 300, 120, "provider")}
    conn = store.connect(paths.db, 1000)
    try:
        total = ledger.totals(conn)
    finally:
        conn.close()
    assert (total["cachedTokens"], total["reasoningTokens"]) == (800 * len(rows), 120 * len(rows))


def test_the_ledger_holds_no_user_text(home, tmp_path):
    paths, result, _log = _attempt(home, tmp_path, policy(), text=f"Remember that {PLANTED}.")
    assert result.state == "committed"
    dump = json.dumps(_rows(paths))
    for piece in PLANTED.split():
        if len(piece) > 6:
            assert piece not in dump
    assert "sk-test" not in dump and "/v1" not in dump, "no key, no URL path"


def test_usage_totals_match_the_fake_models_own_log_byte_for_byte(home, tmp_path):
    """Four jobs through a real `cm flush`: the ledger's totals are the model's log's sums."""
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        for n in range(4):
            admit(paths, f"Fact {n}: I keep my notes in plain text.", f"e{n}", batch=f"batch-{n}")
        proc = run_cm(["flush"], env=hook_env(COMMON_MEMORY_HOME=home), timeout=120)
        assert proc.returncode == 0, proc.stderr.decode()
        log = fm.model_requests()
        usage = run_cm(["usage", "--json"], env=hook_env(COMMON_MEMORY_HOME=home))
    assert usage.returncode == 0, usage.stderr.decode()
    total = json.loads(usage.stdout)["total"]
    assert total["requests"] == len(log) == 8
    assert total["bytesSent"] == sum(r["bytes"] for r in log)
    assert total["cachedTokens"] == sum(r["usage"]["cached_tokens"] for r in log) > 0
    assert total["inputTokens"] == sum(r["usage"]["input_tokens"] for r in log)
    assert total["outputTokens"] == sum(r["usage"]["output_tokens"] for r in log)
    assert total["failed"] == 0 and total["estimatedRequests"] == 0
    receipts = db_rows(home, "SELECT SUM(input_tokens), SUM(output_tokens) FROM jobs")[0]
    assert receipts == (total["inputTokens"], total["outputTokens"]), "the jobs' usage is what the ledger recorded"


def test_network_test_is_recorded_with_an_empty_grant(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), [{"text": "OK"}, {"error": {"status": 401}}]) as fm:
        configure_remote(home, fm.base_url)
        env = hook_env(COMMON_MEMORY_HOME=home)
        assert run_cm(["network-test"], env=env).returncode == 0
        assert run_cm(["network-test"], env=env).returncode == 1
        log = fm.model_requests()
    rows = db_rows(home, "SELECT process, job_id, scopes, provenance, outcome, request_bytes FROM ledger ORDER BY id")
    assert [r[:5] for r in rows] == [("network_test", None, "", "", "ok"),
                                     ("network_test", None, "", "", "AUTHENTICATION")]
    assert [r[5] for r in rows] == [r["bytes"] for r in log]


def _entry(at: int, **changes: object) -> ledger.Entry:
    fields = dict(at=at, process="memory_agent", job_id="j", attempt=1, turn=1, host="h", model="m", api="responses",
                  scopes=("global",), provenance=("user_explicit",), request_bytes=100, response_bytes=50,
                  input_tokens=30, cached_tokens=None, output_tokens=5, reasoning_tokens=None, token_source="provider",
                  duration_ms=20, outcome="ok")
    fields.update(changes)
    return ledger.Entry(**fields)  # type: ignore[arg-type]


def test_a_corrupt_row_counts_as_nothing_and_never_blocks_a_commit(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url)
        conn = store.open_store(paths)
        with store.immediate(conn):
            ledger.append(conn, _entry(1, request_bytes="lots", input_tokens=-7, output_tokens="x", duration_ms=2.5))
        assert ledger.totals(conn)["tokens"] == 0 and ledger.totals(conn)["requests"] == 1
        conn.close()
        admit(paths, "I prefer tabs over spaces in Go.", "e1")
        assert run_once(paths, cfg, make_agent(cfg)).state == "committed"


def test_totals_group_by_day_model_outcome_and_grant(tmp_path):
    paths_db = str(tmp_path / "db.sqlite")
    conn = sqlite3.connect(paths_db, isolation_level=None)
    from cmrunner.core import migrations

    for step in migrations.MIGRATIONS:
        step(conn)
    day = 86_400_000
    ledger.append(conn, _entry(5 * day + 10))
    ledger.append(conn, _entry(5 * day + 20, outcome="RATE_LIMITED", input_tokens=0, output_tokens=0,
                               token_source="none"))
    ledger.append(conn, _entry(6 * day, scopes=("global", "project:a"), provenance=("user_explicit",
                                                                                    "conversation_context"),
                               token_source="bytes/4", model="m2"))
    found = ledger.breakdown(conn)
    assert [k for k, _ in found["byDay"]] == ["1970-01-06", "1970-01-07"]
    assert [k for k, _ in found["byMonth"]] == ["1970-01"] and found["byMonth"][0][1]["requests"] == 3
    assert dict(found["byOutcome"])["RATE_LIMITED"]["requests"] == 1
    assert [k for k, _ in found["byModel"]] == ["h m (responses)", "h m2 (responses)"]  # most requests first
    grants = {(s, p): t["requests"] for s, p, t in found["byGrant"]}
    assert grants == {("global", "user_explicit"): 3, ("global", "conversation_context"): 1,
                      ("project:a", "user_explicit"): 1, ("project:a", "conversation_context"): 1}
    assert found["total"] == ledger.totals(conn) and found["total"]["requests"] == 3
    assert ledger.breakdown(conn, 6 * day)["total"]["requests"] == 1
    assert ledger.totals(conn, 6 * day)["estimatedRequests"] == 1
    assert ledger.totals(conn)["failed"] == 1
    assert ledger.prune(conn, 6 * day) == 2 and ledger.totals(conn)["requests"] == 1


def test_drain_start_housekeeping_prunes_rows_past_retention(home, tmp_path):
    import time

    from writer_support import configure, writer

    paths, cfg = configure(home)
    conn = store.open_store(paths)
    now = int(time.time() * 1000)
    with store.immediate(conn):
        ledger.append(conn, _entry(now - ledger.RETENTION_MS - 1000))
        ledger.append(conn, _entry(now - ledger.RETENTION_MS + 60_000))
    conn.close()
    w, _ = writer(paths, cfg, lambda task, reads: None)
    try:
        housekeeping.at_drain_start(paths, w.conn, cfg, w.now)
    finally:
        w.close()
    assert db_rows(home, "SELECT COUNT(*) FROM ledger") == [(1,)]
