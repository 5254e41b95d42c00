"""`cm demo`: the README's main job runs end to end on a fresh temporary home."""

from __future__ import annotations

import os

from conftest import run_cm


def test_demo_captures_a_session_round_trip(home):
    proc = run_cm(["demo"], timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    for name in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"):
        assert f"hook {name}" in out and f"hook {name:<17} exit 0" in out
    assert "captured:    'I prefer tabs over spaces in Go code.' (pending, sealed into a batch)" in out
    assert "inbox:       0 rows left unconsumed" in out
    assert "drain:       ran and exited" in out
    assert not os.path.exists(home), "the demo never touches the configured home"
