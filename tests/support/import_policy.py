"""The fake model's Memory Agent policy for document imports (the setup wizard's import step): each
current part of an imported file becomes its own section of its scope's document (Profile for
global), titled by the part's evidence reference. Stdlib only: it runs inside the fake server."""

from __future__ import annotations


def keep_imported_parts(state: dict) -> object:
    current = [s for s in state["sources"] if not s["context_only"] and s["evidence_ref"] and s["text"].strip()]
    scope = (state["task"]["bundles"] or [{}])[0].get("scope", "global")
    target = "profile" if scope == "global" else scope
    body = lambda text: "\n".join(("\\" + line) if line.lstrip().startswith("#") else line  # noqa: E731
                                  for line in text.strip().splitlines()) + "\n"
    ops = [{"op": "put_section", "target": target, "section": None, "title": f"Imported {s['evidence_ref'][3:]}",
            "body": body(s["text"])} for s in current]
    return [{"kind": "retain", "applicability": "global" if scope == "global" else "project", "confidence": 0.9,
             "evidence": [s["evidence_ref"] for s in current], "reason": "the user's own memory file",
             "admission": "remember", "lifetime": "stable", "operations": ops}]
