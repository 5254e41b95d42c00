"""The fake model's Memory Agent policy for Adjust Memory (edit) tasks; loaded by the fake server.

The user's request becomes (or replaces) the Profile section "Requested change", and the
submission says ``edit_result: modified``; a request that starts with "Forget" removes that section
instead (a ``forget`` decision). Stdlib only: it runs inside the fake server process.
"""

from __future__ import annotations


def edit_policy(state: dict) -> object:
    current = [s for s in state["sources"] if not s["context_only"] and s["evidence_ref"]]
    existing = {s["title"]: s["ref"] for s in state["documents"].get("profile", {}).get("sections", [])}
    evidence = [s["evidence_ref"] for s in current]
    if current and current[0]["text"].strip().startswith("Forget") and "Requested change" in existing:
        return {"version": "memory_maintenance_v2", "request_id": state["task"]["request_id"],
                "edit_result": "modified",
                "decisions": [{"kind": "forget", "applicability": "global", "confidence": 1, "evidence": evidence,
                               "reason": "the user asked to forget it",
                               "operations": [{"op": "remove_section", "target": "profile",
                                               "section": existing["Requested change"]}]}]}
    ops = [{"op": "put_section", "target": "profile", "section": existing.get("Requested change"),
            "title": "Requested change", "body": s["text"].strip() + "\n"} for s in current[:1]]
    return {"version": "memory_maintenance_v2", "request_id": state["task"]["request_id"], "edit_result": "modified",
            "decisions": [{"kind": "retain", "applicability": "global", "confidence": 0.9,
                           "evidence": [s["evidence_ref"] for s in current], "reason": "the user asked",
                           "admission": "correct", "lifetime": "until_changed", "operations": ops}]}
