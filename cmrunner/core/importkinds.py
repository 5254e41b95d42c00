"""What an imported memory file is (its kind) and what its content may become in memory.

Contract (``../shared/hosts-more.md`` §4.7; issue 26 "Kinds, not just text"):
- ``KINDS`` maps each kind id to a ``Kind``: a label for the plan and the classes of document its
  content may become (``profile``, ``preferences``, ``project``):
  * ``personal`` — the user's own instruction or memory file (``~/.claude/CLAUDE.md``, Codex
    memories, ``~/.gemini/GEMINI.md``): profile (facts about the user only) and preferences;
  * ``user_fact`` — auto memory ``type: user``: profile, preferences and the project;
  * ``user_feedback`` — auto memory ``type: feedback`` (a rule, then why and how to apply it):
    preferences and the project, never profile. Both come from a project's auto memory folder
    only, so they are imported in that project's scope (``memsources``): what holds for that
    project alone stays in its memory, and only the Writer's judgment lifts the rest to global.
  * ``project_fact`` — auto memory ``type: project`` (or no ``type``) and a project's auto memory
    index without topic files, ``CLAUDE.local.md``: the project only;
  * ``reference`` — auto memory ``type: reference`` (pointers): the project only;
  * ``team_convention`` — checked-in ``AGENTS.md`` / ``CLAUDE.md``: the project only, never a
    fact about the user;
  * ``instructions`` — Cursor rules, Copilot instructions: the project only.
- Whatever the kind, an import writes to profile only what is about the user, never an
  instruction to an agent (``cmrunner.core.directives``); the Writer enforces both
  (``writer_proc/contract.py``, beside the import guard).
- ``ENVELOPE_FIELD`` (``importKind``) carries the kind in an import part's envelope;
  ``of_envelope`` reads it back. An envelope without it (``cm import FILE``, or queued before
  kinds existed) or with an unknown value has kind ``None``: every class is open to it, and the
  profile rule on instructions still holds.
- ``target_class(target)``: ``profile``, ``preferences`` or ``project`` for a target name.
Stdlib only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

ENVELOPE_FIELD = "importKind"
PROFILE, PREFERENCES, PROJECT = "profile", "preferences", "project"
CLASSES = (PROFILE, PREFERENCES, PROJECT)


@dataclass(frozen=True, slots=True)
class Kind:
    label: str
    may_become: tuple[str, ...]


KINDS: dict[str, Kind] = {
    "personal": Kind("personal", (PROFILE, PREFERENCES)),
    "user_fact": Kind("about the user", (PROFILE, PREFERENCES, PROJECT)),
    "user_feedback": Kind("feedback", (PREFERENCES, PROJECT)),
    "project_fact": Kind("project fact", (PROJECT,)),
    "reference": Kind("reference", (PROJECT,)),
    "team_convention": Kind("team convention", (PROJECT,)),
    "instructions": Kind("instructions", (PROJECT,)),
}
# Auto memory topic files' front matter ``type`` → kind; no other value is guessed at (``memsources``
# skips a file with another value: ``UNKNOWN_KIND``).
AUTO_MEMORY_TYPES = {"user": "user_fact", "feedback": "user_feedback", "project": "project_fact",
                     "reference": "reference"}


def may_become(kind: str | None) -> tuple[str, ...]:
    """The classes of document an import of ``kind`` may write (every class for ``None``)."""
    return KINDS[kind].may_become if kind in KINDS else CLASSES


def describe(kind: str | None) -> str:
    """What the plan says an import of ``kind`` may become."""
    classes = may_become(kind)
    if classes == (PROJECT,):
        return "the project's memory only"
    parts = {PROFILE: "profile (facts about you, never instructions to an agent)",
             PREFERENCES: "preferences", PROJECT: "the project's memory"}
    return ", ".join(parts[c] for c in classes)


def label(kind: str) -> str:
    return KINDS[kind].label


def target_class(target: str) -> str:
    return target if target in (PROFILE, PREFERENCES) else PROJECT


def of_envelope(text: str) -> str | None:
    """The kind an import part's envelope carries, or ``None`` (see module contract)."""
    try:
        envelope = json.loads(text)
    except ValueError:
        return None
    kind = envelope.get(ENVELOPE_FIELD) if isinstance(envelope, dict) else None
    return kind if isinstance(kind, str) and kind in KINDS else None
