"""Fake-model Memory Agent policies whose decisions the Writer rejects.

``secret_then_prose``: the first submission of an attempt writes a high-entropy token into the
Preferences section "Note"; once that was rejected (``SENSITIVE_CONTENT_REJECTED``) the model only
answers in prose, so the attempt ends without a valid submission.
``always_invalid``: every submission names the wrong ``request_id`` (``INVALID_REQUEST_REFERENCE``).
``invalid_twice_then_remember``: two wrong ``request_id`` submissions, then a valid decision.
Stdlib only: it runs inside the fake server process.
"""

from __future__ import annotations

TOKEN = "Zq8vN3xK7pLw2Rt9Ym4Hb6Jd1Fs5Gc0Ae"


def _evidence(state: dict) -> list[str]:
    return [s["evidence_ref"] for s in state["sources"] if not s["context_only"] and s["evidence_ref"]]


def secret_then_prose(state: dict) -> object:
    if state["rejections"]:
        return {"reply": {"text": "I could not find anything else to do."}}
    return [{"kind": "retain", "applicability": "global", "confidence": 0.9, "evidence": _evidence(state),
             "reason": "the user stated it", "admission": "remember", "lifetime": "stable",
             "operations": [{"op": "put_section", "target": "preferences", "section": None, "title": "Note",
                             "body": f"The deploy key {TOKEN}.\n"}]}]


def invalid_twice_then_remember(state: dict) -> object:
    body = always_invalid(state)
    if len(state["rejections"]) >= 2:
        body["request_id"] = state["task"]["request_id"]
    return body


def always_invalid(state: dict) -> object:
    return {"version": "memory_maintenance_v2", "request_id": "not-the-request-id",
            "decisions": [{"kind": "ignore", "applicability": "uncertain", "confidence": 1,
                           "evidence": _evidence(state), "reason": "nothing worth keeping"}]}
