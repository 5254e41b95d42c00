"""A fake-model Memory Agent policy for the secrets tests: each current user turn becomes a section of
Preferences (``remember_user_turns`` writes to Profile). Stdlib only: it runs inside the fake server."""

from __future__ import annotations


def remember_in_preferences(state: dict) -> object:
    current = [s for s in state["sources"] if not s["context_only"] and s["evidence_ref"]]
    ops = [{"op": "put_section", "target": "preferences", "section": None,
            "title": f"User turn {s['evidence_ref'][3:]}", "body": s["text"].strip() + "\n"}
           for s in current if s["metadata"].get("role") == "user" and s["text"].strip()]
    return [{"kind": "retain", "applicability": "global", "confidence": 0.9, "evidence": [s["evidence_ref"] for s in current],
             "reason": "the user stated it", "admission": "remember", "lifetime": "stable", "operations": ops}]
