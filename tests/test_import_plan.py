"""`cm import` shows its cost first: the plan of parts, --dry-run, confirmation, --yes, and refusals
of files too large to import; parts are cut between Markdown blocks and lose nothing."""

from __future__ import annotations

import json
import os

import pytest
from conftest import run_cm
from mcp_support import configure, rows

from cmrunner.agentrt import budget
from cmrunner.core.errors import CmError
from cmrunner.manage import importer, importplan


def _prose(chapters: int, paragraphs: int = 9, words: int = 60) -> str:
    out = ["# Handbook\n"]
    for c in range(chapters):
        out.append(f"\n## Chapter {c + 1}\n")
        for p in range(paragraphs):
            out.append("\n" + " ".join(f"word{(c * 7 + p * 3 + i) % 97}" for i in range(words)) + ".\n")
    return "".join(out)


def _file(tmp_path, text: str, name: str = "notes.md") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _queued(paths) -> list[tuple]:
    if not os.path.isfile(paths.db):
        return []
    return rows(paths, "SELECT entry_id, state FROM observations ORDER BY id")


def test_dry_run_shows_the_plan_and_queues_nothing(home, tmp_path):
    paths = configure(home)
    for text in ("# Notes\n\nI write Rust.\n", _prose(60)):
        proc = run_cm(["import", _file(tmp_path, text), "--dry-run"])
        out = proc.stdout.decode()
        assert proc.returncode == 0, proc.stderr
        assert out.startswith("plan: ") and "tokens to process" in out and "dry run: nothing was queued" in out
    assert _queued(paths) == []


def test_a_costly_import_needs_confirmation_without_a_terminal(home, tmp_path):
    paths = configure(home)
    big = _file(tmp_path, _prose(60))  # about 230 KB: several parts, well above the threshold
    proc = run_cm(["import", big, "--no-wait"])
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.startswith("cm: CONFIRMATION_REQUIRED: ") and "--yes" in err
    assert _queued(paths) == []
    proc = run_cm(["import", big, "--no-wait", "--yes"])
    assert proc.returncode == 0, proc.stderr
    plan = proc.stdout.decode().splitlines()[0]
    count = int(plan.split("plan: ", 1)[1].split(" part", 1)[0])
    assert count > 1 and [r[0] for r in _queued(paths)] == [f"part-{i}" for i in range(1, count + 1)]
    small = run_cm(["import", _file(tmp_path, "# Notes\n\nI write Rust.\n", "small.md"), "--no-wait"])
    assert small.returncode == 0, small.stderr  # below the threshold nothing is asked


def test_parts_fit_a_job_are_cut_between_blocks_and_lose_nothing(home, tmp_path):
    configure(home)
    text = _prose(80)
    planned = importer.plan(home, _file(tmp_path, text), None, "unknown", None).plan
    envelopes = [json.loads(e) for e in planned.envelopes]
    limit = budget.job_limit(262_144, [])
    assert len(envelopes) > 2 and all(budget.wire_bytes(e) <= limit for e in planned.envelopes)
    assert "\n".join(e["text"] for e in envelopes) == text
    assert [e["part"] for e in envelopes] == [{"index": i, "count": len(envelopes)} for i in range(1, len(envelopes) + 1)]
    later = envelopes[1]
    assert later["text"].startswith("## Chapter"), "a part starts at a heading where it can"
    assert later["headingPath"] == ["Handbook"]
    first_block = later["blocks"][0]
    assert first_block["kind"] == "heading" and first_block["lines"] == [1, 1]
    assert planned.tokens > planned.count * importplan.REQUESTS_PER_PART * importplan.FIXED_TOKENS_PER_REQUEST


def test_a_block_larger_than_a_part_is_cut_between_its_lines(home, tmp_path):
    configure(home)
    items = "".join(f"- item {n} " + "detail " * 40 + "\n" for n in range(400))  # one list of ~120 KB
    text = "# List\n\n" + items
    planned = importer.plan(home, _file(tmp_path, text), None, "unknown", None).plan
    assert planned.count > 1 and "\n".join(json.loads(e)["text"] for e in planned.envelopes) == text


@pytest.mark.parametrize(("text", "code"), [
    ("# One line\n\n" + "x" * 200_000 + "\n", "SOURCE_TOO_LARGE"),
])
def test_a_line_too_large_for_any_part_is_refused_and_nothing_is_queued(home, tmp_path, text, code):
    paths = configure(home)
    proc = run_cm(["import", _file(tmp_path, text), "--no-wait", "--yes"])
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.startswith(f"cm: {code}: line 3 ") and "break it into paragraphs" in err
    assert _queued(paths) == []


def test_a_file_above_the_import_limit_is_refused_before_it_is_read(home, tmp_path):
    paths = configure(home)
    path = tmp_path / "huge.md"
    with open(path, "wb") as handle:
        handle.truncate(importplan.MAX_IMPORT_BYTES + 1)  # sparse: nothing to read, only its size
    proc = run_cm(["import", str(path), "--no-wait", "--yes"])
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: IMPORT_TOO_LARGE: "), proc.stderr
    assert _queued(paths) == []


def test_split_keeps_a_text_that_fits_as_one_part():
    text = "# A\n\nshort\n"
    pieces = importplan.split(text, importer.blocks_of(text), 65_536, 1_000)
    assert [(p.text, p.heading_path) for p in pieces] == [(text, [])]
    with pytest.raises(CmError) as caught:
        importplan.split("x" * 5000, importer.blocks_of("x" * 5000), 3000, 1000, "IMPORT_CHUNK_TOO_LARGE")
    assert caught.value.code == "IMPORT_CHUNK_TOO_LARGE"
