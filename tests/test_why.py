"""`cm why` after real drains: the commits behind a section and the user's exact words as its evidence."""

from __future__ import annotations

import json
import re
import sqlite3

from conftest import hook_env, run_cm
from drain_support import drain_env, start_drain, write_script
from history_support import SAID, SCRIPT, ref, run_commits
from mcp_support import configure, retain_template, script_file
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
    assert f"“{SAID[1]}”" in text and ", you said, Codex CLI session, 2026-11-30 00:00 UTC: " in text
    assert agent not in text and "session test" not in text  # cm's ids stay in --json


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


def test_an_imports_evidence_is_the_imported_text_and_its_file_not_the_envelope(home, tmp_path):
    configure(home)
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nI write   Rust every day\nand prefer neovim.\n")
    env = hook_env(CM_TEST_AGENT_SCRIPT=script_file(str(tmp_path), [retain_template("Imported note {first}")]))
    assert run_cm(["import", str(notes)], env=env).returncode == 0
    shown = run_cm(["why", "profile", "--home", home]).stdout.decode()
    assert "you imported, imported from notes.md: “# Notes I write Rust every day and prefer neovim.”" in shown
    for internal in ("importId", "contentDigest", "blocks", "document_import", 'import:["markdown"'):
        assert internal not in shown
    [found] = _why(home, "profile")
    [evidence] = found["evidence"]
    assert (evidence["file"], evidence["from"]) == ("notes.md", "imported from notes.md")
    history = run_cm(["history", "--home", home]).stdout.decode()
    assert "(imported from notes.md)" in history and 'import:["markdown"' not in history and "cm-import:" not in history
    [version] = json.loads(run_cm(["history", "--json", "--home", home]).stdout)
    assert version["source"] == "imported from notes.md"


def test_why_explains_a_removed_section_and_keeps_its_evidence_after_a_restore(home, tmp_path):
    run_commits(home, tmp_path, count=3)  # the third drain forgets the section
    [removed] = _why(home, "preferences", ref("Indentation"))
    assert removed["removed"] and removed["section"] == "Indentation"
    assert [v["kind"] for v in removed["versions"]] == ["remove", "replace", "put"]
    assert [e["id"] for e in removed["evidence"]] == [1, 2] and removed["fromCommits"]
    text = run_cm(["why", "preferences", "Indentation", "--home", home]).stdout.decode()
    assert "not in the document now: removed by v3" in text
    [entry] = json.loads(run_cm(["trash", "--json", "--home", home]).stdout)
    assert run_cm(["restore", entry["id"], "--home", home]).returncode == 0
    [restored] = _why(home, "preferences", "Indentation")
    assert not restored["removed"] and [e["id"] for e in restored["evidence"]] == [1, 2]
    assert "no evidence linked" not in run_cm(["why", "preferences", "--home", home]).stdout.decode()


def test_why_after_an_undo_still_shows_the_evidence(home, tmp_path):
    """Issue 36: "after an undo the evidence is reported as missing". Two drains (put, correct), then
    `cm undo` of the correction: the section's text is the first commit's again, and `cm why`
    names the evidence behind it with the user's words, never "no evidence linked"."""
    run_commits(home, tmp_path, count=2)
    history = json.loads(run_cm(["history", "preferences", "Indentation", "--json", "--home", home]).stdout)
    undo = run_cm(["undo", history[0]["receipt"], "--home", home])
    assert undo.returncode == 0, undo.stderr
    [found] = _why(home, "preferences", "Indentation")
    assert [v["kind"] for v in found["versions"]] == ["undo", "replace", "put"]
    assert found["evidence"] and 1 in [e["id"] for e in found["evidence"]], found
    assert SAID[0] in [e["words"] for e in found["evidence"]], found
    text = run_cm(["why", "preferences", "Indentation", "--home", home]).stdout.decode()
    assert "no evidence linked" not in text and "evidence #1, you said" in text and f"“{SAID[0]}”" in text, text
