"""`cm history` and `cm trash` after real drains: put → replace → forget, each a version with a diff."""

from __future__ import annotations

import json
import re

from conftest import run_cm
from drain_support import drain_env, start_drain, write_script
from history_support import ref as _ref, run_commits
from writer_support import admit, configure


def test_history_lists_each_version_newest_first_with_diffs(home, tmp_path):
    run_commits(home, tmp_path)
    proc = run_cm(["history", "preferences", "Indentation", "--json", "--home", home])
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert [(v["version"], v["kind"], v["decision"], v["author"]) for v in found] == [
        (3, "remove", "forget", "memory_agent"), (2, "replace", "retain", "memory_agent"),
        (1, "put", "retain", "memory_agent")]
    assert [v["parent"] for v in found] == [found[1]["id"], found[2]["id"], None]
    assert all(v["receipt"] and re.fullmatch(r"codex:[0-9a-f]{12}", v["client"]) and v["session"] == "test"
               for v in found)
    assert "-Tabs in Go.\n+Spaces in Go.\n" in found[1]["diff"]
    assert "-Spaces in Go.\n" in found[0]["diff"] and found[0]["removed"]
    assert found[0]["ref"] == _ref("Indentation")
    text = run_cm(["history", "preferences", _ref("Indentation"), "--home", home])
    assert text.returncode == 0
    out = text.stdout.decode()
    ids = [v["id"] for v in found]
    assert out.index(f"{ids[0]}  preferences / Indentation  remove by memory_agent (forget)") \
        < out.index(f"{ids[1]}  preferences / Indentation  replace by") < out.index(f"{ids[2]}  preferences / Indentation  put by")
    assert "+Tabs in Go." in out


def _put(target: str, title: str, body: str, section: str | None = None) -> list[dict]:
    return [{"kind": "retain", "applicability": "global", "confidence": 0.9, "evidence": "$EVIDENCE", "reason": "r",
             "admission": "remember" if section is None else "correct", "lifetime": "stable",
             "operations": [{"op": "put_section", "target": target, "section": section, "title": title,
                             "body": body}]}]


def test_history_is_newest_first_across_documents_with_one_numbering(home, tmp_path):
    """Versions of different documents interleave by commit, not grouped by section or document."""
    paths, _cfg = configure(home)
    script = write_script(str(tmp_path), {"decisions": [
        _put("profile", "Location", "Lives in Lisbon.\n"), _put("preferences", "Editor", "Uses Vim.\n"),
        _put("profile", "Location", "Lives in Porto.\n", _ref("Location"))]})
    for i, text in enumerate(["I live in Lisbon.", "I use Vim.", "Actually, I live in Porto."], start=1):
        admit(paths, text, f"e{i}", batch=f"b{i}")
        drain = start_drain(home, drain_env(script, str(tmp_path / "calls")))
        assert drain.wait(timeout=60) == 0, drain.stderr.read()
    found = json.loads(run_cm(["history", "--json", "--home", home]).stdout)
    assert [(v["target"], v["section"], v["kind"]) for v in found] == [
        ("profile", "Location", "replace"), ("preferences", "Editor", "put"), ("profile", "Location", "put")]
    numbers = [int(v["id"][1:]) for v in found]
    assert numbers == sorted(numbers, reverse=True)
    out = run_cm(["history", "--home", home]).stdout.decode()
    heads = [line for line in out.splitlines() if re.match(r"^v\d+  ", line)]
    assert [int(h.split()[0][1:]) for h in heads] == numbers
    assert all(len(re.findall(r"\bv\d+\b", h)) == 1 for h in heads), "one numbering per row"


def test_trash_holds_what_forget_removed(home, tmp_path):
    run_commits(home, tmp_path)
    found = json.loads(run_cm(["trash", "--json", "--home", home]).stdout)
    assert [(t["target"], t["section"], t["decision"]) for t in found] == [("preferences", "Indentation", "forget")]
    assert found[0]["id"].startswith("t_") and found[0]["expiresAt"] > found[0]["removedAt"]
    out = run_cm(["trash", "--home", home]).stdout.decode()
    assert f"{found[0]['id']}  preferences / Indentation  removed" in out and "by a forget decision" in out


def test_bad_history_arguments_get_codes(home, tmp_path):
    run_commits(home, tmp_path)
    for args, code in ((["history", "notes"], "INVALID_TARGET_REFERENCE"),
                       (["history", "preferences", "Nope"], "UNKNOWN_SECTION"),
                       (["history", "preferences", "sec_0000"], "UNKNOWN_SECTION")):
        proc = run_cm([*args, "--home", home])
        assert proc.returncode == 1 and proc.stderr.decode().startswith(f"cm: {code}: "), (args, proc.stderr)
        assert "Traceback" not in proc.stderr.decode()
