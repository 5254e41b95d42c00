"""Helpers for history, undo and restore tests: three real drains that put, correct and forget a section."""

from __future__ import annotations

import hashlib

from drain_support import check_end_state, drain_env, start_drain, write_script
from writer_support import admit, configure

from cmrunner.core.home import DataPaths


def ref(title: str) -> str:
    return "sec_" + hashlib.sha256(title.encode()).hexdigest()[:12]


def _retain(section: str | None, body: str) -> list[dict]:
    return [{"kind": "retain", "applicability": "global", "confidence": 0.9, "evidence": "$EVIDENCE", "reason": "r",
             "admission": "remember" if section is None else "correct", "lifetime": "stable",
             "operations": [{"op": "put_section", "target": "preferences", "section": section,
                             "title": "Indentation", "body": body}]}]


SCRIPT = {"decisions": [
    _retain(None, "Tabs in Go.\n"),
    _retain(ref("Indentation"), "Spaces in Go.\n"),
    [{"kind": "forget", "applicability": "global", "confidence": 1, "evidence": "$EVIDENCE", "reason": "r",
      "operations": [{"op": "remove_section", "target": "preferences", "section": ref("Indentation")}]}],
]}
SAID = ["I use tabs in Go.", "Actually, spaces in Go.", "Forget how I indent."]


def run_commits(home: str, tmp_path, count: int = 3) -> tuple[DataPaths, list[bytes]]:
    """``count`` drains, one per user message; returns the preferences bytes after each."""
    paths, _cfg = configure(home)
    script = write_script(str(tmp_path), SCRIPT)
    after = []
    for i, text in enumerate(SAID[:count], start=1):
        admit(paths, text, f"e{i}", batch=f"b{i}")
        drain = start_drain(home, drain_env(script, str(tmp_path / "calls")))
        assert drain.wait(timeout=60) == 0, drain.stderr.read()
        after.append(open(paths.document("preferences"), "rb").read())
    check_end_state(paths, receipts=count)  # one commit per drain
    return paths, after
