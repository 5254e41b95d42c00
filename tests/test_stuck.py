"""When something is stuck: `cm status` explains it by code, `cm release` and `cm retry` fix it.

The stuck state is produced by the real Writer on a real store (a sensitive message, an oversized
one and a job the provider rejects), then every command runs as a real `cm` subprocess.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import db_rows, run_cm
from writer_support import admit, configure

from cmrunner.agentrt import errors_map
from cmrunner.core import config as config_mod, reasons, store
from cmrunner.writer_proc.writer import Writer

PLAIN = "I prefer tabs over spaces in Go, marker-plain-4711."
SECRET = "my token is sk-test7Qm2Xr9Lk4Vb8Nc1Zt6Hy3Wd5 marker-secret-4711"
LARGE = "A long story about my editor setup, marker-large-4711. " * 12


class RejectingProvider:
    """A Memory Agent whose provider rejects the key, exactly as the network agent reports it."""

    def decide(self, task: dict, reads: object, meter: object) -> object:
        raise errors_map.failure("AUTHENTICATION", "http", "authentication", False, http_status=401)


@pytest.fixture
def stuck(home: str) -> dict:
    paths, cfg = configure(home, maxExcerptBytes=400)
    ids = {
        "plain": admit(paths, PLAIN, "e1", batch=None),
        "secret": admit(paths, SECRET, "e2", batch=None),
        "large": admit(paths, LARGE, "e3", batch=None),
        "unsupported": admit(paths, "an extension's message marker-ext-4711", "e4", source="extension", batch=None),
    }
    writer = Writer(paths, cfg, RejectingProvider(), force=True)
    try:
        outcome = writer.run_once()
    finally:
        writer.close()
    assert (outcome.state, outcome.code) == ("dead", "AUTHENTICATION")
    states = dict(db_rows(home, "SELECT id, issue FROM observations"))
    assert states == {ids["plain"]: "AUTHENTICATION", ids["secret"]: "SENSITIVE_INPUT",
                      ids["large"]: "OVERSIZED_COMPLETE_SOURCE", ids["unsupported"]: "UNSUPPORTED_SOURCE"}
    return {"paths": paths, "ids": ids, "job": outcome.job_id}


def _status(home: str) -> dict:
    proc = run_cm(["status", "--json"])
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_status_groups_quarantine_and_dead_jobs_by_code_with_reason_and_remedy(home, stuck):
    report = _status(home)
    quarantined = {g["code"]: g for g in report["problems"]["quarantined"]}
    assert set(quarantined) == {"SENSITIVE_INPUT", "OVERSIZED_COMPLETE_SOURCE", "UNSUPPORTED_SOURCE"}
    for code, group in quarantined.items():
        assert group["count"] == 1 and group["reason"] == reasons.TABLE[code].reason
    assert quarantined["OVERSIZED_COMPLETE_SOURCE"]["releasable"] is True
    assert "`cm release --code OVERSIZED_COMPLETE_SOURCE`" in quarantined["OVERSIZED_COMPLETE_SOURCE"]["remedy"]
    assert "maxExcerptBytes" in quarantined["OVERSIZED_COMPLETE_SOURCE"]["remedy"]
    assert quarantined["SENSITIVE_INPUT"]["releasable"] is False
    assert quarantined["SENSITIVE_INPUT"]["observationIds"] == [stuck["ids"]["secret"]]
    short = stuck["job"][:12]
    [dead] = report["problems"]["dead"]
    assert (dead["code"], dead["count"], dead["observations"], dead["jobIds"]) == ("AUTHENTICATION", 1, 1, [short])
    assert dead["reason"] == "the provider rejected the API key"
    assert dead["remedy"].endswith(f"then `cm retry {short}`") and ".env" in dead["remedy"]
    assert [(j["id"], j["state"], j["issue"]) for j in report["jobList"]["jobs"]] == [(short, "dead", "AUTHENTICATION")]
    assert report["lastDrainFailure"] is None

    text = run_cm(["status"]).stdout.decode()
    assert "quarantined: 1 × SENSITIVE_INPUT: " + reasons.TABLE["SENSITIVE_INPUT"].reason in text
    assert "remedy: " + quarantined["OVERSIZED_COMPLETE_SOURCE"]["remedy"] in text
    assert "dead:        1 job(s) × AUTHENTICATION (1 observation(s)): the provider rejected the API key" in text
    assert f"job ids:     {short} dead (AUTHENTICATION)" in text
    assert "marker-" not in text and "marker-" not in json.dumps(report), "status never prints user text"


def test_release_is_refused_for_secrets_and_unclassified_sources_and_changes_nothing(home, stuck):
    before = db_rows(home, "SELECT id, state, issue, job_id FROM observations ORDER BY id")
    for args in (["release", "--code", "SENSITIVE_INPUT"], ["release", str(stuck["ids"]["secret"])],
                 ["release", str(stuck["ids"]["unsupported"])]):
        proc = run_cm(args)
        assert proc.returncode == 1
        assert proc.stderr.decode().startswith("cm: RELEASE_REFUSED: ") and proc.stderr.count(b"\n") == 1
        assert b"marker-" not in proc.stderr and b"Traceback" not in proc.stderr
    proc = run_cm(["release", str(stuck["ids"]["plain"])])
    assert (proc.returncode, proc.stderr.decode().split(":")[1].strip()) == (1, "NOT_QUARANTINED")
    proc = run_cm(["release", "99999"])
    assert proc.stderr.decode().startswith("cm: UNKNOWN_OBSERVATION: ")
    proc = run_cm(["release", "--code", "INTERRUPTED_TURN"])
    assert proc.stderr.decode().startswith("cm: NOTHING_TO_RELEASE: ")
    proc = run_cm(["release"])
    assert proc.stderr.decode().startswith("cm: INVALID_ARGUMENTS: ")
    assert db_rows(home, "SELECT id, state, issue, job_id FROM observations ORDER BY id") == before


def test_release_sends_an_oversized_message_back_to_the_queue_once_the_cap_allows_it(home, stuck):
    data = config_mod.load(home).data
    data["disclosure"]["maxExcerptBytes"] = 4096
    config_mod.save(home, data)
    proc = run_cm(["release", "--code", "OVERSIZED_COMPLETE_SOURCE"])
    assert proc.returncode == 0, proc.stderr
    assert b"released 1 observation(s) (OVERSIZED_COMPLETE_SOURCE)" in proc.stdout
    large = stuck["ids"]["large"]
    assert db_rows(home, "SELECT state, issue, job_id, text FROM observations WHERE id = ?", (large,)) == [
        ("pending", None, None, LARGE)], "the same text, back to pending, detached from any job"
    assert db_rows(home, "SELECT value FROM settings WHERE key = 'flush_requested'") == [("1",)]
    groups = {g["code"] for g in _status(home)["problems"]["quarantined"]}
    assert groups == {"SENSITIVE_INPUT", "UNSUPPORTED_SOURCE"}


def test_retry_accepts_a_unique_prefix_of_eight_or_more_characters(home, stuck):
    job = stuck["job"]
    proc = run_cm(["retry", job[:8]])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == f"job {job[:12]} queued for another attempt\n"
    assert db_rows(home, "SELECT state FROM jobs WHERE id = ?", (job,)) == [("retry",)]


def test_retry_refuses_short_unknown_and_ambiguous_prefixes(home, stuck):
    conn = store.connect(stuck["paths"].db, 1000)
    try:
        with store.immediate(conn):
            for suffix in ("aaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbb"):
                conn.execute("INSERT INTO jobs(id, token, generation, state, scope, provenance, created_at, updated_at)"
                             " VALUES (?, 't', 1, 'dead', 'global', 'user_explicit', 0, 0)", ("deadbeef" + suffix,))
    finally:
        conn.close()
    proc = run_cm(["retry", "deadbeef"])
    assert proc.returncode == 1
    line = proc.stderr.decode()
    assert line.startswith("cm: AMBIGUOUS_JOB_ID: ") and line.count("\n") == 1
    assert "deadbeef" + "a" * 24 in line and "deadbeef" + "b" * 24 in line
    proc = run_cm(["retry", "deadbeefa"])
    assert proc.returncode == 0 and b"job deadbeefaaaa queued" in proc.stdout
    proc = run_cm(["retry", stuck["job"][:7]])
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: JOB_ID_TOO_SHORT: ")
    proc = run_cm(["retry", "0123456789abcdef"])
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: UNKNOWN_JOB: ")
    proc = run_cm(["retry", "not-a-job-id"])
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: UNKNOWN_JOB: ")
    assert db_rows(home, "SELECT state FROM jobs WHERE id = ?", (stuck["job"],)) == [("dead",)]


def test_status_lists_waiting_jobs_with_their_next_attempt(home, stuck):
    conn = sqlite3.connect(stuck["paths"].db)
    with conn:
        conn.execute("UPDATE jobs SET state = 'retry', issue = 'RATE_LIMITED', available = ? WHERE id = ?",
                     (4102444800000, stuck["job"]))  # 2100-01-01
    conn.close()
    report = _status(home)
    [job] = report["jobList"]["jobs"]
    assert (job["state"], job["nextAttemptAt"], job["reason"]) == ("retry", 4102444800000, "the provider is rate limiting")
    text = run_cm(["status"]).stdout.decode()
    assert f"job ids:     {stuck['job'][:12]} retry (RATE_LIMITED), next attempt 2100-01-0" in text


def test_a_job_left_empty_by_quarantine_is_history_not_a_job_to_act_on(home):
    paths, cfg = configure(home)
    secret = admit(paths, SECRET, "e1", batch=None)
    writer = Writer(paths, cfg, RejectingProvider(), force=True)
    try:
        outcome = writer.run_once()
    finally:
        writer.close()
    assert (outcome.state, outcome.code) == ("quarantined", "SENSITIVE_INPUT"), "nothing was sent"
    report = _status(home)
    assert report["jobs"] == {"quarantined": 1}
    assert report["jobList"] == {"jobs": [], "total": 0}
    [group] = report["problems"]["quarantined"]
    assert (group["code"], group["observationIds"], group["jobIds"]) == ("SENSITIVE_INPUT", [secret], [])
    assert group["remedy"] == "nothing to do; it cannot be released"


def test_an_observation_whose_text_was_pruned_is_not_released(home, stuck):
    large = stuck["ids"]["large"]
    conn = sqlite3.connect(stuck["paths"].db)
    with conn:
        conn.execute("UPDATE observations SET text = NULL WHERE id = ?", (large,))
    conn.close()
    proc = run_cm(["release", str(large)])
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: NOTHING_TO_RELEASE: ")
    assert db_rows(home, "SELECT state, issue FROM observations WHERE id = ?", (large,)) == [
        ("quarantined", "OVERSIZED_COMPLETE_SOURCE")]
