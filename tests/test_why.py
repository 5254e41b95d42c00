"""`cm why` after real drains: the commits behind a section and the user's exact words as its evidence."""

from __future__ import annotations

import json
import re
import sqlite3

from conftest import run_cm
from drain_support import drain_env, start_drain, write_script
from history_support import SAID, SCRIPT, ref, run_commits
from writer_support import admit


def _why(home: str, *args: str) -> list[dict]:
    proc = run_cm(["why", *args, "--json", "--home", home])
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_why_shows_the_users_exact_words_and_the_commits(home, tmp_path):
    run_commits(home, tmp_path, count=2)
    [found] = _why(home, "preferences", "Indentation")
    assert [e["words"] for e in found["evidence"]] == SAID[:2]
    assert {(e["provenance"], e["host"], e["session"]) for e in found["evidence"]} == {
        ("user_explicit", "codex_user_delivery", "test")}
    [agent] = {e["agentInstance"] for e in found["evidence"]}  # one stable id for the Codex integration
    assert re.fullmatch(r"codex:[0-9a-f]{12}", agent)
    assert [(v["kind"], v["decision"]) for v in found["versions"]] == [("replace", "retain"), ("put", "retain")]
    assert found["known"] and found["editedByYou"] is None and found["ref"] == ref("Indentation")
    text = run_cm(["why", "preferences", "--home", home]).stdout.decode()
    assert f"preferences / Indentation  ({ref('Indentation')})" in text
    assert f"user_explicit via codex_user_delivery ({agent}), session test" in text and f"“{SAID[1]}”" in text


def test_a_hand_edit_is_yours_and_pruned_words_say_so(home, tmp_path):
    paths, _after = run_commits(home, tmp_path, count=2)
    text = open(paths.document("preferences")).read()
    with open(paths.document("preferences"), "w") as handle:
        handle.write(text + "## Editor\nHelix.\n")
    [editor] = _why(home, "preferences", "Editor")
    assert not editor["known"] and editor["versions"] == [] and editor["evidence"] == []
    assert "not in history yet" in run_cm(["why", "preferences", "Editor", "--home", home]).stdout.decode()
    # Eight days pass: the next drain prunes the processed words by the 7-day rule.
    conn = sqlite3.connect(paths.db)
    conn.execute("UPDATE observations SET processed_at = processed_at - 8 * 86400000")
    conn.commit()
    conn.close()
    drain = start_drain(home, drain_env(write_script(str(tmp_path), SCRIPT), str(tmp_path / "calls")))
    assert drain.wait(timeout=60) == 0, drain.stderr.read()
    [indentation] = _why(home, "preferences", "Indentation")
    assert [e["words"] for e in indentation["evidence"]] == [None, None]
    assert all(e["gone"].startswith("pruned by the 7-day rule") for e in indentation["evidence"])
    assert "(words pruned by the 7-day rule" in run_cm(["why", "preferences", "--home", home]).stdout.decode()


def test_bad_names_get_codes(home, tmp_path):
    run_commits(home, tmp_path, count=2)
    proc = run_cm(["why", "preferences", "Nope", "--home", home])
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: UNKNOWN_SECTION: ")
    proc = run_cm(["why", "notes", "--home", home])
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: INVALID_TARGET_REFERENCE: ")


def test_a_section_edited_by_hand_then_seen_by_a_commit_says_edited_by_you(home, tmp_path):
    paths, _after = run_commits(home, tmp_path, count=1)  # "Indentation": Tabs in Go.
    text = open(paths.document("preferences")).read()
    with open(paths.document("preferences"), "w") as handle:
        handle.write(text.replace("Tabs in Go.", "Tabs, always."))
    # The next commit writes another section of the document, and so records the hand edit in history.
    shell = [{"kind": "retain", "applicability": "global", "confidence": 0.9, "evidence": "$EVIDENCE", "reason": "r",
              "admission": "remember", "lifetime": "stable",
              "operations": [{"op": "put_section", "target": "preferences", "section": None, "title": "Shell",
                              "body": "fish\n"}]}]
    admit(paths, "I use fish.", "e2", batch="b2")
    script = write_script(str(tmp_path), {"decisions": [SCRIPT["decisions"][0], shell]})
    drain = start_drain(home, drain_env(script, str(tmp_path / "calls")))
    assert drain.wait(timeout=60) == 0, drain.stderr.read()
    [indentation] = _why(home, "preferences", "Indentation")
    assert [v["kind"] for v in indentation["versions"]] == ["hand_edit", "put"], indentation
    assert indentation["editedByYou"] is not None
    shown = run_cm(["why", "preferences", "Indentation", "--home", home]).stdout.decode()
    assert f"  edited by you on {indentation['editedByYou']}\n" in shown
    [written] = _why(home, "preferences", "Shell")
    assert written["editedByYou"] is None and "edited by you" not in run_cm(
        ["why", "preferences", "Shell", "--home", home]).stdout.decode()
