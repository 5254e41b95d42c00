"""A provider that misbehaves ends in a stable code: deep JSON, floods, Retry-After (real loopback model).

Each case runs the real Memory Agent against the synthetic model, in process through
``Writer.run_once`` where the exact job row after one attempt matters, and as a real ``cm flush``
subprocess where the issue's symptom (a traceback, a stranded lease, retries that ignore
Retry-After) was seen.
"""

from __future__ import annotations

import email.utils
import json
import time

import pytest
from agent_support import configure_remote, make_agent, policy, read_doc, run_once
from conftest import hook_env, run_cm
from writer_support import admit

from cmrunner.agentrt import limits
from cmrunner.core import store
from cmrunner.synthetic import fakemodel

APIS = ["responses", "chat_completions"]
TEXT = "I prefer tabs over spaces in Go."
DEEP = 100_000
DEEP_TEXT = "[" * DEEP + "]" * DEEP


def _job(paths) -> dict:
    conn = store.connect(paths.db, 1000)
    try:
        row = conn.execute("SELECT state, issue, diagnostic, retries, expires, available FROM jobs").fetchone()
        lease = conn.execute("SELECT COUNT(*) FROM drain_lease").fetchone()[0]
    finally:
        conn.close()
    return {"state": row[0], "issue": row[1], "diagnostic": json.loads(row[2]) if row[2] else None,
            "retries": row[3], "expires": row[4], "available": row[5], "drain_leases": lease}


def _once(home, tmp_path, script, api="responses", **remote):
    with fakemodel.running(str(tmp_path / "fm"), script) as fm:
        paths, cfg = configure_remote(home, fm.base_url, api=api, **remote)
        admit(paths, TEXT, "e1")
        before = int(time.time() * 1000)
        outcome = run_once(paths, cfg, make_agent(cfg))
        after = int(time.time() * 1000)
        log = fm.model_requests()
    return paths, outcome, log, before, after


def _flush(home, tmp_path, script, api="responses", **remote):
    with fakemodel.running(str(tmp_path / "fm"), script) as fm:
        paths, cfg = configure_remote(home, fm.base_url, api=api, **remote)
        admit(paths, TEXT, "e1")
        before = int(time.time() * 1000)
        proc = run_cm(["flush"], env=hook_env(COMMON_MEMORY_HOME=home), timeout=120)
        after = int(time.time() * 1000)
        log = fm.model_requests()
    return paths, proc, log, before, after


def _no_traceback(proc) -> None:
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err and "RecursionError" not in err, err[-2000:]


# ------------------------------------------------------------------ deep nesting


@pytest.mark.parametrize("api", APIS)
def test_deep_json_in_an_sse_event_fails_the_attempt_with_a_stable_code(home, tmp_path, api):
    paths, outcome, log, *_ = _once(home, tmp_path, policy(inject={"first": {"policy": True, "nest": DEEP}}), api)
    assert (outcome.state, outcome.code) == ("retry", "INVALID_RESPONSE")
    job = _job(paths)
    assert job["diagnostic"] == {"stage": "response_envelope", "reason": "json_too_deep", "retryable": True}
    assert (job["state"], job["retries"], job["expires"]) == ("retry", 1, 0), "retryable, and no lease is left"


@pytest.mark.parametrize("api", APIS)
def test_cm_flush_survives_a_deep_sse_event_and_commits_on_the_next_attempt(home, tmp_path, api):
    paths, proc, log, *_ = _flush(home, tmp_path, policy(inject={"first": {"policy": True, "nest": DEEP}}), api)
    _no_traceback(proc)
    out = proc.stdout.decode()
    assert "retry (INVALID_RESPONSE)" in out and "committed" in out, out
    assert proc.returncode == 1, "a flush that needed a retry reports it (the specification's rule)"
    job = _job(paths)
    assert (job["state"], job["expires"], job["drain_leases"]) == ("done", 0, 0)
    assert TEXT in read_doc(paths, "profile")


def _deep_submit() -> dict:
    return {"tool_calls": [{"name": "submit_memory_decision", "arguments": DEEP_TEXT}]}


@pytest.mark.parametrize("api", APIS)
def test_deep_submit_arguments_are_rejected_and_the_model_may_correct_itself(home, tmp_path, api):
    paths, outcome, log, *_ = _once(home, tmp_path, policy(inject={"submit": _deep_submit()}), api)
    assert outcome.state == "committed"
    body = log[-1]["body"]
    if "input" in body:
        outputs = [json.loads(i["output"]) for i in body["input"] if i.get("type") == "function_call_output"]
        replayed = [i["arguments"] for i in body["input"] if i.get("type") == "function_call"]
    else:
        outputs = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        replayed = [c["function"]["arguments"] for m in body["messages"] if m["role"] == "assistant"
                    for c in m.get("tool_calls") or []]
    rejected = [o for o in outputs if o.get("error") == "MEMORY_TOOL_REJECTED"]
    assert [(r["tool"], r["code"], r["schema_errors"]) for r in rejected] == [
        ("submit_memory_decision", "TOOL_ARGUMENTS_INVALID", [{"path": "$", "rule": "maxDepth"}])]
    assert DEEP_TEXT not in replayed and "{}" in replayed, "the rejected call is replayed blank"


def test_cm_flush_survives_deep_submit_arguments(home, tmp_path):
    paths, proc, log, *_ = _flush(home, tmp_path, policy(inject={"submit": _deep_submit()}))
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert TEXT in read_doc(paths, "profile")


def test_a_model_that_always_submits_deep_arguments_ends_the_attempt_retryably(home, tmp_path):
    # The model never corrects itself: the attempt ends after the rejection budget with the
    # rejection's code, retryably; the deep text never reaches a parser.
    script = policy(inject={"submit": [_deep_submit()] * 40})
    paths, outcome, log, *_ = _once(home, tmp_path, script)
    assert (outcome.state, outcome.code) == ("retry", "TOOL_ARGUMENTS_INVALID")
    job = _job(paths)
    assert job["diagnostic"] == {"stage": "core_validation", "reason": "tool_call", "retryable": True}
    assert job["expires"] == 0


@pytest.mark.parametrize("status", [429, 503, 400])
def test_a_deep_error_body_keeps_the_status_class(home, tmp_path, status):
    script = policy(inject={"first": {"error": {"status": status, "raw": DEEP_TEXT}}})
    paths, outcome, *_ = _once(home, tmp_path, script)
    expected = {429: ("retry", "RATE_LIMITED", "rate_limited"), 503: ("retry", "UNAVAILABLE", "provider_unavailable"),
                400: ("dead", "INVALID_RESPONSE", "request_rejected")}[status]
    assert (outcome.state, outcome.code, _job(paths)["diagnostic"]["reason"]) == expected


# ------------------------------------------------------------------ floods


@pytest.mark.parametrize("cap", ["turn", "response"])
@pytest.mark.parametrize("api", APIS)
def test_an_80_mib_stream_is_cut_by_the_caps(home, tmp_path, monkeypatch, api, cap):
    if cap == "response":
        # Lift the kept-text and attempt caps so that the response's own byte count stops it.
        monkeypatch.setattr(limits, "TURN_KEPT_CHARS", 1 << 30)
        monkeypatch.setattr(limits, "ATTEMPT_BYTE_LIMIT", 1 << 30)
    paths, outcome, log, *_ = _once(home, tmp_path, policy(inject={"first": {"policy": True, "flood": 80 << 20}}), api)
    assert (outcome.state, outcome.code) == ("retry", "INVALID_RESPONSE")
    job = _job(paths)
    assert job["diagnostic"] == {"stage": "response_body", "reason": "body_too_large", "retryable": True}
    assert (job["state"], job["retries"], job["expires"]) == ("retry", 1, 0)
    assert len(log) == 1


def test_one_event_larger_than_the_event_cap_is_refused_before_it_ends(home, tmp_path):
    big = limits.EVENT_BYTE_LIMIT  # "nest": N sends 2N brackets in one event
    paths, outcome, *_ = _once(home, tmp_path, policy(inject={"first": {"policy": True, "nest": big}}))
    assert (outcome.state, outcome.code) == ("retry", "INVALID_RESPONSE")
    assert _job(paths)["diagnostic"]["reason"] == "body_too_large"


def test_the_attempt_budget_spans_turns(home, tmp_path, monkeypatch):
    # Each response stays under the per-response cap, but together they exceed the attempt's.
    monkeypatch.setattr(limits, "ATTEMPT_BYTE_LIMIT", 2 << 20)  # a job takes three turns; two floods exceed it
    flood = {"policy": True, "flood": 1 << 20}
    script = policy(inject={"first": flood, "inspect_memory": flood, "submit": flood})
    paths, outcome, log, *_ = _once(home, tmp_path, script)
    assert (outcome.state, outcome.code) == ("retry", "INVALID_RESPONSE")
    assert _job(paths)["diagnostic"]["reason"] == "body_too_large"
    assert 2 <= len(log) <= 4, "the budget ran out after a few turns, not at the first"


def test_cm_flush_after_a_flood_leaves_no_lease_and_commits_on_retry(home, tmp_path):
    paths, proc, log, *_ = _flush(home, tmp_path, policy(inject={"first": {"policy": True, "flood": 80 << 20}}))
    _no_traceback(proc)
    out = proc.stdout.decode()
    assert "retry (INVALID_RESPONSE)" in out and "committed" in out, out
    job = _job(paths)
    assert (job["state"], job["expires"], job["drain_leases"]) == ("done", 0, 0)


# ------------------------------------------------------------------ Retry-After


@pytest.mark.parametrize(("status", "header", "wait_ms"), [
    (429, "30", 30_000),
    (503, "30", 30_000),
    (429, "86400", limits.RETRY_AFTER_CAP_MS),
    (429, "HTTP-DATE+120", 120_000),
    (429, "HTTP-DATE-3600", 1_000),  # in the past: the ordinary backoff (2^0 s) applies
    (429, "garbage", 1_000),
])
def test_retry_after_sets_the_next_attempt_time(home, tmp_path, status, header, wait_ms):
    made = None
    if header.startswith("HTTP-DATE"):
        made = int(time.time() * 1000)
        header = email.utils.formatdate(made / 1000 + int(header[len("HTTP-DATE"):]), usegmt=True)
    script = policy(inject={"first": {"error": {"status": status, "headers": {"Retry-After": header}}}})
    paths, outcome, log, before, after = _once(home, tmp_path, script)
    assert outcome.state == "retry"
    job = _job(paths)
    # An HTTP-date names a whole second counted from when the header was made, not from `before`.
    lowest = before + wait_ms if made is None or wait_ms == 1_000 else made + wait_ms - 1_000
    assert lowest <= job["available"] <= after + wait_ms, (job["available"] - before, wait_ms)


def test_cm_flush_honours_retry_after_instead_of_retrying_after_a_second(home, tmp_path):
    script = policy(inject={"first": {"error": {"status": 429, "headers": {"Retry-After": "30"}}}})
    paths, proc, log, before, after = _flush(home, tmp_path, script)
    _no_traceback(proc)
    assert proc.returncode == 1 and "retry (RATE_LIMITED)" in proc.stdout.decode()
    assert "waiting" in proc.stdout.decode()
    assert len(log) == 1, "no second request before the provider's Retry-After"
    job = _job(paths)
    assert job["state"] == "retry" and before + 30_000 <= job["available"] <= after + 30_000
    assert job["drain_leases"] == 0
