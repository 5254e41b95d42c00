"""`cm cancel`: queued, waiting or failed work is dropped before it is sent, its text deleted, a
tombstone of ids and counts kept; a job being committed is refused; `cm status` counts it."""

from __future__ import annotations

import json
import time

import pytest
from agent_support import configure_remote, make_agent, policy, run_once
from conftest import db_rows, run_cm, wait_no_drain
from mcp_support import configure, rows
from tui_support import EDIT_POLICY, configure_model, drive, temp_hosts, wait_for
from writer_support import admit

from cmrunner.core import config as config_mod, store
from cmrunner.manage import setupstate
from cmrunner.synthetic import fakemodel
from cmrunner.tui.app import CmApp
from cmrunner.writer_proc import jobs

TEXT = "Remember that I deploy with Nix flakes and review code in the morning."


def _prose(chapters: int) -> str:
    return "# Handbook\n" + "".join(
        f"\n## Chapter {c}\n" + "".join("\n" + " ".join(f"w{(c + p + i) % 89}" for i in range(60)) + ".\n"
                                        for p in range(9)) for c in range(chapters))


def test_a_cancelled_import_is_never_sent(home, tmp_path):
    paths = configure(home)  # no model yet: the import stays queued
    path = tmp_path / "handbook.md"
    path.write_text(_prose(60), encoding="utf-8")
    queued = run_cm(["import", str(path), "--no-wait", "--yes"])
    assert queued.returncode == 0, queued.stderr
    # the result line "import <id> into <scope>: …" (run from a project folder, a line before it offers
    # to "import into it")
    import_id = next(line for line in queued.stdout.decode().splitlines() if line.startswith("import ")).split()[1]
    wait_no_drain(home)
    parts = rows(paths, "SELECT id FROM observations")
    assert len(parts) > 1
    done = run_cm(["cancel", import_id])
    assert done.returncode == 0, done.stderr
    assert f"cancelled {len(parts)} item(s)" in done.stdout.decode() and "nothing of it will be sent" in done.stdout.decode()
    assert rows(paths, "SELECT DISTINCT state, issue, text FROM observations") == [("cancelled", "CANCELLED", None)]
    tombstone = rows(paths, "SELECT target, observations, text_bytes, observation_ids FROM cancellations")
    assert tombstone[0][:2] == (import_id, len(parts)) and tombstone[0][2] > 100_000
    assert "Chapter" not in json.dumps(rows(paths, "SELECT * FROM cancellations"))
    status = run_cm(["status"]).stdout.decode()
    assert f"cancelled:   {len(parts)} item(s) by 1 `cm cancel`(s)" in status and f"cancelled {len(parts)}" in status
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        _point_at(home, fm.base_url)
        flushed = run_cm(["flush"], timeout=120)
        log = fm.model_requests()
    assert flushed.returncode == 0, flushed.stdout + flushed.stderr
    assert log == [], "the fake model's log proves nothing was sent"
    again = run_cm(["cancel", import_id])
    assert again.returncode == 1 and again.stderr.decode().startswith("cm: NOTHING_TO_CANCEL: ")


def _point_at(home: str, base_url: str) -> None:
    """Give an existing home a model (keeping its disclosure settings)."""
    from agent_support import KEY_NAME, TEST_KEY

    from cmrunner.core import envfile

    data = config_mod.load(home).data
    data["remote"] = {"provider": "openai-compatible", "baseUrl": base_url, "model": "fake-model",
                      "apiKeyEnv": KEY_NAME, "api": "responses", "proxy": {"mode": "direct"}}
    config_mod.save(home, data)
    envfile.update(home, {KEY_NAME: TEST_KEY})


def _claim(paths, cfg) -> jobs.Job | None:
    """What the drain's next claim takes (the job then holds a live lease)."""
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            return jobs.claim(conn, cfg.scheduler, int(time.time() * 1000), force=True)
    finally:
        conn.close()


def test_a_waiting_job_is_cancelled_and_the_queue_moves_on(home, tmp_path):
    failing = {"replies": [{"error": {"status": 500}}], "default": {"policy": True}, "policy": "ignore"}
    with fakemodel.running(str(tmp_path / "fm"), failing) as fm:
        paths, cfg = configure_remote(home, fm.base_url)
        first = admit(paths, TEXT, "e1", batch="b1")
        second = admit(paths, "I prefer tabs in Go.", "e2", batch="b2")
        outcome = run_once(paths, cfg, make_agent(cfg))
        assert (outcome.state, outcome.code) == ("retry", "UNAVAILABLE")
        sent_before = len(fm.model_requests())
        done = run_cm(["cancel", outcome.job_id[:12]])
        assert done.returncode == 0, done.stderr
        assert "1 job(s)" in done.stdout.decode()
        assert rows(paths, "SELECT state FROM jobs") == [("cancelled",)]
        job = _claim(paths, cfg)
        assert job is not None and job.observation_ids == [second], "the cancelled job no longer blocks the queue"
        assert rows(paths, "SELECT id, state, text FROM observations WHERE id = ?", (first,)) == [(first, "cancelled", None)]
        assert len(fm.model_requests()) == sent_before


def test_a_job_being_committed_is_refused_and_says_so(home, tmp_path):
    paths = configure(home)
    oid = admit(paths, TEXT, "e1", batch="b1")
    job = _claim(paths, config_mod.load(home))
    assert job is not None
    for target in (job.id, str(oid)):
        proc = run_cm(["cancel", target])
        err = proc.stderr.decode()
        assert proc.returncode == 1 and err.startswith("cm: JOB_COMMITTING: ") and "being processed now" in err
    assert rows(paths, "SELECT state, text IS NOT NULL FROM observations") == [("claimed", 1)]


def test_unknown_targets_have_their_codes(home, tmp_path):
    paths = configure(home)
    admit(paths, TEXT, "e1")
    for target, code in (("999", "UNKNOWN_OBSERVATION"), ("md-" + "0" * 64, "UNKNOWN_IMPORT"),
                         ("abcdef0123", "UNKNOWN_JOB"), ("abc", "JOB_ID_TOO_SHORT")):
        proc = run_cm(["cancel", target])
        assert proc.returncode == 1 and proc.stderr.decode().startswith(f"cm: {code}: "), (target, proc.stderr)
    assert rows(paths, "SELECT state FROM observations") == [("pending",)]


@pytest.mark.timeout(120)
def test_processing_status_cancels_the_highlighted_job(home, tmp_path):
    script = {"replies": [{"error": {"status": 401}}], "policy": EDIT_POLICY}
    with fakemodel.running(str(tmp_path / "fake"), script) as fake:
        configure_model(home, fake.base_url)
        setupstate.finish(home)

        async def steps(pilot):
            await wait_for(pilot, "cm · Common Memory")
            menu = pilot.app.screen.query_one("#column-1")
            menu.focus()
            menu.highlighted = 1
            await pilot.press("enter")
            await wait_for(pilot, "Memory Control · Adjust Memory")
            await pilot.press(*"Please remember that I prefer tabs over spaces", "enter")
            await wait_for(pilot, "Status: dead", timeout=60)
            await pilot.press("escape")
            menu = pilot.app.screen.query_one("#column-1")
            menu.highlighted = 2
            await pilot.press("enter")
            await wait_for(pilot, "failed (Enter to retry)")
            await pilot.press("x")
            await wait_for(pilot, "cancelled: 1 item(s) deleted, never sent")
            await wait_for(pilot, "No unfinished job.")
            await pilot.press("escape", "escape")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path))), steps)
        sent = len(fake.model_requests())
    wait_no_drain(home)
    assert db_rows(home, "SELECT state FROM jobs") == [("cancelled",)]
    assert db_rows(home, "SELECT state, text FROM observations") == [("cancelled", None)]
    assert sent == 1, "only the first, failed request was ever sent"
