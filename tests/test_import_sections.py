"""A changed file imports only what changed: per-section identity per source and scope.

Through the real CLI, the real Writer loop and the loopback fake model: the model's recorded
requests and the disclosure ledger show what was sent. The files are written here."""

from __future__ import annotations

import json
import os
import re
import sqlite3

import pytest
from agent_support import configure_remote, policy
from conftest import hook_env, run_cm, wait_no_drain
from mcp_support import configure, rows
from writer_support import read

from cmrunner.core.errors import CmError
from cmrunner.manage import importdelta, importer
from cmrunner.synthetic import fakemodel

POLICIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support", "import_policy.py")


def handbook(areas: int = 13) -> str:
    """A realistic team handbook: a title, then areas of three topics each (1 + 13 * 3 = 40 sections
    by default); every section holds a unique marker ``marker-NN-``."""
    out, n = ["# Team handbook\n\nHow this team works; read it before your first change. marker-00-\n"], 1
    for area in range(1, areas + 1):
        out.append(f"\n## Area {area}\n\nWhat area {area} covers and who reviews it. marker-{n:02d}-\n")
        n += 1
        for topic in ("Build", "Review"):
            out.append(f"\n### {topic} in area {area}\n\n"
                       f"- run the checks before pushing marker-{n:02d}-\n- keep changes small and explained\n\n"
                       + "We prefer plain files over services and record why decisions changed. " * 4 + "\n")
            n += 1
    return "".join(out)


def _write(path: str, text: str) -> str:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def _sent(requests: list[dict]) -> str:
    return "\n".join(json.dumps(r["body"]) for r in requests)


def _ledger_bytes(paths) -> int:
    return int(rows(paths, "SELECT COALESCE(SUM(request_bytes), 0) FROM ledger")[0][0])


def _import(args: list[str], home: str, user: str | None = None) -> str:
    env = hook_env(COMMON_MEMORY_HOME=home, **({"HOME": user, "CODEX_HOME": ""} if user else {}))
    proc = run_cm(["import", *args], env=env, timeout=300)
    out = proc.stdout.decode()
    assert proc.returncode == 0, (out, proc.stderr.decode())
    return out


def _section_text(text: str, heading: str) -> str:
    """One section as it is sent: from its heading to the next heading, its last line end kept."""
    start = text.index(heading)
    following = [text.find("\n#", start + 1)]
    end = following[0] + 1 if following[0] != -1 else len(text)
    return text[start:end].rstrip("\n") + "\n"


def test_an_edited_section_is_all_the_model_receives_and_an_unchanged_file_nothing(home, tmp_path):
    text = handbook()
    path = _write(str(tmp_path / "handbook.md"), text)
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        paths, _ = configure_remote(home, fm.base_url)
        first = _import([path, "--yes"], home)
        assert "changes since" not in first and first.endswith("complete: true\n")
        first_requests = fm.model_requests()
        first_bytes = _ledger_bytes(paths)
        assert "marker-00-" in _sent(first_requests) and "marker-39-" in _sent(first_requests)

        edited = text.replace("run the checks before pushing marker-17-", "run the full suite first marker-17-")
        assert edited != text
        _write(path, edited)
        section = _section_text(edited, "### Build in area 6")
        assert "marker-17-" in section
        plan = _import([path, "--dry-run"], home)
        assert ("changes since this file's last import: 1 of 40 sections (1 edited, 0 added, 39 unchanged); "
                f"{len(section.encode()):,} bytes to send\n") in plan
        assert plan.startswith("plan: 1 part, ")

        second = _import([path, "--yes"], home)
        assert second.endswith("complete: true\n")
        requests = fm.model_requests()[len(first_requests):]
        sent = _sent(requests)
        assert requests and "run the full suite first marker-17-" in sent
        others = [f"marker-{n:02d}-" for n in range(40) if n != 17]
        assert [m for m in others if m in sent] == []
        # the edited section keeps its place: its heading path, and what changed
        envelope = json.loads(rows(paths, "SELECT text FROM observations ORDER BY id DESC LIMIT 1")[0][0])
        assert envelope["update"] == {"note": importer.UPDATE_NOTE, "previousImports": 1, "sectionsInFile": 40,
                                      "edited": 1, "added": 0, "resent": 0, "unchanged": 39, "removedNotForgotten": 0}
        assert envelope["headingPath"] == ["Team handbook", "Area 6"] and envelope["text"] == section
        assert envelope["blocks"][0]["change"] == "edited"
        second_bytes = _ledger_bytes(paths) - first_bytes
        assert 0 < second_bytes * 2 < first_bytes  # the fixed instructions stay; the file's text does not

        queued = rows(paths, "SELECT COUNT(*) FROM observations")[0][0]
        again = _import([path, "--yes"], home)
        assert "1 of 40" not in again and "0 of 40 sections" in again
        assert "unchanged since its last import: nothing queued" in again and again.endswith("complete: true\n")
        assert len(fm.model_requests()) == len(first_requests) + len(requests)
        assert rows(paths, "SELECT COUNT(*) FROM observations")[0][0] == queued


def test_a_removed_section_is_reported_and_nothing_is_forgotten(home, tmp_path):
    text = ("# About me\n\n## Diet\n\nFACT-diet: eats fish\n\n## Editor\n\nFACT-editor: uses vim daily\n\n"
            "## Shell\n\nFACT-shell: uses zsh\n")
    path = _write(str(tmp_path / "me.md"), text)
    with fakemodel.running(str(tmp_path / "fm"), policy(f"{POLICIES}:remember_facts")) as fm:
        paths, _ = configure_remote(home, fm.base_url)
        _import([path, "--yes"], home)
        before = read(paths, "profile")
        assert before is not None and "uses vim daily" in before and "eats fish" in before
        seen = len(fm.model_requests())

        changed = text.replace("## Editor\n\nFACT-editor: uses vim daily\n\n", "").replace(
            "FACT-shell: uses zsh\n", "FACT-shell: uses zsh\nFACT-terminal: uses kitty\n")
        _write(path, changed)
        out = _import([path, "--yes"], home)
        assert ("1 of 3 sections (1 edited, 0 added, 2 unchanged); "
                f"{len(_section_text(changed, '## Shell').encode()):,} bytes to send; "
                "1 removed from the file: nothing is forgotten") in out
        after = read(paths, "profile")
        assert after is not None and "uses kitty" in after
        assert "Fact editor" in after and "uses vim daily" in after and "eats fish" in after
        sent = _sent(fm.model_requests()[seen:])
        assert "FACT-terminal" in sent and "FACT-diet" not in sent and "FACT-editor" not in sent


def test_a_file_imported_before_sections_existed(home, tmp_path):
    """A store an older cm imported into has the whole-file parts and no ``import_sections`` rows
    (m014 creates the table empty): the state is made here by emptying the table after an import."""
    old = handbook(3)  # 10 sections
    kept = _write(str(tmp_path / "kept.md"), old)
    moved_on = _write(str(tmp_path / "moved_on.md"), old.replace("Team handbook", "Ops handbook"))
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        paths, _ = configure_remote(home, fm.base_url)
        _import([kept, "--yes"], home)
        _import([moved_on, "--yes"], home)
        conn = sqlite3.connect(paths.db)
        with conn:
            conn.execute("DELETE FROM import_sections")
        conn.close()
        seen = len(fm.model_requests())

        # unchanged: a duplicate of the whole-file import, nothing sent; its sections are adopted
        out = _import([kept, "--yes"], home)
        assert "duplicate of an earlier import" in out and len(fm.model_requests()) == seen
        assert rows(paths, "SELECT COUNT(*), MAX(generation) FROM import_sections") == [(10, 1)]
        _write(kept, old.replace("marker-05-", "marker-05- and one more rule"))
        out = _import([kept, "--yes"], home)
        assert "1 of 10 sections" in out
        sent = _sent(fm.model_requests()[seen:])
        assert "marker-05- and one more rule" in sent and "marker-04-" not in sent
        seen = len(fm.model_requests())

        # changed before any per-section import: the documented rule is one whole import, then per section
        _write(moved_on, old.replace("Team handbook", "Ops handbook").replace("marker-02-", "marker-02- edited"))
        out = _import([moved_on, "--yes"], home)
        assert "changes since" not in out and "queued" in out
        sent = _sent(fm.model_requests()[seen:])
        assert "marker-02- edited" in sent and "marker-09-" in sent
        seen = len(fm.model_requests())
        _write(moved_on, old.replace("Team handbook", "Ops handbook").replace("marker-02-", "marker-02- edited twice"))
        out = _import([moved_on, "--yes"], home)
        assert "1 of 10 sections" in out
        sent = _sent(fm.model_requests()[seen:])
        assert "marker-02- edited twice" in sent and "marker-09-" not in sent


def test_from_a_source_plans_and_sends_only_the_changed_section(home, tmp_path):
    user = str(tmp_path / "user")
    memory = os.path.join(user, ".codex", "memories", "MEMORY.md")
    os.makedirs(os.path.dirname(memory))
    text = ("# Memory\n\n## Languages\n\n- writes Rust marker-a-\n\n## Tools\n\n- uses tmux marker-b-\n\n"
            "## Habits\n\n- small pull requests marker-c-\n")
    _write(memory, text)
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        configure_remote(home, fm.base_url)
        first = _import(["--from", "codex", "--yes"], home, user)
        assert f"codex:MEMORY [personal] -> global: new, 1 part, {len(text.encode()):,} of " in first
        seen = len(fm.model_requests())
        changed = text.replace("- uses tmux marker-b-\n", "- uses tmux and zellij marker-b-\n")
        _write(memory, changed)
        section = _section_text(changed, "## Tools")
        plan = _import(["--from", "codex", "--dry-run"], home, user)
        assert (f"codex:MEMORY [personal] -> global: 1 of 4 sections changed, 1 part, "
                f"{len(section.encode()):,} of {len(changed.encode()):,} bytes to send") in plan
        _import(["--from", "codex", "--yes"], home, user)
        sent = _sent(fm.model_requests()[seen:])
        assert "zellij marker-b-" in sent and "marker-a-" not in sent and "marker-c-" not in sent
        again = _import(["--from", "codex", "--dry-run"], home, user)
        assert "codex:MEMORY [personal] -> global: unchanged, nothing to send (" in again


def test_sections_of_a_cancelled_part_are_sent_again_once_the_file_changes(home, tmp_path):
    paths = configure(home)  # no model: the import stays queued until cancelled
    text = "# Notes\n\n## A\n\nalpha marker-a-\n\n## B\n\nbeta marker-b-\n"
    path = _write(str(tmp_path / "notes.md"), text)
    queued = _import([path, "--no-wait"], home)
    # the line that names the import (a plan run inside a git folder also says "to import into it")
    [import_id] = re.findall(r"^import (md-[0-9a-f]+) into ", queued, re.M)
    wait_no_drain(home)
    assert run_cm(["cancel", import_id], env=hook_env(COMMON_MEMORY_HOME=home)).returncode == 0
    again = _import([path, "--no-wait"], home)  # the same text: its outcome is final, nothing is sent
    assert "nothing new queued; its last import had not committed" in again and "part 1/1: cancelled" in again
    assert "last import: not kept: its part was cancelled or quarantined" in again and "unchanged since" not in again
    _write(path, text.replace("beta", "beta, now gamma"))
    plan = _import([path, "--dry-run"], home)
    assert ("1 of 3 sections (1 edited, 0 added, 2 resent (their earlier part never reached memory), "
            "0 unchanged)") in plan
    _import([path, "--no-wait"], home)
    last = json.loads(rows(paths, "SELECT text FROM observations ORDER BY id DESC LIMIT 1")[0][0])
    assert "marker-a-" in last["text"] and "now gamma marker-b-" in last["text"]
    assert [b.get("change") for b in last["blocks"] if "change" in b] == ["resent", "resent", "edited"]


def test_a_plan_made_before_another_import_of_the_source_is_refused(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        paths, _ = configure_remote(home, fm.base_url)
        path = _write(str(tmp_path / "notes.md"), "# Notes\n\n## A\n\none\n\n## B\n\ntwo\n")
        stale = importer.plan(home, path, None, "unknown", None)
        _import([path, "--yes"], home)
        queued = rows(paths, "SELECT COUNT(*) FROM observations")
        with pytest.raises(CmError) as caught:
            importer.run(home, stale, False, lambda _outcome: None)
        assert caught.value.code == "IMPORT_PLAN_STALE"
        assert rows(paths, "SELECT COUNT(*) FROM observations") == queued


def _delta(before: str, after: str) -> importdelta.Delta:
    old = importdelta.sections(before, importer.blocks_of(before))
    new = importdelta.sections(after, importer.blocks_of(after))
    return importdelta.classify(new, [(s.digest, s.place, True) for s in old])


def test_section_rules_moves_reverts_renames_and_the_preamble():
    text = "Intro line.\n\n# A\n\nalpha\n\n## A1\n\nsub\n\n# B\n\nbeta\n"
    found = importdelta.sections(text, importer.blocks_of(text))
    assert [s.heading for s in found] == [[], ["A"], ["A", "A1"], ["B"]]
    lines = text.split("\n")
    assert [line for s in found for line in lines[s.start:s.end]] == lines  # the sections cover the text
    # a moved section (same text under another parent) is unchanged; nothing else changed
    moved = "Intro line.\n\n# B\n\nbeta\n\n## A1\n\nsub\n\n# A\n\nalpha\n"
    assert _delta(text, moved).changes == {} and _delta(text, moved).removed == []
    # a renamed heading is a new section, and the old place is removed (not forgotten)
    renamed = _delta(text, text.replace("# B\n", "# Beta\n"))
    assert list(renamed.changes.values()) == ["added"] and renamed.removed == [["B"]]
    # a section reverted to text imported before still differs from the last import: edited
    v1 = importdelta.sections(text, importer.blocks_of(text))
    v2_text = text.replace("beta", "gamma")
    v2 = importdelta.sections(v2_text, importer.blocks_of(v2_text))
    known = [(s.digest, s.place, False) for s in v1] + [(s.digest, s.place, True) for s in v2]
    assert importdelta.classify(v1, known).changes == {3: "edited"}
