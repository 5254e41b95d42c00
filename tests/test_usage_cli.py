"""`cm usage` and `cm status`'s spend line: what the ledger holds, read-only, in words and JSON."""

from __future__ import annotations

import json
import time

from conftest import hook_env, run_cm
from writer_support import configure

from cmrunner.core import ledger, store
from cmrunner.core.configdefs import DEFAULT_SPEND
from cmrunner.views import usage

DAY = 86_400_000


def _fill(home: str) -> None:
    paths, _cfg = configure(home)
    conn = store.open_store(paths)
    now = int(time.time() * 1000)
    rows = [(now - 40 * DAY, "ok", 900, ("global",), ("user_explicit",)),
            (now - 1000, "ok", 1200, ("global", "project:tide"), ("user_explicit", "conversation_context")),
            (now - 500, "RATE_LIMITED", 0, ("global",), ("user_explicit",))]
    with store.immediate(conn):
        for at, outcome, tokens, scopes, provenance in rows:
            ledger.append(conn, ledger.Entry(at, "memory_agent", "job", 1, 1, "api.example.com", "gpt-x", "responses",
                                             scopes, provenance, 2048, 512, tokens, None, 40, None,
                                             "provider" if tokens else "none", 300, outcome))
    conn.close()


def test_usage_reports_totals_groups_and_what_left_this_machine(home):
    _fill(home)
    env = hook_env(COMMON_MEMORY_HOME=home)
    proc = run_cm(["usage", "--json"], env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    report = json.loads(proc.stdout)
    assert report["total"]["requests"] == 3 and report["total"]["failed"] == 1
    assert report["today"]["requests"] == 2 and report["today"]["tokens"] == 1200 + 40 + 40
    assert [g["model"] for g in report["byModel"]] == ["api.example.com gpt-x (responses)"]
    assert {g["outcome"]: g["requests"] for g in report["byOutcome"]} == {"ok": 2, "RATE_LIMITED": 1}
    grants = {(g["scope"], g["provenance"]): g["requests"] for g in report["byGrant"]}
    assert grants[("global", "user_explicit")] == 3 and grants[("project:tide", "conversation_context")] == 1
    assert len(report["daily"]) == usage.CHART_DAYS and report["daily"][-1]["tokens"] == 1280
    assert [c["cap"] for c in report["caps"]] == ["requestsPerHour", "tokensPerDay", "tokensPerMonth"]
    assert report["blocked"] is None

    recent = json.loads(run_cm(["usage", "--since", "7d", "--json"], env=env).stdout)
    assert recent["total"]["requests"] == 2 and recent["since"] is not None

    text = run_cm(["usage"], env=env).stdout.decode()
    assert "today (UTC):   2 request(s), 1,280 tokens" in text
    assert "by provider and model" in text and "api.example.com gpt-x (responses)" in text
    assert "what left this machine" in text and "project:tide" in text
    assert "tokens today: 1,280 of 2.00 M" in text

    status = run_cm(["status"], env=env).stdout.decode()
    assert "spend:       today 1,280 tokens in 2 request(s), this month" in status
    assert "(caps 2.00 M/day, 30.00 M/month)" in status


def test_usage_on_a_fresh_home_says_nothing_was_sent(home):
    env = hook_env(COMMON_MEMORY_HOME=home)
    proc = run_cm(["usage"], env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "no model request recorded yet" in proc.stdout.decode()
    assert json.loads(run_cm(["status", "--json"], env=env).stdout)["spend"]["today"]["requests"] == 0


def test_bad_since_and_bad_caps_get_a_code_and_change_nothing(home):
    configure(home)
    env = hook_env(COMMON_MEMORY_HOME=home)
    for since in ("yesterday", "2026-13-01", "2026-02-30", "-3d"):
        proc = run_cm(["usage", "--since", since], env=env)
        assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: INVALID_SINCE: "), since
    before = open(f"{home}/config.json", "rb").read()
    proc = run_cm(["usage", "caps", "--tokens-per-day", "lots"], env=env)
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: INVALID_CAP: tokensPerDay takes a whole")
    assert open(f"{home}/config.json", "rb").read() == before
    shown = run_cm(["usage", "caps"], env=env).stdout.decode()
    assert f"tokensPerDay: {DEFAULT_SPEND['tokensPerDay']:,}" in shown and "requestsPerHour: 600" in shown


def test_the_chart_scales_to_the_busiest_day():
    daily = [{"day": "2026-12-01", "tokens": 100, "requests": 1}, {"day": "2026-12-02", "tokens": 50, "requests": 1},
             {"day": "2026-12-03", "tokens": 0, "requests": 0}, {"day": "2026-12-04", "tokens": 1, "requests": 1}]
    lines = usage.chart(daily, height=2)
    assert lines == ["busiest day: 100 tokens",
                     "█",
                     "█ █   ▁",
                     "12-01 12-04"]
    assert usage.chart([{"day": "2026-12-01", "tokens": 0, "requests": 0}], height=1)[1] == ""
