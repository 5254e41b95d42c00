"""The Writer judges only what a decision writes (issue 23).

A section that was already in a document and holds what looks like a secret stays withheld on read,
is never shown to the Memory Agent, and never blocks a decision about another section: in process
(the Writer with a scripted agent) and through the real drain, the real Memory Agent client and the
loopback fake model. Issue 23's four-notes document, once flagged, takes a later decision too.
"""

from __future__ import annotations

import os
import sys

from agent_support import configure_remote, policy
from conftest import hook_env, run_cm
from mcp_support import write_doc
from writer_support import admit, all_evidence, configure, decision, put, read, retain, rows, writer

from cmrunner.secrets import withhold
from cmrunner.synthetic import fakemodel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures"))
from memory_corpus import FOUR_NOTES

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiLEAKBARE22"
CLOUD = f"## Cloud\ndeploy with the secret key {AWS_SECRET}\n\n"
DOCUMENT = "# Preferences\n\n" + CLOUD + "## Tea\nGreen.\n"
POLICIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support", "preferences_policy.py")


def test_an_old_flagged_section_does_not_block_a_decision_on_another_section(home):
    paths, cfg = configure(home)
    write_doc(paths, "preferences", DOCUMENT)
    assert [f.unit for f in withhold.scan_units(DOCUMENT, deep=True)] == [1]
    shown: list[str] = []

    def script(task, reads):
        shown.extend(doc.data.decode() for doc in reads.snapshot.values())
        return decision(task, retain(all_evidence(reads), put("preferences", "Editor", "Vim with tabs.\n")))

    admit(paths, "I use Vim with tabs.", "e1")
    w, port = writer(paths, cfg, script)
    outcome = w.run_once()
    w.close()
    assert outcome.state == "committed", outcome.code
    assert port.rejections == []
    assert shown and not any(AWS_SECRET in text for text in shown)
    assert any("[cm withheld section 'Cloud' of preferences.md" in text for text in shown)
    after = read(paths, "preferences")
    assert after.startswith(DOCUMENT) and "## Editor\nVim with tabs.\n" in after  # the old section, byte for byte
    assert [f.unit for f in withhold.scan_units(after, deep=True)] == [1]          # and still withheld on read


def test_a_decision_that_replaces_the_flagged_section_with_clean_text_commits(home):
    paths, cfg = configure(home)
    write_doc(paths, "preferences", DOCUMENT)

    def script(task, reads):
        [ref] = [s.ref for s in reads.snapshot["preferences"].sections if s.title == "Cloud"]
        return decision(task, retain(all_evidence(reads), put("preferences", "Cloud", "Keys live in the vault.\n",
                                                               section=ref)))

    admit(paths, "My cloud keys now live in the vault.", "e1")
    w, _ = writer(paths, cfg, script)
    assert w.run_once().state == "committed"
    w.close()
    after = read(paths, "preferences")
    assert AWS_SECRET not in after and "## Cloud\nKeys live in the vault.\n" in after
    assert withhold.scan_units(after, deep=True) == []


def test_a_new_secret_is_still_refused_beside_an_old_one(home):
    paths, cfg = configure(home)
    write_doc(paths, "preferences", DOCUMENT)
    admit(paths, "note", "e1")
    w, port = writer(paths, cfg, lambda task, reads: decision(
        task, retain(all_evidence(reads), put("preferences", "Router", "my password is Tr0ub4dor&3\n"))))
    assert w.run_once().code == "SENSITIVE_CONTENT_REJECTED"
    w.close()
    assert "SENSITIVE_CONTENT_REJECTED" in port.rejections
    assert read(paths, "preferences") == DOCUMENT


def _flush_with_preferences_policy(home: str, tmp_path, document: str) -> tuple[str, bytes]:
    with fakemodel.running(str(tmp_path / "fm"), policy(f"{POLICIES}:remember_in_preferences")) as fm:
        paths, _ = configure_remote(home, fm.base_url)
        write_doc(paths, "preferences", document)
        admit(paths, "I prefer short answers.", "e1")
        flushed = run_cm(["flush"], env=hook_env(COMMON_MEMORY_HOME=home), timeout=120)
        assert flushed.returncode == 0, (flushed.stdout + flushed.stderr).decode()
        assert fm.model_requests(), "the decision went through the model"
        received = open(fm.log_path, "rb").read()
    assert rows(paths, "SELECT state FROM jobs") == [("done",)]
    return read(paths, "preferences"), received


def test_the_four_notes_document_takes_a_later_decision_through_the_real_drain(home, tmp_path):
    assert withhold.scan_units(FOUR_NOTES, deep=True) == []  # flagged on main before issue 23
    after, received = _flush_with_preferences_policy(home, tmp_path, FOUR_NOTES)
    assert after.startswith(FOUR_NOTES) and "I prefer short answers." in after
    assert b"fact0xb06c9d" in received  # the model was shown the whole document


def test_an_old_flagged_section_does_not_block_the_real_drain(home, tmp_path):
    after, received = _flush_with_preferences_policy(home, tmp_path, DOCUMENT)
    assert after.startswith(DOCUMENT) and "I prefer short answers." in after
    assert AWS_SECRET.encode() not in received and AWS_SECRET[:16].encode() not in received
    assert b"cm withheld section 'Cloud' of preferences.md" in received
