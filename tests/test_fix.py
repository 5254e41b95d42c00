"""`cm fix <document>` and `cm doctor`'s memory-file check (issue 32): a hand-edited file cm cannot
read is named with its line, shown normalised, and written only on confirmation, with the file as it
was kept in section history. Real `cm` subprocesses on a real home and store."""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import CM, hook_env
from writer_support import configure

from cmrunner.core import sections, store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths


def _cm(home: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CM, "--home", home, *args], env=hook_env(), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def _write(paths: DataPaths, target: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(paths.document(target)), exist_ok=True)
    with open(paths.document(target), "wb") as handle:
        handle.write(data)


def _bytes(paths: DataPaths, target: str) -> bytes:
    with open(paths.document(target), "rb") as handle:
        return handle.read()


def _versions(paths: DataPaths, target: str) -> list[tuple]:
    conn = store.connect(paths.db, 1000)
    try:
        return conn.execute("SELECT title, text, kind, author FROM section_versions WHERE target = ? ORDER BY id",
                            (target,)).fetchall()
    finally:
        conn.close()


# Every rule a hand edit can break, in one file, with what the user wrote around it.
BROKEN = ("---\ntitle: me\n---\n# About me\n\n- lives in Lisbon\n\n## Work\nbackend\n# Hobbies\nchess\n"
          "##  Tools ##\nvim\nEditor\n------\nemacs too\n## Notes\nx\r y\n## Notes\nsecond\n```\nunclosed\n")
NORMALISED = ("---\ntitle: me\n---\n# About me\n\n- lives in Lisbon\n\n## Work\nbackend\n## Hobbies\nchess\n"
              "## Tools\nvim\n## Editor\nemacs too\n## Notes\nx\n y\n## Notes (2)\nsecond\n```\nunclosed\n```\n")


def test_normalise_repairs_each_broken_line_and_keeps_every_other_byte() -> None:
    with pytest.raises(CmError) as info:
        sections.parse("profile", BROKEN)
    assert info.value.code == "INVALID_DOCUMENT" and "line 18: contains a carriage return" in info.value.message
    assert sections.normalise("profile", BROKEN) == NORMALISED
    doc = sections.parse("profile", NORMALISED)
    assert doc.preamble is not None and doc.preamble.body == "- lives in Lisbon\n\n"
    assert sections.normalise("profile", NORMALISED) == NORMALISED, "normalising is idempotent"


def test_cm_fix_asks_and_writes_nothing_without_a_yes(home: str) -> None:
    paths, _cfg = configure(home)
    _write(paths, "profile", BROKEN.encode())
    shown = _cm(home, "fix", "profile")
    assert shown.returncode == 1 and "cm: CONFIRMATION_REQUIRED:" in shown.stderr
    assert "line 18" in shown.stdout and "+## Hobbies" in shown.stdout and "-# Hobbies" in shown.stdout
    assert _bytes(paths, "profile") == BROKEN.encode(), "nothing is written on a refusal"


def test_cm_fix_yes_writes_the_normalised_file_and_keeps_the_original_in_history(home: str) -> None:
    paths, _cfg = configure(home)
    _write(paths, "profile", BROKEN.encode())
    done = _cm(home, "fix", "profile", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _bytes(paths, "profile") == NORMALISED.encode()
    versions = _versions(paths, "profile")
    assert ("", BROKEN, "baseline", "user") in versions, "the file as it was, whole, is the user's version"
    assert ("Notes (2)", "## Notes (2)\nsecond\n```\nunclosed\n```\n", "fix", "user") in versions
    history = _cm(home, "history", "profile")
    assert history.returncode == 0 and "fix by user" in history.stdout
    assert f"profile / {sections.UNTITLED_LABEL}  baseline by user" in history.stdout
    again = _cm(home, "fix", "profile")
    assert again.returncode == 0 and "nothing to write" in again.stdout


def test_cm_fix_of_a_readable_file_with_repeated_titles_numbers_them(home: str) -> None:
    paths, _cfg = configure(home)
    text = "# Profile\n\n## Notes\nLisbon.\n## Notes\nTea.\n"
    _write(paths, "profile", text.encode())
    plan = _cm(home, "fix", "profile")
    assert plan.returncode == 1 and "+## Notes (2)" in plan.stdout
    assert _cm(home, "fix", "profile", "--yes").returncode == 0
    assert _bytes(paths, "profile") == b"# Profile\n\n## Notes\nLisbon.\n## Notes (2)\nTea.\n"
    kept = [v for v in _versions(paths, "profile") if v[2] == "baseline"]
    assert ("Notes", "## Notes\nTea.\n", "baseline", "user") in kept, "the second Notes, as it was"


@pytest.mark.parametrize(("data", "code"), [
    (b"# Profile\n\n## A\ncaf\xe9\n", "INVALID_DOCUMENT"),
    (b"# Profile\n\n## A\n" + b"x" * 20000 + b"\n", "DOCUMENT_TOO_LARGE"),
])
def test_what_normalising_cannot_repair_is_refused_and_the_file_kept(home: str, data: bytes, code: str) -> None:
    paths, _cfg = configure(home)
    _write(paths, "profile", data)
    refused = _cm(home, "fix", "profile", "--yes")
    assert refused.returncode == 1 and f"cm: {code}:" in refused.stderr and "Traceback" not in refused.stderr
    assert _bytes(paths, "profile") == data


def test_cm_fix_of_a_missing_file_or_a_bad_name_says_so(home: str) -> None:
    configure(home)
    assert "cm: NOTHING_TO_FIX:" in _cm(home, "fix", "profile", "--yes").stderr
    assert "cm: INVALID_TARGET_REFERENCE:" in _cm(home, "fix", "notes", "--yes").stderr


def test_cm_doctor_names_the_file_and_line_of_a_memory_file_it_cannot_read(home: str) -> None:
    paths, _cfg = configure(home)
    _write(paths, "preferences", b"# Preferences\n\n- tabs\n")  # accepted as written
    _write(paths, "project:web", b"# Project\n\n## Build\nmake\n<!-- TODO\n")
    doctor = _cm(home, "doctor", "--json")
    assert doctor.returncode == 1
    assert f"{paths.document('project:web')} line 5: an HTML comment opened here is never closed" in doctor.stdout
    assert "run `cm fix project:web`" in doctor.stdout
    os.remove(paths.document("project:web"))
    healthy = _cm(home, "doctor")
    assert "ok    memory files: 1 document(s), each in a shape cm reads" in healthy.stdout
