"""Section history (core.history): version chains, hand edits, the trash — on a real store."""

from __future__ import annotations

import os

import pytest

from cmrunner.core import history, sections, store
from cmrunner.core.home import DataPaths

PREFS = "# Preferences\n\n## Indentation\nTabs in Go.\n\n## Editor\nHelix.\n"
AGENT = history.Provenance(history.AGENT, "codex", "s-1", "fake-model")
DAY = 86_400_000


@pytest.fixture
def conn(home):
    conn = store.open_store(DataPaths(os.path.join(home, "data")))
    yield conn
    conn.close()


def _doc(text: str) -> sections.Document:
    return sections.parse("preferences", text.encode())


def _key(title: str) -> str:
    return sections.section_key("preferences", title)


def _commit(conn, job_id: str, before: str, after: str, at: int, decisions: dict | None = None) -> list[int]:
    with store.immediate(conn):
        history.stage(conn, job_id, {"preferences": _doc(before)}, {"preferences": _doc(after)}, decisions or {},
                      AGENT, at)
    with store.immediate(conn):
        return history.settle(conn, job_id, at)


def test_diff_names_put_replace_remove_by_section_key():
    before = _doc(PREFS)
    after = _doc("# Preferences\n\n## Indentation\nSpaces in Go.\n\n## Shell\nfish\n")
    changes = history.diff_documents(before, after)
    assert sorted((c.title, c.kind) for c in changes) == [("Editor", "remove"), ("Indentation", "replace"),
                                                          ("Shell", "put")]
    assert [c.key for c in changes] == sorted(c.key for c in changes)
    replaced = next(c for c in changes if c.title == "Indentation")
    assert replaced.before == "## Indentation\nTabs in Go.\n\n" and replaced.after == "## Indentation\nSpaces in Go.\n\n"
    assert history.diff_documents(before, _doc(PREFS)) == []


def test_a_commit_links_versions_and_keeps_exact_text(conn):
    after = PREFS.replace("Tabs in Go.", "Spaces in Go.")
    ids = _commit(conn, "job-1", PREFS, after, 10, {_key("Indentation"): "retain"})
    chain = history.versions(conn, "preferences", _key("Indentation"))
    assert [(v.version, v.kind, v.author, v.decision, v.receipt_id) for v in chain] == [
        (2, "replace", "memory_agent", "retain", "job-1"), (1, "baseline", "user", None, None)]
    assert chain[0].parent_id == chain[1].id and chain[1].parent_id is None
    assert (chain[0].client, chain[0].session_id, chain[0].model) == ("codex", "s-1", "fake-model")
    assert (chain[1].client, chain[1].model) == (None, None)
    assert chain[1].text == "## Indentation\nTabs in Go.\n\n" and chain[0].text == "## Indentation\nSpaces in Go.\n\n"
    assert [v.id for v in history.by_receipt(conn, "job-1")] == [chain[0].id]
    assert len(ids) == 3  # two baselines, one replace
    assert conn.execute("SELECT COUNT(*) FROM section_changes_pending").fetchone()[0] == 0


def test_hand_edits_between_commits_are_the_users(conn):
    _commit(conn, "job-1", PREFS, PREFS + "## Shell\nfish\n", 10)
    edited = "# Preferences\n\n## Indentation\nTabs everywhere.\n\n## Shell\nfish\n"  # Editor deleted by hand
    _commit(conn, "job-2", edited, edited + "\n## Font\nIosevka\n", 20)
    heads = history.latest(conn, "preferences")
    assert (heads[_key("Indentation")].kind, heads[_key("Indentation")].author) == ("hand_edit", "user")
    assert heads[_key("Indentation")].text == "## Indentation\nTabs everywhere.\n\n"
    assert (heads[_key("Editor")].kind, heads[_key("Editor")].text, heads[_key("Editor")].version) == ("hand_edit", None, 2)
    assert (heads[_key("Font")].kind, heads[_key("Font")].receipt_id) == ("put", "job-2")
    assert history.trash_list(conn) == []  # a hand deletion is the user's own, not trash


def test_a_removal_goes_to_the_trash_pointing_at_its_version(conn):
    [*_, removing] = _commit(conn, "job-1", PREFS, "# Preferences\n\n## Indentation\nTabs in Go.\n\n", 5,
                             {_key("Editor"): "forget"})
    [entry] = history.trash_list(conn)
    assert (entry.version_id, entry.key, entry.removed_at, entry.state) == (removing, _key("Editor"), 5, "trashed")
    removed = history.get(conn, removing)
    assert removed is not None and removed.text is None and removed.decision == "forget"
    parent = history.get(conn, removed.parent_id)
    assert parent is not None and parent.text == "## Editor\nHelix.\n"


def test_an_abandoned_stage_is_replaced_and_never_settles(conn):
    with store.immediate(conn):
        history.stage(conn, "job-1", {"preferences": _doc(PREFS)}, {"preferences": _doc(PREFS + "\n## A\nx\n")}, {},
                      AGENT, 1)
    assert len(_commit(conn, "job-2", PREFS, PREFS, 2)) == 2  # only the baselines; job-1's rows are gone
    with store.immediate(conn):
        assert history.settle(conn, "job-1", 3) == []
    assert sorted(v.kind for v in history.versions(conn, "preferences")) == ["baseline", "baseline"]


def test_the_trash_is_purged_when_its_retention_ends(conn):
    [*_, removing] = _commit(conn, "job-1", PREFS, "# Preferences\n\n## Indentation\nTabs in Go.\n\n", 5)
    with store.immediate(conn):
        assert history.expire_trash(conn, 5 + 30 * DAY - 1, 30 * DAY) == 0
    assert [e.state for e in history.trash_list(conn)] == ["trashed"]
    with store.immediate(conn):
        assert history.expire_trash(conn, 5 + 30 * DAY, 30 * DAY) == 1
    assert history.trash_list(conn) == [] and [e.state for e in history.trash_list(conn, "purged")] == ["purged"]
    editor = history.versions(conn, "preferences", _key("Editor"))
    assert [v.id for v in editor][0] == removing
    assert all(v.text is None and v.title == "" and v.purged_at == 5 + 30 * DAY for v in editor)
    assert history.latest(conn, "preferences")[_key("Indentation")].text == "## Indentation\nTabs in Go.\n\n"
