"""A fake-model Memory Agent policy for the per-section import tests: every ``FACT-<name>: <words>``
in a current source becomes a Profile section titled ``Fact <name>``. Stdlib only: it runs inside
the fake server."""

from __future__ import annotations

import re

FACT = re.compile(r"FACT-([A-Za-z0-9]+): ([A-Za-z0-9 ,.]+)")


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
