"""Fake-model Memory Agent policies for document imports. Stdlib only: they run inside the fake server.

- ``keep_imported_parts`` (the setup wizard's import step): each current part of an imported file
  becomes its own section of its scope's document (Preferences for global: every personal kind may
  become a preference, while profile takes only facts about the user), titled by the part's
  evidence reference.
- ``remember_facts`` (the per-section import tests): every ``FACT-<name>: <words>`` in a current
  source becomes a Profile section titled ``Fact <name>``, once.
"""

from __future__ import annotations

import re

FACT = re.compile(r"FACT-([A-Za-z0-9]+): ([A-Za-z0-9 ,.]+)")


def keep_imported_parts(state: dict) -> object:
    current = [s for s in state["sources"] if not s["context_only"] and s["evidence_ref"] and s["text"].strip()]
    scope = (state["task"]["bundles"] or [{}])[0].get("scope", "global")
    target = "preferences" if scope == "global" else scope
    body = lambda text: "\n".join(("\\" + line) if line.lstrip().startswith("#") else line  # noqa: E731
                                  for line in text.strip().splitlines()) + "\n"
    ops = [{"op": "put_section", "target": target, "section": None, "title": f"Imported {s['evidence_ref'][3:]}",
            "body": body(s["text"])} for s in current]
    return [{"kind": "retain", "applicability": "global" if scope == "global" else "project", "confidence": 0.9,
             "evidence": [s["evidence_ref"] for s in current], "reason": "the user's own memory file",
             "admission": "remember", "lifetime": "stable", "operations": ops}]


def remember_facts(state: dict) -> object:
    current = [s for s in state["sources"] if not s["context_only"] and s["evidence_ref"]]
    existing = {s["title"]: s["ref"] for s in state["documents"].get("profile", {}).get("sections", [])}
    ops = []
    for source in current:
        for name, words in FACT.findall(source["text"]):
            title = f"Fact {name}"
            if title not in existing:
                ops.append({"op": "put_section", "target": "profile", "section": None, "title": title,
                            "body": words.strip() + "\n"})
                existing[title] = None
    evidence = [s["evidence_ref"] for s in current]
    if not ops:
        return [{"kind": "ignore", "applicability": "uncertain", "confidence": 1, "evidence": evidence,
                 "reason": "no fact"}]
    return [{"kind": "retain", "applicability": "global", "confidence": 0.9, "evidence": evidence,
             "reason": "the imported file states it", "admission": "remember", "lifetime": "stable",
             "operations": ops}]
