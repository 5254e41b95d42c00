"""The memory_maintenance_v2 decision contract: accepted shapes, the strict schema, every rejection code."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cmrunner.core.errors import CmError
from cmrunner.writer_proc.contract import (
    DecisionContext,
    DecisionRejected,
    EditMaintenanceDecision,
    EvidenceSource,
    ForgetDecision,
    IgnoreDecision,
    MaintainDecision,
    PutSection,
    RemoveSection,
    RetainDecision,
    SectionLinks,
    decision_json_schema,
    evidence_handle,
    validate_decision,
)

JOB = "job-7"
SECRET = "SENTINEL-sk-live-5ecret"
USER = "user_explicit"


def make_ctx(**over: Any) -> DecisionContext:
    base: dict[str, Any] = dict(
        job_id=JOB,
        batch_scope="global",
        evidence={"ev_1": EvidenceSource("global", USER), "ev_2": EvidenceSource("global", USER)},
        writable_scopes=frozenset({"global"}),
        snapshot={"profile": {"s1": "Background"}, "preferences": {"s1": "Editors", "s2": "Languages"}},
        fully_read_targets=frozenset({"profile", "preferences"}),
        ingest_fully_read=True,
    )
    base.update(over)
    return DecisionContext(**base)


def project_ctx(**over: Any) -> DecisionContext:
    base: dict[str, Any] = dict(
        batch_scope="project:alpha",
        evidence={"ev_5": EvidenceSource("project:alpha", USER)},
        writable_scopes=frozenset({"global", "project:alpha", "project:beta"}),
        snapshot={"preferences": {"s1": "Editors"}, "project:alpha": {"s1": "Build"}, "project:beta": {"s1": "Build"}},
        fully_read_targets=frozenset({"preferences", "project:alpha", "project:beta"}),
    )
    base.update(over)
    return make_ctx(**base)


def import_ctx(**over: Any) -> DecisionContext:
    base: dict[str, Any] = dict(
        evidence={"ev_9": EvidenceSource("global", "agent_observation")},
        section_links={"preferences": {"Editors": SectionLinks(linked=2, imports=2),
                                       "Languages": SectionLinks(linked=2, imports=1)}},
    )
    base.update(over)
    return make_ctx(**base)


def put(target: str = "preferences", section: str | None = None, title: str = "Tabs",
        body: str = "Prefers tabs.\n") -> dict[str, Any]:
    return {"op": "put_section", "target": target, "section": section, "title": title, "body": body}


def remove(target: str = "preferences", section: str = "s2") -> dict[str, Any]:
    return {"op": "remove_section", "target": target, "section": section}


def decision(kind: str = "retain", applicability: str = "global", evidence: list[str] | None = None,
             operations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": kind, "applicability": applicability, "confidence": 0.9,
                         "evidence": ["ev_1"] if evidence is None else evidence, "reason": "stated twice"}
    if kind == "retain":
        d.update(admission="remember", lifetime="stable")
    if kind != "ignore":
        d["operations"] = [put()] if operations is None else operations
    return d


def submission(*decisions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"version": "memory_maintenance_v2", "request_id": JOB, "decisions": list(decisions), **extra}


def rejected(payload: object, ctx: DecisionContext) -> DecisionRejected:
    with pytest.raises(DecisionRejected) as info:
        validate_decision(payload, ctx)
    return info.value


# ---------------------------------------------------------------- accepted shapes


def test_accepts_all_four_kinds_in_one_submission() -> None:
    payload = submission(
        decision("retain", operations=[put(title="Indentation")]),
        decision("forget", operations=[remove("preferences", "s2")]),
        decision("maintain", evidence=[], operations=[put("profile", "s1", "Background", "Rewritten.\n")]),
        decision("ignore", applicability="uncertain", evidence=["ev_2"]),
    )
    result = validate_decision(payload, make_ctx())
    kinds = [type(d) for d in result.decision.decisions]
    assert kinds == [RetainDecision, ForgetDecision, MaintainDecision, IgnoreDecision]
    assert isinstance(result.decision.decisions[1].operations[0], RemoveSection)
    assert isinstance(result.decision.decisions[0].operations[0], PutSection)
    assert result.touched_targets == frozenset({"preferences", "profile"})
    assert result.writes and result.edit_result is None
    assert not isinstance(result.decision, EditMaintenanceDecision)


def test_accepts_json_text_and_ignore_only_submission() -> None:
    payload = submission(decision("ignore", applicability="uncertain"))
    result = validate_decision(orjson.dumps(payload).decode(), make_ctx())
    assert not result.writes and result.touched_targets == frozenset()
    assert validate_decision(orjson.dumps(payload), make_ctx()).decision == result.decision


@pytest.mark.parametrize("edit_result,kind", [("modified", "retain"), ("already_satisfied", "ignore"),
                                              ("clarification_required", "ignore"), ("refused", "ignore")])
def test_edit_task_accepts_consistent_edit_results(edit_result: str, kind: str) -> None:
    ctx = make_ctx(edit_task=True, edit_scope="global")
    result = validate_decision(submission(decision(kind), edit_result=edit_result), ctx)
    assert isinstance(result.decision, EditMaintenanceDecision)
    assert result.edit_result == edit_result and result.writes == (kind != "ignore")


def test_project_batch_writes_its_project_and_promotes_only_through_current_evidence() -> None:
    payload = submission(
        decision("retain", "project", ["ev_5"], [put("project:alpha", "s1", "Build", "Uses make.\n")]),
        decision("retain", "global", ["ev_5"], [put("preferences", None, "Shell", "Prefers zsh.\n")]),
        decision("maintain", "global", [], [put("preferences", "s1", "Editors", "Tidied.\n")]),
    )
    assert validate_decision(payload, project_ctx()).touched_targets == {"project:alpha", "preferences"}


def test_moves_and_title_swaps_are_not_duplicates() -> None:
    move = submission(decision("maintain", operations=[remove("preferences", "s1"), put(title="Editors")]))
    swap = submission(decision("maintain", operations=[put(section="s1", title="Languages"),
                                                       put(section="s2", title="Editors")]))
    validate_decision(move, make_ctx())
    validate_decision(swap, make_ctx())


def test_evidence_handle_format() -> None:
    assert evidence_handle(42) == "ev_42"


# ---------------------------------------------------------------- the strict schema

PORTABLE_KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "anyOf", "enum", "description"}


def walk(node: Any, path: str = "$") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, sub in node.get("properties", {}).items():
            found += walk(sub, f"{path}.{key}")
        if "items" in node:
            found += walk(node["items"], f"{path}[]")
        for k, sub in enumerate(node.get("anyOf", [])):
            found += walk(sub, f"{path}|{k}")
    return found


@pytest.mark.parametrize("edit_task", [False, True])
def test_schema_uses_only_the_strict_mode_subset(edit_task: bool) -> None:
    nodes = walk(decision_json_schema(edit_task))
    assert len(nodes) > 20
    objects = 0
    for path, node in nodes:
        assert set(node) <= PORTABLE_KEYWORDS, path
        if "enum" in node:
            assert node["type"] == "string", path
        if node.get("type") == "object" or "properties" in node:
            objects += 1
            assert node["type"] == "object" and node["additionalProperties"] is False, path
            assert node["required"] == list(node["properties"]), path
        assert "type" in node or "anyOf" in node, path
    assert objects == 3  # root, one decision shape, one operation shape
    assert "$defs" not in orjson.dumps(decision_json_schema(edit_task)).decode()


def test_schema_variants_differ_only_in_edit_result() -> None:
    plain, edit = decision_json_schema(False), decision_json_schema(True)
    assert "edit_result" not in plain["properties"] and edit["required"][-1] == "edit_result"
    assert edit["properties"]["edit_result"]["enum"] == ["modified", "already_satisfied",
                                                         "clarification_required", "refused"]
    del edit["properties"]["edit_result"], edit["required"][-1]
    assert edit == plain


def _nullable(node: dict[str, Any]) -> bool:
    return "null" in (node.get("type") or []) or {"type": "null"} in node.get("anyOf", [])


def test_schema_shape_lists_every_model_field_and_nulls_exactly_those_some_kinds_lack() -> None:
    schema = decision_json_schema(True)
    assert set(schema["properties"]) == set(EditMaintenanceDecision.model_fields)
    shape = schema["properties"]["decisions"]["items"]
    kinds = [RetainDecision, ForgetDecision, MaintainDecision, IgnoreDecision]
    every = set.intersection(*(set(m.model_fields) for m in kinds))
    assert set(shape["properties"]) == set.union(*(set(m.model_fields) for m in kinds))
    assert {k for k, v in shape["properties"].items() if _nullable(v)} == set(shape["properties"]) - every
    op = shape["properties"]["operations"]["items"]
    assert set(op["properties"]) == set(PutSection.model_fields) | set(RemoveSection.model_fields)
    # ``section`` is nullable in put_section itself (null appends); title and body are put_section's only
    assert {k for k, v in op["properties"].items() if _nullable(v)} == {"section", "title", "body"}


def objects_in(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        return [node] + [o for v in node.values() for o in objects_in(v)]
    if isinstance(node, list):
        return [o for v in node for o in objects_in(v)]
    return []


def full(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` in the schema's one shape: every field a kind or an operation does not use is null."""
    payload = copy.deepcopy(payload)
    for d in payload["decisions"]:
        for key in ("admission", "lifetime", "operations"):
            d.setdefault(key, None)
        for op in d["operations"] or []:
            op.setdefault("title", None)
            op.setdefault("body", None)
    return payload


UNUSED = {("ignore", "admission"), ("ignore", "lifetime"), ("ignore", "operations"), ("forget", "admission"),
          ("forget", "lifetime"), ("remove_section", "title"), ("remove_section", "body")}


@pytest.mark.parametrize("edit_task", [False, True])
def test_schema_and_models_agree_on_every_missing_or_extra_key(edit_task: bool) -> None:
    schema = jsonschema.Draft202012Validator(decision_json_schema(edit_task))
    extra = {"edit_result": "modified"} if edit_task else {}
    ctx = make_ctx(edit_task=edit_task, edit_scope="global" if edit_task else None)
    valid = full(submission(decision("retain"), decision("forget", operations=[remove()]),
                            decision("ignore"), **extra))
    assert schema.is_valid(valid)
    validate_decision(valid, ctx)
    count = 0
    for k in range(len(objects_in(valid))):
        for key in list(objects_in(valid)[k]):
            broken = copy.deepcopy(valid)
            owner = objects_in(broken)[k]
            unused = (owner.get("kind") or owner.get("op"), key) in UNUSED
            del owner[key]
            assert not schema.is_valid(broken)
            if unused:  # the models' own shape, without the field the kind does not have: accepted too
                validate_decision(broken, ctx)
            else:
                assert rejected(broken, ctx).code == "INVALID_DECISION"
            count += 1
        broken = copy.deepcopy(valid)
        objects_in(broken)[k]["surplus"] = 1
        assert not schema.is_valid(broken)
        assert rejected(broken, ctx).code == "INVALID_DECISION"
    assert count > 20


@pytest.mark.parametrize("kind,field,value", [
    ("ignore", "operations", [put()]), ("ignore", "admission", "remember"), ("forget", "lifetime", "stable"),
    ("retain", "admission", None), ("retain", "lifetime", None), ("retain", "operations", None),
    ("maintain", "operations", None),
])
def test_a_field_the_kind_lacks_must_be_null_and_one_it_needs_must_not(kind: str, field: str, value: Any) -> None:
    payload = full(submission(decision(kind, operations=[remove()] if kind == "forget" else None)))
    payload["decisions"][0][field] = value
    error = rejected(payload, make_ctx())
    assert (error.code, error.details["path"]) == ("INVALID_DECISION", f"$.decisions[0].{field}")


@pytest.mark.parametrize("field", ["title", "body"])
def test_remove_section_takes_no_title_or_body(field: str) -> None:
    payload = full(submission(decision("forget", operations=[remove()])))
    payload["decisions"][0]["operations"][0][field] = "text"
    assert rejected(payload, make_ctx()).code == "INVALID_DECISION"
    payload["decisions"][0]["operations"][0] = {**put(), "section": "s2", field: None}
    payload["decisions"][0]["kind"] = "maintain"
    assert rejected(payload, make_ctx()).code == "INVALID_DECISION"  # put_section needs both


# ---------------------------------------------------------------- INVALID_DECISION

TOO_MANY_OPS = [put(title=f"T{i}") for i in range(33)]


@pytest.mark.parametrize("payload,path,rule", [
    ({**submission(decision()), "version": "memory_maintenance_v1"}, "$.version", "must be 'memory_maintenance_v2'"),
    ({k: v for k, v in submission(decision()).items() if k != "version"}, "$.version", "is required"),
    (submission(), "$.decisions", "must have at least 1 item"),
    (submission(*[decision("ignore")] * 65), "$.decisions", "must have at most 64 items"),
    (submission({**decision(), "kind": "promote"}), "$.decisions[0].kind",
     "must be one of retain, forget, maintain, ignore"),
    (submission({k: v for k, v in decision().items() if k != "kind"}), "$.decisions[0].kind", "is required"),
    (submission({**decision("ignore"), "operations": [put()]}), "$.decisions[0].operations",
     "is not allowed (no additional properties)"),
    (submission({k: v for k, v in decision().items() if k != "admission"}), "$.decisions[0].admission",
     "is required"),
    (submission({**decision(), "confidence": 1.5}), "$.decisions[0].confidence", "must be between 0 and 1"),
    (submission({**decision(), "confidence": True}), "$.decisions[0].confidence", "must be a number"),
    (submission({**decision(), "confidence": "0.5"}), "$.decisions[0].confidence", "must be a number"),
    (submission(decision(evidence=["ev_1"] * 129)), "$.decisions[0].evidence", "must have at most 128 items"),
    (submission(decision(evidence=["ev_1", 7])), "$.decisions[0].evidence[1]", "must be a string"),
    (submission({**decision(), "reason": "x" * 4001}), "$.decisions[0].reason", "must be at most 4000 characters"),
    (submission(decision(operations=[])), "$.decisions[0].operations", "must have at least 1 item"),
    (submission(decision(operations=TOO_MANY_OPS)), "$.decisions[0].operations", "must have at most 32 items"),
    (submission(decision(operations=[{**put(), "op": "rename"}])), "$.decisions[0].operations[0].op",
     "must be one of put_section, remove_section"),
    (submission(decision(operations=[{**remove(), "section": None}])), "$.decisions[0].operations[0].section",
     "must be a string"),
    (submission(decision(operations=[{k: v for k, v in put().items() if k != "body"}])),
     "$.decisions[0].operations[0].body", "is required"),
    (submission(decision(operations=["put_section"])), "$.decisions[0].operations[0]", "must be an object"),
    ([submission(decision())], "$", "must be an object"),
    ("{\"version\": ", "$", "is not valid JSON"),
    ({**submission(decision()), "edit_result": "modified"}, "$.edit_result",
     "is not allowed (no additional properties)"),
])
def test_schema_failures_name_path_and_rule(payload: object, path: str, rule: str) -> None:
    err = rejected(payload, make_ctx())
    assert err.code == "INVALID_DECISION"
    assert err.details == {"path": path, "rule": rule}
    assert err.message.startswith(f"{path} {rule}; ")
    assert isinstance(err, CmError) and err.line().startswith("cm: INVALID_DECISION: ")


def test_edit_task_requires_edit_result() -> None:
    err = rejected(submission(decision()), make_ctx(edit_task=True, edit_scope="global"))
    assert (err.code, err.details["path"]) == ("INVALID_DECISION", "$.edit_result")


@pytest.mark.parametrize("payload", [
    {**submission(decision()), SECRET: 1},
    submission({**decision(), "kind": SECRET}),
    submission({**decision(), SECRET: SECRET}),
    submission({**decision(), "confidence": SECRET}),
    submission({**decision(), "lifetime": SECRET}),
    submission(decision(operations=[{**put(), "op": SECRET}])),
    submission(decision(operations=[{**put(), "title": [SECRET]}])),
    {**submission(decision()), "version": SECRET},
    SECRET,
])
def test_schema_messages_never_echo_payload_values(payload: object) -> None:
    err = rejected(payload, make_ctx())
    assert err.code == "INVALID_DECISION"
    assert SECRET not in err.message and SECRET not in str(err.details) and SECRET not in str(err)


def test_semantic_messages_never_echo_payload_values() -> None:
    cases = [submission(decision(evidence=[SECRET])), submission(decision(operations=[put(target=SECRET)])),
             submission(decision(operations=[put(section=SECRET)])), {**submission(decision()), "request_id": SECRET}]
    for payload in cases:
        err = rejected(payload, make_ctx())
        assert err.code != "INVALID_DECISION" and SECRET not in str(err) and SECRET not in str(err.details)


# ---------------------------------------------------------------- semantic codes


def test_request_id_must_name_the_job() -> None:
    err = rejected({**submission(decision()), "request_id": "job-8"}, make_ctx())
    assert (err.code, err.details["path"]) == ("INVALID_REQUEST_REFERENCE", "$.request_id")


def test_ingest_coverage_is_required_even_for_ignore() -> None:
    err = rejected(submission(decision("ignore")), make_ctx(ingest_fully_read=False))
    assert err.code == "INCOMPLETE_INGEST_COVERAGE"


@pytest.mark.parametrize("kind,evidence,index", [
    ("retain", ["ev_1", "ev_3"], 1),      # not in the batch
    ("maintain", ["ev_2", "EV_1"], 1),
    ("ignore", ["context_1"], 0),         # even an ignore cites only current sources
    ("forget", ["ev_01"], 0),
])
def test_evidence_must_be_current_batch_handles(kind: str, evidence: list[str], index: int) -> None:
    ops = [remove()] if kind == "forget" else None
    err = rejected(submission(decision(kind, evidence=evidence, operations=ops)), make_ctx())
    assert (err.code, err.details["path"]) == ("INVALID_EVIDENCE_REFERENCE", f"$.decisions[0].evidence[{index}]")


@pytest.mark.parametrize("kind,edit", [("retain", False), ("forget", False), ("maintain", True), ("retain", True)])
def test_missing_evidence(kind: str, edit: bool) -> None:
    ctx = make_ctx(edit_task=edit, edit_scope="global" if edit else None)
    extra = {"edit_result": "modified"} if edit else {}
    ops = [remove()] if kind == "forget" else None
    err = rejected(submission(decision(kind, evidence=[], operations=ops), **extra), ctx)
    assert (err.code, err.details["path"]) == ("MISSING_EVIDENCE", "$.decisions[0].evidence")


def test_promotion_needs_current_evidence_from_a_project_batch() -> None:
    ctx = project_ctx()
    retain_without = submission(decision("retain", "global", [], [put("preferences")]))
    assert rejected(retain_without, ctx).code == "MISSING_EVIDENCE"
    maintain_context_only = submission(decision("maintain", "global", ["ev_4"], [put("preferences", "s1", "Editors")]))
    assert rejected(maintain_context_only, ctx).code == "INVALID_EVIDENCE_REFERENCE"


@pytest.mark.parametrize("target", ["../x", "project:../x", "memory/profile.md", "Profile", "project:", "",
                                    "project:beta", "preferences\n", "project:" + "a" * 129])
def test_target_must_be_a_snapshot_document(target: str) -> None:
    err = rejected(submission(decision(operations=[put(target=target)])), make_ctx())
    assert (err.code, err.details["path"]) == ("INVALID_TARGET_REFERENCE", "$.decisions[0].operations[0].target")


@pytest.mark.parametrize("op", [put("profile", "s2"), put("preferences", "s9"), remove("profile", "s2"),
                                remove("preferences", "S1")])
def test_section_ref_must_exist_in_that_target(op: dict[str, Any]) -> None:
    err = rejected(submission(decision(operations=[op])), make_ctx())
    assert (err.code, err.details["path"]) == ("INVALID_TARGET_REFERENCE", "$.decisions[0].operations[0].section")


@pytest.mark.parametrize("ctx_name,payload", [
    ("global", submission(decision("retain", "uncertain"))),
    ("global", submission(decision("retain", "project"))),
    ("project", submission(decision("retain", "global", ["ev_5"], [put("project:alpha")]))),
    ("project", submission(decision("retain", "project", ["ev_5"], [put("project:beta")]))),
    ("global_with_project", submission(decision("retain", "project", ["ev_1"], [put("project:alpha")]))),
    ("mixed_evidence", submission(decision("retain", "project", ["ev_5"], [put("project:alpha")]))),
    ("edit_project", {**submission(decision("retain", "global", ["ev_5"], [put("preferences")])),
                      "edit_result": "modified"}),
])
def test_unauthorized_scope(ctx_name: str, payload: dict[str, Any]) -> None:
    contexts = {
        "global": make_ctx(),
        "project": project_ctx(),
        "global_with_project": make_ctx(snapshot={"project:alpha": {}}, writable_scopes=frozenset({"project:alpha"}),
                                        fully_read_targets=frozenset({"project:alpha"})),
        "mixed_evidence": project_ctx(evidence={"ev_5": EvidenceSource("project:alpha", USER),
                                                "ev_6": EvidenceSource("global", USER)}),
        "edit_project": project_ctx(edit_task=True, edit_scope="project:alpha"),
    }
    assert rejected(payload, contexts[ctx_name]).code == "UNAUTHORIZED_SCOPE"


def test_unauthorized_write() -> None:
    ctx = project_ctx(writable_scopes=frozenset({"project:alpha"}))
    payload = submission(decision("retain", "global", ["ev_5"], [put("preferences")]))
    err = rejected(payload, ctx)
    assert (err.code, err.details["path"]) == ("UNAUTHORIZED_WRITE", "$.decisions[0].operations[0].target")


def test_unread_memory_target() -> None:
    ctx = make_ctx(fully_read_targets=frozenset({"profile"}))
    assert rejected(submission(decision()), ctx).code == "UNREAD_MEMORY_TARGET"
    assert validate_decision(submission(decision(operations=[put("profile")])), ctx).writes


@pytest.mark.parametrize("payload,path", [
    (submission(decision(operations=[put(section="s1")]), decision("forget", operations=[remove("preferences", "s1")])),
     "$.decisions[1].operations[0].section"),
    (submission(decision(operations=[put(title="Shell"), put(title="Shell")])), "$.decisions[0].operations[0].title"),
    (submission(decision(operations=[put(title="Languages")])), "$.decisions[0].operations[0].title"),
    (submission(decision(operations=[put(section="s1", title="Languages")])), "$.decisions[0].operations[0].title"),
    # the path names the operation that repeats an existing title, not an earlier one that does not
    (submission(decision(operations=[put(title="Shell"), put(title="Editor"), put(title="Languages")])),
     "$.decisions[0].operations[2].title"),
])
def test_duplicate_section_operation(payload: dict[str, Any], path: str) -> None:
    err = rejected(payload, make_ctx())
    assert (err.code, err.details["path"]) == ("DUPLICATE_SECTION_OPERATION", path)


def test_a_title_a_hand_edit_repeated_may_be_kept_by_the_section_replaced() -> None:
    """Issue 32: two sections of one title (a hand edit) are two refs; replacing one under its own
    title is fine, giving another section (or a new one) that title is not."""
    ctx = make_ctx(snapshot={"profile": {"s1": "Background"}, "preferences": {"s1": "Notes", "s2": "Notes", "s3": "X"}})
    assert validate_decision(submission(decision(operations=[put(section="s2", title="Notes")])), ctx).writes
    for op in (put(section="s3", title="Notes"), put(title="Notes")):
        assert rejected(submission(decision(operations=[op])), ctx).code == "DUPLICATE_SECTION_OPERATION"


def test_a_blocked_document_takes_only_appends_and_needs_no_read() -> None:
    """Issue 32: a document cm cannot parse is not in the snapshot; a decision may append to it (it
    waits for the user's fix), never name a section of it."""
    ctx = make_ctx(snapshot={"preferences": {"s1": "Editors"}}, fully_read_targets=frozenset({"preferences"}),
                   blocked_targets=frozenset({"profile"}))
    assert validate_decision(submission(decision(operations=[put("profile")])), ctx).touched_targets == {"profile"}
    assert rejected(submission(decision(operations=[put("profile", section="s1")])), ctx).code == \
        "INVALID_TARGET_REFERENCE"
    assert rejected(submission(decision(operations=[put("profile")])), make_ctx(
        snapshot={"preferences": {"s1": "Editors"}}, fully_read_targets=frozenset({"preferences"}))).code == \
        "INVALID_TARGET_REFERENCE"


@pytest.mark.parametrize("kind,edit_result", [("retain", "already_satisfied"), ("ignore", "modified"),
                                              ("maintain", "refused")])
def test_invalid_edit_result(kind: str, edit_result: str) -> None:
    ctx = make_ctx(edit_task=True, edit_scope="global")
    err = rejected(submission(decision(kind), edit_result=edit_result), ctx)
    assert (err.code, err.details["path"]) == ("INVALID_EDIT_RESULT", "$.edit_result")


def test_import_evidence_cannot_forget() -> None:
    err = rejected(submission(decision("forget", evidence=["ev_9"], operations=[remove("preferences", "s1")])),
                   import_ctx())
    assert (err.code, err.details["path"]) == ("UNAUTHORIZED_FORGET_EVIDENCE", "$.decisions[0].evidence")


@pytest.mark.parametrize("op,ctx_over", [
    (put("preferences", "s2", "Languages"), {}),                              # links mix user and import
    (put("profile", "s1", "Background"), {}),                                 # no linked sources at all
    (remove("preferences", "s2"), {}),
    (put("preferences", "s1", "Editors"), {"hand_edited_targets": frozenset({"preferences"})}),
])
def test_import_evidence_cannot_overwrite_user_sections(op: dict[str, Any], ctx_over: dict[str, Any]) -> None:
    payload = submission(decision("retain", evidence=["ev_9"], operations=[op]))
    err = rejected(payload, import_ctx(**ctx_over))
    assert (err.code, err.details["path"]) == ("UNAUTHORIZED_IMPORT_OVERWRITE", "$.decisions[0].operations[0].section")


def test_an_append_first_does_not_let_a_later_operation_overwrite_a_user_section() -> None:
    """The guard checks every operation of an import-backed decision: an append ahead of an
    overwrite is skipped, not the end of the check."""
    payload = submission(decision("retain", evidence=["ev_9"],
                                  operations=[put(), put("preferences", "s2", "Languages")]))
    err = rejected(payload, import_ctx())
    assert (err.code, err.details["path"]) == ("UNAUTHORIZED_IMPORT_OVERWRITE", "$.decisions[0].operations[1].section")


def test_import_guard_allows_appends_and_import_owned_sections_and_fails_atomically() -> None:
    ctx = import_ctx()
    fine = submission(decision("retain", evidence=["ev_9"], operations=[put(), put("preferences", "s1", "Editors")]))
    assert validate_decision(fine, ctx).writes
    mixed = submission(decision("retain", evidence=["ev_9"], operations=[put()]),
                       decision("maintain", evidence=[], operations=[put("profile", "s1", "Background")]))
    assert rejected(mixed, ctx).details["path"] == "$.decisions[1].operations[0].section"


def test_a_project_write_is_judged_by_the_batch_scope_alone() -> None:
    """A project target must be the batch's own project, also when no current source stands
    behind the job, and whatever string object carries the scope (it comes from SQLite)."""
    no_sources = project_ctx(evidence={})
    assert rejected(submission(decision("maintain", "project", [], [put("project:beta")])), no_sources).code == \
        "UNAUTHORIZED_SCOPE"
    built = project_ctx(batch_scope="".join(["project:", "alpha"]))
    assert validate_decision(submission(decision("retain", "project", ["ev_5"], [put("project:alpha")])), built).writes


def test_a_user_decision_first_does_not_end_the_import_guard() -> None:
    """The import guard checks each decision: one citing a user turn is skipped, not the end."""
    ctx = import_ctx(evidence={"ev_9": EvidenceSource("global", "agent_observation"),
                               "ev_1": EvidenceSource("global", USER)})
    payload = submission(decision("retain", evidence=["ev_1"], operations=[put("profile", "s1", "Background")]),
                         decision("retain", evidence=["ev_9"], operations=[put("preferences", "s2", "Languages")]))
    err = rejected(payload, ctx)
    assert (err.code, err.details["path"]) == ("UNAUTHORIZED_IMPORT_OVERWRITE", "$.decisions[1].operations[0].section")


def test_import_guard_skips_decisions_citing_user_sources() -> None:
    ctx = import_ctx(evidence={"ev_9": EvidenceSource("global", "document_import"),
                               "ev_1": EvidenceSource("global", USER)})
    payload = submission(decision("forget", evidence=["ev_9", "ev_1"], operations=[remove("preferences", "s2")]),
                         decision("maintain", evidence=[], operations=[put("profile", "s1", "Background")]))
    assert validate_decision(payload, ctx).writes
    only_import = submission(decision("forget", evidence=["ev_9"], operations=[remove("preferences", "s2")]))
    assert rejected(only_import, ctx).code == "UNAUTHORIZED_FORGET_EVIDENCE"


UNSAFE = [("\x00", "NUL"), ("\x1b[31m", "C0 control"), ("\x07", "C0 control"), ("\r", "carriage return"),
          ("\r\n", "carriage return"), ("\x7f", "DEL"), ("\x9b", "C1 control"),
          ("\u202e", "bidirectional control"), ("\u202a", "bidirectional control"),
          ("\u2066", "bidirectional control"), ("\u2069", "bidirectional control"),
          ("\u2028", "line or paragraph separator"), ("\u2029", "line or paragraph separator"),
          ("\ud800", "surrogate")]


@pytest.mark.parametrize(("chars", "cls"), UNSAFE)
@pytest.mark.parametrize("field", ["title", "body"])
def test_unsafe_characters_in_titles_and_bodies_are_rejected(chars: str, cls: str, field: str) -> None:
    text = {"title": f"Colour{chars}{SECRET}", "body": f"red{chars}{SECRET}\n"}[field]
    payload = submission(decision(operations=[put(title="Fine"), put(**{field: text})]))
    err = rejected(payload, make_ctx())
    assert err.code == "UNSAFE_CHARACTER"
    assert err.details == {"path": f"$.decisions[0].operations[1].{field}", "rule": f"contains a {cls} character"}
    assert SECRET not in str(err) and chars not in err.message


def test_unsafe_characters_are_checked_in_replacements_too() -> None:
    payload = submission(decision("maintain", evidence=[], operations=[put("profile", "s1", "Background", "x\x1b\n")]))
    assert rejected(payload, make_ctx()).code == "UNSAFE_CHARACTER"


def test_tabs_newlines_marks_and_joiners_are_ordinary_text() -> None:
    body = "a\tb\nשלום\u200f!\n\u061cعربي \u200e(x)\n\U0001f469\u200d\U0001f4bb \u200b\n"
    result = validate_decision(submission(decision(operations=[put(body=body)])), make_ctx())
    assert result.decision.decisions[0].operations[0].body == body


def test_first_failure_wins() -> None:
    payload = submission(decision(operations=[put(target="../x")]), decision(evidence=["ev_404"]))
    assert rejected(payload, make_ctx()).code == "INVALID_TARGET_REFERENCE"
    payload = submission(decision(evidence=["ev_404"]), decision(operations=[put(target="../x")]))
    assert rejected(payload, make_ctx()).code == "INVALID_EVIDENCE_REFERENCE"


def test_context_rejects_inconsistent_edit_settings() -> None:
    with pytest.raises(ValueError):
        make_ctx(edit_task=True)
    with pytest.raises(ValueError):
        make_ctx(edit_scope="global")
    with pytest.raises(ValueError):
        make_ctx(snapshot={"../x": {}})
    with pytest.raises(ValueError):
        EvidenceSource("global", "conversation_context")
    assert EvidenceSource("global", "document_import", "personal").import_kind == "personal"
    for provenance in (USER, "agent_observation"):  # only a document import has a kind
        with pytest.raises(ValueError):
            EvidenceSource("global", provenance, "personal")


# ---------------------------------------------------------------- garbage never escapes as another error

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5)
    | st.dictionaries(st.sampled_from(sorted(set(submission(decision())) | set(decision()) | set(put())))
                      | st.text(max_size=8), inner, max_size=6),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSONISH | st.text(max_size=40) | st.binary(max_size=40))
def test_garbage_is_always_an_invalid_decision(payload: object) -> None:
    err = rejected(payload, make_ctx())
    assert err.code == "INVALID_DECISION" and err.details["path"].startswith("$")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_submissions_only_ever_raise_decision_rejected(data: st.DataObject) -> None:
    payload = submission(decision("retain"), decision("forget", operations=[remove()]), decision("ignore"))
    nodes = objects_in(payload)
    node = data.draw(st.sampled_from(nodes))
    key = data.draw(st.sampled_from(sorted(node)))
    node[key] = data.draw(JSONISH)
    try:
        validate_decision(payload, make_ctx())
    except DecisionRejected as err:
        assert err.code.isupper() and err.details["path"].startswith("$")
