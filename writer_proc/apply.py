"""Turning an accepted decision into new documents and an id-and-hash-only receipt.

Contract:
- ``render`` applies every operation of a validated decision to the snapshot documents in order.
  Section refs are resolved against the snapshot the agent read and followed by title, so an
  earlier operation of the same submission cannot redirect a later one. Any section-model error
  (a heading inside a body, a duplicate title, the hard budget) rejects the whole submission.
- Every title and body a decision adds or replaces is scanned for sensitive content, each on its
  own (``SENSITIVE_CONTENT_REJECTED``, whose details name the document, the first finding's
  fingerprint and the section by its title when the title is clean); text already in the document
  is not the decision's and is not judged (issue 23). An edit task that says ``modified`` must
  change bytes (``INVALID_EDIT_RESULT``).
- ``build_receipt`` records what the commit means for the database — consumed observations,
  document hashes, source links, forget tombstones, purges and correction watermarks — as ids,
  hashes and link keys only: never Markdown, titles, bodies, reasons or model output. The same
  receipt drives the normal commit and the replay after a crash, so both end in the same state.
Link inheritance: a replaced section keeps its own sources; sections removed in the same decision
donate theirs to every section that decision writes; every written section gains the decision's
evidence. A forget consumes its evidence and every source linked to the sections it touches.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from cmrunner.core import sections
from cmrunner.core.errors import CmError
from cmrunner.core.sections import Document
from cmrunner.secrets import safety
from cmrunner.writer_proc import contract


def iso_to_ms(value: str) -> int:
    """Milliseconds since the epoch of an ISO-8601 timestamp (naive values are UTC)."""
    parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return int(parsed.timestamp() * 1000)


def render(snapshot: Mapping[str, Document], accepted: contract.ValidatedDecision) -> dict[str, Document]:
    """The documents after every operation, for each target the decision touches."""
    docs: dict[str, Document] = {}
    # Which snapshot unit each unit of the working document is (None: appended by this decision).
    # Units never move, so a ref resolved on the snapshot is followed by position, which also tells
    # two sections of one title (a hand edit) and the untitled preamble apart.
    origin: dict[str, list[int | None]] = {}
    try:
        for decision in accepted.decision.decisions:
            for op in decision.operations:
                original = snapshot[op.target]
                doc = docs.get(op.target, original)
                order = origin.setdefault(op.target, list(range(len(original.sections))))
                ref = None
                if op.section is not None:
                    wanted = original.sections.index(original.section(op.section))
                    if wanted not in order:
                        raise CmError("INVALID_TARGET_REFERENCE", f"{op.target}: a section was touched twice")
                    at = order.index(wanted)
                    ref = doc.sections[at].ref
                if op.op == "put_section":
                    docs[op.target] = sections.put_section(doc, ref, op.title, op.body)
                    if ref is None:
                        order.append(None)
                else:
                    assert ref is not None  # the contract's RemoveSection always names a section
                    docs[op.target] = sections.remove_section(doc, ref)
                    del order[at]
    except CmError as exc:
        raise contract.DecisionRejected(exc.code, exc.message, {"path": "$.decisions", "rule": "section model"}) from None
    _check_written(accepted)
    changed = {t: d for t, d in docs.items() if d.data != snapshot[t].data}
    if accepted.edit_result == "modified" and not changed:
        raise contract.DecisionRejected("INVALID_EDIT_RESULT", "edit_result is modified but no document changed",
                                        {"path": "$.edit_result", "rule": "modified must change bytes"})
    return changed


def _check_written(accepted: contract.ValidatedDecision) -> None:
    """Only what the decision writes is judged: each title and body it adds or replaces, on its own.

    A section already in the document is not the decision's doing: if it holds a finding it stays
    withheld on read and is listed by ``cm secrets list``, and never blocks this decision (issue 23).
    The details name the document, the first finding's fingerprint and the section's title when
    the title is clean itself, for the job's record.
    """
    for i, decision in enumerate(accepted.decision.decisions):
        for j, op in enumerate(decision.operations):
            if op.op != "put_section":
                continue
            here = f"/decisions/{i}/operations/{j}"
            in_title = safety.scan_text(op.title, f"{here}/title")
            found = in_title + safety.scan_text(op.body, f"{here}/body")
            if not found:
                continue
            rules = ", ".join(sorted({v.rule_id for v in found}))
            where = {"target": op.target, "fingerprint": found[0].fingerprint}
            if not in_title:
                where["section"] = op.title
            raise contract.DecisionRejected(
                "SENSITIVE_CONTENT_REJECTED",
                f"a section this decision writes to {op.target} would contain sensitive content ({rules}); leave it out",
                {"path": f"$.decisions[{i}].operations[{j}]", "rule": rules, **where},
            )


class BatchFacts:
    """What the receipt needs to know about the batch, beyond the decision."""

    __slots__ = ("observation_ids", "scopes", "observed_ms", "links", "hand_edited", "edit_task")

    def __init__(self, observation_ids: list[int], scopes: Mapping[int, str], observed_ms: Mapping[int, int],
                 links: Mapping[str, Mapping[str, list[int]]], hand_edited: frozenset[str], edit_task: bool) -> None:
        self.observation_ids = observation_ids
        self.scopes = scopes            # observation id -> scope
        self.observed_ms = observed_ms  # observation id -> observedAt in ms
        self.links = links              # target -> section key -> linked source ids (current DB links)
        self.hand_edited = hand_edited  # targets changed by hand since cm last wrote them
        self.edit_task = edit_task


def _ev_id(handle: str) -> int:
    return int(handle[3:])


def build_receipt(job_id: str, snapshot: Mapping[str, Document], changed: Mapping[str, Document],
                  accepted: contract.ValidatedDecision, facts: BatchFacts, prompt_digest: str, model: str,
                  usage: Mapping[str, int], now_ms: int) -> dict:
    links = {t: {k: list(v) for k, v in facts.links.get(t, {}).items()} for t in snapshot}
    for target in facts.hand_edited:
        links[target] = {}  # a hand edit invalidates the document's title-based links
    forget_ids: set[int] = set()
    purge_ids: set[int] = set()
    watermark_targets: set[str] = set()
    for decision in accepted.decision.decisions:
        evidence = [_ev_id(e) for e in decision.evidence]
        donated: set[int] = set()
        written: list[tuple[str, str]] = []
        for op in decision.operations:
            original = snapshot[op.target]
            old_key = None
            if op.section is not None:
                old_unit = original.section(op.section)
                old_key = sections.unit_key(op.target, old_unit)
                old_sources = links[op.target].pop(old_key, [])
                if op.op == "remove_section":
                    donated.update(old_sources)
            else:
                old_sources = []
            if decision.kind == "forget":
                forget_ids.update(old_sources)
            if op.op == "put_section":
                new_key = _written_key(op.target, old_key, original, op)
                links[op.target][new_key] = sorted(set(old_sources))
                written.append((op.target, new_key))
        for target, key in written:
            merged = set(links[target][key]) | donated | (set() if decision.kind == "forget" else set(evidence))
            links[target][key] = sorted(merged)
        if decision.kind == "forget":
            forget_ids.update(evidence)
            forget_ids.update(donated)
        if decision.kind == "forget" or (decision.kind == "retain" and decision.admission in ("update", "correct")) \
                or (facts.edit_task and decision.kind != "ignore"):
            watermark_targets.update(op.target for op in decision.operations)
    if facts.hand_edited:
        purge_ids.update(i for t in facts.hand_edited for ids in facts.links.get(t, {}).values() for i in ids)
    newest = max(facts.observation_ids)
    at = max(facts.observed_ms[i] for i in facts.observation_ids)
    return {
        "version": 1,
        "id": job_id,
        "jobId": job_id,
        "observationIds": sorted(facts.observation_ids),
        "decisions": [d.kind for d in accepted.decision.decisions],
        "editResult": accepted.edit_result,
        "promptDigest": prompt_digest,
        "model": model[:128],
        "timestamp": now_ms,
        "usage": {k: int(v) for k, v in usage.items()},
        "documents": [{"target": t, "before": snapshot[t].hash, "after": changed[t].hash} for t in sorted(changed)],
        "invalidatedTargets": sorted(facts.hand_edited),
        # The complete link set of every target whose links change: replay replaces them wholesale.
        "linkTargets": sorted(t for t in links if t in changed or t in facts.hand_edited),
        "links": [{"target": t, "key": k, "sourceIds": v} for t in sorted(links) if t in changed or t in facts.hand_edited
                  for k, v in sorted(links[t].items()) if v],
        "forgetSourceIds": sorted(forget_ids),
        "purgeSourceIds": sorted(purge_ids - forget_ids),
        "watermarks": [{"target": t, "at": at, "sourceId": newest} for t in sorted(watermark_targets)],
    }


def _written_key(target: str, old_key: str | None, original: Document, op: contract.PutSection) -> str:
    """The key of the section a put leaves: the replaced unit's own when it keeps that unit's title
    (a second section of one title keeps its occurrence), else the new title's."""
    if old_key is not None and op.section is not None and original.section(op.section).title == op.title:
        return old_key
    return sections.section_key(target, op.title)


def decision_kinds(snapshot: Mapping[str, Document], accepted: contract.ValidatedDecision) -> dict[str, str]:
    """``{section key: decision kind}`` for every section a decision's operations wrote or removed."""
    kinds: dict[str, str] = {}
    for decision in accepted.decision.decisions:
        for op in decision.operations:
            old_key = None
            if op.section is not None:
                old_key = sections.unit_key(op.target, snapshot[op.target].section(op.section))
                kinds[old_key] = decision.kind
            if op.op == "put_section":
                kinds[_written_key(op.target, old_key, snapshot[op.target], op)] = decision.kind
    return kinds


def check_watermarks(accepted: contract.ValidatedDecision, watermarks: Mapping[str, tuple[int, int]],
                     facts: BatchFacts) -> None:
    """``STALE_SOURCE`` when evidence is older than a correction already committed to a target."""
    for i, decision in enumerate(accepted.decision.decisions):
        ids = [_ev_id(e) for e in decision.evidence] or list(facts.observation_ids)
        for op in decision.operations:
            mark = watermarks.get(op.target)
            if mark is None:
                continue
            at, source_id = mark
            if any(facts.observed_ms[i_] < at or (facts.observed_ms[i_] == at and i_ <= source_id) for i_ in ids):
                raise contract.DecisionRejected(
                    "STALE_SOURCE", f"$.decisions[{i}] cites evidence older than a correction already saved to {op.target}",
                    {"path": f"$.decisions[{i}]", "rule": "evidence older than the target's correction watermark"},
                )


class HeldBack:
    """What a decision could not write because a document it writes cannot be parsed now: the
    observations its decisions rest on and the documents they wait for."""

    __slots__ = ("observation_ids", "targets")

    def __init__(self, observation_ids: frozenset[int], targets: frozenset[str]) -> None:
        self.observation_ids = observation_ids
        self.targets = targets


def split_blocked(accepted: contract.ValidatedDecision, blocked: frozenset[str],
                  batch: list[int]) -> tuple[contract.ValidatedDecision, HeldBack | None]:
    """The decisions that can be written now, and what waits: every decision that writes a blocked
    document, and every other changing decision that cites any of their evidence (evidence is
    never split between a commit and a wait). A decision that cites none rests on the whole batch."""
    decisions = list(accepted.decision.decisions)

    def rests_on(d: contract.AnyDecision) -> set[int]:
        return {_ev_id(e) for e in d.evidence} or set(batch)

    held = {i for i, d in enumerate(decisions) if any(op.target in blocked for op in d.operations)}
    if not held:
        return accepted, None
    ids = set().union(*(rests_on(decisions[i]) for i in held))
    grew = True
    while grew:
        grew = False
        for i, d in enumerate(decisions):
            if i not in held and d.kind != "ignore" and rests_on(d) & ids:
                held.add(i)
                ids |= rests_on(d)
                grew = True
    kept = [d for i, d in enumerate(decisions) if i not in held]
    targets = frozenset(op.target for i in held for op in decisions[i].operations if op.target in blocked)
    narrowed = contract.ValidatedDecision(accepted.decision.model_copy(update={"decisions": kept}),
                                          frozenset(op.target for d in kept for op in d.operations))
    return narrowed, HeldBack(frozenset(ids), targets)
