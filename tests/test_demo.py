"""`cm demo`: the README's main job runs the whole loop on a fresh temporary home."""

from __future__ import annotations

import os

from conftest import run_cm


def test_demo_runs_the_whole_loop_against_the_synthetic_model(home):
    proc = run_cm(["demo"], timeout=180)
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    assert "SYNTHETIC" in out and "127.0.0.1" in out
    for name in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"):
        assert f"  {name:<17} exit 0" in out
    assert "drain:       consumed the inbox, ran the Memory Agent and committed" in out
    # the committed Markdown, what consumers receive, and the receipt
    assert "----- " in out and "/memory/profile.md" in out
    assert out.count("I prefer tabs over spaces in Go code.") >= 3
    assert "cm show --plain" in out and "<<<common-memory-data" in out
    assert '"observationIds"' in out and '"documents"' in out
    assert "session 2:   SessionStart exit 0" in out and "carries what session 1 said" in out
    assert not os.path.exists(home), "the demo never touches the configured home"
