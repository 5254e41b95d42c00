"""A fake-model Memory Agent policy that first submits a hostile body, then a clean one.

The user turn names the character as hex after ``code point`` (e.g. ``code point 1b``); the first
submission appends it to the body, and once that was rejected the policy submits the turn alone.
Stdlib only: it runs inside the fake server process.
"""

from __future__ import annotations


def hostile_then_clean(state: dict) -> object:
    source = next(s for s in state["sources"] if not s["context_only"] and s["evidence_ref"])
    text = source["text"].strip()
    hostile = "" if state["rejections"] else chr(int(text.rsplit(" ", 1)[1], 16))
    return [{"kind": "retain", "applicability": "global", "confidence": 0.9, "evidence": [source["evidence_ref"]],
             "reason": "the user stated it", "admission": "remember", "lifetime": "stable",
             "operations": [{"op": "put_section", "target": "profile", "section": None, "title": "Noted",
                             "body": f"{text}{hostile} end\n"}]}]
