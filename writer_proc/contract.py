"""The ``memory_maintenance_v2`` decision contract: models, strict JSON Schema and validation.

Contract:
- ``MaintenanceDecision`` / ``EditMaintenanceDecision`` are pydantic v2 models of the submission
  (reference-facts 3.1): ``version``, ``request_id``, 1–64 ``decisions`` discriminated by ``kind``
  (retain / forget / maintain / ignore), and ``edit_result`` only in the edit-task variant, where
  it is required. Section operations are ``put_section`` and ``remove_section``, discriminated by
  ``op``. Every model forbids extra keys and validates in strict mode (no coercion).
- ``decision_json_schema(edit_task)`` is the schema handed to the model: one decision shape and
  one operation shape, where the fields a kind or an operation does not use are null (``admission``
  and ``lifetime`` beside ``retain``, ``operations`` of ``ignore``, ``title`` and ``body`` of
  ``remove_section``). Before the models validate, exactly those nulls are dropped; a value where
  the kind has no such field is still an unexpected property, so the models judge as before and a
  submission in the models' own shape (without the unused fields) is accepted too. It is written for the
  strictest common subset of provider strict modes (OpenAI, DeepSeek beta, Gemini, Anthropic):
  every object lists all its properties in ``required`` and has ``additionalProperties: false``;
  every ``enum`` carries ``"type": "string"``; single values are one-element enums, not ``const``;
  the nullable ``section`` is ``"type": ["string", "null"]``. Definitions are inlined, never
  ``$ref``/``$defs``: DeepSeek's strict mode mishandles ``$ref`` inside ``anyOf`` and older Gemini
  has no references. A nullable enum is ``anyOf`` the enum and ``{"type": "null"}``. Counts, lengths
  and numeric ranges are never schema keywords, because several strict modes reject
  ``minItems``/``maxLength``/``minimum``: the Memory Agent's instructions (``memory_agent.md``)
  state them once and ``validate_decision`` enforces them. The schema travels with every request,
  so it carries no ``description``: the instructions explain each field once.
- ``validate_decision(payload, ctx)`` checks one submission against the job's
  ``DecisionContext`` and raises ``DecisionRejected`` on the first failure; the submission is
  accepted or rejected as a whole. Order: schema (``INVALID_DECISION``) → ``request_id`` →
  ingest coverage → each decision in order (evidence, applicability, then each operation's
  characters, target, section ref, scope, writability, read coverage, duplicate ref) → duplicate titles per
  target → edit result → import guard → import kind rule. Messages and details name JSON paths and rules, never a
  value taken from the payload.
- Promotion (usage "Maintenance"): evidence handles are only the batch's current sources, so
  retain and forget always rest on current evidence and a global ``maintain`` from a project batch
  has ``evidence: []`` or current evidence; context-only turns are never citable.
- A ``put_section`` title or body holding a character of ``cmrunner.core.textchars`` (NUL, C0/C1
  controls other than tab and newline, CR, DEL, bidirectional overrides and isolates, U+2028/2029)
  is ``UNSAFE_CHARACTER``, naming the field and the character's class: such text would reach the
  user's Markdown, every later injection and the user's terminal.
- The import guard (``_guard_imports``): import evidence alone never forgets, removes or replaces
  what a user turn produced. Beside it, the import kind rule (``_guard_import_kinds``): a decision
  that document imports alone stand behind writes only where their kinds may go
  (``IMPORT_KIND_WRONG_TARGET``: a checked-in project file never writes profile or preferences),
  and writes to profile no instruction to an agent (``IMPORT_INSTRUCTION_IN_PROFILE``, judged by
  ``cmrunner.core.directives`` on the titles and body lines it writes, not on lines already in
  profile); the rejection names the document and section, never the text.
- Section refs are opaque strings resolved against the snapshot the agent read; every ref is
  touched at most once per submission, so the Writer can resolve all refs against that snapshot.

Not here (the Writer's job, after applying the operations to Markdown with the section model):
title/body shape and whole-document parsing, the hard byte budget of each rendered document, the
sensitive-content scan of each title and body written (``SENSITIVE_CONTENT_REJECTED``), ``modified`` that changes no bytes
(``INVALID_EDIT_RESULT``), correction watermarks (``STALE_SOURCE``) and the snapshot CAS
(``STALE_REVISION``).

Heavy side only: imports pydantic; never imported on a hook, capture or read path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cmrunner.core import directives, importkinds, scopes, textchars
from cmrunner.core.errors import CmError
from cmrunner.core.scopes import target_scope
from cmrunner.secrets import safety

PROTOCOL_VERSION = "memory_maintenance_v2"
MAX_DECISIONS = 64
MAX_OPERATIONS = 32
MAX_EVIDENCE = 128
MAX_REASON_CHARS = 4000

APPLICABILITY = ("global", "project", "uncertain")
ADMISSION = ("remember", "update", "correct")
LIFETIME = ("stable", "until_changed")
EDIT_RESULTS = ("modified", "already_satisfied", "clarification_required", "refused")
DECISION_KINDS = ("retain", "forget", "maintain", "ignore")
SOURCE_PROVENANCE = ("user_explicit", "agent_observation", "document_import")
IMPORT_PROVENANCE = frozenset({"agent_observation", "document_import"})


def evidence_handle(observation_id: int) -> str:
    """The handle the agent cites for a current-batch observation."""
    return f"ev_{observation_id}"


# ---------------------------------------------------------------- pydantic models


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class PutSection(_Strict):
    op: Literal["put_section"]
    target: str
    section: str | None
    title: str
    body: str


class RemoveSection(_Strict):
    op: Literal["remove_section"]
    target: str
    section: str


SectionOperation = Annotated[PutSection | RemoveSection, Field(discriminator="op")]
Operations = Annotated[list[SectionOperation], Field(min_length=1, max_length=MAX_OPERATIONS)]
Confidence = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Evidence = Annotated[list[str], Field(max_length=MAX_EVIDENCE)]
Reason = Annotated[str, Field(max_length=MAX_REASON_CHARS)]
Applicability = Literal["global", "project", "uncertain"]


class _DecisionBase(_Strict):
    applicability: Applicability
    confidence: Confidence
    evidence: Evidence
    reason: Reason


class RetainDecision(_DecisionBase):
    kind: Literal["retain"]
    admission: Literal["remember", "update", "correct"]
    lifetime: Literal["stable", "until_changed"]
    operations: Operations


class ForgetDecision(_DecisionBase):
    kind: Literal["forget"]
    operations: Operations


class MaintainDecision(_DecisionBase):
    kind: Literal["maintain"]
    operations: Operations


class IgnoreDecision(_DecisionBase):
    kind: Literal["ignore"]

    @property
    def operations(self) -> list[PutSection | RemoveSection]:
        return []


AnyDecision = RetainDecision | ForgetDecision | MaintainDecision | IgnoreDecision
DecisionItem = Annotated[AnyDecision, Field(discriminator="kind")]


class MaintenanceDecision(_Strict):
    version: Literal["memory_maintenance_v2"]
    request_id: str
    decisions: Annotated[list[DecisionItem], Field(min_length=1, max_length=MAX_DECISIONS)]


class EditMaintenanceDecision(MaintenanceDecision):
    edit_result: Literal["modified", "already_satisfied", "clarification_required", "refused"]


# ---------------------------------------------------------------- strict JSON Schema


def _text() -> dict[str, Any]:
    return {"type": "string"}


def _enum(values: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def _object(properties: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or null: the strict-mode form of a field only some shapes use (an enum keeps its
    ``"type": "string"``, which DeepSeek's strict parser needs, inside an ``anyOf``)."""
    if "enum" in schema:
        return {"anyOf": [schema, {"type": "null"}]}
    return {**schema, "type": [schema["type"], "null"]}


# One shape per level, not one per kind (retain, forget, ...): the fields a kind or an operation does
# not use are null, the Writer drops them (``_drop_unused``) and validates the kind's own model, so
# every rule below still holds while every request sends a third of the schema. No descriptions:
# memory_agent.md states each field's meaning, counts and limits once.
def _operation_schema() -> dict[str, Any]:
    return _object({
        "op": _enum(("put_section", "remove_section")),
        "target": _text(),
        "section": _nullable(_text()),
        "title": _nullable(_text()),
        "body": _nullable(_text()),
    })


def _decision_schema() -> dict[str, Any]:
    return _object({
        "kind": _enum(DECISION_KINDS),
        "applicability": _enum(APPLICABILITY),
        "confidence": {"type": "number"},
        "evidence": {"type": "array", "items": {"type": "string"}},
        "reason": _text(),
        "admission": _nullable(_enum(ADMISSION)),
        "lifetime": _nullable(_enum(LIFETIME)),
        "operations": {"type": ["array", "null"], "items": _operation_schema()},
    })


def decision_json_schema(edit_task: bool) -> dict[str, Any]:
    """The strict-mode JSON Schema of a submission; the edit-task variant requires ``edit_result``."""
    properties: dict[str, dict[str, Any]] = {
        "version": _enum((PROTOCOL_VERSION,)),
        "request_id": _text(),
        "decisions": {"type": "array", "items": _decision_schema()},
    }
    if edit_task:
        properties["edit_result"] = _enum(EDIT_RESULTS)
    return _object(properties)


# The fields only some decision kinds and operations have: null there means "not used".
_KIND_ONLY = {"admission": {"retain"}, "lifetime": {"retain"}, "operations": {"retain", "forget", "maintain"}}
_PUT_ONLY = ("title", "body")


def _drop_unused(payload: object) -> object:
    """The submission without the null fields its decisions' kinds and operations do not use, as
    the one-shape schema sends them; anything else is left for the models to judge (a value where
    a kind has no such field stays, and is rejected as an unexpected property)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("decisions"), list):
        return payload
    decisions = []
    for item in payload["decisions"]:
        if isinstance(item, dict):
            item = {k: v for k, v in item.items()
                    if not (v is None and k in _KIND_ONLY and item.get("kind") not in _KIND_ONLY[k])}
            if isinstance(item.get("operations"), list):
                item["operations"] = [
                    {k: v for k, v in op.items() if not (v is None and k in _PUT_ONLY and op.get("op") != "put_section")}
                    if isinstance(op, dict) else op for op in item["operations"]]
        decisions.append(item)
    return {**payload, "decisions": decisions}


# ---------------------------------------------------------------- context and result


@dataclass(frozen=True)
class EvidenceSource:
    """One current-batch observation the agent may cite (context-only turns are never sources);
    ``import_kind`` is a document import's kind (``importkinds``), None when it has none."""

    scope: str
    provenance: str
    import_kind: str | None = None

    def __post_init__(self) -> None:
        if not scopes.is_scope(self.scope) or self.provenance not in SOURCE_PROVENANCE:
            raise ValueError("EvidenceSource needs a scope and a source provenance class")
        if self.import_kind is not None and (self.import_kind not in importkinds.KINDS
                                             or self.provenance != "document_import"):
            raise ValueError("EvidenceSource.import_kind is a kind of a document import")

    @property
    def is_import(self) -> bool:
        return self.provenance in IMPORT_PROVENANCE


@dataclass(frozen=True)
class SectionLinks:
    """Source links of one existing section (keyed by its current title): how many, how many imports."""

    linked: int
    imports: int

    @property
    def import_owned(self) -> bool:
        return self.linked > 0 and self.imports == self.linked


@dataclass(frozen=True)
class DecisionContext:
    """What the Writer knows about the job when a submission arrives. Treated as read-only.

    ``evidence`` maps ``ev_<observationId>`` handles of the batch's current sources only;
    ``snapshot`` maps each target the agent was shown to ``{section ref: title}``;
    ``section_links`` maps target → title → links (absent: no linked sources);
    ``hand_edited_targets`` are documents changed by hand since cm last wrote them;
    ``known_lines`` maps target → its lines as the agent read them (``directives.known_lines``):
    text already there, which the import kind rule does not judge;
    ``blocked_targets`` are documents cm cannot parse now: a decision may append to one (it is
    held back with its evidence until the user fixes the file, never written), nothing else.
    """

    job_id: str
    batch_scope: str
    evidence: Mapping[str, EvidenceSource]
    writable_scopes: frozenset[str]
    snapshot: Mapping[str, Mapping[str, str]]
    fully_read_targets: frozenset[str]
    ingest_fully_read: bool
    section_links: Mapping[str, Mapping[str, SectionLinks]] = field(default_factory=dict)
    hand_edited_targets: frozenset[str] = frozenset()
    edit_task: bool = False
    edit_scope: str | None = None
    known_lines: Mapping[str, frozenset[str]] = field(default_factory=dict)
    blocked_targets: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not scopes.is_scope(self.batch_scope):
            raise ValueError("DecisionContext.batch_scope must be global or project:<id>")
        if self.edit_task != (self.edit_scope is not None):
            raise ValueError("DecisionContext.edit_scope is required exactly for edit tasks")
        if self.edit_scope is not None and not scopes.is_scope(self.edit_scope):
            raise ValueError("DecisionContext.edit_scope must be global or project:<id>")
        if any(not scopes.is_target(t) for t in self.snapshot):
            raise ValueError("DecisionContext.snapshot keys must be targets")


@dataclass(frozen=True)
class ValidatedDecision:
    """An accepted submission, ready for the Writer to apply."""

    decision: MaintenanceDecision
    touched_targets: frozenset[str]

    @property
    def writes(self) -> bool:
        return any(d.kind != "ignore" for d in self.decision.decisions)

    @property
    def edit_result(self) -> str | None:
        return getattr(self.decision, "edit_result", None)


class DecisionRejected(CmError):
    """The whole submission was rejected; ``details`` holds ``path`` and ``rule`` (no payload values)."""

    def __init__(self, code: str, message: str, details: Mapping[str, str]) -> None:
        super().__init__(code, message)
        self.details = dict(details)


def _reject(code: str, path: str, rule: str, todo: str) -> DecisionRejected:
    return DecisionRejected(code, f"{path} {rule}; {todo}", {"path": path, "rule": rule})


# ---------------------------------------------------------------- schema errors → paths and rules

_FIELD_NAMES = frozenset(
    name for model in (PutSection, RemoveSection, RetainDecision, ForgetDecision, MaintainDecision,
                        IgnoreDecision, EditMaintenanceDecision) for name in model.model_fields)
_LISTS = frozenset({"decisions", "operations", "evidence"})
_UNION_TAGS = {"decisions": ("kind", DECISION_KINDS), "operations": ("op", ("put_section", "remove_section"))}
_UNEXPECTED = "<unexpected property>"


def _json_path(loc: tuple[int | str, ...]) -> tuple[str, str | None]:
    """Render a pydantic error location as ``$.a[0].b``, dropping union tags and hiding foreign keys.

    Also returns the innermost union list the location entered (``decisions`` or ``operations``).
    """
    path, union, i = "$", None, 0
    prev: int | str | None = None
    while i < len(loc):
        elem = loc[i]
        if isinstance(elem, int) and not isinstance(elem, bool) and prev in _LISTS:
            path += f"[{elem}]"
            if prev in _UNION_TAGS:
                union = str(prev)
                prev, i = elem, i + 2  # skip the chosen variant's tag, which pydantic inserts here
                continue
        elif isinstance(elem, str) and elem in _FIELD_NAMES:
            path += f".{elem}"
        else:
            return path + f".{_UNEXPECTED}", union
        prev, i = elem, i + 1
    return path, union


def _rule(kind: str, ctx: Mapping[str, Any]) -> str:
    if kind in ("too_short", "too_long"):
        bound = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        return f"must have {'at least' if kind == 'too_short' else 'at most'} {bound} item{'' if bound == 1 else 's'}"
    rules = {
        "missing": "is required",
        "extra_forbidden": "is not allowed (no additional properties)",
        "invalid_key": "must be an object with string keys",
        "string_type": "must be a string",
        "string_too_long": f"must be at most {ctx.get('max_length')} characters",
        "float_type": "must be a number",
        "finite_number": "must be a finite number",
        "greater_than_equal": "must be between 0 and 1",
        "less_than_equal": "must be between 0 and 1",
        "list_type": "must be an array",
        "model_type": "must be an object",
        "model_attributes_type": "must be an object",
        "literal_error": f"must be {ctx.get('expected')}",
    }
    return rules.get(kind, f"is invalid ({kind})")


def _schema_rejection(error: Mapping[str, Any]) -> DecisionRejected:
    path, union = _json_path(tuple(error["loc"]))
    kind, ctx = str(error["type"]), error.get("ctx") or {}
    if kind in ("union_tag_invalid", "union_tag_not_found") and union is not None:
        tag, allowed = _UNION_TAGS[union]
        path += f".{tag}"
        rule = "is required" if kind == "union_tag_not_found" else "must be one of " + ", ".join(allowed)
    else:
        rule = _rule(kind, ctx)
    return _reject("INVALID_DECISION", path, rule, "resubmit one decision that matches the memory_maintenance_v2 schema")


def _parse(payload: object, edit_task: bool) -> MaintenanceDecision:
    if isinstance(payload, (str, bytes, bytearray)):
        try:
            payload = orjson.loads(payload)
        except (ValueError, RecursionError):
            raise _reject("INVALID_DECISION", "$", "is not valid JSON",
                          "resubmit one decision that matches the memory_maintenance_v2 schema") from None
    model = EditMaintenanceDecision if edit_task else MaintenanceDecision
    try:
        return model.model_validate(_drop_unused(payload))
    except ValidationError as exc:
        raise _schema_rejection(exc.errors(include_url=False, include_input=False)[0]) from None


# ---------------------------------------------------------------- semantic checks


def _check_evidence(ctx: DecisionContext, i: int, d: AnyDecision) -> None:
    base = f"$.decisions[{i}]"
    for k, handle in enumerate(d.evidence):
        if handle not in ctx.evidence:
            raise _reject("INVALID_EVIDENCE_REFERENCE", f"{base}.evidence[{k}]", "is not a current-batch evidence handle",
                          "cite only ev_ handles of current sources listed by inspect_ingest")
    if d.kind != "ignore" and not d.evidence and (d.kind in ("retain", "forget") or ctx.edit_task):
        raise _reject("MISSING_EVIDENCE", f"{base}.evidence", "is empty",
                      "retain, forget and every change in an edit task must cite at least one current ev_ handle")
    if d.kind != "ignore" and d.applicability == "uncertain":
        raise _reject("UNAUTHORIZED_SCOPE", f"{base}.applicability", "is uncertain on a changing decision",
                      "use ignore when applicability is uncertain")


def _check_characters(path: str, op: PutSection | RemoveSection) -> None:
    if not isinstance(op, PutSection):
        return
    for name in ("title", "body"):
        found = textchars.find_unsafe(getattr(op, name))
        if found is not None:
            raise _reject("UNSAFE_CHARACTER", f"{path}.{name}", f"contains a {found[1]} character",
                          "remove control characters (tab and newline are fine), carriage returns, "
                          "bidirectional overrides and isolates, and U+2028/U+2029")


def _check_operation(ctx: DecisionContext, path: str, applicability: str,
                     op: PutSection | RemoveSection, seen_refs: set[tuple[str, str]]) -> None:
    _check_characters(path, op)
    blocked = op.target in ctx.blocked_targets
    if not scopes.is_target(op.target) or (op.target not in ctx.snapshot and not blocked):
        raise _reject("INVALID_TARGET_REFERENCE", f"{path}.target", "is not a target of this snapshot",
                      "use a target listed by inspect_memory")
    if op.section is not None and op.section not in ctx.snapshot.get(op.target, {}):
        raise _reject("INVALID_TARGET_REFERENCE", f"{path}.section", "is not a section ref of that target",
                      "use a ref listed by inspect_memory, or null to append a new section")
    scope = target_scope(op.target)
    if applicability != ("global" if scope == "global" else "project"):
        raise _reject("UNAUTHORIZED_SCOPE", f"{path}.target", "does not match the decision's applicability",
                      "profile/preferences need applicability global, project targets need project")
    if scope != "global" and (scope != ctx.batch_scope or any(s.scope != scope for s in ctx.evidence.values())):
        raise _reject("UNAUTHORIZED_SCOPE", f"{path}.target", "is not the project every source of this batch belongs to",
                      "write only to the current source project's document or to global targets")
    if ctx.edit_task and scope != ctx.edit_scope:
        raise _reject("UNAUTHORIZED_SCOPE", f"{path}.target", "is outside the scope selected for this edit",
                      "edit only documents of the selected scope")
    if scope not in ctx.writable_scopes:
        raise _reject("UNAUTHORIZED_WRITE", f"{path}.target", "is not writable",
                      "write only to targets the manifest marks writable")
    if op.target not in ctx.fully_read_targets and not blocked:
        raise _reject("UNREAD_MEMORY_TARGET", f"{path}.target", "was not read to its last page",
                      "read the target with inspect_memory until next is null before editing it")
    if op.section is not None:
        if (op.target, op.section) in seen_refs:
            raise _reject("DUPLICATE_SECTION_OPERATION", f"{path}.section", "touches a section already touched",
                          "touch each section at most once per submission")
        seen_refs.add((op.target, op.section))


def _check_titles(ctx: DecisionContext, decisions: list[AnyDecision]) -> None:
    """After all operations, no target may hold two sections with one title, unless a hand edit
    already made them: an operation may keep the title of the section it replaces."""
    # Per target: section ref (or the appending operation's order) -> (title, order of the op that
    # set it, whether it kept the title the ref already had).
    final: dict[str, dict[object, tuple[str, int, bool]]] = {
        t: {ref: (title, -1, True) for ref, title in refs.items()} for t, refs in ctx.snapshot.items()}
    for target in ctx.blocked_targets:
        final.setdefault(target, {})
    paths: list[str] = []
    for i, d in enumerate(decisions):
        for j, op in enumerate(d.operations):
            order = len(paths)
            paths.append(f"$.decisions[{i}].operations[{j}]")
            if isinstance(op, RemoveSection):
                final[op.target].pop(op.section, None)
            else:
                kept = op.section is not None and ctx.snapshot[op.target].get(op.section) == op.title
                final[op.target][op.section if op.section is not None else order] = (op.title, order, kept)
    clashing: list[int] = []
    for sections in final.values():
        counts: dict[str, int] = {}
        for title, _, _ in sections.values():
            counts[title] = counts.get(title, 0) + 1
        clashing += [order for title, order, kept in sections.values() if counts[title] > 1 and order >= 0 and not kept]
    if clashing:
        raise _reject("DUPLICATE_SECTION_OPERATION", f"{paths[min(clashing)]}.title",
                      "repeats a section title of the resulting document",
                      "give each section of a document a distinct title, or replace the existing section by its ref")


def _check_edit_result(ctx: DecisionContext, decision: MaintenanceDecision) -> None:
    if not ctx.edit_task:
        return
    writes = any(d.kind != "ignore" for d in decision.decisions)
    modified = isinstance(decision, EditMaintenanceDecision) and decision.edit_result == "modified"
    if writes != modified:
        raise _reject("INVALID_EDIT_RESULT", "$.edit_result", "disagrees with the decisions",
                      "use modified exactly when some decision is not ignore")


def _import_backed(ctx: DecisionContext, d: AnyDecision) -> list[EvidenceSource]:
    """The sources behind a changing decision that imports alone stand behind: its cited evidence,
    or the whole batch when it cites none; [] when a user turn stands behind it (or it is ``ignore``)."""
    cited = [ctx.evidence[h] for h in d.evidence] if d.evidence else list(ctx.evidence.values())
    if d.kind == "ignore" or not cited or not all(s.is_import for s in cited):
        return []
    return cited


def _guard_imports(ctx: DecisionContext, decisions: list[AnyDecision]) -> None:
    """Import evidence alone may append, or change sections that imports alone produced (3.4)."""
    for i, d in enumerate(decisions):
        if not _import_backed(ctx, d):
            continue
        if d.kind == "forget":
            raise _reject("UNAUTHORIZED_FORGET_EVIDENCE", f"$.decisions[{i}].evidence", "holds only import evidence",
                          "import evidence cannot forget; ignore it or cite a user turn")
        for j, op in enumerate(d.operations):
            if op.section is None:
                continue
            title = ctx.snapshot[op.target][op.section]
            links = ctx.section_links.get(op.target, {}).get(title)
            if links is None or not links.import_owned or op.target in ctx.hand_edited_targets:
                raise _reject("UNAUTHORIZED_IMPORT_OVERWRITE", f"$.decisions[{i}].operations[{j}].section",
                              "changes a section not produced by imports alone",
                              "with import evidence append a new section (section null) instead")


def _guard_import_kinds(ctx: DecisionContext, decisions: list[AnyDecision]) -> None:
    """What an imported file is decides where it may go (``importkinds``): a decision that document
    imports alone stand behind writes only the classes of document their kinds may become (a
    checked-in project file never a global document: ``IMPORT_KIND_WRONG_TARGET``), and writes to
    profile only what is about the person: a title or a line of a body it writes that reads as an
    instruction to an agent (``directives``; not text already in profile) is
    ``IMPORT_INSTRUCTION_IN_PROFILE``, naming the section, never the text."""
    for i, d in enumerate(decisions):
        imports = [s for s in _import_backed(ctx, d) if s.provenance == "document_import"]
        if not imports:
            continue
        allowed = {c for s in imports for c in importkinds.may_become(s.import_kind)}
        kinds = sorted({s.import_kind or "unclassified" for s in imports})
        for j, op in enumerate(d.operations):
            path = f"$.decisions[{i}].operations[{j}]"
            target_class = importkinds.target_class(op.target)
            if target_class not in allowed:
                wrong = _reject("IMPORT_KIND_WRONG_TARGET", f"{path}.target",
                                f"import kind {'/'.join(kinds)} may not become {target_class}",
                                "write each import only to the documents its bundle's may_become lists")
                wrong.details["target"] = op.target
                raise wrong
            if op.target != importkinds.PROFILE or not isinstance(op, PutSection):
                continue
            known = ctx.known_lines.get(op.target, frozenset())
            in_title = directives.find(op.title, known) is not None
            if in_title or directives.find(op.body, known) is not None:
                rejected = _reject("IMPORT_INSTRUCTION_IN_PROFILE", f"{path}.{'title' if in_title else 'body'}",
                                   "instruction to an agent",
                                   "keep only facts about the person in profile; put the instruction in preferences")
                rejected.details["target"] = op.target
                if not in_title and not safety.scan_text(op.title):  # a title holding a secret is never recorded
                    rejected.details["section"] = op.title
                raise rejected


def validate_decision(payload: object, ctx: DecisionContext) -> ValidatedDecision:
    """Accept one submission for the job described by ``ctx`` or raise ``DecisionRejected``."""
    decision = _parse(payload, ctx.edit_task)
    if decision.request_id != ctx.job_id:
        raise _reject("INVALID_REQUEST_REFERENCE", "$.request_id", "does not name this job",
                      "copy request_id from the task exactly")
    if not ctx.ingest_fully_read:
        raise _reject("INCOMPLETE_INGEST_COVERAGE", "$", "was submitted before every required ingest block was read",
                      "read every required block to its end with read_ingest, then submit again")
    seen_refs: set[tuple[str, str]] = set()
    touched: set[str] = set()
    for i, d in enumerate(decision.decisions):
        _check_evidence(ctx, i, d)
        for j, op in enumerate(d.operations):
            _check_operation(ctx, f"$.decisions[{i}].operations[{j}]", d.applicability, op, seen_refs)
            touched.add(op.target)
    _check_titles(ctx, list(decision.decisions))
    _check_edit_result(ctx, decision)
    _guard_imports(ctx, list(decision.decisions))
    _guard_import_kinds(ctx, list(decision.decisions))
    return ValidatedDecision(decision, frozenset(touched))
