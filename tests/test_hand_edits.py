"""Hand edits that keep the memory running (issue 32): what people write in profile.md by hand
is read, kept and committed around; a file cm truly cannot parse blocks only the decisions that
would write it; `cm doctor` names its line and `cm fix` normalises it on confirmation.

Every shape runs a real `cm flush` (the drain's loop) against the loopback fake model, with the
user's words admitted to the real store."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from agent_support import configure_remote, policy
from conftest import CM, hook_env
from writer_support import admit

from cmrunner.core import sections, store
from cmrunner.core.home import DataPaths
from cmrunner.synthetic import fakemodel

SAID = "I prefer tabs over spaces in Go."

# name -> what the user left in profile.md by hand
SHAPES = {
    "bullets_under_h1": "# Profile\n\n- Lives in Lisbon.\n- Drinks green tea.\n",
    "changed_h1": "# About me\n\n## Location\nLives in Lisbon.\n",
    "front_matter": "---\ntitle: my profile\n# a YAML comment, not a heading\ntags: [me]\n---\n# Profile\n\n"
                    "## Location\nLives in Lisbon.\n",
    "html_comment": "# Profile\n<!-- kept for me:\n## not a section\n-->\n\n## Location\nLives in Lisbon. "
                    "<!-- moved in 2024 -->\n",
    "duplicate_titles": "# Profile\n\n## Notes\nLives in Lisbon.\n\n## Work\nBackend.\n\n## Notes\nDrinks tea.\n",
    "emptied": "",
    "no_h1_at_all": "Lives in Lisbon.\n\n## Work\nBackend.\n",
}


def _flush(home: str) -> subprocess.CompletedProcess:
    return subprocess.run([CM, "--home", home, "flush"], env=hook_env(), capture_output=True, text=True, timeout=180)


def _cm(home: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([CM, "--home", home, *args], env=hook_env(), capture_output=True, text=True, timeout=120,
                          input=stdin)


def _write(paths: DataPaths, target: str, text: str | bytes) -> None:
    os.makedirs(os.path.dirname(paths.document(target)), exist_ok=True)
    with open(paths.document(target), "wb") as handle:
        handle.write(text.encode() if isinstance(text, str) else text)


def _read(paths: DataPaths, target: str) -> str:
    with open(paths.document(target), encoding="utf-8") as handle:
        return handle.read()


def _rows(paths: DataPaths, sql: str, params: tuple = ()) -> list[tuple]:
    conn = store.connect(paths.db, 1000)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_hand_edited_profile_keeps_the_memory_running(shape: str, home: str, tmp_path) -> None:
    """The job commits into the hand-edited profile; every byte the user wrote stays where it was
    (an emptied file is an empty document and starts afresh), and the edit is recorded as the user's."""
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        _write(paths, "profile", SHAPES[shape])
        admit(paths, SAID, "e1")
        done = _flush(home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _rows(paths, "SELECT state FROM jobs") == [("done",)]
    after = _read(paths, "profile")
    if SHAPES[shape].strip():
        assert after.startswith(SHAPES[shape]), "the hand-written text is kept byte for byte, in its place"
    else:
        assert after.startswith("# Profile\n\n")
    doc = sections.parse("profile", after)
    assert [s.body for s in doc.sections if s.title == "User turn 1"] == [SAID + "\n"]
    if SHAPES[shape].strip():
        authors = {row[0] for row in _rows(paths, "SELECT author FROM section_versions WHERE target = 'profile' "
                                                  "AND kind IN ('baseline', 'hand_edit')")}
        assert authors == {"user"}, "what the user wrote is recorded as the user's at this commit"


def test_the_untitled_text_is_shown_to_the_agent_and_recorded_in_history(home: str, tmp_path) -> None:
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        _write(paths, "profile", SHAPES["bullets_under_h1"])
        admit(paths, SAID, "e1")
        assert _flush(home).returncode == 0
        requests = fm.model_requests()
    results = [json.loads(item["output"]) for r in requests for item in r["body"].get("input", [])
               if item.get("type") == "function_call_output"]
    # The documents arrive in the first read's "memory" (everything the job holds, when it fits) or
    # in a snapshot manifest's "documents".
    shown = [d for r in results if isinstance(r, dict) for d in (r.get("memory") or r.get("documents") or [])]
    profile = next(d for d in shown if d["target"] == "profile")
    assert profile["sections"][0]["untitled"] is True and profile["sections"][0]["title"] == ""
    assert "- Lives in Lisbon." in profile["text"]
    texts = _rows(paths, "SELECT text, author FROM section_versions WHERE target = 'profile' AND title = ''")
    assert texts == [("- Lives in Lisbon.\n- Drinks green tea.\n", "user")]


def test_the_injected_memory_carries_the_untitled_text(home: str, tmp_path) -> None:
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
    _write(paths, "profile", SHAPES["bullets_under_h1"])
    shown = _cm(home, "show")
    assert shown.returncode == 0, shown.stderr
    assert "- Lives in Lisbon." in shown.stdout and "- Drinks green tea." in shown.stdout


BROKEN = "# Profile\n\n## Location\nLives in Lisbon.\n```\nan unclosed fence\n"


def _split_policy(tmp_path) -> str:
    """A policy file: Lisbon goes to profile, everything else to preferences, each with its own evidence."""
    path = tmp_path / "split_policy.py"
    path.write_text(
        "def decide(state):\n"
        "    out = []\n"
        "    for s in state['sources']:\n"
        "        if s['context_only'] or not s['evidence_ref']:\n"
        "            continue\n"
        "        target = 'profile' if 'Lisbon' in s['text'] else 'preferences'\n"
        "        out.append({'kind': 'retain', 'applicability': 'global', 'confidence': 0.9,\n"
        "                    'evidence': [s['evidence_ref']], 'reason': 'said', 'admission': 'remember',\n"
        "                    'lifetime': 'stable', 'operations': [{'op': 'put_section', 'target': target,\n"
        "                    'section': None, 'title': 'Turn ' + s['evidence_ref'], 'body': s['text'] + '\\n'}]})\n"
        "    return out\n")
    return f"{path}:decide"


def test_a_broken_document_blocks_only_the_decisions_that_write_it(home: str, tmp_path) -> None:
    """profile.md cannot be parsed (an unclosed fence): the preference commits now, the profile fact
    waits in a dead job whose cause names profile and its line; `cm status` says to run `cm fix`;
    `cm fix profile --yes` writes the normalised file, keeps the original in history and revives
    the waiting job, which the next flush commits."""
    with fakemodel.running(str(tmp_path / "fm"), policy(_split_policy(tmp_path))) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        _write(paths, "profile", BROKEN)
        tabs = admit(paths, SAID, "e1")
        lisbon = admit(paths, "I moved to Lisbon last year.", "e2")
        done = _flush(home)
        assert f"Turn ev_{tabs}" in _read(paths, "preferences"), done.stdout + done.stderr
        assert _read(paths, "profile") == BROKEN, "nothing is written to the broken file"
        jobs = _rows(paths, "SELECT state, issue, rejection FROM jobs ORDER BY created_at, id")
        assert sorted(j[:2] for j in jobs) == [("dead", "INVALID_DOCUMENT"), ("done", None)]
        waiting = next(j for j in jobs if j[0] == "dead")
        record = json.loads(waiting[2])
        assert record["target"] == "profile" and record["rule"].startswith("line 5:")
        states = dict(_rows(paths, "SELECT id, state FROM observations"))
        assert states == {tabs: "processed", lisbon: "dead"}
        status = _cm(home, "status")
        assert "INVALID_DOCUMENT" in status.stdout and "on profile" in status.stdout
        assert "cm fix profile" in status.stdout
        doctor = _cm(home, "doctor")
        assert "profile.md line 5" in doctor.stdout + doctor.stderr
        manifests = [json.loads(item["output"]) for r in fm.model_requests() for item in r["body"].get("input", [])
                     if item.get("type") == "function_call_output"]
        manifests = [m for m in manifests if isinstance(m, dict) and ("memory" in m or "documents" in m)]
        # The first read's "memory" (everything the job holds, when it fits) or a manifest's "documents";
        # each job's first read lists both of its documents.
        listed = {d["target"]: d for d in (manifests[0].get("memory") or manifests[0].get("documents"))}
        assert listed["profile"]["blocked"] == "INVALID_DOCUMENT" and listed["profile"]["text"] == ""
        assert "unclosed" not in json.dumps(manifests), "a file cm cannot read is never sent"

        fixed = _cm(home, "fix", "profile", "--yes")
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        assert "revived 1 job" in fixed.stdout
        assert _read(paths, "profile") == BROKEN + "```\n"
        originals = _rows(paths, "SELECT text, author FROM section_versions WHERE target = 'profile' "
                                 "AND kind IN ('hand_edit', 'baseline') ORDER BY id")
        assert (BROKEN, "user") in originals, "the file as the user left it is kept in history"
        again = _flush(home)
        assert again.returncode == 0, again.stdout + again.stderr
    assert f"Turn ev_{lisbon}" in _read(paths, "profile")
    assert dict(_rows(paths, "SELECT id, state FROM observations")) == {tabs: "processed", lisbon: "processed"}


def test_when_every_decision_waits_for_a_broken_document_nothing_is_written(home: str, tmp_path) -> None:
    """The only decision writes the broken profile: the job is dead with the document's cause (not
    retried by itself), its words are kept for `cm retry`, and the file is byte-identical."""
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        _write(paths, "profile", BROKEN)
        said = admit(paths, SAID, "e1")
        done = _flush(home)
        requests = len(fm.model_requests())
    assert done.returncode == 1 and "INVALID_DOCUMENT" in done.stdout + done.stderr
    assert _read(paths, "profile") == BROKEN
    assert _rows(paths, "SELECT state, issue FROM jobs") == [("dead", "INVALID_DOCUMENT")]
    assert _rows(paths, "SELECT id, state FROM observations") == [(said, "dead")]
    assert requests <= 4, "one attempt: a broken file is not retried by itself"
