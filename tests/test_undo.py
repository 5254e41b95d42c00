"""`cm undo` through real processes: v1 → v2 → undo gives v1's bytes back, as a commit of its own."""

from __future__ import annotations

import json

from conftest import run_cm
from drain_support import check_end_state
from history_support import ref, run_commits


def _history(home: str) -> list[dict]:
    proc = run_cm(["history", "preferences", "Indentation", "--json", "--home", home])
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _fails(home: str, args: list[str], code: str) -> str:
    proc = run_cm([*args, "--home", home])
    err = proc.stderr.decode()
    assert proc.returncode == 1 and f"cm: {code}: " in err and "Traceback" not in err, (args, err)
    return err


def test_undo_of_a_correction_gives_the_first_bytes_back(home, tmp_path):
    paths, after = run_commits(home, tmp_path, count=2)
    v2 = _history(home)[0]
    proc = run_cm(["undo", v2["receipt"], "--home", home])
    assert proc.returncode == 0, proc.stderr
    assert f"undid {v2['id']}: preferences / Indentation" in proc.stdout.decode()
    assert open(paths.document("preferences"), "rb").read() == after[0]
    newest = _history(home)[0]
    assert (newest["kind"], newest["author"], newest["version"]) == ("undo", "user", 3)
    assert newest["receipt"].startswith("user-") and "-Spaces in Go.\n+Tabs in Go.\n" in newest["diff"]
    receipt = json.load(open(f"{paths.receipts}/{newest['receipt']}.json"))
    assert receipt["decisions"] == ["undo"] and receipt["model"] == "user" and receipt["observationIds"] == []
    facts = check_end_state(paths, receipts=3)
    assert facts["receipts"][-1] == newest["receipt"]
    # undoing the undo is refused; the same undo again finds the section changed since
    _fails(home, ["undo", newest["id"]], "UNDO_OF_UNDO")
    err = _fails(home, ["undo", v2["id"]], "SECTION_CHANGED_SINCE")
    assert "-## Indentation\n" not in err and "+Tabs in Go." in err  # the diff: what v2 wrote → what is there now


def test_undo_of_a_first_put_removes_the_section(home, tmp_path):
    paths, _after = run_commits(home, tmp_path, count=1)
    v1 = _history(home)[0]
    assert run_cm(["undo", v1["id"], "--home", home]).returncode == 0
    assert open(paths.document("preferences")).read() == "# Preferences\n\n"
    assert json.loads(run_cm(["trash", "--json", "--home", home]).stdout) == []  # the user's own undo is not trash
    check_end_state(paths, receipts=2)


def test_a_hand_edit_blocks_undo_unless_forced(home, tmp_path):
    paths, _after = run_commits(home, tmp_path, count=2)
    v2 = _history(home)[0]
    text = open(paths.document("preferences")).read()
    with open(paths.document("preferences"), "w") as handle:
        handle.write(text.replace("Spaces in Go.", "Spaces, four of them."))
    err = _fails(home, ["undo", v2["id"]], "SECTION_CHANGED_SINCE")
    assert "+Spaces, four of them." in err
    assert "Spaces, four of them." in open(paths.document("preferences")).read()  # nothing published
    proc = run_cm(["undo", v2["id"], "--force", "--home", home])
    assert proc.returncode == 0, proc.stderr
    assert "Tabs in Go.\n" in open(paths.document("preferences")).read()
    kinds = [v["kind"] for v in _history(home)]
    assert kinds[:2] == ["undo", "hand_edit"]  # the hand edit was recorded as the user's first


def test_unknown_ids_get_codes(home, tmp_path):
    run_commits(home, tmp_path, count=1)
    _fails(home, ["undo", "v999999"], "UNKNOWN_VERSION")
    _fails(home, ["undo", "no-such-receipt"], "UNKNOWN_VERSION")
    _fails(home, ["undo", ref("Indentation")], "UNKNOWN_VERSION")


def test_a_document_hand_edited_out_of_shape_is_refused(home, tmp_path):
    paths, _after = run_commits(home, tmp_path, count=2)
    v2 = _history(home)[0]
    broken = open(paths.document("preferences")).read() + "```\nan unclosed fence\n"  # cm cannot parse it
    with open(paths.document("preferences"), "w") as handle:
        handle.write(broken)
    _fails(home, ["undo", v2["id"]], "INVALID_DOCUMENT")
    assert open(paths.document("preferences")).read() == broken  # nothing published
