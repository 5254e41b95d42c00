"""`cm purge` through real processes: afterwards no byte of the purged text is left anywhere under the home."""

from __future__ import annotations

import json
import os
import pty
import subprocess

from conftest import CM, Transcript, event, hook_env, read_terminal, run_cm, run_hook
from drain_support import check_end_state
from history_support import SAID, run_commits
from writer_support import admit, rows

SECTION_TEXTS = ["Tabs in Go.", "Spaces in Go.", "Indentation"]


def _scan(home: str, needles: list[str]) -> list[tuple[str, str]]:
    """(file, needle) for every file under the home that still holds one of ``needles``."""
    found = []
    for folder, _dirs, files in os.walk(home):
        for name in files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                continue
            data = open(path, "rb").read()
            found += [(os.path.relpath(path, home), n) for n in needles if n.encode() in data]
    return found


def _purge(home: str, *args: str):
    return run_cm(["purge", *args, "--yes", "--home", home])


def test_purge_of_a_live_section_leaves_no_byte_of_it(home, tmp_path, workdir):
    paths, _after = run_commits(home, tmp_path, count=2)
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")  # a Codex session freezes what it was given
    started = run_hook(home, event("SessionStart", transcript, workdir, source="startup", model="m"))
    assert started.returncode == 0 and b"Spaces in Go." in started.stdout
    assert rows(paths, "SELECT COUNT(*) FROM host_snapshots") == [(1,)]
    assert _scan(home, SECTION_TEXTS + SAID[:2])  # before: the store holds it all
    proc = _purge(home, "preferences", "Indentation")
    assert proc.returncode == 0, proc.stderr
    assert "purged preferences / Indentation: 2 version(s) and 2 observation(s)" in proc.stdout.decode()
    assert "removed from the document" in proc.stdout.decode()
    assert _scan(home, SECTION_TEXTS + SAID[:2]) == []  # database, WAL, memory, receipts, everything
    assert rows(paths, "SELECT COUNT(*) FROM host_snapshots") == [(0,)]
    assert open(paths.document("preferences")).read() == "# Preferences\n\n"
    check_end_state(paths, receipts=3)  # two drains' commits and the purge's own
    found = json.loads(run_cm(["history", "preferences", "--json", "--home", home]).stdout)
    assert [v["kind"] for v in found] == ["purge", "replace", "put"] and all(v["purgedAt"] for v in found)
    assert all(v["diff"] == "" and v["section"] == "" for v in found)
    # The same words said again are refused, not silently remembered once more.
    oid = admit(paths, SAID[1], "again", batch="b9")
    assert rows(paths, "SELECT state, issue FROM observations WHERE id = ?", (oid,)) == [
        ("quarantined", "FORGOTTEN_SOURCE")]
    proc = _purge(home, "preferences", "Indentation")
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: UNKNOWN_SECTION: ")  # its title is gone too


def test_purge_of_a_trash_entry(home, tmp_path):
    paths, _after = run_commits(home, tmp_path, count=3)
    [entry] = json.loads(run_cm(["trash", "--json", "--home", home]).stdout)
    assert _scan(home, ["Spaces in Go."])
    proc = _purge(home, entry["id"])
    assert proc.returncode == 0, proc.stderr
    assert "removed from the document" not in proc.stdout.decode()
    assert _scan(home, SECTION_TEXTS + SAID) == []
    assert json.loads(run_cm(["trash", "--json", "--home", home]).stdout) == []
    for args, code in (([entry["id"]], "ALREADY_PURGED"), (["t_0000000000"], "UNKNOWN_TRASH_ID")):
        proc = _purge(home, *args)
        assert proc.returncode == 1 and proc.stderr.decode().startswith(f"cm: {code}: "), proc.stderr
    proc = run_cm(["restore", entry["id"], "--home", home])
    assert proc.returncode == 1 and "cm: VERSION_PURGED: " in proc.stderr.decode()
    check_end_state(paths, receipts=3)  # a trash entry is in no document: purging it commits nothing


def _answer_on_a_terminal(args: list[str], answer: bytes) -> tuple[int, str]:
    """Run ``cm`` with stdin and stderr on a real pseudo-terminal, type ``answer``; exit code and what it showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([CM, *args], stdin=follower, stdout=subprocess.PIPE, stderr=follower, env=hook_env())
    os.close(follower)
    os.write(leader, answer)
    code = proc.wait(timeout=60)
    proc.stdout.close()
    try:
        return code, read_terminal(leader)
    finally:
        os.close(leader)


def test_purge_asks_first(home, tmp_path):
    paths, after = run_commits(home, tmp_path, count=1)
    proc = run_cm(["purge", "preferences", "Indentation", "--home", home], stdin=b"y\n")
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.startswith("cm: CONFIRMATION_REQUIRED: ") and "pass --yes" in err
    assert "Aborted" not in err and "cannot be undone" in err
    code, shown = _answer_on_a_terminal(["purge", "preferences", "Indentation", "--home", home], b"n\n")
    assert code == 1 and "cannot be undone" in shown and "cm: NOT_CONFIRMED: " in shown
    assert open(paths.document("preferences"), "rb").read() == after[0]
