"""The real cause travels with the job, and a model that keeps failing stops early (issues 22, 24).

A job records the code its last attempt ended with and the last tool rejection the model received
(code, rule, document/section, fingerprint: no text); ``cm flush``, ``cm status``, ``cm status
--json``, the drain log and the terminal UI's processing status show one cause and the command
that fixes it. Three rejected submissions end an attempt; two attempts that fail on the model's
own decisions end the job. Everything runs through real ``cm`` processes against the loopback fake
model, whose request log (and the disclosure ledger) proves what each job cost.
"""

from __future__ import annotations

import json
import os

from agent_support import configure_remote, make_agent, policy, read_doc, run_once
from conftest import hook_env, run_cm
from tui_support import drive, flat, temp_hosts, wait_for
from writer_support import admit, rows

from cmrunner.agentrt import agent
from cmrunner.manage import adjust, setupstate
from cmrunner.synthetic import fakemodel
from cmrunner.tui.app import CmApp
from cmrunner.tui.memory import job_line, problem_lines
from cmrunner.writer_proc import jobs

POLICIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support", "rejecting_policy.py")
TOKEN = "Zq8vN3xK7pLw2Rt9Ym4Hb6Jd1Fs5Gc0Ae"  # what secret_then_prose writes (support/rejecting_policy.py)
TEXT = "I prefer tabs over spaces in Go."
# A one-observation job: one request, the task, answered by the read that returns everything (issue 35).
READS = 1


def _flush(home: str) -> tuple[int, str]:
    proc = run_cm(["flush"], env=hook_env(COMMON_MEMORY_HOME=home), timeout=120)
    return proc.returncode, (proc.stdout + proc.stderr).decode()


def _status(home: str) -> tuple[dict, str]:
    env = hook_env(COMMON_MEMORY_HOME=home)
    report = json.loads(run_cm(["status", "--json"], env=env).stdout)
    return report, run_cm(["status"], env=env).stdout.decode()


def test_a_rejected_secret_then_no_submission_names_the_rule_the_section_and_the_remedy(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), policy(f"{POLICIES}:secret_then_prose")) as fm:
        paths, _ = configure_remote(home, fm.base_url)
        admit(paths, TEXT, "e1")
        code, printed = _flush(home)
        requests = fm.model_requests()
    report, text = _status(home)
    [group] = report["problems"]["dead"]
    rejection = group["rejection"]
    fingerprint = rejection["fingerprint"]
    assert (group["code"], group["failure"]) == ("SENSITIVE_CONTENT_REJECTED", "MISSING_SUBMISSION")
    assert {k: rejection[k] for k in ("code", "rule", "target", "section", "tool")} == {
        "code": "SENSITIVE_CONTENT_REJECTED", "rule": "secret.high_entropy", "target": "preferences",
        "section": "Note", "tool": "submit_memory_decision"}
    assert len(fingerprint) == 16 and int(fingerprint, 16) >= 0
    cause = ("SENSITIVE_CONTENT_REJECTED (rule secret.high_entropy on preferences/Note), then MISSING_SUBMISSION")
    job_id = group["jobIds"][0]
    assert group["cause"] == cause
    assert group["remedy"] == f"if the value is not a secret, run `cm secrets allow {fingerprint}`, then `cm retry {job_id}`"
    [job] = report["jobList"]["jobs"]
    assert (job["state"], job["issue"], job["cause"], job["attempts"]) == ("dead", group["code"], cause, 2)
    # One cause everywhere: cm flush, cm status, the drain log and the terminal UI's processing status.
    assert code == 1 and f"job {job_id}: dead ({cause})" in printed
    assert f"dead:        1 job(s) × {cause} (1 observation(s))" in text and group["remedy"] in text
    log = open(paths.drain_log, encoding="utf-8").read()
    assert f"job {job_id} dead ({cause})" in log
    view = adjust.overview(home)
    assert cause in job_line(view.jobs[0]) and any(cause in line for line in problem_lines(view))
    assert any(group["remedy"] in line for line in problem_lines(view))
    setupstate.finish(home)

    async def steps(pilot):  # the real Processing Status screen shows the same cause and remedy
        await wait_for(pilot, "cm · Common Memory")
        menu = pilot.app.screen.query_one("#column-1")
        menu.focus()
        menu.highlighted = 2
        await pilot.press("enter")
        text = await wait_for(pilot, "failed (Enter to retry)")
        assert flat(f"Failed 1 job(s) × {cause}") in text and flat(group["remedy"]) in text
        await pilot.press("escape", "escape")

    drive(CmApp(home, discover=temp_hosts(str(tmp_path))), steps)
    # Two attempts, each: the reads, the refused submission, the prose and the prose after the nudge.
    assert len(requests) == 2 * (READS + 3)
    for where in (printed, text, log, json.dumps(report), open(paths.db, "rb").read().decode("latin-1")):
        assert TOKEN not in where, "the refused value is never recorded or shown"


def test_the_named_remedy_works_allow_the_fingerprint_then_retry(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), policy(f"{POLICIES}:secret_then_prose")) as fm:
        paths, _ = configure_remote(home, fm.base_url)
        admit(paths, TEXT, "e1")
        _flush(home)
        [group] = _status(home)[0]["problems"]["dead"]
        env = hook_env(COMMON_MEMORY_HOME=home)
        assert run_cm(["secrets", "allow", group["rejection"]["fingerprint"]], env=env).returncode == 0
        assert run_cm(["retry", group["jobIds"][0]], env=env).returncode == 0
        code, printed = _flush(home)
    assert code == 0, printed
    assert TOKEN in read_doc(paths, "preferences"), "the value the user marked as not a secret is kept"
    assert rows(paths, "SELECT state, issue FROM jobs") == [("done", None)]


def test_a_model_that_always_submits_invalid_decisions_costs_a_bounded_number_of_requests(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), policy(f"{POLICIES}:always_invalid")) as fm:
        paths, _ = configure_remote(home, fm.base_url)
        admit(paths, TEXT, "e1")
        code, printed = _flush(home)
        requests = fm.model_requests()
    bound = jobs.MAX_MODEL_FAILURES * (READS + agent.MAX_REJECTED_SUBMISSIONS)
    assert bound == 8, "the bound docs/benchmarks.md and the architecture document state (10 before issue 35)"
    assert len(requests) == bound, "the fake model's log: every request of every attempt"
    assert rows(paths, "SELECT COUNT(*) FROM ledger WHERE process = 'memory_agent'") == [(bound,)]
    assert [r["cue"] for r in requests].count("submit_memory_decision") == 2 * agent.MAX_REJECTED_SUBMISSIONS
    assert rows(paths, "SELECT state, issue, failure, attempts, model_failures FROM jobs") == [
        ("dead", "INVALID_REQUEST_REFERENCE", "INVALID_REQUEST_REFERENCE", 2, 2)]
    cause = "INVALID_REQUEST_REFERENCE (at $.request_id: does not name this job)"
    assert code == 1 and f"dead ({cause})" in printed
    [group] = _status(home)[0]["problems"]["dead"]
    assert group["cause"] == cause
    assert group["remedy"].startswith("the model kept making this mistake: try another model (remote.model")


def test_three_rejected_submissions_end_the_attempt_with_the_rejections_code(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), policy(f"{POLICIES}:always_invalid")) as fm:
        paths, cfg = configure_remote(home, fm.base_url)
        admit(paths, TEXT, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
        requests = fm.model_requests()
    assert (outcome.state, outcome.code) == ("retry", "INVALID_REQUEST_REFERENCE")
    assert len(requests) == READS + agent.MAX_REJECTED_SUBMISSIONS
    state, issue, diagnostic, rejection = rows(paths, "SELECT state, issue, diagnostic, rejection FROM jobs")[0]
    assert json.loads(diagnostic) == {"stage": "core_validation", "reason": "core_rejected", "retryable": True}
    assert json.loads(rejection) == {"code": "INVALID_REQUEST_REFERENCE", "path": "$.request_id",
                                     "rule": "does not name this job", "tool": "submit_memory_decision"}


def test_a_model_that_corrects_itself_on_its_third_submission_still_commits(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), policy(f"{POLICIES}:invalid_twice_then_remember")) as fm:
        paths, cfg = configure_remote(home, fm.base_url)
        admit(paths, TEXT, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
    assert outcome.state == "ignored" and rows(paths, "SELECT state, failure FROM jobs") == [("done", None)]
