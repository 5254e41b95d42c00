"""Every code that can be recorded on a quarantined observation, a dead or waiting job, an isolated
session or a drain failure has a reason and a remedy in ``cmrunner.core.reasons``; the release policy
refuses what must never go back to the model."""

from __future__ import annotations

import ast
import os
import re

import cmrunner
from cmrunner.capture import codex_consumer, hook_consumer, pi_inbox
from cmrunner.core import drainfailures, poison, reasons
from cmrunner.hooks import runner
from cmrunner.sync import git as synced_git
from cmrunner.writer_proc import drain, jobs

PACKAGE = os.path.dirname(cmrunner.__file__)
CODE = re.compile(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*")
MULTI_WORD = re.compile(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+")

# Modules whose codes reach ``observations.issue``, ``jobs.issue`` or ``codex_failures.issue``:
# admission and sessions (quarantine before the Writer), the Writer and everything it runs during
# an attempt (any ``CmError`` there becomes the job's outcome), and the inbox consumers and the
# transcript reader (session isolation).
SOURCES = [
    *(f"capture/{name}" for name in ("observations.py", "sessions.py", "codex_consumer.py", "pi_inbox.py", "rollout.py",
                                          "hook_consumer.py", "gemini_chat.py")),
    "secrets/safety.py",
    *(f"core/{name}" for name in ("sections.py", "fsutil.py", "db.py", "store.py", "gate.py",
                                   "migrations.py", "config.py", "configmodel.py", "envfile.py", "projects.py")),
    "capture/transcript.py",
    *(f"writer_proc/{name}" for name in (
        "writer.py", "shaping.py", "jobs.py", "tools.py", "reads.py", "contract.py",
        "apply.py", "commit.py", "publish.py", "receipts.py", "port.py")),
    *(f"agentrt/{name}" for name in ("agent.py", "wire.py", "errors_map.py", "netclient.py", "noproxy.py")),
    "sync/engine.py", "sync/merge.py",
    "writer_proc/usercommit.py",  # a sync publishes through it: its DRAIN_BUSY is recorded for `cm status`
]

# Constants in those modules that look like codes but are never recorded as an outcome: names of
# environment variables and os attributes, and answers of commands that run in the user's
# terminal (they are printed there, never stored).
NOT_RECORDED = {
    "COMMON_MEMORY_CA_FILE", "COMMON_MEMORY_HOME", "COMMON_MEMORY_PROXY_URL", "NO_PROXY", "O_NOFOLLOW", "O_CLOEXEC",
    "UNKNOWN_JOB", "JOB_NOT_RETRYABLE", "JOB_ID_TOO_SHORT", "AMBIGUOUS_JOB_ID",
    "PROJECT_ALREADY_REGISTERED", "PROJECT_PATH_NOT_FOUND", "INVALID_PROJECT_NAME", "UNKNOWN_PROJECT",
    "SUBMISSION_CONFLICT", "INVALID_TASK_KIND", "CODEX_RECOVERY_UNAVAILABLE",
    "CONFIG_MISSING", "CONFIG_BACKUP_FAILED",  # cm config init --force, in the terminal
    "CONFIG_KEY_UNKNOWN",  # cm config get/set, in the terminal
    "DATA_ROOT_NOT_PRIVATE",  # fsutil.data_root_problem: what cm status and cm doctor print, never stored
    # A lost lease is never recorded: the job belongs to whoever holds it now (writer.py).
    "STALE_LEASE",
    # git's own files of a merge or rebase started by hand (sync/engine.py looks for them).
    "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD",
}

# Single-word codes are found where they are raised (``failure("TIMEOUT", ...)``, ``CmError("X", ...)``).
RAISERS = re.compile(r"(failure|fail|quarantine|_quarantine_turn|_set_outcome|isolate|\w*Error)$")


def _module_path(relative: str) -> str:
    for candidate in (os.path.join(PACKAGE, relative), os.path.join(PACKAGE, relative.replace("writer_proc/", ""))):
        if os.path.isfile(candidate):
            return candidate
    raise AssertionError(f"{relative} is not in the installed package")


def _codes_in(path: str) -> set[str]:
    tree = ast.parse(open(path, encoding="utf-8").read())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and MULTI_WORD.fullmatch(node.value):
            found.add(node.value)
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if RAISERS.search(name):
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and CODE.fullmatch(arg.value) \
                            and len(arg.value) > 3:
                        found.add(arg.value)
    return found


def recordable_codes() -> set[str]:
    found: set[str] = set()
    for relative in SOURCES:
        found |= _codes_in(_module_path(relative))
    found |= set(jobs.PERMANENT) | set(jobs.NOT_RETRYABLE) | set(jobs.QUARANTINE)
    found |= set(codex_consumer.ISOLATING) | set(pi_inbox.ISOLATING) | set(hook_consumer.ISOLATING)
    found |= {drainfailures.CRASH_CODE, drain.INTERRUPTED_CODE, poison.UNEXPECTED, runner.INTERNAL_CODE}
    found |= set(synced_git.CODES)  # what a git run of a sync raises (recorded by sync/engine.py:run)
    return found - NOT_RECORDED


def test_every_recordable_code_has_a_reason_and_a_remedy():
    codes = recordable_codes()
    assert {"SENSITIVE_INPUT", "AUTHENTICATION", "TIMEOUT", "INTERRUPTED_TURN", "CODEX_UNSAFE_TRANSCRIPT",
            "RECOVERY_BUDGET_EXHAUSTED", "DRAIN_CRASHED"} <= codes, "the scan really found the codes"
    missing = sorted(codes - set(reasons.TABLE))
    assert missing == [], f"codes without an entry in cmrunner/core/reasons.py: {missing}"
    stale = sorted(set(reasons.TABLE) - codes)
    assert stale == [], f"entries for codes nothing records any more: {stale}"


def test_every_entry_is_one_plain_line_with_a_known_action():
    for code, entry in reasons.TABLE.items():
        assert CODE.fullmatch(code), code
        assert entry.action in (reasons.RELEASE, reasons.RETRY, reasons.AUTO, reasons.RECOVER, reasons.WAIT,
                                reasons.NONE), code
        assert entry.reason and "\n" not in entry.reason + entry.fix, code
        for state in ("quarantined", "dead", "retry", "isolated"):
            line = reasons.remedy(code, state, ["0123456789ab"])
            assert line and "\n" not in line, (code, state)


def test_release_policy_never_frees_secrets_or_unauthorized_material():
    never = ["SENSITIVE_INPUT", "SENSITIVE_CONTENT_REJECTED", "UNAUTHORIZED_SOURCE", "UNAUTHORIZED_PROVENANCE",
             "UNREGISTERED_PROJECT", "UNSUPPORTED_SOURCE", "FORGOTTEN_SOURCE", "MIXED_SESSION_TURN", "EMPTY_BATCH",
             None, "SOMETHING_UNKNOWN"]
    for code in never:
        assert not reasons.releasable(code), code
    for code in ("OVERSIZED_COMPLETE_SOURCE", "INTERRUPTED_TURN", "INCOMPLETE_TURN"):
        assert reasons.releasable(code), code
        assert f"cm release --code {code}" in reasons.remedy(code, "quarantined")


def test_remedies_name_the_real_command():
    assert reasons.remedy("AUTHENTICATION", "dead", ["0123456789ab"]).endswith("then `cm retry 0123456789ab`")
    assert reasons.remedy("TIMEOUT", "dead", ["0123456789ab"]) == "`cm retry 0123456789ab`"
    assert "cm session-drain --recover r1" in reasons.remedy("CODEX_TRANSCRIPT_MISSING", "isolated", ["r1"])
    assert "never" not in reasons.remedy("RATE_LIMITED", "retry") and "backoff" in reasons.remedy("RATE_LIMITED", "retry")
    assert reasons.explain("NOT_A_CODE") is reasons.UNKNOWN


def test_a_jobs_cause_names_its_rejection_only_when_the_rejection_is_the_cause():
    secret = {"code": "SENSITIVE_CONTENT_REJECTED", "rule": "secret.high_entropy", "target": "preferences",
              "section": "Note", "fingerprint": "0123456789abcdef", "path": "$.decisions"}
    assert reasons.cause("SENSITIVE_CONTENT_REJECTED", "MISSING_SUBMISSION", secret) == (
        "SENSITIVE_CONTENT_REJECTED (rule secret.high_entropy on preferences/Note), then MISSING_SUBMISSION")
    # An earlier rejection of an attempt that then timed out is not the cause, and says nothing.
    assert reasons.cause("TIMEOUT", "TIMEOUT", secret) == "TIMEOUT"
    assert reasons.cause("INVALID_DECISION", "INVALID_DECISION",
                         {"code": "INVALID_DECISION", "path": "$.decisions[0].kind", "rule": "is required"}) == (
        "INVALID_DECISION (at $.decisions[0].kind: is required)")
    assert reasons.remedy("SENSITIVE_CONTENT_REJECTED", "dead", ["0123456789ab"], secret) == (
        "if the value is not a secret, run `cm secrets allow 0123456789abcdef`, then `cm retry 0123456789ab`")
    personal = {**secret, "rule": "identity.email"}  # not something the allow-list is for
    assert reasons.remedy("SENSITIVE_CONTENT_REJECTED", "dead", ["0123456789ab"], personal) == "`cm retry 0123456789ab`"


def test_a_dead_job_that_failed_on_the_models_own_decisions_names_another_model():
    for code in ("INVALID_DECISION", "MISSING_SUBMISSION", "UNKNOWN_TOOL"):
        assert reasons.remedy(code, "dead", ["0123456789ab"]) == (
            "the model kept making this mistake: try another model (remote.model in config.json), "
            "then `cm retry 0123456789ab`"), code
        assert reasons.remedy(code, "retry") == "nothing to do: cm tries again after its backoff", code
