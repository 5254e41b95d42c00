"""Spend caps: work waits, never dies, when a cap is reached; raising it or the next window releases it.

The end-to-end cases run real `cm flush`, `cm status` and `cm usage caps` processes against the
loopback fake model; the fake model's request log shows what was (not) sent.
"""

from __future__ import annotations

import datetime
import json
import sqlite3
import time

import pytest
from agent_support import configure_remote, policy
from conftest import db_rows, hook_env, reap_drains, run_cm
from support.hourwindow import clear_of_the_hour_end
from writer_support import admit

from cmrunner.core import config as config_mod, ledger, migrations, spend
from cmrunner.core.configdefs import DEFAULT_SPEND
from cmrunner.synthetic import fakemodel


def _ms(*parts: int) -> int:
    return int(datetime.datetime(*parts, tzinfo=datetime.UTC).timestamp() * 1000)


def test_windows_are_utc_calendar_periods():
    now = _ms(2026, 12, 31, 23, 59, 30)
    assert spend.window("hour", now) == (_ms(2026, 12, 31, 23), _ms(2027, 1, 1))
    assert spend.window("day", now) == (_ms(2026, 12, 31), _ms(2027, 1, 1))
    assert spend.window("month", now) == (_ms(2026, 12, 1), _ms(2027, 1, 1))
    assert spend.window("month", _ms(2026, 2, 14, 8)) == (_ms(2026, 2, 1), _ms(2026, 3, 1))
    assert spend.clock(_ms(2027, 1, 1)) == "2027-01-01 00:00 UTC"


def _store(tmp_path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(tmp_path / "s.sqlite"), isolation_level=None)
    for step in migrations.MIGRATIONS:
        step(conn)
    return conn


def _use(conn: sqlite3.Connection, at: int, tokens: int) -> None:
    ledger.append(conn, ledger.Entry(at, "memory_agent", "j", 1, 1, "h", "m", "responses", ("global",),
                                     ("user_explicit",), 10, 10, tokens, None, 0, None, "provider", 5, "ok"))


def test_blocked_names_the_first_reached_cap_and_when_it_lifts(tmp_path):
    conn = _store(tmp_path)
    now = _ms(2026, 12, 2, 10, 30)
    caps = spend.Caps(requests_per_hour=3, tokens_per_day=1000, tokens_per_month=5000)
    assert spend.blocked(conn, caps, now) is None
    _use(conn, _ms(2026, 12, 1, 9), 4000)  # earlier this month: counts for the month only
    _use(conn, now - 60_000, 900)
    assert spend.blocked(conn, caps, now) is None
    _use(conn, now - 30_000, 100)  # today's 1,000 tokens: the day cap
    block = spend.blocked(conn, caps, now)
    assert (block.cap, block.limit, block.used, block.until) == ("tokensPerDay", 1000, 1000, _ms(2026, 12, 3))
    assert "2026-12-03 00:00 UTC" in block.message and "--tokens-per-day" in block.message
    _use(conn, now - 10_000, 0)  # a third request this hour: the hour cap comes first
    assert spend.blocked(conn, caps, now).cap == "requestsPerHour"
    assert spend.blocked(conn, spend.Caps(None, None, 5000), now).cap == "tokensPerMonth"
    assert spend.blocked(conn, spend.Caps(None, None, None), now) is None
    off = spend.blocked(conn, spend.Caps(None, 0, None), _ms(2030, 1, 1))
    assert off is not None and off.used == 0 and "turns the Memory Agent off" in off.message


def test_the_spend_section_is_validated(home):
    data = config_mod.default_config(home)
    config_mod.save(home, {**data, "spend": {"tokensPerDay": 0, "requestsPerHour": None}})
    assert config_mod.load(home).spend == {"requestsPerHour": None, "tokensPerDay": 0,
                                              "tokensPerMonth": DEFAULT_SPEND["tokensPerMonth"]}
    for bad, field in (({"tokensPerDay": -1}, "spend.tokensPerDay"), ({"tokensPerDay": "5"}, "spend.tokensPerDay"),
                       ({"perYear": 5}, "spend.perYear"), ([], "spend")):
        with pytest.raises(Exception) as caught:
            config_mod.save(home, {**data, "spend": bad})
        assert getattr(caught.value, "code", None) == "CONFIG_INVALID" and f"'{field}'" in str(caught.value)


def _set_caps(home: str, **caps: object) -> None:
    data = config_mod.load(home).data
    data["spend"] = caps
    config_mod.save(home, data)


def test_a_cap_reached_mid_session_leaves_later_work_waiting_until_it_is_raised(home, tmp_path):
    clear_of_the_hour_end()
    env = hook_env(COMMON_MEMORY_HOME=home)
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        _set_caps(home, requestsPerHour=3)  # one job takes two requests: the second job meets the cap
        for n in range(3):
            admit(paths, f"Fact {n}: I review my own diffs before pushing.", f"e{n}", batch=f"batch-{n}")
        flush = run_cm(["flush"], env=env, timeout=120)
        assert flush.returncode == 1
        err = flush.stderr.decode()
        assert err.startswith("cm: SPEND_CAP_REACHED: ") and "3 requests per hour" in err and "Traceback" not in err
        assert len(fm.model_requests()) == 3, "the fourth request was never sent"
        jobs = db_rows(home, "SELECT state, issue, retries FROM jobs ORDER BY created_at")
        assert jobs == [("done", None, 0), ("retry", "SPEND_CAP_REACHED", 0)], "waiting, never dead, no recovery spent"
        assert db_rows(home, "SELECT COUNT(*) FROM observations WHERE state = 'pending'") == [(1,)]

        status = run_cm(["status", "--json"], env=env)
        report = json.loads(status.stdout)
        blocked = report["spend"]["blocked"]
        assert (blocked["cap"], blocked["limit"], blocked["used"]) == ("requestsPerHour", 3, 3)
        assert blocked["until"] == spend.window("hour", int(time.time() * 1000))[1]
        text = run_cm(["status"], env=env).stdout.decode()
        assert "WAITING: the Memory Agent reached its cap of 3 requests per hour" in text
        assert "`cm usage caps --requests-per-hour N`" in text

        raised = run_cm(["usage", "caps", "--requests-per-hour", "50"], env=env)
        assert raised.returncode == 0 and "requestsPerHour: 50" in raised.stdout.decode()
        again = run_cm(["flush"], env=env, timeout=120)
        assert again.returncode == 0, again.stderr.decode()
        reap_drains(home)
        assert len(fm.model_requests()) == 3 + 2 + 2
    assert [r[0] for r in db_rows(home, "SELECT state FROM jobs")] == ["done", "done", "done"]
    assert db_rows(home, "SELECT COUNT(*) FROM observations WHERE state = 'processed'") == [(3,)]


def test_a_cap_of_zero_turns_the_agent_off_and_sends_nothing(home, tmp_path):
    env = hook_env(COMMON_MEMORY_HOME=home)
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        _set_caps(home, tokensPerDay=0)
        admit(paths, "I prefer tabs over spaces in Go.", "e1")
        flush = run_cm(["flush"], env=env, timeout=60)
        assert flush.returncode == 1
        assert "spend.tokensPerDay is 0, which turns the Memory Agent off" in flush.stderr.decode()
        assert fm.model_requests() == []
        assert db_rows(home, "SELECT state FROM observations") == [("pending",)]
        assert db_rows(home, "SELECT COUNT(*) FROM jobs") == [(0,)], "nothing was claimed"
        caps = run_cm(["usage", "caps", "--tokens-per-day", "off"], env=env)
        assert caps.returncode == 0 and "tokensPerDay: no cap" in caps.stdout.decode()
        assert run_cm(["flush"], env=env, timeout=60).returncode == 0
        reap_drains(home)
        assert len(fm.model_requests()) == 2


def test_a_raised_cap_releases_work_without_a_flush(home, tmp_path):
    """`cm usage caps` starts a drain itself, so waiting work does not wait for the next host event."""
    env = hook_env(COMMON_MEMORY_HOME=home)
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        _set_caps(home, tokensPerMonth=0)
        admit(paths, "I prefer tabs over spaces in Go.", "e1")
        assert run_cm(["flush"], env=env, timeout=60).returncode == 1
        assert run_cm(["usage", "caps", "--tokens-per-month", "1000000"], env=env).returncode == 0
        deadline = time.monotonic() + 30  # polled: only bounds a hang
        while db_rows(home, "SELECT state FROM observations") != [("processed",)] and time.monotonic() < deadline:
            time.sleep(0.1)
        reap_drains(home)
        assert db_rows(home, "SELECT state FROM observations") == [("processed",)]
        assert len(fm.model_requests()) == 2
