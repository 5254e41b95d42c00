"""Imports and the spend caps: the plan states the requests it implies and, above a cap, how long
the caps stretch it over and the one command that raises that cap; `cm status` says when a reached
cap holds import parts back, and nothing already processed is undone.

Through the real CLI, a real drain and the loopback fake model; the files are written here."""

from __future__ import annotations

from agent_support import configure_remote, policy
from conftest import hook_env, run_cm, wait_no_drain
from mcp_support import configure, rows
from support.hourwindow import clear_of_the_hour_end

from cmrunner.core import config as config_mod
from cmrunner.synthetic import fakemodel


def _prose(chapters: int) -> str:
    out = ["# Handbook\n"]
    for c in range(chapters):
        out.append(f"\n## Chapter {c + 1}\n")
        for p in range(12):
            out.append("\n" + " ".join(f"word{(c * 7 + p * 3 + i) % 97}" for i in range(60)) + ".\n")
    return "".join(out)


def _caps(home: str, **caps: int | None) -> None:
    data = config_mod.load(home).data
    data.setdefault("spend", {}).update(caps)
    config_mod.save(home, data)


def test_the_plan_states_its_requests_and_what_the_caps_make_of_them(home, tmp_path):
    configure(home)
    small = tmp_path / "small.md"
    small.write_text("# Notes\n\nI write Rust.\n", encoding="utf-8")
    out = run_cm(["import", str(small), "--dry-run"]).stdout.decode()
    assert "caps: ~2 requests to the model (2 per part); within the spend caps\n" in out, out

    big = tmp_path / "big.md"
    big.write_text(_prose(60), encoding="utf-8")
    _caps(home, requestsPerHour=10, tokensPerDay=50_000)
    out = run_cm(["import", str(big), "--dry-run"]).stdout.decode()
    parts = int(out.split("plan: ", 1)[1].split(" part", 1)[0])
    tokens = int(out.split("; ~", 1)[1].split(" tokens", 1)[0].replace(",", ""))
    requests = parts * 2  # the task, then the read that returns the part whole (issue 35)
    assert parts > 4 and tokens > 50_000, out
    assert (f"caps: ~{requests} requests to the model (2 per part); more than the hourly cap of 10 requests: it "
            f"takes at least {-(-requests // 10)} hours, or `cm config set spend.requestsPerHour {requests}`; "
            f"more than the daily cap of 50,000 tokens: it takes at least {-(-tokens // 50_000)} days, or "
            f"`cm config set spend.tokensPerDay {tokens}`\n") in out, out
    # the command it names is one that works
    raised = run_cm(["config", "set", "spend.requestsPerHour", str(requests)])
    assert raised.returncode == 0, raised.stderr
    assert "more than the hourly cap" not in run_cm(["import", str(big), "--dry-run"]).stdout.decode()

    _caps(home, requestsPerHour=0)
    out = run_cm(["import", str(small), "--dry-run"]).stdout.decode()
    assert ("spend.requestsPerHour is 0, which turns the Memory Agent off: it waits queued until "
            "`cm config set spend.requestsPerHour N`") in out, out


def test_status_says_a_reached_cap_holds_an_import_back_and_what_was_processed_stays(home, tmp_path):
    first, second = tmp_path / "first.md", tmp_path / "second.md"
    first.write_text("# Editor\n\nI use helix marker-a-\n", encoding="utf-8")
    second.write_text("# Shell\n\nI use zellij marker-b-\n", encoding="utf-8")
    env = hook_env(COMMON_MEMORY_HOME=home)
    clear_of_the_hour_end()  # the hour's cap is filled below; a new hour would reset it midway
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        paths, _ = configure_remote(home, fm.base_url)
        done = run_cm(["import", str(first), "--yes"], env=env, timeout=120)
        assert done.returncode == 0 and done.stdout.decode().endswith("complete: true\n"), done.stdout
        used = int(rows(paths, "SELECT COUNT(*) FROM ledger")[0][0])
        sent = len(fm.model_requests())
        _caps(home, requestsPerHour=used)  # this hour's requests are all used
        queued = run_cm(["import", str(second), "--no-wait"], env=env)
        assert queued.returncode == 0, queued.stderr
        wait_no_drain(home)
        assert len(fm.model_requests()) == sent  # nothing more was sent
        status = run_cm(["status"], env=env).stdout.decode()
    spend = next(line for line in status.splitlines() if line.startswith("spend:"))
    assert f"WAITING: the Memory Agent reached its cap of {used:,} requests per hour" in spend, status
    assert spend.endswith("(1 import part waits for it; those already processed are kept)"), spend
    assert rows(paths, "SELECT state FROM observations WHERE source = 'document_import' ORDER BY id") == \
        [("processed",), ("pending",)]
