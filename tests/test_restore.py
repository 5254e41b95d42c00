"""`cm restore`: forget → trash → restore → the section is injected again."""

from __future__ import annotations

import json

from conftest import Transcript, event, run_cm, run_hook
from drain_support import check_end_state
from history_support import run_commits


def _trash(home: str) -> list[dict]:
    return json.loads(run_cm(["trash", "--json", "--home", home]).stdout)


def _injected(home: str, tmp_path, workdir: str, name: str) -> str:
    """What a new Codex session is given at SessionStart, through the real hook."""
    transcript = Transcript(str(tmp_path / f"{name}.jsonl"), f"s-{name}")
    proc = run_hook(home, event("SessionStart", transcript, workdir, source="startup", model="m"))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def test_forget_then_restore_brings_the_section_back(home, tmp_path, workdir):
    paths, after = run_commits(home, tmp_path)
    assert "Indentation" not in after[-1].decode()
    assert "Spaces in Go." not in _injected(home, tmp_path, workdir, "forgotten")
    [entry] = _trash(home)
    proc = run_cm(["restore", entry["id"], "--home", home])
    assert proc.returncode == 0, proc.stderr
    assert "restored preferences / Indentation (receipt user-" in proc.stdout.decode()
    assert open(paths.document("preferences"), "rb").read() == after[1]  # the bytes before the forget
    assert _trash(home) == []
    facts = check_end_state(paths, receipts=4)
    assert facts["receipts"][-1].startswith("user-")
    assert "## Indentation\nSpaces in Go.\n" in _injected(home, tmp_path, workdir, "restored")
    proc = run_cm(["restore", entry["id"], "--home", home])
    assert proc.returncode == 1 and "cm: ALREADY_RESTORED: " in proc.stderr.decode()


def test_restore_refuses_a_section_created_again(home, tmp_path):
    paths, _after = run_commits(home, tmp_path)
    [entry] = _trash(home)
    with open(paths.document("preferences"), "a") as handle:
        handle.write("## Indentation\nTwo spaces.\n")
    before = open(paths.document("preferences"), "rb").read()
    proc = run_cm(["restore", entry["id"], "--home", home])
    assert proc.returncode == 1 and "cm: SECTION_EXISTS: " in proc.stderr.decode()
    assert open(paths.document("preferences"), "rb").read() == before
    proc = run_cm(["restore", "t_0000000000", "--home", home])
    assert proc.returncode == 1 and "cm: UNKNOWN_TRASH_ID: " in proc.stderr.decode()
