"""The kind of an imported memory file reaches the Writer (issue 26, "Kinds, not just text").

Through the real `cm import --from`, its foreground drain, the network Memory Agent and the
loopback fake model (policies in ``support/import_kind_policy.py``): a personal CLAUDE.md whose
instruction to an agent the model files under the Profile is refused with
``IMPORT_INSTRUCTION_IN_PROFILE`` (naming the section, never the text) and the model's resubmission
to the Preferences commits, while the facts reach the Profile; a checked-in project file the model
writes to a global document is refused with ``IMPORT_KIND_WRONG_TARGET`` and lands in the project
only; a model that never corrects leaves the code in the job's recorded cause. Fixtures are
written here, in a temporary HOME.
"""

from __future__ import annotations

import json
import os

import pytest
from agent_support import configure_remote, read_doc
from conftest import hook_env, run_cm
from mcp_support import allow, register, rows

from cmrunner.core import directives, importkinds
from cmrunner.synthetic import fakemodel
from cmrunner.writer_proc.contract import DecisionContext, DecisionRejected, EvidenceSource, validate_decision
from cmrunner.writer_proc.reads import Source

POLICIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support", "import_kind_policy.py")
FACTS = "I am a backend developer in Lisbon; I mostly write Go."
INSTRUCTION = "Always run the tests before you commit."
CLAUDE_MD = f"# About me\n\n{FACTS}\n\n# Working with me\n\n{INSTRUCTION}\n"


def _write(path: str, text: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def _tool_results(body: dict) -> list[dict]:
    return [json.loads(i["output"]) for i in body["input"] if i.get("type") == "function_call_output"]


def _import(home: str, user: str, *extra: str) -> tuple[int, str]:
    proc = run_cm(["import", "--from", *extra, "--yes"], env=hook_env(HOME=user, COMMON_MEMORY_HOME=home), timeout=120)
    return proc.returncode, (proc.stdout + proc.stderr).decode()


def _rejections(requests: list[dict]) -> list[dict]:
    """Every submission rejection the model received, in order (each appears once)."""
    seen: dict[str, dict] = {}
    for request in requests:
        for result in _tool_results(request["body"]):
            if result.get("error") == "MEMORY_TOOL_REJECTED":
                seen[json.dumps(result, sort_keys=True)] = result
    return list(seen.values())


def test_an_instruction_in_a_personal_file_goes_to_preferences_never_the_profile(home, tmp_path):
    user = str(tmp_path / "user")
    _write(os.path.join(user, ".claude", "CLAUDE.md"), CLAUDE_MD)
    with fakemodel.running(str(tmp_path / "fm"), {"policy": f"{POLICIES}:everything_in_profile"}) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        code, out = _import(home, user, "claude")
        requests = fm.model_requests()
    assert code == 0 and out.endswith("complete: true\n"), out
    task = json.loads(next(i["content"] for i in requests[0]["body"]["input"] if i.get("role") == "user"))
    [bundle] = task["bundles"]
    assert (bundle["import_kind"], bundle["may_become"]) == ("personal", ["profile", "preferences"])
    [rejection] = _rejections(requests)
    assert rejection["code"] == "IMPORT_INSTRUCTION_IN_PROFILE"
    assert rejection["schema_errors"] == [{"path": "$.decisions[1].operations[0].body", "rule": "instruction to an agent"}]
    assert "preferences" in rejection["hint"] and INSTRUCTION not in json.dumps(rejection)
    profile, preferences = read_doc(paths, "profile"), read_doc(paths, "preferences")
    assert profile is not None and FACTS in profile and INSTRUCTION not in profile
    assert preferences is not None and "## Working with me" in preferences and INSTRUCTION in preferences
    [(envelope,)] = rows(paths, "SELECT text FROM observations WHERE source = 'document_import'")
    assert json.loads(envelope)[importkinds.ENVELOPE_FIELD] == "personal"
    assert rows(paths, "SELECT state, issue FROM jobs") == [("done", None)]


def test_a_checked_in_project_file_never_writes_a_global_document(home, tmp_path):
    user = str(tmp_path / "user")
    with fakemodel.running(str(tmp_path / "fm"), {"policy": f"{POLICIES}:everything_in_profile"}) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        project = register(paths, str(tmp_path / "repo"), "Repo")
        allow(home, project.scope)
        _write(os.path.join(project.path, "AGENTS.md"), "# Package manager\n\nThe team uses pnpm, never npm.\n")
        code, out = _import(home, user, "project", "--workspace", project.path)
        requests = fm.model_requests()
    assert code == 0 and out.endswith("complete: true\n"), out
    [rejection] = _rejections(requests)
    assert rejection["code"] == "IMPORT_KIND_WRONG_TARGET"
    assert rejection["schema_errors"] == [{"path": "$.decisions[0].operations[0].target",
                                           "rule": "import kind team_convention may not become preferences"}]
    assert read_doc(paths, "preferences") is None and read_doc(paths, "profile") is None
    assert "The team uses pnpm, never npm." in (read_doc(paths, project.scope) or "")


def test_a_model_that_keeps_the_instruction_in_the_profile_leaves_the_code_in_the_jobs_cause(home, tmp_path):
    user = str(tmp_path / "user")
    _write(os.path.join(user, ".claude", "CLAUDE.md"), CLAUDE_MD)
    with fakemodel.running(str(tmp_path / "fm"), {"policy": f"{POLICIES}:stubborn"}) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        code, out = _import(home, user, "claude")
    assert code == 1 and "complete: false" in out, out
    assert read_doc(paths, "profile") is None and read_doc(paths, "preferences") is None
    [(issue, rejection)] = rows(paths, "SELECT issue, rejection FROM jobs")
    assert issue == "IMPORT_INSTRUCTION_IN_PROFILE"
    assert {k: v for k, v in json.loads(rejection).items()} == {
        "tool": "submit_memory_decision", "code": "IMPORT_INSTRUCTION_IN_PROFILE", "rule": "instruction to an agent",
        "path": "$.decisions[1].operations[0].body", "target": "profile", "section": "Working with me"}
    status = run_cm(["status"], env=hook_env(COMMON_MEMORY_HOME=home)).stdout.decode()
    assert "IMPORT_INSTRUCTION_IN_PROFILE (rule instruction to an agent on profile/Working with me)" in status
    assert INSTRUCTION not in status and INSTRUCTION not in rejection


def test_the_plan_says_what_each_file_may_become_and_counts_its_instructions(home, tmp_path):
    user = str(tmp_path / "user")
    _write(os.path.join(user, ".claude", "CLAUDE.md"), CLAUDE_MD)
    configure_remote(home, "http://127.0.0.1:9/v1")
    proc = run_cm(["import", "--from", "claude", "--dry-run"], env=hook_env(HOME=user, COMMON_MEMORY_HOME=home))
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    assert "  claude:CLAUDE.md [personal] -> global: new, 1 part," in out
    assert ("    may become: profile (facts about you, never instructions to an agent), preferences; 1 line read as "
            "instructions to an agent (preferences, never profile)\n") in out


# ---------------------------------------------------------------- the rule itself (writer_proc/contract.py)

def _ctx(kind: str | None, scope: str = "global", known: dict | None = None, user_turn: bool = False) -> DecisionContext:
    evidence = {"ev_9": EvidenceSource(scope, "document_import", kind)}
    if user_turn:
        evidence["ev_1"] = EvidenceSource(scope, "user_explicit")
    targets = ["profile", "preferences"] + ([scope] if scope != "global" else [])
    return DecisionContext(job_id="job-1", batch_scope=scope, evidence=evidence,
                           writable_scopes=frozenset({"global", scope}), snapshot={t: {} for t in targets},
                           fully_read_targets=frozenset(targets), ingest_fully_read=True, known_lines=known or {})


def _submit(target: str, body: str, title: str = "Imported", evidence: list[str] | None = None) -> dict:
    applicability = "global" if target in ("profile", "preferences") else "project"
    return {"version": "memory_maintenance_v2", "request_id": "job-1", "decisions": [
        {"kind": "retain", "applicability": applicability, "confidence": 0.9, "evidence": evidence or ["ev_9"],
         "reason": "r", "admission": "remember", "lifetime": "stable",
         "operations": [{"op": "put_section", "target": target, "section": None, "title": title, "body": body}]}]}


def _code(payload: dict, ctx: DecisionContext) -> str | None:
    try:
        validate_decision(payload, ctx)
    except DecisionRejected as exc:
        return exc.code
    return None


@pytest.mark.parametrize(("kind", "target", "code"), [
    ("personal", "profile", None), ("personal", "preferences", None), ("user_fact", "profile", None),
    ("user_feedback", "preferences", None), ("user_feedback", "profile", "IMPORT_KIND_WRONG_TARGET"),
    (None, "profile", None), (None, "preferences", None),
])
def test_a_global_import_writes_only_where_its_kind_may_go(kind, target, code):
    assert _code(_submit(target, "Works mostly in Go.\n"), _ctx(kind)) == code


@pytest.mark.parametrize("kind", ["project_fact", "reference", "team_convention", "instructions"])
def test_a_project_kind_writes_its_project_and_never_a_global_document(kind):
    ctx = _ctx(kind, "project:alpha")
    assert _code(_submit("project:alpha", "Use pnpm, not npm.\n"), ctx) is None
    for target in ("profile", "preferences"):
        assert _code(_submit(target, "The team ships on Thursdays.\n"), ctx) == "IMPORT_KIND_WRONG_TARGET"


@pytest.mark.parametrize(("kind", "target", "code"), [
    ("user_fact", "project:alpha", None), ("user_fact", "profile", None), ("user_fact", "preferences", None),
    ("user_feedback", "project:alpha", None), ("user_feedback", "preferences", None),
    ("user_feedback", "profile", "IMPORT_KIND_WRONG_TARGET"),
])
def test_a_project_folders_user_memory_may_stay_in_that_project(kind, target, code):
    """Auto memory's ``user`` and ``feedback`` files come from one project's folder (its scope): a
    rule for that project alone ("mock nothing in these tests") must be able to stay in its memory
    rather than be lifted to the global preferences; feedback still never becomes profile."""
    body = "Mock nothing in the integration tests.\n" if kind == "user_feedback" else "Reviews this repo's SQL.\n"
    assert _code(_submit(target, body), _ctx(kind, "project:alpha")) == code


@pytest.mark.parametrize("kind", [None, "personal", "user_fact"])
def test_an_instruction_written_to_the_profile_is_refused_whatever_the_kind(kind):
    err = pytest.raises(DecisionRejected, validate_decision, _submit("profile", "Works in Go.\n- Never use tabs.\n"),
                        _ctx(kind)).value
    assert err.code == "IMPORT_INSTRUCTION_IN_PROFILE"
    assert err.details == {"path": "$.decisions[0].operations[0].body", "rule": "instruction to an agent",
                           "target": "profile", "section": "Imported"}
    assert "tabs" not in err.message
    titled = pytest.raises(DecisionRejected, validate_decision, _submit("profile", "Go.\n", "Always run the tests"),
                           _ctx(kind)).value
    assert titled.details["path"].endswith(".title") and "section" not in titled.details


def test_the_rule_judges_only_new_text_and_only_imports():
    instruction = "Always run the tests before committing."
    already = {"profile": directives.known_lines(f"# Profile\n\n## Habits\n- {instruction}\n")}
    assert _code(_submit("profile", f"{instruction}\nWorks in Go.\n"), _ctx("personal", known=already)) is None
    assert _code(_submit("profile", f"```\n{instruction}\n```\n"), _ctx("personal")) is None
    assert _code(_submit("profile", f"{instruction}\n", evidence=["ev_9", "ev_1"]),
                 _ctx("personal", user_turn=True)) is None, "a user turn stands behind it: not an import's doing"
    assert _code(_submit("profile", f"{instruction}\n"), _ctx("personal")) == "IMPORT_INSTRUCTION_IN_PROFILE"


def test_an_envelope_without_a_kind_still_reads_as_an_unclassified_import():
    old = json.dumps({"kind": "document_import", "importId": "md-x", "sourceLabel": "notes.md",
                      "declaredAuthor": "user", "fileName": "notes.md", "text": "I like Go."})
    source = Source(7, old, "global", "document_import", "document_import", "2026-12-01T00:00:00.000Z")
    assert source.import_kind is None and importkinds.may_become(None) == importkinds.CLASSES
    assert importkinds.of_envelope(old.replace('"declaredAuthor"', '"importKind": "no_such_kind", "declaredAuthor"')) \
        is None
