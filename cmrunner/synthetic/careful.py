"""The careful policy of the fake model: what a good Memory Agent decides, for the eval phrasebook.

Contract:
- ``careful(state)`` sees only what the Memory Agent's tools returned (``fakepolicy.policy_state``:
  the task, the reassembled sources, the documents) — never a world file or its checks — and
  returns ``memory_maintenance_v2`` decisions.
- It reads each current user turn with ``phrasebook``: the user's own sentences only (pasted
  content and assistant replies are never evidence about the person). It keeps statements and
  corrections, forgets on request, and ignores hypotheticals, jokes, third parties, hedges,
  ephemeral states, questions, requests and chatter. A statement goes where it belongs: who the
  user is to ``profile``, how they work to ``preferences``, a project fact to the current
  project's document only — under a topic heading, as a short third-person statement. A
  correction replaces the section of its topic; a plain statement on a known topic is added to
  that section. A forget removes the sections of its topic (or naming its words).
- A Markdown import contributes its plain statements as one attributed section of the import's
  scope ("From <label>"): the project's document, else the profile, or the preferences when the
  bundle's ``may_become`` excludes the profile (an auto memory ``feedback`` file); never its
  instructions, and never replaces what the user said.
- ``Careful`` keeps one hook per kind of sentence the phrasebook knows; ``faulty`` overrides
  exactly one of them per violation class.
Policies of the fake model prove that ``cm eval`` tells careful from faulty writing; they say
nothing about any real model. Stdlib only: it runs inside the fake model server.
"""

from __future__ import annotations

import json
import re

from cmrunner.synthetic import phrasebook
from cmrunner.synthetic.phrasebook import Statement

GLOBAL_TARGETS = ("profile", "preferences")
_STOPWORDS = frozenset({"that", "this", "what", "about", "with", "from", "have", "their", "there", "they", "them",
                        "said", "your", "into", "just", "also"})


def _sections(text: str) -> dict[str, str]:
    """``{title: body}`` of a canonical document (``## title`` lines outside code fences)."""
    found: dict[str, str] = {}
    title = None
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            if title is not None:
                found[title] = "\n".join(lines).strip("\n")
            title, lines = line[3:].strip(), []
        elif title is not None:
            lines.append(line)
    if title is not None:
        found[title] = "\n".join(lines).strip("\n")
    return found


class Entry:
    """One section as the plan sees it: where it came from and what this batch does to it."""

    __slots__ = ("ref", "body", "changed", "admission", "evidence")

    def __init__(self, ref: str | None, body: str) -> None:
        self.ref = ref
        self.body = body
        self.changed = False
        self.admission = "remember"
        self.evidence: set[str] = set()


class Plan:
    """The documents of the snapshot and the batch's changes to them, in order."""

    def __init__(self, documents: dict) -> None:
        self.writable = {t for t, d in documents.items() if d.get("writable")}
        self.docs: dict[str, dict[str, Entry]] = {}
        for target, doc in documents.items():
            refs = {s["title"]: s["ref"] for s in doc.get("sections") or []}
            bodies = _sections(doc.get("text", ""))
            self.docs[target] = {title: Entry(ref, bodies.get(title, "")) for title, ref in refs.items()}
        self.removed: dict[str, dict[str, tuple[str, set[str]]]] = {t: {} for t in documents}

    def put(self, target: str | None, title: str, body: str, evidence: str, replace: bool = False) -> None:
        """A statement under ``title``: added to the section's body, or (``replace``) instead of it.
        Nothing happens for a target that is not writable (or none: a project fact outside a project)."""
        if target is None or target not in self.writable:
            return
        entry = self.docs[target].get(title)
        if entry is None:
            entry = self.docs[target][title] = Entry(None, "")
            restored = self.removed[target].pop(title, None)
            entry.ref = restored[0] if restored else None
        if replace:
            entry.admission = "correct" if entry.ref is not None or entry.body else entry.admission
            entry.body = body
        elif body.lower() not in entry.body.lower():
            entry.body = f"{entry.body}\n{body}".strip("\n")
        else:
            return
        entry.changed = True
        entry.evidence.add(evidence)

    def titles(self, target: str) -> list[str]:
        return list(self.docs.get(target, {}))

    def unique_title(self, target: str, title: str) -> str:
        n, candidate = 1, title
        while candidate in self.docs.get(target, {}) or candidate in self.removed.get(target, {}):
            n += 1
            candidate = f"{title} ({n})"
        return candidate

    def remove(self, target: str, title: str, evidence: str) -> None:
        if target not in self.writable or title not in self.docs[target]:
            return
        entry = self.docs[target].pop(title)
        if entry.ref is not None:
            self.removed[target][title] = (entry.ref, {evidence})

    def decisions(self) -> list[dict]:
        """One decision per changed section, citing exactly the turns behind it (its provenance)."""
        decisions = []
        for target, entries in self.docs.items():
            scope = "global" if target in GLOBAL_TARGETS else "project"
            for title, entry in entries.items():
                if entry.changed:
                    decisions.append({"kind": "retain", "applicability": scope, "confidence": 0.9,
                                      "evidence": sorted(entry.evidence), "reason": "the user said so",
                                      "admission": entry.admission, "lifetime": "stable",
                                      "operations": [{"op": "put_section", "target": target, "section": entry.ref,
                                                      "title": title, "body": entry.body + "\n"}]})
            for ref, evidence in self.removed[target].values():
                decisions.append({"kind": "forget", "applicability": scope, "confidence": 0.9,
                                  "evidence": sorted(evidence), "reason": "the user asked to forget it",
                                  "operations": [{"op": "remove_section", "target": target, "section": ref}]})
        return decisions


class Careful:
    """The careful reader; each ``on_*`` hook is one judgement a faulty policy may get wrong."""

    def __init__(self, state: dict) -> None:
        self.state = state
        self.plan = Plan(state["documents"])
        bundles = (state["task"] or {}).get("bundles") or []
        self.kinds = {b.get("ingest_id"): b.get("source") for b in bundles}
        self.may_become = {b.get("ingest_id"): b.get("may_become") for b in bundles}
        scope = next((b.get("scope") for b in bundles if b.get("state") == "current"), "global")
        self.project = scope if scope != "global" else None

    # -- where things go ---------------------------------------------------------------------------
    def target(self, where: str | None) -> str | None:
        return self.project if where == "project" else where

    def keep(self, statement: Statement, evidence: str, replace: bool = False) -> None:
        self.plan.put(self.target(statement.where), statement.topic, statement.body, evidence, replace)

    # -- one hook per kind of sentence -------------------------------------------------------------
    def on_statement(self, statement: Statement, evidence: str) -> None:
        self.keep(statement, evidence)

    def on_correction(self, statement: Statement, evidence: str) -> None:
        self.keep(statement, evidence, replace=True)

    def on_forget(self, statement: Statement, evidence: str) -> None:
        targets = [t for t in (*GLOBAL_TARGETS, self.project) if t is not None]
        by_topic = [(t, statement.topic) for t in targets if statement.topic in self.plan.titles(t)]
        words = {w.lower() for w in re.findall(r"[A-Za-z][\w.-]{3,}", statement.body)} - _STOPWORDS
        by_words = [(t, title) for t in targets for title, entry in self.plan.docs.get(t, {}).items()
                    if words & {w.lower() for w in re.findall(r"[A-Za-z][\w.-]{3,}", entry.body)}]
        for target, title in by_topic or by_words:
            self.plan.remove(target, title, evidence)

    def on_ignored(self, statement: Statement, evidence: str) -> None:
        """Hypotheticals, jokes, third parties, hedges, ephemeral states, questions, requests: not kept."""

    def on_pasted(self, pasted: str, evidence: str) -> None:
        """Pasted content is material the user shows; an instruction inside it is never obeyed."""

    def on_assistant(self, text: str, evidence: str | None) -> None:
        """An assistant's reply is never evidence about the person."""

    def on_import(self, envelope: dict, evidence: str, may_become: list[str] | None = None) -> None:
        kept = []
        for line in str(envelope.get("text", "")).splitlines():
            line = line.strip().lstrip("-*").strip()
            if not line or line.startswith(("#", "<!--", ">")) or phrasebook.instruction(line):
                continue
            for sentence in phrasebook.own_words(line)[0]:
                found = phrasebook.classify(sentence, self.project is not None)
                if found.kind == "statement":
                    kept.append(f"- {found.body}")
        if kept:
            label = str(envelope.get("sourceLabel") or envelope.get("fileName") or "an import")
            where = self.project or ("preferences" if may_become and "profile" not in may_become else "profile")
            title = self.plan.unique_title(where, f"From {label}")
            self.plan.put(where, title, "\n".join(kept), evidence)

    # -- the reading ---------------------------------------------------------------------------------
    def dispatch(self, statement: Statement, evidence: str) -> None:
        handler = {"statement": self.on_statement, "correction": self.on_correction, "forget": self.on_forget,
                   "false": self.on_false, "third_party": self.on_third_party, "uncertain": self.on_uncertain,
                   "ephemeral": self.on_ephemeral, "task": self.on_task}.get(statement.kind, self.on_ignored)
        handler(statement, evidence)

    on_false = on_third_party = on_uncertain = on_ephemeral = on_task = on_ignored

    def read(self) -> list[dict]:
        first: str | None = None
        for source in self.state["sources"]:
            evidence = source.get("evidence_ref")
            if source.get("context_only") or not evidence:
                continue
            if self.kinds.get(source["handle"]) == "document_import":
                try:
                    envelope = json.loads(source["text"])
                except ValueError:
                    continue
                self.on_import(envelope if isinstance(envelope, dict) else {}, evidence,
                               self.may_become.get(source["handle"]))
                continue
            if source.get("metadata", {}).get("role", "user") != "user":
                continue
            first = first or evidence
            sentences, pasted = phrasebook.own_words(source["text"])
            for sentence in sentences:
                self.dispatch(phrasebook.classify(sentence, self.project is not None), evidence)
            if pasted:
                self.on_pasted(pasted, evidence)
        for source in self.state["sources"]:
            if source.get("context_only") and source.get("metadata", {}).get("role") == "assistant":
                self.on_assistant(source["text"], first)
        decisions = self.plan.decisions()
        if decisions:
            return decisions
        evidence = sorted({s["evidence_ref"] for s in self.state["sources"]
                           if not s.get("context_only") and s.get("evidence_ref")})
        return [{"kind": "ignore", "applicability": "uncertain", "confidence": 1, "evidence": evidence,
                 "reason": "nothing worth keeping"}]


def careful(state: dict) -> object:
    return Careful(state).read()
