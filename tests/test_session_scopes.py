"""One scope per batch: a session whose turns carry different scopes never discloses one under another's grant.

The regression (issue 28): a Codex session starts in an unregistered folder (scope ``global``); mid-session
the user registers that folder as a project, which grants nothing; the next turn is captured with the
project's scope. Its words must not reach the model until the project is authorised, and must once it is.
Everything runs for real: ``cm hook codex`` subprocesses, the detached drain, the Memory Agent over the
wire to the loopback fake model, whose request log is the proof.
"""

from __future__ import annotations

import json

import pytest
from agent_support import configure_remote, policy
from conftest import Transcript, db_rows, event, run_cm, run_hook, settle
from writer_support import admit, all_evidence, configure, decision, rows, writer

from cmrunner.capture import observations, sessions
from cmrunner.core import config as config_mod, projects, reasons, store
from cmrunner.synthetic import fakemodel
from cmrunner.writer_proc import jobs

SECRET = "projsecretbeta"
GLOBAL_TEXT = "I prefer tabs over spaces in Go code."
PROJECT_TEXT = f"Please remember that {SECRET} is the codename."


def _sent(model: fakemodel.FakeModel, needle: str) -> int:
    """How many model requests carried ``needle`` anywhere in their body."""
    return sum(needle in json.dumps(r["body"], ensure_ascii=False) for r in model.model_requests())


def _turn(home: str, transcript: Transcript, cwd: str, turn: str, text: str) -> None:
    assert run_hook(home, event("UserPromptSubmit", transcript, cwd, turn_id=turn, prompt=text)).returncode == 0
    transcript.user_turn(turn, text)
    transcript.reply(turn, "Noted.")
    assert run_hook(home, event("Stop", transcript, cwd, turn_id=turn)).returncode == 0


def test_a_project_registered_mid_session_is_not_disclosed_until_authorised(home, tmp_path, workdir, transcript):
    with fakemodel.running(str(tmp_path / "fm"), policy()) as model:
        configure_remote(home, model.base_url, disclosure={"allowedScopes": ["global"]})
        assert run_hook(home, event("SessionStart", transcript, workdir, source="startup")).returncode == 0
        _turn(home, transcript, workdir, "turn-1", GLOBAL_TEXT)
        registered = run_cm(["--home", home, "project", "register", workdir, "Proj"])
        assert registered.returncode == 0, registered.stderr
        scope = "project:" + registered.stdout.decode().split()[1]
        _turn(home, transcript, workdir, "turn-2", PROJECT_TEXT)
        assert run_hook(home, event("SessionEnd", transcript, workdir, reason="other")).returncode == 0
        settle(home)

        captured = db_rows(home, "SELECT scope, state, issue FROM observations ORDER BY id")
        assert [row[0] for row in captured] == ["global", scope], captured
        assert _sent(model, GLOBAL_TEXT) >= 1  # the global turn was disclosed: the log is not empty by accident
        assert _sent(model, SECRET) == 0
        assert captured[0][1] == "processed" and captured[1][1:] == ("quarantined", "UNAUTHORIZED_SOURCE"), captured
        batches = db_rows(home, "SELECT COUNT(DISTINCT batch_id) FROM observations")
        assert batches == [(2,)]  # one batch per scope, each authorised on its own
        (job,) = db_rows(home, "SELECT id FROM jobs WHERE issue = 'UNAUTHORIZED_SOURCE'")

        data = config_mod.load(home).data
        data["disclosure"]["allowedScopes"] = ["global", scope]
        data["writableScopes"] = ["global", scope]
        config_mod.save(home, data)
        before = len(model.model_requests())
        retried = run_cm(["--home", home, "retry", job[0]])
        assert retried.returncode == 0, retried.stderr
        flushed = run_cm(["--home", home, "flush"], timeout=120)
        assert flushed.returncode == 0, flushed.stderr
        assert _sent(model, SECRET) >= 1 and len(model.model_requests()) > before
        assert db_rows(home, "SELECT state FROM observations ORDER BY id") == [("processed",), ("processed",)]


# -- each place that holds a batch to one scope, on its own ----------------------------------------

def _session_turns(paths, scopes: list[str], end: bool = True) -> list[str]:
    """A session with one settled turn per scope in ``scopes``; the batch ids its sealing made."""
    conn = store.open_store(paths)
    sealed: list[str] = []
    with store.immediate(conn):
        sessions.register(conn, "s1", "codex", "h", "t", 0)
        for n, scope in enumerate(scopes):
            sessions.open_turn(conn, "s1", f"t{n}")
            sessions.capture_user(conn, "s1", f"t{n}", f"u{n}", f"turn {n}", scope, "codex_user_delivery",
                                  "2026-11-30T00:00:00Z", 1 << 20)
            sealed += sessions.settle(conn, "s1", f"t{n}", "settled")
        if end:
            sealed += sessions.end(conn, "s1")
    conn.close()
    return sealed


def _batches(paths) -> list[tuple]:
    return rows(paths, "SELECT batch_id, COUNT(DISTINCT scope), COUNT(*) FROM observations GROUP BY batch_id"
                       " ORDER BY MIN(id)")


def test_a_session_end_seals_one_batch_per_scope(home):
    paths, _ = configure(home)
    sealed = _session_turns(paths, ["global", "project:p-1", "global"])
    assert len(sealed) == 2
    assert [(b, scopes, count) for b, scopes, count in _batches(paths)] == [(sealed[0], 1, 2), (sealed[1], 1, 1)]


def test_the_tenth_turn_seals_one_batch_per_scope(home):
    paths, _ = configure(home)
    sealed = _session_turns(paths, ["global", "project:p-1"] * 5, end=False)
    assert len(sealed) == 2
    assert [(scopes, count) for _b, scopes, count in _batches(paths)] == [(1, 5), (1, 5)]


def test_a_claim_never_crosses_scopes_inside_a_sealed_batch(home):
    """A batch sealed before sealing split scopes (an older store) is claimed one scope at a time."""
    paths, cfg = configure(home)
    first = admit(paths, "global words", "e1", batch="b-old")
    second = admit(paths, "project words", "e2", batch="b-old", scope="project:p-1")
    conn = store.open_store(paths)
    with store.immediate(conn):
        job = jobs.claim(conn, cfg.scheduler, 1_000)
        assert job is not None and job.observation_ids == [first] and job.scope == "global"
        jobs.finish(conn, job, 1_000)
        job = jobs.claim(conn, cfg.scheduler, 1_000)
        assert job is not None and job.observation_ids == [second] and job.scope == "project:p-1"
    conn.close()


def _mixed_job(paths, cfg, scope: str) -> tuple[int, int]:
    """A job due for another attempt that holds a global and a ``scope`` observation (as a job claimed
    across scopes would); returns their ids."""
    first = admit(paths, "global words", "e1", batch="b1")
    second = admit(paths, f"words about {SECRET}", "e2", batch="b1", scope=scope)
    conn = store.open_store(paths)
    with store.immediate(conn):
        job = jobs.claim(conn, cfg.scheduler, 1_000)
        assert job is not None
        observations.claim_for(conn, job.id, [second])
        assert jobs.fail(conn, job, "UNAVAILABLE", 1_000)[0] == "retry"
    conn.close()
    return first, second


def test_the_writer_refuses_a_job_holding_an_unauthorised_observation_before_any_call(home, workdir):
    paths, cfg = configure(home)
    scope = projects.register(paths, workdir, "Proj").scope  # registered, not authorised
    _mixed_job(paths, cfg, scope)
    w, port = writer(paths, cfg, lambda task, reads: pytest.fail("nothing may be sent"), now=lambda: 600_000)
    outcome = w.run_once()
    w.close()
    assert (outcome.state, outcome.code, port.calls) == ("quarantined", "UNAUTHORIZED_SOURCE", 0)
    assert rows(paths, "SELECT state, issue FROM observations") == [("quarantined", "UNAUTHORIZED_SOURCE")] * 2


def test_the_writer_refuses_a_job_mixing_authorised_scopes_and_a_release_splits_it(home, workdir):
    paths, cfg = configure(home)
    scope = projects.register(paths, workdir, "Proj").scope
    paths, cfg = configure(home, allowedScopes=["global", scope])
    first, second = _mixed_job(paths, cfg, scope)
    seen: list[list[str]] = []

    def ignore(task, reads):
        seen.append(sorted(s.scope for s in reads.sources.values() if not s.context_only))
        return decision(task, {"kind": "ignore", "applicability": "uncertain", "confidence": 1,
                               "evidence": all_evidence(reads), "reason": "r"})

    w, port = writer(paths, cfg, ignore, now=lambda: 600_000)
    outcome = w.run_once()
    assert (outcome.state, outcome.code, port.calls) == ("quarantined", "MIXED_BATCH", 0)
    assert reasons.releasable("MIXED_BATCH")
    conn = store.open_store(paths)
    with store.immediate(conn):
        assert observations.release(conn, [first, second]) == 2
    conn.close()
    assert [w.run_once().state, w.run_once().state] == ["ignored", "ignored"]
    w.close()
    assert seen == [["global"], [scope]]
