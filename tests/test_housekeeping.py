"""The drain's start-of-run housekeeping runs with no model configured: the trash and the 7-day body
rule expire on schedule, and an interrupted commit is replayed before anything expires."""

from __future__ import annotations

import json
import signal
import sqlite3

from conftest import CM, hook_env, run_cm
from drain_support import check_end_state, drain_env, start_drain, transaction_dirs, write_script
from history_support import SCRIPT, run_commits
from writer_support import admit, configure

from cmrunner.core import config as config_mod

DAY = 86_400_000
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiLEAKBARE22"


def _trash(home: str) -> list[dict]:
    return json.loads(run_cm(["trash", "--json", "--home", home]).stdout)


def _age(db: str, sql: str, *args: object) -> None:
    conn = sqlite3.connect(db)
    conn.execute(sql, args)
    conn.commit()
    conn.close()


def _modelless_drain(home: str) -> None:
    """A real drain with the default configuration: no model, and no scripted agent either."""
    drain = start_drain(home, hook_env(CM_TEST_DRAIN_LINGER_MS="0"))
    assert drain.wait(timeout=60) == 0, drain.stderr.read()


def _texts(db: str, sql: str) -> list:
    conn = sqlite3.connect(db)
    try:
        return [row[0] for row in conn.execute(sql)]
    finally:
        conn.close()


def test_a_drain_without_a_model_purges_expired_trash(home, tmp_path):
    paths, _after = run_commits(home, tmp_path)  # put, correct, forget: "Indentation" is in the trash
    [entry] = _trash(home)
    assert config_mod.load(home).remote is None
    _modelless_drain(home)
    assert _trash(home) == [entry], "nothing expires before its retention"
    kept = _texts(paths.db, "SELECT text FROM section_versions WHERE text IS NOT NULL")
    assert any("Spaces in Go." in text for text in kept)

    _age(paths.db, "UPDATE trash SET removed_at = removed_at - ?", 30 * DAY)
    _modelless_drain(home)
    assert _trash(home) == []
    assert _texts(paths.db, "SELECT state FROM trash") == ["purged"]
    assert _texts(paths.db, "SELECT text FROM section_versions WHERE text IS NOT NULL") == []
    check_end_state(paths, receipts=3)  # expiring the trash commits nothing


def test_a_drain_without_a_model_drops_processed_and_quarantined_bodies_after_seven_days(home, tmp_path):
    paths, _cfg = configure(home)
    admit(paths, "I use tabs in Go.", "e1", batch="b1")
    admit(paths, f"my AWS secret is {AWS_SECRET} keep it handy", "e2", batch="b1")  # isolated by the scan
    drain = start_drain(home, drain_env(write_script(str(tmp_path), SCRIPT), str(tmp_path / "calls")))
    assert drain.wait(timeout=60) == 0, drain.stderr.read()
    query = "SELECT state || ':' || COALESCE(text, '-') FROM observations ORDER BY id"
    bodies = ["processed:I use tabs in Go.", f"quarantined:my AWS secret is {AWS_SECRET} keep it handy"]
    assert _texts(paths.db, query) == bodies
    _modelless_drain(home)
    assert _texts(paths.db, query) == bodies, "nothing is dropped before seven days"

    _age(paths.db, "UPDATE observations SET processed_at = processed_at - ?, enqueued_at = enqueued_at - ?",
         7 * DAY + 1000, 7 * DAY + 1000)
    _modelless_drain(home)
    assert _texts(paths.db, query) == ["processed:-", "quarantined:-"]


def test_an_interrupted_restore_is_replayed_before_its_expired_trash_entry_could_be_purged(home, tmp_path):
    paths, after = run_commits(home, tmp_path)
    [entry] = _trash(home)
    # The seam SIGKILLs the restore at the named step itself (no delay): load-independent.
    killed = run_cm(["restore", entry["id"], "--home", home], env=hook_env(CM_TEST_FAULT="after_marker"), cm=CM)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    _age(paths.db, "UPDATE trash SET removed_at = removed_at - ?", 31 * DAY)
    _modelless_drain(home)
    assert transaction_dirs(paths) == []
    assert open(paths.document("preferences"), "rb").read() == after[1]  # the restore, published forward
    assert _trash(home) == [] and _texts(paths.db, "SELECT state FROM trash") == ["restored"]
    check_end_state(paths, receipts=4)  # history holds the restored section: it was settled before the expiry ran


def test_the_drain_expires_the_trash_after_the_configured_retention(home, tmp_path):
    paths, _after = run_commits(home, tmp_path)  # put, correct, forget: "Indentation" is in the trash
    data = config_mod.load(home).data
    data["history"] = {"trashRetentionDays": 2}
    config_mod.save(home, data)
    [entry] = _trash(home)
    _age(paths.db, "UPDATE trash SET removed_at = removed_at - ?", 1 * DAY)
    _modelless_drain(home)
    assert [e["id"] for e in _trash(home)] == [entry["id"]], "one day old: inside a two-day retention"
    _age(paths.db, "UPDATE trash SET removed_at = removed_at - ?", 2 * DAY)
    _modelless_drain(home)
    assert _trash(home) == [] and _texts(paths.db, "SELECT state FROM trash") == ["purged"], \
        "three days old: past a two-day retention (the default 30 days would keep it)"
