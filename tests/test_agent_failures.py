"""Every failure class of the network Memory Agent: its code, stage, reason and the job's outcome."""

from __future__ import annotations

import http.client
import json
import os
import socket
import time

import pytest
from agent_support import configure_remote, job_row, make_agent, policy, read_doc, run_once
from support import killwindow
from writer_support import admit

from cmrunner.core import store
from cmrunner.synthetic import fakemodel

APIS = ["responses", "chat_completions"]
TEXT = "I prefer tabs over spaces in Go."


def _run(home, tmp_path, script, api="responses", agent_kwargs=None, **remote):
    with fakemodel.running(str(tmp_path / "fm"), script) as fm:
        paths, cfg = configure_remote(home, fm.base_url, api=api, **remote)
        admit(paths, TEXT, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg, **(agent_kwargs or {})))
        log = fm.model_requests()
    return paths, outcome, log


def _tool_results(body: dict) -> list[dict]:
    """Parsed tool results sent back to the model, for either protocol."""
    if "input" in body:
        return [json.loads(i["output"]) for i in body["input"] if i.get("type") == "function_call_output"]
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def _tool_calls(body: dict) -> list[tuple[str, str]]:
    """(name, arguments) of the calls replayed to the model."""
    if "input" in body:
        return [(i["name"], i["arguments"]) for i in body["input"] if i.get("type") == "function_call"]
    return [(c["function"]["name"], c["function"]["arguments"])
            for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]


def _observation_states(paths):
    conn = store.connect(paths.db, 1000)
    try:
        return [r[0] for r in conn.execute("SELECT state FROM observations")]
    finally:
        conn.close()


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("status", "code", "state", "reason", "retryable"), [
    (401, "AUTHENTICATION", "dead", "authentication", False),
    (403, "AUTHENTICATION", "dead", "authentication", False),
    (429, "RATE_LIMITED", "retry", "rate_limited", True),
    (500, "UNAVAILABLE", "retry", "provider_unavailable", True),
    (503, "UNAVAILABLE", "retry", "provider_unavailable", True),
    (400, "INVALID_RESPONSE", "dead", "request_rejected", False),
    (404, "INVALID_RESPONSE", "dead", "request_rejected", False),
])
def test_http_status_classes(home, tmp_path, api, status, code, state, reason, retryable):
    script = policy(inject={"first": {"error": {"status": status}}})
    paths, outcome, log = _run(home, tmp_path, script, api)
    assert (outcome.state, outcome.code) == (state, code)
    job_state, issue, diagnostic, retries, *_ = job_row(paths)
    assert diagnostic == {"stage": "http", "reason": reason, "retryable": retryable, "httpStatus": status}
    assert len(log) == 1, "no SDK-level retry"
    if state == "dead":
        assert (job_state, issue, retries) == ("dead", code, 0), "a permanent failure is dead at once"
        assert _observation_states(paths) == ["dead"], "the observation stays, recoverable with cm retry"
    else:
        assert (job_state, retries) == ("retry", 1) and _observation_states(paths) == ["claimed"]


@pytest.mark.parametrize(("status", "error", "code", "reason"), [
    (400, {"code": "model_not_found"}, "INVALID_RESPONSE", "model_not_found"),
    (400, {"code": "unsupported_parameter"}, "INVALID_RESPONSE", "unsupported_parameter"),
    (400, {"code": "context_length_exceeded"}, "INVALID_RESPONSE", "context_length_exceeded"),
    (400, {"code": "invalid_json_schema"}, "INVALID_RESPONSE", "invalid_schema"),
    (400, {"type": "invalid_request_error", "message": "Invalid json schema: nope"}, "INVALID_RESPONSE", "invalid_schema"),
    (429, {"code": "insufficient_quota"}, "RATE_LIMITED", "insufficient_quota"),
    (401, {"code": "invalid_api_key"}, "AUTHENTICATION", "authentication"),
])
def test_provider_error_codes_are_mapped_and_bodies_dropped(home, tmp_path, status, error, code, reason):
    marker = "PROVIDER-BODY-MARKER-2718"
    body = {"error": {"message": f"{error.get('message', 'x')} {marker}", **{k: v for k, v in error.items() if k != "message"}}}
    paths, outcome, _ = _run(home, tmp_path, policy(inject={"first": {"error": {"status": status, "body": body}}}))
    assert outcome.code == code
    assert job_row(paths)[2]["reason"] == reason
    for name in ("runtime.sqlite", "runtime.sqlite-wal"):
        path = paths.db if name == "runtime.sqlite" else paths.db + "-wal"
        try:
            assert marker.encode() not in open(path, "rb").read(), "provider bodies are never stored"
        except FileNotFoundError:
            pass


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("reply", "code", "stage", "reason"), [
    ({"policy": True, "truncate": True}, "UNAVAILABLE", "response_body", "stream_interrupted"),
    ({"policy": True, "reset": True}, "UNAVAILABLE", "response_body", "stream_interrupted"),
    ({"policy": True, "truncate": "clean"}, "INVALID_RESPONSE", "response_envelope", "stream_interrupted"),
    ({"policy": True, "malformed": True}, "INVALID_RESPONSE", "response_envelope", "invalid_envelope"),
    ({"policy": True, "finish": "length"}, "INVALID_RESPONSE", "model_output", "output_truncated"),
    ({"text": "", "finish": "length"}, "INVALID_RESPONSE", "model_output", "output_truncated"),
    ({"policy": True, "stream_error": {"code": "server_error", "message": "boom"}}, "UNAVAILABLE",
     "response_envelope", "provider_unavailable"),
    ({"policy": True, "stream_error": {"code": "rate_limit_exceeded"}}, "RATE_LIMITED", "response_envelope",
     "rate_limited"),
])
def test_broken_streams_are_retryable_failures(home, tmp_path, api, reply, code, stage, reason):
    if reply.get("finish") == "length" and reply.get("policy"):
        # A cut tool call is judged by its arguments; only a cut without any call fails the attempt.
        reply = {"text": "partial", "finish": "length"}
    paths, outcome, log = _run(home, tmp_path, policy(inject={"read_ingest": reply}), api)
    assert (outcome.state, outcome.code) == ("retry", code)
    assert job_row(paths)[2] == {"stage": stage, "reason": reason, "retryable": True}
    assert log[-1]["cue"] == "read_ingest" and read_doc(paths, "profile") is None


@pytest.mark.parametrize("api", APIS)
def test_invalid_json_arguments_are_fed_back_and_the_model_recovers(home, tmp_path, api):
    bad = {"tool_calls": [{"name": "read_ingest", "arguments": '{"handle": "ingest_1", "block": '}]}
    paths, outcome, log = _run(home, tmp_path, policy(inject={"read_ingest": bad}), api)
    assert outcome.state == "committed" and TEXT in read_doc(paths, "profile")
    rejected = _tool_results(log[1]["body"])[0]  # the first answer was the broken call
    assert rejected == {"error": "MEMORY_TOOL_REJECTED", "tool": "read_ingest", "code": "TOOL_ARGUMENTS_INVALID",
                        "schema_errors": [{"path": "$", "rule": "json"}],
                        "hint": "send a JSON object with exactly the parameters this tool declares"}
    assert _tool_calls(log[1]["body"])[0] == ("read_ingest", "{}"), "rejected arguments are blanked"


@pytest.mark.parametrize("api", APIS)
def test_unknown_tool_is_rejected_by_code(home, tmp_path, api):
    unknown = {"tool_calls": [{"name": "delete_all_memory", "arguments": {"confirm": True}}]}
    paths, outcome, log = _run(home, tmp_path, policy(inject={"first": unknown}), api)
    assert outcome.state == "committed"
    result = _tool_results(log[1]["body"])[0]
    assert (result["error"], result["tool"], result["code"]) == ("MEMORY_TOOL_REJECTED", "unknown", "UNKNOWN_TOOL")
    assert _tool_calls(log[1]["body"]) == [("delete_all_memory", "{}")]


@pytest.mark.parametrize("api", APIS)
def test_two_submissions_in_one_turn_keep_only_the_first(home, tmp_path, api):
    script = policy(inject={"submit": {"policy": True, "duplicate": True}})
    paths, outcome, log = _run(home, tmp_path, script, api)
    assert outcome.state == "committed"
    assert read_doc(paths, "profile").count("## User turn") == 1
    last = log[-1]
    assert last["cue"] == "submit_memory_decision", "the first valid submission ended the loop"
    *_, turns, calls, _, _ = job_row(paths)
    assert calls == turns, "the duplicate submission was never executed"


@pytest.mark.parametrize("api", APIS)
def test_contract_rejection_then_a_corrected_submission(home, tmp_path, api):
    paths, outcome, log = _run(home, tmp_path, policy("invalid_then_remember"), api)
    assert outcome.state == "committed" and TEXT in read_doc(paths, "profile")
    assert [r["cue"] for r in log][-2:] == ["submit_memory_decision", "submit_memory_decision"]
    feedback = _tool_results(log[-1]["body"])[-1]
    assert feedback["code"] == "INVALID_REQUEST_REFERENCE" and feedback["tool"] == "submit_memory_decision"
    assert feedback["schema_errors"] == [{"path": "$.request_id", "rule": "does not name this job"}]
    assert "not-the-request-id" not in json.dumps(log[-1]["body"]), "the rejected submission is not echoed"


HOSTILE_POLICY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support", "hostile_policy.py")


@pytest.mark.parametrize(("code_point", "cls"), [
    (0x00, "NUL"), (0x1B, "C0 control"), (0x07, "C0 control"), (0x0D, "carriage return"), (0x9B, "C1 control"),
    (0x202E, "bidirectional control"), (0x2067, "bidirectional control"), (0x2028, "line or paragraph separator"),
])
def test_a_hostile_character_comes_back_as_a_tool_error_and_the_agent_corrects_it(home, tmp_path, code_point, cls):
    turn = f"My shell prompt is green, code point {code_point:x}"
    with fakemodel.running(str(tmp_path / "fm"), policy(f"{HOSTILE_POLICY}:hostile_then_clean")) as fm:
        paths, cfg = configure_remote(home, fm.base_url)
        admit(paths, turn, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
        log = fm.model_requests()
    feedback = _tool_results(log[-1]["body"])[-1]
    assert feedback["code"] == "UNSAFE_CHARACTER" and feedback["tool"] == "submit_memory_decision"
    assert "U+2028" in feedback["hint"] and chr(code_point) not in json.dumps(feedback, ensure_ascii=False)
    assert feedback["schema_errors"] == [{"path": "$.decisions[0].operations[0].body",
                                          "rule": f"contains a {cls} character"}]
    assert outcome.state == "committed"
    assert read_doc(paths, "profile") == f"# Profile\n\n## Noted\n{turn} end\n", "only the corrected body is saved"


@pytest.mark.parametrize("api", APIS)
def test_refusal_is_permanent(home, tmp_path, api):
    paths, outcome, _ = _run(home, tmp_path, policy(inject={"submit": {"refusal": "I can't help with that."}}), api)
    assert (outcome.state, outcome.code) == ("dead", "MODEL_REFUSAL")
    assert job_row(paths)[2] == {"stage": "model_output", "reason": "refusal", "retryable": False}


@pytest.mark.parametrize("api", APIS)
def test_prose_gets_one_recovery_prompt_then_missing_submission(home, tmp_path, api):
    prose = {"text": "Here is my decision: remember the tabs preference."}
    paths, outcome, log = _run(home, tmp_path, policy(inject={"submit": [prose, prose]}), api)
    assert (outcome.state, outcome.code) == ("retry", "MISSING_SUBMISSION")
    assert job_row(paths)[2] == {"stage": "model_output", "reason": "incomplete_output", "retryable": True}
    assert "memory_recovery" in json.dumps(log[-1]["body"]) and "remember the tabs" not in json.dumps(log[-1]["body"])


def test_one_prose_reply_is_recovered_in_the_same_attempt(home, tmp_path):
    paths, outcome, _ = _run(home, tmp_path, policy(inject={"submit": {"text": "Done reading."}}))
    assert outcome.state == "committed"


def test_endless_rejections_end_the_attempt_with_the_last_code(home, tmp_path):
    flood = {"tool_calls": [{"name": "no_such_tool", "arguments": {}}] * 17}
    paths, outcome, log = _run(home, tmp_path, policy(inject={"first": flood}))
    assert (outcome.state, outcome.code) == ("retry", "UNKNOWN_TOOL") and len(log) == 1
    assert job_row(paths)[2] == {"stage": "core_validation", "reason": "tool_call", "retryable": True}


@pytest.mark.parametrize("api", APIS)
def test_turn_limit(home, tmp_path, api):
    # the page-by-page reader: inspect_ingest returns everything, then the submission; one turn short
    paths, outcome, log = _run(home, tmp_path, policy(reading="blocks"), api, maxAgentTurns=1)
    assert (outcome.state, outcome.code) == ("dead", "AGENT_TURN_LIMIT")
    assert len(log) == 1
    assert job_row(paths)[2] == {"stage": "model_output", "reason": "agent_turn_limit", "retryable": False}


def test_whole_attempt_deadline_cuts_a_slow_stream(home, tmp_path):
    # The stream stalls for 30 s and the deadline is 1 s: an attempt that waited for the stream
    # would take 30 s, so the bound below tells the two apart at any load without a tight window.
    started = time.monotonic()
    paths, outcome, _ = _run(home, tmp_path, policy(inject={"read_ingest": {"policy": True, "delay_seconds": 30}}),
                             deadlineMs=1000)
    elapsed = time.monotonic() - started
    assert (outcome.state, outcome.code) == ("retry", "TIMEOUT")
    assert job_row(paths)[2] == {"stage": "model_output", "reason": "timeout", "retryable": True}
    assert elapsed < 20, "the watchdog ends the attempt at its deadline, not when the stream resumes"


# A header delay (3 s) far beyond the timeout under test only makes the timeout likelier under
# load, never less likely, so these two windows are load-independent.
def test_header_timeout(home, tmp_path):
    script = policy(inject={"first": {"policy": True, "header_delay_seconds": 3}})
    paths, outcome, _ = _run(home, tmp_path, script, agent_kwargs={"header_timeout": 0.4})
    assert outcome.code == "TIMEOUT"
    assert job_row(paths)[2] == {"stage": "network", "reason": "connection_timeout", "retryable": True}


def _header_seconds(tmp_path) -> float:
    """The median time the loopback fake model takes to answer a request's headers, measured now
    over three whole requests (support.killwindow)."""
    with fakemodel.running(str(tmp_path / "probe"), [{"text": "probe"}] * 3) as fm:
        def request() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", fm.port, timeout=30)
            conn.request("POST", "/v1/responses", json.dumps({"stream": True}), {"Content-Type": "application/json"})
            conn.getresponse().read()
            conn.close()

        return killwindow.measure(request)


def test_stream_idle_timeout_is_separate_from_the_header_timeout(home, tmp_path):
    # The headers must arrive within the header timeout: twenty times their measured time, never
    # under the 5 s it was fixed at.
    header_timeout = max(5.0, 20 * _header_seconds(tmp_path))
    killwindow.record("agent.idle_timeout", bound_s=round(header_timeout, 3))
    script = policy(inject={"first": {"policy": True, "delay_seconds": 3}})
    paths, outcome, _ = _run(home, tmp_path, script, agent_kwargs={"header_timeout": header_timeout,
                                                                   "idle_timeout": 0.4})
    assert outcome.code == "TIMEOUT"
    assert job_row(paths)[2] == {"stage": "response_body", "reason": "stream_idle_timeout", "retryable": True}


def test_a_stall_shorter_than_the_idle_timeout_is_fine(home, tmp_path):
    # The header timeout must pass the headers (twenty times their measured time, at least 0.3 s)
    # and be shorter than the stall that follows them, which the idle timeout outlasts.
    header_timeout = max(0.3, 20 * _header_seconds(tmp_path))
    stall = 2 * header_timeout
    killwindow.record("agent.stall", bound_s=round(header_timeout, 3))
    script = policy(inject={"first": {"policy": True, "delay_seconds": stall}})
    _, outcome, _ = _run(home, tmp_path, script, agent_kwargs={"header_timeout": header_timeout,
                                                               "idle_timeout": stall + 5})
    assert outcome.state == "committed", "the header timeout does not apply once the body streams"


def test_connection_refused(home, tmp_path):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    paths, cfg = configure_remote(home, f"http://127.0.0.1:{port}/v1")
    admit(paths, TEXT, "e1")
    outcome = run_once(paths, cfg, make_agent(cfg))
    assert (outcome.state, outcome.code) == ("retry", "MODEL_UNREACHABLE")
    assert job_row(paths)[2] == {"stage": "network", "reason": "connection_refused", "retryable": True}


def test_redirects_are_refused(home, tmp_path):
    redirect = {"error": {"status": 307, "headers": {"Location": "http://127.0.0.1:9/v1/responses"}}}
    paths, outcome, log = _run(home, tmp_path, policy(inject={"first": redirect}))
    assert (outcome.state, outcome.code) == ("dead", "INVALID_RESPONSE")
    assert job_row(paths)[2]["httpStatus"] == 307 and len(log) == 1


def test_a_flagged_hand_edit_is_withheld_from_the_agent_and_never_sent(home, tmp_path):
    """A hand edit holding a token is shown to the Memory Agent as its placeholder (the Writer judges
    only what a decision writes), so the job commits, the token never leaves, and the edit stays."""
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url)
        os.makedirs(paths.memory, exist_ok=True)
        secret = "ghp_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"
        with open(paths.document("profile"), "w", encoding="utf-8") as handle:  # a hand edit holding a token
            handle.write(f"# Profile\n\n## Tools\nmy token {secret}\n")
        admit(paths, TEXT, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
        raw = open(fm.log_path, encoding="utf-8").read()
        requests = fm.model_requests()
    assert (outcome.state, outcome.code) == ("committed", None)
    assert requests, "the agent ran"
    assert secret not in raw and "Zx9Yw8Vu7Ts6" not in raw, "no part of the token was sent"
    with open(paths.document("profile"), encoding="utf-8") as handle:
        assert f"my token {secret}" in handle.read(), "the user's hand edit is kept as written"


def test_byte_cap_is_checked_on_every_serialized_request(home, tmp_path):
    cap = 16_000  # the first request (prompt, tools, task) fits; with 12 KB of read source the next does not
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url, disclosure={"maxTotalBytes": cap})
        admit(paths, "I collect old maps. " * 600, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
        sizes = [len(json.dumps(r["body"], ensure_ascii=False, separators=(",", ":")).encode()) for r in fm.model_requests()]
    assert (outcome.state, outcome.code) == ("dead", "SENSITIVE_CONTENT_REJECTED")
    assert job_row(paths)[2] == {"stage": "request", "reason": "body_too_large", "retryable": False}
    assert len(sizes) == 1 and max(sizes) <= cap, "the first request left; the next, over the cap, never did"
