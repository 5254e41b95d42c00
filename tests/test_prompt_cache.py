"""Prompt caching: the static prefix is byte-identical across requests and jobs, explicit breakpoints
for Claude, cached tokens recorded in the ledger from each provider's fields, and `cm usage` says so.

Two real jobs run through the Writer against the fake model, which reports as cached the longest
byte prefix a request shares with an earlier one (as prefix caches count it), in OpenAI's, DeepSeek's
or Anthropic's usage fields."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from agent_support import configure_remote, make_agent, policy, run_once
from conftest import run_cm
from writer_support import admit

from cmrunner.agentrt import wire
from cmrunner.agentrt.agent import system_prompt
from cmrunner.synthetic import fakemodel

APIS = ["responses", "chat_completions"]


def _ledger(paths) -> list[tuple[int, int | None]]:
    conn = sqlite3.connect(paths.db)
    try:
        return conn.execute("SELECT input_tokens, cached_tokens FROM ledger ORDER BY rowid").fetchall()
    finally:
        conn.close()


def _two_jobs(home: str, tmp_path, api: str, **script: object) -> tuple[list[dict], list[bytes], object]:
    with fakemodel.running(str(tmp_path / "fm"), policy(**script)) as fm:
        paths, cfg = configure_remote(home, fm.base_url, api=api)
        admit(paths, "I prefer dark themes.", "e1", batch="b1")
        assert run_once(paths, cfg, make_agent(cfg)).state == "committed"
        admit(paths, "I live in Porto.", "e2", batch="b2")
        assert run_once(paths, cfg, make_agent(cfg)).state == "committed"
        log = fm.model_requests()
    raw = [json.dumps(r["body"], ensure_ascii=False, separators=(",", ":")).encode() for r in log]
    return log, raw, paths


@pytest.mark.parametrize("api", APIS)
def test_two_jobs_requests_share_the_static_prefix_byte_for_byte(home, tmp_path, api):
    log, raw, paths = _two_jobs(home, tmp_path, api)
    assert len(log) == 4, "two requests per job: the task, then the read that returned everything"
    body = log[0]["body"]
    last = "input" if api == "responses" else "messages"
    assert list(body)[-1] == last, "the conversation comes last"
    shared = os.path.commonprefix(raw)  # what every request of both jobs starts with, byte for byte
    instructions = json.dumps(system_prompt(), ensure_ascii=False).encode()
    assert instructions in shared and b'"name":"submit_memory_decision"' in shared
    assert shared.startswith(raw[0][:raw[0].index(f'"{last}":'.encode())])
    static = len(instructions) + len(json.dumps(body["tools"], ensure_ascii=False, separators=(",", ":")))
    rows = _ledger(paths)
    assert len(rows) == 4 and rows[0][1] == 0, "nothing was cached before the first request"
    assert all(cached is not None and cached >= static // 4 for _inputs, cached in rows[1:])
    assert all(cached <= inputs for inputs, cached in rows)


@pytest.mark.parametrize("report", ["deepseek", "anthropic"])
def test_cached_tokens_are_read_from_each_providers_own_fields(home, tmp_path, report):
    log, _raw, paths = _two_jobs(home, tmp_path, "chat_completions", cache_report=report)
    reported = log[1]["usage"]["cached_tokens"]
    assert reported > 1000
    assert _ledger(paths)[1][1] == reported


def test_a_provider_that_reports_no_cache_leaves_the_count_empty(home, tmp_path):
    _log, _raw, paths = _two_jobs(home, tmp_path, "chat_completions", cache_report="none")
    assert [cached for _inputs, cached in _ledger(paths)] == [None] * 4


def test_claude_gets_an_explicit_breakpoint_after_the_instructions():
    tools = [{"name": "t", "description": "d", "parameters": {"type": "object"}}]
    for remote in ({"model": "claude-sonnet", "preset": "anthropic"},
                   {"model": "anthropic/claude-sonnet", "preset": "openrouter"}):
        body = wire.ChatConversation(remote, "rules", tools, "{}").body()
        assert body["messages"][0]["content"] == [{"type": "text", "text": "rules",
                                                   "cache_control": {"type": "ephemeral"}}]
    for remote in ({"model": "gpt-5-mini", "preset": "openai"}, {"model": "openai/gpt-5", "preset": "openrouter"},
                   {"model": "m"}):
        assert wire.ChatConversation(remote, "rules", tools, "{}").body()["messages"][0]["content"] == "rules"


def test_cm_usage_says_what_the_cache_served(home, tmp_path):
    _log, _raw, paths = _two_jobs(home, tmp_path, "responses")
    rows = _ledger(paths)
    cached, inputs = sum(c for _i, c in rows), sum(i for i, _c in rows)
    proc = run_cm(["--home", home, "usage"])
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    assert f"{cached:,} of {inputs:,} input tokens ({100 * cached / inputs:.0f}%) came from the provider's prompt cache" \
        in out, out
    report = json.loads(run_cm(["--home", home, "usage", "--json"]).stdout)
    assert report["total"]["cachedTokens"] == cached
