"""Section history (writer_proc.history): version chains, hand edits, the trash — on a real store."""

from __future__ import annotations

import os

import pytest

from cmrunner.core import sections, store
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc import history

PREFS = "# Preferences\n\n## Indentation\nTabs in Go.\n\n## Editor\nHelix.\n"


@pytest.fixture
def conn(home):
    conn = store.open_store(DataPaths(os.path.join(home, "data")))
    yield conn
    conn.close()


def _doc(text: str) -> sections.Document:
    return sections.parse("preferences", text.encode())


def test_diff_names_put_replace_remove_by_section_key():
    before = _doc(PREFS)
    after = _doc("# Preferences\n\n## Indentation\nSpaces in Go.\n\n## Shell\nfish\n")
    changes = history.diff_documents(before, after)
    assert [(c.title, c.kind) for c in changes] == sorted(
        [("Indentation", "replace"), ("Editor", "remove"), ("Shell", "put")],
        key=lambda tk: sections.section_key("preferences", tk[0]))
    replaced = next(c for c in changes if c.title == "Indentation")
    assert replaced.before == "## Indentation\nTabs in Go.\n\n" and replaced.after == "## Indentation\nSpaces in Go.\n\n"
    assert history.diff_documents(before, _doc(PREFS)) == []


def test_chain_links_versions_and_keeps_exact_text(conn):
    first = _doc(PREFS)
    with store.immediate(conn):
        assert history.observe(conn, first, 1) == 2  # both sections seen for the first time
    second = _doc(PREFS.replace("Tabs in Go.", "Spaces in Go."))
    with store.immediate(conn):
        history.record(conn, history.diff_documents(first, second), history.Provenance(history.AGENT, "job-1", "codex"), 2)
    key = sections.section_key("preferences", "Indentation")
    chain = history.versions(conn, "preferences", key)
    assert [(v.version, v.kind, v.author) for v in chain] == [(2, "replace", "memory_agent"), (1, "baseline", "user")]
    assert chain[0].parent_id == chain[1].id and chain[1].parent_id is None
    assert chain[1].text == "## Indentation\nTabs in Go.\n\n"
    assert [v.key for v in history.by_receipt(conn, "job-1")] == [key]
    with store.immediate(conn):  # nothing changed outside the Writer: nothing recorded
        assert history.observe(conn, second, 3) == 0


def test_hand_edits_are_recorded_as_the_users(conn):
    with store.immediate(conn):
        history.observe(conn, _doc(PREFS), 1)
        edited = _doc("# Preferences\n\n## Indentation\nTabs everywhere.\n")
        assert history.observe(conn, edited, 2) == 2
    heads = history.latest(conn, "preferences")
    indentation = heads[sections.section_key("preferences", "Indentation")]
    editor = heads[sections.section_key("preferences", "Editor")]
    assert (indentation.kind, indentation.author, indentation.text) == ("hand_edit", "user", "## Indentation\nTabs everywhere.\n")
    assert (editor.kind, editor.text, editor.version) == ("hand_edit", None, 2)


def test_trash_points_at_the_removing_version(conn):
    first = _doc(PREFS)
    second = _doc("# Preferences\n\n## Indentation\nTabs in Go.\n\n")
    with store.immediate(conn):
        history.observe(conn, first, 1)
        [removing] = history.record(conn, history.diff_documents(first, second), history.Provenance(history.AGENT, "j"), 5)
        trash_id = history.trash_put(conn, removing, "preferences", sections.section_key("preferences", "Editor"), 5, 100)
    [entry] = history.trash_list(conn)
    assert (entry.id, entry.version_id, entry.expires_at, entry.state) == (trash_id, removing, 105, "trashed")
    removed = history.get(conn, removing)
    assert removed is not None and removed.text is None
    parent = history.get(conn, removed.parent_id)
    assert parent is not None and parent.text == "## Editor\nHelix.\n"


def test_a_tombstone_holds_a_digest_per_scope(conn):
    with store.immediate(conn):
        history.tombstone(conn, "global", "ab" * 32, 7)
        history.tombstone(conn, "global", "ab" * 32, 8)  # idempotent
    assert history.tombstoned(conn, "global", "ab" * 32)
    assert not history.tombstoned(conn, "project:p1", "ab" * 32)
